// SPDX-License-Identifier: MIT
#include "core/fp/format.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace peat::fp {

namespace {
// GCC's vector types: each lane's operation is the scalar IEEE one (nothing contracted)
typedef uint32_t Bits8 __attribute__((vector_size(32)));
typedef float Lanes8 __attribute__((vector_size(32)));
}  // namespace

const std::vector<Format>& allFormats() {
  static const std::vector<Format> formats{kFp32, kFp16, kBf16, kTf32, kE4M3, kE5M2, kE3M2, kE2M3, kE2M1};
  return formats;
}

std::optional<Format> formatByName(std::string_view name) {
  for (const Format& f : allFormats())
    if (f.name == name) return f;
  return std::nullopt;
}

const char* className(FpClass c) {
  switch (c) {
    case FpClass::Zero: return "zero";
    case FpClass::Subnormal: return "subnormal";
    case FpClass::Normal: return "normal";
    case FpClass::Infinite: return "infinite";
    case FpClass::NaN: return "nan";
  }
  return "?";
}

const char* fieldName(BitField b) {
  switch (b) {
    case BitField::Sign: return "sign";
    case BitField::Exponent: return "exponent";
    case BitField::Mantissa: return "mantissa";
  }
  return "?";
}

Fields decompose(const Format& f, uint32_t bits) {
  Fields out{};
  out.sign = (bits & f.signMask()) != 0;
  out.exponent = (bits & f.expMask()) >> f.manBits;
  out.mantissa = bits & f.manMask();
  const uint32_t allOnes = (uint32_t(1) << f.expBits) - 1;
  if (out.exponent == 0) {
    out.cls = out.mantissa == 0 ? FpClass::Zero : FpClass::Subnormal;
    out.unbiasedExponent = f.minNormalExponent();
  } else {
    out.unbiasedExponent = int(out.exponent) - f.bias;
    if (out.exponent == allOnes && f.encoding == Encoding::Ieee)
      out.cls = out.mantissa == 0 ? FpClass::Infinite : FpClass::NaN;
    else if (out.exponent == allOnes && out.mantissa == f.manMask() && f.encoding == Encoding::FiniteNanOnly)
      out.cls = FpClass::NaN;  // E4M3: only S.1111.111
    else
      out.cls = FpClass::Normal;
  }
  return out;
}

FpClass classify(const Format& f, uint32_t bits) { return decompose(f, bits).cls; }

bool isNaN(const Format& f, uint32_t bits) {
  const uint32_t magnitude = bits & (f.signMask() - 1);
  if (f.encoding == Encoding::Ieee) return magnitude > f.expMask();
  if (f.encoding == Encoding::FiniteOnly) return false;
  return magnitude == (f.expMask() | f.manMask());
}

BitField fieldOf(const Format& f, int bit) {
  if (bit < 0 || bit >= f.width())
    throw std::out_of_range("bit " + std::to_string(bit) + " is outside " + std::string(f.name) + " (" +
                            std::to_string(f.width()) + " bits)");
  if (bit == f.width() - 1) return BitField::Sign;
  return bit >= f.manBits ? BitField::Exponent : BitField::Mantissa;
}

uint32_t flipBits(const Format& f, uint32_t bits, uint32_t mask) {
  if ((mask & ~f.allMask()) != 0)
    throw std::out_of_range("flip mask reaches past the " + std::to_string(f.width()) + " bits of " +
                            std::string(f.name));
  return bits ^ mask;
}

uint32_t flipBit(const Format& f, uint32_t bits, int bit) {
  fieldOf(f, bit);  // range check
  return bits ^ (uint32_t(1) << bit);
}

uint32_t maxFinite(const Format& f) {
  if (f.encoding == Encoding::Ieee) return (f.expMask() - (uint32_t(1) << f.manBits)) | f.manMask();
  if (f.encoding == Encoding::FiniteOnly) return f.expMask() | f.manMask();
  return f.expMask() | (f.manMask() - 1);
}

uint32_t canonicalNaN(const Format& f) {
  if (f.encoding == Encoding::Ieee) return f.expMask() | (uint32_t(1) << (f.manBits - 1));
  if (f.encoding == Encoding::FiniteOnly) return maxFinite(f);  // no NaN code: the largest magnitude
  return f.expMask() | f.manMask();
}

std::optional<uint32_t> infinity(const Format& f) {
  if (f.encoding == Encoding::Ieee) return f.expMask();
  return std::nullopt;
}

