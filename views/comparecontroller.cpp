// SPDX-License-Identifier: MIT
#include "views/comparecontroller.h"

#include <QEventLoop>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QItemSelectionModel>
#include <QTabWidget>
#include <QTreeView>
#include <QtConcurrent/QtConcurrentRun>

#include <algorithm>
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

std::vector<CompareController::Request> CompareController::selectedCalls(QString* why) const {
  using Kind = SessionTreeModel::NodeKind;
  std::vector<Request> calls;
  if (!session_->reader) return calls;
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
    calls.push_back({run, analysis, path.toStdString(), tr("%1, run %2 (%3)").arg(path, QString::fromStdString(run), file)});
  }
  return calls;
}

namespace {

// What Compare Selected read in its worker.
struct Comparison {
  std::vector<std::pair<analyzer::StoredCallReport, QString>> reports;  // at most two, in selection order
  QString why;                                      // a selected call without a report
  std::optional<analyzer::StoredCallReport> there;  // the one call's report in the compared session
  QString error;                                    // why that one could not be read
};

}  // namespace

bool CompareController::compareSelected() {
  emit errorCleared();
  QString why;
  const std::vector<Request> calls = selectedCalls(&why);
  const std::shared_ptr<store::SessionReader> here = session_->reader, other = other_;
  const QString otherFile = QFileInfo(otherPath_).fileName();
  QFutureWatcher<Comparison> watcher;
  QEventLoop wait;
  connect(&watcher, &QFutureWatcherBase::finished, &wait, &QEventLoop::quit);
  watcher.setFuture(QtConcurrent::run([calls, here, other, otherFile]() {
    Comparison c;
    for (const Request& r : calls) {
      if (c.reports.size() == 2) break;
      try {
        c.reports.emplace_back(analyzer::loadCallReport(*here, r.analysis, r.call), r.title);
      } catch (const std::exception&) {
        c.why = tr("No report for this call in %1 (it may not have been replayed)").arg(QString::fromStdString(r.analysis));
      }
    }
    if (c.reports.size() != 1 || !other) return c;
    // the same call of the same run, analysed in the other session
    const auto first = std::find_if(calls.begin(), calls.end(), [&](const Request& r) { return r.call == c.reports[0].first.call; });
    try {
      const std::string analysis = analyzer::analysisRunOf(other->summaryWithoutTensors(), first->run);
      if (analysis.empty())
        throw std::runtime_error(tr("%1 has no analysed run %2").arg(otherFile, QString::fromStdString(first->run)).toStdString());
      c.there = analyzer::loadCallReport(*other, analysis, first->call);
    } catch (const std::exception& e) {
      c.error = QString::fromStdString(e.what());
    }
    return c;
  }));
  if (!watcher.isFinished()) wait.exec();
  const Comparison c = watcher.result();
  if (!c.why.isEmpty()) why = c.why;
  if (c.reports.size() == 2) {
    panel_->showPair(c.reports[0].first, c.reports[0].second, c.reports[1].first, c.reports[1].second);
  } else if (c.reports.size() == 1 && other) {
    if (!c.there) {
      emit errorRaised(c.error);
      return false;
    }
    const analyzer::StoredCallReport& report = c.reports.front().first;
    panel_->showPair(report, c.reports.front().second, *c.there,
                     tr("%1, run %2 (%3)")
                         .arg(QString::fromStdString(report.call),
                              QString::fromStdString(analyzer::candidateRunOf(model_->summary(), report.analysisRun)), otherFile));
  } else {
    emit errorRaised(!why.isEmpty() ? why
                     : other ? tr("select one analysed call to compare with %1, or two calls").arg(otherFile)
                             : tr("select two analysed calls to compare (Ctrl+click), or open a second session with "
                                  "Compare > Compare With Session"));
    return false;
  }
  central_->setCurrentWidget(panel_);
  return true;
}

}  // namespace peat::views
