// SPDX-License-Identifier: MIT
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/save/engine_simd.cpp"
#include "core/fp/simd_target.h"  // IWYU pragma: keep

#include "core/save/engine_simd.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

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

// The register block: kRows output channels by two vectors of positions (2 kRows accumulators,
// with the two position vectors and a broadcast weight: 27 of AVX-512's 32 registers, 15 of AVX2's
// 16). Twelve rows on AVX-512 ran the GEMM 6-13% faster than eight on ResNet's convolution shapes
// (fewer loads per multiply-add; docs/benchmarks.md).
#if HWY_TARGET <= HWY_AVX3
constexpr int64_t kRows = 12;
#else
constexpr int64_t kRows = 6;
#endif
constexpr int64_t kTapBlock = 256;  // taps per packed block
constexpr int64_t kPanels = 16;    // panels of two vectors of positions per block of positions

// MR output rows (accumulators in c, rows ldc apart; weights w[i * taps + t]) of one panel, over
// the taps [t0, t0 + kc), the panel's positions packed pk[t * 2N + j]. Each accumulator goes on
// from c, then adds its taps in order with one fused multiply-add each.
template <int64_t MR, class D>
HWY_INLINE void Block(D d, const float* HWY_RESTRICT w, int64_t taps, int64_t t0, int64_t kc,
                      const float* HWY_RESTRICT pk, float* HWY_RESTRICT c, int64_t ldc) {
  using V = hn::Vec<D>;
  const int64_t N = int64_t(hn::Lanes(d));
  V a[MR], b[MR];
#pragma GCC unroll 16
  for (int64_t i = 0; i < MR; ++i) {
    a[i] = hn::LoadU(d, c + i * ldc);
    b[i] = hn::LoadU(d, c + i * ldc + N);
  }
  const float* wt = w + t0;
  for (int64_t t = 0; t < kc; ++t) {
    const V x = hn::Load(d, pk + t * 2 * N), y = hn::Load(d, pk + t * 2 * N + N);
#pragma GCC unroll 16
    for (int64_t i = 0; i < MR; ++i) {
      const V k = hn::Set(d, wt[i * taps + t]);
      a[i] = Fma(d, k, x, a[i]);
      b[i] = Fma(d, k, y, b[i]);
    }
  }
#pragma GCC unroll 16
  for (int64_t i = 0; i < MR; ++i) {
    hn::StoreU(a[i], d, c + i * ldc);
    hn::StoreU(b[i], d, c + i * ldc + N);
  }
}

// Block<rows> for 0 < rows < kRows (the rows left after the whole blocks).
template <int64_t MR = 1, class D>
HWY_INLINE void Rows(D d, int64_t rows, const float* HWY_RESTRICT w, int64_t taps, int64_t t0, int64_t kc,
                     const float* HWY_RESTRICT pk, float* HWY_RESTRICT c, int64_t ldc) {
  if constexpr (MR < kRows) {
    if (rows == MR) return Block<MR>(d, w, taps, t0, kc, pk, c, ldc);
    Rows<MR + 1>(d, rows, w, taps, t0, kc, pk, c, ldc);
  }
}

// Blocked by positions and taps without changing any output's order of summation: for every block
// of kPanels panels of 2N positions, every output starts at its bias in c (the output itself where
// the block is whole panels, else a buffer copied out at the end); then for each block of
// taps in order the block's positions are packed (zero past the last position) and each block of
// kRows output rows adds those taps to its accumulators, panel by panel (the packed positions stay
// in L2, a block of rows' accumulators in L1). The lanes past the last position compute on zeros
// and are dropped, so each output is bias, then its taps in order, one rounding each.
void ConvGemmImpl(const float* HWY_RESTRICT weight, int64_t channels, int64_t taps, const float* HWY_RESTRICT cols,
                  int64_t positions, int64_t ld, const float* HWY_RESTRICT bias, float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d)), P = 2 * N, NC = kPanels * P;
  auto pk = hwy::AllocateAligned<float>(std::size_t(std::min(kTapBlock, taps) * NC));
  auto buffer = hwy::AllocateAligned<float>(std::size_t(channels * NC));
  for (int64_t p0 = 0; p0 < positions; p0 += NC) {
    const int64_t pw = std::min(NC, positions - p0), panels = (pw + P - 1) / P;
    const bool whole = pw == panels * P;
    float* c = whole ? out + p0 : buffer.get();
    const int64_t ldc = whole ? ld : NC;
    for (int64_t o = 0; o < channels; ++o) {
      const auto start = hn::Set(d, bias ? bias[o] : 0.0f);
      for (int64_t j = 0; j < panels * P; j += N) hn::StoreU(start, d, c + o * ldc + j);
    }
    for (int64_t t0 = 0; t0 < taps; t0 += kTapBlock) {
      const int64_t kc = std::min(kTapBlock, taps - t0);
      for (int64_t j = 0; j < panels; ++j)
        for (int64_t t = 0; t < kc; ++t) {
          const float* row = cols + (t0 + t) * ld + p0 + j * P;
          float* to = pk.get() + (j * kc + t) * P;
          const int64_t valid = std::min(P, pw - j * P);
          if (valid == P) {
            hn::Store(hn::LoadU(d, row), d, to);
            hn::Store(hn::LoadU(d, row + N), d, to + N);
          } else {
            for (int64_t q = 0; q < P; ++q) to[q] = q < valid ? row[q] : 0.0f;
          }
        }
      int64_t o = 0;
      for (; o + kRows <= channels; o += kRows)
        for (int64_t j = 0; j < panels; ++j)
          Block<kRows>(d, weight + o * taps, taps, t0, kc, pk.get() + j * kc * P, c + o * ldc + j * P, ldc);
      if (o < channels)  // the last rows, fewer than a block, in one block of their own
        for (int64_t j = 0; j < panels; ++j)
          Rows(d, channels - o, weight + o * taps, taps, t0, kc, pk.get() + j * kc * P, c + o * ldc + j * P, ldc);
    }
    if (!whole)
      for (int64_t o = 0; o < channels; ++o) std::copy(c + o * NC, c + o * NC + pw, out + o * ld + p0);
  }
}

