// SPDX-License-Identifier: MIT
#pragma once
// The merge step of sharded SAVE campaigns: each `peat save campaign --shard i/N` writes its
// points into its own session; merging checks that the shards belong to one campaign (same model,
// weights and campaign settings, the same N), that every shard 0..N-1 is there exactly once, ran
// to completion and holds exactly its points, and then writes one run with every point in the
// campaign's order. Nothing is written unless every check passes.
#include <string>
#include <vector>

#include "core/store/session.h"

namespace peat::save {

struct MergeSummary {
  std::string run;       // the merged run's name in the output session
  int shards = 0;
  int64_t points = 0;
};

// Throws SaveError naming the file and the problem (a missing, duplicated, unfinished or foreign
// shard); the output session is then left as it was.
MergeSummary mergeCampaignShards(const std::vector<std::string>& shardFiles, const std::string& output,
                                 const store::Provenance& provenance);

}  // namespace peat::save
