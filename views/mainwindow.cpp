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
#include <QPointer>
#include <QPushButton>
#include <QScreen>
#include <QScrollArea>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QTreeView>

#include <algorithm>
#include <memory>

#include "core/save/analysis_record.h"
#include "core/version.h"
#include "gpu/backend.h"
#include "views/bitexplorer.h"
#include "views/callpage.h"
#include "views/comparecontroller.h"
#include "views/comparepanel.h"
#include "views/curvepanel.h"
#include "views/devicespanel.h"
#include "views/droppedfiles.h"
#include "views/errorplotpanel.h"
#include "views/explainpanel.h"
#include "views/flipcontroller.h"
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
#include "views/tourcontroller.h"
#include "views/tourpanel.h"
#include "views/verdictcontroller.h"
#include "views/verdicttablemodel.h"

namespace peat::views {

namespace {
const QString kGeometryKey = QStringLiteral("window/geometry");
const QString kStateKey = QStringLiteral("window/state");
}  // namespace

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
  connect(sessions_, &SessionController::opened, this, [this](quint64 generation, const OpenedSession& opened) {
    if (applyOpenedSession(opened)) appliedGeneration_ = generation;
  });
  // a job made stale by a newer open still ends the wait of openSession() for its path
  connect(sessions_, &SessionController::ended, this, [this](quint64, const QString& path, bool delivered) {
    if (!delivered) emit sessionOpenEnded(path, false);
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
  for (QCustomPlot* plot : findChildren<QCustomPlot*>()) plot->installEventFilter(this);
  verdicts_->table()->viewport()->installEventFilter(this);
  exports_->setDescriber([this] {
    if (session_.path.isEmpty()) return QString();
    QString text = tr("PEAT Workbench: session %1").arg(QFileInfo(session_.path).fileName());
    if (const QString item = currentItemPath(); !item.isEmpty()) text += QStringLiteral(", ") + item;  // run/iteration/call
    if (const QString call = tree_->currentIndex().data(SessionTreeModel::PathRole).toString(); !call.isEmpty())
      text += tr(" (call %1)").arg(call);
    return text;
  });

  QSettings settings;
  restoreGeometry(settings.value(kGeometryKey).toByteArray());
  if (restoreState(settings.value(kStateKey).toByteArray())) firstLayout_ = nullptr;
}

MainWindow::~MainWindow() = default;

// The page stack at the centre and the widgets the docks hold.
void MainWindow::createPages() {
  model_ = new SessionTreeModel(this);
  model_->setTensorLister([this](const std::string& run, const std::string& call) {
    return session_.reader ? session_.reader->callTensors(run, call) : std::vector<store::TensorInfo>{};
  });
  overview_ = new OverviewPanel(this);
  savePanel_ = new SavePanel(this);
  savePanel_->setLayerMapLoader([this](const std::string& analysis, const std::string& layer) {
    if (!session_.reader) throw save::SaveError("no session is open");
    return save::loadLayerMap(*session_.reader, analysis, layer);
  });
  // a value clicked on a layer's map opens in the bit explorer: its bound of largest magnitude, its
  // sound range and its bits' classes
  connect(savePanel_->layerMap(), &LayerMapView::elementClicked, this, &MainWindow::openSaveValue);
  central_ = new QTabWidget(this);
  central_->addTab(overview_, tr("Overview"));
  callPage_ = new CallPage(this);
  central_->addTab(callPage_, tr("Call"));
  curves_ = new CurvePanel(this);
  central_->addTab(curves_, tr("Training"));
  numerics_ = new NumericsPanel(this);
  central_->addTab(numerics_, tr("Numerics"));
  central_->addTab(savePanel_, tr("SAVE"));
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
  const Pages pages{central_, overview_, callPage_, errorPlot_, curves_, numerics_, savePanel_, explain_};
  selection_ = new SelectionController(&session_, model_, tree_, pages, verdicts_, pairs_, this);
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
  auto* runScroll = new QScrollArea(this);
  runScroll->setWidget(runPanel_);
  runScroll->setWidgetResizable(true);
  runScroll->setFrameShape(QFrame::NoFrame);
  QDockWidget* runDock = dock(tr("Run"), QStringLiteral("RunDock"), runScroll, Qt::RightDockWidgetArea);
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
    // a small screen leaves the page at the centre the larger share
    resizeDocks({sessionDock, plotDock}, {std::clamp(width * 22 / 100, 200, 420), std::clamp(width * 26 / 100, 220, 520)},
                Qt::Horizontal);
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
  });
  connect(runPanel_, &RunPanel::finished, this, [this](bool ok, const QString& message, const QString& session) {
    statusBar()->showMessage(message, 10000);
    live_->end(ok, message, session);  // what it drew stays, named by its file and how it ended
    // the results (or what a cancelled run kept) appear in the tree
    if (QFileInfo::exists(session) && (ok || session_.path.isEmpty() || QFileInfo(session) == QFileInfo(session_.path)))
      startOpeningSession(session);
  });
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
  const auto askForSession = [this](const QString& title) {
    return QFileDialog::getOpenFileName(this, title, QString(), tr("PEAT sessions (*.h5 *.hdf5);;All files (*)"));
  };
  QAction* open = file->addAction(tr("&Open Session..."), this, [this, askForSession] {
    if (const QString path = askForSession(tr("Open session")); !path.isEmpty()) startOpeningSession(path);
  });
  open->setShortcut(QKeySequence::Open);
  QAction* newWindow = file->addAction(tr("&New Window"), this, [] {
    auto* other = new MainWindow;  // another session (or another view of this one) side by side
    other->setAttribute(Qt::WA_DeleteOnClose);
    other->show();
  });
  newWindow->setShortcut(QKeySequence::New);
  recent_ = new RecentSessions(file->addMenu(tr("Open &Recent")));
  connect(recent_, &RecentSessions::chosen, this, &MainWindow::startOpeningSession);
  QAction* close = file->addAction(tr("&Close Session"), this, &MainWindow::closeSession);
  close->setShortcut(QKeySequence::Close);
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), qApp, &QApplication::closeAllWindows);
  quit->setShortcut(QKeySequence::Quit);

  file->addSeparator();
  QAction* exportPlot = file->addAction(tr("&Export Plot..."), this, [this] { exportCurrent(false); });
  exportPlot->setShortcut(QKeySequence(tr("Ctrl+E")));
  QAction* exportTable = file->addAction(tr("Export &Table as CSV..."), this, [this] { exportCurrent(true); });
  exportTable->setShortcut(QKeySequence(tr("Ctrl+Shift+E")));
  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  QAction* copy = edit->addAction(tr("&Copy Plot"), this, [this] {
    QCustomPlot* plot = currentPlot();
    QApplication::clipboard()->setPixmap(plot ? plot->toPixmap() : exports_->currentPicture()->grab());
    statusBar()->showMessage(tr("Plot copied"), 3000);
  });
  copy->setShortcut(QKeySequence(tr("Ctrl+Shift+C")));

  QMenu* compare = menuBar()->addMenu(tr("&Compare"));
  QAction* compareSelection = compare->addAction(tr("Compare &Selected"), this, &MainWindow::compareSelected);
  compareSelection->setShortcut(QKeySequence(tr("Ctrl+D")));
  compareSelection->setToolTip(tr("Two selected calls side by side, or the selected call here and in the compared session"));
  compare->addAction(tr("Compare With &Session..."), this, [this, askForSession] {
    if (const QString path = askForSession(tr("Compare with session")); !path.isEmpty()) openCompareSession(path);
  });
  compare->addAction(tr("Stop Comparing Sessions"), comparisons_, &CompareController::closeSession);

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  QAction* showRun = run->addAction(tr("&New Run..."), this, &MainWindow::showRunPanel);
  showRun->setShortcut(QKeySequence(tr("Ctrl+R")));
  run->addAction(tr("Open &Demo Session"), this, &MainWindow::openDemo);

  QMenu* tools = menuBar()->addMenu(tr("&Tools"));
  QAction* explorer = tools->addAction(tr("&Bit Explorer"), this, [this] { showBitExplorer(); });
  explorer->setShortcut(QKeySequence(tr("Ctrl+B")));

  // Go: back and forward through the calls selected, as in a browser (Alt+Left, Alt+Right)
  QMenu* go = menuBar()->addMenu(tr("&Go"));
  go->addAction(history_->backAction());
  go->addAction(history_->forwardAction());

  QMenu* view = menuBar()->addMenu(tr("&View"));
  for (QDockWidget* d : findChildren<QDockWidget*>()) view->addAction(d->toggleViewAction());

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
  bool opened = false;
  const quint64 job = startOpeningSession(path);
  sessions_->waitFor(job, [&] { opened = appliedGeneration_ == job; });
  return opened;
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
  const QString again = QFileInfo(path) == QFileInfo(session_.path) ? currentItemPath() : QString();
  // a run's live curve and campaign stay up when its own session reopens after it, until a selection
  const bool live = live_->shown() && QFileInfo(path) == QFileInfo(runPanel_->sessionPath());
  live_->forget();
  selection_->reset(tr("Select an analysed call in the session tree: its page opens here"), live);
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
  if (!runPanel_->running()) runPanel_->setSessionPath(QFileInfo(path).absoluteFilePath());
  if (!opened.verdictRun.empty()) verdicts_->show(QString::fromStdString(opened.verdictRun), opened.verdicts);
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
  selection_->reset(tr("No session is open"));
  session_ = SessionState{};
  model_->clear();
  overview_->showNothing(tr("Open a session (Ctrl+O), or start with the demo: Run > Open Demo Session, or "
                            "Help > Tour (F1)."));
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

