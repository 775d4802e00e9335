// SPDX-License-Identifier: MIT
#include "views/historycontroller.h"

#include <QAction>
#include <QItemSelectionModel>
#include <QKeySequence>
#include <QTreeView>

namespace peat::views {

HistoryController::HistoryController(QTreeView* tree, QObject* parent) : QObject(parent), tree_(tree) {
  back_ = new QAction(tr("&Back"), this);
  back_->setShortcuts({QKeySequence(Qt::ALT | Qt::Key_Left), QKeySequence(QKeySequence::Back)});
  connect(back_, &QAction::triggered, this, [this] { goBack(); });
  forward_ = new QAction(tr("&Forward"), this);
  forward_->setShortcuts({QKeySequence(Qt::ALT | Qt::Key_Right), QKeySequence(QKeySequence::Forward)});
  connect(forward_, &QAction::triggered, this, [this] { goForward(); });
  updateActions();
}

void HistoryController::record() {
  if (navigating_) return;
  const QModelIndex current = tree_->selectionModel()->currentIndex();
  if (!current.isValid() || !tree_->selectionModel()->isSelected(current)) return;
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

void HistoryController::updateActions() {
  back_->setEnabled(at_ > 0);
  forward_->setEnabled(at_ + 1 < int(pages_.size()));
}

}  // namespace peat::views
