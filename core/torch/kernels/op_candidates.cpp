// SPDX-License-Identifier: MIT
// Candidates for the op-wise kernels that ports rewrite (issue 31): softmax with a fast exp or in one
// pass, layer norm with one-pass or fp16 statistics, GELU by tanh, Adam with bf16 moments or epsilon
// inside the square root, an embedding backward with unordered (atomic) accumulation; and the bugs
// such ports have: softmax without max subtraction, epsilon outside the square root, Bessel's
// correction where the reference has none, RMSNorm in place of layer norm, a dropout mask reused
// across steps, a gradient not unscaled. Each computes in fp32 as its port would; the variants a
// candidate does not change run golden (a forward-only port keeps ATen's backward).
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>
#include <random>

#include "core/fp/format.h"
#include "core/torch/kernels/op_candidates.h"

namespace peat::kernels {

using ops::OpKind;
using ops::Variant;

namespace {

// The tensor with `dim` moved last, contiguous, as [rows, n]; `restore` puts a result back.
struct Rows {
  Rows(const at::Tensor& x, int64_t dim) : dim_(dim < 0 ? dim + x.dim() : dim), last_(x.dim() - 1) {
    moved = (dim_ == last_ ? x : x.transpose(dim_, last_)).contiguous();
    shape = moved.sizes().vec();
    n = shape.empty() ? 1 : shape.back();
    rows = n == 0 ? 0 : moved.numel() / n;
  }
  at::Tensor restore(const at::Tensor& flat) const {
    const at::Tensor back = flat.reshape(shape);
    return (dim_ == last_ ? back : back.transpose(dim_, last_)).contiguous();
  }
  at::Tensor moved;
  std::vector<int64_t> shape;
  int64_t n = 0, rows = 0;

 private:
  int64_t dim_, last_;
};

// A kernel for some op kinds; calls of other variants than the ones it changes run golden.
class OpCandidate : public Kernel {
 public:
  OpCandidate(std::string name, std::vector<OpKind> kinds) : name_(std::move(name)), kinds_(std::move(kinds)) {}
  std::string name() const override { return name_; }
  bool supports(OpKind kind) const override { return std::find(kinds_.begin(), kinds_.end(), kind) != kinds_.end(); }

 private:
  std::string name_;
  std::vector<OpKind> kinds_;
};

// ------------------------------------------------------------------------------------ softmax

// 2^t by range reduction: 2^floor(t) times a polynomial of the fraction (Horner, fp32), the way
// fast-math exp kernels compute it. Degree 3 has a relative error near 1e-4, degree 5 near 2e-7.
float exp2Poly(float t, int degree) {
  if (t < -126.f) return 0.f;
  if (t > 128.f) return INFINITY;
  const float fl = std::floor(t);
  const float f = t - fl;
  // least-squares fits of 2^f on [0, 1) in relative error (max 1.4e-4 and 1.7e-7)
  static const float c3[] = {0.999863694f, 0.696172114f, 0.225868407f, 0.0778231349f};
  static const float c5[] = {0.999999834f, 0.693154738f, 0.240146495f, 0.0558359654f, 0.00898725919f, 0.00187537657f};
  const float* c = degree >= 5 ? c5 : c3;
  const int d = degree >= 5 ? 5 : 3;
  float p = c[d];
  for (int i = d - 1; i >= 0; --i) p = p * f + c[i];
  return std::ldexp(p, int(fl));
}

class SoftmaxCandidate final : public OpCandidate {
 public:
  enum class Kind { Exp2, Poly, Online, NoMax };
  SoftmaxCandidate(std::string name, Kind kind, int degree)
      : OpCandidate(std::move(name), {OpKind::Softmax}), kind_(kind), degree_(degree) {}
  at::Tensor run(const ops::OpCall& call, const CallContext&) override {
    if (call.variant != Variant::Forward) return runGolden(call);
    const Rows r(call.inputs[0].to(at::kFloat), call.paramOr("dim", -1));
    at::Tensor out = at::empty({r.rows, r.n});
    const float* x = r.moved.data_ptr<float>();
    float* y = out.data_ptr<float>();
    constexpr float log2e = 1.4426950408889634f;
    for (int64_t i = 0; i < r.rows; ++i) {
      const float* xi = x + i * r.n;
      float* yi = y + i * r.n;
      float m = kind_ == Kind::NoMax ? 0.f : -INFINITY, s = 0.f;
      if (kind_ == Kind::Online) {  // one pass: the sum rescaled whenever the running max grows
        for (int64_t j = 0; j < r.n; ++j) {
          const float m2 = std::max(m, xi[j]);
          s = s * std::exp(m - m2) + std::exp(xi[j] - m2);
          m = m2;
        }
        for (int64_t j = 0; j < r.n; ++j) yi[j] = std::exp(xi[j] - m) / s;
        continue;
      }
      if (kind_ != Kind::NoMax)
        for (int64_t j = 0; j < r.n; ++j) m = std::max(m, xi[j]);
      for (int64_t j = 0; j < r.n; ++j) {
        const float t = xi[j] - m;
        yi[j] = kind_ == Kind::Exp2 ? std::exp2(t * log2e) : kind_ == Kind::Poly ? exp2Poly(t * log2e, degree_) : std::exp(t);
        s += yi[j];
      }
      const float inv = 1.f / s;  // a reciprocal and products, as fast kernels do
      for (int64_t j = 0; j < r.n; ++j) yi[j] *= inv;
    }
    return r.restore(out);
  }

