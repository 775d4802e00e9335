// SPDX-License-Identifier: MIT
// Built-in candidate kernels: reduced precision, other summation orders and planted bugs.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/fp/format.h"
#include "core/torch/kernels/candidates.h"

namespace peat::kernels {

namespace {

at::Tensor roundedCopy(const at::Tensor& t, const fp::Format& f, fp::Overflow overflow) {
  if (!t.defined() || t.scalar_type() != at::kFloat) return t;  // indices and the like stay exact
  at::Tensor out = t.contiguous().clone();
  fp::roundInPlace(f, out.data_ptr<float>(), std::size_t(out.numel()), overflow);
  return out;
}

ops::OpCall roundedInputs(const ops::OpCall& call, const fp::Format& f, fp::Overflow overflow) {
  ops::OpCall r = call;
  // A GEMM kernel reads its two operands in the narrow format; a bias is added in fp32.
  const std::size_t rounded = ops::isGemmOp(call.kind) ? 2 : call.inputs.size();
  for (std::size_t i = 0; i < rounded && i < r.inputs.size(); ++i) r.inputs[i] = roundedCopy(r.inputs[i], f, overflow);
  return r;
}

// --- GEMM engines: c[M,N] = a[M,K] b[K,N], fp32, contiguous -----------------------------------

// Sequential accumulation over k in a chosen order, one rounding step per addition.
template <typename Round>
at::Tensor sequentialGemm(const at::Tensor& a, const at::Tensor& b, bool reversed, Round round) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  at::Tensor c = at::zeros({m, n});
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* pc = c.data_ptr<float>();
  for (int64_t i = 0; i < m; ++i) {
    float* row = pc + i * n;
    for (int64_t step = 0; step < k; ++step) {
      const int64_t kk = reversed ? k - 1 - step : step;
      const float av = pa[i * k + kk];
      const float* brow = pb + kk * n;
      for (int64_t j = 0; j < n; ++j) row[j] = round(row[j] + round(av * brow[j]));
    }
  }
  return c;
}

at::Tensor splitKGemm(const at::Tensor& a, const at::Tensor& b, int64_t parts) {
  const int64_t k = a.size(1);
  parts = std::max<int64_t>(1, std::min(parts, k));
  at::Tensor c;
  for (int64_t p = 0; p < parts; ++p) {
    const int64_t lo = k * p / parts, hi = k * (p + 1) / parts;
    at::Tensor partial = at::mm(a.slice(1, lo, hi), b.slice(0, lo, hi));
    c = c.defined() ? c + partial : partial;
  }
  return c;
}

at::Tensor pairwiseGemm(const at::Tensor& a, const at::Tensor& b, int64_t leaf) {
  const int64_t k = a.size(1);
  if (k <= leaf) return at::mm(a, b);
  const int64_t half = k / 2;
  return pairwiseGemm(a.slice(1, 0, half), b.slice(0, 0, half), leaf) +
         pairwiseGemm(a.slice(1, half, k), b.slice(0, half, k), leaf);
}

class PrecisionKernel final : public Kernel {
 public:
  PrecisionKernel(std::string name, fp::Format format, fp::Overflow overflow)
      : name_(std::move(name)), format_(format), overflow_(overflow) {}
  std::string name() const override { return name_; }
  // Every op of the model; an optimiser's update is not (reduced-precision optimisers are
  // candidates of their own: adam-bf16, ...).
  bool supports(ops::OpKind kind) const override { return kind != ops::OpKind::Sgd && kind != ops::OpKind::Adam; }
  at::Tensor run(const ops::OpCall& call, const CallContext&) override {
    at::Tensor out = runGolden(roundedInputs(call, format_, overflow_));
    // Element-wise ops compute and store in the narrow format; GEMMs accumulate and store in fp32.
    return ops::isGemmOp(call.kind) ? out : roundedCopy(out, format_, overflow_);
  }

 private:
  std::string name_;
  fp::Format format_;
  fp::Overflow overflow_;
};

class GemmCandidate final : public Kernel {
 public:
  GemmCandidate(std::string name, GemmEngine engine) : name_(std::move(name)), engine_(std::move(engine)) {}
  std::string name() const override { return name_; }
  bool supports(ops::OpKind kind) const override { return ops::isGemmOp(kind); }
  at::Tensor run(const ops::OpCall& call, const CallContext&) override { return runThroughGemm(call, engine_); }

 private:
  std::string name_;
  GemmEngine engine_;
};

}  // namespace

std::unique_ptr<Kernel> makePrecisionKernel(const std::string& name, const fp::Format& format, fp::Overflow overflow) {
  return std::make_unique<PrecisionKernel>(name, format, overflow);
}

std::unique_ptr<Kernel> makeGemmCandidate(const std::string& name, GemmEngine engine) {
  return std::make_unique<GemmCandidate>(name, std::move(engine));
}

GemmEngine fp16AccumulationEngine() {
  return [](const at::Tensor& a, const at::Tensor& b) {
    const at::Tensor ah = roundedCopy(a, fp::kFp16, fp::Overflow::Standard);
    const at::Tensor bh = roundedCopy(b, fp::kFp16, fp::Overflow::Standard);
    return sequentialGemm(ah, bh, false, [](float v) { return fp::roundTo(fp::kFp16, v); });
  };
}

GemmEngine reversedEngine() {
  return [](const at::Tensor& a, const at::Tensor& b) { return sequentialGemm(a, b, true, [](float v) { return v; }); };
}

