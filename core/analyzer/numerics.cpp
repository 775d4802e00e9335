// SPDX-License-Identifier: MIT
#include "core/analyzer/numerics.h"

#include <algorithm>
#include <cmath>
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

  for (const fp::Format& f : kPlainFormats) {
    const Limits l = limitsOf(f);
    const double scale = t.amax / l.largest;  // tensor scaling maps amax to the largest value
    uint64_t under = 0, over = 0, scaledUnder = 0;
    for (uint64_t i = 0; i < n; ++i) {
      const double a = std::fabs(double(v[i]));
      if (!(a > 0) || !std::isfinite(a)) continue;
      under += a <= l.halfSubnormal;
      over += a > l.largest;
      scaledUnder += a <= l.halfSubnormal * scale;
    }
    const std::string name(f.name);
    t.plain.push_back({name, double(under) / nonzero, double(over) / nonzero});
    t.tensorScaled.push_back({name, double(scaledUnder) / nonzero, 0.0});
  }

  for (const fp::BlockFormat& f : fp::blockFormats()) {
    const Limits l = limitsOf(f.element);
    const uint64_t block = uint64_t(f.blockSize);
    // in fp32, as core/fp/block.h quantises (NVFP4's scales are fp32 products)
    const float tensorScale = float(t.amax) / (float(l.largest) * fp::decode(fp::kE4M3, fp::maxFinite(fp::kE4M3)));
    const float halfSubnormal = float(l.halfSubnormal), largest = float(l.largest);
    uint64_t under = 0, over = 0;
    std::map<int, uint64_t> scales;
    BlockStatistics stats;
    stats.format = std::string(f.name);
    stats.rangeCounts.assign(42, 0);
    for (uint64_t start = 0; start < n; start += row)
      for (uint64_t b = start; b < std::min(n, start + row); b += block) {
        const uint64_t end = std::min({n, start + row, b + block});
        double amax = 0, amin = HUGE_VAL;
        bool finite = true;
        for (uint64_t i = b; i < end; ++i) {
          if (!std::isfinite(v[i])) finite = false;
          const double a = std::fabs(double(v[i]));
          if (a > 0 && std::isfinite(a)) amax = std::max(amax, a), amin = std::min(amin, a);
        }
        if (!finite || amax == 0) continue;  // a NaN scale, or nothing to scale
        float step;
        if (f.scale == fp::ScaleKind::E8M0) {
          step = std::ldexp(1.0f, std::clamp(floorLog2(amax) - fp::largestExponent(f.element), -127, 127));
        } else {
          step = fp::roundTo(fp::kE4M3, float(amax) / (largest * tensorScale), fp::Overflow::Saturate) * tensorScale;
        }
        if (step > 0) ++scales[floorLog2(double(step))];
        ++stats.rangeCounts[std::size_t(std::min(41, floorLog2(amax / amin)))];
        for (uint64_t i = b; i < end; ++i) {
          if (!(v[i] != 0)) continue;
          const float r = std::fabs(v[i]) / step;
          under += step == 0 || r <= halfSubnormal;
          over += step > 0 && r > largest;
        }
      }
    if (!scales.empty()) {
      stats.scaleLog2Min = scales.begin()->first;
      stats.scaleLog2Counts.assign(std::size_t(scales.rbegin()->first - stats.scaleLog2Min + 1), 0);
      for (const auto& [e, c] : scales) stats.scaleLog2Counts[std::size_t(e - stats.scaleLog2Min)] = c;
    }
    t.blockScaled.push_back({stats.format, double(under) / nonzero, double(over) / nonzero});
    t.blocks.push_back(std::move(stats));
  }
  return t;
}

}  // namespace peat::analyzer
