// SPDX-License-Identifier: MIT
#pragma once
// One tracker per page, as hotspot's job tracker: a job runs on Qt's thread pool and its result is
// delivered on the tracker's thread, through the event loop, only when no newer job was started and
// cancel() was not called since. A page that starts a job for what is selected can therefore never
// show what was selected before. The work must not touch widgets; an exception it throws arrives as
// `failed` with its message (never out of the worker).
#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QtConcurrent/QtConcurrentRun>

#include <exception>
#include <memory>
#include <utility>

namespace peat::views {

class JobTracker : public QObject {
  Q_OBJECT
 public:
  explicit JobTracker(QObject* parent = nullptr) : QObject(parent) {}

  // Starts `work()` (returning a T) in a worker; `done(const T&)` or `failed(const QString&)` runs
  // later on this thread if this job is still the newest. Returns the job's generation.
  template <class T, class Work, class Done, class Failed>
  quint64 start(Work work, Done done, Failed failed) {
    const quint64 job = ++generation_;
    pending_ = job;
    using Outcome = std::pair<std::shared_ptr<const T>, QString>;
    auto* watcher = new QFutureWatcher<Outcome>(this);
    connect(watcher, &QFutureWatcherBase::finished, this,
            [this, watcher, job, done = std::move(done), failed = std::move(failed)] {
              watcher->deleteLater();
              const Outcome outcome = watcher->result();
              if (job == generation_) {
                pending_ = 0;
                if (outcome.first) done(*outcome.first);
                else failed(outcome.second);
              }
            });
    watcher->setFuture(QtConcurrent::run([work = std::move(work)]() -> Outcome {
      try {
        return {std::make_shared<const T>(work()), QString()};
      } catch (const std::exception& e) {
        return {nullptr, QString::fromStdString(e.what())};
      } catch (...) {
        return {nullptr, QStringLiteral("the job failed with an unknown exception")};
      }
    }));
    return job;
  }

  // Every job running now becomes stale: its result is dropped.
  void cancel() {
    ++generation_;
    pending_ = 0;
  }
  // The newest job has not delivered yet (stale jobs still finishing do not count).
  bool pending() const { return pending_ != 0; }
  quint64 generation() const { return generation_; }

 private:
  quint64 generation_ = 0;
  quint64 pending_ = 0;
};

}  // namespace peat::views
