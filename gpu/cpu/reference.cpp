// SPDX-License-Identifier: MIT
#include "gpu/cpu/reference.h"

#include <algorithm>
#include <cmath>

#include "gpu/device/math.h"

namespace peat::gpu::reference {

void injectBitFlips(uint32_t* words, const std::vector<BitFlip>& flips) {
  for (const BitFlip& f : flips) words[f.index] ^= f.mask;
}

void stuckAt(uint32_t* words, const StuckAt& r) {
  for (uint64_t i = r.first; i < r.first + r.count; ++i) words[i] = r.value ? (words[i] | r.mask) : (words[i] & ~r.mask);
}

RangeCheckResult rangeCheck(const float* v, uint64_t n, const float* lo, const float* hi, float low, float high) {
  RangeCheckResult out;
  for (uint64_t i = 0; i < n; ++i)
    if (!math::inRange(v[i], lo ? lo[i] : low, hi ? hi[i] : high)) {
      ++out.violations;
      out.firstIndex = std::min(out.firstIndex, i);
    }
  return out;
}

ErrorHistograms histograms(const float* golden, const float* candidate, uint64_t n) {
  ErrorHistograms h;
  for (uint64_t i = 0; i < n; ++i) {
    const math::PairBins p = math::classifyPair(math::bitsOf(golden[i]), math::bitsOf(candidate[i]));
    if (!p.diff) continue;
    ++h.mismatched;
    for (uint32_t x = p.diff; x; x &= x - 1) ++h.bits[std::size_t(__builtin_ctz(x))];
    if (p.ulp >= 0) ++h.log2Ulp[std::size_t(p.ulp)];
    if (p.abs >= 0) ++h.log2Abs[std::size_t(p.abs)];
  }
  return h;
}

namespace {

constexpr uint64_t kTile = 16;

float dotRange(const GemmShape& s, const float* a, const float* b, uint64_t i, uint64_t j, uint64_t k0, uint64_t k1,
               bool half) {
  float acc = 0;
  for (uint64_t k = k0; k < k1; ++k) {
    const float x = a[i * s.k + k], y = b[k * s.n + j];
    acc = half ? std::fma(math::roundToHalf(x), math::roundToHalf(y), acc) : std::fma(x, y, acc);
  }
  return acc;
}

}  // namespace

void gemm(GemmKind kind, const GemmShape& s, const float* a, const float* b, float* c) {
  for (uint64_t i = 0; i < s.m; ++i)
    for (uint64_t j = 0; j < s.n; ++j) {
      float out = 0;
      switch (kind) {
        case GemmKind::Naive:
        case GemmKind::Tiled:
          out = dotRange(s, a, b, i, j, 0, s.k, false);
          break;
        case GemmKind::HalfInputs:
          out = dotRange(s, a, b, i, j, 0, s.k, true);
          break;
        case GemmKind::SplitK: {
          const uint64_t parts = uint64_t(s.parts);
          for (uint64_t p = 0; p < parts; ++p) out += dotRange(s, a, b, i, j, s.k * p / parts, s.k * (p + 1) / parts, false);
          break;
        }
        case GemmKind::TileEdge: {
          const uint64_t col = (j % kTile == kTile - 1 && j + 1 < s.n) ? j + 1 : j;
          out = dotRange(s, a, b, i, col, 0, s.k, false);
          break;
        }
        case GemmKind::Golden: {
          double acc = 0;
          for (uint64_t k = 0; k < s.k; ++k) acc += double(a[i * s.k + k]) * double(b[k * s.n + j]);
          out = float(acc);
          break;
        }
      }
      c[i * s.n + j] = out;
    }
}

void gemmExact(const GemmShape& s, const float* a, const float* b, std::vector<double>& exact,
               std::vector<double>& magnitude) {
  exact.assign(s.m * s.n, 0);
  magnitude.assign(s.m * s.n, 0);
  for (uint64_t i = 0; i < s.m; ++i)
    for (uint64_t j = 0; j < s.n; ++j) {
      // compensated (two-sum) accumulation of exact double products: far below fp32's rounding
      double sum = 0, carry = 0, mag = 0;
      for (uint64_t k = 0; k < s.k; ++k) {
        const double p = double(a[i * s.k + k]) * double(b[k * s.n + j]);
        const double t = sum + p;
        carry += std::fabs(sum) >= std::fabs(p) ? (sum - t) + p : (p - t) + sum;
        sum = t;
        mag += std::fabs(p);
      }
      exact[i * s.n + j] = sum + carry;
      magnitude[i * s.n + j] = mag;
    }
}

double gemmBoundFactor(GemmKind kind, uint64_t k) {
  // gamma_n = n u / (1 - n u) (Higham, Accuracy and Stability of Numerical Algorithms, 3.1): any
  // order of n - 1 additions (and fused products) of exact-rounding fp32 arithmetic.
  const auto gamma = [](double n, double u) { return n * u / (1 - n * u); };
  const double u32 = std::ldexp(1.0, -24), uHalf = std::ldexp(1.0, -11);
  switch (kind) {
    case GemmKind::Naive:
    case GemmKind::Tiled:
    case GemmKind::SplitK:
      return gamma(double(k), u32);
    case GemmKind::HalfInputs:
      // both inputs rounded to fp16 (relative error uHalf each); the accumulation taken with twice
      // fp32's unit roundoff, since tensor cores need not round to nearest inside
      return (1 + uHalf) * (1 + uHalf) * (1 + gamma(double(k), 2 * u32)) - 1;
    case GemmKind::Golden:
      // a vendor library: any fp32 order (the CPU's double sums are far inside this)
      return gamma(double(k), u32);
    case GemmKind::TileEdge:
      return 0;
  }
  return 0;
}

}  // namespace peat::gpu::reference