// Outputs are taken a vector of one row at a time ("units", row-major); eight units share each
// tap's broadcast weight, so eight chains of fused multiply-adds are in flight.
void DepthwisePlaneImpl(const float* HWY_RESTRICT w, int64_t taps, const int64_t* HWY_RESTRICT tapOffset, float bias,
                        const float* HWY_RESTRICT padded, int64_t rowStep, int64_t oh, int64_t ow,
                        float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t N = int64_t(hn::Lanes(d)), perRow = (ow + N - 1) / N, units = oh * perRow;
  const auto store = [&](V v, int64_t u) {
    const int64_t x = (u % perRow) * N;
    float* o = out + (u / perRow) * ow + x;
    if (x + N <= ow) {
      hn::StoreU(v, d, o);
      return;
    }
    HWY_ALIGN float t[hn::MaxLanes(decltype(d)())];
    hn::Store(v, d, t);
    std::copy(t, t + (ow - x), o);
  };
  const auto base = [&](int64_t u) { return padded + (u / perRow) * rowStep + (u % perRow) * N; };
  constexpr int64_t U = 8;
  int64_t u = 0;
  for (; u + U <= units; u += U) {
    const float* p[U];
    V a[U];
#pragma GCC unroll 8
    for (int64_t i = 0; i < U; ++i) {
      p[i] = base(u + i);
      a[i] = hn::Set(d, bias);
    }
    for (int64_t t = 0; t < taps; ++t) {
      const V k = hn::Set(d, w[t]);
      const int64_t off = tapOffset[t];
#pragma GCC unroll 8
      for (int64_t i = 0; i < U; ++i) a[i] = Fma(d, k, hn::LoadU(d, p[i] + off), a[i]);
    }
    for (int64_t i = 0; i < U; ++i) store(a[i], u + i);
  }
  for (; u < units; ++u) {
    const float* p = base(u);
    V a = hn::Set(d, bias);
    for (int64_t t = 0; t < taps; ++t) a = Fma(d, hn::Set(d, w[t]), hn::LoadU(d, p + tapOffset[t]), a);
    store(a, u);
  }
}

// The scalar forms, for the elements past the last whole vector.
inline float ElementwiseOne(Elementwise op, float a, float b, float p, float q) {
  switch (op) {
    case Elementwise::Relu: return a > 0 ? a : 0.0f;
    case Elementwise::Clip: return a > p ? (a < q ? a : q) : p;
    case Elementwise::Add: return a + b;
    case Elementwise::Mul: return a * b;
    case Elementwise::Max2: return a < b ? b : a;
    case Elementwise::Affine: return a * p + q;
  }
  return a;
}

template <class D, class V>
HWY_INLINE V ElementwiseVec(D d, Elementwise op, V a, V b, V p, V q) {
  switch (op) {
    case Elementwise::Relu: return hn::IfThenElse(a > hn::Zero(d), a, hn::Zero(d));
    case Elementwise::Clip: return hn::IfThenElse(a > p, hn::IfThenElse(a < q, a, q), p);
    case Elementwise::Add: return hn::Add(a, b);
    case Elementwise::Mul: return hn::Mul(a, b);
    case Elementwise::Max2: return hn::IfThenElse(a < b, b, a);
    case Elementwise::Affine: return hn::Add(hn::Mul(a, p), q);
  }
  return a;
}

