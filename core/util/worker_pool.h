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
  ~WorkerPool();  // waits for a run in progress, then ends the kept threads

  // Calls body(worker) for every worker in [0, workers) at once, worker 0 on the calling thread,
  // and returns when all have returned; the first exception is rethrown here. One fork-join at a
  // time uses the kept threads: a call made while another runs (from another thread, or from
  // inside a body) runs as parallelFor does, on threads of its own.
  void run(unsigned workers, const std::function<void(unsigned)>& body);

 private:
  // Everything the kept threads share. A forked child has none of the threads and may hold a copy
  // of a locked mutex: it leaves its copy of the state alone (never freed) and starts a new one.
  struct State {
    std::mutex busy;  // held for a whole run on the kept threads
    std::mutex m;
    std::condition_variable start, done;
    std::vector<std::thread> threads;
    uint64_t generation = 0;
    unsigned workers = 0, pending = 0;
    bool quit = false;
    const std::function<void(unsigned)>* body = nullptr;
    std::exception_ptr failure;
  };
  static void loop(State& s, unsigned index, uint64_t seen);

  std::unique_ptr<State> state_ = std::make_unique<State>();
  std::mutex own_;   // guards state_ and pid_ against two first calls at once
  int64_t pid_ = 0;  // the process that made state_'s threads
};

}  // namespace peat::util
