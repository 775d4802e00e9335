// SPDX-License-Identifier: MIT
#include "core/analysis/call_view.h"

#include <stdexcept>

namespace peat::analyzer {

CallView loadCallView(const store::SessionReader& reader, const store::SessionSummary& summary,
                      const std::string& run, const std::string& call) {
  CallView view;
  view.run = run;
  view.call = call;
  view.analysisRun = analysisRunOf(summary, run);
  if (view.analysisRun.empty())
    throw std::runtime_error("run " + run + " has no analysis: run 'peat analyze --session SESSION --run " + run + "'");
  try {
    view.report = loadCallReport(reader, view.analysisRun, call);
    view.report.displayName = callDisplayName(summary, run, call);
  } catch (const std::exception& e) {
    throw std::runtime_error("no report for " + callDisplayName(summary, run, call) + " in " + view.analysisRun +
                             " (it may not have been replayed): " + e.what());
  }
  for (store::Verdict& v : reader.verdicts(view.analysisRun))
    if (v.call == call) {
      view.verdict = std::move(v);
      break;
    }
  view.tensors = reader.callTensors(run, call);
  return view;
}

std::string candidateRunOf(const store::SessionSummary& summary, const std::string& analysisRun) {
  for (const store::RunInfo& r : summary.runs)
    if (r.name == analysisRun && r.spec.kind == "analysis") {
      const auto it = r.attributes.find("candidate_run");
      return it == r.attributes.end() ? std::string() : it->second;
    }
  return {};
}

std::string callDisplayName(const store::SessionSummary& summary, const std::string& run, const std::string& call) {
  for (const store::RunInfo& r : summary.runs) {
    if (r.name != run) continue;
    for (const store::IterationInfo& it : r.iterations)
      for (const store::CallInfo& c : it.calls)
        if (c.path == call)
          return "#" + std::to_string(c.id.callIndex) + " " + c.id.layer + " (iteration " + std::to_string(it.iteration) + ")";
  }
  return call;
}

TellingVerdict tellingVerdict(const store::SessionReader& reader, const store::SessionSummary& summary) {
  TellingVerdict out;
  double confidence = -1;
  for (const store::RunInfo& r : summary.runs) {
    if (r.spec.kind != "analysis" || r.verdictCount == 0) continue;
    std::vector<store::Verdict> verdicts = reader.verdicts(r.name);
    int best = -1;
    for (std::size_t i = 0; i < verdicts.size(); ++i)
      if (verdicts[i].model != "exact" && (best < 0 || verdicts[i].confidence > verdicts[std::size_t(best)].confidence))
        best = int(i);
    if (best >= 0 && verdicts[std::size_t(best)].confidence > confidence) {
      confidence = verdicts[std::size_t(best)].confidence;
      out = {r.name, std::move(verdicts), best};
    }
  }
  return out;
}

std::string describeRun(const store::RunInfo& r) {
  const auto attribute = [&r](const char* name) {
    const auto at = r.attributes.find(name);
    return at == r.attributes.end() ? std::string() : at->second;
  };
  std::string about = "Run " + r.name + ": " + r.spec.kind + ", kernel " + r.spec.kernel;
  if (r.spec.kind == "runtime_fi") {
    if (!attribute("every").empty() && attribute("every") != "0") about += ", swapped in every " + attribute("every") + " calls";
    if (!attribute("target_layer").empty()) about += " of layer " + attribute("target_layer");
    if (!attribute("target_op").empty()) about += " (" + attribute("target_op") + " calls)";
  }
  if (!r.spec.description.empty()) about += ". " + r.spec.description;
  return about;
}

}  // namespace peat::analyzer
