// SPDX-License-Identifier: MIT
// Faults in the bits of a few elements: a stuck bit, one flipped bit, a block of adjacent bits (R3-R5).
#include "core/detector/rules.h"

namespace peat::detector::rules {

// R3 stuck_at: every mismatch is the same single bit forced to the same value, more than once.
// The confidence allows for chance: k random flips of one bit all land on the same value with
// probability 2^(1-k), so two or three such mismatches are weak evidence of a stuck bit.
void stuckAt(RuleContext& x) {
  const Mismatches& m = x.m;
  const uint64_t mis = x.mis;
  if (m.allSingleBit && m.sameBit && m.sameNewValue && mis >= 2) {
    Verdict v = make("stuck_at", 0.93 * (1 - std::ldexp(1.0, 1 - int(std::min<uint64_t>(mis, 60)))),
                     "bit " + std::to_string(m.bit) + " reads " + std::to_string(m.newValue) + " in all " +
                         std::to_string(mis) + " mismatched elements");
    v.parameters["bit"] = std::to_string(m.bit);
    v.parameters["value"] = std::to_string(m.newValue);
    v.evidence["bit"] = m.bit;
    v.evidence["longest_run"] = double(x.r.longestRun);
    x.add(v);
  }
}

// R4 bit_flip: a few elements, each off by one bit, and not a rounding-sized bit.
void bitFlip(RuleContext& x) {
  const Mismatches& m = x.m;
  const uint64_t mis = x.mis;
  if (!(x.sparse && m.allSingleBit)) return;
  // A flip of a low mantissa bit in one or two elements looks like a one-ULP rounding change too.
  const bool lowBit = m.highestBit < 8;
  if (!lowBit || mis <= 2) {
    Verdict v = make("bit_flip", lowBit ? 0.6 : (mis == 1 ? 0.95 : (m.sameBit ? 0.85 : 0.75)),
                     std::to_string(mis) + " element(s) differ in one bit (bit " + std::to_string(m.bit) + ")");
    v.parameters["bit"] = std::to_string(m.bit);
    v.evidence["bit"] = m.bit;
    x.add(v);
    if (lowBit) {
      Verdict a = make("accumulation_order", 0.5, "a change of a low mantissa bit can also come from rounding");
      x.add(a);
    }
  }
}

// R5 multi_bit_flip: a few elements, each off by one block of adjacent bits reaching high bits.
void multiBitFlip(RuleContext& x) {
  const Mismatches& m = x.m;
  if (x.sparse && !m.allSingleBit && m.allContiguousBits && m.highestBit >= 12) {
    Verdict v = make("multi_bit_flip", 0.85,
                     std::to_string(x.mis) + " element(s) differ in adjacent bits up to bit " +
                         std::to_string(m.highestBit));
    v.evidence["highest_bit"] = m.highestBit;
    x.add(v);
  }
}

}  // namespace peat::detector::rules
