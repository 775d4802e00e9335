// SPDX-License-Identifier: MIT
#pragma once
// The detector's rules, private to core/detector. Each rule is one row of docs/error-models.md (keep
// them in step): it reads the facts about one golden / candidate pair (RuleContext) and adds a
// verdict when its sufficient condition holds. detector.cpp runs them in the documented order; to add
// a rule, declare it here, define it in the rules_*.cpp file for what it decides, and put it in
// detector.cpp's kMismatchRules where it belongs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/analyzer/report.h"
#include "core/detector/block_replay.h"
#include "core/detector/detector.h"
#include "core/fp/block.h"
#include "core/fp/format.h"

namespace peat::detector::rules {

// A detection whose verdict `v` takes the place of `d`'s: `finding` is shown as its finding, and
// `d`'s verdict, then `d`'s alternatives, stay as its alternatives.
inline Detection supersede(const Verdict& v, const Verdict& finding, const Detection& d) {
  Detection out;
  out.verdict = v;
  out.findings.push_back(finding);
  out.alternatives.push_back(d.verdict);
  out.alternatives.insert(out.alternatives.end(), d.alternatives.begin(), d.alternatives.end());
  return out;
}

// Facts about the mismatched elements that the report does not keep (mismatches.cpp).
struct Mismatches {
  uint64_t count = 0;
  bool allSingleBit = true, sameBit = true, sameNewValue = true, allZeroCandidate = true, allContiguousBits = true;
  bool allSubnormalGolden = true;  // every mismatched golden value is an fp32 subnormal (FTZ, R6)
  // bit, newValue (of the first single-bit mismatch) and sameBit, sameNewValue: read only where
  // allSingleBit holds (a dense pair's pass stops tracking them once it does not)
  int bit = -1, newValue = -1, highestBit = 0;
  std::vector<double> ratios;  // c / g where both are finite and |g| is normal
  // "Large" mismatches, above any fp32 reordering noise: |c - g| > golden rms * 2^-10.
  uint64_t large = 0, largeDominantGap = 0;
  double largeGapShare = 0;
  uint64_t largeRowsHit = 0, largeColsHit = 0;
  // which rows and columns the large mismatches hit (1: hit), for a confinement's evidence
  std::vector<char> largeRowHit, largeColHit;
};

// The lines hit, as ranges of consecutive indices: "0-3,7,60-63"; at most 64 ranges, then ",...".
std::string hitRanges(const std::vector<char>& hit);

// One pass over the pair (two ranges in parallel for large tensors), the same as one pass in order.
Mismatches inspect(const float* g, const float* c, uint64_t n, const analyzer::Report& r);

// Sums over each row and each column of the pair seen as [rows, cols] (finite pairs only), for the
// rules that ask whether the error depends on the channel (R7c, R9d). An axis with fewer than 2 or
// more than 2^20 lines is left empty.
struct ChannelSums {
  struct Axis {
    std::vector<double> g, gg, cg, cc, ee;  // per line: sum g, g^2, c g, c^2, (c - g)^2
    uint64_t samples = 0;                   // elements per line (the other axis' length)
  };
  Axis rows, cols;  // rows: one entry per row (its sums over the columns); cols: one per column
};
ChannelSums channelSums(const float* g, const float* c, uint64_t rows, uint64_t cols);

// Median floor(log2 ULP) over mismatched pairs: how many low bits a typical mismatch disturbs.
int medianLog2Ulp(const analyzer::Report& r);

// What every rule reads, and what earlier rules leave for later ones.
struct RuleContext {
  RuleContext(const float* golden_, const std::vector<const float*>& candidates_, const std::vector<uint64_t>& shape_,
              const GemmBound* bound_, const analyzer::Report& report)
      : golden(golden_), c(candidates_.front()), candidates(candidates_), shape(shape_), bound(bound_), r(report),
        n(report.elements), mis(report.mismatched), fraction(double(mis) / double(n)) {}

