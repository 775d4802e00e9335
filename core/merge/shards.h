// SPDX-License-Identifier: MIT
#pragma once
// The one entry point that merges shards, of any sharded result kind. Each kind keeps its combiner
// in its home (check-bits: core/save/check_bits_shards, SAVE campaigns: core/save/campaign_record,
// playback and runtime-FI sweeps: core/store/run_records); all of them first check the shard set
// with store::checkShardSet (core/store/shard_set.h) (one campaign by its CampaignKey, one count, each index once) and write
// nothing unless every check passes. Here the kind is recognised from what the files hold, the
// same in every file, and never guessed.
#include <string>
#include <vector>

#include "core/save/check_bits_record.h"
#include "core/store/session.h"

namespace peat::merge {

enum class ShardKind { CheckBits, Playback, RuntimeFiSweep, SaveCampaign };
const char* kindName(ShardKind kind);  // "check-bits", "playback", "runtime-FI sweep", "SAVE campaign"

// The kind of shard `file` holds; throws std::runtime_error naming the file when it holds none.
ShardKind shardKindOf(const std::string& file);

struct MergeResult {
  ShardKind kind = ShardKind::CheckBits;
  int shards = 0;
  std::string summary;              // one line for people: what was merged, into what
  save::StoredCheckBits checkBits;  // the merged counts (check-bits only)
};

// Merges `files` (all of one kind: a file of another kind is refused by name) into `output`. A
// SAVE campaign needs an output session; check-bits may have none (the counts are only printed).
MergeResult mergeShards(const std::vector<std::string>& files, const std::string& output,
                        const store::Provenance& provenance);

}  // namespace peat::merge
