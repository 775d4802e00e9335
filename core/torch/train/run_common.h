// SPDX-License-Identifier: MIT
#pragma once
// What golden profiling, playback and runtime FI (profile.cpp, playback.cpp, runtime_fi.cpp)
// share: timing, the tables and attributes they write, and the cleanup of a failed session.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/analyzer/error_summary.h"
#include "core/store/curves.h"
#include "core/store/h5.h"
#include "core/store/run_records.h"
#include "core/store/table.h"
#include "core/store/session.h"
#include "core/torch/kernels/kernel.h"
#include "core/torch/ops/op_types.h"
#include "core/torch/train/profiler.h"
#include "core/torch/train/trainer.h"

namespace peat::train::detail {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t);

uint64_t fileSize(const std::string& path);
std::string libtorchVersion();

// The tables' layouts live with their result kind (core/store/run_records.h, curves.h).
using Table = store::TableBuilder;

using store::callErrorTable;
using store::injectionTable;
void addCallError(Table& t, const store::CallId& id, ops::Variant v, const analyzer::ErrorSummary& e);
void addFailedCall(Table& t, const store::CallId& id, ops::Variant v, const std::string& outcome);

// Calls a user kernel failed in its kernel host (kernels::KernelCallFailed), for a run's summary.
struct KernelFailures {
  int64_t calls = 0;
  std::map<std::string, int64_t> byOutcome;  // "crash:SIGSEGV" -> 2
  std::string first;                         // "it 0 call 3 fc1 linear forward: plugin 'x' crashed ..."
  void add(const std::string& outcome, const std::string& call, const std::string& message);
  // "2 of 16 calls (crash:SIGSEGV 1, hang 1)"; empty when none failed
  std::string summary(int64_t of) const;
  // The run's attributes kernel_failures and first_kernel_failure (when any failed).
  void setAttributes(store::SessionWriter& w, int64_t of) const;
};
void addInjections(Table& t, const std::vector<kernels::Injection>& log);
void keepWorst(analyzer::ErrorSummary& worst, const analyzer::ErrorSummary& e);

std::vector<store::NamedTensor> views(const std::vector<std::pair<std::string, store::Tensor>>& tensors);
std::vector<std::pair<std::string, store::Tensor>> owned(const NamedTensors& tensors, uint64_t& bytes);

void setTrainAttributes(store::SessionWriter& w, const TrainOptions& o, const std::string& dataset,
                        const std::string& init);

// Training curve of one run: loss and batch accuracy per iteration, test numbers where evaluated.
struct Curve {
  Table table = store::curveTable();
  void add(int64_t it, const StepStats& s, const EvalStats* e);
};

bool evaluateNow(const TrainOptions& o, int64_t it);

// Runs `work`, which creates the session `path` (setting `created`). If it fails after creating it,
// the session is kept when it still reads back, and removed when it does not, so no corrupt file is
// left behind (a full disk, say). The error says which.
template <typename Work>
auto withSessionCleanup(const std::string& path, Work work) -> decltype(work(std::declval<bool&>())) {
  bool created = false;
  try {
    return work(created);
  } catch (const std::exception& e) {
    if (!created) throw;
    bool readable = false;
    try {
      store::SessionReader(path).summary();
      readable = true;
    } catch (const std::exception&) {
    }
    if (!readable) {
      std::remove(path.c_str());
      throw std::runtime_error(std::string(e.what()) + " (the incomplete session " + path + " was removed)");
    }
    throw std::runtime_error(std::string(e.what()) + " (what was complete is kept in " + path + ")");
  }
}

}  // namespace peat::train::detail