  // the pair
  const float* golden;
  const float* c;                                  // the first candidate, the one judged
  const std::vector<const float*>& candidates;     // every replay of it (R1)
  const std::vector<uint64_t>& shape;
  const GemmBound* bound;                          // the GEMM's operands when known, or null
  const analyzer::Report& r;                       // the analyzer's report of golden and c
  uint64_t n, mis;                                 // elements, mismatched elements
  double fraction;                                 // mis / n

  // facts about the mismatches, set (inspectMismatches) only where there are some
  Mismatches m;
  bool sparse = false;  // at most max(8, n / 1000) mismatches
  int ulpMedian = -1;   // medianLog2Ulp
  void inspectMismatches() {
    m = inspect(golden, c, n, r);
    sparse = mis <= std::max<uint64_t>(8, n / 1000);
    ulpMedian = medianLog2Ulp(r);
  }

  // per-row and per-column sums, made on first use (channelSums)
  std::optional<ChannelSums> channelSums_;
  const ChannelSums& channels() {
    if (!channelSums_) channelSums_ = channelSums(golden, c, r.rows, r.cols);
    return *channelSums_;
  }

  // decided by earlier rules, read by later ones
  bool zeroedOutput = false;    // R6: every mismatch reads 0 where golden is not (nor a subnormal, nor -0):
                                // no quantisation hypothesis is tried after it (R12, R10b, R10/R11)
  bool bounded = false;         // R12: a rounding bound or a replay explains the errors
  bool reproduced = false;      // R12: and its verdict is a legitimate one (a replay reproduced the candidate,
                                // or a bound held that the replays could not test); not fp8's loose bound alone
  bool blocksReplayed = false;  // R12: the block-scaled formats were replayed on the operands
  std::optional<OutputGrid> grid;  // R10b: the 4-bit block-scaled grid the output lies on

