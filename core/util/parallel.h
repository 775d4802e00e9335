// SPDX-License-Identifier: MIT
#pragma once
// The one way core spreads work over cores: a fork-join over a fixed number of workers, worker 0
// on the calling thread. No pool outlives the call, so nothing is shared between calls and a
// result never depends on which thread ran which part (callers partition deterministically).
#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace peat::util {

// The cores this process may use (at least 1).
inline unsigned hardwareThreads() { return std::max(1u, std::thread::hardware_concurrency()); }

// `requested`, or every core when it is 0.
inline unsigned threadsOr(unsigned requested) { return requested ? requested : hardwareThreads(); }

// Calls body(worker) for every worker in [0, workers) at once and returns when all have returned.
// An exception thrown by any worker is rethrown here (the first one) after every worker ended,
// instead of terminating the process as a throw out of a std::thread would.
template <class F>
void parallelFor(unsigned workers, F&& body) {
  workers = std::max(1u, workers);
  std::exception_ptr failure;
  std::mutex failureMutex;
  auto guarded = [&](unsigned w) {
    try {
      body(w);
    } catch (...) {
      std::lock_guard<std::mutex> lock(failureMutex);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  unsigned w = 1;
  try {
    for (; w < workers; ++w) pool.emplace_back(guarded, w);
  } catch (...) {  // no thread to be had (far too many asked for): the rest run here, in turn
    for (; w < workers; ++w) guarded(w);
  }
  guarded(0);
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

// Splits [0, count) into `parts` contiguous ranges of nearly equal size and calls
// body(first, last, part) for each, in parallel. Part p covers [count*p/parts, count*(p+1)/parts).
template <class F>
void parallelRanges(int64_t count, unsigned parts, F&& body) {
  if (count <= 0) return;
  parts = unsigned(std::clamp<int64_t>(int64_t(parts), 1, count));
  parallelFor(parts, [&](unsigned p) {
    body(count * int64_t(p) / int64_t(parts), count * int64_t(p + 1) / int64_t(parts), p);
  });
}

}  // namespace peat::util
