// SPDX-License-Identifier: MIT
#include "core/save/bits.h"

#include <array>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/fp/format.h"

namespace peat::save {

namespace {

using fp::bitsOf;

// The largest float <= v and the smallest float >= v.
float floatDown(double v) {
  float f = float(v);
  if (double(f) > v) f = std::nextafter(f, -std::numeric_limits<float>::infinity());
  return f;
}
float floatUp(double v) {
  float f = float(v);
  if (double(f) < v) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  return f;
}

// Leading bits that a and b share, as a mask (a and b are non-negative patterns).
uint32_t commonPrefix(uint32_t a, uint32_t b) {
  const uint32_t diff = a ^ b;
  if (diff == 0) return 0xffffffffu;
  const int highest = 31 - __builtin_clz(diff);
  return highest == 31 ? 0u : ~((uint32_t(1) << (highest + 1)) - 1);
}

// 2^k, exactly as std::ldexp(1.0, k) gives it, for the normal doubles' exponents (every k used
// here lies in [-149, 127]); built from the bits because libm's ldexp was a fifth of a ResNet-50
// selection's time.
double powerOfTwo(int k) {
  const uint64_t bits = uint64_t(k + 1023) << 52;
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// Mantissa bits whose flip moves every value with biased exponent at most `exponent` by less than
// tau + rtol |value|. In binade e (|v| >= 2^(e - 127)) bit j moves v by 2^(e - 150 + j), so the
// margin 2^(e - 127) (2^(j - 23) - rtol) - tau is largest in the top binade when 2^(j - 23) >= rtol
// (`top`, computed in double as a checker computes tau + rtol |v|: at a power of two the move equals
// rtol |v| and only tau keeps it below), and below zero in every binade when 2^(j - 23) < rtol.
// Zero and the subnormals (|v| may be 0) move by 2^(j - 149), which tau alone must cover when the
// range reaches them (`reachesTiny`).
uint32_t valueRobustOf(int exponent, double tau, double rtol, bool reachesTiny) {
  const int e = exponent == 0 ? 1 : exponent;  // subnormals step like exponent 1
  uint32_t mask = 0;
  for (int j = 0; j < 23; ++j) {
    const double unit = powerOfTwo(j - 23);
    const bool top = powerOfTwo(e - 150 + j) < tau + rtol * powerOfTwo(e - 127);
    const bool tiny = !reachesTiny || powerOfTwo(j - 149) < tau;
    if ((unit < rtol || top) && tiny) mask |= uint32_t(1) << j;
  }
  return mask;
}

// valueRobustOf, remembered per thread for the last (tau, rtol): the value criterion asks the same
// two for every element of a model, and only 512 (exponent, reachesTiny) pairs exist.
uint32_t valueRobust(int exponent, double tau, double rtol, bool reachesTiny) {
  struct Memo {
    double tau = -1, rtol = -1;
    uint32_t generation = 0;
    std::array<uint32_t, 512> seen{}, mask{};  // seen: the generation an entry was computed in
  };
  thread_local Memo memo;
  if (tau != memo.tau || rtol != memo.rtol) {  // (never equal to a NaN: such a call is never kept)
    memo.tau = tau;
    memo.rtol = rtol;
    if (++memo.generation == 0) {  // wrapped: forget every entry
      memo.seen.fill(0);
      memo.generation = 1;
    }
  }
  const std::size_t at = std::size_t(exponent & 0xff) * 2 + (reachesTiny ? 1 : 0);
  if (memo.seen[at] != memo.generation) {
    memo.mask[at] = valueRobustOf(exponent, tau, rtol, reachesTiny);
    memo.seen[at] = memo.generation;
  }
  return memo.mask[at];
}

}  // namespace

double largestMove(double lo, double hi, int bit) {
  const double mag = std::max(std::fabs(lo), std::fabs(hi));
  if (!std::isfinite(mag)) return std::numeric_limits<double>::infinity();
  if (bit == 31) return 2 * mag;
  if (bit < 23) {  // a mantissa bit: one unit of it at the largest exponent
    const float top = floatUp(mag);
    const int e = std::max(1, int((bitsOf(top) >> 23) & 0xff));
    return std::ldexp(1.0, e - 150 + bit);
  }
  // exponent bit j: clearing it shrinks |x|; setting it multiplies |x| by 2^(2^j) (a subnormal
  // becomes at most 2^(2^j - 126)); an exponent that can reach 255 gives an infinity or a NaN
  const int j = bit - 23;
  const int top = int((bitsOf(floatUp(mag)) >> 23) & 0xff);
  if (top + (1 << j) >= 255) return std::numeric_limits<double>::infinity();
  return std::max(mag * (std::ldexp(1.0, 1 << j) - 1), std::ldexp(1.0, (1 << j) - 126));
}

BitClass BitProperties::classOf(int bit) const {
  const uint32_t m = uint32_t(1) << bit;
  if (robust & m) return BitClass::Robust;
  if (ranging & m) return BitClass::Ranging;
  return BitClass::Vulnerable;
}

BitProperties classifyBits(double lo, double hi, const BitContext& c) {
  const float flo = floatDown(lo), fhi = floatUp(hi);
  BitProperties p;
  uint32_t prefix;
  int exponent;
  if (flo >= 0) {
    prefix = commonPrefix(bitsOf(flo), bitsOf(fhi)) | 0x80000000u;
    exponent = int((bitsOf(fhi) >> 23) & 0xff);
  } else if (fhi <= 0) {
    prefix = commonPrefix(bitsOf(-fhi), bitsOf(-flo)) | 0x80000000u;
    exponent = int((bitsOf(-flo) >> 23) & 0xff);
  } else {
    const uint32_t m = std::max(bitsOf(-flo), bitsOf(fhi));
    prefix = commonPrefix(0, m) & 0x7fffffffu;  // bits above m's highest set bit: zero everywhere
    exponent = int((m >> 23) & 0xff);
  }
  if (!std::isfinite(flo) || !std::isfinite(fhi)) {  // an unbounded range checks nothing
    prefix = 0;
    exponent = 0xfe;
  }
  // An unbounded range holds infinities (a mantissa flip makes a NaN): tau alone, at the top exponent.
  const bool bounded = std::isfinite(flo) && std::isfinite(fhi);
  const bool reachesTiny = !bounded || !(flo >= FLT_MIN || fhi <= -FLT_MIN);  // |v| < 2^-126 is in the range
  uint32_t robust = valueRobust(exponent, c.tau, bounded ? c.rtol : 0, reachesTiny);
  if (c.anyBit && std::isfinite(flo) && std::isfinite(fhi))
    for (int b = 23; b < 32; ++b)
      if (largestMove(flo, fhi, b) < c.tau) robust |= uint32_t(1) << b;
  if (c.nextIsRelu && fhi <= 0) robust |= 0x7fffffffu;  // the ReLU maps it to 0 whatever these bits hold
  p.robust = robust;
  p.ranging = prefix & ~robust;
  p.vulnerable = ~(p.robust | p.ranging);
  return p;
}

BitProperties classifyWeightBits(float value, double tau, double rtol) {
  BitProperties p;
  const double margin = tau + rtol * std::fabs(double(value));  // the value is known: its own tolerance
  for (int j = 0; j < 23; ++j) {
    const float flipped = fp::floatOf(bitsOf(value) ^ (uint32_t(1) << j));
    if (std::fabs(double(flipped) - double(value)) < margin) p.robust |= uint32_t(1) << j;
  }
  p.vulnerable = ~p.robust;
  return p;
}

}  // namespace peat::save
