// SPDX-License-Identifier: MIT
#pragma once
// SAVE's offline selection: range analysis -> bit properties of every activation element ->
// tiles ranked by the recomputation of type-2 values they save per byte -> the tiles that go to reliable memory, within a
// budget that bounds the reliable memory in use at each step (liveness, in-place element-wise ops).
#include <array>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "core/save/bits.h"
#include "core/save/graph.h"
#include "core/save/ranges.h"
#include "core/save/sensitivity.h"

namespace peat::save {

struct SelectionOptions {
  RangeOptions ranges;
  double pixelLo = 0, pixelHi = 1;
  double tau = 1e-5;
  // The value criterion's relative tolerance (numpy's isclose): a flip is robust when it moves the
  // value by less than tau + rtol |value|. 0: the paper's absolute tau.
  double rtol = 0;
  // The robustness criterion: "value" (the paper's: a mantissa flip moves the value by less than
  // tau) or "output" (a flip cannot move any logit by more than epsilon, for any input in the box;
  // core/save/sensitivity.h).
  std::string criterion = "value";
  double epsilon = 0;
  int64_t tileRows = 16, tileCols = 16;
  int64_t budgetBytes = int64_t(6) << 20;  // reliable memory (an Orin safety island: 6 MiB)
  double budgetShare = 0;  // > 0: the budget is this share of the working set's peak instead (--budget 5%)
  // How tiles are placed within the budget: "ranked" (SAVE's: the most recomputation of type-2
  // values saved per reliable byte first), "random" (the same budget filled in a seeded random
  // order) or "none" (no reliable memory at all): the two baselines a campaign's latency is set against.
  std::string placement = "ranked";
  int64_t batch = 1;                       // samples per inference: a tile holds this many copies
  // Instead of the analysis: empirical ranges (min and max seen over data). UNSOUND: inputs unlike
  // the profile leave them. For comparison only; the selection is then marked unsound.
  const std::vector<NodeRange>* profiled = nullptr;
};

// One activation tensor (a node's output), seen as a matrix [channels, positions] ([1, features]
// for flat tensors), cut into tiles.
struct LayerSelection {
  int node = 0;
  std::string name, op;
  int64_t elements = 0, type2 = 0;
  uint64_t robustBits = 0, rangingBits = 0, vulnerableBits = 0;
  std::array<std::array<uint64_t, 3>, 32> perBit{};  // [bit][class]: elements whose bit is robust/ranging/vulnerable
  std::vector<uint32_t> robustMask, rangingMask;     // per element: the bit-property cache
  double meanWidth = 0;
  bool feedsRelu = false;
  bool inPlace = false;  // written over its input (same memory and placement)
  std::vector<int64_t> shape;  // the node's, one sample
  int64_t rows = 0, cols = 0, tilesDown = 0, tilesAcross = 0;
  std::vector<float> tileShare;         // type-2 share of each tile, row-major over tiles
  std::vector<float> tileVulnerableBits;  // mean vulnerable bits per value of each tile
  std::vector<uint8_t> tileReliable;    // 1: placed in reliable memory
};

// One tile as the placement saw it: it occupies `bytes` from step `first` to step `last` (its tensor's
// op to the last reader of the in-place chain that overwrites it), and placing it in reliable memory saves
// `work` multiply-adds of recomputation per image (its own type-2 values and those of the in-place
// outputs that share its memory). The placement problem: choose tiles of most work whose bytes in use
// at every step stay within the budget.
struct PlacementItem {
  int node = 0;
  int64_t tile = 0, first = 0, last = 0, bytes = 0;
  double work = 0;
  bool reliable = false;  // where this selection placed it
};

struct Selection {
  std::string model, mode;  // mode: "symbolic", "interval" or "profiled"
  bool sound = true;        // false for profiled ranges
  SelectionOptions options;
  RangeResult ranges;
  std::vector<LayerSelection> layers;  // every node but the input
  // tileBytes: a whole tile's (a tile at a tensor's edge holds and takes only its own elements).
  // reliableBytes: the peak of reliable memory in use at any step (tensors live from their op to
  // their last reader; in-place outputs share their input's memory)
  int64_t tileBytes = 0, reliableTiles = 0, reliableBytes = 0, totalTiles = 0;
  // The peak of all activation tiles in use at any step (the working set), and the budget placed
  // against (options.budgetBytes, or budgetShare of the working set).
  int64_t workingSetBytes = 0, budgetBytes = 0;
  int64_t type2Elements = 0, elements = 0;
  // SAVE's recomputation work per image (multiply-adds for the type-2 elements in unreliable
  // memory, a linear/conv element costing its taps): with this placement, with the same budget
  // filled in random order (mean of 5 shuffles), and with no reliable memory at all.
  double recomputeWork = 0, randomPlacementWork = 0, recomputeAllWork = 0;
  double rangeSeconds = 0, seconds = 0;
  std::shared_ptr<const Sensitivity> sensitivity;  // the output criterion's bounds (null for "value")
  // The tiles placed: each of a tensor owning its memory whose values, or its in-place outputs', hold
  // type-2 values, in the ranking's order (most work per byte first)
  std::vector<PlacementItem> placementItems;
};

// The placement problem as CSV (a `# budget_bytes=B steps=S` line, a `# model=NAME` line, then a
// header and one row per PlacementItem), for an exact solver to check the greedy placement against (tests/bench/save_placement_optimum.py).
void writePlacementProblem(const Selection& s, std::ostream& out);

// Whether flipping `bit` of weight (or bias) `index` of node `node`, holding `value`, is robust
// under the selection's criterion (value: the weight's own move below tau; output: the logits'
// move below epsilon through the layer's sensitivity).
bool weightBitRobust(const Selection& s, int node, std::size_t index, float value, int bit);
// The same for any change of that weight from `clean` to `now` (several bits at once).
bool weightChangeRobust(const Selection& s, int node, std::size_t index, float clean, float now);
// Whether all the changes of node `node`'s parameters (weights then biases) from `clean` to `now`
// together are robust: each on its own under the value criterion; their summed move of the logits
// under the output criterion.
bool weightChangesRobust(const Selection& s, int node, const std::vector<float>& clean, const std::vector<float>& now);

// The criterion in a few words, as the CLI and the workbench show it: "tau 1e-05",
// "tau 1e-05, rtol 0.03125" or "output criterion, epsilon 60".
std::string criterionText(const std::string& criterion, double tau, double rtol, double epsilon);

// Throws SaveError for an input range that is empty or has a NaN, a non-positive tile, tau or
// batch, and a budget smaller than one tile.
void checkOptions(const SelectionOptions& options);

// Throws SaveError for an input range that is empty or has a NaN, and for a budget smaller than one tile.
Selection selectBits(const Graph& g, const SelectionOptions& options);

}  // namespace peat::save
