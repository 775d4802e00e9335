// SPDX-License-Identifier: MIT
#pragma once
// The Detector verdicts dock: one analysis's verdicts, each call named as the tree names it; the
// calls shown are highlighted, and choosing a verdict selects its call in the tree (its page follows,
// with that verdict's evidence) and explains its error model.
#include <QObject>
#include <QString>

#include <functional>
#include <vector>

#include "core/analysis/session_analysis.h"

class QTableView;
class QTreeView;
class QWidget;

namespace peat::views {

class ExplainPanel;
class JobTracker;
class SessionTreeModel;
class VerdictTableModel;

class VerdictController : public QObject {
  Q_OBJECT
 public:
  // The table is made here, a child of `window`, for the window's dock.
  VerdictController(SessionTreeModel* sessionModel, QTreeView* tree, ExplainPanel* explain, QWidget* window);
  QTableView* table() const { return table_; }
  VerdictTableModel* model() const { return model_; }

  void show(const QString& run, std::vector<store::Verdict> verdicts);  // drops a load in flight
  // The verdicts of analysis `run`, read off the GUI thread in the table's own job (`read` holds the
  // session reader it reads); nothing is read when they are shown already. An empty run: none.
  void load(const QString& run, std::function<std::vector<store::Verdict>()> read);
  bool loading() const;
  void dropLoad();  // a load in flight will not be shown
  const QString& shownRun() const { return shownRun_; }  // the analysis whose verdicts are shown
  void clear();  // drops a load in flight
  void highlight(const std::vector<analyzer::StoredCallReport>& reports);  // the rows of the calls shown
  // Makes `row` current, and its call the tree's selection even when the row was current already.
  void choose(int row);

 signals:
  void loaded();                        // a load delivered (the table shows its verdicts)
  void readFailed(const QString& why);  // a load failed (the table is cleared)

 private:
  void selectCall(int row);  // the verdict's call, in the run its analysis replayed

  SessionTreeModel* sessionModel_;
  QTreeView* tree_;
  ExplainPanel* explain_;
  VerdictTableModel* model_;
  QTableView* table_;
  QString shownRun_;
  JobTracker* jobs_;
  bool highlighting_ = false;  // highlight() moving the selection: not a row the user chose
};

}  // namespace peat::views