namespace {
constexpr bool isBinary32(const Format& f) { return f.expBits == 8 && f.manBits == 23 && f.bias == 127; }

// Round `value` (an integer count of 2^-shift units) to a whole unit, ties to even.
uint32_t shiftRoundNearestEven(uint32_t value, int shift) {
  if (shift <= 0) return value;
  if (shift > 24) return 0;  // value < 2^24 is below half a unit
  const uint32_t kept = value >> shift;
  const uint32_t rest = value & ((uint32_t(1) << shift) - 1);
  const uint32_t half = uint32_t(1) << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1))) ? 1 : 0);
}
}  // namespace

uint32_t encode(const Format& f, float x, Overflow overflow) {
  const uint32_t u = bitsOf(x);
  const uint32_t sign = (u >> 31) ? f.signMask() : 0;
  const uint32_t a = u & 0x7fffffffu;
  if (isBinary32(f)) return u;
  if (a > 0x7f800000u) return sign | canonicalNaN(f);

  auto overflowed = [&] {
    if (overflow == Overflow::Saturate || f.encoding == Encoding::FiniteOnly) return maxFinite(f);
    return f.encoding == Encoding::Ieee ? f.expMask() : canonicalNaN(f);
  };
  if (a == 0x7f800000u) return sign | overflowed();

  const int rawExp = int(a >> 23);
  const int e = rawExp == 0 ? -126 : rawExp - 127;
  uint32_t out;
  if (rawExp != 0 && e >= f.minNormalExponent()) {
    // Normal in the target: round the fp32 pattern itself (a mantissa carry moves into the exponent), then re-bias.
    out = shiftRoundNearestEven(a, 23 - f.manBits) - (uint32_t(127 - f.bias) << f.manBits);
  } else {
    // Subnormal in the target: count units of the smallest subnormal, 2^(emin - manBits).
    const uint32_t significand = rawExp == 0 ? (a & 0x7fffffu) : ((a & 0x7fffffu) | 0x800000u);
    out = shiftRoundNearestEven(significand, (23 - f.manBits) + (f.minNormalExponent() - e));
  }
  if (out > maxFinite(f)) return sign | overflowed();
  return sign | out;
}

