// SPDX-License-Identifier: MIT
#include "views/qcustomplot_include.h"  // first: see the header

#include "views/mainwindow.h"

#include "views/callpage.h"
#include "views/palette.h"

#include <QAction>
#include <QClipboard>
#include <QTabWidget>
#include <QTextBrowser>
#include <QApplication>
#include <QScreen>
#include <QCloseEvent>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFutureWatcher>
#include <QtConcurrent/QtConcurrentRun>
#include <QMimeData>
#include <QDockWidget>
#include <cmath>

#include <QDialog>
#include <QVBoxLayout>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QSettings>
#include <QStandardPaths>
#include <QDir>
#include <QStatusBar>
#include <QEventLoop>
#include <QTableView>
#include <QTreeView>

#include <algorithm>
#include <optional>

#include "core/fp/explain.h"
#include "core/fp/format.h"
#include "core/analysis/call_view.h"
#include "core/analysis/session_analysis.h"
#include "core/analyzer/numerics.h"
#include "core/detector/detector.h"
#include "core/io/tensor_source.h"
#include "core/save/analysis_record.h"
#include "core/store/curves.h"
#include "core/store/session.h"
#include "core/version.h"
#include "gpu/backend.h"
#include "views/devicespanel.h"
#include "views/errorplotpanel.h"
#include "views/explainpanel.h"
#include "views/jobtracker.h"
#include "views/pageloads.h"
#include "views/comparepanel.h"
#include "views/bitexplorer.h"
#include "views/curvepanel.h"
#include "views/layermapview.h"
#include "views/numericspanel.h"
#include "views/runpanel.h"
#include "views/savepanel.h"
#include "views/overviewpanel.h"
#include "views/sessioncontroller.h"
#include "views/sessiontreemodel.h"
#include "views/tourpanel.h"
#include "views/verdicttablemodel.h"

namespace peat::views {

namespace {
constexpr int kMaxRecent = 8;
const QString kRecentKey = QStringLiteral("session/recent");
const QString kGeometryKey = QStringLiteral("window/geometry");
const QString kStateKey = QStringLiteral("window/state");
}  // namespace

struct MainWindow::ComparedPair {
  io::FloatTensor g, c;
  std::string name;
  uint64_t tileRows = 0, tileCols = 0;
  analyzer::ValueStats goldenStats, candidateStats;  // computed where the pair was read, off the GUI thread
};

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(tr("PEAT Workbench"));
  setObjectName(QStringLiteral("MainWindow"));
  setAcceptDrops(true);
  // the first size: 1400x860 where the screen has room, else nine tenths of what it has (a window
  // manager's panels excluded); a saved geometry below replaces it
  if (const QScreen* screen = QGuiApplication::primaryScreen()) {
    const QRect room = screen->availableGeometry();
    resize(std::min(1400, room.width() * 9 / 10), std::min(860, room.height() * 9 / 10));
  } else {
    resize(1400, 860);
  }

  sessions_ = new SessionController(this);
  itemJobs_ = new JobTracker(this);
  callJobs_ = new JobTracker(this);
  tellJobs_ = new JobTracker(this);
  connect(sessions_, &SessionController::opened, this, [this](quint64 generation, const OpenedSession& opened) {
    if (applyOpenedSession(opened)) appliedGeneration_ = generation;
  });
  // a job made stale by a newer open still ends the wait of openSession() for its path
  connect(sessions_, &SessionController::ended, this, [this](quint64, const QString& path, bool delivered) {
    if (!delivered) emit sessionOpenEnded(path, false);
  });
  model_ = new SessionTreeModel(this);
  model_->setTensorLister([this](const std::string& run, const std::string& call) {
    return reader_ ? reader_->callTensors(run, call) : std::vector<store::TensorInfo>{};
  });
  overview_ = new OverviewPanel(this);
  savePanel_ = new SavePanel(this);
  savePanel_->setLayerMapLoader([this](const std::string& analysis, const std::string& layer) {
    if (!reader_) throw save::SaveError("no session is open");
    return save::loadLayerMap(*reader_, analysis, layer);
  });
  // a value clicked on a layer's map opens in the bit explorer: its bound of largest magnitude, its
  // sound range and its bits' classes
  connect(savePanel_->layerMap(), &LayerMapView::elementClicked, this, &MainWindow::openSaveValue);
  central_ = new QTabWidget(this);
  central_->addTab(overview_, tr("Overview"));
  callPage_ = new CallPage(this);
  central_->addTab(callPage_, tr("Call"));
  // the page's plots link back to the elements as the dock's do
  connect(callPage_->plots(), &ErrorPlotPanel::tileClicked, this, &MainWindow::openComparedElement);
  connect(callPage_->plots(), &ErrorPlotPanel::groupingRequested, this, &MainWindow::regroupCompared);
  connect(callPage_->plots(), &ErrorPlotPanel::bitClicked, this, &MainWindow::showComparedBit);
  connect(callPage_->plots(), &ErrorPlotPanel::binClicked, this, &MainWindow::showComparedBin);
  curves_ = new CurvePanel(this);
  central_->addTab(curves_, tr("Training"));
  numerics_ = new NumericsPanel(this);
  central_->addTab(numerics_, tr("Numerics"));
  central_->addTab(savePanel_, tr("SAVE"));
  compare_ = new ComparePanel(this);
  central_->addTab(compare_, tr("Compare"));
  setCentralWidget(central_);

  createDocks();
  createActions();

  statusSession_ = new QLabel(tr("No session"), this);
  statusBar()->addPermanentWidget(statusSession_);
  statusBar()->showMessage(tr("Ready"), 3000);

  QSettings settings;
  restoreGeometry(settings.value(kGeometryKey).toByteArray());
  if (restoreState(settings.value(kStateKey).toByteArray())) firstLayout_ = nullptr;
}

MainWindow::~MainWindow() = default;

