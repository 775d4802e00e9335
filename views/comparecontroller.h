// SPDX-License-Identifier: MIT
#pragma once
// Compare > Compare Selected: two selected analysed calls side by side, or, with a second session
// open (Compare With Session), the selected call here and the same call of the same run there.
#include <QObject>
#include <QString>

#include <memory>
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
  bool compareSelected();  // false, with an error raised, when the selection does not make a pair

 signals:
  void errorRaised(const QString& text);
  void errorCleared();

 private:
  // The selected calls' stored reports (at most `limit`), each with where it comes from; `why`
  // says what was selected but could not be shown.
  std::vector<std::pair<analyzer::StoredCallReport, QString>> selectedReports(std::size_t limit, QString* why) const;

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
