// SPDX-License-Identifier: MIT
#pragma once
// Go > Back and Forward: the calls selected in the session tree, walked as a browser walks pages.
// Selecting a new item drops the forward history; a new session starts a new one.
#include <QObject>
#include <QPersistentModelIndex>

#include <vector>

class QAction;
class QTreeView;

namespace peat::views {

class HistoryController : public QObject {
  Q_OBJECT
 public:
  HistoryController(QTreeView* tree, QObject* parent);
  QAction* backAction() const { return back_; }        // Alt+Left
  QAction* forwardAction() const { return forward_; }  // Alt+Right
  void record();  // the tree's current call or SAVE item, selected by the user (not by going back or forward)
  bool goBack();  // the previous entry, or the entry left for a page that is none (a run)
  bool goForward() { return goTo(at_ + 1); }
  void clear();

 protected:
  // the mouse's back and forward buttons, anywhere in the tree's window
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  bool goTo(int position);
  bool onEntry() const;  // the tree shows the history's current entry
  void updateActions();

  QTreeView* tree_;
  std::vector<QPersistentModelIndex> pages_;
  int at_ = -1;
  bool navigating_ = false;
  QAction *back_, *forward_;
};

}  // namespace peat::views