// Every dock and its connections (about 120 lines of set-up, no logic).
void MainWindow::createDocks() {
  auto dock = [this](const QString& title, const QString& name, QWidget* content, Qt::DockWidgetArea area) {
    auto* d = new QDockWidget(title, this);
    d->setObjectName(name);  // needed for saveState()
    d->setWidget(content);
    addDockWidget(area, d);
    return d;
  };

  tree_ = new QTreeView(this);
  tree_->setModel(model_);
  tree_->setUniformRowHeights(true);
  tree_->header()->setStretchLastSection(true);
  tree_->header()->setSectionResizeMode(SessionTreeModel::NameColumn, QHeaderView::ResizeToContents);
  tree_->setAlternatingRowColors(true);
  QDockWidget* sessionDock = dock(tr("Session"), QStringLiteral("SessionDock"), tree_, Qt::LeftDockWidgetArea);
  connect(tree_->selectionModel(), &QItemSelectionModel::currentChanged, this, &MainWindow::showItem);
  tree_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  connect(tree_->selectionModel(), &QItemSelectionModel::selectionChanged, this, &MainWindow::showSelectedCalls);

  devices_ = new DevicesPanel(this);
  const std::vector<gpu::BackendProbe> backends = gpu::probeBackends();
  devices_->showBackends(backends);
  dock(tr("Devices"), QStringLiteral("DevicesDock"), devices_, Qt::LeftDockWidgetArea);

  errorPlot_ = new ErrorPlotPanel(this);
  // a tile clicked on a compared pair's Where map opens its worst element in the bit explorer
  connect(errorPlot_, &ErrorPlotPanel::tileClicked, this, &MainWindow::openComparedElement);
  connect(errorPlot_, &ErrorPlotPanel::groupingRequested, this, &MainWindow::regroupCompared);
  // a bit position clicked on a compared pair's Bits plot: the Where map shows where that bit differs
  connect(errorPlot_, &ErrorPlotPanel::bitClicked, this, &MainWindow::showComparedBit);
  connect(errorPlot_, &ErrorPlotPanel::binClicked, this, &MainWindow::showComparedBin);
  QDockWidget* plotDock =
      dock(tr("Error distribution"), QStringLiteral("ErrorPlotDock"), errorPlot_, Qt::RightDockWidgetArea);

  runPanel_ = new RunPanel(this);
  QStringList usable;
  for (const gpu::BackendProbe& b : backends)
    for (const gpu::DeviceInfo& d : b.devices) usable << QStringLiteral("%1:%2").arg(QString::fromStdString(b.name)).arg(d.index);
  runPanel_->setDevices(usable);
  QDockWidget* runDock = dock(tr("Run"), QStringLiteral("RunDock"), runPanel_, Qt::RightDockWidgetArea);
  tabifyDockWidget(plotDock, runDock);
  plotDock->raise();
  // Results as they arrive: the campaign's points and the training loss, drawn from the run's
  // progress lines while the writer still holds the session file.
  connect(runPanel_, &RunPanel::started, this, [this] {
    // A run that writes the session this window reads needs the file: HDF5 lets one writer in
    // only when no one else has it open. The window lets go, and reopens it when the run ends.
    sessions_->cancel();  // an open still in flight must not take the file back during the run
    if (other_ && QFileInfo(runPanel_->sessionPath()) == QFileInfo(otherPath_)) {
      other_.reset();
      otherPath_.clear();
    }
    if (reader_ && QFileInfo(runPanel_->sessionPath()) == QFileInfo(sessionPath_)) {
      reader_.reset();
      statusSession_->setText(tr("%1 | being written by the run").arg(QFileInfo(sessionPath_).fileName()));
    }
    live_ = {};
    liveCurve_ = {};
    liveGolden_ = {};
    liveShown_ = false;
  });
  connect(runPanel_, &RunPanel::livePoint, this, [this](const QString& scheme, double flips, double accuracy) {
    live_.run = "running campaign";
    auto it = std::find_if(live_.series.begin(), live_.series.end(),
                           [&](const save::CampaignSeries& s) { return s.scheme == scheme.toStdString(); });
    if (it == live_.series.end()) {
      live_.series.push_back({scheme.toStdString(), {}, {}, {}, 0});
      it = std::prev(live_.series.end());
    }
    const auto at = std::upper_bound(it->flips.begin(), it->flips.end(), flips) - it->flips.begin();
    it->flips.insert(it->flips.begin() + at, flips);
    it->accuracy.insert(it->accuracy.begin() + at, accuracy);
    it->errorRate.insert(it->errorRate.begin() + at, 0.0);
    savePanel_->showCampaign(live_);
    if (!liveShown_) {
      liveShown_ = true;
      savePanel_->setCurrentTab(SavePanel::CampaignTab);
      central_->setCurrentWidget(savePanel_);
    }
  });
  connect(runPanel_, &RunPanel::liveLoss, this, [this](double iteration, double loss, double candidateLoss) {
    const bool twin = std::isfinite(candidateLoss);
    liveCurve_.run = twin ? "live run" : "running";
    liveCurve_.iteration.push_back(iteration - 1);  // progress counts finished iterations
    liveCurve_.loss.push_back(twin ? candidateLoss : loss);
    for (auto* v : {&liveCurve_.accuracy, &liveCurve_.testLoss, &liveCurve_.testAccuracy}) v->push_back(std::nan(""));
    if (twin) {
      liveGolden_.run = "golden";
      liveGolden_.iteration.push_back(iteration - 1);
      liveGolden_.loss.push_back(loss);
      for (auto* v : {&liveGolden_.accuracy, &liveGolden_.testLoss, &liveGolden_.testAccuracy}) v->push_back(std::nan(""));
    }
    curves_->showCurves(liveCurve_, liveGolden_);
    if (!liveShown_) {
      liveShown_ = true;
      central_->setCurrentWidget(curves_);
    }
  });
  connect(runPanel_, &RunPanel::finished, this, [this](bool ok, const QString& message, const QString& session) {
    statusBar()->showMessage(message, 10000);
    // the results (or what a cancelled run kept) appear in the tree
    if (QFileInfo::exists(session) && (ok || sessionPath_.isEmpty() || QFileInfo(session) == QFileInfo(sessionPath_)))
      startOpeningSession(session);
  });

  verdictModel_ = new VerdictTableModel(this);
  verdicts_ = new QTableView(this);
  verdicts_->setModel(verdictModel_);
  verdicts_->horizontalHeader()->setSectionResizeMode(VerdictTableModel::EvidenceColumn, QHeaderView::Stretch);
  verdicts_->verticalHeader()->hide();
  verdicts_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  verdicts_->setSelectionBehavior(QAbstractItemView::SelectRows);
  connect(verdicts_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& current) {
    const int row = current.isValid() ? current.row() : -1;
    if (const store::Verdict* v = verdictModel_->verdict(row)) explain_->showVerdict(QString::fromStdString(v->model));
    selectVerdictCall(row);
  });
  QDockWidget* verdictDock =
      dock(tr("Detector verdicts"), QStringLiteral("VerdictDock"), verdicts_, Qt::BottomDockWidgetArea);

  explain_ = new ExplainPanel(this);
  QDockWidget* explainDock = dock(tr("Explain"), QStringLiteral("ExplainDock"), explain_, Qt::RightDockWidgetArea);
  tabifyDockWidget(plotDock, explainDock);
  // the call page at the centre holds one call's plots; the dock overlays several calls
  explainDock->raise();

  // First-run proportions (applied once the window is shown: before, the layout has no size to
  // share); a saved layout (QSettings) replaces them.
  firstLayout_ = [this, sessionDock, plotDock, verdictDock] {
    const int width = this->width();
    resizeDocks({sessionDock, plotDock}, {std::max(240, width * 22 / 100), std::max(300, width * 28 / 100)}, Qt::Horizontal);
    resizeDocks({verdictDock}, {std::max(140, height() * 22 / 100)}, Qt::Vertical);
  };
}

void MainWindow::showEvent(QShowEvent* event) {
  QMainWindow::showEvent(event);
  if (firstLayout_) {
    auto apply = std::move(firstLayout_);
    firstLayout_ = nullptr;
    apply();
  }
}

void MainWindow::createActions() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open = file->addAction(tr("&Open Session..."), this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open session"), QString(),
                                                      tr("PEAT sessions (*.h5 *.hdf5);;All files (*)"));
    if (!path.isEmpty()) startOpeningSession(path);
  });
  open->setShortcut(QKeySequence::Open);
  QAction* newWindow = file->addAction(tr("&New Window"), this, [] {
    auto* other = new MainWindow;  // another session (or another view of this one) side by side
    other->setAttribute(Qt::WA_DeleteOnClose);
    other->show();
  });
  newWindow->setShortcut(QKeySequence::New);
  recentMenu_ = file->addMenu(tr("Open &Recent"));
  refreshRecentMenu();
  QAction* close = file->addAction(tr("&Close Session"), this, &MainWindow::closeSession);
  close->setShortcut(QKeySequence::Close);
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), qApp, &QApplication::closeAllWindows);
  quit->setShortcut(QKeySequence::Quit);

  file->addSeparator();
  QAction* exportPlot = file->addAction(tr("&Export Plot..."), this, &MainWindow::exportCurrentPlot);
  exportPlot->setShortcut(QKeySequence(tr("Ctrl+E")));
  QAction* exportTable = file->addAction(tr("Export &Table as CSV..."), this, &MainWindow::exportCurrentTable);
  exportTable->setShortcut(QKeySequence(tr("Ctrl+Shift+E")));
  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  QAction* copy = edit->addAction(tr("&Copy Plot"), this, [this] {
    QCustomPlot* plot = currentPlot();
    QApplication::clipboard()->setPixmap(plot ? plot->toPixmap() : savePanel_->currentPicture()->grab());
    statusBar()->showMessage(tr("Plot copied"), 3000);
  });
  copy->setShortcut(QKeySequence(tr("Ctrl+Shift+C")));

  QMenu* compare = menuBar()->addMenu(tr("&Compare"));
  QAction* compareSelection = compare->addAction(tr("Compare &Selected"), this, &MainWindow::compareSelected);
  compareSelection->setShortcut(QKeySequence(tr("Ctrl+D")));
  compareSelection->setToolTip(tr("Two selected calls side by side, or the selected call here and in the compared session"));
  compare->addAction(tr("Compare With &Session..."), this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Compare with session"), QString(),
                                                      tr("PEAT sessions (*.h5 *.hdf5);;All files (*)"));
    if (!path.isEmpty()) openCompareSession(path);
  });
  compare->addAction(tr("Stop Comparing Sessions"), this, [this] {
    other_.reset();
    otherPath_.clear();
    compare_->showMessage(tr("Compared session closed"));
  });

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  QAction* showRun = run->addAction(tr("&New Run..."), this, &MainWindow::showRunPanel);
  showRun->setShortcut(QKeySequence(tr("Ctrl+R")));
  run->addAction(tr("Open &Demo Session"), this, &MainWindow::openDemo);

  QMenu* tools = menuBar()->addMenu(tr("&Tools"));
  QAction* explorer = tools->addAction(tr("&Bit Explorer"), this, [this] { showBitExplorer(); });
  explorer->setShortcut(QKeySequence(tr("Ctrl+B")));

  // Go: back and forward through the calls selected, as in a browser (Alt+Left, Alt+Right)
  QMenu* go = menuBar()->addMenu(tr("&Go"));
  backAction_ = go->addAction(tr("&Back"), this, [this] { goBack(); });
  backAction_->setShortcuts({QKeySequence(Qt::ALT | Qt::Key_Left), QKeySequence(QKeySequence::Back)});
  forwardAction_ = go->addAction(tr("&Forward"), this, [this] { goForward(); });
  forwardAction_->setShortcuts({QKeySequence(Qt::ALT | Qt::Key_Right), QKeySequence(QKeySequence::Forward)});
  updateHistoryActions();

  viewMenu_ = menuBar()->addMenu(tr("&View"));
  for (QDockWidget* d : findChildren<QDockWidget*>()) viewMenu_->addAction(d->toggleViewAction());

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  QAction* tour = help->addAction(tr("&Tour"), this, &MainWindow::startTour);
  tour->setShortcut(QKeySequence(Qt::Key_F1));
  tour->setToolTip(tr("The story in a few steps, on the demo session (made first when it is missing, about 10 s)"));
  help->addAction(tr("&About PEAT Workbench"), this, [this] {
    QMessageBox::about(this, tr("About PEAT Workbench"),
                       tr("<b>PEAT Workbench %1</b> (commit %2)<br>"
                          "Pseudo-error assessment of GPU kernels in DNN training (PEAT) and software fault "
                          "tolerance of inference against GPU memory bit flips (SAVE).<br>HDF5 %3")
                           .arg(QString::fromLatin1(toolVersion()), QString::fromLatin1(gitCommit()),
                                QString::fromStdString(hdf5Version())));
  });
}

