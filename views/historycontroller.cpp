// SPDX-License-Identifier: MIT
#include "views/historycontroller.h"

#include "views/sessiontreemodel.h"

#include <QAction>
#include <QApplication>
#include <QMouseEvent>
#include <QItemSelectionModel>
#include <QKeySequence>
#include <QTreeView>

namespace peat::views {

HistoryController::HistoryController(QTreeView* tree, QObject* parent) : QObject(parent), tree_(tree) {
  // One binding per key: the platform's Back/Forward keys where they differ from Alt+Left/Right
  // (on Linux they are the same, and binding a key twice made Qt call it an ambiguous overload, so
  // Alt+Left and Alt+Right did nothing).
  auto bindings = [](const QKeySequence& mine, QKeySequence::StandardKey platform) {
    QList<QKeySequence> keys{mine};
    for (const QKeySequence& k : QKeySequence::keyBindings(platform))
      if (!keys.contains(k)) keys << k;
    return keys;
  };
  back_ = new QAction(tr("&Back"), this);
  back_->setShortcuts(bindings(QKeySequence(Qt::ALT | Qt::Key_Left), QKeySequence::Back));
  connect(back_, &QAction::triggered, this, [this] { goBack(); });
  forward_ = new QAction(tr("&Forward"), this);
  forward_->setShortcuts(bindings(QKeySequence(Qt::ALT | Qt::Key_Right), QKeySequence::Forward));
  connect(forward_, &QAction::triggered, this, [this] { goForward(); });
  updateActions();
  qApp->installEventFilter(this);
}

bool HistoryController::eventFilter(QObject* watched, QEvent* event) {
  if (event->type() == QEvent::MouseButtonPress) {
    auto* widget = qobject_cast<QWidget*>(watched);
    const auto button = static_cast<QMouseEvent*>(event)->button();
    if (widget && widget->window() == tree_->window() && (button == Qt::BackButton || button == Qt::ForwardButton)) {
      if (button == Qt::BackButton) goBack();
      else goForward();
      return true;
    }
  }
  return QObject::eventFilter(watched, event);
}

void HistoryController::record() {
  if (navigating_) return;
  const QModelIndex current = tree_->selectionModel()->currentIndex();
  if (!current.isValid() || !tree_->selectionModel()->isSelected(current)) return;
  // the history is of the calls looked at (and SAVE's results and layers): a run or an iteration
  // selected between two calls is not a step of it (the walk of 2026-12-08: Back went to the run);
  // from one, Back returns to the call left
  using Kind = SessionTreeModel::NodeKind;
  const auto kind = Kind(current.data(SessionTreeModel::KindRole).toInt());
  if (kind != Kind::Call && kind != Kind::SaveLayer && kind != Kind::SaveResult) {
    updateActions();  // away from the history's entry: Back returns to it
    return;
  }
  if (at_ >= 0 && at_ < int(pages_.size()) && pages_[std::size_t(at_)] == current) return;
  pages_.resize(std::size_t(at_ + 1));  // a new page drops the forward history
  pages_.emplace_back(current);
  if (pages_.size() > 200) pages_.erase(pages_.begin());
  at_ = int(pages_.size()) - 1;
  updateActions();
}

void HistoryController::clear() {
  pages_.clear();
  at_ = -1;
  updateActions();
}

bool HistoryController::goTo(int position) {
  if (position < 0 || position >= int(pages_.size()) || !pages_[std::size_t(position)].isValid()) return false;
  at_ = position;
  navigating_ = true;
  const QModelIndex node = pages_[std::size_t(position)];
  tree_->scrollTo(node);
  tree_->selectionModel()->setCurrentIndex(node, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  navigating_ = false;
  updateActions();
  return true;
}

bool HistoryController::onEntry() const {
  return at_ >= 0 && at_ < int(pages_.size()) && pages_[std::size_t(at_)] == tree_->selectionModel()->currentIndex();
}

bool HistoryController::goBack() { return goTo(onEntry() ? at_ - 1 : at_); }

void HistoryController::updateActions() {
  back_->setEnabled(at_ > 0 || (at_ == 0 && !onEntry()));
  forward_->setEnabled(at_ + 1 < int(pages_.size()));
}

}  // namespace peat::views
