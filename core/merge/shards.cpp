// SPDX-License-Identifier: MIT
#include "core/merge/shards.h"

#include <sys/stat.h>

#include <optional>
#include <stdexcept>

#include "core/save/campaign_record.h"
#include "core/store/run_records.h"

namespace peat::merge {

const char* kindName(ShardKind kind) {
  switch (kind) {
    case ShardKind::CheckBits: return "check-bits";
    case ShardKind::Playback: return "playback";
    case ShardKind::RuntimeFiSweep: return "runtime-FI sweep";
    case ShardKind::SaveCampaign: return "SAVE campaign";
  }
  return "?";
}

namespace {
std::optional<ShardKind> kindIn(const std::string& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) throw std::runtime_error(file + ": no such file");
  if (!save::checkBitsShardsIn(file).empty()) return ShardKind::CheckBits;
  if (store::holdsPlaybackShard(file)) return ShardKind::Playback;
  if (store::holdsRuntimeFiShard(file)) return ShardKind::RuntimeFiSweep;
  if (save::holdsCampaignShard(file)) return ShardKind::SaveCampaign;
  return std::nullopt;
}
}  // namespace

ShardKind shardKindOf(const std::string& file) {
  if (const auto kind = kindIn(file)) return *kind;
  throw std::runtime_error(file + ": holds no shard to merge (no check-bits result, playback or runtime-FI shard, "
                                  "or SAVE campaign run)");
}

MergeResult mergeShards(const std::vector<std::string>& files, const std::string& output,
                        const store::Provenance& provenance) {
  if (files.empty()) throw std::invalid_argument("give the shard files to merge");
  MergeResult r;
  r.kind = shardKindOf(files.front());
  r.shards = int(files.size());
  for (std::size_t i = 1; i < files.size(); ++i) {
    const std::optional<ShardKind> other = kindIn(files[i]);
    if (!other) throw std::runtime_error(files[i] + ": holds no " + std::string(kindName(r.kind)) + " shard");
    if (*other != r.kind)
      throw std::runtime_error(files[i] + ": holds a " + kindName(*other) + " shard, " + files.front() + " a " +
                               kindName(r.kind) + " shard; merge each kind on its own");
  }
  char line[512];
  switch (r.kind) {
    case ShardKind::CheckBits: {
      std::string id;
      r.checkBits = save::mergeCheckBitsShards(files, output, provenance, &id);
      std::snprintf(line, sizeof line, "merged %zu check-bits shards (campaign %s, %llu flips)%s", files.size(),
                    r.checkBits.campaign.id().c_str(), (unsigned long long)r.checkBits.result.flips,
                    output.empty() ? "" : (" into SAVE result '" + id + "' of " + output).c_str());
      break;
    }
    case ShardKind::Playback: {
      const store::PlaybackMergeSummary m = store::mergePlaybackShards(files, output);
      std::snprintf(line, sizeof line, "merged %d playback shards, %lld calls and %lld injections, into run '%s' of %s",
                    m.shards, (long long)m.calls, (long long)m.injections, m.run.c_str(), output.c_str());
      break;
    }
    case ShardKind::RuntimeFiSweep: {
      const store::SweepMergeSummary m = store::mergeRuntimeFiShards(files, output);
      std::snprintf(line, sizeof line, "merged %d runtime-FI sweep shards, %lld points and %lld golden runs, into %s",
                    m.shards, (long long)m.points, (long long)m.goldenRuns, output.c_str());
      break;
    }
    case ShardKind::SaveCampaign: {
      if (output.empty()) throw std::invalid_argument("a SAVE campaign's shards merge into a session: give --session");
      const save::MergeSummary m = save::mergeCampaignShards(files, output, provenance);
      std::snprintf(line, sizeof line, "merged %d shards, %lld points, into run '%s' of %s", m.shards,
                    (long long)m.points, m.run.c_str(), output.c_str());
      break;
    }
  }
  r.summary = line;
  return r;
}

}  // namespace peat::merge