bool MainWindow::openSession(const QString& path) {
  // this open's own job: an older job for the same path that ends meanwhile does not answer it
  std::optional<bool> result;
  QEventLoop loop;
  quint64 job = 0;
  const auto done = connect(sessions_, &SessionController::ended, &loop, [&](quint64 generation, const QString&, bool) {
    if (generation != job) return;
    result = appliedGeneration_ == job;
    loop.quit();
  });
  job = startOpeningSession(path);
  if (!result) loop.exec();  // the GUI thread keeps serving events meanwhile
  disconnect(done);
  return result.value_or(false);
}

quint64 MainWindow::startOpeningSession(const QString& path) {
  statusBar()->showMessage(tr("Opening %1 ...").arg(path));
  return sessions_->open(path);
}

bool MainWindow::applyOpenedSession(const OpenedSession& opened) {
  if (!opened.error.isEmpty()) {
    reportError(opened.error);
    emit sessionOpenEnded(opened.path, false);
    return false;
  }
  const QString& path = opened.path;
  const store::SessionSummary& summary = opened.summary;
  // the item shown before, found again by its name when the same session is opened again (a run
  // that wrote it, File > Open of the same file); every page is reset first, so none stays stale
  const QString again = QFileInfo(path) == QFileInfo(sessionPath_) ? currentItemPath() : QString();
  // a run's live curve and campaign stay up when its own session reopens after it, until a selection
  const bool live = liveShown_ && QFileInfo(path) == QFileInfo(runPanel_->sessionPath());
  liveShown_ = false;
  resetPages(tr("Select an analysed call in the session tree: its page opens here"), live);
  reader_ = opened.reader;
  summary_ = std::make_shared<const store::SessionSummary>(summary);
  sessionPath_ = path;
  model_->setSummary(summary);
  history_.clear();  // the old session's pages
  historyAt_ = -1;
  updateHistoryActions();
  tree_->expandToDepth(0);
  tree_->resizeColumnToContents(0);
  overview_->showSummary(summary);
  verdictModel_->clear();
  setWindowTitle(tr("%1 - PEAT Workbench").arg(QFileInfo(path).fileName()));
  statusSession_->setText(tr("%1 | schema %2 | %n run(s)", nullptr, int(summary.runs.size()))
                              .arg(QFileInfo(path).fileName())
                              .arg(summary.schemaVersion));
  statusBar()->showMessage(tr("Opened %1").arg(path), 5000);
  rememberRecent(QFileInfo(path).absoluteFilePath());
  if (!runPanel_->running()) runPanel_->setSessionPath(QFileInfo(path).absoluteFilePath());
  if (!opened.verdictRun.empty()) showVerdicts(QString::fromStdString(opened.verdictRun), opened.verdicts);
  lastError_.clear();
  if (!again.isEmpty()) {  // the item may be gone: then the pages ask for a selection, without a dialog
    const bool quiet = quietErrors_;
    quietErrors_ = true;
    if (!selectItem(again)) lastError_.clear();
    quietErrors_ = quiet;
  }
  emit sessionOpenEnded(path, true);
  return true;
}

void MainWindow::closeSession() {
  sessions_->cancel();  // an open still running would bring a session back
  resetPages(tr("No session is open"));
  reader_.reset();
  summary_.reset();
  sessionPath_.clear();
  model_->clear();
  overview_->showNothing(tr("Open a session with File > Open Session (Ctrl+O)."));
  statusSession_->setText(tr("No session"));
  setWindowTitle(tr("PEAT Workbench"));
}

void MainWindow::resetPages(const QString& why, bool keepLive) {
  for (JobTracker* jobs : {itemJobs_, callJobs_, tellJobs_}) jobs->cancel();
  ++pairGeneration_;
  shownAnalysis_.clear();
  shownVerdictRun_.clear();
  verdictModel_->clear();
  compared_.reset();  // a pair read from the old session (a dropped pair goes too)
  callPage_->showMessage(why);
  errorPlot_->showMessage(why);
  if (keepLive) return;
  curves_->showMessage(why);
  savePanel_->showMessage(why);
  central_->setCurrentWidget(overview_);
}

void MainWindow::afterPages(std::function<void()> then) {
  if (!pagesLoading()) {
    then();
    return;
  }
  auto once = std::make_shared<QMetaObject::Connection>();
  *once = connect(this, &MainWindow::pageShown, this, [this, once, then = std::move(then)] {
    if (pagesLoading()) return;
    disconnect(*once);
    then();
  });
}

bool MainWindow::pagesLoading() const {
  return itemJobs_->pending() || callJobs_->pending() || tellJobs_->pending() || sessions_->busy();
}

QString MainWindow::currentItemPath() const {
  QStringList names;
  for (QModelIndex at = tree_->currentIndex().siblingAtColumn(0); at.isValid(); at = at.parent()) names.prepend(at.data().toString());
  return names.join(QLatin1Char('/'));
}

void MainWindow::showVerdicts(const QString& run, std::vector<store::Verdict> verdicts) {
  shownVerdictRun_ = run;
  // each call as the tree names it (the summary in memory: no read)
  const std::string replayed = analyzer::candidateRunOf(model_->summary(), run.toStdString());
  std::vector<QString> names;
  for (const store::Verdict& v : verdicts)
    names.push_back(QString::fromStdString(analyzer::callDisplayName(model_->summary(), replayed, v.call)));
  verdictModel_->setVerdicts(std::move(verdicts), std::move(names));
  for (int c = 0; c < VerdictTableModel::EvidenceColumn; ++c) verdicts_->resizeColumnToContents(c);
}

QString MainWindow::demoPath() {
  return QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + QStringLiteral("/demo.h5");
}

bool MainWindow::openDemo() {
  const QString path = demoPath();
  if (QFileInfo::exists(path)) {
    if (!openSession(path)) return false;
    showTellingCall();  // the most telling page: an analysed call with its verdict and evidence
    return true;
  }
  // made first: its telling page once it is open
  auto once = std::make_shared<QMetaObject::Connection>();
  *once = connect(this, &MainWindow::sessionOpenEnded, this, [this, once, path](const QString& opened, bool ok) {
    if (QFileInfo(opened) != QFileInfo(path)) return;
    disconnect(*once);
    if (ok) showTellingCall();
  });
  QDir().mkpath(QFileInfo(path).absolutePath());
  showRunPanel();
  statusBar()->showMessage(tr("Making the demo session (about 10 s): %1").arg(path));
  runPanel_->startSequence(RunPanel::demoSteps(path), path);
  return true;
}

void MainWindow::showRunPanel() {
  if (auto* d = qobject_cast<QDockWidget*>(runPanel_->parentWidget())) {
    d->show();
    d->raise();
  }
}

bool MainWindow::selectItem(const QString& path) {
  lastError_.clear();
  QModelIndex at;
  for (const QString& name : path.split(QLatin1Char('/'), Qt::SkipEmptyParts)) {
    QModelIndex found;
    for (int r = 0; r < model_->rowCount(at) && !found.isValid(); ++r)
      if (model_->index(r, 0, at).data().toString() == name) found = model_->index(r, 0, at);
    if (!found.isValid()) {
      reportError(tr("the session has no item '%1'").arg(path));
      return false;
    }
    at = found;
  }
  if (!at.isValid()) return false;
  tree_->scrollTo(at);
  tree_->setCurrentIndex(at);  // showItem follows
  return lastError_.isEmpty();
}

void MainWindow::showBitExplorer() {
  if (!bitExplorer_) {
    explorerWindow_ = new QDialog(this);
    explorerWindow_->setWindowTitle(tr("Bit Explorer"));
    auto* layout = new QVBoxLayout(explorerWindow_);
    bitExplorer_ = new BitExplorer(explorerWindow_);
    layout->addWidget(bitExplorer_);
    connect(bitExplorer_, &BitExplorer::flipRequested, this, &MainWindow::flipInModel);
    explorerWindow_->resize(960, 460);
  }
  explorerWindow_->show();
  explorerWindow_->raise();
}

