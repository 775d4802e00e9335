// SPDX-License-Identifier: MIT
#include "core/util/worker_pool.h"

#include <unistd.h>

namespace peat::util {

WorkerPool::~WorkerPool() {
  if (pid_ == int64_t(::getpid()))
    stop();
  else
    (void)threads_.release();  // a forked child's copies name no thread of its own
}

void WorkerPool::stop() {
  {
    std::lock_guard<std::mutex> lock(m_);
    quit_ = true;
  }
  start_.notify_all();
  for (std::thread& t : *threads_)
    if (t.joinable()) t.join();
  threads_->clear();
  quit_ = false;
}

void WorkerPool::loop(unsigned index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(unsigned)>* body = nullptr;
    {
      std::unique_lock<std::mutex> lock(m_);
      start_.wait(lock, [&] { return quit_ || (generation_ != seen && index < workers_); });
      if (quit_) return;
      seen = generation_;
      body = body_;
    }
    std::exception_ptr failure;
    try {
      (*body)(index);
    } catch (...) {
      failure = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(m_);
    if (failure && !failure_) failure_ = failure;
    if (--pending_ == 0) done_.notify_one();
  }
}

void WorkerPool::run(unsigned workers, const std::function<void(unsigned)>& body) {
  workers = std::max(1u, workers);
  if (workers == 1) {
    body(0);
    return;
  }
  std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
  if (!busy.owns_lock()) {  // another fork-join holds the kept threads
    parallelFor(workers, body);
    return;
  }
  const int64_t pid = int64_t(::getpid());
  if (pid_ != pid) {  // first use, or a forked child: the parent's threads are not here
    if (pid_ != 0) (void)threads_.release();
    threads_ = std::make_unique<std::vector<std::thread>>();
    pid_ = pid;
  }
  try {
    while (threads_->size() + 1 < workers) threads_->emplace_back([this, i = unsigned(threads_->size()) + 1] { loop(i); });
  } catch (...) {  // no more threads to be had: this fork-join starts its own, or runs its parts in turn
    busy.unlock();
    parallelFor(workers, body);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(m_);
    body_ = &body;
    workers_ = workers;
    pending_ = workers - 1;
    failure_ = nullptr;
    ++generation_;
  }
  start_.notify_all();
  std::exception_ptr failure;
  try {
    body(0);
  } catch (...) {
    failure = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(m_);
  done_.wait(lock, [&] { return pending_ == 0; });
  if (!failure) failure = failure_;
  body_ = nullptr;
  lock.unlock();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace peat::util
