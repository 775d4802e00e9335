// SPDX-License-Identifier: MIT
#pragma once
// The home of one result kind, a SAVE campaign run (`peat save campaign`): its layout in the
// session (docs/session-format.md: a run of kind save_campaign with tables points, latency and
// verifiers), its writer, its reader for the views, and the merge of its shards.
//
// The merge: each `peat save campaign --shard i/N` writes its points into its own session; merging
// checks that the shards belong to one campaign (same model, weights and campaign settings, the
// same N), that every shard 0..N-1 is there exactly once, ran to completion and holds exactly its
// points, and then writes one run with every point in the campaign's order. Nothing is written
// unless every check passes.
#include <string>
#include <vector>

#include "core/save/campaign.h"
#include "core/save/runtime.h"
#include "core/store/session.h"

namespace peat::save {

// ---- writing

struct CampaignRunInfo {
  std::string model, weights, shard;  // shard: "INDEX/COUNT"
  std::string settings;               // the campaign's identity text ("flips=...;schemes=...;...")
};

// Begins the campaign's run under a free name ("save-campaign", "save-campaign-2", ...) with its
// attributes and the verifier chosen per op; returns the name. The run stays open.
std::string beginCampaignRun(store::SessionWriter& writer, const CampaignRunInfo& info,
                             const std::vector<VerifierChoice>& verifiers);
// The points table (and, with `latency`, the latency table) of the open run, replacing an older
// one: called after every point, so a killed campaign keeps the points it finished.
void writeCampaignTables(store::SessionWriter& writer, const CampaignResult& result, bool latency);

// ---- reading


struct CampaignSeries {
  std::string scheme;
  std::vector<double> flips, accuracy, errorRate;  // sorted by flips
  double latencyRatio = 0;                          // fault-free, against no protection (0: not measured)
  double cpuRatio = 0;  // the same for CPU time, every thread (0: not measured, or a session from before it was)
};

struct StoredCampaign {
  std::string run, model, shard, settings;
  std::vector<CampaignSeries> series;  // in the order the schemes first appear
};

// Throws SaveError when `run` is no SAVE campaign run with a points table.
StoredCampaign loadCampaign(const store::SessionReader& reader, const std::string& run);

// ---- merging shards

struct MergeSummary {
  std::string run;       // the merged run's name in the output session
  int shards = 0;
  int64_t points = 0;
};

// Whether `file` holds a SAVE campaign run with a "shard" attribute (what the merge takes).
bool holdsCampaignShard(const std::string& file);

// Throws SaveError naming the file and the problem (a missing, duplicated, unfinished or foreign
// shard); the output session is then left as it was.
MergeSummary mergeCampaignShards(const std::vector<std::string>& shardFiles, const std::string& output,
                                 const store::Provenance& provenance);

}  // namespace peat::save