void MainWindow::openSaveValue(qint64 index) {
  // a value of the layer map opens in the bit explorer: its bound of largest magnitude, its sound
  // range and its bits' classes
  const save::LayerMap& m = savePanel_->layerMap()->layerMap();
  if (index < 0 || index >= m.elements()) return;
  const save::MapElement e = m.element(index);
  showBitExplorer();
  const double bound = std::fabs(e.hi) >= std::fabs(e.lo) ? e.hi : e.lo;
  float value = float(bound);  // the fp32 value of largest magnitude inside the range
  if (std::fabs(double(value)) > std::fabs(bound)) value = std::nextafter(value, 0.0f);
  bitExplorer_->setValue(value);
  bitExplorer_->setSaveContext(QStringLiteral("%1[%2]").arg(QString::fromStdString(m.name)).arg(index), e.lo, e.hi,
                               m.robustMask[std::size_t(index)], m.rangingMask[std::size_t(index)]);
  flipAnalysis_ = m.analysis;
  flipLayer_ = m.name;
  flipElement_ = index;
  ++flipGeneration_;  // a flip still running was for another value
  bitExplorer_->setFlipAvailable(true);
}

bool MainWindow::showTellingCall() {
  if (!reader_) return false;
  bool any = false;
  for (const store::RunInfo& r : model_->summary().runs) any = any || (r.spec.kind == "analysis" && r.verdictCount > 0);
  if (!any) return false;
  auto reader = reader_;
  auto summary = summary_;
  tellJobs_->start<analyzer::TellingVerdict>(
      [reader, summary] { return analyzer::tellingVerdict(*reader, *summary); },
      [this](const analyzer::TellingVerdict& telling) {
        if (telling.best < 0) return;
        showVerdicts(QString::fromStdString(telling.analysisRun), telling.verdicts);
        const bool already = verdicts_->currentIndex().row() == telling.best;
        verdicts_->selectionModel()->setCurrentIndex(verdictModel_->index(telling.best, 0),
                                                     QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
        if (already) selectVerdictCall(telling.best);  // the row was current already: its call may not be the one shown
        central_->setCurrentWidget(callPage_);
        if (auto* d = qobject_cast<QDockWidget*>(explain_->parentWidget())) d->raise();  // what the verdict means
      },
      [this](const QString& why) { reportError(why); });
  return true;
}

void MainWindow::showTour() {
  if (!tour_) {
    tour_ = new TourPanel(this);
    tourDock_ = new QDockWidget(tr("Tour"), this);
    tourDock_->setObjectName(QStringLiteral("TourDock"));
    tourDock_->setWidget(tour_);
    // above the right-hand docks, beside the Explain dock that some steps bring up
    // on the left, in front of the Devices dock: the Explain dock that some steps bring up stays in view
    addDockWidget(Qt::LeftDockWidgetArea, tourDock_);
    if (auto* devicesDock = qobject_cast<QDockWidget*>(devices_->parentWidget())) tabifyDockWidget(devicesDock, tourDock_);
    connect(tour_, &TourPanel::left, tourDock_, &QWidget::hide);
    const auto item = [this](const QString& path) {
      return [this, path](QString* why) {
        if (selectItem(path)) return true;
        *why = lastError_;
        return false;
      };
    };
    const auto telling = [this](QString* why) {  // the demo's most telling call on its page
      if (showTellingCall()) return true;
      *why = tr("no analysed calls");
      return false;
    };
    std::vector<TourPanel::Step> steps;
    steps.push_back({tr("1. Record training"),
                     tr("<p><b>peat profile</b> trained LeNet on Fashion-MNIST with every GEMM of the network (the "
                        "convolutions and linear layers, forward and both backward GEMMs) going through a <i>kernel "
                        "slot</i>. Every 10th iteration's calls were recorded to the session (HDF5): operands, outputs "
                        "and a checkpoint.</p><p>The <b>Training</b> tab shows the loss curve of this golden run.</p>"),
                     [this, item](QString* why) {
                       if (!item(QStringLiteral("golden"))(why)) return false;
                       central_->setCurrentWidget(curves_);
                       return true;
                     }});
    steps.push_back({tr("2. Replay a candidate kernel"),
                     tr("<p><b>peat playback -k bf16</b> replayed each recorded call through a candidate kernel: "
                        "here a GEMM that rounds its inputs to bfloat16. The candidate's output is compared with the "
                        "recorded golden output, call by call.</p><p>The analysis named an error model for every call: "
                        "the <b>Detector verdicts</b> table below.</p>"),
                     item(QStringLiteral("bf16"))});
    steps.push_back({tr("3. Read the error histogram"),
                     tr("<p>One call's page. The <b>histogram</b> counts the elements by the size of their error "
                        "(log2 |candidate - golden|): a narrow hump a few binades below the values is what rounding "
                        "looks like. A bar far to the right would be a fault. Click a bar: the <i>Where</i> map shows "
                        "where its elements are.</p>"),
                     telling});
    steps.push_back({tr("4. The verdict, and why"),
                     tr("<p>The <b>verdict</b> (left) names the error model with its confidence and its evidence. "
                        "For precision loss the detector replayed the call's recorded operands in the format and found "
                        "the same errors; the <b>Bits</b> plot shades the fp32 mantissa bits that bfloat16 does not "
                        "keep, where the differences are. The <b>Explain</b> dock says what each verdict means.</p>"),
                     [this, telling](QString* why) {
                       if (!telling(why)) return false;
                       if (auto* d = qobject_cast<QDockWidget*>(explain_->parentWidget())) d->raise();
                       return true;
                     }});
    steps.push_back({tr("5. SAVE's bit classes on one layer"),
                     tr("<p>SAVE's sound range analysis bounds every activation over all inputs in the pixel box. "
                        "Each bit of each value is then <span style='color:%1'><b>robust</b></span> (a flip "
                        "cannot matter), <span style='color:%2'><b>ranging</b></span> (a flip leaves the range: "
                        "the range check catches it) or <span style='color:%3'><b>vulnerable</b></span>. The map "
                        "shows conv1, channel by channel; hatched tiles sit in reliable memory.</p>")
                         .arg(palette::bitClassText(0), palette::bitClassText(1), palette::bitClassText(2)),
                     item(QStringLiteral("SAVE/lenet-symbolic/conv1"))});
    steps.push_back({tr("6. Flip a bit and see it caught"),
                     tr("<p>The <b>bit explorer</b> opened the value of conv1.relu with the widest range, its bits "
                        "coloured by class, and toggled bit 30, the top exponent bit (a value between 0 and 2 becomes "
                        "2<sup>128</sup> times larger; a zero becomes 2). <b>Flip in the model</b> ran LeNet on test "
                        "image 0 with that bit flipped in this value: the explorer now shows the image's value and "
                        "its flip, with the logits before and after and which of SAVE's checks caught it. Toggle "
                        "other bits and flip again.</p>"),
                     [this](QString* why) {
                       if (!selectItem(QStringLiteral("SAVE/lenet-symbolic/conv1.relu"))) {
                         *why = lastError_;
                         return false;
                       }
                       afterPages([this] {  // the layer's map, once its page has read it
                         const save::LayerMap& m = savePanel_->layerMap()->layerMap();
                         if (m.elements() == 0) {
                           reportError(tr("the tour cannot flip a bit: conv1.relu has no values"));
                           return;
                         }
                         const qint64 widest = qint64(std::max_element(m.hi.begin(), m.hi.end()) - m.hi.begin());
                         openSaveValue(widest);
                         bitExplorer_->toggleBit(30);
                         bitExplorer_->setFlipImage(0);
                         bitExplorer_->requestFlip();
                       });
                       return true;
                     }});
    steps.push_back({tr("7. What protection buys"),
                     tr("<p><b>peat save campaign</b> injected memory bit flips into 500 inferences per point: "
                        "accuracy against the number of flips for no protection, ECC, triple modular redundancy, "
                        "Ranger and SAVE. What each line means depends on the fault model and the recovery model: "
                        "see the Explain dock and docs/save.md.</p><p>That is the tour. Leave it, or go back to any "
                        "step.</p>"),
                     item(QStringLiteral("save-campaign"))});
    tour_->setSteps(std::move(steps));
  }
  tourDock_->show();
  tourDock_->raise();
  tour_->goTo(0);
}

void MainWindow::startTour() {
  const QString demo = demoPath();
  if (QFileInfo(sessionPath_) == QFileInfo(demo) && reader_) {
    showTour();
    return;
  }
  if (QFileInfo::exists(demo)) {
    if (openSession(demo)) showTour();
    return;
  }
  // made first (about 10 s): the tour begins once the demo session is open
  auto once = std::make_shared<QMetaObject::Connection>();
  *once = connect(this, &MainWindow::sessionOpenEnded, this, [this, once, demo](const QString& path, bool opened) {
    if (QFileInfo(path) != QFileInfo(demo)) return;
    disconnect(*once);
    if (opened) showTour();
  });
  openDemo();
}

void MainWindow::flipInModel(quint32 mask, int image) {
  if (!reader_ || flipElement_ < 0) {
    bitExplorer_->showFlipError(tr("open a session and click a value on a SAVE layer's map"));
    emit flipShown();
    return;
  }
  // off the GUI thread: the network is rebuilt from the analysis's source and run on one image
  auto reader = reader_;
  const std::string analysis = flipAnalysis_, layer = flipLayer_;
  const qint64 element = flipElement_;
  auto* watcher = new QFutureWatcher<std::pair<std::string, save::ModelFlip>>(this);
  const quint64 generation = ++flipGeneration_;
  connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, generation] {
    watcher->deleteLater();
    if (generation != flipGeneration_) return;  // a newer flip, or another value, came meanwhile
    const auto [error, flip] = watcher->result();
    if (error.empty()) bitExplorer_->showFlip(flip);
    else bitExplorer_->showFlipError(QString::fromStdString(error));
    emit flipShown();
  });
  watcher->setFuture(QtConcurrent::run([reader, analysis, layer, element, mask, image]() -> std::pair<std::string, save::ModelFlip> {
    try {
      return {std::string(), save::flipInModel(*reader, analysis, layer, element, mask, image)};
    } catch (const std::exception& e) {  // never out of the worker: the window stays up
      return {e.what(), save::ModelFlip{}};
    }
  }));
}

