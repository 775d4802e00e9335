// SPDX-License-Identifier: MIT
#pragma once
// What is selected in the session tree, on the pages: the current item's page (a run's curves,
// numerics or campaign, a SAVE analysis) and the selected calls' pages (one call's page at the
// centre with the verdict its own analysis gave it, up to six calls overlaid in the dock). The
// controller decides from the summary in memory what each page is to show; each page reads it in
// its own job off the GUI thread (its own JobTracker); until it delivers the page says what it is
// loading, and why when it cannot, never what was selected before.
#include <QObject>
#include <QString>

#include <string>
#include <vector>

#include "views/pageloads.h"
#include "views/sessionstate.h"

class QModelIndex;
class QTabWidget;
class QTreeView;

namespace peat::modelgraph {
struct ModelGraph;
}

namespace peat::views {

class CallPage;
class CurvePanel;
class ErrorPlotPanel;
class ExplainPanel;
class GraphPanel;
class JobTracker;
class NumericsPanel;
class OverviewPanel;
class PairController;
class SavePanel;
class SessionTreeModel;
class VerdictController;
struct CallRequest;
struct FailedCall;
struct FailedCallPage;
struct SelectedCalls;

// The window's pages, which the selection fills.
struct Pages {
  QTabWidget* central;  // the page stack
  OverviewPanel* overview;
  CallPage* call;
  ErrorPlotPanel* dock;  // the Error distribution dock: several calls overlaid
  CurvePanel* curves;
  NumericsPanel* numerics;
  SavePanel* save;
  ExplainPanel* explain;
  GraphPanel* graph;  // the model's graph of the selected run or SAVE analysis
};

class SelectionController : public QObject {
  Q_OBJECT
 public:
  SelectionController(const SessionState* session, SessionTreeModel* model, QTreeView* tree, const Pages& pages,
                      VerdictController* verdicts, PairController* pairs, QObject* parent);
  void showItem(const QModelIndex& current);  // the tree's current item
  void showSelectedCalls();                   // the tree's selected calls
  // The most telling verdict of the session on the call page; false when no run's calls have verdicts.
  bool showTellingCall();
  // Every page says `why` (keepLive: a run's live curve and campaign stay).
  // `saveWhy`: what the SAVE page says instead (its items are SAVE analyses and layers, not calls)
  void reset(const QString& why, bool keepLive = false, const QString& saveWhy = QString());
  bool loading() const;  // a page is still reading what is selected
  // An op clicked on the graph: its calls (PEAT) or its SAVE layer selected in the tree.
  void selectGraphNode(const modelgraph::ModelGraph& graph, int node);

 signals:
  void pageShown();  // a page showed what a selection's job read (or why it could not)
  void errorRaised(const QString& text);

 private:
  void startItemLoads(const QModelIndex& current);  // showItem's part: each page's read of the item
  void itemReadFailed(const QString& why);  // a page could not read its part of the item
  void showGraphOf(const QModelIndex& current);  // the Graph page follows the tree's current item
  void showSaveItem(const QString& layer);  // the SAVE analysis shown: a layer's map, or its bits
  // What the call page read for the selection, to the page, the docks and the verdict table.
  void applySelectedCalls(const SelectedCalls& selected);
  void applyFailedCall(const FailedCallPage& page);
  void showFailedCall(const FailedCall& failed, const QString& title);  // a call the kernel failed

  const SessionState* session_;
  SessionTreeModel* model_;
  QTreeView* tree_;
  Pages pages_;
  VerdictController* verdicts_;
  PairController* pairs_;
  JobTracker* tellJobs_;  // the most telling verdict
  // the calls the call page reads (in its own job): their titles, for when the read arrives
  std::vector<CallRequest> callRequests_;
  QString failedTitle_;
  std::string shownAnalysis_;    // the SAVE analysis on its page
  std::string loadingAnalysis_;  // the one the page reads, and the layer to show when it arrives
  QString pendingLayer_;
};

}  // namespace peat::views