 private:
  Kind kind_;
  int degree_;
};

// --------------------------------------------------------------------------------- layer norm

class LayerNormCandidate final : public OpCandidate {
 public:
  enum class Kind { OnePass, Fp16Stats, EpsOutside, Bessel, RmsNorm };
  LayerNormCandidate(std::string name, Kind kind) : OpCandidate(std::move(name), {OpKind::LayerNorm}), kind_(kind) {}
  at::Tensor run(const ops::OpCall& call, const CallContext&) override {
    if (call.variant != Variant::Forward) return runGolden(call);
    const at::Tensor x = call.inputs[0].contiguous();
    const int64_t nd = call.paramOr("normalized", 1);
    const std::vector<int64_t> shape(x.sizes().end() - nd, x.sizes().end());
    const int64_t n = c10::multiply_integers(shape);
    const double eps = call.realOr("eps", 1e-5);
    const bool weight = call.paramOr("weight", 1) != 0, bias = call.paramOr("bias", 1) != 0;
    const at::Tensor rows = x.reshape({-1, n});
    at::Tensor out = at::empty_like(rows);
    const float* px = rows.data_ptr<float>();
    float* py = out.data_ptr<float>();
    for (int64_t i = 0; i < rows.size(0); ++i) {
      const float* xi = px + i * n;
      float* yi = py + i * n;
      float mean = 0, var = 0;
      if (kind_ == Kind::OnePass) {  // E[x^2] - E[x]^2 in one sweep: cancels when |mean| >> std
        float s = 0, s2 = 0;
        for (int64_t j = 0; j < n; ++j) {
          s += xi[j];
          s2 += xi[j] * xi[j];
        }
        mean = s / float(n);
        var = std::max(0.f, s2 / float(n) - mean * mean);
      } else {
        for (int64_t j = 0; j < n; ++j) mean += xi[j];
        mean /= float(n);
        for (int64_t j = 0; j < n; ++j) var += (xi[j] - mean) * (xi[j] - mean);
        var /= kind_ == Kind::Bessel ? float(n - 1) : float(n);
        if (kind_ == Kind::Fp16Stats) {  // statistics kept in fp16
          mean = fp::roundTo(fp::kFp16, mean);
          var = fp::roundTo(fp::kFp16, var);
        }
        if (kind_ == Kind::RmsNorm) {  // no mean: the root mean square
          float s2 = 0;
          for (int64_t j = 0; j < n; ++j) s2 += xi[j] * xi[j];
          mean = 0;
          var = s2 / float(n);
        }
      }
      const float rstd = kind_ == Kind::EpsOutside ? 1.f / (std::sqrt(var) + float(eps)) : 1.f / std::sqrt(var + float(eps));
      for (int64_t j = 0; j < n; ++j) yi[j] = (xi[j] - mean) * rstd;
    }
    at::Tensor y = out.reshape(x.sizes());
    if (weight) y = y * call.inputs[1];
    if (bias) y = y + call.inputs[weight ? 2 : 1];
    return y;
  }

