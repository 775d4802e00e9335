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

// Whether `file` holds a playback run with a "shard" attribute (what mergePlaybackShards takes).
bool holdsPlaybackShard(const std::string& file);

// Throws SessionError naming the file and the problem.
PlaybackMergeSummary mergePlaybackShards(const std::vector<std::string>& files, const std::string& output);

}  // namespace peat::store
