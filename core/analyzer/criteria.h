// SPDX-License-Identifier: MIT
#pragma once
// The criteria kernel developers already apply beside a verdict (issue 41), computed by the same
// core for the CLI, the workbench and Python:
//  - msProbe's comparison metrics of a candidate against golden: cosine similarity, the largest
//    absolute and relative errors, the share of elements whose relative error exceeds 1e-2, 1e-3
//    and 1e-4, and the largest error in fp32 ULPs of golden;
//  - FlashAttention's (and torchtitan's) reference rule: the candidate's largest error against a
//    float64 recomputation of the call is at most twice that of PyTorch's own kernel, plus a floor
//    of 1e-5 (FlashAttention's tests: max|out - out_ref| <= 2 max|out_pt - out_ref| + 1e-5).
#include <cstdint>
#include <string>

namespace peat::analyzer {

struct Criteria {
  // msProbe's metrics, over the pairs where both values are finite (`nonFinite` counts the others)
  double cosine = 1;              // sum(g c) / (|g| |c|); 1 for two zero tensors
  double maxAbs = 0, maxRel = 0;  // |c - g|, and |c - g| / |g| (g = 0, c != 0: infinite)
  double relAbove2 = 0, relAbove3 = 0, relAbove4 = 0;  // shares with relative error > 1e-2, 1e-3, 1e-4
  double maxUlp = 0;              // the largest |c - g| in units of fp32's last place at g (msProbe's ULP error)
  uint64_t elements = 0, nonFinite = 0;
  // the reference rule, where the call could be recomputed in float64
  bool ruleEvaluated = false;
  double candidateError = 0;   // max |candidate - float64 recomputation|
  double referenceError = 0;   // max |PyTorch's kernel - float64 recomputation|
  std::string reference;       // what stood for PyTorch's kernel: "golden" (its fp32 kernel) or a format's replay
  static constexpr double kFloor = 1e-5;
  bool rulePasses() const { return candidateError <= 2 * referenceError + kFloor; }
};

// msProbe's metrics of `candidate` against `golden` (n elements each).
Criteria criteria(const float* golden, const float* candidate, uint64_t n);

// Adds the reference rule: `exact` is the call recomputed in float64, `reference` PyTorch's kernel's
// output (golden, or a format's replay standing for PyTorch's kernel in the candidate's format), named
// by `referenceName`. A non-finite candidate value counts as an infinite error; a non-finite reference
// value is left out of the reference's error (it must not excuse the candidate).
void applyReferenceRule(Criteria& c, const float* candidate, const double* exact, const double* reference, uint64_t n,
                        const std::string& referenceName);

}  // namespace peat::analyzer