// AVX2 where the CPU has it (twice the lanes; the same bits: nothing here contracts or reassociates)
__attribute__((target_clones("avx2", "default"))) void roundInPlace(const Format& f, float* data, std::size_t count,
                                                                    Overflow overflow) {
  if (isBinary32(f)) return;
  // Both fast paths below go in blocks: a block whose values are all ordinary takes a branch-free
  // loop the compiler vectorises; a block holding a rare value (NaN, Inf, beyond the format's
  // range) goes element by element. The bits are the same either way.
  constexpr std::size_t kBlock = 256;
  if (f.expBits == 8 && f.bias == 127) {
    // Same exponent range as fp32: rounding the low 23 - manBits bits of the encoding, ties to even,
    // is the whole conversion; a carry out of the top binade lands exactly on Inf.
    const int shift = 23 - f.manBits;
    const uint32_t keep = ~((uint32_t(1) << shift) - 1);
    const uint32_t halfMinusOne = (uint32_t(1) << (shift - 1)) - 1;
    const uint32_t satMagnitude = (uint32_t(0xfe) << 23) | (((uint32_t(1) << f.manBits) - 1) << shift);
    const bool saturate = overflow == Overflow::Saturate;
    for (std::size_t at = 0; at < count; at += kBlock) {
      float* block = data + at;
      const std::size_t n = std::min(kBlock, count - at);
      uint32_t rare = 0;
      for (std::size_t i = 0; i < n; ++i) rare |= uint32_t((bitsOf(block[i]) & 0x7fffffffu) >= 0x7f800000u);
      if (!rare) {
        for (std::size_t i = 0; i < n; ++i) {
          const uint32_t u = bitsOf(block[i]);
          const uint32_t r = (u + halfMinusOne + ((u >> shift) & 1)) & keep;
          const bool toSat = saturate && (r & 0x7fffffffu) == 0x7f800000u;
          block[i] = floatOf(toSat ? (u & 0x80000000u) | satMagnitude : r);
        }
        continue;
      }
      for (std::size_t i = 0; i < n; ++i) {
        const uint32_t u = bitsOf(block[i]);
        if ((u & 0x7fffffffu) >= 0x7f800000u) {  // NaN or Inf
          if ((u & 0x7fffffffu) > 0x7f800000u) block[i] = decode(f, encode(f, block[i], overflow));
          else if (saturate) block[i] = decode(f, (u >> 31 ? f.signMask() : 0) | maxFinite(f));
          continue;
        }
        uint32_t r = (u + halfMinusOne + ((u >> shift) & 1)) & keep;
        if ((r & 0x7fffffffu) == 0x7f800000u && saturate) r = (u & 0x80000000u) | satMagnitude;
        block[i] = floatOf(r);
      }
    }
    return;
  }
  if (f.expBits < 8 && f.manBits < 23 && 1 - f.bias - f.manBits >= -126) {
    // A narrower exponent (fp16, the fp8, fp6 and fp4 elements): within the format's range, rounding
    // to it is rounding to a grid that float holds exactly: a fixed quantum below its smallest
    // normal, and in its normal binades the same low-bit rounding as above. Below the smallest
    // normal, adding (then taking away) quantum * 2^23 rounds to a multiple of the quantum, ties to
    // even, exactly as nearbyint(|x| / quantum) * quantum. Outside (beyond its largest finite value,
    // Inf, NaN), the codec decides (overflow, saturation, NaN encodings). Bit-identical to the codec
    // (tst_fp roundInPlaceMatchesRoundTo, every format, values across each one's range and ties);
    // most of `peat analyze --session`'s time was here.
    const float top = decode(f, maxFinite(f));
    const float minNormal = std::ldexp(1.0f, 1 - f.bias), quantum = std::ldexp(1.0f, 1 - f.bias - f.manBits);
    const float grid = std::ldexp(quantum, 23);
    const int shift = 23 - f.manBits;
    const uint32_t keep = ~((uint32_t(1) << shift) - 1);
    const uint32_t halfMinusOne = (uint32_t(1) << (shift - 1)) - 1;
    const auto ordinary = [&](float x) {
      const float ax = std::fabs(x);
      const float sub = (ax + grid) - grid;
      const uint32_t u = bitsOf(ax);
      const float normal = floatOf((u + halfMinusOne + ((u >> shift) & 1)) & keep);
      return std::copysign(ax < minNormal ? sub : normal, x);
    };
    for (std::size_t at = 0; at < count; at += kBlock) {
      float* block = data + at;
      const std::size_t n = std::min(kBlock, count - at);
      uint32_t rare = 0;
      for (std::size_t i = 0; i < n; ++i) rare |= uint32_t(!(std::fabs(block[i]) <= top));
      if (!rare) {
        // eight at a time in vector lanes, each lane the scalar `ordinary` (a scalar loop with its
        // branch did not vectorise: 10% of `peat analyze --session`)
        std::size_t i = 0;
        for (; i + 8 <= n; i += 8) {
          Bits8 u;
          std::memcpy(&u, block + i, sizeof u);
          const Bits8 sign = u & 0x80000000u, mag = u & 0x7fffffffu;
          Lanes8 ax;
          std::memcpy(&ax, &mag, sizeof ax);
          const Lanes8 sub = (ax + grid) - grid;
          Bits8 subBits;
          std::memcpy(&subBits, &sub, sizeof subBits);
          const Bits8 normal = (mag + halfMinusOne + ((mag >> shift) & 1u)) & keep;
          const Bits8 r = (ax < minNormal ? subBits : normal) | sign;
          std::memcpy(block + i, &r, sizeof r);
        }
        for (; i < n; ++i) block[i] = ordinary(block[i]);
        continue;
      }
      for (std::size_t i = 0; i < n; ++i)
        block[i] = std::fabs(block[i]) <= top ? ordinary(block[i]) : decode(f, encode(f, block[i], overflow));
    }
    return;
  }
  for (std::size_t i = 0; i < count; ++i) data[i] = decode(f, encode(f, data[i], overflow));
}

float decode(const Format& f, uint32_t bits) {
  bits &= f.allMask();
  if (isBinary32(f)) return floatOf(bits);
  const Fields d = decompose(f, bits);
  const uint32_t sign = d.sign ? 0x80000000u : 0;
  switch (d.cls) {
    case FpClass::NaN:
      if (f.encoding == Encoding::Ieee) return floatOf(sign | 0x7f800000u | (d.mantissa << (23 - f.manBits)));
      return floatOf(sign | 0x7fc00000u);
    case FpClass::Infinite: return floatOf(sign | 0x7f800000u);
    case FpClass::Zero: return floatOf(sign);
    case FpClass::Subnormal: {
      const float magnitude = std::ldexp(float(d.mantissa), f.minNormalExponent() - f.manBits);
      return d.sign ? -magnitude : magnitude;
    }
    case FpClass::Normal: break;
  }
  return floatOf(sign | (uint32_t(d.unbiasedExponent + 127) << 23) | (d.mantissa << (23 - f.manBits)));
}

}  // namespace peat::fp
