// SPDX-License-Identifier: MIT
#pragma once
// Per-call error numbers of a candidate against the golden output: the minimum the profiler
// stores for every replayed or substituted call. The analyzer issue builds the full report.
#include <cstdint>
#include <string>
#include <vector>

namespace peat::analyzer {

struct ErrorSummary {
  uint64_t elements = 0;
  uint64_t mismatched = 0;      // not bit-identical
  uint64_t newlyNonFinite = 0;  // finite in golden, NaN/Inf in candidate
  double maxAbs = 0;            // over elements where both are finite
  double meanAbs = 0;
  double maxRel = 0;            // |c - g| / max(|g|, kRelFloor)
  double meanRel = 0;
  uint64_t maxUlp = 0;          // fp32 ULP distance; NaN pairs are not counted here
  uint64_t maxAbsIndex = 0;     // flat index of the largest abs error
};

// Denominator floor of the relative error: the smallest normal fp32. Below it, relative error is
// meaningless (it explodes where values cancel); such elements count with this denominator.
inline constexpr double kRelFloor = 1.1754943508222875e-38;

ErrorSummary summarize(const float* golden, const float* candidate, uint64_t n);

// Column names and values in a fixed order, for tables in the session.
const std::vector<std::string>& errorSummaryColumns();
std::vector<double> errorSummaryValues(const ErrorSummary& s);

}  // namespace peat::analyzer
