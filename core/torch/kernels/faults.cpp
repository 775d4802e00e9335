// SPDX-License-Identifier: MIT
#include "core/torch/kernels/faults.h"

#include <ATen/ATen.h>

#include <cmath>
#include <random>

#include "core/fp/format.h"

namespace peat::kernels {
namespace {

constexpr std::size_t kMaxLoggedPerCall = 4096;

class FaultKernel final : public Kernel {
 public:
  FaultKernel(std::string name, FaultSpec spec, uint64_t seed)
      : name_(std::move(name)), spec_(spec), seed_(seed), rng_(seed) {}
  std::string name() const override { return name_; }
  bool supports(ops::OpKind kind) const override {
    if (spec_.target != "weight") return kind != ops::OpKind::Embedding || spec_.target == "output";
    return ops::isGemmOp(kind) || kind == ops::OpKind::LayerNorm || kind == ops::OpKind::BatchNorm ||
           kind == ops::OpKind::Embedding;
  }

  at::Tensor run(const ops::OpCall& call, const CallContext& ctx) override {
    // The faults of a call depend on the seed and the call alone, not on which calls ran before:
    // a replay of some calls (an op, a shard of a campaign) injects what the full replay does there.
    rng_.seed(mix(seed_ ^ mix(uint64_t(ctx.iteration) * 0x9E3779B97F4A7C15ull + uint64_t(ctx.callIndex))));
    if (spec_.target == "output") {
      at::Tensor out = runGolden(call).contiguous().clone();
      inject(out, ctx, "output");
      return out;
    }
    const std::size_t which = spec_.target == "input" ? 0 : 1;
    if (which >= call.inputs.size() || call.inputs[which].scalar_type() != at::kFloat)
      throw KernelError(name_ + ": op " + ops::opName(call.kind) + " has no float " + spec_.target + " to corrupt");
    ops::OpCall faulty = call;
    faulty.inputs[which] = call.inputs[which].contiguous().clone();  // a transient fault of this read only
    inject(faulty.inputs[which], ctx, spec_.target);
    return runGolden(faulty);
  }

  std::vector<Injection> takeInjections() override {
    std::vector<Injection> out;
    out.swap(log_);
    return out;
  }

 private:
  static uint64_t mix(uint64_t x) {  // splitmix64's finaliser
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }
  uint64_t randomIndex(uint64_t n) { return rng_() % n; }
  int randomBit(int width = 32) { return int(rng_() % uint64_t(width)); }

  void change(float* p, uint64_t i, float value, int bit, const CallContext& ctx, const std::string& target) {
    if (log_.size() < logLimit_) log_.push_back({ctx.callId, target, i, bit, p[i], value});
    p[i] = value;
  }

  void inject(at::Tensor& t, const CallContext& ctx, const std::string& target) {
    const uint64_t n = uint64_t(t.numel());
    if (n == 0) return;
    float* p = t.data_ptr<float>();
    logLimit_ = log_.size() + kMaxLoggedPerCall;
    switch (spec_.model) {
      case FaultModel::BitFlip:
        for (int64_t c = 0; c < spec_.count; ++c) {
          const uint64_t i = randomIndex(n);
          const int bit = spec_.bit >= 0 ? spec_.bit : randomBit();
          change(p, i, fp::floatOf(fp::bitsOf(p[i]) ^ (1u << bit)), bit, ctx, target);
        }
        break;
      case FaultModel::MultiBitFlip:
        for (int64_t c = 0; c < spec_.count; ++c) {
          const uint64_t i = randomIndex(n);
          const int start = spec_.bit >= 0 ? spec_.bit : randomBit(33 - spec_.bits);
          const uint32_t mask = uint32_t((uint64_t(1) << spec_.bits) - 1) << start;
          change(p, i, fp::floatOf(fp::bitsOf(p[i]) ^ mask), start, ctx, target);
        }
        break;
      case FaultModel::StuckAt0:
      case FaultModel::StuckAt1: {
        const int bit = spec_.bit >= 0 ? spec_.bit : randomBit();
        const uint64_t length = std::max<uint64_t>(1, uint64_t(std::ceil(spec_.region * double(n))));
        const uint64_t start = randomIndex(n - std::min(length, n) + 1);
        for (uint64_t i = start; i < std::min(n, start + length); ++i) {
          const uint32_t old = fp::bitsOf(p[i]);
          const uint32_t forced = spec_.model == FaultModel::StuckAt1 ? (old | (1u << bit)) : (old & ~(1u << bit));
          if (forced != old) change(p, i, fp::floatOf(forced), bit, ctx, target);
        }
        break;
      }
      case FaultModel::RandomValue:
        for (int64_t c = 0; c < spec_.count; ++c) {
          uint32_t bits;
          do bits = uint32_t(rng_());
          while (!std::isfinite(fp::floatOf(bits)));
          change(p, randomIndex(n), fp::floatOf(bits), -1, ctx, target);
        }
        break;
      case FaultModel::Zero:
        for (int64_t c = 0; c < spec_.count; ++c) change(p, randomIndex(n), 0.0f, -1, ctx, target);
        break;
      case FaultModel::NaN:
        for (int64_t c = 0; c < spec_.count; ++c) change(p, randomIndex(n), std::nanf(""), -1, ctx, target);
        break;
      case FaultModel::Inf:
        for (int64_t c = 0; c < spec_.count; ++c) change(p, randomIndex(n), INFINITY, -1, ctx, target);
        break;
    }
  }

  std::string name_;
  FaultSpec spec_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::vector<Injection> log_;
  std::size_t logLimit_ = kMaxLoggedPerCall;
};

}  // namespace

std::unique_ptr<Kernel> makeFaultKernel(const std::string& name, const FaultSpec& spec, uint64_t seed) {
  return std::make_unique<FaultKernel>(name, spec, seed);
}

}  // namespace peat::kernels