 private:
  Kind kind_;
};

// ------------------------------------------------------------------------------------- GELU

// GELU by its tanh form, for calls of the exact (erf) GELU: forward and backward.
class GeluTanh final : public OpCandidate {
 public:
  explicit GeluTanh(std::string name) : OpCandidate(std::move(name), {OpKind::Gelu}) {}
  at::Tensor run(const ops::OpCall& call, const CallContext&) override {
    ops::OpCall tanhForm = call;
    tanhForm.params["approximate"] = 1;
    return runGolden(tanhForm);
  }
};

// A softmax kernel in a 16-bit format: its input rounded to it, the sums in fp32, its output stored
// in it (bf16 or fp16 activations); forward only.
class SoftmaxLowPrecision final : public OpCandidate {
 public:
  SoftmaxLowPrecision(std::string name, const fp::Format& format)
      : OpCandidate(std::move(name), {OpKind::Softmax, OpKind::LogSoftmax}), format_(format) {}
  at::Tensor run(const ops::OpCall& call, const CallContext&) override {
    if (call.variant != Variant::Forward) return runGolden(call);
    ops::OpCall rounded = call;
    at::Tensor x = call.inputs[0].to(at::kFloat).contiguous().clone();
    fp::roundInPlace(format_, x.data_ptr<float>(), std::size_t(x.numel()), fp::Overflow::Standard);
    rounded.inputs[0] = x;
    at::Tensor y = runGolden(rounded).contiguous();
    fp::roundInPlace(format_, y.data_ptr<float>(), std::size_t(y.numel()), fp::Overflow::Standard);
    return y;
  }

