// SPDX-License-Identifier: MIT
#pragma once
// What the pages show of a selection, read from the session in one job off the GUI thread
// (JobTracker). Each result names the run and the analysis it was read from, so a page shows what
// was selected or says why it cannot, never what was selected before.
#include <QString>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/call_view.h"
#include "core/save/analysis_record.h"
#include "core/save/campaign_record.h"
#include "core/store/curves.h"
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

// A tree item other than a call: a run, an iteration, a SAVE result or layer.
struct ItemData {
  bool hasVerdicts = false;  // the table shows verdictRun's verdicts (a run or iteration item)
  std::string verdictRun;
  std::vector<store::Verdict> verdicts;
  std::optional<store::TrainingCurve> curve, goldenCurve;
  QString about;                                  // the run's kind, kernel and (runtime FI) schedule
  std::optional<std::vector<std::string>> numerics;  // the run's numerics quantities
  std::optional<save::StoredCampaign> campaign;
  std::optional<save::StoredAnalysis> analysis;   // a SAVE result or layer's analysis
};
enum class ItemKind { Run, Iteration, SaveResult };
ItemData loadItem(const store::SessionReader& reader, const store::SessionSummary& summary, ItemKind kind,
                  const std::string& key);

// One line a tensor: "output f32[64x32]".
QString tensorListText(const std::vector<store::TensorInfo>& tensors);

}  // namespace peat::views
