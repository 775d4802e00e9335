// SPDX-License-Identifier: MIT
#pragma once
// Calls a user kernel failed in its kernel host (issue 34: a crash, a hang past its time-out, a
// write outside its output): the playback stored no output for them, only an outcome in its
// call_errors table, and `peat analyze --session` gives them verdicts of their own (kernel_crash,
// kernel_hang, kernel_out_of_bounds). The session tree lists them beside the calls that ran, and
// the call page shows one: its shapes, the failure, its verdict and the command that replays it.
// Both read the session: off the GUI thread.
#include <QString>

#include <optional>
#include <string>
#include <vector>

#include "core/store/call_params.h"
#include "core/store/session.h"

namespace peat::views {

struct FailedCall {
  std::string run;      // the playback run
  std::string call;     // the call's path ("iterations/000000/calls/000004")
  std::string layer, op, phase;
  int64_t iteration = 0, callIndex = 0;
  std::string outcome;  // as the run recorded it: crash:SIGSEGV, hang, out_of_bounds, ...
};

// Every call a playback run's kernel failed (the runs that record kernel failures), in table order.
std::vector<FailedCall> readFailedCalls(const store::SessionReader& reader, const store::SessionSummary& summary);

// What the call page shows of one failed call.
struct FailedCallPage {
  FailedCall failed;
  std::string sourceRun, kernel;           // the recorded run it replayed, and the kernel
  std::vector<store::TensorInfo> tensors;  // the recorded call's tensors and their shapes
  store::CallDescription description;      // the recorded call's op, variant and parameters
  std::string failure;                     // the run's own line for this failure ("" when it kept none)
  std::string firstFailure;                // the run's first failure, when it is another call's
  std::string analysisRun;                 // the run's newest analysis ("" when there is none)
  std::optional<store::Verdict> verdict;   // the verdict that analysis gave the call
  std::vector<store::Verdict> verdicts;    // all of that analysis's verdicts, for the verdict table
  QString replay;                          // the shell command that replays the call alone
  QString analyze;                         // the command that gives the run its verdicts (no analysis yet)
};
FailedCallPage loadFailedCallPage(const store::SessionReader& reader, const store::SessionSummary& summary,
                                  const QString& sessionPath, const FailedCall& failed);

// `peat playback` of one call of `sourceRun` through `kernel`, written to a session beside
// `sessionPath` (the session itself stays as it is); each argument quoted for a POSIX shell.
QString replayCommand(const QString& sessionPath, const std::string& sourceRun, const std::string& kernel,
                      const std::string& call);

}  // namespace peat::views
