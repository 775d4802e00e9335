// SPDX-License-Identifier: MIT
#include "views/qcustomplot_include.h"  // first: see the header

#include "views/mainwindow.h"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QCloseEvent>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QScreen>
#include <QScrollArea>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QCursor>
#include <QTimer>
#include <QToolTip>
#include <QTreeView>

#include <algorithm>
#include <memory>

#include "core/save/analysis_record.h"
#include "core/version.h"
#include "gpu/backend.h"
#include "views/bitexplorer.h"
#include "views/closeguard.h"
#include "views/callpage.h"
#include "views/comparecontroller.h"
#include "views/comparepanel.h"
#include "views/curvepanel.h"
#include "views/devicespanel.h"
#include "views/droppedfiles.h"
#include "views/errorplotpanel.h"
#include "views/explainpanel.h"
#include "views/flipcontroller.h"
#include "views/graphpanel.h"
#include "views/historycontroller.h"
#include "views/layermapview.h"
#include "views/linkedviews.h"
#include "views/liverun.h"
#include "views/numericspanel.h"
#include "views/overviewpanel.h"
#include "views/pageexport.h"
#include "views/paircontroller.h"
#include "views/recentsessions.h"
#include "views/runpanel.h"
#include "views/savepanel.h"
#include "views/saveruncontroller.h"
#include "views/selectioncontroller.h"
#include "views/sessioncontroller.h"
#include "views/sessiontreemodel.h"
#include "views/sessionwatcher.h"
#include "views/tourcontroller.h"
#include "views/tourpanel.h"
#include "views/verdictcontroller.h"
#include "views/verdicttablemodel.h"

namespace peat::views {

namespace {
const QString kGeometryKey = QStringLiteral("window/geometry");
const QString kStateKey = QStringLiteral("window/state");
QScrollArea* scrolled(QWidget* content) {
  auto* area = new QScrollArea;
  area->setWidget(content);
  area->setWidgetResizable(true);
  area->setFrameShape(QFrame::NoFrame);
  return area;
}
}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(tr("PEAT Workbench"));
  setObjectName(QStringLiteral("MainWindow"));
  setAcceptDrops(true);
  // the first size: 1400x860 where the screen has room, else nine tenths of what it has (a window
  // manager's panels excluded), and on a screen under 1280 wide all its width but a frame's (every
  // pixel goes to the pages: at nine tenths of 1024 the page tabs scroll); a saved geometry below
  // replaces it
  if (const QScreen* screen = QGuiApplication::primaryScreen()) {
    const QRect room = screen->availableGeometry();
    const int width = room.width() < 1280 ? room.width() - 16 : std::min(1400, room.width() * 9 / 10);
    resize(width, std::min(860, room.height() * 9 / 10));
  } else {
    resize(1400, 860);
  }

  sessions_ = new SessionController(this);
  connect(sessions_, &SessionController::opened, this, [this](quint64 generation, const OpenedSession& opened) {
    if (applyOpenedSession(opened)) appliedGeneration_ = generation;
  });
  // a job made stale by a newer open still ends the wait of openSession() for its path
  connect(sessions_, &SessionController::ended, this, [this](quint64, const QString& path, bool delivered) {
    if (!delivered) emit sessionOpenEnded(path, false);
  });
  // the file shown, replaced or removed on disk: opened again (or closed, saying why), never left stale
  watcher_ = new SessionWatcher(this);
  connect(watcher_, &SessionWatcher::changed, this, [this](const QString& path) {
    changedPath_ = path;
    statusBar()->showMessage(tr("%1 changed on disk: opening it again").arg(QFileInfo(path).fileName()));
    reopenWhenReleased(path);
  });
  connect(watcher_, &SessionWatcher::removed, this, [this](const QString& path) {
    setWindowTitle(tr("%1 (removed from disk) - PEAT Workbench").arg(QFileInfo(path).fileName()));
    reportError(tr("%1 was removed from disk: the pages show what was read before; open another session").arg(path));
  });
  createPages();
  createControllers();
  createDocks();
  connectRun();
  createActions();

