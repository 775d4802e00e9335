// SPDX-License-Identifier: MIT
#pragma once
// SAVE's mixed-precision verification of a linear or conv output y = b + sum_t w_t x_t. Every
// product is rebuilt from its operands' parts: the sign by XOR, the exponent by addition, and the
// mantissa as a 16 x 16-bit integer product of the top 16 significand bits (the dropped low bits
// move only the result's low, robust bits). The products are aligned to the largest exponent and
// summed exactly in 64-bit integers (vectorised with Highway); the bias is added in double.
//
// The computed fp32 y must lie within a sound bound of that sum: the mantissa truncation
// (< 2^-14 sum |w x|), one unit of the alignment per product, and the fp32 run's own rounding
// (gamma_{K+1} (|b| + sum |w x|)); sum |w x| itself comes from the same integer pass. A fault is
// detected when it moves y by more than the bound: changes below it are the kind a robust bit
// makes when the bound is below tau.
#include <cstdint>
#include <vector>

#include "core/save/graph.h"
#include "core/save/ranges.h"

namespace peat::save {

// fp32 values split into 16-bit mantissas (significand >> 8), biased exponents (1 for zero and
// subnormals, as the encoding reads them) and sign masks (0 or all ones), one 64-bit lane each.
struct MixedOperands {
  std::vector<uint64_t> mant, sign;
  std::vector<int64_t> exp;
  void assign(const float* values, int64_t n);
  bool finite = true;  // false when a value is Inf or NaN
};

class MixedChecker {
 public:
  // Node `node` of `g` (linear or conv2d); `input` is the analysed range of its input.
  MixedChecker(const Graph& g, int node, const NodeRange& input);
  // The largest bound over the analysed ranges (for choosing a verifier per op).
  double worstTolerance() const { return worst_; }
  // True when any output element of the `batch` samples whose `mask` entry is non-zero (one
  // sample's elements) is further from its integer recomputation than the bound. `x`: the
  // op's input for the batch; `y`: its output.
  bool mismatch(const float* x, const float* y, int64_t batch, const std::vector<uint32_t>& mask);
  // The same for single elements (few to check): element indices of one sample.
  bool mismatchAt(const float* x, const float* y, int64_t batch, const std::vector<int64_t>& elements);

 private:
  bool outside(double y, double bias, int64_t acc, uint64_t abs, int64_t emax) const;
  const Node& n_;
  const Node& src_;
  int64_t taps_ = 0, channels_ = 0;
  MixedOperands w_;  // the weights, [channels][taps]
  double subnormal_ = 0, worst_ = 0;
  MixedOperands cols_;
  std::vector<float> unfolded_;
  std::vector<int64_t> acc_, emax_;
  std::vector<uint64_t> abs_;
};

namespace detail {
// One product, aligned to emax: the 32-bit mantissa product shifted right by (emax - we - xe) (a
// shift past its width leaves nothing), added with its sign to acc and without it to abs.
inline void mixedStep(uint64_t wm, int64_t we, uint64_t ws, uint64_t xm, int64_t xe, uint64_t xs, int64_t emax,
                      int64_t& acc, uint64_t& abs) {
  const int64_t shift = emax - (we + xe);
  const uint64_t term = (wm * xm) >> (shift < 63 ? shift : 63);
  const uint64_t m = ws ^ xs;
  acc += int64_t((term ^ m) - m);
  abs += term;
}

// For one weight row (taps) against operand columns cols[t * positions + p]: per position p, the
// largest exponent sum emax[p], and the exact sums, in units of 2^(emax[p] - 284), of the signed
// (acc) and absolute (abs) aligned 16 x 16-bit mantissa products.
void mixedDot(const uint64_t* wm, const int64_t* we, const uint64_t* ws, int64_t taps, const uint64_t* xm,
              const int64_t* xe, const uint64_t* xs, int64_t positions, int64_t* acc, uint64_t* abs, int64_t* emax);
}  // namespace detail

}  // namespace peat::save
