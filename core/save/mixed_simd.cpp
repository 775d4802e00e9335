// SPDX-License-Identifier: MIT
// The integer core of SAVE's mixed-precision verification (core/save/mixed.h), compiled per SIMD
// target by Highway and chosen at run time. Integer arithmetic: every target gives the same sums.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/save/mixed_simd.cpp"
#include "core/fp/simd_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <limits>

#include "core/save/mixed.h"

PEAT_SIMD_BEGIN(peat::save::detail)

void MixedDotImpl(const uint64_t* HWY_RESTRICT wm, const int64_t* HWY_RESTRICT we, const uint64_t* HWY_RESTRICT ws,
                  int64_t taps, const uint64_t* HWY_RESTRICT xm, const int64_t* HWY_RESTRICT xe,
                  const uint64_t* HWY_RESTRICT xs, int64_t positions, int64_t* HWY_RESTRICT acc,
                  uint64_t* HWY_RESTRICT abs, int64_t* HWY_RESTRICT emax) {
  int64_t p = 0;
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<uint64_t> du;
  const hn::ScalableTag<int64_t> di;
  const hn::Repartition<uint32_t, decltype(du)> d32;
  const int64_t N = int64_t(hn::Lanes(du));
  const auto limit = hn::Set(di, 63);
  for (; p + N <= positions; p += N) {
    auto top = hn::Set(di, std::numeric_limits<int32_t>::min());
    for (int64_t t = 0; t < taps; ++t) top = hn::Max(top, hn::Add(hn::Set(di, we[t]), hn::LoadU(di, xe + t * positions + p)));
    auto a = hn::Zero(du), s = hn::Zero(du);
    for (int64_t t = 0; t < taps; ++t) {
      const auto e = hn::Add(hn::Set(di, we[t]), hn::LoadU(di, xe + t * positions + p));
      const auto shift = hn::BitCast(du, hn::Min(hn::Sub(top, e), limit));
      // mantissas < 2^16 in the low half of each lane: the even 32-bit lanes' product is exact
      const auto product = hn::MulEven(hn::BitCast(d32, hn::Set(du, wm[t])), hn::BitCast(d32, hn::LoadU(du, xm + t * positions + p)));
      const auto term = product >> shift;
      const auto m = hn::Xor(hn::Set(du, ws[t]), hn::LoadU(du, xs + t * positions + p));
      a = hn::Add(a, hn::Sub(hn::Xor(term, m), m));
      s = hn::Add(s, term);
    }
    hn::StoreU(hn::BitCast(di, a), di, acc + p);
    hn::StoreU(s, du, abs + p);
    hn::StoreU(top, di, emax + p);
  }
#endif
  for (; p < positions; ++p) {
    int64_t top = std::numeric_limits<int32_t>::min();
    for (int64_t t = 0; t < taps; ++t) top = std::max(top, we[t] + xe[t * positions + p]);
    int64_t a = 0;
    uint64_t s = 0;
    for (int64_t t = 0; t < taps; ++t)
      mixedStep(wm[t], we[t], ws[t], xm[t * positions + p], xe[t * positions + p], xs[t * positions + p], top, a, s);
    acc[p] = a;
    abs[p] = s;
    emax[p] = top;
  }
}

PEAT_SIMD_END  // namespace HWY_NAMESPACE, namespace peat::save::detail

#if HWY_ONCE
namespace peat::save::detail {

HWY_EXPORT(MixedDotImpl);

void mixedDot(const uint64_t* wm, const int64_t* we, const uint64_t* ws, int64_t taps, const uint64_t* xm,
              const int64_t* xe, const uint64_t* xs, int64_t positions, int64_t* acc, uint64_t* abs, int64_t* emax) {
  HWY_DYNAMIC_DISPATCH(MixedDotImpl)(wm, we, ws, taps, xm, xe, xs, positions, acc, abs, emax);
}

}  // namespace peat::save::detail
#endif