  statusSession_ = new QLabel(tr("No session"), this);
  statusBar()->addPermanentWidget(statusSession_);
  statusBar()->showMessage(tr("Ready"), 3000);

  // File > Export and Edit > Copy take the plot or table used last, and name what it shows
  exports_->watch(this, verdicts_->table());
  exports_->setShown([this] {
    return PageExport::Shown{session_.path, currentItemPath(), tree_->currentIndex().data(SessionTreeModel::PathRole).toString()};
  });

  QSettings settings;
  restoreGeometry(settings.value(kGeometryKey).toByteArray());
  if (restoreState(settings.value(kStateKey).toByteArray())) firstLayout_ = nullptr;
}

MainWindow::~MainWindow() = default;

// The page stack at the centre and the widgets the docks hold.
void MainWindow::createPages() {
  model_ = new SessionTreeModel(this);
  model_->setTensorLister([this](const std::string& run, const std::string& call) -> SessionTreeModel::TensorRead {
    return [reader = session_.reader, run, call] {
      return reader ? reader->callTensors(run, call) : std::vector<store::TensorInfo>{};
    };
  });
  overview_ = new OverviewPanel(this);
  savePanel_ = new SavePanel(this);
  savePanel_->setLayerMapLoader([this](const std::string& analysis, const std::string& layer) -> SavePanel::LayerMapRead {
    if (!session_.reader) throw save::SaveError("no session is open");
    return [reader = session_.reader, analysis, layer] { return save::loadLayerMap(*reader, analysis, layer); };
  });
  // a value clicked on a layer's map opens in the bit explorer: its bound of largest magnitude, its
  // sound range and its bits' classes
  connect(savePanel_->layerMap(), &LayerMapView::elementClicked, this, &MainWindow::openSaveValue);
  connect(savePanel_, &SavePanel::layerMapShown, this, &MainWindow::pageShown);  // its own read ended
  central_ = new QTabWidget(this);
  central_->addTab(overview_, tr("Overview"));
  callPage_ = new CallPage(this);
  central_->addTab(callPage_, tr("Call"));
  curves_ = new CurvePanel(this);
  central_->addTab(curves_, tr("Training"));
  numerics_ = new NumericsPanel(this);
  connect(numerics_, &NumericsPanel::gridShown, this, &MainWindow::pageShown);  // its own read ended
  central_->addTab(numerics_, tr("Numerics"));
  central_->addTab(savePanel_, tr("SAVE"));
  graph_ = new GraphPanel(this);
  connect(graph_, &GraphPanel::graphShown, this, &MainWindow::pageShown);  // its own read ended
  central_->addTab(graph_, tr("Graph"));
  compare_ = new ComparePanel(this);
  central_->addTab(compare_, tr("Compare"));
  setCentralWidget(central_);

  tree_ = new QTreeView(this);
  tree_->setModel(model_);
  tree_->setUniformRowHeights(true);
  tree_->header()->setStretchLastSection(true);
  tree_->header()->setSectionResizeMode(SessionTreeModel::NameColumn, QHeaderView::ResizeToContents);
  tree_->setAlternatingRowColors(true);
  tree_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  // a call's tensors read for its tooltip: the tooltip still shown over that call is made whole
  connect(model_, &SessionTreeModel::toolTipRead, this, [this](const QModelIndex& index) {
    const QModelIndex under = tree_->indexAt(tree_->viewport()->mapFromGlobal(QCursor::pos()));
    if (!QToolTip::isVisible() || under.siblingAtColumn(0) != index) return;
    QToolTip::showText(QCursor::pos(), under.data(Qt::ToolTipRole).toString(), tree_->viewport(), tree_->visualRect(under));
  });
  devices_ = new DevicesPanel(this);
  errorPlot_ = new ErrorPlotPanel(this);
  runPanel_ = new RunPanel(this);
  explain_ = new ExplainPanel(this);
}

