// SPDX-License-Identifier: MIT
#pragma once
// The merge of a sharded playback (`peat playback --shard i/N --out SHARD.h5`): each shard holds
// one playback run with the per-call error rows and the injection log of its calls. Merging checks
// that the shards replay one campaign (the same recorded run of the same session, kernel, seed, op
// and call limit: the run's "campaign" attribute) and that each of 0..N-1 is there exactly once and
// complete, then writes one playback run whose rows are in recorded call order, as a one-process
// replay writes them. Nothing is written unless every check passes.
#include <string>
#include <vector>

#include "core/store/session.h"

namespace peat::store {

struct PlaybackMergeSummary {
  std::string run;  // the merged run's name in the output session
  int shards = 0;
  int64_t calls = 0, injections = 0;
};

// One shard file as the merges see it.
struct ShardTag {
  std::string file;
  int index = 0, count = 1;
  std::string campaign;  // the canonical settings text
};

// Checks that the shards are of one campaign (`verb` words the refusal: "replays", "belongs to"),
// with one count, and each index 0..count-1 exactly once; returns their positions in index order.
// Throws SessionError naming the file and the problem.
std::vector<std::size_t> checkShardSet(const std::vector<ShardTag>& tags, const std::string& verb);

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
