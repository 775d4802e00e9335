// SPDX-License-Identifier: MIT
#pragma once
#include <QWidget>

#include <functional>
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
class JobTracker;
struct CallOp;
struct FailedCallPage;
struct SelectedCalls;

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
  // A message instead of a call; a read still in flight is dropped (it would show an older call).
  void showMessage(const QString& text);
  // Reads the selected calls (or a failed call's page) in this page's own job, off the GUI thread,
  // showing `loading` meanwhile; then callsRead or failedCallRead (or readFailed) on the GUI thread
  // if no newer load or message came first. The page itself shows nothing of it: the selection
  // controller decides what the page, the docks and the verdict table show.
  void load(const QString& loading, std::function<SelectedCalls()> read);
  void loadFailed(const QString& loading, std::function<FailedCallPage()> read);
  bool loading() const;
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

 signals:
  void callsRead(const peat::views::SelectedCalls& selected);
  void failedCallRead(const peat::views::FailedCallPage& page);
  void readFailed(const QString& why);

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
  JobTracker* jobs_;  // this page's reads
};

}  // namespace peat::views