void MainWindow::createControllers() {
  const auto clearError = [this] { lastError_.clear(); };
  verdicts_ = new VerdictController(model_, tree_, explain_, this);
  pairs_ = new PairController(&session_, callPage_, errorPlot_, explain_, central_, this);
  connect(pairs_, &PairController::statsShown, this, &MainWindow::pairStatsShown);
  connect(pairs_, &PairController::comparisonShown, this, &MainWindow::comparisonShown);
  connect(pairs_, &PairController::comparisonDetected, this, &MainWindow::comparisonDetected);
  connect(pairs_, &PairController::errorRaised, this, &MainWindow::reportError);
  connect(pairs_, &PairController::statusMessage, statusBar(), &QStatusBar::showMessage);
  connect(pairs_, &PairController::errorCleared, this, clearError);
  // the plots (the call page's and the dock's) link back to the pair's elements
  links_ = new LinkedViews(pairs_, [this] { return flips_->showExplorer(); }, this);
  links_->link(callPage_->plots());
  links_->link(errorPlot_);
  connect(links_, &LinkedViews::regrouped, this, &MainWindow::comparisonRegrouped);
  connect(links_, &LinkedViews::errorRaised, this, &MainWindow::reportError);
  connect(links_, &LinkedViews::statusMessage, statusBar(), &QStatusBar::showMessage);
  const Pages pages{central_, overview_, callPage_, errorPlot_, curves_, numerics_, savePanel_, explain_, graph_};
  selection_ = new SelectionController(&session_, model_, tree_, pages, verdicts_, pairs_, this);
  connect(graph_, &GraphPanel::nodeActivated, selection_, &SelectionController::selectGraphNode);
  connect(selection_, &SelectionController::pageShown, this, &MainWindow::pageShown);
  connect(selection_, &SelectionController::errorRaised, this, &MainWindow::reportError);
  history_ = new HistoryController(tree_, this);
  connect(tree_->selectionModel(), &QItemSelectionModel::currentChanged, selection_, &SelectionController::showItem);
  connect(tree_->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
    history_->record();
    selection_->showSelectedCalls();
  });
  flips_ = new FlipController(&session_, this);
  connect(flips_, &FlipController::flipShown, this, &MainWindow::flipShown);
  comparisons_ = new CompareController(&session_, model_, tree_, compare_, central_, this);
  connect(comparisons_, &CompareController::errorRaised, this, &MainWindow::reportError);
  connect(comparisons_, &CompareController::errorCleared, this, clearError);
  live_ = new LiveRun(runPanel_, savePanel_, curves_, central_, this);
  saveRuns_ = new SaveRunController(runPanel_, savePanel_, central_, this);
  exports_ = std::make_unique<PageExport>(central_, savePanel_, curves_, numerics_, compare_, errorPlot_, verdicts_->model());
  tourScript_ = new TourController(this, &session_);
  closeGuard_ = new CloseGuard(this, runPanel_);
}

void MainWindow::createDocks() {
  auto dock = [this](const QString& title, const QString& name, QWidget* content, Qt::DockWidgetArea area) {
    auto* d = new QDockWidget(title, this);
    d->setObjectName(name);  // needed for saveState()
    d->setWidget(content);
    addDockWidget(area, d);
    return d;
  };
  QDockWidget* sessionDock = dock(tr("Session"), QStringLiteral("SessionDock"), tree_, Qt::LeftDockWidgetArea);
  const std::vector<gpu::BackendProbe> backends = gpu::probeBackends();
  devices_->showBackends(backends);
  dock(tr("Devices"), QStringLiteral("DevicesDock"), devices_, Qt::LeftDockWidgetArea);
  QDockWidget* plotDock =
      dock(tr("Error distribution"), QStringLiteral("ErrorPlotDock"), errorPlot_, Qt::RightDockWidgetArea);
  QStringList usable;
  for (const gpu::BackendProbe& b : backends)
    for (const gpu::DeviceInfo& d : b.devices) usable << QStringLiteral("%1:%2").arg(QString::fromStdString(b.name)).arg(d.index);
  runPanel_->setDevices(usable);
  // the run form scrolls in a short or narrow dock rather than widening the window past the screen
  QDockWidget* runDock = dock(tr("Run"), QStringLiteral("RunDock"), scrolled(runPanel_), Qt::RightDockWidgetArea);
  runDock_ = runDock;
  tabifyDockWidget(plotDock, runDock);
  plotDock->raise();
  QDockWidget* verdictDock =
      dock(tr("Detector verdicts"), QStringLiteral("VerdictDock"), verdicts_->table(), Qt::BottomDockWidgetArea);
  QDockWidget* explainDock = dock(tr("Explain"), QStringLiteral("ExplainDock"), explain_, Qt::RightDockWidgetArea);
  explainDock_ = explainDock;
  tabifyDockWidget(plotDock, explainDock);
  // the call page at the centre holds one call's plots; the dock overlays several calls
  explainDock->raise();

  // First-run proportions (applied once the window is shown: before, the layout has no size to
  // share); a saved layout (QSettings) replaces them.
  firstLayout_ = [this, sessionDock, plotDock, verdictDock] {
    const int width = this->width();
    // a small screen leaves the page at the centre the larger share (under 1100 px, room for every
    // page tab: the right-hand docks at 210)
    const int right = width < 1100 ? 210 : std::clamp(width * 26 / 100, 220, 520);
    resizeDocks({sessionDock, plotDock}, {std::clamp(width * 22 / 100, 200, 420), right}, Qt::Horizontal);
    resizeDocks({verdictDock}, {std::max(140, height() * 22 / 100)}, Qt::Vertical);
  };
}