  analyzer::ReportOptions options;  // as detectOne got them: a rule that judges a repaired pair passes them on
  std::vector<Verdict> found;  // in the order the rules added them (ties keep it)
  // A rule that judges a repaired pair (R7b: the candidate with a scale divided out) leaves the
  // repaired pair's verdict here, shown as a finding when that rule's verdict comes out first.
  std::vector<std::pair<std::string, Verdict>> findingOf;
  // Adds `v` with the evidence every verdict carries.
  void add(Verdict v) {
    v.evidence["elements"] = double(n);
    v.evidence["mismatched"] = double(mis);
    v.evidence["max_abs_over_scale"] = r.maxAbsOverScale;
    found.push_back(std::move(v));
  }
};

using Rule = void (*)(RuleContext&);

// The rules, by the file that holds them.
void nondeterministic(RuleContext& x);   // R1   rules_exact.cpp
void exact(RuleContext& x);              // R0   rules_exact.cpp
void nanInf(RuleContext& x);             // R2   rules_nonfinite.cpp
void stuckAt(RuleContext& x);            // R3   rules_bitflip.cpp
void bitFlip(RuleContext& x);            // R4   rules_bitflip.cpp
void multiBitFlip(RuleContext& x);       // R5   rules_bitflip.cpp
void zeroed(RuleContext& x);             // R6   rules_values.cpp
void scaling(RuleContext& x);            // R7   rules_values.cpp
void scaleOnRounding(RuleContext& x);    // R7b  rules_values.cpp
void channelScaling(RuleContext& x);     // R7c  rules_values.cpp
void randomValue(RuleContext& x);        // R8   rules_confinement.cpp
void confinedIndexError(RuleContext& x); // R9   rules_confinement.cpp
void exactRowsAmidLarge(RuleContext& x); // R9c  rules_confinement.cpp
void gemmReplay(RuleContext& x);         // R12  rules_replay.cpp
void missingReduction(RuleContext& x);   // R9b  rules_reduction.cpp
void quantisedOutput(RuleContext& x);    // R10b rules_rounding.cpp
void denseRounding(RuleContext& x);      // R10/R11 rules_rounding.cpp

// Every rule on one pair (detector.cpp). `report`: where to leave the analyzer's report of the first
// candidate (R13 reads it), or null.
Detection detectOne(const float* golden, const std::vector<const float*>& candidates, const std::vector<uint64_t>& shape,
                    const analyzer::ReportOptions& options, const GemmBound* bound, analyzer::Report* report = nullptr);

// R13 (rules_outliers.cpp): `d`, or a fault in a few elements on top of legitimate dense errors.
Detection outliersOnBulk(const Detection& d, const float* golden, const float* c, const std::vector<uint64_t>& shape,
                         const analyzer::ReportOptions& options, const GemmBound* bound, const analyzer::Report& report);

// R1b (rules_exact.cpp): replays that differ, each on one format's grid within one of its steps
// of golden (stochastic rounding), are precision loss first, with the nondeterminism beside it.
Detection stochasticRounding(const Detection& d, const float* golden, const std::vector<const float*>& candidates,
                             uint64_t n);

// R1c (rules_exact.cpp): replays that differ, each of them on its own another summation order of
// golden's (exact or accumulation_order), are accumulation_order first, with the nondeterminism
// beside it: a reduction whose order changes from run to run (atomic adds of split-K partials).
Detection reorderedReplays(const Detection& d, const float* golden, const std::vector<const float*>& candidates,
                           const std::vector<uint64_t>& shape, const analyzer::ReportOptions& options,
                           const GemmBound* bound);

// R13b (rules_outliers.cpp): a candidate on a format's grid that equals golden rounded to it in all
// but a few elements, those few more than one step of the format away: the few are the fault.
// maxRel: the pair's largest relative error (the analyzer's), which skips the pass when no element
// is more than half a step of the named format off.
Detection outliersOnGridReplay(const Detection& d, const float* golden, const float* c, uint64_t n, double maxRel);

// The neighbours of x in a format (x representable in it): one step up or down, zero crossed.
float formatStep(const fp::Format& f, float x, bool up);
// Whether v is golden value g rounded to f in either direction: v on f's grid and no step of f
// between v and g.
bool withinOneStep(const fp::Format& f, float g, float v);

// Rounds v[0, m) to a format into out (the block quantiser's vectorised loop with a step of 1: the
// rounding ElementRounder gives, nearest even, saturating); non-finite values come out as some
// value of the format and are the caller's to skip. rules_rounding.cpp.
void roundChunk(const fp::ElementRounder& round, const float* v, float* out, uint64_t m);
constexpr uint64_t kRoundChunk = 4096;  // elements per roundChunk call in the passes over a tensor

// The rest of a pair once a fault's part is taken out (R7b, R7c, R13): a legitimate verdict, or
// errors of a legitimate difference's size that nothing reproduced (R10/R11's unknown, with the
// closest band as its `closest`). Either lets the fault be named; only the first is a reading of its
// own, and restReading says which it is.
inline bool roundingSized(const Detection& d) {
  const std::string& m = d.verdict.model;
  return m == "exact" || m == "precision_loss" || m == "accumulation_order" ||
         (m == "unknown" && d.verdict.parameters.count("closest"));
}
inline std::string restReading(const Detection& d) {
  if (d.verdict.model == "unknown") return "errors the size of " + d.verdict.parameters.at("closest") + " (not reproduced)";
  const auto format = d.verdict.parameters.find("format");
  return d.verdict.model + (format == d.verdict.parameters.end() ? "" : " (" + format->second + ")");
}

// Small shared helpers.
inline bool finite(float x) { return std::isfinite(x); }

// gamma_K for fp32 with K terms, golden and the candidate each reordering or rounding once per step:
// the worst-case reordering error of a GEMM's element is gamma sum_k |a||b| + 2^-23 |c| (R12, R10).
inline double reorderGamma(int64_t k) {
  const double u32 = std::ldexp(1.0, -24), kk = double(k);
  return 2 * kk * u32 / (1 - kk * u32);
}

inline std::string number(double v) {
  std::ostringstream s;
  s.precision(6);
  s << v;
  return s.str();
}

inline Verdict make(const std::string& model, double confidence, std::string explanation) {
  Verdict v;
  v.model = model;
  v.confidence = confidence;
  v.explanation = std::move(explanation);
  return v;
}

}  // namespace peat::detector::rules
