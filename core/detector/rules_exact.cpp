// SPDX-License-Identifier: MIT
// Whether the candidate is the golden output bit for bit, and whether its replays agree (R0, R1).
#include <algorithm>

#include "core/detector/rules.h"

namespace peat::detector::rules {

// R1 nondeterministic: replays of the same input disagree with each other.
void nondeterministic(RuleContext& x) {
  for (std::size_t k = 1; k < x.candidates.size(); ++k) {
    uint64_t differ = 0;
    for (uint64_t i = 0; i < x.n; ++i) differ += fp::bitsOf(x.candidates[k][i]) != fp::bitsOf(x.c[i]) ? 1 : 0;
    if (differ > 0) {
      Verdict v = make("nondeterministic", 0.97,
                       "replays of the same input differ in " + std::to_string(differ) + " elements");
      v.evidence["replays"] = double(x.candidates.size());
      v.evidence["elements_differing_between_replays"] = double(differ);
      x.add(v);
      break;
    }
  }
}

// R0 exact (run only when nothing mismatches): less sure when the replays disagree.
void exact(RuleContext& x) {
  Verdict v = make("exact", x.found.empty() ? 1.0 : 0.5, "bit-identical to golden");
  x.add(v);
}

float formatStep(const fp::Format& f, float x, bool up) {
  if (x == 0.0f) return fp::decode(f, up ? 1u : (f.signMask() | 1u));
  uint32_t b = fp::encode(f, x);
  const bool negative = (b & f.signMask()) != 0;
  b = up != negative ? b + 1 : b - 1;  // toward +inf grows a positive magnitude, shrinks a negative one
  return fp::decode(f, b);
}

bool withinOneStep(const fp::Format& f, float g, float v) {
  if (!finite(g) || !finite(v)) return fp::bitsOf(g) == fp::bitsOf(v);
  if (fp::bitsOf(fp::roundTo(f, v)) != fp::bitsOf(v)) return false;
  const float r = fp::roundTo(f, g);
  if (v == r) return true;
  if (r == g) return false;  // g is on the grid: rounding in either direction gives g
  return v == formatStep(f, r, g > r);  // the grid point on g's other side
}

// R1b: replays of one input that differ only by where each value was rounded. Stochastic rounding
// (a kernel that rounds up or down at random, with odds by the distance, as low-precision training
// does) gives runs that differ by design; each run alone is still within its format's rounding:
// every value on the format's grid, and no grid point between it and golden. Then the legitimate
// reading comes first (precision_loss, rounding = stochastic) and the nondeterminism beside it; a race
// in an fp32 kernel puts its values on no narrower grid and stays nondeterministic.
Detection stochasticRounding(const Detection& d, const float* golden, const std::vector<const float*>& candidates,
                             uint64_t n) {
  if (d.verdict.model != "nondeterministic" || n == 0) return d;
  static const fp::Format order[] = {fp::kE4M3, fp::kE5M2, fp::kBf16, fp::kFp16, fp::kTf32};
  for (const fp::Format& f : order) {
    bool holds = true;
    uint64_t off = 0;  // elements not at golden's nearest grid point: rounded the other way
    for (const float* c : candidates)
      for (uint64_t i = 0; i < n && holds; ++i) {
        if (!withinOneStep(f, golden[i], c[i])) holds = false;
        else if (fp::bitsOf(c[i]) != fp::bitsOf(fp::roundTo(f, golden[i]))) ++off;
      }
    if (!holds || off == 0) continue;
    const std::string id = f.name == std::string_view("e4m3")   ? "fp8_e4m3"
                           : f.name == std::string_view("e5m2") ? "fp8_e5m2"
                                                                : std::string(f.name);
    Verdict v = make("precision_loss", 0.98,
                     "each of the " + std::to_string(candidates.size()) + " runs lies on " + id +
                         "'s grid with no grid point between it and golden, rounded up or down at random: "
                         "stochastic rounding (the runs differ by design)");
    v.parameters["format"] = id;
    v.parameters["rounding"] = "stochastic";
    v.evidence["replays"] = double(candidates.size());
    v.evidence["elements"] = double(n);
    v.evidence["away_from_nearest"] = double(off);
    return supersede(v, d.verdict, d);
  }
  return d;
}

// R1c: replays that differ, each of them alone within another summation order of golden. A kernel
// whose reduction order changes from run to run (split-K partials added with atomics, a scatter-add)
// is nondeterministic by design and correct in every run; a race that reads stale or uninitialised
// data leaves some run with errors beyond any reordering (its own verdict is then index_error,
// random_value, zeroed ...), and stays nondeterministic.
Detection reorderedReplays(const Detection& d, const float* golden, const std::vector<const float*>& candidates,
                           const std::vector<uint64_t>& shape, const analyzer::ReportOptions& options,
                           const GemmBound* bound) {
  if (d.verdict.model != "nondeterministic") return d;
  double confidence = 1;
  bool reproduced = true;  // every run alone reproduced as a reordering (a bound on the operands), or exact
  for (const float* c : candidates) {
    const Detection alone = detect(golden, {c}, shape, options, bound);
    const std::string& model = alone.verdict.model;
    const bool sized = model == "unknown" && alone.verdict.parameters.count("closest") &&
                       alone.verdict.parameters.at("closest") == "accumulation_order";
    if (model != "exact" && model != "accumulation_order" && !sized) return d;
    reproduced = reproduced && !sized;
    confidence = std::min(confidence, alone.verdict.confidence);
  }
  const double differing = d.verdict.evidence.count("elements_differing_between_replays")
                               ? d.verdict.evidence.at("elements_differing_between_replays")
                               : 0.0;
  if (!reproduced) {  // the size of a reordering, from the outputs alone: the likely reading, not a verdict
    Verdict v = make("unknown", std::max(0.9, confidence),
                     "the " + std::to_string(candidates.size()) +
                         " runs differ from each other, each alone by errors the size of another summation order (a "
                         "reduction whose order changes from run to run, atomic adds), but only the outputs are known: "
                         "record the call's operands and the bound settles it");
    v.parameters["closest"] = "accumulation_order";
    v.parameters["order"] = "nondeterministic";
    v.evidence["replays"] = double(candidates.size());
    v.evidence["elements_differing_between_replays"] = differing;
    return supersede(v, d.verdict, d);
  }
  Verdict v = make("accumulation_order", std::max(0.9, confidence),
                   "each of the " + std::to_string(candidates.size()) +
                       " runs alone is golden summed in another order, and the runs differ from each other: a "
                       "reduction whose order changes from run to run (atomic adds), correct in every run");
  v.parameters["order"] = "nondeterministic";
  v.evidence["replays"] = double(candidates.size());
  v.evidence["elements_differing_between_replays"] = differing;
  return supersede(v, d.verdict, d);
}

}  // namespace peat::detector::rules
