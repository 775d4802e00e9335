// SPDX-License-Identifier: MIT
#pragma once
// The home of one result kind, check-bits results in a session: writer, reader, and the merge of a
// sharded check-bits campaign.
//
// A result is a SAVE result record (kind "save_check_bits"): its counts as scalars, per-layer and
// per-bit counts as arrays, and labels naming the campaign. `campaign` is the canonical settings
// text ("batch=64;tau=1e-05;..."), `campaign_id` its CRC-32, `shard` "INDEX/COUNT". Every count
// is a sum over flips, so shards merge by adding: the merged result equals the one-process run.
#include <string>
#include <vector>

#include "core/save/check_bits.h"
#include "core/store/session.h"

namespace peat::save {

struct CheckBitsCampaign {
  std::string model, weights;
  std::string settings;  // the canonical settings text; shards of one campaign share it
  int shardIndex = 0, shardCount = 1;
  std::string id() const;  // 8 hex digits: CRC-32 of model, weights and settings
};

struct StoredCheckBits {
  CheckBitsCampaign campaign;
  int64_t batch = 0;
  double tau = 0;
  CheckBitsResult result;
};

// Stores `s` as SAVE result `id`, with the shard label `shard` ("INDEX/COUNT" or "merged COUNT").
void writeCheckBits(store::SessionWriter& w, const std::string& id, const StoredCheckBits& s, const std::string& shard);
// Throws SaveError when the record is not a check-bits result or is inconsistent.
StoredCheckBits checkBitsFromRecord(const store::StoredRecord& record, const std::string& where);

// The check-bits shard results a session holds (those with a shard label), with their ids.
std::vector<std::pair<std::string, StoredCheckBits>> checkBitsShardsIn(const std::string& session);

// Checks the shards belong to one campaign (same model, weights, settings and shard count), that
// each of 0..COUNT-1 is there exactly once, then adds them up. Throws SaveError naming the file
// and the problem; nothing is written then. With `output`, stores the merged result there (as
// shard "merged COUNT") and returns its id in `storedAs`.
StoredCheckBits mergeCheckBitsShards(const std::vector<std::string>& files, const std::string& output,
                                     const store::Provenance& provenance, std::string* storedAs = nullptr);

}  // namespace peat::save
