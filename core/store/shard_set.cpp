// SPDX-License-Identifier: MIT
#include "core/store/shard_set.h"

#include <map>

#include "core/util/campaign_key.h"

namespace peat::store {

std::vector<std::size_t> checkShardSet(const std::vector<ShardTag>& tags, const std::string& verb) {
  if (tags.empty()) throw SessionError("no shard files to merge");
  const ShardTag& first = tags.front();
  std::map<int, std::size_t> byIndex;
  for (std::size_t i = 0; i < tags.size(); ++i) {
    const ShardTag& t = tags[i];
    if (t.campaign != first.campaign)
      throw SessionError(t.file + ": " + verb + " another campaign than " + first.file + " (" +
                         util::CampaignKey::parse(first.campaign).differenceFrom(util::CampaignKey::parse(t.campaign)) + ")");
    if (t.count != first.count)
      throw SessionError(t.file + ": is a shard of " + std::to_string(t.count) + ", " + first.file + " one of " +
                         std::to_string(first.count));
    auto [it, fresh] = byIndex.emplace(t.index, i);
    if (!fresh)
      throw SessionError("shard " + std::to_string(t.index) + "/" + std::to_string(t.count) + " appears twice: " +
                         tags[it->second].file + " and " + t.file);
  }
  std::vector<std::size_t> order;
  for (int i = 0; i < first.count; ++i) {
    if (!byIndex.count(i))
      throw SessionError("shard " + std::to_string(i) + "/" + std::to_string(first.count) +
                         " is missing (run it with --shard " + std::to_string(i) + "/" + std::to_string(first.count) + ")");
    order.push_back(byIndex.at(i));
  }
  return order;
}

}  // namespace peat::store
