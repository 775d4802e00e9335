// SPDX-License-Identifier: MIT
#pragma once
// SAVE's bit properties of an fp32 value known to lie in [lo, hi]:
//  - ranging: bits equal for every fp32 value in the range (the sign when the range keeps one sign,
//    and the leading exponent bits); flipping one takes the value out of the range, so a range
//    check catches it;
//  - robust (value): a mantissa bit whose flip moves the value by less than tau anywhere in the
//    range (the move is largest at the bound of largest magnitude); with a relative tolerance, by
//    less than tau + rtol |value| for every value of the range;
//  - robust (operator): a bit the next op makes irrelevant; for a value that a following ReLU
//    always maps to 0 (hi <= 0), every bit but the sign;
//  - vulnerable: the rest. A type-1 value has no vulnerable bit; a type-2 value has at least one.
#include <cstdint>

namespace peat::save {

enum class BitClass : uint8_t { Robust = 0, Ranging = 1, Vulnerable = 2 };

struct BitProperties {
  uint32_t ranging = 0, robust = 0, vulnerable = 0;  // masks over the 32 bit positions (bit 31: sign)
  bool type2() const { return vulnerable != 0; }
  BitClass classOf(int bit) const;
};

struct BitContext {
  double tau = 1e-5;
  bool nextIsRelu = false;  // the value feeds a ReLU (and nothing else)
  // tau bounds any bit's move, not only the mantissa's: a sign or exponent bit is robust too when
  // its largest move over the range stays below tau (the output criterion's per-value allowance)
  bool anyBit = false;
  // A relative tolerance on top of tau (numpy's isclose): a mantissa bit is robust when its flip
  // moves every value v of the range by less than tau + rtol |v|. 0: the paper's absolute tau.
  double rtol = 0;
};

// The largest |flip(x, bit) - x| over the fp32 values x in [lo, hi] (infinity where the flip can
// reach an infinity or a NaN).
double largestMove(double lo, double hi, int bit);

BitProperties classifyBits(double lo, double hi, const BitContext& context);

// The same for a known single value (a weight): ranging bits are checked against the clean copy,
// so only value-robust bits (a flip moves it by less than tau + rtol |value|) and vulnerable ones
// are told apart.
BitProperties classifyWeightBits(float value, double tau, double rtol = 0);

}  // namespace peat::save
