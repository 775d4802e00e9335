// SPDX-License-Identifier: MIT
#pragma once
// Workers kept between fork-joins, for callers that fork-join many times a second on small parts
// (SAVE's engine: a fork-join per layer, a hundred layers per inference, where starting threads
// each time cost as much as a small layer's work). The parts and their assignment to workers are
// the caller's, as with parallelFor, so results never depend on which thread ran which part.
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/util/parallel.h"

namespace peat::util {

class WorkerPool {
 public:
  WorkerPool() = default;
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  ~WorkerPool();

  // Calls body(worker) for every worker in [0, workers) at once, worker 0 on the calling thread,
  // and returns when all have returned; the first exception is rethrown here. One fork-join at a
  // time uses the kept threads: a call made while another runs (from another thread, or from
  // inside a body) runs as parallelFor does, on threads of its own.
  void run(unsigned workers, const std::function<void(unsigned)>& body);

 private:
  void loop(unsigned index);
  void stop();

  std::mutex busy_;  // held for a whole run on the kept threads
  std::mutex m_;
  std::condition_variable start_, done_;
  // the kept threads; a forked child, which has none of them, leaves its copy of the list alone
  std::unique_ptr<std::vector<std::thread>> threads_ = std::make_unique<std::vector<std::thread>>();
  int64_t pid_ = 0;  // the process that started the threads (a forked child has none of them)
  uint64_t generation_ = 0;
  unsigned workers_ = 0, pending_ = 0;
  bool quit_ = false;
  const std::function<void(unsigned)>* body_ = nullptr;
  std::exception_ptr failure_;
};

}  // namespace peat::util
