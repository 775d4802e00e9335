// SPDX-License-Identifier: MIT
#pragma once
#include <QWidget>

#include <string>
#include <vector>

#include "core/analysis/session_analysis.h"
#include "core/analyzer/numerics.h"
#include "core/store/session.h"

class QLabel;
class QPushButton;
class QSplitter;
class QStackedWidget;
class QTextBrowser;

namespace peat::views {

class ErrorPlotPanel;
struct CallOp;
struct FailedCallPage;

// One analysed call at the centre of the window (issue 18's call page): its identity, the error
// statistics, the verdict with its confidence, explanation, parameters and evidence, the findings
// beside it and the alternatives, and the error plots (histogram, bit positions, Where map) at full
// size. The verdict's evidence is drawn on the plots it refers to (a bit, a stride, confined rows
// and columns). Every number comes from the stored report and verdict (core).
class CallPage : public QWidget {
  Q_OBJECT
 public:
  explicit CallPage(QWidget* parent = nullptr);
  // `title`: the call as the tree names it (layer, op, phase, run); `description`: what else the
  // session knows of it (its tensors and their shapes), one item a line.
  void showCall(const analyzer::StoredCallReport& report, const QString& title, const QString& description,
                const store::Verdict* verdict);
  // A recorded call: its op kind, variant and parameters, and its tensors with each input named by
  // its role (the recorded call's inputs beside a playback's outputs).
  void showCall(const analyzer::StoredCallReport& report, const QString& title, const CallOp& op,
                const std::vector<store::TensorInfo>& tensors, const store::Verdict* verdict);
  void showMessage(const QString& text);
  // A call the kernel failed in its kernel host (no output, so no plots): its tensors' shapes, the
  // failure, its verdict, and the command that replays it alone, with a button that copies it.
  void showKernelFailure(const FailedCallPage& page, const QString& title);
  QString replayCommand() const;  // the command shown ("" when the page shows no failed call)
  QPushButton* copyReplayButton() const { return copy_; }
  // The golden and the candidate output's statistics side by side (a call whose outputs the session
  // holds, or a compared pair); `why` instead when they are not at hand.
  void showPairStats(const analyzer::ValueStats& golden, const analyzer::ValueStats& candidate);
  void showNoPairStats(const QString& why);
  ErrorPlotPanel* plots() const { return plots_; }
  QString titleText() const;
  QString detailsText() const;  // statistics and verdict (or a failed call's page), as plain text

 private:
  void showReport(const analyzer::StoredCallReport& report, const QString& title, const QString& callHtml,
                  const store::Verdict* verdict);
  QLabel* title_;
  QTextBrowser* details_;
  QStackedWidget* stack_;   // the details beside the plots, or a failed call's page (no plots)
  QSplitter* split_;
  QTextBrowser* failure_;
  QWidget* replayRow_;  // the command that replays a failed call, and its Copy button
  QLabel* replay_;
  QPushButton* copy_;
  QString html_;  // the page's text before the pair's statistics
  ErrorPlotPanel* plots_;
};

}  // namespace peat::views
