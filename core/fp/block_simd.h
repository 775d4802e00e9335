// SPDX-License-Identifier: MIT
#pragma once
// The block quantiser's element loop (core/fp/block.cpp), vectorised with Highway (the target chosen
// per CPU at run time): each finite value x of a block becomes round(x / step) * step, the rounding
// ElementRounder's (nearest even, saturating), so every target gives the scalar loop's bits.
#include <algorithm>
#include <cstdint>

#include "core/fp/format.h"

namespace peat::fp::detail {

struct RoundingParameters {
  uint32_t shift;      // fp32 mantissa bits the element drops
  float minNormal;     // the element's smallest normal
  float magic;         // 2^23 times its subnormal spacing
  uint32_t maxBits;    // fp32 pattern of its largest magnitude
  float elementMax;    // that magnitude
};

// One finite value, as each vector lane rounds it (ElementRounder's operator(), the loop's tail):
// both roundings, then a select, so that data whose magnitudes vary mispredicts no branch.
inline float roundElement(float x, const RoundingParameters& p) {
  const uint32_t sign = bitsOf(x) & 0x80000000u;
  const float a = floatOf(bitsOf(x) ^ sign);
  // the element's subnormals are the multiples of 2^(emin - m): adding 2^23 of them rounds there,
  // nearest even (fp32 arithmetic, no contraction: -ffp-contract=off)
  const float subnormal = (a + p.magic) - p.magic;
  uint32_t u = bitsOf(a);
  u = (u + (uint32_t(1) << (p.shift - 1)) - 1 + ((u >> p.shift) & 1u)) & ~((uint32_t(1) << p.shift) - 1);
  const uint32_t small = uint32_t(0) - uint32_t(a < p.minNormal);  // all ones where a is below the normals
  // past Inf's pattern only for a near FLT_MAX: the integer min saturates it like any other
  const uint32_t r = std::min((bitsOf(subnormal) & small) | (u & ~small), p.maxBits);
  return floatOf(r | sign);
}

struct RoundingCounts {
  uint64_t saturated = 0, flushed = 0;  // |x / step| beyond the largest element; nonzero x that became 0
};

// For each block b of `block` consecutive values (the last may be shorter) with steps[b] > 0, every
// value becomes round(x / steps[b]) * steps[b]; blocks with steps[b] <= 0 are left alone. The values
// of those blocks must be finite. `powerOfTwo`: every step is a power of two, and x * (1 / step) is
// x / step exactly (MX); else it divides (NVFP4).
RoundingCounts scaleRoundBlocks(float* values, uint64_t count, uint64_t block, const float* steps, bool powerOfTwo,
                                const RoundingParameters& p);

// The largest |x| bit pattern (sign cleared) of each block: its amax, or >= 0x7f800000 with NaN or Inf.
void blockMaxMagnitudeBits(const float* values, uint64_t count, uint64_t block, uint32_t* out);

}  // namespace peat::fp::detail
