// SPDX-License-Identifier: MIT
#include "core/analyzer/error_summary.h"

#include <algorithm>
#include <cmath>

#include "core/fp/format.h"
#include "core/fp/ulp.h"

namespace peat::analyzer {

ErrorSummary summarize(const float* golden, const float* candidate, uint64_t n) {
  ErrorSummary s;
  s.elements = n;
  double sumAbs = 0, sumRel = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t gb = fp::bitsOf(golden[i]), cb = fp::bitsOf(candidate[i]);
    if (gb == cb) continue;
    ++s.mismatched;
    const bool gFinite = std::isfinite(golden[i]), cFinite = std::isfinite(candidate[i]);
    if (gFinite && !cFinite) ++s.newlyNonFinite;
    const uint64_t ulp = fp::ulpDistance32(gb, cb);
    if (ulp != fp::kNanUlp && ulp > s.maxUlp) s.maxUlp = ulp;
    if (!gFinite || !cFinite) continue;
    const double abs = std::fabs(double(candidate[i]) - double(golden[i]));
    const double rel = abs / std::max(std::fabs(double(golden[i])), kRelFloor);
    sumAbs += abs;
    sumRel += rel;
    if (abs > s.maxAbs) {
      s.maxAbs = abs;
      s.maxAbsIndex = i;
    }
    if (rel > s.maxRel) s.maxRel = rel;
  }
  // Means run over all elements (identical ones contribute zero), so they compare across calls.
  if (n > 0) {
    s.meanAbs = sumAbs / double(n);
    s.meanRel = sumRel / double(n);
  }
  return s;
}

const std::vector<std::string>& errorSummaryColumns() {
  static const std::vector<std::string> c{"elements", "mismatched", "newly_non_finite", "max_abs", "mean_abs",
                                          "max_rel",  "mean_rel",   "max_ulp",          "max_abs_index"};
  return c;
}

std::vector<double> errorSummaryValues(const ErrorSummary& s) {
  return {double(s.elements), double(s.mismatched), double(s.newlyNonFinite), s.maxAbs, s.meanAbs,
          s.maxRel,           s.meanRel,            double(s.maxUlp),         double(s.maxAbsIndex)};
}

}  // namespace peat::analyzer
