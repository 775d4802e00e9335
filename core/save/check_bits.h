// SPDX-License-Identifier: MIT
#pragma once
// Ground truth for SAVE's bit classes: single-bit fault injection on a fixed evaluation batch.
// A flip is *vulnerable* when any top-1 prediction of the batch changes (or a logit becomes NaN or
// Inf), else *robust*. Every weight bit of every linear and conv layer is flipped (or a sample of
// them), plus a sample of activation bits, and the outcome is set against the prediction:
//  - weights: a bit is predicted robust when it is value-robust (its flip moves the weight by < tau);
//  - activations: the bit-property cache of the selection (value- or operator-robust).
//
// Every outcome is exact. For each flip and sample the change is first propagated as a sound bound
// on |new - old| through the rest of the network (with the fp32 rounding of both runs); when the
// bound proves that no prediction can change, the sample is settled. Otherwise the network is rerun
// from the flipped layer with the engine's own arithmetic (bit-identical to a full rerun), and the
// predictions are compared.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/save/selection.h"

namespace peat::save {

struct Confusion {
  // [predicted robust?][actually robust?]
  uint64_t robustRobust = 0, robustVulnerable = 0, protectedRobust = 0, protectedVulnerable = 0;
  uint64_t total() const { return robustRobust + robustVulnerable + protectedRobust + protectedVulnerable; }
  void add(bool predictedRobust, bool actuallyRobust);
  void merge(const Confusion& o);
};

struct CheckBitsOptions {
  int64_t batch = 64;              // evaluation images (the first of the test set)
  double tau = 1e-5;
  int64_t weightFlips = 0;         // 0: every bit of every weight; else a seeded sample of this many
  int64_t activationFlips = 20000; // sampled activation bits
  uint64_t seed = 1;
  unsigned threads = 0;            // 0: every core
  // This process's part of the campaign: flip k (weights first, then activations, in the seeded
  // order) belongs to shard k mod shardCount. The shards' counts add up to the whole campaign's.
  int shardIndex = 0, shardCount = 1;
};

struct CheckBitsResult {
  Confusion weights, activations;
  std::vector<std::pair<std::string, Confusion>> weightLayers;  // per linear/conv node
  std::array<uint64_t, 32> weightVulnerableByBit{}, weightFlipsByBit{};
  uint64_t settledByBound = 0, reruns = 0;  // (flip, sample) pairs
  // The first 20 flips (in campaign order) predicted robust that changed a prediction, with their
  // position k in the campaign: the same list however the work is split.
  std::vector<std::pair<uint64_t, std::string>> falseRobust;
  uint64_t flips = 0;  // flips this result covers
  double cleanAccuracy = 0;
  double seconds = 0;
};

constexpr std::size_t kFalseRobustKept = 20;
// Adds `more` to `into` and keeps the kFalseRobustKept first by campaign position.
void keepFirstFalseRobust(std::vector<std::pair<uint64_t, std::string>>& into,
                          std::vector<std::pair<uint64_t, std::string>> more);

// Exact outcomes of single-bit flips on a fixed batch (the engine of checkBits). Not thread-safe:
// give each thread its own.
class FlipOracle {
 public:
  // `images`: batch * input size normalised values.
  FlipOracle(const Graph& g, const float* images, int64_t batch);
  ~FlipOracle();
  FlipOracle(const FlipOracle&) = delete;
  FlipOracle& operator=(const FlipOracle&) = delete;

  // Does flipping `bit` of parameter `index` of a linear/conv node (its bias when `bias`) change a
  // top-1 prediction of the batch?
  bool weightFlip(int node, bool bias, uint32_t index, int bit);
  // Does flipping `bit` of element `element` of node `node`'s output, for image `sample`, change its prediction?
  bool activationFlip(int sample, int node, uint32_t element, int bit);

  int prediction(int sample) const;   // the clean top-1 class
  float value(int sample, int node, uint32_t element) const;
  uint64_t settledByBound() const;    // (flip, image) pairs a sound bound settled
  uint64_t reruns() const;            // (flip, image) pairs rerun exactly

 private:
  struct Impl;
  std::unique_ptr<Impl> d;
};

// `images`: batch * input size normalised values; `labels`: batch labels (for the clean accuracy only).
// `progress(done, total)` is called now and then from the calling thread.
CheckBitsResult checkBits(const Graph& g, const Selection& selection, const float* images, const int32_t* labels,
                          const CheckBitsOptions& options,
                          const std::function<void(uint64_t, uint64_t)>& progress = nullptr);

}  // namespace peat::save
