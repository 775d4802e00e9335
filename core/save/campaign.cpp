// SPDX-License-Identifier: MIT
#include "core/save/campaign.h"

#include <algorithm>
#include <chrono>

namespace peat::save {

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// A point's seed depends only on the campaign seed, the point and the batch: shards reproduce it.
uint64_t pointSeed(uint64_t seed, Scheme s, int64_t flips, int64_t batch) {
  uint64_t h = seed * 0x9E3779B97F4A7C15ull ^ (uint64_t(s) + 1) * 0xBF58476D1CE4E5B9ull;
  h ^= uint64_t(flips) * 0x94D049BB133111EBull + uint64_t(batch) * 0x2545F4914F6CDD1Dull;
  return h ^ (h >> 31);
}

}  // namespace

CampaignResult runCampaign(ProtectedRunner& runner, const float* images, const uint8_t* labels,
                           const CampaignOptions& o, int64_t inputSize,
                           const std::function<void(const CampaignResult&)>& point) {
  if (o.batch <= 0 || o.images < o.batch || o.images % o.batch)
    throw SaveError("the image count must be a positive multiple of the batch");
  if (o.shardCount <= 0 || o.shardIndex < 0 || o.shardIndex >= o.shardCount)
    throw SaveError("shard " + std::to_string(o.shardIndex) + "/" + std::to_string(o.shardCount) + " does not exist");
  for (int64_t f : o.flips)
    if (f < 0) throw SaveError("flip counts must not be negative");
  CampaignResult result;
  const int64_t batches = o.images / o.batch;

  // Fault-free: the reference predictions, each scheme's latency and its false positives.
  std::vector<int> clean;
  for (Scheme s : o.schemes) {
    SchemeLatency l;
    l.scheme = s;
    l.seconds = 1e30;
    std::vector<int> predictions;
    for (int r = 0; r < std::max(1, o.latencyRepeats); ++r) {
      RunStats stats;
      predictions.clear();
      const double start = now();
      for (int64_t b = 0; b < batches; ++b) {
        const std::vector<int> p = runner.infer(images + b * o.batch * inputSize, s, {}, 0, stats);
        predictions.insert(predictions.end(), p.begin(), p.end());
      }
      l.seconds = std::min(l.seconds, (now() - start) / double(batches));
      l.falsePositives = std::max(l.falsePositives, stats.detections);
    }
    int64_t correct = 0;
    for (int64_t i = 0; i < o.images; ++i) correct += predictions[std::size_t(i)] == labels[i];
    l.accuracy = double(correct) / double(o.images);
    if (s == Scheme::None || clean.empty()) clean = predictions;
    result.latency.push_back(l);
  }
  double base = result.latency.front().seconds;
  for (const SchemeLatency& l : result.latency)
    if (l.scheme == Scheme::None) base = l.seconds;
  for (SchemeLatency& l : result.latency) l.ratio = l.seconds / base;
  int64_t correct = 0;
  for (int64_t i = 0; i < o.images; ++i) correct += clean[std::size_t(i)] == labels[i];
  result.cleanAccuracy = double(correct) / double(o.images);

  int64_t index = 0;
  for (int64_t flips : o.flips)
    for (Scheme s : o.schemes) {
      if (index++ % o.shardCount != o.shardIndex) continue;
      CampaignPoint p;
      p.scheme = s;
      p.flips = flips;
      FaultModel m = o.faults;
      m.flips = flips;
      const double start = now();
      int64_t right = 0, changed = 0;
      for (int64_t b = 0; b < batches; ++b) {
        const std::vector<int> pred =
            runner.infer(images + b * o.batch * inputSize, s, m, pointSeed(o.seed, s, flips, b), p.stats);
        for (int64_t i = 0; i < o.batch; ++i) {
          const int64_t at = b * o.batch + i;
          right += pred[std::size_t(i)] == labels[at];
          changed += pred[std::size_t(i)] != clean[std::size_t(at)];
        }
      }
      p.accuracy = double(right) / double(o.images);
      p.errorRate = double(changed) / double(o.images);
      p.seconds = now() - start;
      result.points.push_back(p);
      if (point) point(result);
    }
  return result;
}

}  // namespace peat::save
