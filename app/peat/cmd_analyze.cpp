// SPDX-License-Identifier: MIT
// peat analyze: the standard report of a golden/candidate pair, from .npy files or HDF5 datasets.
#include <algorithm>
#include <cmath>
#include <csignal>
#include <map>
#include <malloc.h>
#include <tuple>
#include <cstdio>
#include <iostream>
#include <optional>
#include <stdexcept>

#include "app/peat/commands.h"
#include "app/peat/text.h"
#include "core/analyzer/numerics.h"
#include "core/analyzer/report.h"
#include "core/analysis/session_analysis.h"
#include "core/io/tensor_source.h"
#include "core/util/events.h"
#include "core/util/json_writer.h"
#include "core/util/text.h"
#include "gpu/backend.h"

namespace peat::cli {
namespace {

void printText(const analyzer::Report& r, const io::FloatTensor& g) {
  auto pct = [&](uint64_t v) { return 100.0 * double(v) / double(r.elements); };
  std::printf("golden      %s  %s %s\n", g.origin.c_str(), g.dtype.c_str(), shapeText(r.shape).c_str());
  std::printf("elements    %llu: %llu bit-identical, %llu mismatched (%.4g%%)\n", (unsigned long long)r.elements,
              (unsigned long long)r.identical, (unsigned long long)r.mismatched, pct(r.mismatched));
  std::printf("non-finite  golden NaN %llu Inf %llu; candidate NaN %llu Inf %llu; newly non-finite %llu\n",
              (unsigned long long)r.goldenNaN, (unsigned long long)r.goldenInf, (unsigned long long)r.candidateNaN,
              (unsigned long long)r.candidateInf, (unsigned long long)r.newlyNonFinite);
  std::printf("abs error   max %.6g  mean %.6g  rms %.6g  p50 %.6g  p99 %.6g  p99.9 %.6g\n", r.maxAbs, r.meanAbs,
              r.rmsAbs, r.p50, r.p99, r.p999);
  std::printf("rel error   max %.6g  mean %.6g  (|c-g| / max(|g|, 2^-126))\n", r.maxRel, r.meanRel);
  std::printf("vs scale    golden rms %.6g: max %.6g  mean %.6g\n", r.goldenRms, r.maxAbsOverScale, r.meanAbsOverScale);
  if (r.mismatched) {
    std::string pos = "(";
    for (std::size_t i = 0; i < r.maxAbsPosition.size(); ++i) pos += (i ? ", " : "") + std::to_string(r.maxAbsPosition[i]);
    std::printf("worst       at %s: golden %.9g, candidate %.9g\n", (pos + ")").c_str(), double(r.maxAbsGolden),
                double(r.maxAbsCandidate));
  }
  std::printf("fields      sign only %llu, exponent %llu, mantissa only %llu\n", (unsigned long long)r.signOnly,
              (unsigned long long)r.exponentInvolved, (unsigned long long)r.mantissaOnly);
  std::printf("bits        ");
  for (int b = 31; b >= 0; --b)
    if (r.bitMismatch[std::size_t(b)]) std::printf("%d:%llu ", b, (unsigned long long)r.bitMismatch[std::size_t(b)]);
  std::printf("\nlog2 ulp    ");
  for (std::size_t b = 0; b < r.log2Ulp.size(); ++b)
    if (r.log2Ulp[b]) std::printf("%zu:%llu ", b, (unsigned long long)r.log2Ulp[b]);
  std::printf("\nlog2 |err|  ");
  for (std::size_t b = 0; b < r.log2Abs.size(); ++b)
    if (r.log2Abs[b]) std::printf("%d:%llu ", int(b) + analyzer::Report::kLog2AbsMin, (unsigned long long)r.log2Abs[b]);
  uint64_t rowsHit = 0, colsHit = 0, tilesHit = 0;
  for (uint64_t v : r.rowMismatch.counts) rowsHit += v ? 1 : 0;
  for (uint64_t v : r.colMismatch.counts) colsHit += v ? 1 : 0;
  for (uint64_t v : r.tileMismatch) tilesHit += v ? 1 : 0;
  std::printf("\nspatial     %llu of %zu row bins, %llu of %zu column bins, %llu of %zu %llux%llu tiles hold mismatches\n",
              (unsigned long long)rowsHit, r.rowMismatch.counts.size(), (unsigned long long)colsHit,
              r.colMismatch.counts.size(), (unsigned long long)tilesHit, r.tileMismatch.size(),
              (unsigned long long)r.tileRows, (unsigned long long)r.tileCols);
  std::printf("runs        %llu runs of consecutive mismatches, longest %llu; most common gap %llu (%.3g of gaps)\n",
              (unsigned long long)r.runs, (unsigned long long)r.longestRun, (unsigned long long)r.dominantGap,
              r.dominantGapShare);
}

void counts(JsonWriter& j, const std::string& key, const std::vector<uint64_t>& v) {
  j.key(key).beginArray();
  for (uint64_t x : v) j.value(x);
  j.endArray();
}

// The histograms again, on a compute device, checked against the CPU analyzer's: the same
// definitions (gpu/device/math.h), so any difference is a kernel bug and an error.
struct DeviceCheck {
  std::string device;
  double uploadMs = 0, kernelMs = 0;
};

DeviceCheck histogramsOnDevice(const std::string& spec, const analyzer::Report& r, const io::FloatTensor& g,
                               const io::FloatTensor& c) {
  gpu::OpenedDevice opened = gpu::openDevice(spec);
  gpu::Device& d = *opened.device;
  auto stream = d.createStream();
  const uint64_t n = r.elements, bytes = n * 4;
  auto gb = d.allocate(bytes), cb = d.allocate(bytes), result = d.allocate(gpu::kHistogramWords * 8);
  auto t0 = d.createEvent(), t1 = d.createEvent(), t2 = d.createEvent();
  d.record(*t0, *stream);
  d.upload(*gb, 0, g.data(), bytes, *stream);
  d.upload(*cb, 0, c.data(), bytes, *stream);
  d.record(*t1, *stream);
  d.histograms(*gb, *cb, n, *result, *stream);
  d.record(*t2, *stream);
  const gpu::ErrorHistograms h = gpu::readHistograms(d, *result, *stream);
  DeviceCheck out{spec, d.elapsedMs(*t0, *t1), d.elapsedMs(*t1, *t2)};
  std::string differs;
  if (h.mismatched != r.mismatched) differs = "mismatched " + std::to_string(h.mismatched) + " vs " + std::to_string(r.mismatched);
  for (std::size_t b = 0; b < 32 && differs.empty(); ++b)
    if (h.bits[b] != r.bitMismatch[b]) differs = "bit " + std::to_string(b);
  for (std::size_t b = 0; b < h.log2Ulp.size() && differs.empty(); ++b)
    if (h.log2Ulp[b] != r.log2Ulp[b]) differs = "log2 ULP bin " + std::to_string(b);
  for (std::size_t b = 0; b < h.log2Abs.size() && differs.empty(); ++b)
    if (h.log2Abs[b] != r.log2Abs[b]) differs = "log2 |error| bin " + std::to_string(int(b) + analyzer::Report::kLog2AbsMin);
  if (!differs.empty())
    throw std::runtime_error("the histograms computed on " + spec + " differ from the CPU analyzer's (" + differs +
                             "): a kernel bug, please report it");
  return out;
}

// --numerics: the narrow-format statistics of each tensor (core/analyzer/numerics.h).
void numericsJson(JsonWriter& j, const std::string& key, const analyzer::TensorNumerics& t) {
  j.key(key).beginObject().field("nonzero", t.nonzero).field("non_finite", t.nonFinite).field("amax", t.amax);
  j.field("min_nonzero", t.minNonzero).field("range_binades", t.rangeBinades);
  for (const auto& [name, list] : {std::pair{"plain", &t.plain}, std::pair{"tensor_scaled", &t.tensorScaled},
                                   std::pair{"block_scaled", &t.blockScaled}}) {
    j.key(name).beginObject();
    for (const analyzer::FormatShare& f : *list)
      j.key(f.format).beginObject().field("underflow", f.underflow).field("saturated", f.saturated).endObject();
    j.endObject();
  }
  j.key("blocks").beginObject();
  for (const analyzer::BlockStatistics& b : t.blocks) {
    j.key(b.format).beginObject().field("scale_log2_first", int64_t(b.scaleLog2Min));
    counts(j, "scale_log2_counts", b.scaleLog2Counts);
    counts(j, "range_binades_counts", b.rangeCounts);
    j.endObject();
  }
  j.endObject().endObject();
}

void numericsText(const char* which, const analyzer::TensorNumerics& t) {
  std::printf("numerics    %s: amax %.4g, smallest nonzero %.4g, %.1f binades; %llu nonzero, %llu non-finite\n", which,
              t.amax, t.minNonzero, t.rangeBinades, (unsigned long long)t.nonzero, (unsigned long long)t.nonFinite);
  std::printf("            underflow / saturated (share of nonzero values):\n");
  for (std::size_t i = 0; i < t.plain.size(); ++i)
    std::printf("              %-6s plain %6.2f%% / %6.2f%%   one scale per tensor %6.2f%%\n", t.plain[i].format.c_str(),
                100 * t.plain[i].underflow, 100 * t.plain[i].saturated, 100 * t.tensorScaled[i].underflow);
  for (const analyzer::FormatShare& f : t.blockScaled)
    std::printf("              %-11s block-scaled %6.2f%% / %6.2f%%\n", f.format.c_str(), 100 * f.underflow, 100 * f.saturated);
}

void printJson(const analyzer::Report& r, const io::FloatTensor& g, const io::FloatTensor& c, const DeviceCheck* device,
               const analyzer::TensorNumerics* gn = nullptr, const analyzer::TensorNumerics* cn = nullptr) {
  JsonWriter j(std::cout);
  j.beginObject().field("golden", g.origin).field("candidate", c.origin).field("dtype", g.dtype);
  counts(j, "shape", r.shape);
  j.field("elements", r.elements).field("identical", r.identical).field("mismatched", r.mismatched);
  j.field("golden_nan", r.goldenNaN).field("golden_inf", r.goldenInf).field("candidate_nan", r.candidateNaN);
  j.field("candidate_inf", r.candidateInf).field("newly_non_finite", r.newlyNonFinite);
  j.field("max_abs", r.maxAbs).field("mean_abs", r.meanAbs).field("rms_abs", r.rmsAbs);
  j.field("max_rel", r.maxRel).field("mean_rel", r.meanRel).field("golden_rms", r.goldenRms);
  j.field("max_abs_over_scale", r.maxAbsOverScale).field("mean_abs_over_scale", r.meanAbsOverScale);
  j.field("p50_abs", r.p50).field("p99_abs", r.p99).field("p999_abs", r.p999);
  j.field("max_abs_index", r.maxAbsIndex);
  counts(j, "max_abs_position", r.maxAbsPosition);
  j.key("log2_abs_hist").beginObject().field("first_bin", int64_t(analyzer::Report::kLog2AbsMin));
  counts(j, "counts", r.log2Abs);
  j.endObject();
  counts(j, "log2_ulp_hist", {r.log2Ulp.begin(), r.log2Ulp.end()});
  j.field("nan_pairs", r.nanPairs);
  counts(j, "bit_mismatch", {r.bitMismatch.begin(), r.bitMismatch.end()});
  j.key("field_classes").beginObject().field("sign_only", r.signOnly).field("exponent", r.exponentInvolved);
  j.field("mantissa_only", r.mantissaOnly).endObject();
  j.key("rows").beginObject().field("bin_width", r.rowMismatch.binWidth);
  counts(j, "mismatched", r.rowMismatch.counts);
  j.endObject();
  j.key("columns").beginObject().field("bin_width", r.colMismatch.binWidth);
  counts(j, "mismatched", r.colMismatch.counts);
  j.endObject();
  j.key("tiles").beginObject().field("rows", r.tileRows).field("cols", r.tileCols).field("down", r.tilesDown);
  j.field("across", r.tilesAcross);
  counts(j, "mismatched", r.tileMismatch);
  j.endObject();
  j.field("runs", r.runs).field("longest_run", r.longestRun);
  counts(j, "run_length_log2_hist", {r.runLengthLog2.begin(), r.runLengthLog2.end()});
  j.field("dominant_gap", r.dominantGap).field("dominant_gap_share", r.dominantGapShare);
  if (device) {
    j.key("device").beginObject().field("name", device->device).field("identical_histograms", true);
    j.field("upload_ms", device->uploadMs).field("histogram_ms", device->kernelMs).endObject();
  }
  if (gn && cn) {
    j.key("numerics").beginObject();
    numericsJson(j, "golden", *gn);
    numericsJson(j, "candidate", *cn);
    j.endObject();
  }
  j.endObject();
  std::cout << '\n';
}

}  // namespace

int runSessionAnalysis(const std::string& session, const std::string& run, const std::string& call,
                       const std::string& tile, bool json, bool verdictsOnly, bool force, const std::string& name) {
  analyzer::ReportOptions ro;
  std::tie(ro.tileRows, ro.tileCols) = parseTile(tile);
  // Each call's replays allocate and free tensors of megabytes; glibc would map and unmap each one
  // (a page fault per page, every call). Kept in the heap instead: lenet 100 iterations, 1,400
  // calls, 13.5 -> 12.3 s, 2.2 -> 0.4 s in the kernel (docs/benchmarks.md).
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Calls are printed while the analysis is stored: a reader that leaves early (| head, a pager
  // quit) must not stop the store half way, so a closed pipe is an error on write, not a signal
  std::signal(SIGPIPE, SIG_IGN);
  events::Progress lines("calls");  // the run panel's determinate bar
  // Each call is printed as the analysis hands it on (in call order, as it is stored), and only the
  // per-op criteria and the per-iteration trend are kept: memory does not grow with the calls.
  struct OpCriteria {  // per op: the reference rule's passes, the lowest cosine, the largest relative error
    int calls = 0, evaluated = 0, passed = 0;
    double cosine = 1, maxRel = 0, above3 = 0;
  };
  std::map<std::string, OpCriteria> perOp;
  std::map<int64_t, double> worst;  // the worst error of each iteration
  // layer and op names come from the session (someone else's, perhaps): printed escaped
  auto safe = [](const std::string& text) { return util::printable(text); };
  std::optional<JsonWriter> j;
  bool started = false;
  const auto start = [&](const analyzer::SessionAnalysis& a) {
    if (started) return;
    started = true;
    if (json) {
      j.emplace(std::cout);
      j->beginObject().field("session", a.session).field("run", a.run).field("source_run", a.sourceRun);
      j->field("stored_as", a.resultRun).field("reused", a.reused).key("calls").beginArray();
    } else {
      std::printf("%-32s %-10s %-8s %12s %12s %12s  %s\n", "call", "layer", "op", "mismatched", "max |err|", "p99 |err|",
                  "verdict");
    }
  };
  const auto each = [&](const analyzer::SessionAnalysis& a, const analyzer::CallAnalysis& c) {
    start(a);
    OpCriteria& o = perOp[c.op];
    ++o.calls;
    o.evaluated += c.criteria.ruleEvaluated;
    o.passed += c.criteria.ruleEvaluated && c.criteria.rulePasses();
    o.cosine = std::min(o.cosine, c.criteria.cosine);
    o.maxRel = std::max(o.maxRel, c.criteria.maxRel);
    o.above3 = std::max(o.above3, c.criteria.relAbove3);
    worst[c.iteration] = std::max(worst[c.iteration], c.report.maxAbs);
    if (!json) {
      std::printf("%-32s %-10s %-8s %12llu %12.4g %12.4g  %s%s %.2f\n", safe(c.call).c_str(), safe(c.layer).c_str(),
                  safe(c.op).c_str(), (unsigned long long)c.report.mismatched, c.report.maxAbs, c.report.p99,
                  c.detection.verdict.model.c_str(), parameters(c.detection.verdict).c_str(),
                  c.detection.verdict.confidence);
      return;
    }
    j->beginObject().field("call", c.call).field("layer", c.layer).field("op", c.op).field("iteration", c.iteration);
    j->field("call_index", c.callIndex).field("variant", c.variant);
    writeVerdict(*j, c.detection.verdict, true);  // verdict, confidence, explanation, parameters, evidence
    j->key("findings").beginArray();  // secondary findings beside the primary verdict
    for (const detector::Verdict& v : c.detection.findings) writeVerdict(*j, v, false);
    j->endArray().key("alternatives").beginArray();  // the other readings that held, by confidence
    for (const detector::Verdict& v : c.detection.alternatives) writeVerdict(*j, v, false);
    j->endArray();
    if (!verdictsOnly) {
      j->field("mismatched", c.report.mismatched).field("max_abs", c.report.maxAbs).field("p99_abs", c.report.p99);
      j->field("mean_abs_over_scale", c.report.meanAbsOverScale);
    }
    writeCriteria(*j, c.criteria);
    j->endObject();
  };
  const analyzer::SessionAnalysis a = analyzer::analyzeSession(
      session, run, call, ro, [&](int64_t done, int64_t total) { lines(done, total, {}, done == total); }, !force, name,
      each);
  start(a);  // no call analysed (kernel failures only)
  if (json) {
    j->endArray().key("kernel_failures").beginArray();
    for (const analyzer::KernelFailure& f : a.failures) {
      j->beginObject().field("call", f.call).field("layer", f.layer).field("op", f.op).field("iteration", f.iteration);
      j->field("call_index", f.callIndex).field("verdict", f.detection.verdict.model);
      j->field("outcome", f.detection.verdict.parameters.at("outcome"));
      j->field("explanation", f.detection.verdict.explanation).endObject();
    }
    j->endArray();
    if (!a.reused) {
      const analyzer::SessionAnalysis::Timing& t = a.timing;
      j->key("timing").beginObject().field("wall_seconds", t.wall).field("workers", int64_t(t.workers));
      j->field("read_seconds", t.read).field("analyzer_seconds", t.analyzer).field("operands_seconds", t.operands);
      j->field("detector_seconds", t.detector).field("reference_seconds", t.reference).field("store_seconds", t.store);
      j->endObject();
    }
    j->endObject();
    std::cout << '\n';
    return 0;
  }
  for (const analyzer::KernelFailure& f : a.failures)
    std::printf("%-32s %-10s %-8s %12s %12s %12s  %s (%s) %.2f\n", safe(f.call).c_str(), safe(f.layer).c_str(),
                safe(f.op).c_str(), "-", "-", "-", f.detection.verdict.model.c_str(),
                safe(f.detection.verdict.parameters.at("outcome")).c_str(),
                f.detection.verdict.confidence);
  std::printf("criteria    per op: lowest cosine, largest relative error, most elements off by 1e-3 in a call; "
              "FlashAttention's rule (max error against float64 <= 2x PyTorch's + 1e-5)\n");
  for (const auto& [op, o] : perOp) {
    std::printf("  %-12s %4d calls  cos %.6f  max rel %.3g  rel>1e-3 %.1f%%  ", safe(op).c_str(), o.calls, o.cosine, o.maxRel,
                100 * o.above3);
    if (o.evaluated) std::printf("2x rule: %d of %d pass\n", o.passed, o.evaluated);
    else std::printf("2x rule: no float64 recomputation of this op\n");
  }
  // The trend: the worst error of each iteration, first to last.
  std::printf("trend       max |err| per iteration:");
  for (const auto& [it, v] : worst) std::printf(" %lld:%.3g", (long long)it, v);
  if (!a.reused) {
    // where the time went: the call loop's wall time, each part's seconds summed over the workers
    const analyzer::SessionAnalysis::Timing& t = a.timing;
    std::printf("\ntime        %.1f s on %u worker%s (seconds summed over them): detector %.1f (its format replays), "
                "operands %.1f (reading inputs, GEMM bounds), analyzer %.1f, reading outputs %.1f, float64 rule %.1f; "
                "storing %.1f",
                t.wall, t.workers, t.workers == 1 ? "" : "s", t.detector, t.operands, t.analyzer, t.read, t.reference,
                t.store);
  }
  if (a.reused)
    std::printf("\nread back from run %s in %s: analysed before with the same tile, calls and rules (--force analyses "
                "again, --name N stores a new analysis)\n", a.resultRun.c_str(), a.session.c_str());
  else
    std::printf("\nstored as run %s in %s\n", a.resultRun.c_str(), a.session.c_str());
  events::stored(a.session, "run", a.resultRun);
  return 0;
}

int runAnalyze(const AnalyzeOptions& o) {
  const io::FloatTensor g = io::readSource(o.golden);
  const io::FloatTensor c = io::readSource(o.candidate);
  io::checkComparable(g, c);
  analyzer::ReportOptions ro;
  std::tie(ro.tileRows, ro.tileCols) = parseTile(o.tile);
  ro.threads = o.threads;
  const analyzer::Report r = analyzer::analyze(g.data(), c.data(), g.shape(), ro);
  std::optional<DeviceCheck> device;
  if (!o.device.empty()) device = histogramsOnDevice(o.device, r, g, c);
  std::optional<analyzer::TensorNumerics> gn, cn;
  if (o.numerics) {
    const uint64_t last = g.shape().empty() ? 0 : g.shape().back();
    gn = analyzer::tensorNumerics(g.data(), g.size(), last);
    cn = analyzer::tensorNumerics(c.data(), c.size(), last);
  }
  if (o.json) {
    printJson(r, g, c, device ? &*device : nullptr, gn ? &*gn : nullptr, cn ? &*cn : nullptr);
  } else {
    printText(r, g);
    if (gn) {
      numericsText("golden", *gn);
      numericsText("candidate", *cn);
    }
    if (device)
      std::printf("device      %s: histograms identical to the CPU's; upload %.3f ms, kernel %.3f ms\n",
                  device->device.c_str(), device->uploadMs, device->kernelMs);
  }
  return 0;
}

}  // namespace peat::cli
