// SPDX-License-Identifier: MIT
#pragma once
// SAVE's campaign: test-set accuracy against the number of faults per inference, for each
// protection scheme, plus each scheme's fault-free latency relative to no protection. A campaign
// is a list of points (scheme, flips); a shard (index, count) runs the points whose position
// modulo count is its index, with seeds that depend only on the point, so shards merge into the
// result of one process.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/save/runtime.h"

namespace peat::save {

struct CampaignOptions {
  std::vector<int64_t> flips = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
  std::vector<Scheme> schemes = {Scheme::None, Scheme::Save, Scheme::Tmr, Scheme::Ranger, Scheme::Ecc};
  FaultModel faults;  // pattern and bits per fault; `flips` is set per point
  // false: every scheme receives `flips` faults per inference (the same flips per inference);
  // true: `flips` is the unprotected scheme's count, and each scheme receives its share of that
  // rate per word of its own unreliable memory (the same fault rate per byte)
  bool sameRatePerByte = false;
  int64_t images = 1000, batch = 100;
  uint64_t seed = 1;
  int shardIndex = 0, shardCount = 1;
  int latencyRepeats = 3;
};

struct CampaignPoint {
  Scheme scheme = Scheme::None;
  int64_t flips = 0;
  double accuracy = 0;   // top-1 on the test images
  double errorRate = 0;  // share of predictions that differ from the fault-free ones
  // predictions that differ from the fault-free ones in inferences where nothing was detected
  // (no SAVE check fired, no ECC double error): silent corruptions
  int64_t silent = 0;
  RunStats stats;
  double seconds = 0;
};

struct SchemeLatency {
  Scheme scheme = Scheme::None;
  double seconds = 0;      // fault-free, per batch (best of the repeats)
  double ratio = 1;        // against no protection
  // CPU time of the whole process per batch (every thread: the inference and the checks on the
  // second core), from the same best repeat, and against no protection's
  double cpuSeconds = 0, cpuRatio = 1;
  double accuracy = 0;     // fault-free
  uint64_t falsePositives = 0;  // detections on fault-free runs
};

struct CampaignResult {
  double cleanAccuracy = 0;
  std::vector<SchemeLatency> latency;
  std::vector<CampaignPoint> points;  // this shard's
};

// `images`: normalised test images, `labels` their classes; `point` is called after each point.
CampaignResult runCampaign(ProtectedRunner& runner, const float* images, const int32_t* labels,
                           const CampaignOptions& options, int64_t inputSize,
                           const std::function<void(const CampaignResult&)>& point = nullptr);

// SAVE's three verifiers of linear/conv outputs on the same faults: single-bit flips of type-2
// elements in unreliable memory of each op, on clean activations of one batch. A flip the range
// check catches is counted apart; for the rest, each verifier's detections and the harmful flips
// (the image's prediction changes) it misses, and the time of one check of the clean batch.
struct VerifierCoverage {
  int node = 0;
  std::string name;
  VerifierKind chosen = VerifierKind::Recompute;
  int64_t flips = 0, outOfRange = 0, harmful = 0;
  int64_t detected[3] = {0, 0, 0};       // by VerifierKind: recompute, abft, mixed
  int64_t harmfulMissed[3] = {0, 0, 0};
  int64_t falsePositives[3] = {0, 0, 0};  // on the clean batch
  double seconds[3] = {0, 0, 0};          // one check of the clean batch, best of three
};
std::vector<VerifierCoverage> compareVerifiers(ProtectedRunner& runner, const Graph& g, const float* images, int64_t batch,
                                               int64_t flipsPerOp, uint64_t seed);

}  // namespace peat::save
