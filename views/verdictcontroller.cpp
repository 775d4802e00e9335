// SPDX-License-Identifier: MIT
#include "views/verdictcontroller.h"

#include <QHeaderView>
#include <QScopedValueRollback>
#include <QTableView>
#include <QTreeView>

#include "core/analysis/call_view.h"
#include "views/explainpanel.h"
#include "views/jobtracker.h"
#include "views/sessiontreemodel.h"
#include "views/verdicttablemodel.h"

namespace peat::views {

VerdictController::VerdictController(SessionTreeModel* sessionModel, QTreeView* tree, ExplainPanel* explain, QWidget* window)
    : QObject(window), sessionModel_(sessionModel), tree_(tree), explain_(explain), jobs_(new JobTracker(this)) {
  model_ = new VerdictTableModel(window);
  table_ = new QTableView(window);
  table_->setModel(model_);
  table_->horizontalHeader()->setSectionResizeMode(VerdictTableModel::EvidenceColumn, QHeaderView::Stretch);
  table_->setObjectName(QStringLiteral("VerdictTable"));  // File > Export Table knows it by name
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& current) {
    if (highlighting_) return;  // the table following what is shown, not a user's choice
    const int row = current.isValid() ? current.row() : -1;
    if (const store::Verdict* v = model_->verdict(row)) explain_->showVerdict(QString::fromStdString(v->model));
    selectCall(row);
  });
}

void VerdictController::load(const QString& run, std::function<std::vector<store::Verdict>()> read) {
  if (run == shownRun_) {  // shown already: a load of another run in flight is dropped
    jobs_->cancel();
    return;
  }
  if (run.isEmpty()) {
    show(QString(), {});
    return;
  }
  jobs_->start<std::vector<store::Verdict>>(
      std::move(read),
      [this, run](const std::vector<store::Verdict>& verdicts) {
        show(run, verdicts);
        emit loaded();
      },
      [this](const QString& why) {
        clear();
        emit readFailed(why);
      });
}

bool VerdictController::loading() const { return jobs_->pending(); }

void VerdictController::dropLoad() { jobs_->cancel(); }

void VerdictController::show(const QString& run, std::vector<store::Verdict> verdicts) {
  jobs_->cancel();
  shownRun_ = run;
  // each call as the tree names it (the summary in memory: no read)
  const store::SessionSummary& summary = sessionModel_->summary();
  const std::string replayed = analyzer::candidateRunOf(summary, run.toStdString());
  std::vector<QString> names;
  for (const store::Verdict& v : verdicts) {
    QString name = QString::fromStdString(analyzer::callDisplayName(summary, replayed, v.call));
    // a call the kernel failed is not among the run's calls, but the tree lists it
    if (name == QString::fromStdString(v.call))
      if (const QModelIndex node = sessionModel_->findCall(replayed, name); node.isValid())
        name = tr("%1 (%2)").arg(node.data().toString(), node.parent().data().toString());
    names.push_back(name);
  }
  model_->setVerdicts(std::move(verdicts), std::move(names));
  for (int c = 0; c < VerdictTableModel::EvidenceColumn; ++c) table_->resizeColumnToContents(c);
}

void VerdictController::clear() {
  jobs_->cancel();
  shownRun_.clear();
  model_->clear();
}

void VerdictController::highlight(const std::vector<analyzer::StoredCallReport>& reports) {
  // the selection model's signals flow (the view repaints the rows they name: blocked, a row chosen
  // before stayed painted selected); only this controller's own reaction to them is held back
  const QScopedValueRollback<bool> quiet(highlighting_, true);
  table_->clearSelection();
  // the current row (the focus frame) follows too: it is the first call shown, or none, never a
  // row chosen before
  QModelIndex first;
  for (const analyzer::StoredCallReport& rep : reports) {
    const int r = model_->rowOf(QString::fromStdString(rep.call));
    if (r < 0) continue;
    table_->selectionModel()->select(model_->index(r, 0), QItemSelectionModel::Select | QItemSelectionModel::Rows);
    if (!first.isValid()) first = model_->index(r, 0);
  }
  table_->selectionModel()->setCurrentIndex(first, QItemSelectionModel::NoUpdate);
  if (first.isValid()) table_->scrollTo(first);
}

void VerdictController::choose(int row) {
  const bool already = table_->currentIndex().row() == row;
  table_->selectionModel()->setCurrentIndex(model_->index(row, 0), QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  if (already) selectCall(row);  // the row was current already: its call may not be the one shown
}

void VerdictController::selectCall(int row) {
  const store::Verdict* verdict = model_->verdict(row);
  if (!verdict) return;
  const QString call = QString::fromStdString(verdict->call);  // a copy: the model may change below
  const std::string run = analyzer::candidateRunOf(sessionModel_->summary(), shownRun_.toStdString());
  if (run.empty()) return;
  const QModelIndex node = sessionModel_->findCall(run, call);
  if (!node.isValid()) return;
  tree_->scrollTo(node);
  // the call's page follows, with this verdict's evidence (its analysis's own verdict)
  tree_->selectionModel()->setCurrentIndex(node, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
}

}  // namespace peat::views
