// SPDX-License-Identifier: MIT
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/save/engine_simd.cpp"
#include "core/fp/simd_target.h"  // IWYU pragma: keep

#include "core/save/engine_simd.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include <hwy/aligned_allocator.h>

PEAT_SIMD_BEGIN(peat::save::detail)

// a + k x with one rounding: the CPU's fused multiply-add, or per lane std::fma on a target
// without one (the same bits, slowly: CPUs from before 2013).
template <class D, class V>
HWY_INLINE V Fma(D d, V k, V x, V a) {
#if HWY_NATIVE_FMA
  (void)d;
  return hn::MulAdd(k, x, a);
#else
  constexpr std::size_t kMax = hn::MaxLanes(D());
  HWY_ALIGN float kk[kMax], xx[kMax], aa[kMax];
  hn::Store(k, d, kk);
  hn::Store(x, d, xx);
  hn::Store(a, d, aa);
  for (std::size_t i = 0; i < hn::Lanes(d); ++i) aa[i] = std::fma(kk[i], xx[i], aa[i]);
  return hn::Load(d, aa);
#endif
}

// The register block: MR output channels by two vectors of positions (2 MR accumulators; AVX-512
// has the registers for 8 channels, the others for 4).
#if HWY_TARGET <= HWY_AVX3
constexpr int64_t kRows = 8;
#else
constexpr int64_t kRows = 4;
#endif
constexpr int64_t kTapBlock = 256;  // taps per packed panel: 2 vectors x 256 taps stay in L1

// Rows [o, o + MR) of the panel's outputs c (2N positions per row), over the panel's taps
// [t0, t0 + kc) packed in pk (2N positions per tap): each accumulator goes on from c, then adds its
// taps in order with one fused multiply-add each.
template <int64_t MR, class D>
HWY_INLINE void Block(D d, const float* HWY_RESTRICT w, int64_t taps, int64_t t0, int64_t kc,
                      const float* HWY_RESTRICT pk, float* HWY_RESTRICT c) {
  using V = hn::Vec<D>;
  const int64_t N = int64_t(hn::Lanes(d));
  V a[MR], b[MR];
#pragma GCC unroll 8
  for (int64_t i = 0; i < MR; ++i) {
    a[i] = hn::Load(d, c + i * 2 * N);
    b[i] = hn::Load(d, c + i * 2 * N + N);
  }
  const float* wt = w + t0;
  for (int64_t t = 0; t < kc; ++t) {
    const V x = hn::Load(d, pk + t * 2 * N), y = hn::Load(d, pk + t * 2 * N + N);
#pragma GCC unroll 8
    for (int64_t i = 0; i < MR; ++i) {
      const V k = hn::Set(d, wt[i * taps + t]);
      a[i] = Fma(d, k, x, a[i]);
      b[i] = Fma(d, k, y, b[i]);
    }
  }
#pragma GCC unroll 8
  for (int64_t i = 0; i < MR; ++i) {
    hn::Store(a[i], d, c + i * 2 * N);
    hn::Store(b[i], d, c + i * 2 * N + N);
  }
}

// Panels of 2N positions: the taps' values for the panel are packed (zero past the last position)
// in blocks of kTapBlock, and every output row of the panel accumulates in c, starting at its bias,
// block after block; the panel's valid positions are then copied out. The lanes past the last
// position compute on zeros and are dropped, so each output is bias, then its taps in order.
void ConvGemmImpl(const float* HWY_RESTRICT weight, int64_t channels, int64_t taps, const float* HWY_RESTRICT cols,
                  int64_t positions, int64_t ld, const float* HWY_RESTRICT bias, float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d)), P = 2 * N;
  auto pk = hwy::AllocateAligned<float>(std::size_t(kTapBlock * P));
  auto c = hwy::AllocateAligned<float>(std::size_t(channels * P));
  for (int64_t p0 = 0; p0 < positions; p0 += P) {
    const int64_t pw = std::min(P, positions - p0);
    for (int64_t o = 0; o < channels; ++o) {
      const auto start = hn::Set(d, bias ? bias[o] : 0.0f);
      hn::Store(start, d, c.get() + o * P);
      hn::Store(start, d, c.get() + o * P + N);
    }
    for (int64_t t0 = 0; t0 < taps; t0 += kTapBlock) {
      const int64_t kc = std::min(kTapBlock, taps - t0);
      for (int64_t t = 0; t < kc; ++t) {
        const float* row = cols + (t0 + t) * ld + p0;
        float* to = pk.get() + t * P;
        if (pw == P) {
          hn::Store(hn::LoadU(d, row), d, to);
          hn::Store(hn::LoadU(d, row + N), d, to + N);
        } else {
          for (int64_t j = 0; j < P; ++j) to[j] = j < pw ? row[j] : 0.0f;
        }
      }
      int64_t o = 0;
      for (; o + kRows <= channels; o += kRows)
        Block<kRows>(d, weight + o * taps, taps, t0, kc, pk.get(), c.get() + o * P);
      for (; o < channels; ++o) Block<1>(d, weight + o * taps, taps, t0, kc, pk.get(), c.get() + o * P);
    }
    for (int64_t o = 0; o < channels; ++o) {
      const float* from = c.get() + o * P;
      float* to = out + o * ld + p0;
      if (pw == P) {
        hn::StoreU(hn::Load(d, from), d, to);
        hn::StoreU(hn::Load(d, from + N), d, to + N);
      } else {
        for (int64_t j = 0; j < pw; ++j) to[j] = from[j];
      }
    }
  }
}

