// SPDX-License-Identifier: MIT
#pragma once
// The Detector verdicts dock: one analysis's verdicts, each call named as the tree names it; the
// calls shown are highlighted, and choosing a verdict selects its call in the tree (its page follows,
// with that verdict's evidence) and explains its error model.
#include <QObject>
#include <QString>

#include <vector>

#include "core/analysis/session_analysis.h"

class QTableView;
class QTreeView;
class QWidget;

namespace peat::views {

class ExplainPanel;
class SessionTreeModel;
class VerdictTableModel;

class VerdictController : public QObject {
  Q_OBJECT
 public:
  // The table is made here, a child of `window`, for the window's dock.
  VerdictController(SessionTreeModel* sessionModel, QTreeView* tree, ExplainPanel* explain, QWidget* window);
  QTableView* table() const { return table_; }
  VerdictTableModel* model() const { return model_; }

  void show(const QString& run, std::vector<store::Verdict> verdicts);
  const QString& shownRun() const { return shownRun_; }  // the analysis whose verdicts are shown
  void clear();
  void highlight(const std::vector<analyzer::StoredCallReport>& reports);  // the rows of the calls shown
  // Makes `row` current, and its call the tree's selection even when the row was current already.
  void choose(int row);

 private:
  void selectCall(int row);  // the verdict's call, in the run its analysis replayed

  SessionTreeModel* sessionModel_;
  QTreeView* tree_;
  ExplainPanel* explain_;
  VerdictTableModel* model_;
  QTableView* table_;
  QString shownRun_;
};

}  // namespace peat::views
