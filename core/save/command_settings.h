// SPDX-License-Identifier: MIT
#pragma once
// The `peat save` commands' options (core/save/save_commands.h) as the analysis's, check-bits' and
// campaign's settings: the text options parsed and checked (ranges, tiles, budgets, flips, schemes,
// fault model, shards), and the identity keys that make shards of one campaign merge. Throws
// std::invalid_argument naming the option for bad text (the CLI exits 2 with it).
#include <string>
#include <utility>
#include <vector>

#include "core/save/campaign.h"
#include "core/save/check_bits_record.h"
#include "core/save/model_source.h"
#include "core/save/save_commands.h"
#include "core/save/selection.h"

namespace peat::save {

// --shard "INDEX/COUNT" -> {INDEX, COUNT}.
std::pair<int, int> shardOption(const std::string& text);
// --input-range "LO,HI" -> {LO, HI}: the range of every input not named (0,1 where only named ones
// are given; the option given several times holds its values joined by newlines).
std::pair<double, double> inputRangeOption(const std::string& text);
// --input-range's values one by one: "LO,HI" and "NAME=LO,HI" (an ONNX input's own range).
std::vector<std::string> inputRangeEntries(const std::string& text);
// --budget "5%" (a share of the working set) or "2.5" / "2.5MiB" (MiB) into `so`; empty: as it is.
void applyBudget(const std::string& budget, SelectionOptions& so);

// The selection's settings, checked before the weights are read.
SelectionOptions selectionOptions(const cli::SaveAnalyzeOptions& o);
// Where the model comes from, as the options name it.
ModelSource modelSource(const cli::SaveAnalyzeOptions& o);
// The model's graph: a zoo model with the checkpoint's (or seeded random) weights, or an ONNX file
// with its own.
Graph modelGraph(const cli::SaveAnalyzeOptions& o);

// A check-bits campaign's identity: model, weights, the settings its counts depend on, its shard.
CheckBitsCampaign checkBitsCampaign(const cli::SaveCheckBitsOptions& o);
// A SAVE campaign's settings text (the run's "campaign" attribute): shards with equal text merge.
std::string campaignSettings(const cli::SaveCampaignOptions& o);
// The campaign's points and fault model, checked.
CampaignOptions campaignOptions(const cli::SaveCampaignOptions& o);

}  // namespace peat::save
