// SPDX-License-Identifier: MIT
// peat save merge: the shard files of one campaign (a SAVE campaign or check-bits) into a session.
#include <cstdio>

#include "app/peat/cmd_save.h"
#include "app/peat/commands.h"
#include "core/merge/shards.h"
#include "core/save/save_session.h"

namespace peat::cli {

int runSaveMerge(const SaveMergeOptions& o) {
  const merge::MergeResult m = merge::mergeShards(o.shards, o.session, save::saveProvenance("", 0, o.commandLine));
  if (m.kind == merge::ShardKind::CheckBits) {
    std::fprintf(stderr, "%s\n", m.summary.c_str());
    printCheckBits(m.checkBits, o.json);
  } else {
    std::printf("%s\n", m.summary.c_str());
  }
  return 0;
}

}  // namespace peat::cli
