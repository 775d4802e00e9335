// SPDX-License-Identifier: MIT
#pragma once
// What the call page shows of the selected calls, read from the session in the page's job off the
// GUI thread (JobTracker). Each result names the run and the analysis it was read from, so a page
// shows what was selected or says why it cannot, never what was selected before. (A run's, an
// iteration's and a SAVE result's pages read their parts themselves: CurvePanel::load,
// SavePanel::loadAnalysis, NumericsPanel::loadRun, VerdictController::load.)
#include <QString>

#include <memory>
#include <string>
#include <vector>

#include "core/analysis/call_view.h"
#include "core/store/session.h"
#include "views/calltext.h"

namespace peat::views {

// One call selected in the tree: its run, its path, and its title as the tree names it.
struct CallRequest {
  std::string run, call;
  QString title;
};

struct SelectedCalls {
  std::vector<analyzer::CallView> calls;  // those that could be read, in selection order
  std::vector<CallOp> ops;                // each one's op, parameters and recorded inputs (as calls)
  QString missing;                        // why a selected call is not among them (the first reason)
  std::string verdictRun;                 // the first call's analysis, whose verdicts fill the table
  std::vector<store::Verdict> verdicts;
};
SelectedCalls loadSelectedCalls(const store::SessionReader& reader, const store::SessionSummary& summary,
                                const std::vector<CallRequest>& requests);

// One line a tensor: "output f32[64x32]".
QString tensorListText(const std::vector<store::TensorInfo>& tensors);

}  // namespace peat::views
