// SPDX-License-Identifier: MIT
#pragma once
// What a view shows of one call of a session, read in one step from one analysis: its report, the
// verdict that same analysis gave it, and its tensors. A page built from a CallView can only show
// the run and the analysis it names (issue 33: a page once took its verdict from whichever run the
// verdict table held). Reads the session; views call it off the GUI thread.
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/session_analysis.h"
#include "core/store/session.h"

namespace peat::analyzer {

struct CallView {
  std::string run;          // the run the call belongs to (a playback or runtime-FI run)
  std::string call;         // its path inside the run ("iterations/000010/calls/000003")
  std::string analysisRun;  // the newest analysis of `run`: the report and the verdict are its own
  StoredCallReport report;
  std::optional<store::Verdict> verdict;  // none: that analysis stored no verdict for the call
  std::vector<store::TensorInfo> tensors;
};

// The call `call` of run `run` as its newest analysis saw it. Throws std::runtime_error with the
// reason (one line) when the run has no analysis or the analysis has no report for the call.
CallView loadCallView(const store::SessionReader& reader, const store::SessionSummary& summary,
                      const std::string& run, const std::string& call);

// The run an analysis replayed (its candidate_run attribute); "" for a run that is no analysis.
std::string candidateRunOf(const store::SessionSummary& summary, const std::string& analysisRun);

// The name the session tree gives a call with its iteration ("#3 conv2 (iteration 0)"); the path itself
// when the summary does not list the call.
std::string callDisplayName(const store::SessionSummary& summary, const std::string& run, const std::string& call);

// The most telling verdict of a session: over every analysis, the most confident verdict that is
// not "exact" (a fault before a legitimate rounding at equal confidence, by the detector's
// confidences); best is its row in verdicts, -1 when every verdict is exact.
struct TellingVerdict {
  std::string analysisRun;
  std::vector<store::Verdict> verdicts;  // that analysis's verdicts, as its table shows them
  int best = -1;
};
TellingVerdict tellingVerdict(const store::SessionReader& reader, const store::SessionSummary& summary);

// What a run is, in one line: its kind and kernel, for runtime FI how the candidate was swapped in,
// then its description ("Run rfi: runtime_fi, kernel bf16, swapped in every 4 calls of layer fc1").
std::string describeRun(const store::RunInfo& run);

}  // namespace peat::analyzer