QCustomPlot* MainWindow::currentPlot() const {
  if (central_->currentWidget() == savePanel_) return savePanel_->currentPlot();
  if (central_->currentWidget() == curves_) return curves_->plot();
  if (central_->currentWidget() == numerics_) return numerics_->plot();
  if (central_->currentWidget() == compare_) return compare_->left()->plot();
  return errorPlot_->plot();
}

void MainWindow::exportCurrentPlot() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Export plot"), QString(),
                                                    tr("PNG image (*.png);;SVG drawing (*.svg);;PDF document (*.pdf)"));
  if (path.isEmpty()) return;
  QString error;
  QCustomPlot* plot = currentPlot();
  if (!(plot ? exportPlot(plot, path, &error) : exportWidget(savePanel_->currentPicture(), path, &error))) reportError(error);
  else statusBar()->showMessage(tr("Wrote %1").arg(path), 5000);
}

void MainWindow::exportCurrentTable() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Export table"), QString(), tr("CSV (*.csv)"));
  if (path.isEmpty()) return;
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Text) || file.write(currentCsv().toUtf8()) < 0) {
    reportError(tr("could not write %1").arg(path));
    return;
  }
  statusBar()->showMessage(tr("Wrote %1").arg(path), 5000);
}

QString MainWindow::currentCsv() const {
  if (central_->currentWidget() == savePanel_) return savePanel_->currentCsv();
  if (central_->currentWidget() == curves_) return curves_->csv();
  if (central_->currentWidget() == numerics_) return numerics_->csv();
  if (central_->currentWidget() == compare_) return compare_->csv();
  return verdictModel_->csv();
}

// The current item's page (a run's curves, numerics or campaign, a SAVE analysis) and, for a run or
// an iteration, its analysis's verdicts in the table: read in one job (pages own what they show; a
// call's page is showSelectedCalls'). Until the job delivers, the page says what it is loading.
void MainWindow::showItem(const QModelIndex& current) {
  itemJobs_->cancel();
  if (!reader_ || !current.isValid()) return;
  using Kind = SessionTreeModel::NodeKind;
  const auto kind = Kind(current.data(SessionTreeModel::KindRole).toInt());
  const std::string key = current.data(SessionTreeModel::KeyRole).toString().toStdString();
  if (key.empty() || kind == Kind::Call || kind == Kind::SaveGroup) return;
  std::string id = key;
  QString layer;
  if (kind == Kind::SaveLayer) {
    id = current.parent().data(SessionTreeModel::KeyRole).toString().toStdString();
    layer = current.sibling(current.row(), SessionTreeModel::NameColumn).data().toString();
  }
  const bool save = kind == Kind::SaveResult || kind == Kind::SaveLayer;
  if (save && id == shownAnalysis_) {  // that analysis is on its page already
    showSaveItem(layer);
    return;
  }
  const ItemKind what = save ? ItemKind::SaveResult : kind == Kind::Run ? ItemKind::Run : ItemKind::Iteration;
  const QString name = current.data().toString();
  if (save) savePanel_->showMessage(tr("Loading %1 ...").arg(name));
  if (what == ItemKind::Run) curves_->showMessage(tr("Loading %1 ...").arg(name));
  auto reader = reader_;
  auto summary = summary_;
  itemJobs_->start<ItemData>(
      [reader, summary, what, id] { return loadItem(*reader, *summary, what, id); },
      [this, id, layer](const ItemData& item) { applyItem(item, id, layer); },
      [this, name](const QString& why) {
        curves_->showMessage(tr("%1 could not be read: %2").arg(name, why));
        savePanel_->showMessage(tr("%1 could not be read: %2").arg(name, why));
        reportError(why);
        emit pageShown();
      });
}

void MainWindow::applyItem(const ItemData& item, const std::string& id, const QString& layer) {
  if (item.hasVerdicts && QString::fromStdString(item.verdictRun) != shownVerdictRun_)
    showVerdicts(QString::fromStdString(item.verdictRun), item.verdicts);
  if (item.analysis) {
    savePanel_->showAnalysis(*item.analysis);
    shownAnalysis_ = id;
    showSaveItem(layer);
  }
  if (item.curve) {
    curves_->showCurves(*item.curve, item.goldenCurve ? *item.goldenCurve : store::TrainingCurve{}, item.about);
    central_->setCurrentWidget(curves_);
  } else if (!item.about.isEmpty()) {  // a run that did not train
    curves_->showMessage(tr("%1: no training curve (profile and runtime-FI runs train)").arg(item.about));
  }
  if (item.numerics)
    numerics_->showRun(QString::fromStdString(id), *item.numerics, [this, id](const std::string& quantity) {
      if (!reader_) throw std::runtime_error("no session is open");
      return analyzer::loadNumericsGrid(*reader_, id, quantity);
    });
  if (item.campaign) {
    savePanel_->showCampaign(*item.campaign);
    savePanel_->setCurrentTab(SavePanel::CampaignTab);
    central_->setCurrentWidget(savePanel_);
    explain_->showSave();
  }
  emit pageShown();
}

void MainWindow::showSaveItem(const QString& layer) {
  if (!layer.isEmpty()) {
    savePanel_->selectLayerNamed(layer);
    savePanel_->setCurrentTab(SavePanel::MapTab);
  } else {
    savePanel_->setCurrentTab(SavePanel::BitsTab);
  }
  central_->setCurrentWidget(savePanel_);
  explain_->showSave();
}

std::vector<std::pair<analyzer::StoredCallReport, QString>> MainWindow::selectedReports(std::size_t limit, QString* why) const {
  using Kind = SessionTreeModel::NodeKind;
  std::vector<std::pair<analyzer::StoredCallReport, QString>> reports;
  if (!reader_) return reports;
  for (const QModelIndex& index : tree_->selectionModel()->selectedRows(SessionTreeModel::NameColumn)) {
    if (Kind(index.data(SessionTreeModel::KindRole).toInt()) != Kind::Call) continue;
    const std::string run = index.data(SessionTreeModel::KeyRole).toString().toStdString();
    const std::string analysis = analyzer::analysisRunOf(model_->summary(), run);
    if (analysis.empty()) {
      *why = tr("Run %1 has no analysis: run 'peat analyze --session %2 --run %1'")
                 .arg(QString::fromStdString(run), QFileInfo(sessionPath_).fileName());
      continue;
    }
    try {
      reports.emplace_back(analyzer::loadCallReport(*reader_, analysis, index.data(SessionTreeModel::PathRole).toString().toStdString()),
                           tr("%1, run %2 (%3)").arg(index.data(SessionTreeModel::PathRole).toString(),
                                                     QString::fromStdString(run), QFileInfo(sessionPath_).fileName()));
    } catch (const std::exception&) {
      *why = tr("No report for this call in %1 (it may not have been replayed)").arg(QString::fromStdString(analysis));
    }
    if (reports.size() >= limit) break;
  }
  return reports;
}

void MainWindow::recordSelection() {
  if (navigating_) return;
  const QModelIndex current = tree_->selectionModel()->currentIndex();
  if (!current.isValid() || !tree_->selectionModel()->isSelected(current)) return;
  if (historyAt_ >= 0 && historyAt_ < int(history_.size()) && history_[std::size_t(historyAt_)] == current) return;
  history_.resize(std::size_t(historyAt_ + 1));  // a new page drops the forward history
  history_.emplace_back(current);
  if (history_.size() > 200) history_.erase(history_.begin());
  historyAt_ = int(history_.size()) - 1;
  updateHistoryActions();
}

