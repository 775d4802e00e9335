// SPDX-License-Identifier: MIT
#pragma once
// The analyzer and detector over a session: every call a playback run stored, against the call the
// profiler recorded, with per-call numbers, their trend over iterations, and stored results.
#include <string>
#include <vector>

#include "core/analyzer/report.h"
#include "core/detector/detector.h"

namespace peat::analyzer {

struct CallAnalysis {
  std::string call;  // "iterations/000010/calls/000003"
  std::string layer, op;
  int64_t iteration = 0, callIndex = 0;
  Report report;
  detector::Detection detection;
};

struct SessionAnalysis {
  std::string session, run, sourceRun, resultRun;
  std::vector<CallAnalysis> calls;
};

// `run` is a playback run made with --store-outputs; `call` (optional) limits it to one call path.
// Writes a run "analysis-<run>" with a per-call table, one report per call and the verdicts.
SessionAnalysis analyzeSession(const std::string& session, const std::string& run, const std::string& call,
                               const ReportOptions& options);

}  // namespace peat::analyzer
