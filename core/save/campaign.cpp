// SPDX-License-Identifier: MIT
#include "core/save/campaign.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>
#include <random>

#include "core/fp/format.h"

namespace peat::save {

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
// CPU time of this process, all threads.
double cpuNow() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// A point's seed depends only on the campaign seed, the point and the batch: shards reproduce it.
uint64_t pointSeed(uint64_t seed, Scheme s, int64_t flips, int64_t batch) {
  uint64_t h = seed * 0x9E3779B97F4A7C15ull ^ (uint64_t(s) + 1) * 0xBF58476D1CE4E5B9ull;
  h ^= uint64_t(flips) * 0x94D049BB133111EBull + uint64_t(batch) * 0x2545F4914F6CDD1Dull;
  return h ^ (h >> 31);
}

}  // namespace

CampaignResult runCampaign(ProtectedRunner& runner, const float* images, const int32_t* labels,
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

  // Fault-free: the reference predictions, each scheme's latency and its false positives. The
  // schemes take turns batch by batch (drift of a shared machine falls on all of them alike), each
  // batch is timed latencyRepeats times, and a scheme's time is the sum of its batches' fastest.
  std::vector<int> clean;
  const std::size_t schemes = o.schemes.size();
  FaultModel faultFree = o.faults;  // the recovery's settings (the checks' lag), no faults
  faultFree.flips = 0;
  std::vector<std::vector<int>> predictions(schemes);
  std::vector<double> wall(schemes, 0.0), cpuTime(schemes, 0.0);
  std::vector<uint64_t> falsePositives(schemes, 0);
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<double> bestWall(schemes, 1e300), bestCpu(schemes, 1e300);
    for (int r = 0; r < std::max(1, o.latencyRepeats); ++r)
      for (std::size_t k = 0; k < schemes; ++k) {
        RunStats stats;
        const double start = now(), cpuStart = cpuNow();
        const std::vector<int> p = runner.infer(images + b * o.batch * inputSize, o.schemes[k], faultFree, 0, stats);
        bestWall[k] = std::min(bestWall[k], now() - start);
        bestCpu[k] = std::min(bestCpu[k], cpuNow() - cpuStart);
        falsePositives[k] = std::max(falsePositives[k], uint64_t(stats.detections));
        if (r == 0) predictions[k].insert(predictions[k].end(), p.begin(), p.end());
      }
    for (std::size_t k = 0; k < schemes; ++k) wall[k] += bestWall[k], cpuTime[k] += bestCpu[k];
  }
  for (std::size_t k = 0; k < schemes; ++k) {
    SchemeLatency l;
    l.scheme = o.schemes[k];
    l.seconds = wall[k] / double(std::max<int64_t>(1, batches));
    l.cpuSeconds = cpuTime[k] / double(std::max<int64_t>(1, batches));
    l.falsePositives = falsePositives[k];
    int64_t correct = 0;
    for (int64_t i = 0; i < o.images; ++i) correct += predictions[k][std::size_t(i)] == labels[i];
    l.accuracy = double(correct) / double(o.images);
    if (l.scheme == Scheme::None || clean.empty()) clean = predictions[k];
    result.latency.push_back(l);
  }
  double base = result.latency.front().seconds, cpuBase = result.latency.front().cpuSeconds;
  for (const SchemeLatency& l : result.latency)
    if (l.scheme == Scheme::None) base = l.seconds, cpuBase = l.cpuSeconds;
  for (SchemeLatency& l : result.latency) {
    l.ratio = l.seconds / base;
    l.cpuRatio = cpuBase > 0 ? l.cpuSeconds / cpuBase : 0;
  }
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
      if (o.sameRatePerByte && s != Scheme::Tmr)  // TMR's three runs each hold the unprotected memory
        m.flips = int64_t(std::llround(double(flips) * double(runner.unreliableWords(s, m.target)) /
                                       double(std::max<int64_t>(1, runner.unreliableWords(Scheme::None, m.target)))));
      const double start = now();
      int64_t right = 0, changed = 0;
      for (int64_t b = 0; b < batches; ++b) {
        const uint64_t flagged = p.stats.detections + p.stats.eccFailures;
        const std::vector<int> pred =
            runner.infer(images + b * o.batch * inputSize, s, m, pointSeed(o.seed, s, flips, b), p.stats);
        const bool quiet = p.stats.detections + p.stats.eccFailures == flagged;
        for (int64_t i = 0; i < o.batch; ++i) {
          const int64_t at = b * o.batch + i;
          right += pred[std::size_t(i)] == labels[at];
          changed += pred[std::size_t(i)] != clean[std::size_t(at)];
          p.silent += quiet && pred[std::size_t(i)] != clean[std::size_t(at)];
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

std::vector<VerifierCoverage> compareVerifiers(ProtectedRunner& runner, const Graph& g, const float* images, int64_t batch,
                                               int64_t flipsPerOp, uint64_t seed) {
  if (batch <= 0 || flipsPerOp <= 0) throw SaveError("the batch and the flips per op must be positive");
  std::vector<std::vector<float>> act = runAll(g, images, batch);
  const int64_t classes = g.nodes[std::size_t(g.output)].size();
  std::vector<int> clean(static_cast<std::size_t>(batch));
  for (int64_t s = 0; s < batch; ++s)
    clean[std::size_t(s)] = topClassOf(g, act[std::size_t(g.output)].data() + s * classes);
  // The prediction of sample s after node v's output changed: the rest of the network, one sample.
  auto predictAfter = [&](int v, int64_t s) {
    std::map<int, std::vector<float>> fresh;
    auto input = [&](int i) -> const float* {
      auto it = fresh.find(i);
      return it != fresh.end() ? it->second.data() : act[std::size_t(i)].data() + s * g.nodes[std::size_t(i)].size();
    };
    for (int u = v + 1; u < int(g.nodes.size()); ++u) {
      std::vector<const float*> in;
      for (int i : g.nodes[std::size_t(u)].inputs) in.push_back(input(i));
      std::vector<float>& out = fresh[u];
      out.resize(std::size_t(g.nodes[std::size_t(u)].size()));
      runNode(g, u, in, 1, out.data());
    }
    return topClassOf(g, input(g.output));
  };
  const VerifierKind kinds[3] = {VerifierKind::Recompute, VerifierKind::Abft, VerifierKind::Mixed};
  std::vector<VerifierCoverage> out;
  std::mt19937_64 rng(seed);
  for (const VerifierChoice& choice : runner.verifierChoices()) {
    const int v = choice.node;
    const std::vector<int64_t>& type2 = runner.type2Unreliable(v);
    if (type2.empty()) continue;
    VerifierCoverage c;
    c.node = v;
    c.name = choice.name;
    c.chosen = choice.kind;
    RunStats stats;
    for (int k = 0; k < 3; ++k) {
      c.seconds[k] = 1e300;
      for (int r = 0; r < 3; ++r) {
        const double start = now();
        c.falsePositives[k] += runner.checkType2With(kinds[k], v, act, stats);
        c.seconds[k] = std::min(c.seconds[k], now() - start);
      }
    }
    const int64_t size = g.nodes[std::size_t(v)].size();
    for (int64_t f = 0; f < flipsPerOp; ++f) {
      const int64_t s = int64_t(rng() % uint64_t(batch)), e = type2[std::size_t(rng() % type2.size())];
      float& value = act[std::size_t(v)][std::size_t(s * size + e)];
      const float original = value;
      value = fp::floatOf(fp::bitsOf(original) ^ (uint32_t(1) << (rng() % 32)));
      ++c.flips;
      if (!runner.withinRange(v, e, value)) {
        ++c.outOfRange;
      } else {
        const bool harmful = predictAfter(v, s) != clean[std::size_t(s)];
        c.harmful += harmful;
        for (int k = 0; k < 3; ++k) {
          const bool caught = runner.checkType2With(kinds[k], v, act, stats);
          c.detected[k] += caught;
          c.harmfulMissed[k] += harmful && !caught;
        }
      }
      value = original;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace peat::save