 private:
  fp::Format format_;
};

// ------------------------------------------------------------------------------ attention

// The causal limit of an attention call as a [tq, tk] boolean "masked" matrix, moved by `shift`
// keys; empty when the call is not causal (neither its flag nor a mask that is exactly causal).
at::Tensor causalMasked(const ops::OpCall& call, int64_t tq, int64_t tk, int64_t shift, bool& fromMask) {
  fromMask = false;
  const std::size_t base = call.variant == Variant::GradInput ? 1 : 0;
  bool causal = call.paramOr("causal", 0) != 0;
  if (!causal && call.paramOr("mask", 0) && call.inputs.size() > base + 3) {
    causal = isCausalMask(call.inputs[base + 3], tq, tk);
    fromMask = causal;
  }
  if (!causal) return at::Tensor();
  return at::ones({tq, tk}, at::kBool).triu(1 + tk - tq + shift);
}

// A planted bug: the causal limit one key late (query i also sees key i+1), forward and backward,
// as golden with the moved limit. Calls that are not causal run golden.
class AttentionCausalOffByOne final : public OpCandidate {
 public:
  explicit AttentionCausalOffByOne(std::string name) : OpCandidate(std::move(name), {OpKind::Attention}) {}
  at::Tensor run(const ops::OpCall& call, const CallContext&) override {
    const std::size_t base = call.variant == Variant::GradInput ? 1 : 0;
    const int64_t tq = call.inputs[base].size(-2), tk = call.inputs[base + 1].size(-2);
    bool fromMask = false;
    const at::Tensor masked = causalMasked(call, tq, tk, 1, fromMask);
    if (!masked.defined()) return runGolden(call);
    ops::OpCall moved = call;
    moved.params.erase("causal");
    moved.params["mask"] = 1;
    const at::Tensor mask = at::zeros({tq, tk}).masked_fill(masked, -INFINITY);
    if (fromMask) moved.inputs[base + 3] = mask;
    else moved.inputs.insert(moved.inputs.begin() + std::ptrdiff_t(base + 3), mask);
    return runGolden(moved);
  }
};

// Attention as FlashAttention computes it: per query, the keys in blocks of 16 with a running
// maximum and sum, the unnormalised probabilities rounded to bf16 before they multiply V (bf16 P),
// the sum kept in fp32, one division at the end. Forward only (a forward-only port keeps ATen's backward).
class AttentionFlash final : public OpCandidate {
 public:
  explicit AttentionFlash(std::string name) : OpCandidate(std::move(name), {OpKind::Attention}) {}
  at::Tensor run(const ops::OpCall& call, const CallContext&) override {
    if (call.variant != Variant::Forward) return runGolden(call);
    const at::Tensor &q0 = call.inputs[0], &k0 = call.inputs[1], &v0 = call.inputs[2];
    const int64_t tq = q0.size(-2), tk = k0.size(-2), d = q0.size(-1), dv = v0.size(-1);
    std::vector<int64_t> batch = at::infer_size(q0.sizes().slice(0, std::size_t(q0.dim() - 2)),
                                                k0.sizes().slice(0, std::size_t(k0.dim() - 2)));
    batch = at::infer_size(batch, v0.sizes().slice(0, std::size_t(v0.dim() - 2)));
    int64_t b = 1;
    for (int64_t x : batch) b *= x;
    auto flat = [&](const at::Tensor& t) {
      std::vector<int64_t> shape = batch;
      shape.insert(shape.end(), {t.size(-2), t.size(-1)});
      return t.to(at::kFloat).expand(shape).contiguous().reshape({b, t.size(-2), t.size(-1)});
    };
    const at::Tensor q = flat(q0), k = flat(k0), v = flat(v0);
    at::Tensor mask;
    if (call.paramOr("mask", 0)) {
      std::vector<int64_t> shape = batch;
      shape.insert(shape.end(), {tq, tk});
      mask = call.inputs[3].to(at::kFloat).expand(shape).contiguous().reshape({b, tq, tk});
    }
    at::Tensor keep;  // the dropout's multipliers, applied to P after its normalisation (FlashAttention's dropout)
    if (call.paramOr("dropout", 0)) {
      std::vector<int64_t> shape = batch;
      shape.insert(shape.end(), {tq, tk});
      keep = call.inputs[3 + (mask.defined() ? 1 : 0)].to(at::kFloat).expand(shape).contiguous().reshape({b, tq, tk});
    }
    const bool causal = call.paramOr("causal", 0) != 0;
    const float scale = float(call.realOr("scale", 1.0));
    at::Tensor out = at::empty({b, tq, dv});
    const float *pq = q.data_ptr<float>(), *pk = k.data_ptr<float>(), *pv = v.data_ptr<float>();
    const float* pm = mask.defined() ? mask.data_ptr<float>() : nullptr;
    const float* pkeep = keep.defined() ? keep.data_ptr<float>() : nullptr;
    float* po = out.data_ptr<float>();
    std::vector<float> acc(std::size_t(dv), 0.f), s(16);
    constexpr int64_t kBlock = 16;
    for (int64_t bb = 0; bb < b; ++bb)
      for (int64_t i = 0; i < tq; ++i) {
        const float* qi = pq + (bb * tq + i) * d;
        float m = -INFINITY, l = 0.f;
        std::fill(acc.begin(), acc.end(), 0.f);
        const int64_t last = causal ? std::min(tk - 1, i + tk - tq) : tk - 1;
        for (int64_t j0 = 0; j0 <= last; j0 += kBlock) {
          const int64_t j1 = std::min(last + 1, j0 + kBlock);
          float blockMax = -INFINITY;
          for (int64_t j = j0; j < j1; ++j) {
            const float* kj = pk + (bb * tk + j) * d;
            float dot = 0.f;
            for (int64_t e = 0; e < d; ++e) dot += qi[e] * kj[e];
            s[std::size_t(j - j0)] = dot * scale + (pm ? pm[(bb * tq + i) * tk + j] : 0.f);
            blockMax = std::max(blockMax, s[std::size_t(j - j0)]);
          }
          const float m2 = std::max(m, blockMax);
          if (m2 == -INFINITY) continue;  // every key so far masked out
          const float correction = m == -INFINITY ? 0.f : std::exp(m - m2);
          l *= correction;
          for (float& a : acc) a *= correction;
          for (int64_t j = j0; j < j1; ++j) {
            const float p = std::exp(s[std::size_t(j - j0)] - m2);
            l += p;
            const float pb = fp::roundTo(fp::kBf16, p) * (pkeep ? pkeep[(bb * tq + i) * tk + j] : 1.f);
            const float* vj = pv + (bb * tk + j) * dv;
            for (int64_t e = 0; e < dv; ++e) acc[std::size_t(e)] += pb * vj[e];
          }
          m = m2;
        }
        float* oi = po + (bb * tq + i) * dv;
        for (int64_t e = 0; e < dv; ++e) oi[e] = l > 0 ? acc[std::size_t(e)] / l : NAN;
      }
    std::vector<int64_t> shape = batch;
    shape.insert(shape.end(), {tq, dv});
    return out.reshape(shape);
  }
};

// ----------------------------------------------------------------------------------- Adam

class AdamCandidate final : public OpCandidate {
 public:
  enum class Kind { Bf16Moments, EpsInside };
  AdamCandidate(std::string name, Kind kind) : OpCandidate(std::move(name), {OpKind::Adam}), kind_(kind) {}
  at::Tensor run(const ops::OpCall& call, const CallContext&) override {
    const auto& in = call.inputs;
    const double lr = call.real("lr"), b1 = call.real("beta1"), b2 = call.real("beta2"), eps = call.real("eps");
    const double step = double(call.param("step"));
    const double c1 = 1.0 - std::pow(b1, step), c2 = 1.0 - std::pow(b2, step);
    at::Tensor m = in[2].mul(b1).add_(in[1], 1.0 - b1);
    at::Tensor v = in[3].mul(b2).addcmul_(in[1], in[1], 1.0 - b2);
    if (kind_ == Kind::Bf16Moments) {  // the moments are stored in bf16 between steps
      m = m.contiguous();
      v = v.contiguous();
      fp::roundInPlace(fp::kBf16, m.data_ptr<float>(), std::size_t(m.numel()), fp::Overflow::Standard);
      fp::roundInPlace(fp::kBf16, v.data_ptr<float>(), std::size_t(v.numel()), fp::Overflow::Standard);
    }
    const at::Tensor denominator = kind_ == Kind::EpsInside ? (v / c2).add(eps).sqrt_() : (v / c2).sqrt_().add_(eps);
    return at::stack({in[0].addcdiv(m / c1, denominator, -lr), m, v});
  }

