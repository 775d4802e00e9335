// SPDX-License-Identifier: MIT
#pragma once
// Ground truth for SAVE's bit classes: single-bit fault injection. Every weight bit of every
// linear and conv layer is flipped on a fixed evaluation batch (or a sample of them: uniform, or
// stratified by layer and bit position), plus activation bits sampled over a whole image set (the
// test set), and each outcome is set against the selection's prediction (weightBitRobust for
// weights, the bit-property cache for activations) twice:
//  - top-1: a flip is vulnerable when any top-1 prediction it touches changes (or a logit becomes
//    NaN or Inf), else robust. The same yardstick for every criterion, so no criterion can look
//    better by promising less;
//  - the criterion's own promise: value (tau, rtol): the flipped value moves by less than
//    tau + rtol |value|, or the op
//    that reads it (a ReLU) gives the same output; output (epsilon): no logit of any image it
//    touches moves by more than epsilon.
// Both are counted over all flips, per layer and per bit position.
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

// One layer's (or bit position's) outcomes against top-1 and against the criterion's promise.
struct Judged {
  Confusion top1, promise;
  void merge(const Judged& o) {
    top1.merge(o.top1);
    promise.merge(o.promise);
  }
};

struct CheckBitsOptions {
  int64_t batch = 64;              // evaluation images for weight flips (the first of `images`)
  double tau = 1e-5;
  int64_t weightFlips = 0;         // 0: every bit of every weight; else a seeded sample of this many
  // > 0: a stratified sample instead: this many parameters (weights and biases) per linear/conv
  // layer and bit position (all of a layer's when it has fewer)
  int64_t weightsPerStratum = 0;
  int64_t activationFlips = 20000; // sampled activation bits
  // The images activation flips are drawn from (uniformly, with the node, element and bit): the
  // first activationImages of `images` (0: the evaluation batch)
  int64_t activationImages = 0;
  uint64_t seed = 1;
  unsigned threads = 0;            // 0: every core
  // This process's part of the campaign: flip k (weights first, then activations, in the seeded
  // order) belongs to shard k mod shardCount. The shards' counts add up to the whole campaign's.
  int shardIndex = 0, shardCount = 1;
};

struct CheckBitsResult {
  Confusion weights, activations;                // against top-1
  Confusion weightsPromise, activationsPromise;  // against the criterion's promise
  std::string criterion = "value";               // the selection's: "value" or "output"
  double epsilon = 0;                            // the output criterion's
  double rtol = 0;                               // the value criterion's relative tolerance
  // per linear/conv node (weights) and per node sampled (activations), in graph order
  std::vector<std::pair<std::string, Judged>> weightLayers, activationLayers;
  std::array<Judged, 32> weightBits{}, activationBits{};  // per bit position (31: the sign)
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

  // What a flip did: a top-1 prediction changed; some logit moved by more than epsilon (judged
  // only when epsilon >= 0; a non-finite logit counts as moved).
  struct Outcome {
    bool top1 = false, moved = false;
  };
  // Flipping `bit` of parameter `index` of a linear/conv node (its bias when `bias`), over the batch.
  Outcome weightFlip(int node, bool bias, uint32_t index, int bit, double epsilon);
  // Flipping `bit` of element `element` of node `node`'s output, for image `sample`.
  Outcome activationFlip(int sample, int node, uint32_t element, int bit, double epsilon);
  // Top-1 only: does the flip change a prediction?
  bool weightFlip(int node, bool bias, uint32_t index, int bit) { return weightFlip(node, bias, index, bit, -1).top1; }
  bool activationFlip(int sample, int node, uint32_t element, int bit) {
    return activationFlip(sample, node, element, bit, -1).top1;
  }

  int prediction(int sample) const;   // the clean top-1 class
  float value(int sample, int node, uint32_t element) const;
  uint64_t settledByBound() const;    // (flip, image) pairs a sound bound settled
  uint64_t reruns() const;            // (flip, image) pairs rerun exactly

 private:
  struct Impl;
  std::unique_ptr<Impl> d;
};

// `images`: max(batch, activationImages) * input size normalised values; `labels`: their labels (the
// batch's give the clean accuracy).
// `progress(done, total)` is called now and then from the calling thread.
CheckBitsResult checkBits(const Graph& g, const Selection& selection, const float* images, const int32_t* labels,
                          const CheckBitsOptions& options,
                          const std::function<void(uint64_t, uint64_t)>& progress = nullptr);

}  // namespace peat::save
