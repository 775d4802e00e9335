// SPDX-License-Identifier: MIT
#include "core/analyzer/numerics.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>

#include "core/fp/block.h"
#include "core/fp/format.h"

namespace peat::analyzer {

namespace {

const fp::Format kPlainFormats[] = {fp::kFp16, fp::kBf16, fp::kE4M3, fp::kE5M2, fp::kE3M2, fp::kE2M3, fp::kE2M1};

struct Limits {
  double halfSubnormal, largest;  // values at or below half the smallest subnormal round to zero
};

Limits limitsOf(const fp::Format& f) {
  return {0.5 * double(fp::decode(f, 1)), double(fp::decode(f, fp::maxFinite(f)))};
}

int floorLog2(double x) {
  int e = 0;
  std::frexp(x, &e);
  return e - 1;
}

}  // namespace

TensorNumerics tensorNumerics(const float* v, uint64_t n, uint64_t lastDim) {
  TensorNumerics t;
  t.count = n;
  const uint64_t row = lastDim == 0 || lastDim > n ? std::max<uint64_t>(n, 1) : lastDim;
  double minNonzero = HUGE_VAL;
  for (uint64_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) {
      ++t.nonFinite;
      continue;
    }
    const double a = std::fabs(double(v[i]));
    if (a == 0) continue;
    ++t.nonzero;
    t.amax = std::max(t.amax, a);
    minNonzero = std::min(minNonzero, a);
  }
  if (t.nonzero == 0) return t;
  t.minNonzero = minNonzero;
  t.rangeBinades = std::log2(t.amax / minNonzero);
  const double nonzero = double(t.nonzero);

  constexpr std::size_t kPlain = std::size(kPlainFormats);
  double halfSub[kPlain], largest[kPlain], scaledHalfSub[kPlain];
  uint64_t under[kPlain] = {}, over[kPlain] = {}, scaledUnder[kPlain] = {};
  for (std::size_t k = 0; k < kPlain; ++k) {
    const Limits l = limitsOf(kPlainFormats[k]);
    halfSub[k] = l.halfSubnormal;
    largest[k] = l.largest;
    scaledHalfSub[k] = l.halfSubnormal * (t.amax / l.largest);  // one scale per tensor maps amax to the largest value
  }
  for (uint64_t i = 0; i < n; ++i) {  // one pass for every format
    const double a = std::fabs(double(v[i]));
    if (!(a > 0) || !std::isfinite(a)) continue;
    for (std::size_t k = 0; k < kPlain; ++k) {
      under[k] += a <= halfSub[k];
      over[k] += a > largest[k];
      scaledUnder[k] += a <= scaledHalfSub[k];
    }
  }
  for (std::size_t k = 0; k < kPlain; ++k) {
    const std::string name(kPlainFormats[k].name);
    t.plain.push_back({name, double(under[k]) / nonzero, double(over[k]) / nonzero});
    t.tensorScaled.push_back({name, double(scaledUnder[k]) / nonzero, 0.0});
  }

  // each block's extent and magnitudes, once per block size (the MX formats share theirs)
  struct Block {
    uint64_t begin, end;
    double amax, amin;
    bool finite;
  };
  std::map<uint64_t, std::vector<Block>> blocksBySize;
  auto blocksOf = [&](uint64_t block) -> const std::vector<Block>& {
    auto [it, fresh] = blocksBySize.try_emplace(block);
    if (!fresh) return it->second;
    for (uint64_t start = 0; start < n; start += row)
      for (uint64_t b = start; b < std::min(n, start + row); b += block) {
        Block k{b, std::min({n, start + row, b + block}), 0.0, HUGE_VAL, true};
        for (uint64_t i = k.begin; i < k.end; ++i) {
          if (!std::isfinite(v[i])) k.finite = false;
          const double a = std::fabs(double(v[i]));
          if (a > 0 && std::isfinite(a)) k.amax = std::max(k.amax, a), k.amin = std::min(k.amin, a);
        }
        it->second.push_back(k);
      }
    return it->second;
  };
  for (const fp::BlockFormat& f : fp::blockFormats()) {
    const Limits l = limitsOf(f.element);
    // in fp32, as core/fp/block.h quantises (NVFP4's scales are fp32 products)
    const float tensorScale = float(t.amax) / (float(l.largest) * fp::decode(fp::kE4M3, fp::maxFinite(fp::kE4M3)));
    const float halfSubnormal = float(l.halfSubnormal), largestElement = float(l.largest);
    uint64_t blockUnder = 0, blockOver = 0;
    std::map<int, uint64_t> scales;
    BlockStatistics stats;
    stats.format = std::string(f.name);
    stats.rangeCounts.assign(42, 0);
    for (const Block& k : blocksOf(uint64_t(f.blockSize))) {
      if (!k.finite || k.amax == 0) continue;  // a NaN scale, or nothing to scale
      float step;
      if (f.scale == fp::ScaleKind::E8M0) {
        step = std::ldexp(1.0f, std::clamp(floorLog2(k.amax) - fp::largestExponent(f.element), -127, 127));
      } else {
        step = fp::roundTo(fp::kE4M3, float(k.amax) / (largestElement * tensorScale), fp::Overflow::Saturate) * tensorScale;
      }
      if (step > 0) ++scales[floorLog2(double(step))];
      ++stats.rangeCounts[std::size_t(std::min(41, floorLog2(k.amax / k.amin)))];
      if (step == 0) {
        for (uint64_t i = k.begin; i < k.end; ++i) blockUnder += v[i] != 0;
        continue;
      }
      // an MX scale is a power of two: multiplying by its exact reciprocal rounds as dividing does
      const bool power = f.scale == fp::ScaleKind::E8M0;
      const float inverse = 1.0f / step;
      for (uint64_t i = k.begin; i < k.end; ++i) {
        if (!(v[i] != 0)) continue;
        const float r = power ? std::fabs(v[i]) * inverse : std::fabs(v[i]) / step;
        blockUnder += r <= halfSubnormal;
        blockOver += r > largestElement;
      }
    }
    if (!scales.empty()) {
      stats.scaleLog2Min = scales.begin()->first;
      stats.scaleLog2Counts.assign(std::size_t(scales.rbegin()->first - stats.scaleLog2Min + 1), 0);
      for (const auto& [e, c] : scales) stats.scaleLog2Counts[std::size_t(e - stats.scaleLog2Min)] = c;
    }
    t.blockScaled.push_back({stats.format, double(blockUnder) / nonzero, double(blockOver) / nonzero});
    t.blocks.push_back(std::move(stats));
  }
  return t;
}

}  // namespace peat::analyzer
