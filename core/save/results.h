// SPDX-License-Identifier: MIT
#pragma once
// SAVE's stored results read back into plain structs, for the workbench's views and for tools:
// an analysis (per layer: bit-class counts and the tile map with its reliable-memory placement)
// and a campaign run (accuracy against faults per scheme, latency). Reading and reshaping only.
#include <cstdint>
#include <string>
#include <vector>

#include "core/store/session.h"

namespace peat::save {

struct StoredLayer {
  std::string name, op;
  int64_t elements = 0, type2 = 0;
  double robustBits = 0, rangingBits = 0, vulnerableBits = 0;  // counts over all the layer's bits
  double meanWidth = 0;
  int64_t tilesDown = 0, tilesAcross = 0, tileRows = 0, tileCols = 0;
  std::vector<float> tileShare;       // [tilesDown * tilesAcross]: share of type-2 values
  std::vector<uint8_t> tileReliable;  // 1: placed in reliable memory
};

struct StoredAnalysis {
  std::string id, model, mode, ranges;  // ranges: "sound" or "unsound (profiled)"
  double tau = 0, pixelLo = 0, pixelHi = 0;
  int64_t reliableTiles = 0, totalTiles = 0, type2 = 0, elements = 0;
  double reliableBytes = 0, budgetBytes = 0, seconds = 0;
  std::vector<StoredLayer> layers;
};

// The analyses in a session (ids of records of kind save_analysis).
std::vector<std::string> storedAnalyses(const store::SessionReader& reader);
// Throws SaveError when `id` is no SAVE analysis of this session.
StoredAnalysis loadAnalysis(const store::SessionReader& reader, const std::string& id);

struct CampaignSeries {
  std::string scheme;
  std::vector<double> flips, accuracy, errorRate;  // sorted by flips
  double latencyRatio = 0;                          // fault-free, against no protection (0: not measured)
};

struct StoredCampaign {
  std::string run, model, shard, settings;
  std::vector<CampaignSeries> series;  // in the order the schemes first appear
};

// Throws SaveError when `run` is no SAVE campaign run with a points table.
StoredCampaign loadCampaign(const store::SessionReader& reader, const std::string& run);

}  // namespace peat::save
