// SPDX-License-Identifier: MIT
#include "core/util/worker_pool.h"

#include <unistd.h>

namespace peat::util {

namespace {
thread_local bool insideRun = false;  // this thread is running a body of some pool's run
}  // namespace

WorkerPool::~WorkerPool() {
  if (pid_ != int64_t(::getpid())) {
    (void)state_.release();  // a forked child's copies name no thread of its own
    return;
  }
  State& s = *state_;
  std::lock_guard<std::mutex> busy(s.busy);  // a run in progress ends first
  {
    std::lock_guard<std::mutex> lock(s.m);
    s.quit = true;
  }
  s.start.notify_all();
  for (std::thread& t : s.threads) t.join();
}

void WorkerPool::loop(State& s, unsigned index, uint64_t seen) {
  insideRun = true;
  for (;;) {
    const std::function<void(unsigned)>* body = nullptr;
    {
      std::unique_lock<std::mutex> lock(s.m);
      s.start.wait(lock, [&] { return s.quit || (s.generation != seen && index < s.workers); });
      if (s.quit) return;
      seen = s.generation;
      body = s.body;
    }
    std::exception_ptr failure;
    try {
      (*body)(index);
    } catch (...) {
      failure = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(s.m);
    if (failure && !s.failure) s.failure = failure;
    if (--s.pending == 0) s.done.notify_one();
  }
}

void WorkerPool::run(unsigned workers, const std::function<void(unsigned)>& body) {
  workers = std::max(1u, workers);
  if (workers == 1) {
    body(0);
    return;
  }
  if (insideRun) {  // a run from inside a body: the kept threads are taken
    parallelFor(workers, body);
    return;
  }
  State* state = nullptr;
  {
    std::lock_guard<std::mutex> own(own_);
    const int64_t pid = int64_t(::getpid());
    if (pid_ != pid) {  // first use, or a forked child: the parent's threads are not here
      if (pid_ != 0) {
        (void)state_.release();
        state_ = std::make_unique<State>();
      }
      pid_ = pid;
    }
    state = state_.get();
  }
  State& s = *state;
  std::unique_lock<std::mutex> busy(s.busy, std::try_to_lock);
  if (!busy.owns_lock()) {  // another fork-join holds the kept threads
    parallelFor(workers, body);
    return;
  }
  try {
    while (s.threads.size() + 1 < workers) {
      const unsigned index = unsigned(s.threads.size()) + 1;
      uint64_t now;
      {
        std::lock_guard<std::mutex> lock(s.m);
        now = s.generation;  // a new thread waits for the next run, not one that has ended
      }
      s.threads.emplace_back([&s, index, now] { loop(s, index, now); });
    }
  } catch (...) {  // no more threads to be had: this fork-join starts its own, or runs its parts in turn
    busy.unlock();
    parallelFor(workers, body);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(s.m);
    s.body = &body;
    s.workers = workers;
    s.pending = workers - 1;
    s.failure = nullptr;
    ++s.generation;
  }
  s.start.notify_all();
  std::exception_ptr failure;
  insideRun = true;
  try {
    body(0);
  } catch (...) {
    failure = std::current_exception();
  }
  insideRun = false;
  std::unique_lock<std::mutex> lock(s.m);
  s.done.wait(lock, [&] { return s.pending == 0; });
  if (!failure) failure = s.failure;
  s.body = nullptr;
  lock.unlock();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace peat::util
