// SPDX-License-Identifier: MIT
#include "views/tourcontroller.h"

#include <QDir>
#include <QDockWidget>
#include <QFileInfo>
#include <QGuiApplication>
#include <QLockFile>
#include <QScreen>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>

#include <algorithm>
#include <memory>
#include <utility>

#include "views/bitexplorer.h"
#include "views/curvepanel.h"
#include "views/layermapview.h"
#include "views/mainwindow.h"
#include "views/overviewpanel.h"
#include "views/sessiontreemodel.h"
#include "views/palette.h"
#include "views/runpanel.h"
#include "views/savepanel.h"

namespace peat::views {

TourController::TourController(MainWindow* window, const SessionState* session)
    : QObject(window), window_(window), session_(session) {
  connect(this, &TourController::ready, this, &TourController::show);
}

TourController::~TourController() = default;

QString TourController::demoPath() {
  return QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + QStringLiteral("/demo.h5");
}

void TourController::show() {
  if (!panel_) {
    panel_ = new TourPanel(window_);
    dock_ = new QDockWidget(tr("Tour"), window_);
    dock_->setObjectName(QStringLiteral("TourDock"));
    dock_->setWidget(panel_);
    // on the left, in front of the Devices dock: the Explain dock that some steps bring up stays in view
    window_->addDockWidget(Qt::LeftDockWidgetArea, dock_);
    if (auto* devices = window_->findChild<QDockWidget*>(QStringLiteral("DevicesDock"))) window_->tabifyDockWidget(devices, dock_);
    connect(panel_, &TourPanel::left, dock_, &QWidget::hide);
    connect(panel_, &TourPanel::left, this, &TourController::returnToSession);
    panel_->setSteps(steps());
  }
  dock_->show();
  dock_->raise();
  panel_->goTo(0);
}

QStringList TourController::neededItems() {
  return {QStringLiteral("golden"), QStringLiteral("bf16"), QStringLiteral("SAVE/lenet-symbolic/conv1"),
          QStringLiteral("SAVE/lenet-symbolic/conv1.relu"), QStringLiteral("save-campaign")};
}

bool TourController::sessionHasTourItems() const {
  if (!session_->reader) return false;
  for (const QString& item : neededItems())
    if (!window_->sessionModel()->findPath(item).isValid()) return false;
  return true;
}

void TourController::start() {
  const QString demo = demoPath();
  // the user's own session stays open: the tour runs on it when it holds every step's page
  if ((QFileInfo(session_->path) == QFileInfo(demo) && session_->reader) || sessionHasTourItems()) {
    emit ready();
    return;
  }
  if (!session_->path.isEmpty()) {
    // otherwise in place, on the demo session in this window; Leave brings the user's session back
    // on the item it showed
    returnTo_ = session_->path;
    returnItem_ = window_->currentItemPath();
    window_->statusBar()->showMessage(
        tr("The tour runs on the demo session; Leave brings %1 back").arg(QFileInfo(returnTo_).fileName()), 10000);
  }
  // opened, or made first (about 10 s), or waited for while another window makes it: the tour
  // begins once the demo session is open
  auto once = std::make_shared<QMetaObject::Connection>();
  *once = connect(window_, &MainWindow::sessionOpenEnded, this, [this, once, demo](const QString& path, bool opened) {
    if (QFileInfo(path) != QFileInfo(demo)) return;
    disconnect(*once);
    if (opened) emit ready();
  });
  openDemo(true);  // the tour's first step chooses the page, not the demo's telling call
}

void TourController::returnToSession() {
  const QString path = std::exchange(returnTo_, QString());
  const QString item = std::exchange(returnItem_, QString());
  if (path.isEmpty() || QFileInfo(path) == QFileInfo(session_->path)) return;
  auto once = std::make_shared<QMetaObject::Connection>();
  *once = connect(window_, &MainWindow::sessionOpenEnded, this, [this, once, path, item](const QString& opened, bool ok) {
    if (QFileInfo(opened) != QFileInfo(path)) return;
    disconnect(*once);
    if (ok && !item.isEmpty()) window_->selectItem(item);
  });
  window_->startOpeningSession(path);
}

bool TourController::openDemo(bool forTour) {
  const QString path = demoPath();
  QDir().mkpath(QFileInfo(path).absolutePath());
  // One window makes the demo; another started meanwhile (two --demo at once) waits for it instead
  // of writing the same file. The lock dies with its process (a crashed maker's is taken over).
  auto lock = std::make_unique<QLockFile>(path + QStringLiteral(".lock"));
  lock->setStaleLockTime(0);  // stale only when its process is gone: making takes 10-60 s
  if (!lock->tryLock(0)) {
    if (!waitingForDemo_) {
      waitingForDemo_ = new QTimer(this);
      waitingForDemo_->setInterval(500);
      connect(waitingForDemo_, &QTimer::timeout, this, [this] {
        QLockFile free(demoPath() + QStringLiteral(".lock"));
        free.setStaleLockTime(0);
        if (!free.tryLock(0)) return;
        free.unlock();
        waitingForDemo_->stop();
        openDemo(waitingForTour_);
      });
    }
    waitingForTour_ = forTour;
    waitingForDemo_->start();
    window_->statusBar()->showMessage(
        tr("Another PEAT Workbench window is making the demo session: it opens here when it is made (%1)").arg(path));
    return true;
  }
  if (QFileInfo::exists(path)) {
    lock.reset();
    if (!window_->openSession(path)) return false;
    // the most telling page: an analysed call with its verdict and evidence (a tour shows its own)
    if (!forTour) window_->showTellingCall();
    return true;
  }
  // made first, under the lock until the last step ends: its telling page once it is open
  makingDemo_ = std::move(lock);
  auto done = std::make_shared<QMetaObject::Connection>();
  *done = connect(window_->runPanel(), &RunPanel::finished, this, [this, done, path](bool, const QString&, const QString& session) {
    if (QFileInfo(session) != QFileInfo(path)) return;
    disconnect(*done);
    makingDemo_.reset();
  });
  auto once = std::make_shared<QMetaObject::Connection>();
  *once = connect(window_, &MainWindow::sessionOpenEnded, this, [this, once, path, forTour](const QString& opened, bool ok) {
    if (QFileInfo(opened) != QFileInfo(path)) return;
    disconnect(*once);
    if (ok && !forTour) window_->showTellingCall();
  });
  window_->showRunPanel();
  window_->statusBar()->showMessage(tr("Making the demo session (about 10 s): %1").arg(path));
  if (!window_->runPanel()->startSequence(RunPanel::demoSteps(path), path)) makingDemo_.reset();
  return true;
}

void TourController::keepExplorerBesideTour() {
  if (dock_ && dock_->isVisible() && window_->bitExplorer()->window()->isVisible())
    placeBesideTour(window_->bitExplorer()->window());
}

// The script: seven steps over the demo session (about 100 lines of text and page choices).
void TourController::placeBesideTour(QWidget* opened) const {
  if (!panel_ || !opened) return;
  const QScreen* screen = window_->screen() ? window_->screen() : QGuiApplication::primaryScreen();
  if (!screen) return;
  const QRect room = screen->availableGeometry();
  const QRect tour(panel_->mapToGlobal(QPoint(0, 0)), panel_->size());
  const QRect frame = opened->frameGeometry();
  const int decoration = frame.height() - opened->height(), sides = frame.width() - opened->width();
  const int gap = 8;
  // the wider of the two sides of the panel, then the opened window within it
  const int rightRoom = room.right() - tour.right() - gap, leftRoom = tour.left() - room.left() - gap;
  const bool right = rightRoom >= leftRoom;
  const int width = std::min(opened->width() + sides, right ? rightRoom : leftRoom);
  const int height = std::min(opened->height() + decoration, room.height());
  if (width < 320) return;  // no room beside it: left where it is
  const int x = right ? tour.right() + gap : tour.left() - gap - width;
  opened->resize(width - sides, height - decoration);
  opened->move(x, std::max(room.top(), std::min(frame.top(), room.bottom() - height)));
}

std::vector<TourPanel::Step> TourController::steps() {
  MainWindow* w = window_;
  const auto item = [w](const QString& path) {
    return [w, path](QString* why) {
      if (w->selectItem(path)) return true;
      *why = w->lastError();
      return false;
    };
  };
  const auto telling = [w](QString* why) {  // the demo's most telling call on its page
    if (w->showTellingCall()) return true;
    *why = tr("no analysed calls");
    return false;
  };
  const auto central = [w] { return qobject_cast<QTabWidget*>(w->centralWidget()); };
  const auto overview = [central] {
    for (int i = 0; i < central()->count(); ++i)
      if (auto* page = qobject_cast<OverviewPanel*>(central()->widget(i))) return static_cast<QWidget*>(page);
    return central()->widget(0);
  };
  std::vector<TourPanel::Step> steps;
  steps.push_back({tr("1. Record training"),
                   tr("<p><b>peat profile</b> trained LeNet on Fashion-MNIST with every GEMM of the network (the "
                      "convolutions and linear layers, forward and both backward GEMMs) going through a <i>kernel "
                      "slot</i>. Every 10th iteration's calls were recorded to the session (HDF5): operands, outputs "
                      "and a checkpoint.</p><p>The <b>Training</b> tab shows the loss curve of this golden run.</p>"),
                   [w, item, central](QString* why) {
                     if (!item(QStringLiteral("golden"))(why)) return false;
                     central()->setCurrentWidget(w->curvePanel());
                     return true;
                   }});
  steps.push_back({tr("2. Replay a candidate kernel"),
                   tr("<p><b>peat playback -k bf16</b> replayed each recorded call through a candidate kernel: "
                      "here a GEMM that rounds its inputs to bfloat16. The candidate's output is compared with the "
                      "recorded golden output, call by call.</p><p>The analysis named an error model for every call: "
                      "the <b>Detector verdicts</b> table below.</p>"),
                   [w, item, central, overview](QString* why) {  // a playback has no curve: the Overview, not step 1's page
                     if (!item(QStringLiteral("bf16"))(why)) return false;
                     central()->setCurrentWidget(overview());
                     w->verdictTable()->setFocus();
                     return true;
                   }});
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
                   [w, telling](QString* why) {
                     if (!telling(why)) return false;
                     w->raiseExplain();
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
                   [this, w](QString* why) {
                     if (!w->selectItem(QStringLiteral("SAVE/lenet-symbolic/conv1.relu"))) {
                       *why = w->lastError();
                       return false;
                     }
                     w->afterPages([this, w] {  // the layer's map, once its page has read it
                       if (!panel_ || panel_->step() != 5) return;  // the user moved on meanwhile
                       const save::LayerMap& m = w->savePanel()->layerMap()->layerMap();
                       if (m.elements() == 0) {
                         w->reportError(tr("the tour cannot flip a bit: conv1.relu has no values"));
                         return;
                       }
                       const qint64 widest = qint64(std::max_element(m.hi.begin(), m.hi.end()) - m.hi.begin());
                       w->openSaveValue(widest);
                       placeBesideTour(w->bitExplorer()->window());
                       // and again whenever it grows its window (Large type grew it back over the panel)
                       connect(w->bitExplorer(), &BitExplorer::windowResized, this, &TourController::keepExplorerBesideTour,
                               Qt::UniqueConnection);
                       w->bitExplorer()->toggleBit(30);
                       w->bitExplorer()->setFlipImage(0);
                       w->bitExplorer()->requestFlip();
                     });
                     return true;
                   }});
  steps.push_back({tr("7. What protection buys"),
                   tr("<p><b>peat save campaign --basis memory</b> injected memory bit flips into 500 inferences "
                      "per point: accuracy against the number of flips for no protection, ECC, triple modular "
                      "redundancy, Ranger and SAVE.</p><p><b>The basis:</b> the same fault rate per byte of each "
                      "scheme's unreliable memory (the x axis counts the unprotected run's flips), the basis the "
                      "README quotes, where SAVE keeps LeNet's fault-free accuracy (about 86%) up to 4096 flips. "
                      "With the same flips per inference for every scheme (the default basis), SAVE's smaller "
                      "unreliable memory would meet them many times denser. The fault and recovery models: the "
                      "Explain dock and docs/save.md.</p><p>That is the tour. Leave it, or go back to any "
                      "step.</p>"),
                   item(QStringLiteral("save-campaign"))});
  for (TourPanel::Step& s : steps)
    s.show = [w, show = std::move(s.show)](QString* why) {
      if (BitExplorer* explorer = w->bitExplorer()) explorer->window()->hide();  // opened by step 6: not over the next
      return show(why);
    };
  return steps;
}

}  // namespace peat::views