template <Elementwise kOp>
HWY_INLINE void ElementwiseLoop(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, float p, float q,
                                float* HWY_RESTRICT out, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const auto vp = hn::Set(d, p), vq = hn::Set(d, q);
  constexpr bool kTwo = kOp == Elementwise::Add || kOp == Elementwise::Mul || kOp == Elementwise::Max2;
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto x = hn::LoadU(d, a + i);
    hn::StoreU(ElementwiseVec(d, kOp, x, kTwo ? hn::LoadU(d, b + i) : x, vp, vq), d, out + i);
  }
  for (; i < n; ++i) out[i] = ElementwiseOne(kOp, a[i], kTwo ? b[i] : 0.0f, p, q);
}

void ElementwiseImpl(Elementwise op, const float* a, const float* b, float p, float q, float* out, int64_t n) {
  switch (op) {
    case Elementwise::Relu: return ElementwiseLoop<Elementwise::Relu>(a, b, p, q, out, n);
    case Elementwise::Clip: return ElementwiseLoop<Elementwise::Clip>(a, b, p, q, out, n);
    case Elementwise::Add: return ElementwiseLoop<Elementwise::Add>(a, b, p, q, out, n);
    case Elementwise::Mul: return ElementwiseLoop<Elementwise::Mul>(a, b, p, q, out, n);
    case Elementwise::Max2: return ElementwiseLoop<Elementwise::Max2>(a, b, p, q, out, n);
    case Elementwise::Affine: return ElementwiseLoop<Elementwise::Affine>(a, b, p, q, out, n);
  }
}

bool AnyOutsideImpl(const float* HWY_RESTRICT x, const float* HWY_RESTRICT lo, const float* HWY_RESTRICT hi, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {  // four vectors per test: the fault-free pass reads on
    auto inside = hn::And(hn::LoadU(d, x + i) >= hn::LoadU(d, lo + i), hn::LoadU(d, x + i) <= hn::LoadU(d, hi + i));
    for (int64_t j = 1; j < 4; ++j) {
      const auto v = hn::LoadU(d, x + i + j * N);
      inside = hn::And(inside, hn::And(v >= hn::LoadU(d, lo + i + j * N), v <= hn::LoadU(d, hi + i + j * N)));
    }
    if (!hn::AllTrue(d, inside)) return true;
  }
  for (; i < n; ++i)
    if (!(x[i] >= lo[i]) || !(x[i] <= hi[i])) return true;  // NaN fails both
  return false;
}

bool AnyMaskedDifferenceImpl(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, const uint32_t* HWY_RESTRICT mask,
                             int64_t n) {
  const hn::ScalableTag<float> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  const int64_t N = int64_t(hn::Lanes(d));
  auto differ = hn::Zero(du);
  int64_t i = 0;
  for (; i + N <= n; i += N)
    differ = hn::Or(differ, hn::And(hn::Xor(hn::BitCast(du, hn::LoadU(d, a + i)), hn::BitCast(du, hn::LoadU(d, b + i))),
                                    hn::LoadU(du, mask + i)));
  uint32_t rest = 0;
  for (; i < n; ++i) {
    uint32_t x, y;
    std::memcpy(&x, a + i, 4);
    std::memcpy(&y, b + i, 4);
    rest |= (x ^ y) & mask[i];
  }
  return rest != 0 || !hn::AllTrue(du, differ == hn::Zero(du));
}

int64_t FloatLanesImpl() { return int64_t(hn::Lanes(hn::ScalableTag<float>())); }

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
HWY_EXPORT(DepthwisePlaneImpl);

HWY_EXPORT(ElementwiseImpl);
HWY_EXPORT(FloatLanesImpl);
HWY_EXPORT(AnyOutsideImpl);
HWY_EXPORT(AnyMaskedDifferenceImpl);

void depthwisePlane(const float* w, int64_t taps, const int64_t* tapOffset, float bias, const float* padded,
                    int64_t rowStep, int64_t oh, int64_t ow, float* out) {
  HWY_DYNAMIC_DISPATCH(DepthwisePlaneImpl)(w, taps, tapOffset, bias, padded, rowStep, oh, ow, out);
}

void elementwise(Elementwise op, const float* a, const float* b, float p, float q, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(ElementwiseImpl)(op, a, b, p, q, out, n);
}

int64_t floatLanes() { return HWY_DYNAMIC_DISPATCH(FloatLanesImpl)(); }

bool anyMaskedDifference(const float* a, const float* b, const uint32_t* mask, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(AnyMaskedDifferenceImpl)(a, b, mask, n);
}

bool anyOutside(const float* x, const float* lo, const float* hi, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(AnyOutsideImpl)(x, lo, hi, n);
}

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
