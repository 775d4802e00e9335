// SPDX-License-Identifier: MIT
#include "core/analyzer/numerics.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <cstring>
#include <limits>
#include <map>
#include <vector>

#include "core/analyzer/numerics_simd.h"
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

int floorLog2(double x) {  // x > 0 and finite
  uint64_t u;
  std::memcpy(&u, &x, 8);
  const int field = int((u >> 52) & 0x7ff);
  if (field != 0) return field - 1023;  // normal: the exponent field
  int e = 0;
  std::frexp(x, &e);
  return e - 1;
}

}  // namespace

ValueStats valueStats(const float* v, uint64_t n) {
  ValueStats s;
  s.count = n;
  double sum = 0, lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (uint64_t i = 0; i < n; ++i) {
    const double x = v[i];
    if (std::isnan(x)) {
      ++s.nan;
    } else if (std::isinf(x)) {
      ++s.inf;
    } else {
      ++s.finite;
      s.zeros += x == 0;
      sum += x;
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
  }
  if (s.finite == 0) return s;
  s.min = lo;
  s.max = hi;
  s.amax = std::max(std::fabs(lo), std::fabs(hi));
  s.mean = sum / double(s.finite);
  double squares = 0;  // about the mean: no cancellation
  for (uint64_t i = 0; i < n; ++i)
    if (std::isfinite(v[i])) squares += (double(v[i]) - s.mean) * (double(v[i]) - s.mean);
  s.stddev = std::sqrt(squares / double(s.finite));
  return s;
}

// One pass over the tensor for every format's statistics (plain, per-tensor and per-block scales):
// long (about 140 lines) because the formats share the pass's per-element work and its block maxima.
TensorNumerics tensorNumerics(const float* v, uint64_t n, uint64_t lastDim) {
  TensorNumerics t;
  t.count = n;
  const uint64_t row = lastDim == 0 || lastDim > n ? std::max<uint64_t>(n, 1) : lastDim;
  double minNonzero = HUGE_VAL;
  {
    uint64_t nonFinite = 0, nonzero = 0;
    uint32_t largest = 0, smallest = 0xffffffffu;  // bit patterns of finite nonzero magnitudes
    for (uint64_t i = 0; i < n; ++i) {
      const uint32_t m = fp::bitsOf(v[i]) & 0x7fffffffu;
      const bool finite = m < 0x7f800000u, counted = finite && m != 0;
      nonFinite += finite ? 0 : 1;
      nonzero += counted ? 1 : 0;
      largest = std::max(largest, counted ? m : 0u);
      smallest = std::min(smallest, counted ? m : 0xffffffffu);
    }
    t.nonFinite = nonFinite;
    t.nonzero = nonzero;
    if (nonzero > 0) t.amax = double(fp::floatOf(largest)), minNonzero = double(fp::floatOf(smallest));
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
  {
    // a float a <= T (or > T) exactly when a <= the largest float at most T, and for non-negative
    // floats that is a compare of bit patterns: the counts run vectorised (numerics_simd.h)
    auto floatAtMost = [](double x) -> uint32_t {
      if (!(x > 0)) return 0;
      float f = x >= double(std::numeric_limits<float>::max()) ? std::numeric_limits<float>::max() : float(x);
      if (double(f) > x) f = std::nextafter(f, 0.0f);
      return fp::bitsOf(f);
    };
    uint32_t limits[3 * kPlain];
    uint64_t counts[3 * kPlain];
    for (std::size_t k = 0; k < kPlain; ++k) {
      limits[3 * k] = floatAtMost(halfSub[k]);
      limits[3 * k + 1] = floatAtMost(largest[k]);
      limits[3 * k + 2] = floatAtMost(scaledHalfSub[k]);
    }
    detail::countMagnitudesAtMost(v, n, limits, 3 * kPlain, counts);
    for (std::size_t k = 0; k < kPlain; ++k) {
      under[k] = counts[3 * k];
      over[k] = t.nonzero - counts[3 * k + 1];
      scaledUnder[k] = counts[3 * k + 2];
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
        // in registers, on bit patterns: |x|'s order like |x|; NaN and Inf above every finite one
        const uint64_t end = std::min({n, start + row, b + block});
        uint32_t high = 0, low = 0xffffffffu;
        for (uint64_t i = b; i < end; ++i) {
          const uint32_t m = fp::bitsOf(v[i]) & 0x7fffffffu;
          high = std::max(high, m);
          low = std::min(low, m - 1u);  // zero wraps above everything
        }
        const bool finite = high < 0x7f800000u;
        const bool any = low < 0x7f7fffffu;  // a finite nonzero value
        it->second.push_back({b, end, finite && high > 0 ? double(fp::floatOf(high)) : 0.0,
                              any ? double(fp::floatOf(low + 1u)) : HUGE_VAL, finite});
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
    const int emax = fp::largestExponent(f.element);
    const fp::ElementRounder e4m3(fp::kE4M3);  // NVFP4's scale rounding: the codec's, saturating
    const std::vector<Block>& all = blocksOf(uint64_t(f.blockSize));
    std::vector<uint64_t> begins, ends;
    std::vector<float> steps;
    begins.reserve(all.size()), ends.reserve(all.size()), steps.reserve(all.size());
    int lastScale = 0;
    uint64_t sameScale = 0;  // consecutive blocks with one scale, counted before they reach the map
    for (const Block& k : all) {
      if (!k.finite || k.amax == 0) continue;  // a NaN scale, or nothing to scale
      float step;
      if (f.scale == fp::ScaleKind::E8M0) {
        step = std::ldexp(1.0f, std::clamp(floorLog2(k.amax) - emax, -127, 127));
      } else {
        step = e4m3(float(k.amax) / (largestElement * tensorScale)) * tensorScale;
      }
      if (step > 0) {
        const int e = floorLog2(double(step));
        if (sameScale > 0 && e != lastScale) scales[lastScale] += sameScale, sameScale = 0;
        lastScale = e;
        ++sameScale;
      }
      ++stats.rangeCounts[std::size_t(std::min(41, floorLog2(k.amax / k.amin)))];
      if (step == 0) {
        for (uint64_t i = k.begin; i < k.end; ++i) blockUnder += v[i] != 0;
        continue;
      }
      begins.push_back(k.begin), ends.push_back(k.end), steps.push_back(step);
    }
    if (sameScale > 0) scales[lastScale] += sameScale;
    // an MX scale is a power of two: multiplying by its exact reciprocal rounds as dividing does
    detail::blockUnderOver(v, begins.data(), ends.data(), steps.data(), steps.size(), f.scale == fp::ScaleKind::E8M0,
                           halfSubnormal, largestElement, &blockUnder, &blockOver);
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
