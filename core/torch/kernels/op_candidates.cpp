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