 private:
  Kind kind_;
};

// ------------------------------------------------------------------------------- embedding

// The embedding's backward as GPU kernels do it with atomics: each row's gradient is added into
// the table in an order that changes from run to run (fp32 sums, seeded from std::random_device on
// purpose: two replays differ). The forward (a gather) is exact.
class EmbeddingAtomic final : public OpCandidate {
 public:
  explicit EmbeddingAtomic(std::string name)
      : OpCandidate(std::move(name), {OpKind::Embedding}), rng_(std::random_device{}()) {}
  at::Tensor run(const ops::OpCall& call, const CallContext&) override {
    if (call.variant != Variant::GradWeight) return runGolden(call);
    const at::Tensor dy = call.inputs[0].contiguous();
    const at::Tensor ids = call.inputs[1].contiguous().to(at::kLong);
    const int64_t rows = call.param("num_weights"), d = dy.size(-1), count = ids.numel();
    const int64_t padding = call.paramOr("padding_idx", -1);
    at::Tensor table = at::zeros({rows, d});
    std::vector<int64_t> order(static_cast<std::size_t>(count));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng_);
    const float* g = dy.data_ptr<float>();
    const int64_t* id = ids.data_ptr<int64_t>();
    float* t = table.data_ptr<float>();
    for (int64_t k : order) {
      const int64_t row = id[k];
      if (row == padding || row < 0 || row >= rows) continue;
      for (int64_t j = 0; j < d; ++j) t[row * d + j] += g[k * d + j];
    }
    return table;
  }

