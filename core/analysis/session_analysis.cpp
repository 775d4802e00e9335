// SPDX-License-Identifier: MIT
// A playback run analysed call by call: the analyzer, the detector with the call's operands (GEMM
// bounds, format and op replays), the criteria users apply, and the analysis stored as a run
// (conv_gemm.cpp builds the convolutions' GEMMs, stored_analysis.cpp reads analyses back).
#include "core/analysis/session_analysis.h"

#include <array>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <malloc.h>
#include <map>
#include <numeric>
#include <functional>

#include <optional>
#include <set>
#include <stdexcept>

#include "core/analysis/call_spool.h"
#include "core/analysis/stored_analysis.h"
#include "core/detector/op_replay.h"
#include "core/store/h5.h"
#include "core/store/packed_records.h"
#include "core/store/session.h"
#include "core/store/table.h"
#include "core/util/parallel.h"
#include "core/util/text.h"

namespace peat::analyzer {

namespace {

// Per-call reports are stored this many to a record (store/packed_records.h): HDF5 takes about a
// millisecond per record whatever its size, 2 of lenet's 14 seconds at 1,400 calls one each.
constexpr std::size_t kReportsPerPack = 64;
// The calls are read and analysed this many at a time (whole iterations), so that memory does not
// grow with the runs' calls.
constexpr std::size_t kCallsPerBatch = 1024;
// The analysis's table and verdicts are written this many rows at a time.
constexpr std::size_t kRowsPerBlock = 4096;

std::vector<float> readOutput(const store::SessionReader& r, const std::string& run, const store::CallInfo& c) {
  for (const store::TensorInfo& t : c.tensors)
    if (t.name == "output") {
      uint64_t n = 1;
      for (uint64_t d : t.shape) n *= d;
      std::vector<float> v(n);
      r.readTensorInto(run, c.path, "output", store::DType::F32, v.data(), n);
      return v;
    }
  throw std::invalid_argument("call " + c.path + " of run '" + run + "' has no output");
}

std::vector<float> readInput(const store::SessionReader& r, const std::string& run, const store::CallInfo& c,
                             const std::string& name, std::vector<uint64_t>& shape) {
  for (const store::TensorInfo& t : c.tensors)
    if (t.name == name) {
      shape = t.shape;
      uint64_t n = 1;
      for (uint64_t d : t.shape) n *= d;
      std::vector<float> v(n);
      r.readTensorInto(run, c.path, name, store::DType::F32, v.data(), n);
      return v;
    }
  return {};
}

std::vector<float> transposed(const std::vector<float>& v, uint64_t rows, uint64_t cols) {
  std::vector<float> t(v.size());
  for (uint64_t i = 0; i < rows; ++i)
    for (uint64_t j = 0; j < cols; ++j) t[j * rows + i] = v[i * cols + j];
  return t;
}

// |A||B| of the GEMM behind a recorded linear call (forward, grad_input or grad_weight).
std::optional<detector::GemmBound> linearBound(const store::SessionReader& r, const std::string& run,
                                               const store::CallInfo& c) {
  std::vector<uint64_t> s0, s1;
  std::vector<float> in0 = readInput(r, run, c, "input_0", s0), in1 = readInput(r, run, c, "input_1", s1);
  const int64_t variant = c.params.count("variant") ? c.params.at("variant") : 0;
  // forward and grad_input take the weight [N, K]; grad_weight takes x, of any rank (a transformer's [B, T, K])
  if (in0.empty() || in1.empty() || s0.size() < 2 || (variant != 2 && s1.size() != 2) || s1.size() < 2) return std::nullopt;
  const uint64_t last0 = s0.back(), rows0 = in0.size() / last0;
  if (variant == 0) {  // y = x w^T + bias: a = x [rows0, K], b = w^T [K, N]
    std::vector<uint64_t> s2;
    const std::vector<float> bias = readInput(r, run, c, "input_2", s2);
    return detector::gemmBound(std::move(in0), transposed(in1, s1[0], s1[1]), int64_t(rows0), int64_t(last0),
                               int64_t(s1[0]), bias.size() == s1[0] ? bias.data() : nullptr);
  }
  if (variant == 1)  // dx = dy w: a = dy [rows0, N], b = w [N, K]
    return detector::gemmBound(std::move(in0), std::move(in1), int64_t(rows0), int64_t(last0), int64_t(s1[1]));
  // dw = dy^T x: a = dy^T [N, rows0], b = x [rows0, K]
  const uint64_t lastX = s1.back(), rowsX = in1.size() / lastX;
  if (rowsX != rows0) return std::nullopt;
  return detector::gemmBound(transposed(in0, rows0, last0), std::move(in1), int64_t(last0), int64_t(rows0),
                             int64_t(lastX));
}

std::optional<ConvGemm> convBound(const store::SessionReader& r, const std::string& run, const store::CallInfo& c,
                                  const std::vector<uint64_t>& outShape) {
  std::vector<uint64_t> sx, sw, sb;
  const std::vector<float> x = readInput(r, run, c, "input_0", sx), w = readInput(r, run, c, "input_1", sw);
  const std::vector<float> bias = readInput(r, run, c, "input_2", sb);
  if (x.empty() || w.empty()) return std::nullopt;
  return convGemm(x.data(), sx, w.data(), sw, bias.empty() ? nullptr : bias.data(), bias.size(), c.params, outShape);
}

// A recorded matmul call (forward C = A B, grad_input dA = dC B^T, grad_weight dB = A^T dC) as the
// batched GEMM it is: `batch` GEMMs over the leading dimensions, an operand without them (or with
// one) shared by every GEMM as matmul broadcasts it. Returns no bound for what it cannot map (1-D
// operands, a gradient summed over a broadcast batch, mismatched shapes) or what would cost more
// than the call itself.
std::optional<detector::GemmBound> matmulBound(const store::SessionReader& r, const std::string& run,
                                               const store::CallInfo& c, const std::vector<uint64_t>& outShape) {
  std::vector<uint64_t> s0, s1;
  const std::vector<float> in0 = readInput(r, run, c, "input_0", s0), in1 = readInput(r, run, c, "input_1", s1);
  if (in0.empty() || in1.empty() || s0.size() < 2 || s1.size() < 2 || outShape.size() < 2) return std::nullopt;
  const auto batchOf = [](const std::vector<uint64_t>& shape) {
    uint64_t b = 1;
    for (std::size_t i = 0; i + 2 < shape.size(); ++i) b *= shape[i];
    return b;
  };
  const uint64_t b0 = batchOf(s0), b1 = batchOf(s1), batch = batchOf(outShape);
  if ((b0 != batch && b0 != 1) || (b1 != batch && b1 != 1)) return std::nullopt;  // a gradient summed over a broadcast
  const uint64_t r0 = s0[s0.size() - 2], c0 = s0.back(), r1 = s1[s1.size() - 2], c1 = s1.back();
  const int64_t variant = c.params.count("variant") ? c.params.at("variant") : 0;
  // per batch: the GEMM's a [m, k] and b [k, n], transposed from the recorded operands where needed
  uint64_t m = 0, k = 0, n = 0;
  bool transposeA = false, transposeB = false;
  if (variant == 0) {  // C = A B: A [m, k], B [k, n]
    m = r0, k = c0, n = c1;
    if (r1 != k) return std::nullopt;
  } else if (variant == 1) {  // dA = dC B^T: dC [m, n'], B [k', n'] -> a = dC, b = B^T
    m = r0, k = c0, n = r1, transposeB = true;
    if (c1 != k) return std::nullopt;
  } else {  // dB = A^T dC: A [m', k'], dC [m', n'] -> a = A^T, b = dC
    m = c0, k = r0, n = c1, transposeA = true;
    if (r1 != k) return std::nullopt;
  }
  if (outShape[outShape.size() - 2] != m || outShape.back() != n) return std::nullopt;
  if (double(batch) * double(m) * double(k) * double(n) > 2e9) return std::nullopt;
  const auto perBatch = [](const std::vector<float>& v, uint64_t count, uint64_t rows, uint64_t cols, bool transpose) {
    if (!transpose) return v;
    std::vector<float> out(v.size());
    for (uint64_t t = 0; t < count; ++t) {
      const std::vector<float> one(v.begin() + std::ptrdiff_t(t * rows * cols), v.begin() + std::ptrdiff_t((t + 1) * rows * cols));
      const std::vector<float> flipped = transposed(one, rows, cols);
      std::copy(flipped.begin(), flipped.end(), out.begin() + std::ptrdiff_t(t * rows * cols));
    }
    return out;
  };
  const std::vector<float> a = perBatch(in0, b0, r0, c0, transposeA), b = perBatch(in1, b1, r1, c1, transposeB);
  return detector::batchedGemmBound(a.data(), b.data(), int64_t(batch), int64_t(m), int64_t(k), int64_t(n), b0 == 1 && batch > 1,
                                    b1 == 1 && batch > 1);
}

// A call's report as it is stored: the scalars and the histograms, for plots; its arrays are views
// into the call's report.
store::ResultRecord reportRecord(const CallAnalysis& a) {
  const Report& r = a.report;
  store::ResultRecord rec;
  rec.scalars = {{"elements", double(r.elements)}, {"mismatched", double(r.mismatched)}, {"max_abs", r.maxAbs},
                 {"mean_abs", r.meanAbs}, {"rms_abs", r.rmsAbs}, {"max_rel", r.maxRel}, {"mean_rel", r.meanRel},
                 {"golden_rms", r.goldenRms}, {"p50_abs", r.p50}, {"p99_abs", r.p99}, {"p999_abs", r.p999},
                 {"max_abs_index", double(r.maxAbsIndex)}, {"log2_abs_first_bin", double(Report::kLog2AbsMin)},
                 {"rows", double(r.rows)}, {"cols", double(r.cols)}, {"tile_rows", double(r.tileRows)},
                 {"tile_cols", double(r.tileCols)}, {"tiles_down", double(r.tilesDown)},
                 {"tiles_across", double(r.tilesAcross)}};
  const Criteria& k = a.criteria;  // what users apply beside the verdict
  for (const auto& [key, value] : std::initializer_list<std::pair<const char*, double>>{
           {"criteria_cosine", k.cosine}, {"criteria_max_abs", k.maxAbs}, {"criteria_max_rel", k.maxRel},
           {"criteria_rel_above_1e-2", k.relAbove2}, {"criteria_rel_above_1e-3", k.relAbove3},
           {"criteria_rel_above_1e-4", k.relAbove4}, {"criteria_max_ulp", k.maxUlp},
           {"criteria_non_finite", double(k.nonFinite)}})
    rec.scalars.emplace(key, value);
  if (k.ruleEvaluated) {
    rec.scalars.emplace("rule_candidate_error", k.candidateError);
    rec.scalars.emplace("rule_reference_error", k.referenceError);
  }
  rec.labels = {{"call", a.call}, {"verdict", a.detection.verdict.model}};
  if (k.ruleEvaluated) rec.labels.emplace("rule_reference", k.reference);
  rec.arrays = {{"log2_abs_hist", {store::DType::U64, {r.log2Abs.size()}, r.log2Abs.data()}},
                {"log2_ulp_hist", {store::DType::U64, {r.log2Ulp.size()}, r.log2Ulp.data()}},
                {"bit_mismatch", {store::DType::U64, {r.bitMismatch.size()}, r.bitMismatch.data()}},
                {"column_mismatch", {store::DType::U64, {r.colMismatch.counts.size()}, r.colMismatch.counts.data()}},
                {"row_mismatch", {store::DType::U64, {r.rowMismatch.counts.size()}, r.rowMismatch.counts.data()}}};
  if (!r.tileMismatch.empty())
    rec.arrays.push_back({"tile_mismatch", {store::DType::U64, {r.tilesDown, r.tilesAcross}, r.tileMismatch.data()}});
  return rec;
}

// The report's arrays, once stored: the calls returned (no sink) hold their scalars, the verdicts
// and criteria.
void dropReportArrays(Report& r) {
  for (std::vector<uint64_t>* v : {&r.log2Abs, &r.rowMismatch.counts, &r.colMismatch.counts, &r.tileMismatch})
    std::vector<uint64_t>().swap(*v);
}

const store::RunInfo& findRun(const store::SessionSummary& s, const std::string& name) {
  for (const store::RunInfo& r : s.runs)
    if (r.name == name) return r;
  std::string names;
  for (const store::RunInfo& r : s.runs) names += (names.empty() ? "" : ", ") + r.name;
  throw std::invalid_argument("session '" + s.path + "' has no run '" + name + "' (runs: " + names + ")");
}

}  // namespace


namespace {

// The calls a user kernel failed in its kernel host (outcome crash:SIG..., hang, out_of_bounds,
// exit:N in the run's call_errors): no output to compare, so a verdict of their own with the
// outcome and the call's recorded shapes, for a developer to reproduce it (peat playback --call).
std::vector<KernelFailure> kernelFailures(const store::SessionReader& reader, const store::RunInfo& cand,
                                          const store::RunInfo& source, const std::string& only) {
  std::vector<KernelFailure> out;
  if (std::find(cand.tables.begin(), cand.tables.end(), "call_errors") == cand.tables.end()) return out;
  const std::vector<h5::Column> t = reader.table(cand.name, "call_errors");
  const h5::Column *outcome = h5::findColumn(t, "outcome"), *iteration = h5::findColumn(t, "iteration"),
                   *index = h5::findColumn(t, "call_index"), *layer = h5::findColumn(t, "layer"),
                   *op = h5::findColumn(t, "op");
  if (!outcome || !outcome->isText || !iteration || !index || !layer || !op) return out;
  for (std::size_t r = 0; r < outcome->size(); ++r) {
    const std::string& what = outcome->text[r];
    if (what == "ok" || what.empty()) continue;
    char path[64];
    std::snprintf(path, sizeof path, "iterations/%06lld/calls/%06lld", (long long)iteration->numbers[r],
                  (long long)index->numbers[r]);
    if (!only.empty() && only != path) continue;
    KernelFailure f;
    f.call = path;
    f.layer = layer->text[r];
    f.op = op->text[r];
    f.iteration = int64_t(iteration->numbers[r]);
    f.callIndex = int64_t(index->numbers[r]);
    std::string shapes;
    std::vector<store::TensorInfo> tensors;  // as recorded; none when the recording lacks the call
    try {
      tensors = reader.callTensors(source.name, path);
    } catch (const store::SessionError&) {
    }
    for (const store::TensorInfo& tensor : tensors) {
      shapes += (shapes.empty() ? "" : ", ") + tensor.name + " [";
      for (std::size_t d = 0; d < tensor.shape.size(); ++d) shapes += (d ? "x" : "") + std::to_string(tensor.shape[d]);
      shapes += "]";
    }
    detector::Verdict v;
    v.model = what == "hang"            ? "kernel_hang"
              : what == "out_of_bounds" ? "kernel_out_of_bounds"
              : what == "out_of_memory" ? "kernel_out_of_memory"
                                        : "kernel_crash";
    v.confidence = 1.0;
    v.explanation = "the kernel failed this call in its kernel host (" + what + "); shapes " +
                    (shapes.empty() ? std::string("unknown") : shapes) + "; replay it alone with peat playback --call " +
                    f.call;
    v.parameters["outcome"] = what;
    f.detection.verdict = v;
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

namespace {

// What a user kernel declared for a call's op (a playback run's "declared_formats", plugin ABI v2's op
// kinds and dtypes: "gemm:fp8_e4m3->f32,attention:bf16->f32"), as {input, output} dtype names; {} when
// it declared nothing for it.
std::pair<std::string, std::string> declaredFor(const std::string& declared, const std::string& op) {
  static const std::map<std::string, std::vector<std::string>> kinds{
      {"linear", {"gemm"}},           {"matmul", {"batched_gemm", "gemm"}}, {"conv2d", {"conv2d", "gemm"}},
      {"addmm", {"gemm"}},            {"baddbmm", {"batched_gemm", "gemm"}}, {"addbmm", {"batched_gemm", "gemm"}},
      {"softmax", {"softmax"}},       {"log_softmax", {"softmax"}},         {"layernorm", {"layer_norm"}},
      {"attention", {"attention"}},   {"gelu", {"activation"}},             {"relu", {"activation"}},
      {"silu", {"activation"}},       {"tanh", {"activation"}},             {"sigmoid", {"activation"}},
      {"sgd", {"optimizer"}},         {"adam", {"optimizer"}}};
  const auto k = kinds.find(op);
  if (k == kinds.end() || declared.empty()) return {};
  for (const std::string& kind : k->second) {
    std::size_t at = 0;
    while (at < declared.size()) {
      const std::size_t end = std::min(declared.find(',', at), declared.size());
      const std::string entry = declared.substr(at, end - at);
      at = end + 1;
      const std::size_t colon = entry.find(':'), arrow = entry.find("->");
      if (colon == std::string::npos || arrow == std::string::npos || arrow < colon) continue;
      if (entry.substr(0, colon) == kind) return {entry.substr(colon + 1, arrow - colon - 1), entry.substr(arrow + 2)};
    }
  }
  return {};
}

// The verdict judged with the formats the kernel declared: named in its parameters, and, where the
// inputs were not f32 and the verdict does not name that format, whether the replay tried it (GEMMs:
// every ABI dtype; the calls op replay covers, softmax, attention and layer norm forward: f16 and bf16)
// or could not (the generic rules alone).
void judgeWithDeclared(detector::Verdict& v, const std::string& op, int64_t variant,
                       const std::pair<std::string, std::string>& d) {
  if (d.first.empty()) return;
  v.parameters["declared"] = d.first + "->" + d.second;
  if (d.first == "f32") return;
  const std::string format = d.first == "f16" ? "fp16" : d.first;
  const auto named = v.parameters.find("format");
  if (v.model == "precision_loss" && named != v.parameters.end() && named->second == format) return;
  const bool gemm = op == "linear" || op == "matmul" || op == "conv2d" || op == "addmm" || op == "baddbmm" ||
                    op == "addbmm";
  const bool sixteen = format == "fp16" || format == "bf16";
  const bool replayed = gemm || (sixteen && (op == "softmax" || op == "log_softmax" || op == "attention" ||
                                             op == "layernorm") && detector::opReplayCovers(op, variant));
  v.parameters["declared_format_replayed"] = replayed ? "yes" : "no";
  v.explanation += replayed ? "; the kernel declared " + d.first + " inputs, and their replay does not reproduce it"
                            : "; the kernel declared " + d.first + " inputs, a format the " + op +
                                  " replay does not have: not replayed, the verdict rests on the generic rules";
}

}  // namespace

std::string analysisSettings(const ReportOptions& options, const std::string& call) {
  return "tile=" + std::to_string(options.tileRows) + "x" + std::to_string(options.tileCols) +
         ";calls=" + (call.empty() ? std::string("all") : call) + ";rules=" + kAnalysisRules;
}


SessionAnalysis analyzeSession(const std::string& session, const std::string& run, const std::string& call,
                               const ReportOptions& options, const std::function<void(int64_t, int64_t)>& progress,
                               bool reuse, const std::string& name, const CallSink& each) {
  SessionAnalysis out;
  out.session = session;
  out.run = run;
  const std::string settings = analysisSettings(options, call);
  std::optional<CallSpool> spool;  // the calls' analyses, from the workers to the store
  {
    store::SessionReader reader(session);  // probed first in a helper process (core/store/probe.h)
    // the runs' headers, and the calls of only the two runs compared: memory does not grow with
    // the other runs the session holds
    const store::SessionSummary s = reader.summaryWithoutCalls();
    const store::RunInfo& cand = findRun(s, run);  // headers: the calls are read an iteration at a time
    if (!cand.attributes.count("source_run") || !cand.attributes.count("stored_outputs"))
      throw std::invalid_argument("run '" + run + "' holds no candidate outputs: make it with peat playback --store-outputs");
    out.sourceRun = cand.attributes.at("source_run");
    if (out.sourceRun == run)  // a session from elsewhere: compared with itself, every call would match
      throw std::invalid_argument("run '" + util::printable(run) + "' names itself as the run it replays (source_run)");
    const store::RunInfo& source = findRun(s, out.sourceRun);
    if (!name.empty())
      for (const store::RunInfo& r : s.runs)
        if (r.name == name) throw std::invalid_argument("run '" + name + "' exists in " + session + ": choose another --name");
    if (reuse && name.empty()) {  // the newest analysis of this run with the same settings, complete
      const store::RunInfo* same = nullptr;
      for (const store::RunInfo& r : s.runs) {
        const auto c = r.attributes.find("candidate_run"), st = r.attributes.find("settings");
        if (r.spec.kind == "analysis" && r.status == "complete" && c != r.attributes.end() && c->second == run &&
            st != r.attributes.end() && st->second == settings)
          same = &r;
      }
      if (same) {
        out.resultRun = same->name;
        out.reused = true;
        readBack(reader, same->name, out);
        out.failures = kernelFailures(reader, cand, source, call);
        if (progress) progress(int64_t(out.calls.size()), int64_t(out.calls.size()));
        if (each) {
          for (const CallAnalysis& a : out.calls) each(out, a);
          out.calls.clear();
        }
        return out;
      }
    }
    // The calls an iteration at a time (a batch of iterations holding about kCallsPerBatch calls):
    // memory does not grow with the runs' calls. With `call`, only its iteration.
    std::vector<store::SessionReader::IterationEntry> iterations = reader.iterationIndex(run);
    std::set<std::string> recordedIterations;
    for (const store::SessionReader::IterationEntry& e : reader.iterationIndex(out.sourceRun)) recordedIterations.insert(e.name);
    int64_t total = 0;
    if (!call.empty()) {  // "iterations/<name>/calls/<index>"
      const std::string prefix = "iterations/";
      const std::size_t slash = call.find('/', prefix.size());
      const std::string in = call.rfind(prefix, 0) == 0 && slash != std::string::npos
                                 ? call.substr(prefix.size(), slash - prefix.size()) : std::string();
      iterations.erase(std::remove_if(iterations.begin(), iterations.end(),
                                      [&](const store::SessionReader::IterationEntry& e) { return e.name != in; }),
                       iterations.end());
      for (const store::SessionReader::IterationEntry& e : iterations)
        for (const store::CallInfo& c : reader.iteration(run, e.name).calls) total += c.path == call;
    } else {
      for (const store::SessionReader::IterationEntry& e : iterations) total += e.calls;
    }
    if (progress) progress(0, total);
    // Calls are analysed on every core (options.threads), each whole on one worker taking the next
    // call in turn: reads serialise in the session layer, the detector's replays (most of the
    // time) run side by side. Results land in the calls' order whatever ran where; progress is told
    // on the calling thread only (worker 0), so a callback need not be thread-safe.
    const unsigned workers = unsigned(std::min<int64_t>(util::threadsOr(options.threads), std::max<int64_t>(total, 1)));
    ReportOptions perCall = options;
    if (workers > 1) perCall.threads = 1;  // the cores go to calls, not to one call's analyzer
    spool.emplace(session, std::size_t(total));
    // the batch's calls and the recorded ones they are compared with, by path
    std::vector<const store::CallInfo*> todo;
    std::map<std::string, const store::CallInfo*> recorded;
    std::atomic<int64_t> done{0};
    // each worker's seconds per part of SessionAnalysis::Timing
    enum Part { kRead, kAnalyzer, kOperands, kDetector, kReference, kParts };
    std::vector<std::array<double, kParts>> seconds(workers);
    using Clock = std::chrono::steady_clock;
    const auto loopStart = Clock::now();
    auto analyseOne = [&](const store::CallInfo& c, std::array<double, kParts>& spent) -> CallAnalysis {
        Clock::time_point mark = Clock::now();
        const auto lap = [&](Part part) {  // the time since the last lap goes to `part`
          const Clock::time_point now = Clock::now();
          spent[std::size_t(part)] += std::chrono::duration<double>(now - mark).count();
          mark = now;
        };
        auto g = recorded.find(c.path);
        if (g == recorded.end()) throw std::invalid_argument("call " + c.path + " is not in run '" + out.sourceRun + "'");
        const std::vector<float> golden = readOutput(reader, out.sourceRun, *g->second);
        const std::vector<float> candidate = readOutput(reader, run, c);
        lap(kRead);
        std::vector<uint64_t> shape, goldenShape;
        for (const store::TensorInfo& t : c.tensors)
          if (t.name == "output") shape = t.shape;
        for (const store::TensorInfo& t : g->second->tensors)
          if (t.name == "output") goldenShape = t.shape;
        // a session from elsewhere: the two outputs must be the same tensor before any element is read
        if (shape != goldenShape || golden.size() != candidate.size() || uint64_t(candidate.size()) != std::accumulate(shape.begin(), shape.end(), uint64_t(1), std::multiplies<>()))
          throw std::invalid_argument("call " + c.path + ": run '" + run + "' stores an output of shape " + util::shapeText(shape) +
                                      " (" + std::to_string(candidate.size()) + " values), run '" + out.sourceRun + "' one of " +
                                      util::shapeText(goldenShape) + " (" + std::to_string(golden.size()) + " values)");
        CallAnalysis a;
        a.call = c.path;
        a.layer = c.id.layer;
        a.op = c.id.op;
        a.iteration = c.id.iteration;
        a.callIndex = c.id.callIndex;
        a.report = analyze(golden.data(), candidate.data(), mapShape(shape, c.id.op), perCall);
        lap(kAnalyzer);
        // Linear, matmul (batched) and forward conv2d calls (grouped: batched): the operands were recorded,
        // so the detector can compute rounding bounds and replay formats; a conv's outputs are seen
        // in its GEMM's layout.
        std::optional<detector::GemmBound> bound;
        if (c.id.op == "linear") bound = linearBound(reader, out.sourceRun, *g->second);
        if (c.id.op == "matmul") bound = matmulBound(reader, out.sourceRun, *g->second, shape);
        std::optional<ConvGemm> conv;
        if (c.id.op == "conv2d") conv = convBound(reader, out.sourceRun, *g->second, shape);
        if (c.id.op == "conv2d" && !conv && g->second->params.count("variant") && g->second->params.at("variant") == 2) {
          std::vector<uint64_t> sdy, sx;  // grad_weight: inputs (dy, x)
          const std::vector<float> dy = readInput(reader, out.sourceRun, *g->second, "input_0", sdy);
          const std::vector<float> x = readInput(reader, out.sourceRun, *g->second, "input_1", sx);
          if (!dy.empty() && !x.empty()) bound = convGradWeightGemm(dy.data(), sdy, x.data(), sx, g->second->params, shape);
        }
        if (c.id.op == "conv2d" && !conv && g->second->params.count("variant") && g->second->params.at("variant") == 1) {
          std::vector<uint64_t> sdy, sw;  // grad_input: inputs (dy, w); a col2im after the GEMM
          const std::vector<float> dy = readInput(reader, out.sourceRun, *g->second, "input_0", sdy);
          const std::vector<float> w = readInput(reader, out.sourceRun, *g->second, "input_1", sw);
          if (!dy.empty() && !w.empty()) conv = convGradInputGemm(dy.data(), sdy, w.data(), sw, g->second->params, shape);
        }
        lap(kOperands);
        a.criteria = criteria(golden.data(), candidate.data(), uint64_t(golden.size()));
        lap(kAnalyzer);
        // FlashAttention's rule against the GEMM recomputed in float64: PyTorch's kernel is golden (fp32),
        // or, where a format's replay reproduced the candidate, that replay (a kernel in that format)
        auto gemmRule = [&](const detector::GemmBound& b, const float* candidateValues) {
          if (a.report.mismatched == 0) {  // the candidate is golden: the rule holds whatever the float64 value
            a.criteria.ruleEvaluated = true;
            a.criteria.reference = "golden (PyTorch's fp32 kernel); the candidate is bit-identical to it";
            return;
          }
          lap(kDetector);  // the detector's verdict came first
          const std::vector<double> exact = detector::exactGemm(b);
          if (exact.size() != golden.size()) return;
          const detector::Verdict& v = a.detection.verdict;
          const auto format = v.parameters.find("format");
          const bool reproduced = v.model == "precision_loss" && format != v.parameters.end() &&
                                  v.evidence.count("reproduced") && v.evidence.at("reproduced") > 0;
          std::vector<double> reference;
          std::string referenceName = "golden (PyTorch's fp32 kernel)";
          if (reproduced) {
            const std::string id = format->second + (v.parameters.count("scale") ? "/tensor-scale" : "");
            reference = detector::formatGemm(b, id);
            referenceName = "the " + id + " replay (a kernel in that format)";
          }
          if (reference.size() != exact.size()) {
            reference.clear();
            referenceName = "golden (PyTorch's fp32 kernel)";
          }
          if (reference.empty()) {
            const std::vector<float> seenGolden = conv ? conv->toGemm(golden) : golden;
            reference.assign(seenGolden.begin(), seenGolden.end());
          }
          applyReferenceRule(a.criteria, candidateValues, exact.data(), reference.data(), exact.size(), referenceName);
          lap(kReference);
        };
        if (conv) {
          const std::vector<float> gg = conv->toGemm(golden), cc = conv->toGemm(candidate);
          a.detection = detector::detect(gg.data(), {cc.data()}, conv->seenShape(), perCall, &conv->bound);
          gemmRule(conv->bound, cc.data());
        } else {
          // a batched GEMM's output is seen as its rows stacked ([batch * m, n]), a conv's grad_weight
          // [Cout, Cin/G kh kw] as the GEMM's [m, n]
          const bool asGemm = bound && (bound->batch > 1 || shape.empty() || shape.back() != uint64_t(bound->cols));
          const std::vector<uint64_t> seen =
              asGemm ? std::vector<uint64_t>{uint64_t(bound->rows), uint64_t(bound->cols)} : shape;
          a.detection = detector::detect(golden.data(), {candidate.data()}, seen, perCall, bound ? &*bound : nullptr);
          if (bound) gemmRule(*bound, candidate.data());
        }
        // Op-wise calls with their inputs recorded: replayed in double with the formulas ports and
        // bugs use (core/detector/op_replay.h); a formula that fits clearly better names the call.
        const int64_t variant = g->second->params.count("variant") ? g->second->params.at("variant") : 0;
        a.variant = variant;
        if (detector::opReplayCovers(c.id.op, variant)) {
          detector::OpOperands operands{c.id.op, variant, g->second->params, {}, {}};
          for (std::size_t k = 0;; ++k) {
            std::vector<uint64_t> inputShape;
            std::vector<float> v = readInput(reader, out.sourceRun, *g->second, "input_" + std::to_string(k), inputShape);
            if (v.empty() && inputShape.empty()) break;
            operands.inputs.push_back(std::move(v));
            operands.shapes.push_back(std::move(inputShape));
          }
          // a bound reading (the op's own formula within fp32 rounding) stands where the outputs name
          // no fault; a formula that fits names the call whatever they say
          const std::string& said = a.detection.verdict.model;
          const bool outputsNameAFault =
              said != "unknown" && said != "exact" && said != "precision_loss" && said != "accumulation_order";
          detector::ReplayValues values;
          if (auto v = detector::replayOp(golden.data(), candidate.data(), uint64_t(golden.size()), operands, &values);
              v && !(v->parameters.count("reading") && outputsNameAFault)) {
            a.detection.alternatives.insert(a.detection.alternatives.begin(), a.detection.verdict);
            a.detection.verdict = *v;
          }
          // FlashAttention's rule against the op recomputed in float64 (PyTorch's kernel: golden, or the
          // port's format replay that named the call)
          if (values.reference.size() == golden.size()) {
            const bool matched = values.matched.size() == golden.size() &&
                                 a.detection.verdict.parameters.count("format") &&
                                 a.detection.verdict.parameters.at("format") == values.matchedFormat;
            const std::vector<double> goldenValues(golden.begin(), golden.end());
            applyReferenceRule(a.criteria, candidate.data(), values.reference.data(),
                               matched ? values.matched.data() : goldenValues.data(), goldenValues.size(),
                               matched ? "the " + values.matchedFormat + " replay (a port in that format)"
                                       : "golden (PyTorch's fp32 kernel)");
          }
        }
        if (cand.attributes.count("declared_formats"))
          judgeWithDeclared(a.detection.verdict, c.id.op, variant, declaredFor(cand.attributes.at("declared_formats"), c.id.op));
        lap(kDetector);  // the op replays and the rest
        return a;
    };
    // a failed call: the earliest in call order is reported, as one worker would (not the first in time)
    std::mutex failureMutex;
    std::exception_ptr failure;
    for (std::size_t first = 0, base = 0; first < iterations.size() && !failure;) {
      std::vector<store::IterationInfo> candidates, recordings;
      std::size_t calls = 0;
      for (; first < iterations.size() && calls < kCallsPerBatch; ++first) {
        calls += std::size_t(iterations[first].calls);
        candidates.push_back(reader.iteration(run, iterations[first].name));
        if (recordedIterations.count(iterations[first].name))
          recordings.push_back(reader.iteration(out.sourceRun, iterations[first].name));
      }
      recorded.clear();
      for (const store::IterationInfo& it : recordings)
        for (const store::CallInfo& c : it.calls) recorded[c.path] = &c;
      todo.clear();
      for (const store::IterationInfo& it : candidates)
        for (const store::CallInfo& c : it.calls)
          if (call.empty() || c.path == call) todo.push_back(&c);
      const int64_t count = int64_t(todo.size());
      std::atomic<int64_t> next{0};
      int64_t failedAt = count;
      util::parallelFor(workers, [&](unsigned worker) {
        h5::silenceLibraryDiagnostics();  // HDF5 prints its own errors per thread unless told not to
        for (int64_t i; (i = next++) < count;) {
          {
            const std::lock_guard<std::mutex> lock(failureMutex);
            if (i > failedAt) break;  // calls after a failed one are not needed; earlier ones still are
          }
          try {
            spool->add(base + std::size_t(i), analyseOne(*todo[std::size_t(i)], seconds[worker]));
          } catch (...) {
            const std::lock_guard<std::mutex> lock(failureMutex);
            if (i < failedAt) failedAt = i, failure = std::current_exception();
            continue;
          }
          const int64_t finished = ++done;
          if (worker == 0 && progress) progress(finished, total);
        }
      });
      base += todo.size();
      // freed memory back to the system after each batch: `analyze` keeps freed tensors in the heap
      // for speed (mallopt), which otherwise grew its resident size over a long session with memory
      // no longer in use (70,000 calls: 359 MB resident for about 115 MB live)
      malloc_trim(0);
    }
    if (failure) std::rethrow_exception(failure);
    out.timing.wall = std::chrono::duration<double>(Clock::now() - loopStart).count();
    out.timing.workers = workers;
    for (const std::array<double, kParts>& t : seconds) {
      out.timing.read += t[kRead];
      out.timing.analyzer += t[kAnalyzer];
      out.timing.operands += t[kOperands];
      out.timing.detector += t[kDetector];
      out.timing.reference += t[kReference];
    }
    if (progress && total) progress(total, total);
    out.failures = kernelFailures(reader, cand, source, call);
    if (total == 0 && out.failures.empty())
      throw std::invalid_argument(call.empty() ? "run '" + run + "' stored no outputs"
                                               : "run '" + run + "' has no call '" + call + "'");
  }

  const auto storeStart = std::chrono::steady_clock::now();
  store::SessionWriter w(session, {}, store::WriteMode::Append);
  std::string resultName = name.empty() ? "analysis-" + run : name;
  for (int k = 2; name.empty() && w.hasRun(resultName); ++k) resultName = "analysis-" + run + "-" + std::to_string(k);
  w.beginRun({resultName, "analysis", "", "analyzer and detector over run " + run + " against " + out.sourceRun});
  w.setRunAttribute("candidate_run", run);
  w.setRunAttribute("source_run", out.sourceRun);
  w.setRunAttribute("settings", settings);
  out.resultRun = resultName;
  store::TableBuilder table({"call", "layer", "op", "verdict"},
                            {"iteration", "call_index", "elements", "mismatched", "max_abs", "mean_abs", "rms_abs",
                             "max_rel", "mean_abs_over_scale", "p50_abs", "p99_abs", "p999_abs", "confidence", "variant"});
  // The table and the verdicts are written a block of rows at a time, the calls read back from the
  // spool one by one and handed on: nothing here grows with the session.
  std::vector<store::Verdict> verdicts;
  const auto flushRows = [&] {
    if (table.rows() == 0) return;
    w.appendTable("call_reports", table.columns());
    w.appendVerdicts(verdicts);
    table.clearRows();
    verdicts.clear();
  };
  store::RecordPacker packer;
  std::deque<CallAnalysis> packRows;  // the calls whose reports the packer holds
  const auto flushPack = [&] {
    if (packer.size() == 0) return;
    w.writeReport(packer.firstId() + store::kPackSuffix, packer.record());
    packer.clear();
    packRows.clear();
  };
  for (std::size_t i = 0; i < spool->size(); ++i) {
    // the packer borrows the report's arrays until the pack is written
    if (packer.size() == kReportsPerPack) flushPack();
    const CallAnalysis& a = packRows.emplace_back(spool->read(i));
    const Report& r = a.report;
    table.row({a.call, a.layer, a.op, a.detection.verdict.model},
              {double(a.iteration), double(a.callIndex), double(r.elements), double(r.mismatched), r.maxAbs, r.meanAbs,
               r.rmsAbs, r.maxRel, r.meanAbsOverScale, r.p50, r.p99, r.p999, a.detection.verdict.confidence,
               double(a.variant)});
    verdicts.push_back(storedVerdict(a.call, a.detection));
    if (table.rows() == kRowsPerBlock) flushRows();
    // 64 reports to a record: HDF5 takes about a millisecond per record, whatever its size
    const store::ResultRecord rec = reportRecord(a);
    if (!packer.add(reportId(a.call), rec)) w.writeReport(reportId(a.call), rec);
    if (each) {
      each(out, a);
    } else {
      CallAnalysis& kept = out.calls.emplace_back(a);
      dropReportArrays(kept.report);
    }
  }
  flushPack();
  for (const KernelFailure& f : out.failures) {
    table.row({f.call, f.layer, f.op, f.detection.verdict.model},
              {double(f.iteration), double(f.callIndex), std::nan(""), std::nan(""), std::nan(""), std::nan(""),
               std::nan(""), std::nan(""), std::nan(""), std::nan(""), std::nan(""), std::nan(""),
               f.detection.verdict.confidence, 0.0});
    verdicts.push_back(storedVerdict(f.call, f.detection));
  }
  flushRows();
  w.endRun(store::RunStatus::Complete);
  out.timing.store = std::chrono::duration<double>(std::chrono::steady_clock::now() - storeStart).count();
  return out;
}

}  // namespace peat::analyzer
