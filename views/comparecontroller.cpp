// SPDX-License-Identifier: MIT
#include "views/comparecontroller.h"

#include <QFileInfo>
#include <QItemSelectionModel>
#include <QTabWidget>
#include <QTreeView>

#include <optional>
#include <stdexcept>

#include "core/analysis/call_view.h"
#include "views/comparepanel.h"
#include "views/sessioncontroller.h"
#include "views/sessiontreemodel.h"

namespace peat::views {

CompareController::CompareController(const SessionState* session, SessionTreeModel* model, QTreeView* tree,
                                     ComparePanel* panel, QTabWidget* central, QObject* parent)
    : QObject(parent),
      session_(session),
      model_(model),
      tree_(tree),
      panel_(panel),
      central_(central),
      opener_(new SessionController(this)) {}

bool CompareController::openSession(const QString& path) {
  // read in a worker, as the main session is (the probe of a hostile file takes up to its time-out);
  // the GUI thread serves its events meanwhile. Only this call's own job answers it.
  const quint64 job = opener_->open(path);
  std::optional<OpenedSession> result;
  const auto got = connect(opener_, &SessionController::opened, this, [&](quint64 generation, const OpenedSession& opened) {
    if (generation == job) result = opened;
  });
  opener_->waitFor(job);
  disconnect(got);
  if (!result) return false;  // a newer Compare With Session took its place
  if (!result->error.isEmpty()) {
    emit errorRaised(result->error);
    return false;
  }
  other_ = result->reader;
  otherPath_ = path;
  panel_->showMessage(tr("Comparing with %1: select an analysed call and choose Compare > Compare Selected (Ctrl+D)")
                          .arg(QFileInfo(path).fileName()));
  central_->setCurrentWidget(panel_);
  emit errorCleared();
  return true;
}

void CompareController::closeSession() {
  other_.reset();
  otherPath_.clear();
  panel_->showMessage(tr("Compared session closed"));
}

void CompareController::release(const QString& path) {
  if (other_ && QFileInfo(path) == QFileInfo(otherPath_)) {
    other_.reset();
    otherPath_.clear();
  }
}

std::vector<std::pair<analyzer::StoredCallReport, QString>> CompareController::selectedReports(std::size_t limit, QString* why) const {
  using Kind = SessionTreeModel::NodeKind;
  std::vector<std::pair<analyzer::StoredCallReport, QString>> reports;
  if (!session_->reader) return reports;
  const QString file = QFileInfo(session_->path).fileName();
  for (const QModelIndex& index : tree_->selectionModel()->selectedRows(SessionTreeModel::NameColumn)) {
    if (Kind(index.data(SessionTreeModel::KindRole).toInt()) != Kind::Call) continue;
    const std::string run = index.data(SessionTreeModel::KeyRole).toString().toStdString();
    const std::string analysis = analyzer::analysisRunOf(model_->summary(), run);
    if (analysis.empty()) {
      *why = tr("Run %1 has no analysis: run 'peat analyze --session %2 --run %1'").arg(QString::fromStdString(run), file);
      continue;
    }
    const QString path = index.data(SessionTreeModel::PathRole).toString();
    try {
      reports.emplace_back(analyzer::loadCallReport(*session_->reader, analysis, path.toStdString()),
                           tr("%1, run %2 (%3)").arg(path, QString::fromStdString(run), file));
    } catch (const std::exception&) {
      *why = tr("No report for this call in %1 (it may not have been replayed)").arg(QString::fromStdString(analysis));
    }
    if (reports.size() >= limit) break;
  }
  return reports;
}

bool CompareController::compareSelected() {
  emit errorCleared();
  QString why;
  const auto reports = selectedReports(2, &why);
  if (reports.size() == 2) {
    panel_->showPair(reports[0].first, reports[0].second, reports[1].first, reports[1].second);
  } else if (reports.size() == 1 && other_) {
    // the same call of the same run, analysed in the other session
    const analyzer::StoredCallReport& here = reports.front().first;
    const std::string run = analyzer::candidateRunOf(model_->summary(), here.analysisRun);
    try {
      const std::string analysis = analyzer::analysisRunOf(other_->summaryWithoutTensors(), run);
      if (analysis.empty())
        throw std::runtime_error(
            tr("%1 has no analysed run %2").arg(QFileInfo(otherPath_).fileName(), QString::fromStdString(run)).toStdString());
      panel_->showPair(here, reports.front().second, analyzer::loadCallReport(*other_, analysis, here.call),
                       tr("%1, run %2 (%3)").arg(QString::fromStdString(here.call), QString::fromStdString(run),
                                                QFileInfo(otherPath_).fileName()));
    } catch (const std::exception& e) {
      emit errorRaised(QString::fromStdString(e.what()));
      return false;
    }
  } else {
    emit errorRaised(!why.isEmpty() ? why
                     : other_ ? tr("select one analysed call to compare with %1, or two calls").arg(QFileInfo(otherPath_).fileName())
                              : tr("select two analysed calls to compare (Ctrl+click), or open a second session with "
                                   "Compare > Compare With Session"));
    return false;
  }
  central_->setCurrentWidget(panel_);
  return true;
}

}  // namespace peat::views