bool MainWindow::goTo(int position) {
  if (position < 0 || position >= int(history_.size()) || !history_[std::size_t(position)].isValid()) return false;
  historyAt_ = position;
  navigating_ = true;
  const QModelIndex node = history_[std::size_t(position)];
  tree_->scrollTo(node);
  tree_->selectionModel()->setCurrentIndex(node, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  navigating_ = false;
  updateHistoryActions();
  return true;
}

bool MainWindow::goBack() { return goTo(historyAt_ - 1); }
bool MainWindow::goForward() { return goTo(historyAt_ + 1); }

void MainWindow::updateHistoryActions() {
  if (backAction_) backAction_->setEnabled(historyAt_ > 0);
  if (forwardAction_) forwardAction_->setEnabled(historyAt_ + 1 < int(history_.size()));
}

// The selected calls' pages: up to six calls' reports overlaid in the Error distribution dock, one
// call's page at the centre with the verdict its own analysis gave it and the evidence drawn on its
// plots. Read in one job; the pages say "Loading" until it delivers and why when it cannot.
void MainWindow::showSelectedCalls() {
  recordSelection();
  callJobs_->cancel();
  ++pairGeneration_;  // the statistics of a call shown before are not this one's
  using Kind = SessionTreeModel::NodeKind;
  std::vector<CallRequest> requests;
  for (const QModelIndex& index : tree_->selectionModel()->selectedRows(SessionTreeModel::NameColumn)) {
    if (Kind(index.data(SessionTreeModel::KindRole).toInt()) != Kind::Call) continue;
    const QString detail = index.siblingAtColumn(SessionTreeModel::DetailColumn).data().toString();
    const QString run = index.data(SessionTreeModel::KeyRole).toString();
    requests.push_back({run.toStdString(), index.data(SessionTreeModel::PathRole).toString().toStdString(),
                        tr("%1 %2 (run %3, %4)").arg(index.data().toString(), detail, run,
                                                    index.data(SessionTreeModel::PathRole).toString())});
    if (requests.size() >= 6) break;  // a readable overlay
  }
  if (requests.empty() || !reader_) {
    callPage_->showMessage(tr("Select an analysed call in the session tree: its page opens here"));
    if (!reader_ || !requests.empty()) errorPlot_->showMessage(tr("Select an analysed call"));
    return;
  }
  const QString loading = tr("Loading %1 ...").arg(requests.front().title);
  callPage_->showMessage(loading);
  errorPlot_->showMessage(loading);
  auto reader = reader_;
  auto summary = summary_;
  callJobs_->start<SelectedCalls>(
      [reader, summary, requests] { return loadSelectedCalls(*reader, *summary, requests); },
      [this, requests](const SelectedCalls& selected) { applySelectedCalls(selected, requests); },
      [this](const QString& why) {
        callPage_->showMessage(tr("The call could not be read: %1").arg(why));
        errorPlot_->showMessage(tr("The call could not be read: %1").arg(why));
        reportError(why);
        emit pageShown();
      });
}

void MainWindow::applySelectedCalls(const SelectedCalls& selected, const std::vector<CallRequest>& requests) {
  if (selected.calls.empty()) {
    callPage_->showMessage(selected.missing);
    errorPlot_->showMessage(selected.missing);
    central_->setCurrentWidget(callPage_);
    emit pageShown();
    return;
  }
  if (QString::fromStdString(selected.verdictRun) != shownVerdictRun_)
    showVerdicts(QString::fromStdString(selected.verdictRun), selected.verdicts);
  std::vector<analyzer::StoredCallReport> reports;
  for (const analyzer::CallView& c : selected.calls) {
    reports.push_back(c.report);
    if (c.verdict) reports.back().verdict = c.verdict->model;  // the verdict this call's analysis stored
  }
  errorPlot_->showReports(reports);
  if (reports.size() > 1)  // an overlay of several calls: the dock shows it
    if (auto* d = qobject_cast<QDockWidget*>(errorPlot_->parentWidget())) d->raise();
  explain_->showVerdict(QString::fromStdString(reports.front().verdict));
  highlightVerdicts(reports);
  if (requests.size() == 1) {
    const analyzer::CallView& c = selected.calls.front();
    const store::Verdict* verdict = c.verdict ? &*c.verdict : nullptr;
    callPage_->showCall(reports.front(), requests.front().title, tensorListText(c.tensors), verdict);
    central_->setCurrentWidget(callPage_);
    if (verdict && !verdict->findings.empty()) showFinding(verdict->findings.front());
    requestPairStats(reports.front());  // the two outputs side by side, when the session holds them
  } else {
    callPage_->showMessage(tr("%n calls selected: their errors overlay in the Error distribution dock", nullptr,
                              int(reports.size())) +
                           (selected.missing.isEmpty() ? QString() : QStringLiteral("; ") + selected.missing));
  }
  emit pageShown();
}

bool MainWindow::openCompareSession(const QString& path) {
  // read in a worker, as the main session is (the probe of a hostile file takes up to its time-out);
  // the GUI thread serves its events meanwhile
  QFutureWatcher<OpenedSession> watcher;
  QEventLoop loop;
  connect(&watcher, &QFutureWatcherBase::finished, &loop, &QEventLoop::quit);
  watcher.setFuture(QtConcurrent::run([path] { return SessionController::read(path); }));
  loop.exec();
  const OpenedSession opened = watcher.result();
  try {
    if (!opened.error.isEmpty()) throw std::runtime_error(opened.error.toStdString());
    other_ = opened.reader;
    otherPath_ = path;
    compare_->showMessage(tr("Comparing with %1: select an analysed call and choose Compare > Compare Selected (Ctrl+D)")
                              .arg(QFileInfo(path).fileName()));
    central_->setCurrentWidget(compare_);
    lastError_.clear();
    return true;
  } catch (const std::exception& e) {
    reportError(QString::fromStdString(e.what()));
    return false;
  }
}

bool MainWindow::compareSelected() {
  lastError_.clear();
  QString why;
  const auto reports = selectedReports(2, &why);
  if (reports.size() == 2) {
    compare_->showPair(reports[0].first, reports[0].second, reports[1].first, reports[1].second);
  } else if (reports.size() == 1 && other_) {
    // the same call of the same run, analysed in the other session
    const analyzer::StoredCallReport& here = reports.front().first;
    const std::string run = analyzer::candidateRunOf(model_->summary(), here.analysisRun);
    try {
      const std::string analysis = analyzer::analysisRunOf(other_->summaryWithoutTensors(), run);
      if (analysis.empty())
        throw std::runtime_error(tr("%1 has no analysed run %2").arg(QFileInfo(otherPath_).fileName(),
                                                                     QString::fromStdString(run)).toStdString());
      compare_->showPair(here, reports.front().second, analyzer::loadCallReport(*other_, analysis, here.call),
                         tr("%1, run %2 (%3)").arg(QString::fromStdString(here.call), QString::fromStdString(run),
                                                  QFileInfo(otherPath_).fileName()));
    } catch (const std::exception& e) {
      reportError(QString::fromStdString(e.what()));
      return false;
    }
  } else {
    reportError(!why.isEmpty() ? why
                : other_ ? tr("select one analysed call to compare with %1, or two calls").arg(QFileInfo(otherPath_).fileName())
                         : tr("select two analysed calls to compare (Ctrl+click), or open a second session with "
                              "Compare > Compare With Session"));
    return false;
  }
  central_->setCurrentWidget(compare_);
  return true;
}

void MainWindow::highlightVerdicts(const std::vector<analyzer::StoredCallReport>& reports) {
  const QSignalBlocker block(verdicts_->selectionModel());
  verdicts_->clearSelection();
  for (const analyzer::StoredCallReport& rep : reports) {
    const int r = verdictModel_->rowOf(QString::fromStdString(rep.call));
    if (r < 0) continue;
    verdicts_->selectionModel()->select(verdictModel_->index(r, 0),
                                        QItemSelectionModel::Select | QItemSelectionModel::Rows);
    verdicts_->scrollTo(verdictModel_->index(r, 0));
  }
}

void MainWindow::selectVerdictCall(int row) {
  // The verdict's call, in the run its analysis replayed: selected in the tree, its plots shown.
  const store::Verdict* verdict = verdictModel_->verdict(row);
  if (!verdict) return;
  const QString call = QString::fromStdString(verdict->call);  // a copy: the model may change below
  const std::string run = analyzer::candidateRunOf(model_->summary(), shownVerdictRun_.toStdString());
  if (run.empty()) return;
  for (int i = 0; i < model_->rowCount(); ++i) {
    const QModelIndex top = model_->index(i, 0);
    if (top.data().toString().toStdString() != run) continue;
    for (int it = 0; it < model_->rowCount(top); ++it) {
      const QModelIndex iteration = model_->index(it, 0, top);
      for (int c = 0; c < model_->rowCount(iteration); ++c) {
        const QModelIndex node = model_->index(c, 0, iteration);
        if (node.data(SessionTreeModel::PathRole).toString() != call) continue;
        tree_->scrollTo(node);
        // the call's page follows, with this verdict's evidence (its analysis's own verdict)
        tree_->selectionModel()->setCurrentIndex(node, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
        return;
      }
    }
  }
}

// A finding's evidence where the plots can show it (docs/session-format.md, findings): a bit
// position, or where an indexing bug strikes (a stride, or the rows and columns it is confined to).
void MainWindow::showFinding(const store::Finding& f) {
  showFindingOn(errorPlot_, f);
  showFindingOn(callPage_->plots(), f);
}

void MainWindow::showFindingOn(ErrorPlotPanel* panel, const store::Finding& f) {
  const auto field = [&](const char* name) -> std::optional<double> {
    const auto at = f.numbers.find(name);
    return at == f.numbers.end() ? std::nullopt : std::optional<double>(at->second);
  };
  if (const auto bit = field("bit") ? field("bit") : field("highest_bit")) {
    panel->highlightBit(int(*bit));
    panel->showBitsTab();
  } else if (f.model == "index_error") {
    if (const auto stride = field("stride")) panel->highlightPattern(int(*stride));
    else if (field("confined")) panel->highlightPattern(0);
  } else if (f.model == "precision_loss") {
    // the fp32 mantissa bits the named format does not keep: where its rounding shows
    const auto at = f.labels.find("format");
    const std::optional<fp::Format> format = at == f.labels.end() ? std::nullopt : fp::formatByName(at->second);
    if (const int highest = format ? fp::highestDroppedMantissaBit(*format) : -1; highest >= 0)
      panel->highlightBitSpan(0, highest, tr("bits %1 does not keep (0-%2)").arg(QString::fromStdString(at->second)).arg(highest));
  }
}

void MainWindow::reportError(const QString& text) {
  lastError_ = text;
  statusBar()->showMessage(text);
  if (quietErrors_) return;
  auto* box = new QMessageBox(QMessageBox::Warning, tr("PEAT Workbench"), text, QMessageBox::Ok, this);
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->open();  // not exec(): never block the event loop
}

void MainWindow::rememberRecent(const QString& path) {
  QSettings settings;
  QStringList recent = settings.value(kRecentKey).toStringList();
  recent.removeAll(path);
  recent.prepend(path);
  while (recent.size() > kMaxRecent) recent.removeLast();
  settings.setValue(kRecentKey, recent);
  refreshRecentMenu();
}

void MainWindow::refreshRecentMenu() {
  recentMenu_->clear();
  const QStringList recent = QSettings().value(kRecentKey).toStringList();
  for (const QString& path : recent)
    recentMenu_->addAction(QFileInfo(path).fileName(), this, [this, path] { startOpeningSession(path); })->setToolTip(path);
  recentMenu_->setEnabled(!recent.isEmpty());
}

namespace {
QStringList localFiles(const QMimeData* mime) {
  QStringList out;
  if (!mime || !mime->hasUrls()) return out;
  for (const QUrl& url : mime->urls())
    if (url.isLocalFile()) out << url.toLocalFile();
  return out;
}
bool isSession(const QString& path) {
  const QString suffix = QFileInfo(path).suffix().toLower();
  return suffix == QLatin1String("h5") || suffix == QLatin1String("hdf5");
}
}  // namespace

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  for (const QString& path : localFiles(event->mimeData()))
    if (isSession(path) || QFileInfo(path).suffix().toLower() == QLatin1String("npy")) {
      event->acceptProposedAction();
      return;
    }
}

void MainWindow::dropEvent(QDropEvent* event) {
  if (openFiles(localFiles(event->mimeData()))) event->acceptProposedAction();
}

bool MainWindow::openFiles(const QStringList& paths) {
  QStringList tensors;
  for (const QString& path : paths) {
    if (isSession(path)) return openSession(path);
    if (QFileInfo(path).suffix().toLower() == QLatin1String("npy")) tensors << path;
  }
  if (tensors.isEmpty()) {
    reportError(tr("drop a session (.h5) or two tensors (.npy, golden first)"));
    return false;
  }
  if (tensors.size() == 1 && pendingGolden_.isEmpty()) {
    pendingGolden_ = tensors.front();
    statusBar()->showMessage(tr("Golden tensor %1: now drop the candidate").arg(QFileInfo(pendingGolden_).fileName()));
    return true;
  }
  const QString golden = tensors.size() >= 2 ? tensors[0] : pendingGolden_;
  const QString candidate = tensors.size() >= 2 ? tensors[1] : tensors[0];
  pendingGolden_.clear();
  compareTensors(golden, candidate);
  return true;
}

void MainWindow::openComparedElement(qint64 tileRow, qint64 tileCol) {
  ErrorPlotPanel* panel = plotsOf(sender());
  const analyzer::StoredCallReport* shown = panel->firstReport();
  if (!pairForShownCall(panel)) {
    statusBar()->showMessage(tr("Elements open in the bit explorer from a compared pair of tensors (drop two .npy files, or select a call of a run made with peat playback --store-outputs)"));
    return;
  }
  const io::FloatTensor& g = compared_->g;
  const uint64_t cols = g.shape().empty() ? 1 : g.shape().back(), rows = g.size() / std::max<uint64_t>(cols, 1);
  const int64_t i = analyzer::worstInTile(g.data(), compared_->c.data(), rows, cols, compared_->tileRows,
                                          compared_->tileCols, uint64_t(tileRow), uint64_t(tileCol));
  if (i < 0) {
    statusBar()->showMessage(tr("Every element of tile (%1, %2) is bit-identical").arg(tileRow).arg(tileCol));
    return;
  }
  // the histogram restricted to the tile, over the whole tensor's (a linked view)
  try {
    const analyzer::StoredCallReport whole = *shown;
    const analyzer::Report tile = analyzer::analyzeTile(g.data(), compared_->c.data(), rows, cols, compared_->tileRows,
                                                        compared_->tileCols, uint64_t(tileRow), uint64_t(tileCol));
    panel->showReports(
        {whole, analyzer::plottedReport(tile, tr("tile r%1 c%2").arg(tileRow).arg(tileCol).toStdString(), std::string())});
  } catch (const std::exception& e) {
    reportError(QString::fromStdString(e.what()));
  }
  showBitExplorer();
  bitExplorer_->setPairContext(QStringLiteral("%1 [%2, %3]").arg(QString::fromStdString(compared_->name)).arg(uint64_t(i) / cols)
                                   .arg(uint64_t(i) % cols),
                               g.data()[i], compared_->c.data()[i]);
  bitExplorer_->setBlockContext(fp::blockPlacesInTensor(g.data(), g.size(), cols, uint64_t(i)));
}

ErrorPlotPanel* MainWindow::plotsOf(QObject* sender) const {
  auto* panel = qobject_cast<ErrorPlotPanel*>(sender);
  return panel ? panel : errorPlot_;
}

void MainWindow::requestPairStats(const analyzer::StoredCallReport& shown) {
  const quint64 generation = ++pairGeneration_;
  if (compared_ && compared_->name == shown.call) {  // read already (a dropped pair, or a call clicked before)
    callPage_->showPairStats(compared_->goldenStats, compared_->candidateStats);
    emit pairStatsShown();
    return;
  }
  if (!reader_ || shown.analysisRun.empty()) {
    callPage_->showNoPairStats(tr("No outputs to compare: this call has no analysis run."));
    emit pairStatsShown();
    return;
  }
  // the outputs are read and their statistics computed off the GUI thread
  auto reader = reader_;
  const analyzer::StoredCallReport report = shown;
  using Result = std::pair<std::string, std::shared_ptr<ComparedPair>>;
  auto* watcher = new QFutureWatcher<Result>(this);
  connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, generation] {
    watcher->deleteLater();
    if (generation != pairGeneration_) return;  // another call is shown now
    const auto [error, pair] = watcher->result();
    if (pair) {
      if (!compared_ || compared_->name != pair->name) compared_ = pair;
      callPage_->showPairStats(pair->goldenStats, pair->candidateStats);
    } else {
      callPage_->showNoPairStats(QString::fromStdString(error));
    }
    emit pairStatsShown();
  });
  watcher->setFuture(QtConcurrent::run([reader, report]() -> Result {
    try {
      analyzer::CallPair loaded = analyzer::loadCallPair(*reader, report.analysisRun, report.call);
      auto pair = std::make_shared<ComparedPair>();
      pair->g = io::FloatTensor::owned(std::move(loaded.golden), loaded.shape);
      pair->c = io::FloatTensor::owned(std::move(loaded.candidate), loaded.shape);
      if (pair->g.size() != uint64_t(report.elements)) return {"the stored outputs do not match the call's report", nullptr};
      pair->name = report.call;
      pair->tileRows = report.tileRows;
      pair->tileCols = report.tileCols;
      pair->goldenStats = analyzer::valueStats(pair->g.data(), pair->g.size());
      pair->candidateStats = analyzer::valueStats(pair->c.data(), pair->c.size());
      return {std::string(), pair};
    } catch (const std::invalid_argument& e) {  // the session does not hold both outputs
      return {std::string("The outputs are not in the session (") + e.what() +
                  "): replay with peat playback --store-outputs to see the golden and candidate statistics and to "
                  "link the plots to the elements.",
              nullptr};
    } catch (const std::exception& e) {
      return {std::string("The outputs could not be read: ") + e.what(), nullptr};
    }
  }));
}