 private:
  std::mt19937_64 rng_;
};

// -------------------------------------------------------------------------------- planted bugs

// Dropout that keeps the first mask it was given for a shape and applies it on every later call of
// that shape: the same units dropped at every step.
class DropoutReuse final : public OpCandidate {
 public:
  explicit DropoutReuse(std::string name) : OpCandidate(std::move(name), {OpKind::Dropout}) {}
  at::Tensor run(const ops::OpCall& call, const CallContext&) override {
    const at::Tensor& mask = call.inputs[1];
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = masks_.find(mask.sizes().vec());
    if (it == masks_.end()) it = masks_.emplace(mask.sizes().vec(), mask.clone()).first;
    return call.inputs[0] * it->second;
  }

 private:
  std::mutex mutex_;
  std::map<std::vector<int64_t>, at::Tensor> masks_;
};

// A backward kernel of a mixed-precision port that forgets to unscale: its gradient carries the
// loss scale. Forward calls run golden.
class GradientNotUnscaled final : public Kernel {
 public:
  GradientNotUnscaled(std::string name, double scale) : name_(std::move(name)), scale_(scale) {}
  std::string name() const override { return name_; }
  bool supports(OpKind kind) const override { return kind != OpKind::Sgd && kind != OpKind::Adam; }
  at::Tensor run(const ops::OpCall& call, const CallContext&) override {
    at::Tensor out = runGolden(call);
    return call.variant == Variant::Forward ? out : out * scale_;
  }

 private:
  std::string name_;
  double scale_;
};

}  // namespace

std::unique_ptr<Kernel> makeOpCandidate(const std::string& name, const std::string& text,
                                        const std::map<std::string, double>& numbers) {
  auto number = [&](const std::string& key, double fallback) {
    auto it = numbers.find(key);
    return it == numbers.end() ? fallback : it->second;
  };
  using S = SoftmaxCandidate::Kind;
  using L = LayerNormCandidate::Kind;
  if (name == "softmax-exp2") return std::make_unique<SoftmaxCandidate>(text, S::Exp2, 0);
  if (name == "softmax-poly") return std::make_unique<SoftmaxCandidate>(text, S::Poly, int(number("degree", 3)));
  if (name == "softmax-online") return std::make_unique<SoftmaxCandidate>(text, S::Online, 0);
  if (name == "softmax-nomax") return std::make_unique<SoftmaxCandidate>(text, S::NoMax, 0);
  if (name == "softmax-bf16") return std::make_unique<SoftmaxLowPrecision>(text, fp::kBf16);
  if (name == "softmax-fp16") return std::make_unique<SoftmaxLowPrecision>(text, fp::kFp16);
  if (name == "attention-flash") return std::make_unique<AttentionFlash>(text);
  if (name == "attention-causal-off") return std::make_unique<AttentionCausalOffByOne>(text);
  if (name == "layernorm-onepass") return std::make_unique<LayerNormCandidate>(text, L::OnePass);
  if (name == "layernorm-fp16stats") return std::make_unique<LayerNormCandidate>(text, L::Fp16Stats);
  if (name == "layernorm-eps-outside") return std::make_unique<LayerNormCandidate>(text, L::EpsOutside);
  if (name == "layernorm-bessel") return std::make_unique<LayerNormCandidate>(text, L::Bessel);
  if (name == "rmsnorm") return std::make_unique<LayerNormCandidate>(text, L::RmsNorm);
  if (name == "gelu-tanh") return std::make_unique<GeluTanh>(text);
  if (name == "adam-bf16") return std::make_unique<AdamCandidate>(text, AdamCandidate::Kind::Bf16Moments);
  if (name == "adam-eps-inside") return std::make_unique<AdamCandidate>(text, AdamCandidate::Kind::EpsInside);
  if (name == "embedding-atomic") return std::make_unique<EmbeddingAtomic>(text);
  if (name == "dropout-reuse") return std::make_unique<DropoutReuse>(text);
  if (name == "grad-unscaled") return std::make_unique<GradientNotUnscaled>(text, number("scale", 1024));
  return nullptr;
}

}  // namespace peat::kernels
