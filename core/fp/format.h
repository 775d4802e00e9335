// SPDX-License-Identifier: MIT
#pragma once
// IEEE-754-style binary formats narrower than or equal to binary32, described by their fields.
// Bit patterns of every format are held right-aligned in a uint32_t (bit 0 = mantissa LSB).
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

namespace peat::fp {

enum class Encoding {
  Ieee,           // all-ones exponent holds Inf (mantissa 0) and NaN (mantissa != 0)
  FiniteNanOnly,  // OCP FP8 E4M3: no Inf; only S.1111.111 is NaN, the rest of the top binade is finite
  FiniteOnly,     // OCP MX FP6 (E3M2, E2M3) and FP4 (E2M1): every code is finite, no Inf, no NaN
};

struct Format {
  std::string_view name;  // "fp32", "fp16", "bf16", "tf32", "e4m3", "e5m2"
  int expBits;            // width of the exponent field
  int manBits;            // width of the stored mantissa (no hidden bit)
  int bias;               // exponent bias
  Encoding encoding;

  constexpr int width() const { return 1 + expBits + manBits; }
  constexpr uint32_t signMask() const { return uint32_t(1) << (expBits + manBits); }
  constexpr uint32_t expMask() const { return ((uint32_t(1) << expBits) - 1) << manBits; }
  constexpr uint32_t manMask() const { return (uint32_t(1) << manBits) - 1; }
  constexpr uint32_t allMask() const { return (signMask() << 1) - 1; }
  constexpr int minNormalExponent() const { return 1 - bias; }
};

inline constexpr Format kFp32{"fp32", 8, 23, 127, Encoding::Ieee};
inline constexpr Format kFp16{"fp16", 5, 10, 15, Encoding::Ieee};
inline constexpr Format kBf16{"bf16", 8, 7, 127, Encoding::Ieee};
inline constexpr Format kTf32{"tf32", 8, 10, 127, Encoding::Ieee};  // 19 bits, as tensor cores read fp32
inline constexpr Format kE4M3{"e4m3", 4, 3, 7, Encoding::FiniteNanOnly};
inline constexpr Format kE5M2{"e5m2", 5, 2, 15, Encoding::Ieee};
// The OCP Microscaling element formats narrower than 8 bits (OCP MX v1.0, section 5.3): FP6 E3M2
// (max 28), FP6 E2M3 (max 7.5), FP4 E2M1 (max 6; the NVFP4 element too). No Inf, no NaN: a NaN
// input encodes as the largest magnitude (the block's scale carries NaN, core/fp/block.h).
inline constexpr Format kE3M2{"e3m2", 3, 2, 3, Encoding::FiniteOnly};
inline constexpr Format kE2M3{"e2m3", 2, 3, 1, Encoding::FiniteOnly};
inline constexpr Format kE2M1{"e2m1", 2, 1, 1, Encoding::FiniteOnly};

const std::vector<Format>& allFormats();
std::optional<Format> formatByName(std::string_view name);
// The fp32 mantissa bits a narrower format drops when a value is rounded to it: 0 .. highest
// (bf16: 0-15); -1 when it keeps all 23 (fp32 itself).
inline constexpr int highestDroppedMantissaBit(const Format& f) { return f.manBits < 23 ? 22 - f.manBits : -1; }

enum class FpClass { Zero, Subnormal, Normal, Infinite, NaN };
const char* className(FpClass c);

struct Fields {
  bool sign;             // true for negative
  uint32_t exponent;     // raw biased exponent field
  uint32_t mantissa;     // raw mantissa field
  int unbiasedExponent;  // exponent of the leading bit; subnormals report the minimum normal exponent
  FpClass cls;
};

Fields decompose(const Format& f, uint32_t bits);
FpClass classify(const Format& f, uint32_t bits);
bool isNaN(const Format& f, uint32_t bits);

enum class BitField { Sign, Exponent, Mantissa };
const char* fieldName(BitField b);
// Which field bit `bit` (0 = mantissa LSB) belongs to; throws std::out_of_range past the width.
BitField fieldOf(const Format& f, int bit);
// XOR of one bit or of a mask; throws std::out_of_range when the bit or mask leaves the format.
uint32_t flipBit(const Format& f, uint32_t bits, int bit);
uint32_t flipBits(const Format& f, uint32_t bits, uint32_t mask);

uint32_t maxFinite(const Format& f);      // bit pattern of the largest positive finite value
uint32_t canonicalNaN(const Format& f);   // positive quiet NaN (FiniteOnly formats have none: their largest value)
std::optional<uint32_t> infinity(const Format& f);  // none for E4M3

enum class Overflow {
  Standard,  // beyond the largest finite value after rounding: Inf, or NaN where the format has no Inf
  Saturate,  // clamp to the largest finite value (OCP "satfinite"); Inf saturates too
};

// fp32 -> format with round-to-nearest-even, subnormals included. NaN stays NaN (canonical quiet NaN, sign kept;
// FiniteOnly formats, which have no NaN, give their largest magnitude). FiniteOnly formats saturate always.
uint32_t encode(const Format& f, float x, Overflow overflow = Overflow::Standard);
// format -> fp32, exact (every supported format embeds in binary32). NaN payload bits are kept.
float decode(const Format& f, uint32_t bits);
// fp32 rounded through the format and back.
inline float roundTo(const Format& f, float x, Overflow o = Overflow::Standard) { return decode(f, encode(f, x, o)); }
// roundTo over an array, in place. Formats with fp32's exponent range (bf16, tf32) take a fast path
// that rounds the fp32 encoding directly, narrower ones (fp16, fp8, fp6, fp4) one within their finite
// range; the results equal roundTo's for every input.
void roundInPlace(const Format& f, float* data, std::size_t count, Overflow o = Overflow::Standard);

inline uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

inline float floatOf(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

}  // namespace peat::fp
