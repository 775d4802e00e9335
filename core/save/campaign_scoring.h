// SPDX-License-Identifier: MIT
#pragma once
// How a SAVE campaign is scored and summed: `--agreement` labels (the fault-free engine's own
// predictions, for models without trained labels) and SAVE's totals over a campaign's points.
#include <cstdint>
#include <vector>

#include "core/save/campaign.h"

namespace peat::save {

// Replaces labels[0, count) of the normalised `images` by the fault-free top-1 prediction, run in
// batches of `batch`. Throws std::invalid_argument naming --agreement for a sample whose logits are
// not finite.
void agreementLabels(const Graph& g, const float* images, int64_t count, int64_t batch, std::vector<int32_t>& labels);

// The run counts of SAVE's points (scheme save) added up, in the points' order.
RunStats saveTotals(const CampaignResult& r);

}  // namespace peat::save
