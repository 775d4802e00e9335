// SPDX-License-Identifier: MIT
// Analyses as a session stores them and as they are read back: verdicts with their findings, the
// per-call reports the plots and the call page read, the analysis of a run, and a whole analysis
// read back for analyze --session's reuse (stored_analysis.h).
#include "core/analysis/stored_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>

#include "core/store/session.h"

namespace peat::analyzer {

std::string reportId(std::string call) {
  for (char& ch : call)
    if (ch == '/') ch = '-';
  return call;
}

namespace {
// A detector verdict as the session stores it: its evidence and parameters as fields.
store::Finding finding(const detector::Verdict& v) {
  return {v.model, v.confidence, {v.evidence.begin(), v.evidence.end()}, {v.parameters.begin(), v.parameters.end()}};
}

}  // namespace

store::Verdict storedVerdict(const std::string& call, const detector::Detection& d) {
  std::string evidence = d.verdict.explanation;
  for (const auto& [key, value] : d.verdict.parameters) evidence += "; " + key + "=" + value;
  store::Verdict stored{call, d.verdict.model, d.verdict.confidence, evidence, {}};
  stored.findings.push_back(finding(d.verdict));
  for (const detector::Verdict& alternative : d.alternatives) stored.findings.push_back(finding(alternative));
  return stored;
}

void readBack(const store::SessionReader& reader, const std::string& analysisRun, SessionAnalysis& out) {
  const std::vector<h5::Column> table = reader.table(analysisRun, "call_reports");
  auto column = [&](const char* name) -> const h5::Column* {
    for (const h5::Column& c : table)
      if (c.name == name) return &c;
    return nullptr;
  };
  const h5::Column *callCol = column("call"), *layer = column("layer"), *op = column("op");
  if (!callCol || !layer || !op || !column("elements"))
    throw std::runtime_error("analysis run '" + analysisRun + "' has no call table to read back");
  std::map<std::string, store::Verdict> verdicts;
  for (store::Verdict& v : reader.verdicts(analysisRun)) verdicts[v.call] = std::move(v);
  std::map<std::string, store::StoredRecord> records;  // every report, each pack read once
  for (auto& [id, record] : reader.reports(analysisRun)) records.emplace(id, std::move(record));
  auto number = [&](const char* name, std::size_t row) {
    const h5::Column* c = column(name);
    return c && !c->isText && row < c->numbers.size() ? c->numbers[row] : 0.0;
  };
  for (std::size_t row = 0; row < callCol->size(); ++row) {
    if (std::isnan(number("elements", row))) continue;  // a kernel failure's row
    CallAnalysis a;
    a.call = callCol->text[row];
    a.layer = layer->text[row];
    a.op = op->text[row];
    a.iteration = int64_t(number("iteration", row));
    a.callIndex = int64_t(number("call_index", row));
    a.variant = int64_t(number("variant", row));
    Report& r = a.report;
    r.elements = uint64_t(number("elements", row));
    r.mismatched = uint64_t(number("mismatched", row));
    r.maxAbs = number("max_abs", row), r.meanAbs = number("mean_abs", row), r.rmsAbs = number("rms_abs", row);
    r.maxRel = number("max_rel", row), r.meanAbsOverScale = number("mean_abs_over_scale", row);
    r.p50 = number("p50_abs", row), r.p99 = number("p99_abs", row), r.p999 = number("p999_abs", row);
    const auto v = verdicts.find(a.call);
    if (v != verdicts.end() && !v->second.findings.empty()) {
      auto verdictOf = [](const store::Finding& f) {
        detector::Verdict d;
        d.model = f.model;
        d.confidence = f.confidence;
        d.parameters = {f.labels.begin(), f.labels.end()};
        d.evidence = {f.numbers.begin(), f.numbers.end()};
        return d;
      };
      a.detection.verdict = verdictOf(v->second.findings.front());
      // the stored line is the explanation, then "; key=value" for each parameter
      std::string line = v->second.evidence;
      for (auto it = a.detection.verdict.parameters.rbegin(); it != a.detection.verdict.parameters.rend(); ++it) {
        const std::string suffix = "; " + it->first + "=" + it->second;
        if (line.size() >= suffix.size() && line.compare(line.size() - suffix.size(), suffix.size(), suffix) == 0)
          line.resize(line.size() - suffix.size());
      }
      a.detection.verdict.explanation = line;
      for (std::size_t k = 1; k < v->second.findings.size(); ++k)
        a.detection.alternatives.push_back(verdictOf(v->second.findings[k]));
    } else if (v != verdicts.end()) {
      a.detection.verdict.model = v->second.model;
      a.detection.verdict.confidence = v->second.confidence;
      a.detection.verdict.explanation = v->second.evidence;
    }
    const auto record = records.find(reportId(a.call));
    if (record == records.end())
      throw std::runtime_error("analysis run '" + analysisRun + "' has no report of call " + a.call);
    const StoredCallReport stored = callReport(record->second, analysisRun, a.call);
    if (stored.hasCriteria) a.criteria = stored.criteria;
    out.calls.push_back(std::move(a));
  }
}

std::string analysisRunOf(const store::SessionSummary& summary, const std::string& run) {
  std::string found;
  for (const store::RunInfo& r : summary.runs) {
    const auto it = r.attributes.find("candidate_run");
    if (r.spec.kind == "analysis" && it != r.attributes.end() && it->second == run) found = r.name;
  }
  return found;
}

StoredCallReport loadCallReport(const store::SessionReader& reader, const std::string& analysisRun, const std::string& call) {
  return callReport(reader.report(analysisRun, reportId(call)), analysisRun, call);
}

StoredCallReport callReport(const store::StoredRecord& rec, const std::string& analysisRun, const std::string& call) {
  StoredCallReport out;
  out.analysisRun = analysisRun;
  out.call = call;
  const auto label = rec.labels.find("verdict");
  if (label != rec.labels.end()) out.verdict = label->second;
  auto scalar = [&](const char* key) {
    const auto it = rec.scalars.find(key);
    return it == rec.scalars.end() ? 0.0 : it->second;
  };
  out.elements = scalar("elements");
  out.mismatched = scalar("mismatched");
  out.maxAbs = scalar("max_abs");
  out.meanAbs = scalar("mean_abs");
  out.p99 = scalar("p99_abs");
  out.log2AbsFirstBin = int(scalar("log2_abs_first_bin"));
  auto counts = [&](const char* name, std::size_t most) {
    const auto it = rec.arrays.find(name);
    if (it == rec.arrays.end() || it->second.dtype != store::DType::U64 || it->second.elementCount() > most)
      throw std::runtime_error("report of call " + call + " in run " + analysisRun + " has no " + name + " histogram");
    std::vector<uint64_t> v(static_cast<std::size_t>(it->second.elementCount()));
    std::memcpy(v.data(), it->second.bytes.data(), v.size() * sizeof(uint64_t));
    return v;
  };
  out.log2Abs = counts("log2_abs_hist", 1024);
  out.log2Ulp = counts("log2_ulp_hist", 64);
  out.bitMismatch = counts("bit_mismatch", 32);
  out.rows = uint64_t(scalar("rows"));
  out.cols = uint64_t(scalar("cols"));
  out.tileRows = uint64_t(scalar("tile_rows"));
  out.tileCols = uint64_t(scalar("tile_cols"));
  out.tilesDown = uint64_t(scalar("tiles_down"));
  out.tilesAcross = uint64_t(scalar("tiles_across"));
  if (rec.arrays.count("tile_mismatch") && out.tilesDown * out.tilesAcross <= (uint64_t(1) << 20))
    out.tileMismatch = counts("tile_mismatch", std::size_t(out.tilesDown * out.tilesAcross));
  if (rec.scalars.count("criteria_cosine")) {  // analyses stored before the criteria have none
    out.hasCriteria = true;
    Criteria& k = out.criteria;
    k.elements = uint64_t(out.elements);
    k.cosine = scalar("criteria_cosine");
    k.maxAbs = scalar("criteria_max_abs");
    k.maxRel = scalar("criteria_max_rel");
    k.relAbove2 = scalar("criteria_rel_above_1e-2");
    k.relAbove3 = scalar("criteria_rel_above_1e-3");
    k.relAbove4 = scalar("criteria_rel_above_1e-4");
    k.maxUlp = scalar("criteria_max_ulp");
    k.nonFinite = uint64_t(scalar("criteria_non_finite"));
    if (rec.scalars.count("rule_candidate_error")) {
      k.ruleEvaluated = true;
      k.candidateError = scalar("rule_candidate_error");
      k.referenceError = scalar("rule_reference_error");
      const auto ref = rec.labels.find("rule_reference");
      k.reference = ref == rec.labels.end() ? std::string() : ref->second;
    }
  }
  if (out.mismatched > 0 && out.cols > 0) {
    const uint64_t at = uint64_t(scalar("max_abs_index"));
    out.worstRow = int64_t(at / out.cols);
    out.worstCol = int64_t(at % out.cols);
  }
  return out;
}

CallPair loadCallPair(const store::SessionReader& reader, const std::string& analysisRun, const std::string& call) {
  const store::SessionSummary s = reader.summaryWithoutTensors();
  auto attribute = [&](const std::string& run, const char* key) {
    for (const store::RunInfo& r : s.runs)
      if (r.name == run) {
        const auto it = r.attributes.find(key);
        if (it != r.attributes.end()) return it->second;
      }
    throw std::invalid_argument("run '" + run + "' names no " + key);
  };
  const std::string candidateRun = attribute(analysisRun, "candidate_run"), sourceRun = attribute(candidateRun, "source_run");
  auto output = [&](const std::string& run, std::vector<uint64_t>& shape) {
    for (const store::TensorInfo& t : reader.callTensors(run, call))
      if (t.name == "output") {
        shape = t.shape;
        uint64_t n = 1;
        for (uint64_t d : t.shape) n *= d;
        std::vector<float> v(static_cast<std::size_t>(n));
        reader.readTensorInto(run, call, "output", store::DType::F32, v.data(), n);
        return v;
      }
    throw std::invalid_argument("call " + call + " of run '" + run + "' has no stored output");
  };
  CallPair p;
  std::vector<uint64_t> candidateShape;
  p.golden = output(sourceRun, p.shape);
  p.candidate = output(candidateRun, candidateShape);
  if (candidateShape != p.shape) throw std::invalid_argument("call " + call + ": golden and candidate outputs differ in shape");
  return p;
}

std::vector<uint64_t> mapShape(const std::vector<uint64_t>& shape, const std::string& op) {
  if (shape.size() == 4 && (op.empty() || op == "conv2d")) return {shape[0] * shape[1], shape[2] * shape[3]};
  return shape;
}

StoredCallReport plottedReport(const Report& r, const std::string& call, const std::string& verdict) {
  StoredCallReport out;
  out.call = call;
  out.verdict = verdict;
  out.elements = double(r.elements);
  out.mismatched = double(r.mismatched);
  out.maxAbs = r.maxAbs;
  out.meanAbs = r.meanAbs;
  out.p99 = r.p99;
  out.log2AbsFirstBin = Report::kLog2AbsMin;
  out.log2Abs = r.log2Abs;
  out.log2Ulp.assign(r.log2Ulp.begin(), r.log2Ulp.end());
  out.bitMismatch.assign(r.bitMismatch.begin(), r.bitMismatch.end());
  out.rows = r.rows;
  out.cols = r.cols;
  out.tileRows = r.tileRows;
  out.tileCols = r.tileCols;
  out.tilesDown = r.tilesDown;
  out.tilesAcross = r.tilesAcross;
  out.tileMismatch = r.tileMismatch;
  if (r.mismatched > 0 && r.cols > 0) {
    out.worstRow = int64_t(r.maxAbsIndex / r.cols);
    out.worstCol = int64_t(r.maxAbsIndex % r.cols);
  }
  return out;
}

}  // namespace peat::analyzer