bool MainWindow::pairForShownCall(ErrorPlotPanel* panel, bool quiet) {
  const analyzer::StoredCallReport* shown = panel->firstReport();
  if (!shown) return false;
  if (compared_ && shown->call == compared_->name) return true;
  if (shown->analysisRun.empty() || !reader_) return false;
  // a session's call: its golden and candidate outputs, read when a view first needs them (on this
  // thread, as the reports are; an output is what one call wrote)
  try {
    analyzer::CallPair loaded = analyzer::loadCallPair(*reader_, shown->analysisRun, shown->call);
    auto pair = std::make_shared<ComparedPair>();
    pair->g = io::FloatTensor::owned(std::move(loaded.golden), loaded.shape);
    pair->c = io::FloatTensor::owned(std::move(loaded.candidate), loaded.shape);
    pair->name = shown->call;
    pair->tileRows = shown->tileRows;
    pair->tileCols = shown->tileCols;
    if (pair->g.size() != uint64_t(shown->elements)) return false;
    pair->goldenStats = analyzer::valueStats(pair->g.data(), pair->g.size());
    pair->candidateStats = analyzer::valueStats(pair->c.data(), pair->c.size());
    compared_ = pair;
    return true;
  } catch (const std::exception& e) {
    if (!quiet) statusBar()->showMessage(QString::fromStdString(e.what()));
    return false;
  }
}

