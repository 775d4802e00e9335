// SPDX-License-Identifier: MIT
#pragma once
#include <QMainWindow>
#include <QPersistentModelIndex>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/save/analysis_record.h"
#include "core/save/campaign_record.h"
#include "core/store/curves.h"
#include "core/store/session.h"
#include "views/sessionstate.h"

namespace peat::store {
class SessionReader;
}

class QCustomPlot;
class QDockWidget;
class QMenu;
class QDragEnterEvent;
class QDropEvent;
class QTabWidget;
class QTableView;
class QTreeView;
class QLabel;

namespace peat::views {

class SessionTreeModel;
class OverviewPanel;
class DevicesPanel;
class ErrorPlotPanel;
class CallPage;
class SavePanel;
class CurvePanel;
class NumericsPanel;
class GraphPanel;
class BitExplorer;
class RunPanel;
class ComparePanel;
class ExplainPanel;
class SessionController;
class VerdictTableModel;
class TourPanel;
class TourController;
class VerdictController;
class PairController;
class LinkedViews;
class SelectionController;
class HistoryController;
class FlipController;
class CompareController;
class LiveRun;
class SaveRunController;
class CloseGuard;
class SessionWatcher;
class PageExport;
class RecentSessions;
struct OpenedSession;

// The workbench's main window: menus, docks and the page stack. What the pages show and the tools
// beside them are controllers of their own (selection, verdicts, compared pair and linked views,
// flips, history, session comparison, live run, tour).
class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Opens a session and waits for it (the window stays responsive: the work runs off the GUI
  // thread); on failure shows the reason and keeps the current session. Returns success.
  bool openSession(const QString& path);
  // Starts opening a session and returns at once; sessionOpenEnded reports the outcome. A newer
  // open drops an older one that has not finished.
  quint64 startOpeningSession(const QString& path);  // the open's generation (SessionController)
  // The file changed on disk: every handle of ours let go, then opened afresh.
  void reopenWhenReleased(const QString& path);
  SessionController* sessionController() const { return sessions_; }
  void closeSession();
  // Selects the session tree item at a path of display names joined by '/', e.g.
  // "SAVE/lenet-symbolic/conv2" or "save-campaign"; its view opens. False when there is none.
  bool selectItem(const QString& path);
  QString sessionPath() const { return session_.path; }
  QString lastError() const { return lastError_; }
  // Said once shown on a screen smaller than the 1024x700 the workbench is laid out for; "" otherwise.
  QString screenNote() const { return screenNote_; }
  SessionTreeModel* sessionModel() const { return model_; }
  SavePanel* savePanel() const { return savePanel_; }
  NumericsPanel* numericsPanel() const { return numerics_; }
  GraphPanel* graphPanel() const { return graph_; }
  // Tools > Bit Explorer (made on first use); null until then.
  void showBitExplorer();
  BitExplorer* bitExplorer() const;
  CallPage* callPage() const { return callPage_; }
  // Go > Back and Forward (Alt+Left, Alt+Right): the call selected before or after; false at an end.
  bool goBack();
  bool goForward();
  CurvePanel* curvePanel() const { return curves_; }
  RunPanel* runPanel() const { return runPanel_; }
  SaveRunController* saveRuns() const { return saveRuns_; }  // a SAVE run's outputs to the SAVE tab
  void showRunPanel();  // brings the Run dock to the front
  // Opens the demo session (in the application data directory), making it first with the run
  // panel when it is missing; false only when an existing one does not open.
  bool openDemo();
  // The most telling page of the session: the analysed call whose verdict is the most confident (a
  // fault before a legitimate rounding), on the call page with its evidence drawn. False when no
  // run's calls have verdicts.
  bool showTellingCall();
  // Help > Tour: the story on the demo session (opened, or made first), step by step.
  void startTour();
  TourPanel* tourPanel() const;
  // A value of the SAVE layer map shown opens in the bit explorer (as a click on it does).
  void openSaveValue(qint64 index);
  // Dropped or given files: a .h5 session opens; two .npy (or FILE.h5:/dataset) tensors are
  // compared, golden first; one .npy waits for its candidate. False with lastError() on failure.
  bool openFiles(const QStringList& paths);
  // Compare > Compare Selected: two selected analysed calls side by side; or, with a second
  // session open (openCompareSession), the selected call here and the same call there. False with
  // lastError() when the selection does not make a pair.
  bool compareSelected();
  bool openCompareSession(const QString& path);
  ComparePanel* comparePanel() const { return compare_; }

 signals:
  void comparisonShown();     // a dropped pair's histograms are on screen
  void comparisonRegrouped();  // the compared pair's report, with the Where map grouped anew
  void comparisonDetected();  // ... and the detector's verdict
  void flipShown();           // "Flip in the model" came back (its outcome or its error)
  void pairStatsShown();      // the call page's golden and candidate statistics (or why there are none)
  void sessionOpenEnded(const QString& path, bool opened);
  void pageShown();           // a page showed what a selection's job read (or why it could not)

 public:
  static QString demoPath();
  QTreeView* sessionTree() const { return tree_; }
  // The plot and the table (CSV) that File > Export and Edit > Copy act on.
  QCustomPlot* currentPlot() const;
  QString currentCsv() const;
  const PageExport* pageExport() const { return exports_.get(); }
  // When set, failures go to the status bar only (no dialog): tests and --screenshot use it.
  void setQuietErrors(bool quiet) { quietErrors_ = quiet; }
  // A page is still reading what is selected (tests wait for this to end).
  bool pagesLoading() const;
  // The tree item at the centre, as a path of display names ("edge/iteration 0/#6 fc1"); "" for none.
  QString currentItemPath() const;
  // Runs `then` once no page is reading (at once when none is).
  void afterPages(std::function<void()> then);
  // An error for the user: the status bar, lastError(), and a dialog unless errors are quiet.
  void reportError(const QString& text);
  void raiseExplain();  // the Explain dock to the front: what a verdict means
  ErrorPlotPanel* errorPlot() const { return errorPlot_; }
  QTableView* verdictTable() const;
  VerdictTableModel* verdictModel() const;

 protected:
  void closeEvent(QCloseEvent* event) override;
  void showEvent(QShowEvent* event) override;
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  void createPages();
  void createControllers();
  void createActions();
  void createDocks();
  void connectRun();
  bool applyOpenedSession(const OpenedSession& opened);
  void exportCurrent(bool table);  // File > Export Plot (false) or Export Table as CSV (true)

  SessionState session_;  // the session shown (reader, summary, path), shared with the controllers
  QString lastError_;
  QString screenNote_;
  bool quietErrors_ = false;
  SessionController* sessions_;
  quint64 appliedGeneration_ = 0;  // the newest open job whose session is shown
  // the page stack and the docks' contents
  QTabWidget* central_;
  SessionTreeModel* model_;
  QTreeView* tree_;
  OverviewPanel* overview_;
  DevicesPanel* devices_;
  ErrorPlotPanel* errorPlot_;
  CallPage* callPage_;
  CurvePanel* curves_;
  NumericsPanel* numerics_;
  GraphPanel* graph_;
  SavePanel* savePanel_;
  ComparePanel* compare_;
  ExplainPanel* explain_;
  RunPanel* runPanel_;
  QDockWidget *runDock_ = nullptr, *explainDock_ = nullptr;
  CloseGuard* closeGuard_;  // asks before closing during a run
  SessionWatcher* watcher_;  // the file shown, replaced or removed on disk
  QString changedPath_;      // reopened because it changed on disk
  // what the pages show, and the tools beside them
  VerdictController* verdicts_;
  PairController* pairs_;
  LinkedViews* links_;
  SelectionController* selection_;
  HistoryController* history_;
  FlipController* flips_;
  CompareController* comparisons_;
  LiveRun* live_;
  SaveRunController* saveRuns_;
  TourController* tourScript_;
  std::function<void()> firstLayout_;  // the docks' first-run proportions, applied when first shown
  RecentSessions* recent_ = nullptr;
  std::unique_ptr<PageExport> exports_;
  QLabel* statusSession_;
};

}  // namespace peat::views
