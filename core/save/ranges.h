// SPDX-License-Identifier: MIT
#pragma once
// Range analysis for SAVE: sound per-element intervals of every tensor of a graph, for every input
// in a declared box, *as the fp32 engine computes them* (each op's interval is widened by a bound on
// its fp32 rounding error, so the engine's values never fall outside).
//
// Modes:
//  - interval: plain interval arithmetic, one pass (fast, loose; widths grow with depth);
//  - symbolic: DeepPoly-style linear bounds. For every affine op's outputs, a lower and an upper
//    linear expression is carried back through the graph (affine ops exactly, ReLU and max-pool
//    by sound linear relaxations) to the input box, or to an earlier tensor after `depth` affine
//    ops, and then made concrete; the result is intersected with the interval result.
//    A node whose sampled elements gain under 1% over the intervals keeps its intervals (`probe`).
//  - Input splitting (`splits` > 0): the input box is bisected `splits` times along the input
//    element with the largest influence on the outputs (its width times the summed |gradient| of
//    the outputs at the part's centre), each part is analysed, and the parts' intervals are
//    merged by union. Sound, since the parts cover the box.
//  - Non-monotonic element-wise ops (GELU) are split at their turning point inside the transfer
//    function: the range is the union of the two monotone pieces' ranges.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/save/graph.h"

namespace peat::save {

inline constexpr double kU32 = 0x1p-24;     // fp32 unit roundoff
inline constexpr double kTiny32 = 0x1p-149; // fp32's smallest subnormal: the most a product loses to underflow
// gamma_n = n u / (1 - n u): the relative error bound of n fp32 roundings in a sum of products.
inline double gamma32(int64_t n) { return double(n) * kU32 / (1 - double(n) * kU32); }

enum class RangeMode { Interval, Symbolic };

struct RangeOptions {
  RangeMode mode = RangeMode::Symbolic;
  int depth = 0;            // affine ops to substitute back through before concretising; 0 = all the way
  int splits = 0;           // input bisections (2^splits parts at most)
  int64_t maxEntries = int64_t(1) << 22;  // coefficient-matrix entries per block of rows
  unsigned threads = 0;     // 0: every core
  // Skip the linear bounds of a node when they gain under 1% of the interval width on 16 sampled
  // elements (the node keeps its intervals: sound, only perhaps looser).
  bool probe = true;
};

struct NodeRange {
  std::vector<double> lo, hi;  // one sample's elements
};

// The largest |value| element i of a range can take.
inline double magnitude(const NodeRange& r, std::size_t i) { return std::max(std::fabs(r.lo[i]), std::fabs(r.hi[i])); }

struct RangeResult {
  std::vector<NodeRange> nodes;
  double seconds = 0;
};

// The model input box, from a declared range of raw pixels (e.g. [0, 1]) through the graph's
// normalisation; rejects lo > hi and NaN.
NodeRange inputBox(const Graph& g, double pixelLo, double pixelHi);

// A bound on |fp32 result - exact result| for each output element of node `index` (zero for exact
// ops), given ranges of its inputs (a point range gives the bound for one actual sample).
std::vector<double> roundingRadius(const Graph& g, int index, const std::vector<NodeRange>& ranges);

RangeResult analyzeRanges(const Graph& g, const NodeRange& input, const RangeOptions& options = {});

// Empirical ranges: the min and max of each element over samples run through the engine. NOT SOUND:
// for comparison (tightness) and Ranger-style clipping only.
std::vector<NodeRange> profiledRanges(const Graph& g, const float* inputs, int64_t samples);

// Gradient ascent inside the box on one node's elements: for each element, the largest and
// smallest value that projected sign-gradient steps from a few starts find. A lower bound on the
// true range (what a sound analysis must contain), for judging tightness.
NodeRange ascentRanges(const Graph& g, int node, const NodeRange& input, int steps = 60, int starts = 3,
                       uint64_t seed = 1);

}  // namespace peat::save

namespace peat::save {

// Fashion-MNIST images as the trainer feeds them: (pixel / 255 - mean) / deviation, in fp32.
std::vector<float> normalisedImages(const Graph& g, const std::vector<uint8_t>& pixels);

// How tight an analysis is, per node: the mean element width, and the width of the union of all
// elements' ranges (the "logits in [lo, hi]"), for the analysis and for references.
struct Tightness {
  double meanWidth = 0, unionLo = 0, unionHi = 0;
};
Tightness tightnessOf(const NodeRange& r);
// Elements [offset, offset + size) alone (one of several outputs).
Tightness tightnessOf(const NodeRange& r, int64_t offset, int64_t size);

}  // namespace peat::save