// A run that writes the session takes the file while it runs (its results are drawn live by
// LiveRun); the session reopens when it ends.
void MainWindow::connectRun() {
  connect(runPanel_, &RunPanel::started, this, [this] {
    if (!runPanel_->writesSession()) return;  // a SAVE run: its outputs go to a file of their own
    // A run that writes the session this window reads needs the file: HDF5 lets one writer in
    // only when no one else has it open. The window lets go, and reopens it when the run ends.
    sessions_->cancel();  // an open still in flight must not take the file back during the run
    comparisons_->release(runPanel_->sessionPath());
    if (session_.reader && QFileInfo(runPanel_->sessionPath()) == QFileInfo(session_.path)) {
      session_.reader.reset();
      statusSession_->setText(tr("%1 | being written by the run").arg(QFileInfo(session_.path).fileName()));
    }
    live_->begin();
    watcher_->pause(true);  // the run writes it; its end opens it again
  });
  connect(runPanel_, &RunPanel::finished, this, [this](bool ok, const QString& message, const QString& session) {
    statusBar()->showMessage(message, 10000);
    live_->end(ok, message, session);  // what it drew stays, named by its file and how it ended
    watcher_->pause(false);
    // the results (or what a cancelled run kept) appear in the tree
    if (QFileInfo::exists(session) && (ok || session_.path.isEmpty() || QFileInfo(session) == QFileInfo(session_.path)))
      startOpeningSession(session);
  });
}

void MainWindow::showEvent(QShowEvent* event) {
  QMainWindow::showEvent(event);
  // a screen smaller than the layout's least (1024x700): it still fits (pages scroll), and says how
  // to make room
  if (const QScreen* shownOn = screen(); shownOn && screenNote_.isEmpty()) {
    const QRect room = shownOn->availableGeometry();
    if (room.width() < 1024 || room.height() < 700) {
      screenNote_ = tr("The screen has %1 x %2 pixels for the workbench, less than the 1024 x 700 it is laid out for: "
                       "pages scroll; close or tab docks (View) to make room")
                        .arg(room.width())
                        .arg(room.height());
      statusBar()->showMessage(screenNote_);
      if (!session_.reader) overview_->showNothing(OverviewPanel::firstStartHint() + QStringLiteral("\n\n") + screenNote_);
    }
  }
  if (firstLayout_) {
    auto apply = std::move(firstLayout_);
    firstLayout_ = nullptr;
    apply();
  }
}

bool MainWindow::openSession(const QString& path) {
  // this open's own job: an older job for the same path that ends meanwhile does not answer it
  bool opened = false;
  const quint64 job = startOpeningSession(path);
  sessions_->waitFor(job, [&] { opened = appliedGeneration_ == job; });
  return opened;
}