// The range analysis's double GEMM on packed panels (see packedGemmF64). Four rows by two vectors
// of columns per pass keep eight accumulators in registers; fused multiply-adds where the target
// has them (the callers bound the rounding of either form by gamma_taps, see ranges_interval.cpp).
void PackedGemmF64Impl(const double* HWY_RESTRICT a, int64_t rowBlocks, int64_t taps, const double* HWY_RESTRICT b,
                       int64_t colBlocks, double* HWY_RESTRICT c, int64_t ldc) {
  const hn::CappedTag<double, 8> d;  // 16 columns hold a whole number of pairs of vectors
  const int64_t N = int64_t(hn::Lanes(d));
  for (int64_t cb = 0; cb < colBlocks; ++cb) {
    const double* bp = b + cb * taps * 16;
    for (int64_t rb = 0; rb < rowBlocks; ++rb) {
      const double* ap = a + rb * taps * 4;
      double* cp = c + rb * 4 * ldc + cb * 16;
      for (int64_t q = 0; q < 16; q += 2 * N) {
        auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        for (int64_t t = 0; t < taps; ++t) {
          const auto x = hn::LoadU(d, bp + t * 16 + q), y = hn::LoadU(d, bp + t * 16 + q + N);
          const auto k0 = hn::Set(d, ap[t * 4]), k1 = hn::Set(d, ap[t * 4 + 1]);
          const auto k2 = hn::Set(d, ap[t * 4 + 2]), k3 = hn::Set(d, ap[t * 4 + 3]);
          a0 = hn::MulAdd(k0, x, a0);
          b0 = hn::MulAdd(k0, y, b0);
          a1 = hn::MulAdd(k1, x, a1);
          b1 = hn::MulAdd(k1, y, b1);
          a2 = hn::MulAdd(k2, x, a2);
          b2 = hn::MulAdd(k2, y, b2);
          a3 = hn::MulAdd(k3, x, a3);
          b3 = hn::MulAdd(k3, y, b3);
        }
        hn::StoreU(a0, d, cp + q);
        hn::StoreU(b0, d, cp + q + N);
        hn::StoreU(a1, d, cp + ldc + q);
        hn::StoreU(b1, d, cp + ldc + q + N);
        hn::StoreU(a2, d, cp + 2 * ldc + q);
        hn::StoreU(b2, d, cp + 2 * ldc + q + N);
        hn::StoreU(a3, d, cp + 3 * ldc + q);
        hn::StoreU(b3, d, cp + 3 * ldc + q + N);
      }
    }
  }
}

PEAT_SIMD_END  // namespace HWY_NAMESPACE, namespace peat::save::detail

#if HWY_ONCE
namespace peat::save::detail {

HWY_EXPORT(ConvGemmImpl);
HWY_EXPORT(PackedGemmF64Impl);

void packedGemmF64(const double* a, int64_t rowBlocks, int64_t taps, const double* b, int64_t colBlocks, double* c,
                   int64_t ldc) {
  HWY_DYNAMIC_DISPATCH(PackedGemmF64Impl)(a, rowBlocks, taps, b, colBlocks, c, ldc);
}

void convGemm(const float* weight, int64_t channels, int64_t taps, const float* cols, int64_t positions, int64_t ld,
              const float* bias, float* out) {
  HWY_DYNAMIC_DISPATCH(ConvGemmImpl)(weight, channels, taps, cols, positions, ld, bias, out);
}

}  // namespace peat::save::detail
#endif
