// SPDX-License-Identifier: MIT
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/analyzer/numerics_simd.cpp"
#include "core/fp/simd_target.h"  // IWYU pragma: keep

#include <cmath>
#include <cstring>

#include "core/analyzer/numerics_simd.h"

PEAT_SIMD_BEGIN(peat::analyzer::detail)

void CountAtMostImpl(const float* HWY_RESTRICT values, uint64_t n, const uint32_t* limits, std::size_t thresholds,
                     uint64_t* counts) {
  const hn::ScalableTag<float> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  const uint64_t lanes = hn::Lanes(du);
  const auto absMask = hn::Set(du, 0x7fffffffu), one = hn::Set(du, 1u);
  for (std::size_t j = 0; j < thresholds; ++j) {
    // |x| - 1 < limit: nonzero (0 - 1 wraps to the largest) and at most the limit (so finite)
    const auto limit = hn::Set(du, limits[j]);
    uint64_t c = 0, i = 0;
    for (; i + lanes <= n; i += lanes) {
      const auto m = hn::And(hn::BitCast(du, hn::LoadU(d, values + i)), absMask);
      c += hn::CountTrue(du, hn::Lt(hn::Sub(m, one), limit));
    }
    for (; i < n; ++i) {
      uint32_t m;
      std::memcpy(&m, values + i, 4);
      m &= 0x7fffffffu;
      c += (m - 1u) < limits[j] ? 1 : 0;
    }
    counts[j] = c;
  }
}

void BlockUnderOverImpl(const float* HWY_RESTRICT values, const uint64_t* begins, const uint64_t* ends,
                        const float* steps, std::size_t blocks, bool powerOfTwo, float half, float largest,
                        uint64_t* under, uint64_t* over) {
  const hn::ScalableTag<float> d;
  const uint64_t lanes = hn::Lanes(d);
  const auto vHalf = hn::Set(d, half), vLargest = hn::Set(d, largest), zero = hn::Zero(d);
  uint64_t u = 0, o = 0;
  for (std::size_t b = 0; b < blocks; ++b) {
    const float step = steps[b];
    if (!(step > 0)) continue;
    const float inverse = 1.0f / step;
    const auto vStep = hn::Set(d, step), vInverse = hn::Set(d, inverse);
    uint64_t i = begins[b];
    for (; i + lanes <= ends[b]; i += lanes) {
      const auto x = hn::LoadU(d, values + i);
      const auto a = hn::Abs(x);
      const auto r = powerOfTwo ? hn::Mul(a, vInverse) : hn::Div(a, vStep);
      u += hn::CountTrue(d, hn::And(hn::Le(r, vHalf), hn::Ne(x, zero)));
      o += hn::CountTrue(d, hn::Gt(r, vLargest));
    }
    for (; i < ends[b]; ++i) {
      if (!(values[i] != 0)) continue;
      const float r = powerOfTwo ? std::fabs(values[i]) * inverse : std::fabs(values[i]) / step;
      u += r <= half ? 1 : 0;
      o += r > largest ? 1 : 0;
    }
  }
  *under += u;
  *over += o;
}

PEAT_SIMD_END  // namespace HWY_NAMESPACE, namespace peat::analyzer::detail

#if HWY_ONCE
namespace peat::analyzer::detail {

HWY_EXPORT(CountAtMostImpl);
HWY_EXPORT(BlockUnderOverImpl);

void countMagnitudesAtMost(const float* values, uint64_t n, const uint32_t* limits, std::size_t thresholds,
                           uint64_t* counts) {
  HWY_DYNAMIC_DISPATCH(CountAtMostImpl)(values, n, limits, thresholds, counts);
}

void blockUnderOver(const float* values, const uint64_t* begins, const uint64_t* ends, const float* steps,
                    std::size_t blocks, bool powerOfTwo, float half, float largest, uint64_t* under, uint64_t* over) {
  HWY_DYNAMIC_DISPATCH(BlockUnderOverImpl)(values, begins, ends, steps, blocks, powerOfTwo, half, largest, under, over);
}

}  // namespace peat::analyzer::detail
#endif