// A file written in place (another program, with HDF5's file locking off) is still open here, and
// HDF5 hands a new open of it the file it has open, with the metadata it cached before the write:
// the window would show the runs as they were. Every handle of ours is let go first (a read in
// flight ends with its own), then the file opens afresh (within two seconds whatever holds it).
void MainWindow::reopenWhenReleased(const QString& path) {
  sessions_->cancel();
  comparisons_->release(path);
  std::weak_ptr<store::SessionReader> held = session_.reader;
  if (QFileInfo(path) == QFileInfo(session_.path)) session_.reader.reset();
  auto* wait = new QTimer(this);
  wait->setInterval(20);
  connect(wait, &QTimer::timeout, this, [this, wait, held, path, tries = 0]() mutable {
    if (!held.expired() && ++tries < 100) return;
    wait->deleteLater();
    startOpeningSession(path);
  });
  wait->start();
}

quint64 MainWindow::startOpeningSession(const QString& path) {
  statusBar()->showMessage(tr("Opening %1 ...").arg(path));
  return sessions_->open(path);
}

bool MainWindow::applyOpenedSession(const OpenedSession& opened) {
  const bool changed = !changedPath_.isEmpty() && QFileInfo(opened.path) == QFileInfo(changedPath_);
  if (changed) changedPath_.clear();
  if (!opened.error.isEmpty()) {
    if (changed) {  // what is on disk now cannot be read: no page stays up from the file that was
      closeSession();
      overview_->showNothing(tr("%1 changed on disk and cannot be read now: %2").arg(opened.path, opened.error));
    }
    reportError(opened.error);
    emit sessionOpenEnded(opened.path, false);
    return false;
  }
  const QString& path = opened.path;
  const store::SessionSummary& summary = opened.summary;
  // the item shown before, found again by its name when the same session is opened again (a run
  // that wrote it, File > Open of the same file); every page is reset first, so none stays stale
  const QString again = QFileInfo(path) == QFileInfo(session_.path) ? currentItemPath() : QString();
  // a run's live curve and campaign stay up when its own session reopens after it, until a selection
  const bool live = live_->shown() && QFileInfo(path) == QFileInfo(runPanel_->sessionPath());
  live_->forget();
  selection_->reset(tr("Select an analysed call in the session tree: its page opens here"), live,
                    tr("Select a SAVE analysis or one of its layers (under SAVE in the session tree): its bit classes, "
                       "tiles and map open here"));
  session_.reader = opened.reader;
  session_.summary = std::make_shared<const store::SessionSummary>(summary);
  session_.path = path;
  model_->setSummary(summary, opened.failed);
  history_->clear();  // the old session's pages
  tree_->expandToDepth(0);
  tree_->resizeColumnToContents(0);
  overview_->showSummary(summary);
  verdicts_->model()->clear();
  setWindowTitle(tr("%1 - PEAT Workbench").arg(QFileInfo(path).fileName()));
  statusSession_->setText(tr("%1 | schema %2 | %n run(s)", nullptr, int(summary.runs.size()))
                              .arg(QFileInfo(path).fileName())
                              .arg(summary.schemaVersion));
  statusBar()->showMessage(tr("Opened %1").arg(path), 5000);
  recent_->remember(QFileInfo(path).absoluteFilePath());
  watcher_->watch(path);
  if (!runPanel_->running()) runPanel_->setSessionPath(QFileInfo(path).absoluteFilePath());
  if (!opened.verdictRun.empty()) verdicts_->show(QString::fromStdString(opened.verdictRun), opened.verdicts);
  lastError_.clear();
  if (!again.isEmpty()) {  // the item may be gone: then the pages ask for a selection, without a dialog
    const bool quiet = quietErrors_;
    quietErrors_ = true;
    const bool found = selectItem(again);
    quietErrors_ = quiet;
    lastError_.clear();
    if (!found && changed) {  // another program took it out of the file: say so where it was shown
      const QString gone = tr("%1 is no longer in %2: another program changed the file").arg(again, QFileInfo(path).fileName());
      selection_->reset(gone);
      lastError_ = gone;
      statusBar()->showMessage(gone);
    }
  }
  emit sessionOpenEnded(path, true);
  return true;
}