void MainWindow::showComparedBit(int bit) {
  ErrorPlotPanel* panel = plotsOf(sender());
  const analyzer::StoredCallReport* shown = panel->firstReport();
  if (!pairForShownCall(panel)) {
    statusBar()->showMessage(tr("Where one bit differs is shown for a compared pair of tensors (drop two .npy files, or select a call of a run made with peat playback --store-outputs)"));
    return;
  }
  const io::FloatTensor& g = compared_->g;
  panel->showMapCounts(
      analyzer::bitTileCounts(g.data(), compared_->c.data(), shown->rows, shown->cols, shown->tileRows, shown->tileCols, bit),
      bit);
}

void MainWindow::showComparedBin(int bin, int lastBin) {
  ErrorPlotPanel* panel = plotsOf(sender());
  const analyzer::StoredCallReport* shown = panel->firstReport();
  if (!pairForShownCall(panel)) {
    statusBar()->showMessage(tr("Where one bar's elements sit is shown for a compared pair of tensors (drop two .npy files, or select a call of a run made with peat playback --store-outputs)"));
    return;
  }
  panel->showMapCountsOfBin(analyzer::errorBinTileCounts(compared_->g.data(), compared_->c.data(), shown->rows,
                                                              shown->cols, shown->tileRows, shown->tileCols, bin, lastBin),
                                 bin, lastBin);
  // and their bit positions, over the Bits plot
  panel->showSelectionBits(analyzer::errorBinBitCounts(compared_->g.data(), compared_->c.data(), compared_->g.size(), bin, lastBin));
}

void MainWindow::regroupCompared(qint64 tileRows, qint64 tileCols) {
  ErrorPlotPanel* panel = plotsOf(sender());
  const analyzer::StoredCallReport* shown = panel->firstReport();
  if (!pairForShownCall(panel)) {
    statusBar()->showMessage(tr("This call's run did not store its outputs, so it keeps the tiles its analysis stored: "
                                "peat analyze -s SESSION --run RUN --tile %1x%2 stores these").arg(tileRows).arg(tileCols));
    return;
  }
  auto pair = compared_;
  const std::string verdict = shown->verdict;
  auto* watcher = new QFutureWatcher<std::pair<std::string, analyzer::StoredCallReport>>(this);
  connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, pair, panel] {
    watcher->deleteLater();
    if (compared_ != pair) return;  // another pair came meanwhile
    const auto [error, report] = watcher->result();
    if (!error.empty()) {
      reportError(QString::fromStdString(error));
      return;
    }
    pair->tileRows = report.tileRows;
    pair->tileCols = report.tileCols;
    panel->showReports({report});
    emit comparisonRegrouped();
  });
  watcher->setFuture(QtConcurrent::run([pair, verdict, tileRows, tileCols]() -> std::pair<std::string, analyzer::StoredCallReport> {
    try {
      analyzer::ReportOptions options;
      options.tileRows = uint64_t(tileRows);
      options.tileCols = uint64_t(tileCols);
      const analyzer::Report r = analyzer::analyze(pair->g.data(), pair->c.data(), pair->g.shape(), options);
      return {std::string(), analyzer::plottedReport(r, pair->name, verdict)};
    } catch (const std::exception& e) {  // never out of the worker: the window stays up
      return {e.what(), analyzer::StoredCallReport{}};
    }
  }));
}

void MainWindow::compareTensors(const QString& golden, const QString& candidate) {
  // Off the GUI thread: the histograms as soon as the analyzer's pass is done, the detector's
  // verdict after its own pass. The tensors stay mapped between the two, and afterwards for the
  // bit explorer.
  using Pair = ComparedPair;
  auto pair = std::make_shared<Pair>();
  const std::string g = golden.toStdString(), c = candidate.toStdString();
  const std::string name = QFileInfo(candidate).fileName().toStdString() + " vs " + QFileInfo(golden).fileName().toStdString();
  statusBar()->showMessage(tr("Comparing %1 with %2...").arg(QFileInfo(candidate).fileName(), QFileInfo(golden).fileName()));
  auto* first = new QFutureWatcher<std::pair<std::string, analyzer::StoredCallReport>>(this);
  connect(first, &QFutureWatcherBase::finished, this, [this, first, pair, name, goldenPath = golden, candidatePath = candidate] {
    first->deleteLater();
    const auto [error, report] = first->result();
    if (!error.empty()) {
      reportError(QString::fromStdString(error));
      return;
    }
    pair->name = report.call;
    pair->tileRows = report.tileRows;
    pair->tileCols = report.tileCols;
    compared_ = pair;
    errorPlot_->showReports({report});
    // the pair's page at the centre: its identity, error statistics and plots, the two tensors'
    // statistics side by side; the verdict follows
    QString shape;
    for (uint64_t d : pair->g.shape()) shape += (shape.isEmpty() ? QString() : QStringLiteral("x")) + QString::number(d);
    const QString description = tr("golden %1\ncandidate %2\nfloat32[%3]").arg(goldenPath, candidatePath, shape);
    callPage_->showCall(report, QString::fromStdString(report.call), description, nullptr);
    callPage_->showPairStats(pair->goldenStats, pair->candidateStats);
    central_->setCurrentWidget(callPage_);
    emit comparisonShown();
    auto* second = new QFutureWatcher<detector::Detection>(this);
    connect(second, &QFutureWatcherBase::finished, this, [this, second, report, pair, description] {
      second->deleteLater();
      if (compared_ != pair) return;  // another pair came meanwhile
      const detector::Detection detection = second->result();
      analyzer::StoredCallReport withVerdict = report;
      withVerdict.verdict = detection.verdict.model;
      errorPlot_->showReports({withVerdict});
      const store::Verdict verdict = analyzer::storedVerdict(report.call, detection);
      callPage_->showCall(withVerdict, QString::fromStdString(report.call), description, &verdict);
      callPage_->showPairStats(pair->goldenStats, pair->candidateStats);
      if (!verdict.findings.empty()) showFindingOn(callPage_->plots(), verdict.findings.front());
      explain_->showVerdict(QString::fromStdString(withVerdict.verdict));
      statusBar()->showMessage(tr("%1: %2").arg(QString::fromStdString(withVerdict.call), QString::fromStdString(withVerdict.verdict)));
      lastError_.clear();
      emit comparisonDetected();
    });
    second->setFuture(QtConcurrent::run([pair] {
      try {
        return detector::detect(pair->g.data(), {pair->c.data()}, pair->g.shape());
      } catch (const std::exception& e) {  // never out of the worker: the verdict says what failed
        detector::Detection failed;
        failed.verdict.model = "unknown";
        failed.verdict.explanation = std::string("the detector failed: ") + e.what();
        return failed;
      }
    }));
  });
  first->setFuture(QtConcurrent::run([pair, g, c, name]() -> std::pair<std::string, analyzer::StoredCallReport> {
    try {
      pair->g = io::readSource(g);
      pair->c = io::readSource(c);
      io::checkComparable(pair->g, pair->c);
      pair->goldenStats = analyzer::valueStats(pair->g.data(), pair->g.size());
      pair->candidateStats = analyzer::valueStats(pair->c.data(), pair->c.size());
      const analyzer::Report r = analyzer::analyze(pair->g.data(), pair->c.data(), pair->g.shape());
      return {std::string(), analyzer::plottedReport(r, name, std::string())};
    } catch (const std::exception& e) {
      return {e.what(), analyzer::StoredCallReport{}};
    }
  }));
}

void MainWindow::closeEvent(QCloseEvent* event) {
  QSettings settings;
  settings.setValue(kGeometryKey, saveGeometry());
  settings.setValue(kStateKey, saveState());
  event->accept();
}

}  // namespace peat::views
