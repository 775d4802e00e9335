// SPDX-License-Identifier: MIT
#pragma once
// Per-element math shared, as one source, by the CPU reference backend (g++) and the device kernels
// (nvcc, hipcc): classification of an error pair into the analyzer's histogram bins, fp16
// rounding, range membership. Integer and IEEE double operations only, so every compiler gives
// the same bits.
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define PEAT_HD __host__ __device__
#else
#define PEAT_HD
#endif

#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define PEAT_DEVICE_CODE 1
#endif

// PEAT_DEVICE_OR_HOST(device, host): the device's expression in device code, else the host's (which
// the device compiler never sees).
#ifdef PEAT_DEVICE_CODE
#define PEAT_DEVICE_OR_HOST(device, host) (device)
#else
#define PEAT_DEVICE_OR_HOST(device, host) (host)
#endif

namespace peat::gpu::math {

#ifndef PEAT_DEVICE_CODE
// The host's bit cast, where the device has an intrinsic: the bytes of `from` read as a To.
template <class To, class From>
inline To hostBitCast(From from) {
  static_assert(sizeof(To) == sizeof(From), "a bit cast keeps the size");
  To to;
  std::memcpy(&to, &from, sizeof to);
  return to;
}
#endif

PEAT_HD inline uint32_t bitsOf(float f) { return PEAT_DEVICE_OR_HOST(__float_as_uint(f), hostBitCast<uint32_t>(f)); }
PEAT_HD inline float floatOf(uint32_t u) { return PEAT_DEVICE_OR_HOST(__uint_as_float(u), hostBitCast<float>(u)); }
PEAT_HD inline uint64_t bitsOf(double d) {
  return PEAT_DEVICE_OR_HOST(static_cast<uint64_t>(__double_as_longlong(d)), hostBitCast<uint64_t>(d));
}

// floor(log2 x) for x > 0.
PEAT_HD inline int log2Floor(uint64_t x) {
#ifdef PEAT_DEVICE_CODE
  return 63 - __clzll(static_cast<long long>(x));
#else
  return 63 - __builtin_clzll(x);
#endif
}

PEAT_HD inline bool isNaN(uint32_t b) { return (b & 0x7fffffffu) > 0x7f800000u; }
PEAT_HD inline bool isFinite(uint32_t b) { return (b & 0x7f800000u) != 0x7f800000u; }

// Where one (golden, candidate) pair falls in the analyzer's histograms; -1: in no bin.
struct PairBins {
  uint32_t diff = 0;  // golden ^ candidate: the mismatched bits
  int ulp = -1;       // floor(log2 ULP distance), 0..32
  int abs = -1;       // floor(log2 |c - g|) - kLog2AbsMin, 0..290
};

inline constexpr int kLog2AbsMin = -160;

PEAT_HD inline PairBins classifyPair(uint32_t g, uint32_t c) {
  PairBins out;
  out.diff = g ^ c;
  if (!out.diff) return out;
  if (!isNaN(g) && !isNaN(c)) {
    // the monotone integer line: sign-magnitude made two's complement; +0 and -0 are both 0
    const int64_t gl = (g >> 31) ? -int64_t(g & 0x7fffffffu) : int64_t(g & 0x7fffffffu);
    const int64_t cl = (c >> 31) ? -int64_t(c & 0x7fffffffu) : int64_t(c & 0x7fffffffu);
    const uint64_t ulp = static_cast<uint64_t>(gl > cl ? gl - cl : cl - gl);
    if (ulp) out.ulp = log2Floor(ulp);
  }
  if (isFinite(g) && isFinite(c)) {
    // |c - g| in double is exact for fp32 inputs, and never subnormal: its exponent is the bin
    const double d = static_cast<double>(floatOf(c)) - static_cast<double>(floatOf(g));
    const uint64_t bits = bitsOf(d) & 0x7fffffffffffffffull;
    if (bits) out.abs = int(bits >> 52) - 1023 - kLog2AbsMin;
  }
  return out;
}

// fp32 -> fp16 -> fp32, round to nearest even, overflow to infinity, subnormals kept, NaN kept.
PEAT_HD inline float roundToHalf(float x) {
  const uint32_t b = bitsOf(x);
  const uint32_t sign = b & 0x80000000u;
  const uint32_t mag = b & 0x7fffffffu;
  if (mag >= 0x7f800000u) return x;                      // Inf, NaN
  if (mag >= 0x477ff000u) return floatOf(sign | 0x7f800000u);  // rounds past 65504
  const int e = int(mag >> 23) - 127;
  // the number of low fp32 mantissa bits fp16 drops: 13 for normals, more below 2^-14
  const int drop = e >= -14 ? 13 : 13 + (-14 - e);
  if (drop > 24) return floatOf(sign);  // below half the smallest subnormal (2^-25): zero
  // work on the significand with its hidden bit, so subnormal results round the same way
  const uint32_t sig = (mag & 0x7fffffu) | 0x800000u;
  const uint32_t half = 1u << (drop - 1);
  const uint32_t rest = sig & ((1u << drop) - 1);
  uint32_t kept = sig >> drop;
  if (rest > half || (rest == half && (kept & 1u))) ++kept;
  // back to fp32: kept * 2^(e - 23 + drop), exact. `scaled` is 0 or in [2^23, 2^24]; 2^24 is a carry
  // into the next binade, which shifting down by one loses nothing of.
  const uint64_t scaled = static_cast<uint64_t>(kept) << drop;
  if (scaled == 0) return floatOf(sign);
  const int carry = log2Floor(scaled) - 23;  // 0 or 1
  return floatOf(sign | (static_cast<uint32_t>(e + carry + 127) << 23) |
                 static_cast<uint32_t>((scaled >> carry) & 0x7fffffu));
}

PEAT_HD inline bool inRange(float v, float lo, float hi) { return lo <= v && v <= hi; }  // false for NaN

}  // namespace peat::gpu::math
