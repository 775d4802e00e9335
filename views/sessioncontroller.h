// SPDX-License-Identifier: MIT
#pragma once
// Opens sessions off the GUI thread. The probe of the file (a helper process, up to its time-out
// on a hostile file), the read of its structure and of the verdicts first shown run in a worker;
// the window gets the result in one step. As in hotspot's job tracker, a generation counter
// makes an older job stale: a newer open or a cancel drops its result, so the window never shows
// a session the user has moved away from.
#include <QObject>
#include <QString>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/store/session.h"
#include "views/failedcalls.h"

namespace peat::views {

// What an open job read: everything the window needs to show the session at once.
struct OpenedSession {
  QString path;
  std::shared_ptr<store::SessionReader> reader;
  store::SessionSummary summary;      // without each call's tensor list (read on demand)
  std::string verdictRun;             // the run whose verdicts are shown first ("": none)
  std::vector<store::Verdict> verdicts;
  std::vector<FailedCall> failed;     // the calls a user kernel failed in its kernel host
  QString error;                      // not empty: the open failed, and why (one line)
};

class SessionController : public QObject {
  Q_OBJECT
 public:
  explicit SessionController(QObject* parent = nullptr);
  ~SessionController() override;

  // Starts opening `path`; returns the job's generation. Only the newest job's result is delivered.
  quint64 open(const QString& path);
  // Drops the result of every job running now (the worker finishes its read, unseen).
  void cancel();
  bool busy() const { return running_ > 0; }
  // Serves events in a nested loop until job `job` ends (delivered or dropped), for the callers
  // that wait for an open; `atEnd` runs as it ends, before any later event.
  void waitFor(quint64 job, const std::function<void()>& atEnd = {});
  quint64 generation() const { return generation_; }

  // The work of one job; runs on a worker thread (public for tests and the benchmark).
  static OpenedSession read(const QString& path);

 signals:
  // The newest job's result (error empty: opened). Always on the GUI thread.
  void opened(quint64 generation, const peat::views::OpenedSession& session);
  // Every job's end, stale or not, after `opened` when it was delivered.
  void ended(quint64 generation, const QString& path, bool delivered);

 private:
  quint64 generation_ = 0;
  int running_ = 0;
};

}  // namespace peat::views
