// SPDX-License-Identifier: MIT
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/save/engine_simd.cpp"
#include "core/fp/simd_target.h"  // IWYU pragma: keep

#include "core/save/engine_simd.h"

PEAT_SIMD_BEGIN(peat::save::detail)

// Four output channels at a time keep their accumulators in registers across all taps; two
// vectors of positions per pass share each weight's broadcast (8 accumulators). Every output is
// still bias, then each tap's product added in tap order.
void ConvGemmImpl(const float* HWY_RESTRICT weight, int64_t channels, int64_t taps, const float* HWY_RESTRICT cols,
                  int64_t positions, const float* HWY_RESTRICT bias, float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  int64_t p = 0;
  for (; p + 2 * N <= positions && channels >= 4; p += 2 * N) {
    int64_t o = 0;
    for (; o + 4 <= channels; o += 4) {
      auto a0 = hn::Set(d, bias ? bias[o] : 0.0f), a1 = hn::Set(d, bias ? bias[o + 1] : 0.0f);
      auto a2 = hn::Set(d, bias ? bias[o + 2] : 0.0f), a3 = hn::Set(d, bias ? bias[o + 3] : 0.0f);
      auto b0 = a0, b1 = a1, b2 = a2, b3 = a3;
      const float* w0 = weight + o * taps;
      for (int64_t t = 0; t < taps; ++t) {
        const auto x = hn::LoadU(d, cols + t * positions + p);
        const auto y = hn::LoadU(d, cols + t * positions + p + N);
        const auto k0 = hn::Set(d, w0[t]), k1 = hn::Set(d, w0[taps + t]);
        const auto k2 = hn::Set(d, w0[2 * taps + t]), k3 = hn::Set(d, w0[3 * taps + t]);
        a0 = hn::Add(a0, hn::Mul(k0, x));
        b0 = hn::Add(b0, hn::Mul(k0, y));
        a1 = hn::Add(a1, hn::Mul(k1, x));
        b1 = hn::Add(b1, hn::Mul(k1, y));
        a2 = hn::Add(a2, hn::Mul(k2, x));
        b2 = hn::Add(b2, hn::Mul(k2, y));
        a3 = hn::Add(a3, hn::Mul(k3, x));
        b3 = hn::Add(b3, hn::Mul(k3, y));
      }
      hn::StoreU(a0, d, out + o * positions + p);
      hn::StoreU(b0, d, out + o * positions + p + N);
      hn::StoreU(a1, d, out + (o + 1) * positions + p);
      hn::StoreU(b1, d, out + (o + 1) * positions + p + N);
      hn::StoreU(a2, d, out + (o + 2) * positions + p);
      hn::StoreU(b2, d, out + (o + 2) * positions + p + N);
      hn::StoreU(a3, d, out + (o + 3) * positions + p);
      hn::StoreU(b3, d, out + (o + 3) * positions + p + N);
    }
    for (; o < channels; ++o)
      for (int64_t q = p; q < p + 2 * N; q += N) {
        auto a = hn::Set(d, bias ? bias[o] : 0.0f);
        for (int64_t t = 0; t < taps; ++t)
          a = hn::Add(a, hn::Mul(hn::Set(d, weight[o * taps + t]), hn::LoadU(d, cols + t * positions + q)));
        hn::StoreU(a, d, out + o * positions + q);
      }
  }
  for (; p + N <= positions; p += N) {
    int64_t o = 0;
    for (; o + 4 <= channels; o += 4) {
      auto a0 = hn::Set(d, bias ? bias[o] : 0.0f), a1 = hn::Set(d, bias ? bias[o + 1] : 0.0f);
      auto a2 = hn::Set(d, bias ? bias[o + 2] : 0.0f), a3 = hn::Set(d, bias ? bias[o + 3] : 0.0f);
      const float* w0 = weight + o * taps;
      for (int64_t t = 0; t < taps; ++t) {
        const auto x = hn::LoadU(d, cols + t * positions + p);
        a0 = hn::Add(a0, hn::Mul(hn::Set(d, w0[t]), x));
        a1 = hn::Add(a1, hn::Mul(hn::Set(d, w0[taps + t]), x));
        a2 = hn::Add(a2, hn::Mul(hn::Set(d, w0[2 * taps + t]), x));
        a3 = hn::Add(a3, hn::Mul(hn::Set(d, w0[3 * taps + t]), x));
      }
      hn::StoreU(a0, d, out + o * positions + p);
      hn::StoreU(a1, d, out + (o + 1) * positions + p);
      hn::StoreU(a2, d, out + (o + 2) * positions + p);
      hn::StoreU(a3, d, out + (o + 3) * positions + p);
    }
    for (; o < channels; ++o) {
      auto a = hn::Set(d, bias ? bias[o] : 0.0f);
      for (int64_t t = 0; t < taps; ++t)
        a = hn::Add(a, hn::Mul(hn::Set(d, weight[o * taps + t]), hn::LoadU(d, cols + t * positions + p)));
      hn::StoreU(a, d, out + o * positions + p);
    }
  }
  for (; p < positions; ++p)  // the tail, one element at a time in the same order
    for (int64_t o = 0; o < channels; ++o) {
      float a = bias ? bias[o] : 0.0f;
      for (int64_t t = 0; t < taps; ++t) {
        const float product = weight[o * taps + t] * cols[t * positions + p];
        a = a + product;
      }
      out[o * positions + p] = a;
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

void convGemm(const float* weight, int64_t channels, int64_t taps, const float* cols, int64_t positions,
              const float* bias, float* out) {
  HWY_DYNAMIC_DISPATCH(ConvGemmImpl)(weight, channels, taps, cols, positions, bias, out);
}

}  // namespace peat::save::detail
#endif
