// SPDX-License-Identifier: MIT
#pragma once
// The home of one result kind, analysis runs: the analyzer and the detector over a session (every
// call a playback run stored, against the call the profiler recorded), with per-call numbers, their
// trend over iterations, and the stored reports and verdicts, written and read back here. It sits
// above both core/analyzer and core/detector, which know nothing of sessions.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/analyzer/criteria.h"
#include "core/analyzer/report.h"
#include "core/detector/detector.h"
#include "core/store/session.h"

namespace peat::analyzer {

struct CallAnalysis {
  std::string call;  // "iterations/000010/calls/000003"
  std::string layer, op;
  int64_t iteration = 0, callIndex = 0;
  int64_t variant = 0;  // the op's variant as recorded (0 forward; the gradients' numbers per op)
  Report report;
  detector::Detection detection;
  Criteria criteria;  // msProbe's metrics, and the reference rule where the call could be recomputed in float64
};

// A call the candidate kernel failed in its kernel host (crash, hang, out-of-bounds write): no
// output to analyse, a verdict of its own (kernel_crash, kernel_hang, kernel_out_of_bounds).
struct KernelFailure {
  std::string call, layer, op;
  int64_t iteration = 0, callIndex = 0;
  detector::Detection detection;
};

struct SessionAnalysis {
  std::string session, run, sourceRun, resultRun;
  std::vector<CallAnalysis> calls;
  std::vector<KernelFailure> failures;
  // read back from an analysis of the same run with the same settings (analyzeSession's `reuse`):
  // the verdicts' own findings beside them (R13's) and the alternatives' explanations are not stored
  bool reused = false;
  // Where the time went (none when reused): the call loop's wall seconds and its workers, and each
  // part's seconds summed over the workers: reading the calls' outputs, the analyzer's report and
  // criteria, reading the operands and building the GEMM bounds, the detector (its format replays),
  // the float64 recomputations of the 2x rule, and storing the result.
  struct Timing {
    double wall = 0, read = 0, analyzer = 0, operands = 0, detector = 0, reference = 0, store = 0;
    unsigned workers = 0;
  } timing;
};

// What an analysis was made with: its tile, the calls it covered and the version of the rules
// (kAnalysisRules, raised whenever a rule changes a verdict); stored as the run's "settings".
inline constexpr const char* kAnalysisRules = "2026-12-05";
std::string analysisSettings(const ReportOptions& options, const std::string& call);

// Hears each call's analysis in call order as it is stored (or read back, when reused), with the
// analysis so far (session, runs, the run it is stored as). With a sink, SessionAnalysis::calls
// stays empty and memory does not grow with the calls.
using CallSink = std::function<void(const SessionAnalysis& analysis, const CallAnalysis& call)>;

// `run` is a playback run made with --store-outputs; `call` (optional) limits it to one call path.
// Writes a run "analysis-<run>" (or `name`, refused when it exists) with a per-call table, one report
// per call and the verdicts. With `reuse`, an analysis of that run stored with the same settings is
// read back instead, and nothing is written. `progress` (optional) hears (calls done, calls in all)
// after each call, for the run panel's bar. `each` (optional): see CallSink; without it, the calls
// are returned in SessionAnalysis::calls, their reports' arrays (histograms, tile counts) dropped.
SessionAnalysis analyzeSession(const std::string& session, const std::string& run, const std::string& call,
                               const ReportOptions& options,
                               const std::function<void(int64_t done, int64_t total)>& progress = {},
                               bool reuse = false, const std::string& name = "", const CallSink& each = {});

// A call's report as analyzeSession stored it, read back for plots.
// A conv2d forward call as the GEMMs it is, one per group: A_g = im2col(x's channels of group g)
// [N Ho Wo, Cin/G kh kw], B_g = w_g^T [Cin/G kh kw, Cout/G] (+ bias), whose C_g is group g's output
// channels with the axes moved to [N Ho Wo, Cout/G]; the groups are stacked along the rows (a
// batched bound when G > 1, as for a depthwise conv). `toGemm` moves an output's values into that
// order; the detector then sees [G N Ho Wo, Cout/G].
struct ConvGemm {
  detector::GemmBound bound;
  uint64_t n = 0, cout = 0, positions = 0, groups = 1;  // positions: Ho Wo
  std::vector<float> toGemm(const std::vector<float>& y) const;
  std::vector<uint64_t> seenShape() const { return {groups * n * positions, cout / groups}; }
};
// x [N, Cin, H, W], w [Cout, Cin/G, kh, kw] and the call's params (stride, padding, dilation, their
// _w variants, groups; "variant" must be the forward); none when it does not map or would cost more
// than the call.
std::optional<ConvGemm> convGemm(const float* x, const std::vector<uint64_t>& xShape, const float* w,
                                 const std::vector<uint64_t>& wShape, const float* bias, std::size_t biasSize,
                                 const std::map<std::string, int64_t>& params, const std::vector<uint64_t>& outShape);

// A conv2d grad_weight call as the GEMMs it is, one per group: dW_g [Cout/G, Cin/G kh kw] =
// dY_g [Cout/G, N Ho Wo] x im2col(x's channels of group g)^T [N Ho Wo, Cin/G kh kw]. The recorded
// output [Cout, Cin/G, kh, kw] is already those GEMMs' rows stacked by group: the detector sees it
// as [Cout, Cin/G kh kw]. dy [N, Cout, Ho, Wo], x [N, Cin, H, W], the call's params (k_h, k_w and
// the geometry); none when it does not map or would cost more than the call.
std::optional<detector::GemmBound> convGradWeightGemm(const float* dy, const std::vector<uint64_t>& dyShape, const float* x,
                                                      const std::vector<uint64_t>& xShape,
                                                      const std::map<std::string, int64_t>& params,
                                                      const std::vector<uint64_t>& outShape);

// A conv2d grad_input call as the GEMMs of a direct convolution over dY: dX_g [N H W, Cin/G] =
// A_g [N H W, Cout/G kh kw] x W_g [Cout/G kh kw, Cin/G], where row (n, iy, ix) of A_g holds, for
// each output channel and tap, the dY value of the output position whose window puts that tap on
// (iy, ix) (0 where none does: stride and padding). The kernel computes the same sums as a GEMM over
// Cout/G and then a col2im over the taps; the bound's K = Cout/G kh kw covers both. dy [N, Cout, Ho,
// Wo], w [Cout, Cin/G, kh, kw]; the output [N, Cin, H, W] is seen in the GEMM's layout through
// `toGemm`, as for the forward call.
std::optional<ConvGemm> convGradInputGemm(const float* dy, const std::vector<uint64_t>& dyShape, const float* w,
                                          const std::vector<uint64_t>& wShape, const std::map<std::string, int64_t>& params,
                                          const std::vector<uint64_t>& outShape);

struct StoredCallReport;
// The shape a call's output is seen in for the Where map: a conv2d's [N, C, H, W] (and a dropped
// rank-4 tensor, op "") as channels x positions, [N C, H W], so tiles follow channels; anything
// else as it is ([prod(shape[:-1]), shape[-1]]).
std::vector<uint64_t> mapShape(const std::vector<uint64_t>& shape, const std::string& op);
// A detection as a session stores it: the verdict with its parameters in its evidence line, then
// the verdict itself and its alternatives as findings.
store::Verdict storedVerdict(const std::string& call, const detector::Detection& detection);
// A report as the plots use it.
StoredCallReport plottedReport(const Report& r, const std::string& call, const std::string& verdict);

struct StoredCallReport {
  std::string analysisRun, call, verdict;
  std::string displayName;  // the call as the session tree names it ("#3 conv2 (iteration 0)"); empty: `call`
  double elements = 0, mismatched = 0, maxAbs = 0, meanAbs = 0, p99 = 0;
  int log2AbsFirstBin = 0;            // log2_abs[i] counts floor(log2 |error|) == first + i
  std::vector<uint64_t> log2Abs, log2Ulp, bitMismatch;  // bitMismatch[b]: elements whose bit b differs
  // Where: mismatches per tile (row-major, tilesDown x tilesAcross; empty if not stored) of the
  // output seen as [rows, cols], and the row and column of the largest |error| (-1: none).
  uint64_t rows = 0, cols = 0, tileRows = 0, tileCols = 0, tilesDown = 0, tilesAcross = 0;
  std::vector<uint64_t> tileMismatch;
  int64_t worstRow = -1, worstCol = -1;
  // the criteria users apply (core/analyzer/criteria.h), when the analysis stored them (2026-12 on)
  bool hasCriteria = false;
  Criteria criteria;
};

// The analysis run of `run` (the newest "analysis" run whose candidate_run is `run`), or "".
std::string analysisRunOf(const store::SessionSummary& summary, const std::string& run);
// The report of call `call` ("iterations/000010/calls/000003") in analysis run `analysisRun`;
// throws std::runtime_error when there is none.
StoredCallReport loadCallReport(const store::SessionReader& reader, const std::string& analysisRun, const std::string& call);

// The golden and the candidate output of call `call` behind an analysis run (the playback run it
// analysed, made with --store-outputs, and that run's source run), for views that go back to the
// elements. Throws std::invalid_argument when the session does not hold both.
struct CallPair {
  std::vector<float> golden, candidate;
  std::vector<uint64_t> shape;
};
CallPair loadCallPair(const store::SessionReader& reader, const std::string& analysisRun, const std::string& call);


}  // namespace peat::analyzer
