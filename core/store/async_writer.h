// SPDX-License-Identifier: MIT
#pragma once
// Moves session writes (HDF5 calls, deflate) to a background thread, so recording costs the
// training thread little more than a copy. Tasks run in order; a bounded queue keeps memory in check.
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "core/store/session.h"

namespace peat::store {

class AsyncSessionWriter {
 public:
  // `maxQueuedBytes`: what may wait for the disk. Recording every iteration outpaces the writer on
  // two cores, so the queue fills and a recording's peak is the training's plus this budget (LeNet,
  // every iteration: 830 MB at 512 MB, 440 MB at 128 MB, flat from 800 to 2,000 iterations, no slower).
  explicit AsyncSessionWriter(std::unique_ptr<SessionWriter> writer, std::size_t maxQueuedBytes = std::size_t(128) << 20);
  ~AsyncSessionWriter();  // drains the queue; a failure there is swallowed (call drain() to see it)
  AsyncSessionWriter(const AsyncSessionWriter&) = delete;
  AsyncSessionWriter& operator=(const AsyncSessionWriter&) = delete;

  // Queues `task`, which holds about `bytes` of data. Blocks while the queue is over its budget.
  // Rethrows the first failure of an earlier task (disk full, ...), after which nothing more is written.
  void post(std::function<void(SessionWriter&)> task, std::size_t bytes = 0);
  // Waits until every queued task has run; rethrows a failure.
  void drain();

 private:
  void loop();
  void rethrowFailure();

  std::unique_ptr<SessionWriter> writer_;
  std::size_t maxBytes_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::pair<std::function<void(SessionWriter&)>, std::size_t>> queue_;
  std::size_t queuedBytes_ = 0;
  bool busy_ = false;
  bool stopping_ = false;
  std::exception_ptr failure_;
  std::thread thread_;
};

}  // namespace peat::store
