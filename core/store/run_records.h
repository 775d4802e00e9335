// SPDX-License-Identifier: MIT
#pragma once
// The home of two result kinds, playback runs and runtime-FI runs (and sweeps): the layout of their
// tables (call_errors, injections; the curve is in curves.h), built here for the profiler's writers,
// and the merges of their shards.
//
// The merge of a sharded playback (`peat playback --shard i/N --out SHARD.h5`): each shard holds
// one playback run with the per-call error rows and the injection log of its calls. Merging checks
// that the shards replay one campaign (the same recorded run of the same session, kernel, seed, op
// and call limit: the run's "campaign" attribute) and that each of 0..N-1 is there exactly once and
// complete, then writes one playback run whose rows are in recorded call order, as a one-process
// replay writes them. Nothing is written unless every check passes.
#include <string>
#include <vector>

#include "core/analyzer/error_summary.h"
#include "core/store/session.h"
#include "core/store/shard_set.h"
#include "core/store/table.h"

namespace peat::store {

// ---- the tables of a playback or runtime-FI run (docs/session-format.md)

// call_errors: one row per replayed or substituted call, its identity, its outcome and its error
// numbers. The outcome is "ok", or how a user kernel failed the call in its kernel host
// ("crash:SIGSEGV", "crash:SIGABRT", "hang", "out_of_bounds", "exit:N"); a failed call's error
// numbers are NaN and it has no stored output. Tables written before the column: every row "ok".
TableBuilder callErrorTable();
void addCallError(TableBuilder& table, const CallId& id, const std::string& variant, const analyzer::ErrorSummary& e);
void addFailedCall(TableBuilder& table, const CallId& id, const std::string& variant, const std::string& outcome);

// injections: the ground truth of fault kernels, one row per injected fault.
struct InjectionRow {
  std::string call, target;  // target: "output", "input", "weight"
  uint64_t index = 0;        // flat element index in that tensor
  int bit = -1;              // -1: not a bit fault (zero, random value, NaN, Inf)
  double oldValue = 0, newValue = 0;
};
TableBuilder injectionTable();
void addInjection(TableBuilder& table, const InjectionRow& row);

// ---- merging shards

struct PlaybackMergeSummary {
  std::string run;  // the merged run's name in the output session
  int shards = 0;
  int64_t calls = 0, injections = 0;
};

// Whether `file` holds a playback run with a "shard" attribute (what mergePlaybackShards takes).
bool holdsPlaybackShard(const std::string& file);

// Throws SessionError naming the file and the problem.
PlaybackMergeSummary mergePlaybackShards(const std::vector<std::string>& files, const std::string& output);

// A runtime-FI sweep (`peat runtime-fi --every LIST --seeds LIST --shard i/N -o SHARD.h5`): each
// shard holds the FI runs of its points and the golden run of each seed it touched. Merging checks
// the shards as above, that every point of the sweep is there once and complete, and that a golden
// run computed by several shards is the same in each (training is bit-identical for a seed), then
// copies the runs into `output`; refused, before writing, if `output` has a run of the same name.
struct SweepMergeSummary {
  int shards = 0;
  int64_t points = 0, goldenRuns = 0;
};
bool holdsRuntimeFiShard(const std::string& file);
SweepMergeSummary mergeRuntimeFiShards(const std::vector<std::string>& files, const std::string& output);

}  // namespace peat::store