void MainWindow::closeSession() {
  sessions_->cancel();  // an open still running would bring a session back
  watcher_->stop();
  selection_->reset(tr("No session is open"));
  session_ = SessionState{};
  model_->clear();
  overview_->showNothing(OverviewPanel::firstStartHint());
  statusSession_->setText(tr("No session"));
  setWindowTitle(tr("PEAT Workbench"));
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
  return selection_->loading() || sessions_->busy() || saveRuns_->loading() || savePanel_->loading() || numerics_->loading() ||
         graph_->loading();
}

QString MainWindow::currentItemPath() const { return SessionTreeModel::pathOf(tree_->currentIndex()); }

QString MainWindow::demoPath() { return TourController::demoPath(); }
bool MainWindow::openDemo() { return tourScript_->openDemo(); }
TourPanel* MainWindow::tourPanel() const { return tourScript_->panel(); }

void MainWindow::showRunPanel() {
  runDock_->show();
  runDock_->raise();
}

void MainWindow::raiseExplain() { explainDock_->raise(); }

bool MainWindow::selectItem(const QString& path) {
  lastError_.clear();
  if (path.split(QLatin1Char('/'), Qt::SkipEmptyParts).isEmpty()) return false;
  const QModelIndex at = model_->findPath(path);
  if (!at.isValid()) {
    reportError(tr("the session has no item '%1'").arg(path));
    return false;
  }
  tree_->scrollTo(at);
  tree_->setCurrentIndex(at);  // the selection's pages follow
  return lastError_.isEmpty();
}

void MainWindow::showBitExplorer() { flips_->showExplorer(); }
BitExplorer* MainWindow::bitExplorer() const { return flips_->explorer(); }
void MainWindow::openSaveValue(qint64 index) { flips_->openValue(savePanel_->layerMap()->layerMap(), index); }
bool MainWindow::showTellingCall() { return selection_->showTellingCall(); }
void MainWindow::startTour() { tourScript_->start(); }
bool MainWindow::goBack() { return history_->goBack(); }
bool MainWindow::goForward() { return history_->goForward(); }
bool MainWindow::compareSelected() { return comparisons_->compareSelected(); }
bool MainWindow::openCompareSession(const QString& path) { return comparisons_->openSession(path); }
QTableView* MainWindow::verdictTable() const { return verdicts_->table(); }
VerdictTableModel* MainWindow::verdictModel() const { return verdicts_->model(); }

QCustomPlot* MainWindow::currentPlot() const { return exports_->currentPlot(); }
QString MainWindow::currentCsv() const { return exports_->currentCsv(); }

void MainWindow::exportCurrent(bool table) {
  QString message;
  if (exports_->exportByDialog(this, table, &message)) statusBar()->showMessage(message, 5000);
  else if (!message.isEmpty()) reportError(message);
}

void MainWindow::reportError(const QString& text) {
  lastError_ = text;
  statusBar()->showMessage(text);
  if (quietErrors_) return;
  auto* box = new QMessageBox(QMessageBox::Warning, tr("PEAT Workbench"), text, QMessageBox::Ok, this);
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->open();  // not exec(): never block the event loop
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  const QStringList files = localFiles(event->mimeData());
  if (std::any_of(files.begin(), files.end(), [](const QString& f) { return isSessionFile(f) || isTensorFile(f); }))
    event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
  if (openFiles(localFiles(event->mimeData()))) event->acceptProposedAction();
}

bool MainWindow::openFiles(const QStringList& paths) {
  QStringList tensors;
  for (const QString& path : paths) {
    if (isSessionFile(path)) return openSession(path);
    if (isTensorFile(path)) tensors << path;
  }
  if (pairs_->takeTensors(tensors)) return true;  // compared, or the golden one waiting for its candidate
  reportError(tr("drop a session (.h5) or two tensors (.npy, golden first)"));
  return false;
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (!closeGuard_->allowClose()) {  // a run in progress: asked first
    event->ignore();
    return;
  }
  QSettings settings;
  settings.setValue(kGeometryKey, saveGeometry());
  settings.setValue(kStateKey, saveState());
  event->accept();
}

}  // namespace peat::views