GemmEngine splitKEngine(int64_t parts) {
  return [parts](const at::Tensor& a, const at::Tensor& b) { return splitKGemm(a, b, parts); };
}

GemmEngine pairwiseEngine(int64_t leaf) {
  return [leaf](const at::Tensor& a, const at::Tensor& b) { return pairwiseGemm(a, b, std::max<int64_t>(1, leaf)); };
}

GemmEngine tileEdgeBugEngine(int64_t tile) {
  // The last column of every output tile reads its neighbour's column of b: a deterministic off-by-one.
  return [tile](const at::Tensor& a, const at::Tensor& b) {
    at::Tensor wrong = b.clone();
    for (int64_t j = tile - 1; j < b.size(1); j += tile) wrong.select(1, j).copy_(b.select(1, j - 1 >= 0 ? j - 1 : 0));
    return at::mm(a, wrong);
  };
}

GemmEngine missingLastKTileEngine(int64_t tile) {
  return [tile](const at::Tensor& a, const at::Tensor& b) {
    const int64_t k = a.size(1);
    const int64_t rest = k % tile == 0 ? tile : k % tile;
    const int64_t kept = std::max<int64_t>(0, k - rest);
    if (kept == 0) return at::zeros({a.size(0), b.size(1)});
    return at::mm(a.slice(1, 0, kept), b.slice(0, 0, kept));
  };
}

namespace {
class ZeroedTail final : public Kernel {
 public:
  ZeroedTail(std::string name, double fraction) : name_(std::move(name)), fraction_(fraction) {}
  std::string name() const override { return name_; }
  bool supports(ops::OpKind kind) const override { return ops::isGemmOp(kind); }
  at::Tensor run(const ops::OpCall& call, const CallContext&) override {
    at::Tensor out = runGolden(call).contiguous().clone();
    const int64_t n = out.numel();
    const int64_t tail = std::min<int64_t>(n, int64_t(double(n) * fraction_ + 0.999999));
    out.view({-1}).slice(0, n - tail, n).zero_();
    return out;
  }

 private:
  std::string name_;
  double fraction_;
};
}  // namespace

std::unique_ptr<Kernel> makeZeroedTailKernel(const std::string& name, double fraction) {
  return std::make_unique<ZeroedTail>(name, fraction);
}

GemmEngine staleRaceEngine(double probability, int64_t tile) {
  // Emulates a missing barrier: some output tiles are read before the second half of the K loop has
  // been accumulated. Seeded from std::random_device on purpose, so replays of one input differ.
  auto rng = std::make_shared<std::mt19937_64>(std::random_device{}());
  return [probability, tile, rng](const at::Tensor& a, const at::Tensor& b) {
    at::Tensor c = at::mm(a, b);
    const int64_t half = a.size(1) / 2;
    at::Tensor stale = half > 0 ? at::mm(a.slice(1, 0, half), b.slice(0, 0, half)) : at::zeros_like(c);
    std::uniform_real_distribution<double> u(0, 1);
    bool any = false;
    for (int64_t i = 0; i < c.size(0); i += tile)
      for (int64_t j = 0; j < c.size(1); j += tile)
        if (u(*rng) < probability) {
          any = true;
          c.slice(0, i, i + tile).slice(1, j, j + tile).copy_(stale.slice(0, i, i + tile).slice(1, j, j + tile));
        }
    if (!any) {  // at least one stale tile per call, at a random place
      const int64_t ti = int64_t(u(*rng) * double((c.size(0) + tile - 1) / tile)) * tile;
      const int64_t tj = int64_t(u(*rng) * double((c.size(1) + tile - 1) / tile)) * tile;
      c.slice(0, ti, ti + tile).slice(1, tj, tj + tile).copy_(stale.slice(0, ti, ti + tile).slice(1, tj, tj + tile));
    }
    return c;
  };
}

namespace {
// Quantises each row of a contiguous [rows, cols] fp32 matrix in blocks along the row (NVFP4's
// tensor scale from the whole matrix).
void quantizeRows(at::Tensor& m, const fp::BlockFormat& f, int block, fp::BlockBug bug) {
  float* p = m.data_ptr<float>();
  const int64_t rows = m.size(0), cols = m.size(1);
  float amax = 0;
  for (int64_t i = 0; i < rows * cols; ++i)
    if (std::isfinite(p[i])) amax = std::max(amax, std::fabs(p[i]));
  for (int64_t r = 0; r < rows; ++r) fp::quantizeBlocks(f, p + r * cols, uint64_t(cols), block, bug, amax);
}
}  // namespace

GemmEngine blockScaledEngine(const fp::BlockFormat& format, int block, bool output, fp::BlockBug bug, bool wrongDimension) {
  return [format, block, output, bug, wrongDimension](const at::Tensor& a, const at::Tensor& b) {
    // a [M, K]: its rows run along K; b [K, N]: its transpose's rows do (wrongDimension swaps both)
    at::Tensor aq = wrongDimension ? a.t().contiguous() : a.contiguous().clone();
    at::Tensor bq = wrongDimension ? b.contiguous().clone() : b.t().contiguous();
    quantizeRows(aq, format, block, bug);
    quantizeRows(bq, format, block, bug);
    const at::Tensor a2 = wrongDimension ? aq.t() : aq, b2 = wrongDimension ? bq : bq.t();
    at::Tensor c = at::mm(a2.contiguous(), b2.contiguous());
    if (output) quantizeRows(c, format, block, fp::BlockBug::None);
    return c;
  };
}

}  // namespace peat::kernels
