// SPDX-License-Identifier: MIT
#include "core/analyzer/criteria.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace peat::analyzer {

namespace {

// One unit in the last place of fp32 at |g|: 2^(e - 23) for a normal g of exponent e, 2^-149 below.
double ulpOf(float g) {
  const float a = std::fabs(g);
  if (a < std::numeric_limits<float>::min()) return std::ldexp(1.0, -149);
  int e = 0;
  std::frexp(a, &e);  // a = f 2^e, f in [0.5, 1)
  return std::ldexp(1.0, e - 24);
}

}  // namespace

Criteria criteria(const float* golden, const float* candidate, uint64_t n) {
  Criteria out;
  out.elements = n;
  double gg = 0, cc = 0, gc = 0;
  uint64_t above2 = 0, above3 = 0, above4 = 0, finitePairs = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const float g = golden[i], c = candidate[i];
    if (!std::isfinite(g) || !std::isfinite(c)) {
      ++out.nonFinite;
      continue;
    }
    ++finitePairs;
    gg += double(g) * g, cc += double(c) * c, gc += double(g) * c;
    const double abs = std::fabs(double(c) - double(g));
    out.maxAbs = std::max(out.maxAbs, abs);
    const double rel = abs == 0 ? 0 : g == 0 ? std::numeric_limits<double>::infinity() : abs / std::fabs(double(g));
    out.maxRel = std::max(out.maxRel, rel);
    above2 += rel > 1e-2, above3 += rel > 1e-3, above4 += rel > 1e-4;
    out.maxUlp = std::max(out.maxUlp, abs / ulpOf(g));
  }
  out.cosine = gg == 0 && cc == 0 ? 1.0 : gg == 0 || cc == 0 ? 0.0 : gc / std::sqrt(gg * cc);
  if (finitePairs) {
    out.relAbove2 = double(above2) / double(finitePairs);
    out.relAbove3 = double(above3) / double(finitePairs);
    out.relAbove4 = double(above4) / double(finitePairs);
  }
  return out;
}

void applyReferenceRule(Criteria& c, const float* candidate, const double* exact, const double* reference, uint64_t n,
                        const std::string& referenceName) {
  double cand = 0, ref = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (!std::isfinite(exact[i])) continue;
    const double dc = std::fabs(double(candidate[i]) - exact[i]), dr = std::fabs(reference[i] - exact[i]);
    cand = std::isfinite(dc) ? std::max(cand, dc) : std::numeric_limits<double>::infinity();
    // a reference that is not finite where float64 is would excuse any candidate (inf <= inf): such
    // elements judge the candidate alone
    if (std::isfinite(dr)) ref = std::max(ref, dr);
  }
  c.ruleEvaluated = true;
  c.candidateError = cand;
  c.referenceError = ref;
  c.reference = referenceName;
}

}  // namespace peat::analyzer