bool MainWindow::pagesLoading() const { return selection_->loading() || sessions_->busy() || saveRuns_->loading(); }

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

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
  const QEvent::Type type = event->type();
  if (type == QEvent::MouseButtonPress || type == QEvent::Wheel || type == QEvent::FocusIn) {
    if (auto* plot = qobject_cast<QCustomPlot*>(watched)) exports_->noteUsed(plot);
    else if (watched == verdicts_->table()->viewport()) exports_->noteUsed(verdicts_->table());
  }
  return QMainWindow::eventFilter(watched, event);
}

QString MainWindow::exportName() const {
  // "demo-bf16-iteration-0-0-conv1": the session and the item shown
  QString name = QFileInfo(session_.path).completeBaseName();
  if (const QString item = currentItemPath(); !item.isEmpty()) name += QLatin1Char('-') + item;
  QString slug;
  for (const QChar c : name) {
    const QChar k = c.isLetterOrNumber() || c == QLatin1Char('.') || c == QLatin1Char('_') ? c : QLatin1Char('-');
    if (!(k == QLatin1Char('-') && (slug.isEmpty() || slug.endsWith(QLatin1Char('-'))))) slug += k;
  }
  while (slug.endsWith(QLatin1Char('-'))) slug.chop(1);
  return slug.isEmpty() ? QStringLiteral("peat-export") : slug;
}

