// SPDX-License-Identifier: MIT
#include "views/sessioncontroller.h"

#include <QEventLoop>
#include <QFutureWatcher>
#include <QtConcurrent/QtConcurrentRun>

#include "core/analysis/session_analysis.h"

namespace peat::views {

SessionController::SessionController(QObject* parent) : QObject(parent) {}

// A job still running keeps its watcher alive through Qt's parent; its result is dropped.
SessionController::~SessionController() { cancel(); }

OpenedSession SessionController::read(const QString& path) {
  OpenedSession out;
  out.path = path;
  try {
    out.reader = std::make_shared<store::SessionReader>(path.toStdString());  // probes it first
    out.summary = out.reader->summaryWithoutTensors();
    out.failed = readFailedCalls(*out.reader, out.summary);
    if (!out.summary.runs.empty()) {
      const std::string first = out.summary.runs.front().name;
      const std::string analysis = analyzer::analysisRunOf(out.summary, first);
      out.verdictRun = analysis.empty() ? first : analysis;
      out.verdicts = out.reader->verdicts(out.verdictRun);
    }
  } catch (const std::exception& e) {
    out.reader.reset();
    out.error = QString::fromStdString(e.what());
  }
  return out;
}

quint64 SessionController::open(const QString& path) {
  const quint64 job = ++generation_;
  ++running_;
  auto* watcher = new QFutureWatcher<OpenedSession>(this);
  connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, job, path] {
    watcher->deleteLater();
    --running_;
    const bool current = job == generation_;
    if (current) emit opened(job, watcher->result());
    emit ended(job, path, current);
  });
  watcher->setFuture(QtConcurrent::run([path] { return read(path); }));
  return job;
}

void SessionController::cancel() { ++generation_; }

void SessionController::waitFor(quint64 job, const std::function<void()>& atEnd) {
  QEventLoop loop;
  const auto done = connect(this, &SessionController::ended, &loop, [&](quint64 generation, const QString&, bool) {
    if (generation != job) return;
    if (atEnd) atEnd();
    loop.quit();
  });
  loop.exec();  // the GUI thread keeps serving events meanwhile
  disconnect(done);
}

}  // namespace peat::views
