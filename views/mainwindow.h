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

namespace peat::store {
class SessionReader;
}
namespace peat::analyzer {
struct StoredCallReport;
}

class QCustomPlot;
class QDialog;
class QDockWidget;
class QMenu;
class QDragEnterEvent;
class QDropEvent;
class QTabWidget;
class QTextBrowser;
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
class BitExplorer;
class RunPanel;
class ComparePanel;
class ExplainPanel;
class SessionController;
class VerdictTableModel;
class TourPanel;
class JobTracker;
struct OpenedSession;
struct CallRequest;
struct SelectedCalls;
struct ItemData;

// The workbench's main window: menus, the session tree, and docks that the views fill.
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
  SessionController* sessionController() const { return sessions_; }
  void closeSession();
  // Selects the session tree item at a path of display names joined by '/', e.g.
  // "SAVE/lenet-symbolic/conv2" or "save-campaign"; its view opens. False when there is none.
  bool selectItem(const QString& path);
  QString sessionPath() const { return sessionPath_; }
  QString lastError() const { return lastError_; }
  SessionTreeModel* sessionModel() const { return model_; }
  SavePanel* savePanel() const { return savePanel_; }
  NumericsPanel* numericsPanel() const { return numerics_; }
  // Tools > Bit Explorer (made on first use); null until then.
  void showBitExplorer();
  BitExplorer* bitExplorer() const { return bitExplorer_; }
  CallPage* callPage() const { return callPage_; }
  // Go > Back and Forward (Alt+Left, Alt+Right): the call selected before or after; false at an end.
  bool goBack();
  bool goForward();
  CurvePanel* curvePanel() const { return curves_; }
  RunPanel* runPanel() const { return runPanel_; }
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
  TourPanel* tourPanel() const { return tour_; }
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
  // When set, failures go to the status bar only (no dialog): tests and --screenshot use it.
  void setQuietErrors(bool quiet) { quietErrors_ = quiet; }
  // A page is still reading what is selected (tests wait for this to end).
  bool pagesLoading() const;
  // The tree item at the centre, as a path of display names ("edge/iteration 0/#6 fc1"); "" for none.
  QString currentItemPath() const;

 protected:
  void closeEvent(QCloseEvent* event) override;
  void showEvent(QShowEvent* event) override;
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  void createActions();
  void createDocks();
  void refreshRecentMenu();
  void rememberRecent(const QString& path);
  void showVerdicts(const QString& run, std::vector<store::Verdict> verdicts);
  bool applyOpenedSession(const OpenedSession& opened);
  void showItem(const QModelIndex& current);
  void applyItem(const ItemData& item, const std::string& id, const QString& layer);
  void showSaveItem(const QString& layer);  // the SAVE analysis shown: a layer's map, or its bits
  void applySelectedCalls(const SelectedCalls& selected, const std::vector<CallRequest>& requests);
  // Every page says `why`: nothing of an old session stays up (keepLive: a run's live curve and
  // campaign stay, drawn from its progress).
  void afterPages(std::function<void()> then);  // `then` once no page is reading
  void resetPages(const QString& why, bool keepLive = false);
  void compareTensors(const QString& golden, const QString& candidate);
  void showSelectedCalls();
  // The selected calls' stored reports (at most `limit`), each with where it comes from; `why`
  // says what was selected but could not be shown.
  std::vector<std::pair<analyzer::StoredCallReport, QString>> selectedReports(std::size_t limit, QString* why) const;
  void highlightVerdicts(const std::vector<analyzer::StoredCallReport>& reports);
  void selectVerdictCall(int row);
  void showFinding(const store::Finding& finding);
  void exportCurrentPlot();
  void exportCurrentTable();
  void reportError(const QString& text);

  std::shared_ptr<store::SessionReader> reader_;  // shared with the open job that read it
  std::shared_ptr<const store::SessionSummary> summary_;  // the tree's summary, shared with page jobs
  JobTracker* itemJobs_;  // the current item's page (a run, an iteration, a SAVE result)
  JobTracker* callJobs_;  // the selected calls' pages
  JobTracker* tellJobs_;  // the most telling verdict
  std::shared_ptr<store::SessionReader> other_;  // the session compared with this one
  QString otherPath_;
  ComparePanel* compare_;
  QString sessionPath_;
  QString lastError_;
  bool quietErrors_ = false;
  SessionTreeModel* model_;
  QTreeView* tree_;
  OverviewPanel* overview_;
  DevicesPanel* devices_;
  ErrorPlotPanel* errorPlot_;
 public:
  ErrorPlotPanel* errorPlot() const { return errorPlot_; }
  QTableView* verdictTable() const { return verdicts_; }
  VerdictTableModel* verdictModel() const { return verdictModel_; }
 private:
  SavePanel* savePanel_;
  CurvePanel* curves_;
  NumericsPanel* numerics_;
  BitExplorer* bitExplorer_ = nullptr;
  CallPage* callPage_ = nullptr;
  void showFindingOn(ErrorPlotPanel* panel, const store::Finding& f);
  QDialog* explorerWindow_ = nullptr;
  TourPanel* tour_ = nullptr;
  std::function<void()> firstLayout_;  // the docks' first-run proportions, applied when first shown
  QDockWidget* tourDock_ = nullptr;
  void showTour();
  // The SAVE value the bit explorer shows (for "Flip in the model")
  std::string flipAnalysis_, flipLayer_;
  qint64 flipElement_ = -1;
  quint64 flipGeneration_ = 0;  // the newest flip asked for: older results are dropped
  quint64 pairGeneration_ = 0;  // the newest call page asking for its outputs' statistics
  void requestPairStats(const analyzer::StoredCallReport& shown);
  void flipInModel(quint32 mask, int image);
  RunPanel* runPanel_;
  ExplainPanel* explain_;
  QString pendingGolden_;  // a dropped .npy waiting for its candidate
  // The last compared pair (dropped .npy files), kept so that a click on its Where map opens the
  // tile's worst element in the bit explorer.
  struct ComparedPair;
  std::shared_ptr<ComparedPair> compared_;
  void openComparedElement(qint64 tileRow, qint64 tileCol);
  // The calls selected in the tree, for Go > Back and Forward.
  std::vector<QPersistentModelIndex> history_;
  int historyAt_ = -1;
  bool navigating_ = false;
  QAction *backAction_ = nullptr, *forwardAction_ = nullptr;
  void recordSelection();
  bool goTo(int position);
  void updateHistoryActions();
  void regroupCompared(qint64 tileRows, qint64 tileCols);
  void showComparedBit(int bit);  // the Where map shows where this bit differs (a linked view)
  void showComparedBin(int bin, int lastBin);  // ... where one histogram bar's (or a range's) elements sit
  // Whether the tensors of the first report shown are at hand: a compared pair, or a session call's
  // stored outputs, loaded now (then compared_ holds them).
  bool pairForShownCall(ErrorPlotPanel* panel, bool quiet = false);  // quiet: no status message when not at hand
  ErrorPlotPanel* plotsOf(QObject* sender) const;  // the panel a signal came from (the dock's by default)
  save::StoredCampaign live_;                     // the running campaign's points so far
  store::TrainingCurve liveCurve_, liveGolden_;   // the running training's loss so far
  bool liveShown_ = false;
  QTabWidget* central_;
  std::string shownAnalysis_;
  QString shownVerdictRun_;
  VerdictTableModel* verdictModel_;  // the rows of verdicts_, with their findings
  QTableView* verdicts_;
  SessionController* sessions_;
  quint64 appliedGeneration_ = 0;  // the newest open job whose session is shown
  QMenu* recentMenu_ = nullptr;
  QMenu* viewMenu_ = nullptr;
  QLabel* statusSession_;
};

}  // namespace peat::views
