// SPDX-License-Identifier: MIT
#include "views/flipcontroller.h"

#include <algorithm>

#include <QDialog>
#include <QFrame>
#include <QScreen>
#include <QScrollBar>
#include <QTimer>
#include <QScrollArea>
#include <QVBoxLayout>

#include "core/analysis/value_bound.h"
#include "core/save/analysis_record.h"
#include "core/save/flip_in_model.h"
#include "views/bitexplorer.h"
#include "views/jobtracker.h"

namespace peat::views {

FlipController::FlipController(const SessionState* session, QWidget* window)
    : QObject(window), session_(session), window_(window), jobs_(new JobTracker(this)) {}

BitExplorer* FlipController::showExplorer() {
  if (!explorer_) {
    explorerWindow_ = new QDialog(window_);
    explorerWindow_->setWindowTitle(tr("Bit Explorer"));
    auto* layout = new QVBoxLayout(explorerWindow_);
    // scrolled where the screen is smaller than the explorer (1024 x 700, or Large type): the window
    // never grows past the screen
    auto* scroll = new QScrollArea(explorerWindow_);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    explorer_ = new BitExplorer(scroll);
    scroll->setWidget(explorer_);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(scroll);
    connect(explorer_, &BitExplorer::flipRequested, this, &FlipController::flip);
    explorerWindow_->resize(960, 460);
  }
  // inside the screen of the window it belongs to (a 1024-wide screen), scrolled to its left edge
  const QRect room = window_->screen()->availableGeometry();
  explorerWindow_->resize(std::min(explorerWindow_->width(), room.width() - 16),
                          std::min(explorerWindow_->height(), room.height() - 48));
  explorerWindow_->show();
  const QRect frame = explorerWindow_->frameGeometry();
  explorerWindow_->move(std::clamp(frame.left(), room.left(), std::max(room.left(), room.right() - frame.width())),
                        std::clamp(frame.top(), room.top(), std::max(room.top(), room.bottom() - frame.height())));
  explorerWindow_->raise();
  if (auto* scroll = explorerWindow_->findChild<QScrollArea*>())
    QTimer::singleShot(0, scroll, [scroll] { scroll->horizontalScrollBar()->setValue(0); });
  return explorer_;
}

void FlipController::openValue(const save::LayerMap& m, qint64 index) {
  if (index < 0 || index >= m.elements()) return;
  showExplorer();
  const save::MapElement e = m.element(index);
  explorer_->setValue(analyzer::largestFloatInRange(e.lo, e.hi));
  explorer_->setSaveContext(QStringLiteral("%1[%2]").arg(QString::fromStdString(m.name)).arg(index), e.lo, e.hi,
                            m.robustMask[std::size_t(index)], m.rangingMask[std::size_t(index)]);
  analysis_ = m.analysis;
  layer_ = m.name;
  element_ = index;
  jobs_->cancel();  // a flip still running was for another value
  explorer_->setFlipAvailable(true);
}

void FlipController::flip(quint32 mask, int image) {
  if (!session_->reader || element_ < 0) {
    explorer_->showFlipError(tr("open a session and click a value on a SAVE layer's map"));
    emit flipShown();
    return;
  }
  // off the GUI thread: the network is rebuilt from the analysis's source and run on one image
  auto reader = session_->reader;
  const std::string analysis = analysis_, layer = layer_;
  const qint64 element = element_;
  jobs_->start<save::ModelFlip>(
      [reader, analysis, layer, element, mask, image] {
        return save::flipInModel(*reader, analysis, layer, element, mask, image);
      },
      [this](const save::ModelFlip& flip) {
        explorer_->showFlip(flip);
        emit flipShown();
      },
      [this](const QString& why) {
        explorer_->showFlipError(why);
        emit flipShown();
      });
}

}  // namespace peat::views
