// SPDX-License-Identifier: MIT
#pragma once
// The home of one result kind, a SAVE analysis (`peat save analyze`): its layout in the session
// (docs/session-format.md, SAVE results), written here and read back into plain structs for the
// workbench's views and for tools: per layer, bit-class counts and the tile map with its
// reliable-memory placement.
#include <cstdint>
#include <string>
#include <vector>

#include "core/save/layer_map.h"
#include "core/save/model_source.h"
#include "core/save/ranges.h"
#include "core/save/selection.h"
#include "core/store/session.h"

namespace peat::save {

struct StoredLayer {
  std::string name, op;
  int64_t elements = 0, type2 = 0;
  double robustBits = 0, rangingBits = 0, vulnerableBits = 0;  // counts over all the layer's bits
  double meanWidth = 0;
  int64_t tilesDown = 0, tilesAcross = 0, tileRows = 0, tileCols = 0;
  std::vector<float> tileShare;       // [tilesDown * tilesAcross]: share of type-2 values
  // [tilesDown * tilesAcross]: mean vulnerable bits per value; empty in sessions written before it
  std::vector<float> tileVulnerableBits;
  std::vector<uint8_t> tileReliable;  // 1: placed in reliable memory
};

struct StoredAnalysis {
  std::string id, model, mode, ranges;  // ranges: "sound" or "unsound (profiled)"
  double tau = 0, pixelLo = 0, pixelHi = 0;
  int64_t reliableTiles = 0, totalTiles = 0, type2 = 0, elements = 0;
  double reliableBytes = 0, budgetBytes = 0, seconds = 0;
  std::string criterion;  // "value" or "output" ("value" in sessions written before criteria)
  double epsilon = 0;
  double rtol = 0;  // the value criterion's relative tolerance (0: absolute tau only)
  // The working set's peak and the recomputation work per image (0 in older sessions): with this
  // placement, with the budget filled in random order, with no reliable memory.
  double workingSetBytes = 0, recomputeWork = 0, randomPlacementWork = 0, recomputeAllWork = 0;
  std::vector<StoredLayer> layers;
  // Where the network came from, as stored (sessions written before this kept only the weights'
  // path as it was given: then run "train" and its last checkpoint).
  ModelSource source;
};

// With --tightness: the ranges against estimates from elsewhere (the test images seen, per node;
// gradient ascent and plain intervals at the output).
struct TightnessReference {
  std::vector<Tightness> test;  // per node
  Tightness ascent, interval;   // the output node
};

// Writes the analysis as "<id>" (the summary) and "<id>.<node>" (one record per layer), the layers
// of at most `packUpTo` elements per sample together as rows of one record "<id>.packed-layers"
// (docs/session-format.md; HDF5 takes about 1 ms per record). `source`: where the network came from
// (stored, so that it can be rebuilt: loadAnalysis).
inline constexpr int64_t kPackUpTo = 4096;
void writeAnalysis(store::SessionWriter& writer, const std::string& id, const Selection& selection,
                   const ModelSource& source, const TightnessReference* reference = nullptr,
                   int64_t packUpTo = kPackUpTo);

// The analyses in a session (ids of records of kind save_analysis).
std::vector<std::string> storedAnalyses(const store::SessionReader& reader);
// Throws SaveError when `id` is no SAVE analysis of this session.
StoredAnalysis loadAnalysis(const store::SessionReader& reader, const std::string& id);

// Reads one layer of an analysis per element (its ranges, bit classes and tiles, laid out by the
// layer's shape). Throws SaveError naming what is missing or malformed, including a session written
// before layers stored their shape.
LayerMap loadLayerMap(const store::SessionReader& reader, const std::string& analysis, const std::string& layer);
// Every layer's map, in the analysis' order (the summary and a packed record read once).
std::vector<LayerMap> loadLayerMaps(const store::SessionReader& reader, const std::string& analysis);

}  // namespace peat::save