void MainWindow::exportCurrent(bool table) {
  const QString path =
      table ? QFileDialog::getSaveFileName(this, tr("Export table"), exportName() + QStringLiteral(".csv"), tr("CSV (*.csv)"))
            : QFileDialog::getSaveFileName(this, tr("Export plot"), exportName() + QStringLiteral(".png"),
                                           tr("PNG image (*.png);;SVG drawing (*.svg);;PDF document (*.pdf)"));
  if (path.isEmpty()) return;
  QString error;
  if (!(table ? exports_->exportTable(path, &error) : exports_->exportPlot(path, &error))) reportError(error);
  else statusBar()->showMessage(tr("Wrote %1").arg(path), 5000);
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
  // a run in progress is not killed unasked: stopped (as Cancel does, its run marked cancelled)
  // and the window closed once it has ended, or kept
  if (runPanel_->running()) {
    event->ignore();
    if (closePrompt_) {
      closePrompt_->raise();
      return;
    }
    closePrompt_ = new QMessageBox(QMessageBox::Question, tr("PEAT Workbench"),
                                   tr("A run is in progress: %1\n\nStop it (what it finished is kept, the run marked "
                                      "cancelled) and close the window?")
                                       .arg(runPanel_->statusText()),
                                   QMessageBox::NoButton, this);
    closePrompt_->setObjectName(QStringLiteral("ClosePrompt"));
    QPushButton* stop = closePrompt_->addButton(tr("Stop the Run and Close"), QMessageBox::AcceptRole);
    closePrompt_->addButton(tr("Keep Running"), QMessageBox::RejectRole);
    closePrompt_->setDefaultButton(stop);
    closePrompt_->setAttribute(Qt::WA_DeleteOnClose);
    connect(closePrompt_, &QMessageBox::buttonClicked, this, [this, stop](QAbstractButton* clicked) {
      if (clicked != stop || !runPanel_->running()) return;
      auto once = std::make_shared<QMetaObject::Connection>();
      *once = connect(runPanel_, &RunPanel::finished, this, [this, once] {
        disconnect(*once);
        QTimer::singleShot(0, this, &QWidget::close);
      });
      statusBar()->showMessage(tr("Stopping the run; the window closes when it has ended"));
      runPanel_->cancel(RunPanel::kRecordCancelGraceMs);
    });
    closePrompt_->open();  // not exec(): the run's events keep coming
    return;
  }
  QSettings settings;
  settings.setValue(kGeometryKey, saveGeometry());
  settings.setValue(kStateKey, saveState());
  event->accept();
}

}  // namespace peat::views
