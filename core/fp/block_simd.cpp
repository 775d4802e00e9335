// SPDX-License-Identifier: MIT
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/fp/block_simd.cpp"
#include "core/fp/simd_target.h"  // IWYU pragma: keep

#include <algorithm>

#include "core/fp/block_simd.h"

PEAT_SIMD_BEGIN(peat::fp::detail)

void ScaleRoundImpl(float* HWY_RESTRICT all, uint64_t count, uint64_t block, const float* HWY_RESTRICT steps,
                    bool powerOfTwo, const RoundingParameters& p, RoundingCounts* counts) {
  const hn::ScalableTag<float> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  const uint64_t lanes = hn::Lanes(d);
  const uint32_t half = (uint32_t(1) << (p.shift - 1)) - 1, keep = ~((uint32_t(1) << p.shift) - 1);
  const auto vMin = hn::Set(d, p.minNormal), vMagic = hn::Set(d, p.magic), vElementMax = hn::Set(d, p.elementMax);
  const auto zero = hn::Zero(d);
  const auto vMaxBits = hn::Set(du, p.maxBits), signMask = hn::Set(du, 0x80000000u), absMask = hn::Set(du, 0x7fffffffu);
  const auto vHalf = hn::Set(du, half), one = hn::Set(du, 1u), vKeep = hn::Set(du, keep);
  uint64_t saturated = 0, flushed = 0;
  for (uint64_t first = 0, b = 0; first < count; first += block, ++b) {
    const float step = steps[b];
    if (!(step > 0)) continue;
    float* HWY_RESTRICT values = all + first;
    const uint64_t n = std::min(block, count - first);
    const float inverse = 1.0f / step;
    const auto vStep = hn::Set(d, step), vInverse = hn::Set(d, inverse);
    uint64_t i = 0;
    for (; i + lanes <= n; i += lanes) {
      const auto x = hn::LoadU(d, values + i);
      const auto v = powerOfTwo ? hn::Mul(x, vInverse) : hn::Div(x, vStep);
      const auto vBits = hn::BitCast(du, v);
      const auto sign = hn::And(vBits, signMask), aBits = hn::And(vBits, absMask);
      const auto a = hn::BitCast(d, aBits);
      saturated += hn::CountTrue(d, hn::Gt(a, vElementMax));
      const auto subnormal = hn::BitCast(du, hn::Sub(hn::Add(a, vMagic), vMagic));
      const auto normal =
          hn::And(hn::Add(hn::Add(aBits, vHalf), hn::And(hn::ShiftRightSame(aBits, int(p.shift)), one)), vKeep);
      const auto r = hn::Min(hn::IfThenElse(hn::RebindMask(du, hn::Lt(a, vMin)), subnormal, normal), vMaxBits);
      const auto out = hn::Mul(hn::BitCast(d, hn::Or(r, sign)), vStep);
      flushed += hn::CountTrue(d, hn::And(hn::Eq(out, zero), hn::Ne(x, zero)));
      hn::StoreU(out, d, values + i);
    }
    for (; i < n; ++i) {
      const float x = values[i];
      const float v = powerOfTwo ? x * inverse : x / step;
      saturated += (v > p.elementMax || v < -p.elementMax) ? 1 : 0;
      const float out = roundElement(v, p) * step;
      flushed += (out == 0 && x != 0) ? 1 : 0;
      values[i] = out;
    }
  }
  counts->saturated += saturated;
  counts->flushed += flushed;
}

void MaxMagnitudeImpl(const float* HWY_RESTRICT values, uint64_t count, uint64_t block, uint32_t* HWY_RESTRICT out) {
  const hn::ScalableTag<float> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  const uint64_t lanes = hn::Lanes(du);
  const auto absMask = hn::Set(du, 0x7fffffffu);
  for (uint64_t first = 0, b = 0; first < count; first += block, ++b) {
    const uint64_t n = std::min(block, count - first);
    auto largest = hn::Zero(du);
    uint64_t i = 0;
    for (; i + lanes <= n; i += lanes)
      largest = hn::Max(largest, hn::And(hn::BitCast(du, hn::LoadU(d, values + first + i)), absMask));
    uint32_t m = hn::GetLane(hn::MaxOfLanes(du, largest));
    for (; i < n; ++i) m = std::max(m, bitsOf(values[first + i]) & 0x7fffffffu);
    out[b] = m;
  }
}

PEAT_SIMD_END  // namespace HWY_NAMESPACE, namespace peat::fp::detail

#if HWY_ONCE
namespace peat::fp::detail {

HWY_EXPORT(ScaleRoundImpl);
HWY_EXPORT(MaxMagnitudeImpl);

RoundingCounts scaleRoundBlocks(float* values, uint64_t count, uint64_t block, const float* steps, bool powerOfTwo,
                                const RoundingParameters& p) {
  RoundingCounts counts;
  HWY_DYNAMIC_DISPATCH(ScaleRoundImpl)(values, count, block, steps, powerOfTwo, p, &counts);
  return counts;
}

void blockMaxMagnitudeBits(const float* values, uint64_t count, uint64_t block, uint32_t* out) {
  HWY_DYNAMIC_DISPATCH(MaxMagnitudeImpl)(values, count, block, out);
}

}  // namespace peat::fp::detail
#endif
