// SPDX-License-Identifier: MIT
// The detector's entry points and the order of its rules. Each rule is one row of
// docs/error-models.md (keep them in step); rules.h says where each one lives.
#include "core/detector/detector.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "core/detector/rules.h"

namespace peat::detector {

const std::vector<std::string>& verdictNames() {
  static const std::vector<std::string> names{"exact",        "precision_loss", "accumulation_order", "bit_flip",
                                              "multi_bit_flip", "stuck_at",     "random_value",       "zeroed",
                                              "index_error",  "nondeterministic", "nan_inf",          "scaling",
                                              "kernel_crash", "kernel_hang", "kernel_out_of_bounds",
                                              "kernel_out_of_memory", "unknown"};
  return names;
}

bool legitimateVerdict(const std::string& model) {
  return model == "exact" || model == "precision_loss" || model == "accumulation_order";
}

const char* verdictClass(const std::string& model) {
  if (legitimateVerdict(model)) return "legitimate";
  return model == "unknown" ? "unknown" : "error";
}

std::string verdictExplanation(const std::string& verdict) {
  static const std::map<std::string, std::string> text{
      {"exact", "Bit-identical to the golden kernel: nothing to explain."},
      {"precision_loss",
       "Dense, small errors whose size matches rounding to a narrower format (fp16, bf16, tf32, fp8): every product "
       "loses about 24 - p low bits. Typical of a kernel that computes in reduced precision, e.g. tensor cores or a "
       "mixed-precision path. When the recorded inputs are known, the format is confirmed by replaying them rounded."},
      {"accumulation_order",
       "A few ULPs of difference, within the worst-case bound of summing the same products in another order. A split-K, "
       "tree or reversed reduction gives this: harmless in itself, but it makes bit-exact comparisons fail."},
      {"bit_flip",
       "One or a few elements differ in exactly one bit, the same bit. Rounding changes many elements by small "
       "amounts; a single high bit flipped is a memory or register upset (or an injected fault)."},
      {"multi_bit_flip", "A few elements differ in one block of adjacent bits reaching the high mantissa or exponent: an "
                         "adjacent multi-bit upset."},
      {"stuck_at", "Every difference is the same bit forced to the same value, over many elements: a stuck-at fault "
                   "in a memory region or a data path."},
      {"random_value", "A few elements hold unrelated values (large relative errors, not single-bit): corrupted "
                       "writes or reads of the wrong address."},
      {"zeroed", "Every differing element reads exactly 0: part of the output was never written or was cleared "
                 "(a missing tail, an early exit, a skipped tile)."},
      {"index_error",
       "Large errors at a regular stride, in a band of rows or columns, or everywhere with a mean far above any "
       "rounding: an addressing bug (tile edges, a shifted row, a missing K tile)."},
      {"nondeterministic", "Two replays of the same input disagree: a race or an uninitialised read. A deterministic "
                           "kernel returns the same bits every time."},
      {"nan_inf", "Finite golden values became NaN or Inf: overflow in a narrower format, or a fault."},
      {"scaling", "The candidate is the golden output times one constant factor: a wrong alpha, scale or "
                  "normalisation."},
      {"unknown", "No documented rule holds: look at the histograms and the bit positions by hand."},
      {"kernel_crash", "The kernel crashed on this call in its kernel host (a signal, an abort, or an exit): there "
                       "is no output to compare. Replay the call alone with peat playback --call and its shapes."},
      {"kernel_hang", "The kernel did not return within its time-out on this call and its kernel host was stopped."},
      {"kernel_out_of_bounds", "The kernel wrote outside its output (into a guard page, a canary, or a read-only "
                               "input) on this call: a buffer overrun, usually a tile-edge or stride bug."},
      {"kernel_out_of_memory", "An allocation of the kernel failed under its kernel host's memory limit "
                               "(PEAT_KERNEL_MEMORY_MIB) on this call, and the kernel then crashed or returned an "
                               "error: a workspace sized from the shapes, a leak across calls, or an unbounded "
                               "allocation."}};
  const auto it = text.find(verdict);
  return it == text.end() ? std::string() : it->second;
}

namespace rules {

namespace {

// No rule held for a pair that mismatches.
void nothingHolds(RuleContext& x) {
  if (!x.found.empty()) return;
  Verdict v = make("unknown", 0.2, "no rule of docs/error-models.md holds");
  v.evidence["median_log2_ulp"] = x.ulpMedian;
  x.add(v);
}

// The rules for a pair that mismatches, in the documented order. The order matters twice: verdicts of
// equal confidence rank in it, and a rule may read what an earlier one decided (R9b reads R12's
// x.bounded and x.blocksReplayed, R10/R11 reads x.bounded and R10b's x.grid). A new rule goes where
// what it reads and its ties put it.
const Rule kMismatchRules[] = {
    nanInf,              // R2   finite golden values became NaN or Inf
    stuckAt,             // R3   one bit forced to one value everywhere
    bitFlip,             // R4   a few elements, one bit each
    multiBitFlip,        // R5   a few elements, one block of adjacent bits each
    zeroed,              // R6   every mismatch reads 0
    scaling,             // R7   c = s g
    scaleOnRounding,     // R7b  c = s g up to rounding (after R7: only when R7 found no exact factor)
    channelScaling,      // R7c  c = s_j g per column (or row) up to rounding (after R7, R7b: no one factor)
    randomValue,         // R8   large errors without structure
    confinedIndexError,  // R9   large errors periodic or confined to rows / columns
    exactRowsAmidLarge,  // R9c  whole rows exact, the others far off
    gemmReplay,          // R12  the GEMM's operands: bounds and replays
    missingReduction,    // R9b  dense errors beyond any format's rounding
    quantisedOutput,     // R10b the output on a 4-bit block-scaled grid
    denseRounding,       // R10/R11 dense small errors: which rounding, or reordering
    nothingHolds,        // unknown, last
};

}  // namespace

Detection detectOne(const float* golden, const std::vector<const float*>& candidates, const std::vector<uint64_t>& shape,
                    const analyzer::ReportOptions& options, const GemmBound* bound, analyzer::Report* report) {
  analyzer::Report local;
  analyzer::Report& r = report ? *report : local;
  r = analyzer::analyze(golden, candidates.front(), shape, options);
  RuleContext x(golden, candidates, shape, bound, r);
  x.options = options;
  nondeterministic(x);  // R1, before R0: replays that disagree make "exact" less sure
  if (x.mis == 0) {
    exact(x);  // R0
  } else {
    x.inspectMismatches();
    for (const Rule rule : kMismatchRules) rule(x);
  }
  std::stable_sort(x.found.begin(), x.found.end(),
                   [](const Verdict& a, const Verdict& b) { return a.confidence > b.confidence; });
  Detection d;
  d.verdict = x.found.front();
  d.alternatives.assign(x.found.begin() + 1, x.found.end());
  for (const auto& [model, finding] : x.findingOf)
    if (model == d.verdict.model) d.findings.push_back(finding);
  return d;
}

}  // namespace rules

// Every rule on the pair, then R13 and R13b (rules_outliers.cpp): a fault in a few elements on top of
// legitimate dense errors is named as the fault, with the rounding beside it as a finding; or, for
// several replays, R1b and R1c (rules_exact.cpp): replays that differ only by stochastic rounding, or
// only by their summation order.
Detection detect(const float* golden, const std::vector<const float*>& candidates, const std::vector<uint64_t>& shape,
                 const analyzer::ReportOptions& options, const GemmBound* bound) {
  if (candidates.empty()) throw std::invalid_argument("detect needs at least one candidate");
  analyzer::Report report;
  Detection d = rules::detectOne(golden, candidates, shape, options, bound, &report);
  if (candidates.size() != 1)
    return rules::reorderedReplays(rules::stochasticRounding(d, golden, candidates, report.elements), golden,
                                   candidates, shape, options, bound);
  if (d.verdict.model == "exact") return d;
  d = rules::outliersOnBulk(d, golden, candidates.front(), shape, options, bound, report);
  return rules::outliersOnGridReplay(d, golden, candidates.front(), report.elements, report.maxRel);
}

}  // namespace peat::detector
