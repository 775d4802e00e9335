// SPDX-License-Identifier: MIT
#pragma once
// Compare > Compare Selected: two selected analysed calls side by side, or, with a second session
// open (Compare With Session), the selected call here and the same call of the same run there.
#include <QObject>
#include <QString>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/analysis/session_analysis.h"
#include "views/sessionstate.h"

class QTabWidget;
class QTreeView;

namespace peat::views {

class ComparePanel;
class SessionController;
class SessionTreeModel;

class CompareController : public QObject {
  Q_OBJECT
 public:
  CompareController(const SessionState* session, SessionTreeModel* model, QTreeView* tree, ComparePanel* panel,
                    QTabWidget* central, QObject* parent);
  // Opens `path` as the compared session and waits for it (read in a worker; the GUI thread serves
  // its events meanwhile). False, with an error raised, when it does not open.
  bool openSession(const QString& path);
  void closeSession();  // Stop Comparing Sessions
  // A run is about to write `path`: the compared session lets go of it when it is that file.
  void release(const QString& path);
  // False, with an error raised, when the selection does not make a pair. The reports are read in
  // a worker (a session read never runs on the GUI thread); the GUI thread serves its events meanwhile.
  bool compareSelected();

 signals:
  void errorRaised(const QString& text);
  void errorCleared();

 private:
  // A selected call whose report is to be read: its run, that run's analysis and where it comes from.
  struct Request {
    std::string run, analysis, call;
    QString title;
  };
  // The selected calls of analysed runs, in the tree's order; `why` says what was selected but has
  // no analysis. Reads nothing from the session (the tree's summary only).
  std::vector<Request> selectedCalls(QString* why) const;

  const SessionState* session_;
  SessionTreeModel* model_;
  QTreeView* tree_;
  ComparePanel* panel_;
  QTabWidget* central_;
  SessionController* opener_;  // reads the compared session off the GUI thread
  std::shared_ptr<store::SessionReader> other_;  // the session compared with this one
  QString otherPath_;
};

}  // namespace peat::views
