// SPDX-License-Identifier: MIT
#pragma once
// The check every merge of shards makes first (core/merge/shards.h): the shards are of one campaign
// (by its CampaignKey text), with one count, and each index 0..count-1 is there exactly once.
#include <cstddef>
#include <string>
#include <vector>

#include "core/store/session.h"

namespace peat::store {

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

}  // namespace peat::store
