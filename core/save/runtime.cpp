// SPDX-License-Identifier: MIT
#include "core/save/runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>
#include <limits>
#include <map>
#include <random>

#include "core/fp/format.h"

namespace peat::save {

const char* schemeName(Scheme s) {
  switch (s) {
    case Scheme::None: return "none";
    case Scheme::Save: return "save";
    case Scheme::Tmr: return "tmr";
    case Scheme::Ranger: return "ranger";
    case Scheme::Ecc: return "ecc";
  }
  return "?";
}

Scheme schemeFromName(const std::string& name) {
  for (Scheme s : {Scheme::None, Scheme::Save, Scheme::Tmr, Scheme::Ranger, Scheme::Ecc})
    if (name == schemeName(s)) return s;
  throw SaveError("unknown protection scheme '" + name + "' (schemes: none, save, tmr, ranger, ecc)");
}

RunStats& RunStats::operator+=(const RunStats& o) {
  faults += o.faults;
  detections += o.detections;
  weightRepairs += o.weightRepairs;
  weightQuietRepairs += o.weightQuietRepairs;
  rangeViolations += o.rangeViolations;
  recomputeMismatches += o.recomputeMismatches;
  recoveries += o.recoveries;
  recomputed += o.recomputed;
  checksumMismatches += o.checksumMismatches;
  checksums += o.checksums;
  eccCorrected += o.eccCorrected;
  eccUncorrectable += o.eccUncorrectable;
  eccFailures += o.eccFailures;
  eccMissed += o.eccMissed;
  rerunSteps += o.rerunSteps;
  channelReruns += o.channelReruns;
  channelRerunShare += o.channelRerunShare;
  elementRepairs += o.elementRepairs;
  elementRepairShare += o.elementRepairShare;
  rerunFaults += o.rerunFaults;
  unrecovered += o.unrecovered;
  return *this;
}

VerifierPolicy verifierPolicyFromName(const std::string& name) {
  if (name == "auto") return VerifierPolicy::Auto;
  if (name == "recompute") return VerifierPolicy::Recompute;
  if (name == "abft") return VerifierPolicy::Abft;
  if (name == "mixed") return VerifierPolicy::Mixed;
  throw SaveError("unknown verifier '" + name + "' (verifiers: auto, recompute, abft, mixed)");
}

FaultPattern patternFromName(const std::string& name) {
  if (name == "random") return FaultPattern::Random;
  if (name == "consecutive") return FaultPattern::Consecutive;
  if (name == "region") return FaultPattern::Region;
  if (name == "adjacent") return FaultPattern::Adjacent;
  if (name == "burst") return FaultPattern::Burst;
  throw SaveError("unknown fault pattern '" + name + "' (patterns: random, consecutive, region, adjacent, burst)");
}

FaultTarget targetFromName(const std::string& name) {
  if (name == "both") return FaultTarget::Both;
  if (name == "weights") return FaultTarget::Weights;
  if (name == "activations") return FaultTarget::Activations;
  throw SaveError("unknown fault target '" + name + "' (targets: both, weights, activations)");
}

// One long-lived thread that runs the verifications of a run in order, behind the inference.
class ProtectedRunner::Verifier {
 public:
  Verifier() : thread_([this] { loop(); }) {}
  ~Verifier() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    posted_.notify_all();
    thread_.join();
  }
  void post(int node, std::function<bool()> job) {
    std::lock_guard<std::mutex> lock(m_);
    queue_.emplace_back(node, std::move(job));
    posted_.notify_all();
  }
  // Waits for every posted job; the nodes whose check found a fault, in order.
  std::vector<int> drain() { return waitUntilAtMost(0); }
  // Waits until at most `jobs` posted jobs are unfinished; the nodes whose check found a fault since
  // the last call, in order.
  std::vector<int> waitUntilAtMost(std::size_t jobs) {
    std::unique_lock<std::mutex> lock(m_);
    finished_.wait(lock, [&] { return queue_.size() + (busy_ ? 1 : 0) <= jobs; });
    std::vector<int> out;
    out.swap(detected_);
    return out;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(m_);
    while (true) {
      posted_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      auto [node, job] = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      const bool bad = job();
      lock.lock();
      busy_ = false;
      if (bad) detected_.push_back(node);
      finished_.notify_all();
    }
  }
  std::mutex m_;
  std::condition_variable posted_, finished_;
  std::deque<std::pair<int, std::function<bool()>>> queue_;
  std::vector<int> detected_;
  bool busy_ = false, stop_ = false;
  std::thread thread_;
};

namespace {

bool hasWeights(const Node& n) { return !n.weight.empty() || !n.bias.empty(); }

using fp::bitsOf;

void flip(float& v, uint32_t mask) { v = fp::floatOf(bitsOf(v) ^ mask); }

}  // namespace

namespace {

// Taps of a linear or conv node: its GEMM's inner dimension.
int64_t tapsOf(const Node& n) {
  return int64_t(n.weight.size()) / (n.op == Op::Linear ? n.features() : n.shape[0]);
}

// A graph of two nodes: node n's input, then n with only output channels (features) `channels`
// (a linear or an ungrouped conv op). Each output sums its bias, then its taps in order, as the
// whole op does: the slice's values are the whole op's bit for bit.
Graph channelSlice(const Graph& g, const Node& n, const std::vector<int64_t>& channels) {
  Graph slice;
  slice.model = n.name + ".slice";
  Node in;  // only the input's shape: the op reads nothing else of it
  in.name = g.nodes[std::size_t(n.inputs[0])].name;
  in.shape = g.nodes[std::size_t(n.inputs[0])].shape;
  slice.nodes.push_back(std::move(in));
  Node part = n;
  part.inputs = {0};
  part.shape[n.op == Op::Conv2d ? 0 : n.shape.size() - 1] = int64_t(channels.size());
  const std::size_t taps = std::size_t(tapsOf(n));
  part.weight.clear();
  part.bias.clear();
  for (int64_t c : channels) {
    part.weight.insert(part.weight.end(), n.weight.begin() + std::ptrdiff_t(std::size_t(c) * taps),
                       n.weight.begin() + std::ptrdiff_t(std::size_t(c + 1) * taps));
    if (!n.bias.empty()) part.bias.push_back(n.bias[std::size_t(c)]);
  }
  slice.nodes.push_back(std::move(part));
  slice.output = 1;
  return slice;
}

// Output channels of a linear or conv node, and the channel of one sample's element.
int64_t channelCount(const Node& n) { return n.op == Op::Linear ? n.features() : n.shape[0]; }
// One sample's element of such a node is (outer, channel, inner): conv [channels, positions] has
// outer 1; linear [rows, features] has inner 1. Element = (outer * channels + channel) * inner + inner index.
struct ChannelLayout {
  int64_t outer, inner;
};
ChannelLayout channelLayout(const Node& n) {
  return n.op == Op::Linear ? ChannelLayout{n.rows(), 1} : ChannelLayout{1, n.size() / n.shape[0]};
}
int64_t channelOf(const Node& n, int64_t element) {
  return n.op == Op::Linear ? element % n.features() : element / (n.size() / n.shape[0]);
}

}  // namespace

ProtectedRunner::ProtectedRunner(const Graph& g, const Selection& selection, std::vector<NodeRange> profiled,
                                 int64_t batch, VerifierPolicy policy)
    : g_(g), sel_(selection), profiled_(std::move(profiled)), batch_(batch), work_(g) {
  if (batch <= 0) throw SaveError("the batch must hold at least one image");
  if (selection.layers.size() + 1 != g.nodes.size()) throw SaveError("the selection belongs to another graph");
  weightOffset_.assign(g.nodes.size() + 1, 0);
  for (std::size_t v = 0; v < g.nodes.size(); ++v)
    weightOffset_[v + 1] = weightOffset_[v] + int64_t(g.nodes[v].weight.size() + g.nodes[v].bias.size());
  weightWords_ = weightOffset_.back();
  unreliableIndex_.resize(g.nodes.size());
  type2Unreliable_.resize(g.nodes.size());
  activationWords_.assign(g.nodes.size(), 0);
  for (std::size_t v = 1; v < g.nodes.size(); ++v) {
    const LayerSelection& l = selection.layers[v - 1];
    const int64_t size = g.nodes[v].size();
    activationWords_[v] = batch * size;
    for (int64_t i = 0; i < size; ++i) {  // a tile holds its elements for every image of the batch
      const int64_t tile = (i / l.cols / selection.options.tileRows) * l.tilesAcross + (i % l.cols) / selection.options.tileCols;
      if (l.tileReliable[std::size_t(tile)]) continue;
      unreliableIndex_[v].push_back(i);
      if (~(l.robustMask[std::size_t(i)] | l.rangingMask[std::size_t(i)]) != 0) type2Unreliable_[v].push_back(i);
    }
  }
  // What the recomputation compares: the non-robust bits of the type-2 elements in unreliable memory.
  compareMask_.resize(g.nodes.size());
  for (std::size_t v = 1; v < g.nodes.size(); ++v) {
    compareMask_[v].assign(std::size_t(g.nodes[v].size()), 0);
    for (int64_t i : type2Unreliable_[v]) compareMask_[v][std::size_t(i)] = ~selection.layers[v - 1].robustMask[std::size_t(i)];
  }
  // The placement's saving, as the check's work: a linear or conv layer whose type-2 elements in
  // unreliable memory lie in only some of its output channels recomputes just those channels. Every
  // output still sums its bias, then its taps in order, so the slice is the whole op bit for bit.
  slice_.resize(g.nodes.size());
  weightFaultChannels_.resize(g.nodes.size());
  failedElements_.resize(g.nodes.size());
  for (std::size_t v = 1; v < g.nodes.size(); ++v) {
    const Node& n = g.nodes[v];
    if (type2Unreliable_[v].empty() || !(n.op == Op::Linear || (n.op == Op::Conv2d && n.groups == 1))) continue;
    const int64_t channels = channelCount(n);
    std::vector<uint8_t> needed(std::size_t(channels), 0);
    for (int64_t i : type2Unreliable_[v]) needed[std::size_t(channelOf(n, i))] = 1;
    Slice& slice = slice_[v];
    for (int64_t c = 0; c < channels; ++c)
      if (needed[std::size_t(c)]) slice.channels.push_back(c);
    if (int64_t(slice.channels.size()) == channels)
      slice.channels.clear();
    else
      slice.graph = channelSlice(g, n, slice.channels);
  }
  // The ranges as fp32 bounds that contain them (for the range check).
  rangeLo_.resize(g.nodes.size());
  rangeHi_.resize(g.nodes.size());
  for (std::size_t v = 1; v < g.nodes.size(); ++v) {
    const NodeRange& r = selection.ranges.nodes[v];
    for (std::size_t i = 0; i < r.lo.size(); ++i) {
      float lo = float(r.lo[i]), hi = float(r.hi[i]);
      if (double(lo) > r.lo[i]) lo = std::nextafter(lo, -std::numeric_limits<float>::infinity());
      if (double(hi) < r.hi[i]) hi = std::nextafter(hi, std::numeric_limits<float>::infinity());
      rangeLo_[v].push_back(lo);
      rangeHi_[v].push_back(hi);
    }
  }
  // ABFT's column sums and its largest tolerance on the analysed ranges, per linear/conv node. A
  // grouped conv has one checksum per group: the sums run over the output channels of one group.
  kind_.assign(g.nodes.size(), VerifierKind::Recompute);
  mixed_.resize(g.nodes.size());
  abftSum_.resize(g.nodes.size());
  abftAbs_.resize(g.nodes.size());
  for (std::size_t v = 1; v < g.nodes.size(); ++v) {
    const Node& n = g.nodes[v];
    if (n.op != Op::Linear && n.op != Op::Conv2d) continue;
    const int64_t taps = tapsOf(n), channels = n.op == Op::Linear ? n.features() : n.shape[0];
    const int64_t sums = n.op == Op::Conv2d ? n.groups : 1, perSum = channels / sums;
    std::vector<double> ws(std::size_t(sums * taps), 0.0), wa(ws.size(), 0.0);  // sum_o W[o][t], sum_o |W[o][t]|
    std::vector<double> bs(std::size_t(sums), 0.0), ba(bs.size(), 0.0);       // sum_o b[o], sum_o |b[o]|
    for (int64_t o = 0; o < channels; ++o)
      for (int64_t t = 0; t < taps; ++t) {
        ws[std::size_t((o / perSum) * taps + t)] += n.weight[std::size_t(o * taps + t)];
        wa[std::size_t((o / perSum) * taps + t)] += std::fabs(n.weight[std::size_t(o * taps + t)]);
      }
    for (std::size_t o = 0; o < n.bias.size(); ++o) {
      bs[o / std::size_t(perSum)] += n.bias[o];
      ba[o / std::size_t(perSum)] += std::fabs(n.bias[o]);
    }
    // The largest |x| a tap can hold, from the input's analysed range.
    const NodeRange& in = selection.ranges.nodes[std::size_t(n.inputs[0])];
    double worst = 0;
    if (n.op == Op::Linear) {
      worst = ba[0];
      for (int64_t t = 0; t < taps; ++t) {
        double m = 0;
        for (int64_t r = 0; r < n.rows(); ++r)
          m = std::max(m, std::max(std::fabs(in.lo[std::size_t(r * taps + t)]), std::fabs(in.hi[std::size_t(r * taps + t)])));
        worst += wa[std::size_t(t)] * m;
      }
    } else {
      const Node& src = g.nodes[std::size_t(n.inputs[0])];
      const int64_t plane = src.shape[1] * src.shape[2], k2 = n.kernel * n.kernel, cg = groupChannels(n, src);
      for (int64_t gr = 0; gr < sums; ++gr) {
        double group = ba[std::size_t(gr)];
        for (int64_t t = 0; t < taps; ++t) {
          double m = 0;
          const int64_t c = gr * cg + t / k2;
          for (int64_t i = c * plane; i < (c + 1) * plane; ++i)
            m = std::max(m, std::max(std::fabs(in.lo[std::size_t(i)]), std::fabs(in.hi[std::size_t(i)])));
          group += wa[std::size_t(gr * taps + t)] * m;
        }
        worst = std::max(worst, group);
      }
    }
    VerifierChoice c;
    c.node = int(v);
    c.name = n.name;
    c.tolerance = gamma32(taps + 1) * worst * (1 + 1e-9);
    c.costRatio = 2.0 / double(perSum);  // a checksum and its tolerance per position and group, against every output
    auto mixed = std::make_unique<MixedChecker>(g, int(v), selection.ranges.nodes[std::size_t(n.inputs[0])]);
    c.mixedTolerance = mixed->worstTolerance();
    const double tau = selection.options.tau;
    const bool safe = c.tolerance <= tau, mixedSafe = c.mixedTolerance <= tau;
    // (auto takes abft only where it is cheaper than recomputing: not for a depthwise conv, whose
    // checksum per group is its one output channel again)
    if (policy == VerifierPolicy::Abft || (policy == VerifierPolicy::Auto && safe && c.costRatio < 1))
      c.kind = VerifierKind::Abft;
    else if (policy == VerifierPolicy::Mixed || (policy == VerifierPolicy::Auto && mixedSafe)) c.kind = VerifierKind::Mixed;
    char text[300];
    if (c.kind == VerifierKind::Abft)
      std::snprintf(text, sizeof text, "abft: %s (tolerance %.3g %s tau %.3g), %.1f%% of the recomputation's work",
                    policy == VerifierPolicy::Abft ? "forced" : "misses nothing a robust bit could not",
                    c.tolerance, safe ? "<=" : ">", tau, 100 * c.costRatio);
    else if (c.kind == VerifierKind::Mixed)
      std::snprintf(text, sizeof text, "mixed: %s (16-bit mantissa products, bound %.3g %s tau %.3g; abft tolerance %.3g)",
                    policy == VerifierPolicy::Mixed ? "forced" : "misses nothing a robust bit could not",
                    c.mixedTolerance, mixedSafe ? "<=" : ">", tau, c.tolerance);
    else
      std::snprintf(text, sizeof text, "recompute: %s (abft tolerance %.3g, mixed bound %.3g %s tau %.3g)",
                    policy == VerifierPolicy::Recompute ? "forced"
                    : safe ? "abft would cost more than recomputing (one output channel per group), the mixed check could miss a vulnerable change"
                           : "abft and the mixed check could miss a vulnerable change",
                    c.tolerance, c.mixedTolerance, mixedSafe ? "<=" : ">", tau);
    c.reason = text;
    kind_[v] = c.kind;
    mixed_[v] = std::move(mixed);
    choices_.push_back(std::move(c));
    // The checksum's two one-channel ops, run by the engine: sum_o W[o][t] and, rounded up, sum_o |W[o][t]|.
    for (int which = 0; which < 2; ++which) {
      Graph& mini = which == 0 ? abftSum_[v] : abftAbs_[v];
      mini.model = n.name + (which == 0 ? ".abft" : ".abft-bound");
      mini.nodes.push_back(g.nodes[std::size_t(n.inputs[0])]);
      mini.nodes[0].op = Op::Input;
      mini.nodes[0].inputs.clear();
      mini.nodes[0].weight.clear();
      mini.nodes[0].bias.clear();
      Node one = n;  // one output channel per group (a grouped conv keeps its groups)
      one.inputs = {0};
      one.shape[one.op == Op::Conv2d ? 0 : one.shape.size() - 1] = sums;
      const std::vector<double>& wsum = which == 0 ? ws : wa;
      const std::vector<double>& bsum = which == 0 ? bs : ba;
      auto toFloat = [&](double w) {
        float f = float(w);
        if (which == 1 && double(f) < w) f = std::nextafter(f, std::numeric_limits<float>::infinity());
        return f;
      };
      one.weight.resize(wsum.size());
      for (std::size_t t = 0; t < wsum.size(); ++t) one.weight[t] = toFloat(wsum[t]);
      one.bias.clear();
      if (!n.bias.empty() || one.op == Op::Linear)
        for (double b : bsum) one.bias.push_back(toFloat(b));
      mini.nodes.push_back(std::move(one));
      mini.output = 1;
    }
  }
}

ProtectedRunner::~ProtectedRunner() = default;


bool ProtectedRunner::checksum(int v, const std::vector<std::vector<float>>& act, RunStats& stats) {
  // For each image and output position p: sum_o y[o][p] against the same op with one output
  // channel, weights sum_o W[o][t] and bias sum_o b[o], run by the engine. With B the same op on
  // |x| with weights sum_o |W[o][t]| (rounded up) and bias sum_o |b[o]|: the fp32 outputs' sum is
  // within gamma B of the exact one, the fp32 checksum within (u + gamma + u gamma) B of its exact
  // value, and B's own fp32 value is at least (1 - gamma) times the exact one (all terms >= 0).
  const Node& n = g_.nodes[std::size_t(v)];
  const int64_t size = n.size(), taps = tapsOf(n);
  const int64_t channels = n.op == Op::Linear ? n.features() : n.shape[0], positions = size / channels;
  const int64_t sums = n.op == Op::Conv2d ? n.groups : 1, perSum = channels / sums;  // one checksum per group
  const Graph& sumGraph = abftSum_[std::size_t(v)];
  const Graph& absGraph = abftAbs_[std::size_t(v)];
  const std::vector<float>& x = act[std::size_t(n.inputs[0])];
  abftExpect_.resize(std::size_t(batch_ * sums * positions));
  abftBound_.resize(std::size_t(batch_ * sums * positions));
  abftAbsInput_.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) abftAbsInput_[i] = std::fabs(x[i]);
  runNode(sumGraph, 1, {x.data()}, batch_, abftExpect_.data());
  runNode(absGraph, 1, {abftAbsInput_.data()}, batch_, abftBound_.data());
  const double gm = gamma32(taps + 1), u = kU32;
  const double factor = (2 * gm + u + gm * u) / (1 - gm) * (1 + 1e-9);
  const double tiny = double((perSum + 1) * (taps + 1)) * 0x1p-149;
  const int64_t checks = sums * positions;  // the mini op's output: [group][position] (linear: [position])
  std::vector<double> got(static_cast<std::size_t>(checks)), gotAbs(static_cast<std::size_t>(checks));
  for (int64_t s = 0; s < batch_; ++s) {
    const float* y = act[std::size_t(v)].data() + s * size;
    std::fill(got.begin(), got.end(), 0.0);
    std::fill(gotAbs.begin(), gotAbs.end(), 0.0);
    for (int64_t o = 0; o < channels; ++o)
      for (int64_t p = 0; p < positions; ++p) {
        const double yo = y[n.op == Op::Linear ? p * channels + o : o * positions + p];
        const std::size_t at = std::size_t((o / perSum) * positions + p);
        got[at] += yo;
        gotAbs[at] += std::fabs(yo);
      }
    for (int64_t p = 0; p < checks; ++p) {
      const double bound = abftBound_[std::size_t(s * checks + p)];
      const double tolerance = factor * bound + tiny + 1e-12 * gotAbs[std::size_t(p)];
      ++stats.checksums;
      if (!(std::fabs(got[std::size_t(p)] - double(abftExpect_[std::size_t(s * checks + p)])) <= tolerance)) {
        ++stats.checksumMismatches;  // NaN fails too
        return true;
      }
    }
  }
  return false;
}

bool ProtectedRunner::withinRange(int node, int64_t element, float value) const {
  return value >= rangeLo_[std::size_t(node)][std::size_t(element)] && value <= rangeHi_[std::size_t(node)][std::size_t(element)];
}

int64_t ProtectedRunner::unreliableWords(Scheme scheme) const {
  int64_t words = weightWords_;
  for (std::size_t v = 1; v < g_.nodes.size(); ++v)
    words += scheme == Scheme::Save ? batch_ * int64_t(unreliableIndex_[v].size()) : activationWords_[v];
  return words;
}

int64_t ProtectedRunner::unreliableWords(Scheme scheme, FaultTarget target) const {
  const int64_t all = unreliableWords(scheme);
  return target == FaultTarget::Weights ? weightWords_ : target == FaultTarget::Activations ? all - weightWords_ : all;
}

bool ProtectedRunner::verify(int v, const std::vector<std::vector<float>>& act, RunStats& stats) {
  // Range check of the unreliable elements, and recomputation of the type-2 ones from the op's
  // (verified) inputs, compared outside their robust bits.
  const Node& n = g_.nodes[std::size_t(v)];
  const int64_t size = n.size();
  weightFaultChannels_[std::size_t(v)].clear();
  failedElements_[std::size_t(v)].clear();
  // The weights this layer used, against the host's clean copy (a DMA copy back on a GPU).
  // A change that the bit classes call robust (the selection's criterion: below tau, or unable to
  // move the logits by more than epsilon) is rewritten from the host's copy without a rerun; any
  // other one makes the layer rerun.
  if (hasWeights(n) && (work_.nodes[std::size_t(v)].weight != n.weight || work_.nodes[std::size_t(v)].bias != n.bias)) {
    const Node& used = work_.nodes[std::size_t(v)];
    std::vector<float> clean = n.weight, now = used.weight;
    clean.insert(clean.end(), n.bias.begin(), n.bias.end());
    now.insert(now.end(), used.bias.begin(), used.bias.end());
    if (!weightChangesRobust(sel_, v, clean, now)) {
      ++stats.weightRepairs;
      // the output channels whose weights (rows) or bias changed: the recovery may rerun only those
      std::vector<int64_t>& channels = weightFaultChannels_[std::size_t(v)];
      channels.clear();
      if (n.op == Op::Linear || (n.op == Op::Conv2d && n.groups == 1)) {
        const std::size_t taps = std::size_t(tapsOf(n)), count = n.weight.size() / taps;
        for (std::size_t c = 0; c < count; ++c) {
          bool changed = !n.bias.empty() && std::memcmp(&n.bias[c], &used.bias[c], 4) != 0;
          changed = changed || std::memcmp(&n.weight[c * taps], &used.weight[c * taps], taps * 4) != 0;
          if (changed) channels.push_back(int64_t(c));
        }
      }
      return true;
    }
    ++stats.weightQuietRepairs;
  }
  const std::vector<float>& x = act[std::size_t(v)];
  // Every element is checked, in one vectorisable pass per image: elements in reliable memory
  // cannot flip, and the ranges are sound, so they never fail.
  const float* lo = rangeLo_[std::size_t(v)].data();
  const float* hi = rangeHi_[std::size_t(v)].data();
  if (!unreliableIndex_[std::size_t(v)].empty())
    for (int64_t s = 0; s < batch_; ++s) {
      const float* xs = x.data() + s * size;
      int outside = 0;
      for (int64_t i = 0; i < size; ++i) outside |= !(xs[i] >= lo[i]) | !(xs[i] <= hi[i]);  // NaN fails
      if (outside) {
        ++stats.rangeViolations;
        std::vector<int64_t>& failed = failedElements_[std::size_t(v)];  // every value outside, for the repair
        for (int64_t t = s; t < batch_; ++t)
          for (int64_t i = 0; i < size; ++i)
            if (!(x[std::size_t(t * size + i)] >= lo[i]) || !(x[std::size_t(t * size + i)] <= hi[i])) failed.push_back(t * size + i);
        return true;
      }
    }
  return checkType2With(kind_[std::size_t(v)], v, act, stats);
}

bool ProtectedRunner::sliceMismatch(int v, const float* input, const std::vector<float>& x, RunStats& stats) {
  const Node& n = g_.nodes[std::size_t(v)];
  const Slice& slice = slice_[std::size_t(v)];
  const int64_t size = n.size(), channels = channelCount(n), k = int64_t(slice.channels.size());
  const auto [outer, inner] = channelLayout(n);
  std::vector<float>& again = again_;
  again.resize(std::size_t(batch_ * k * outer * inner));
  runNode(slice.graph, 1, {input}, batch_, again.data());
  const uint32_t* mask = compareMask_[std::size_t(v)].data();
  // Sample s's compared bits that differ, OR-ed; when `collect` (a compile-time flag, so the
  // fault-free pass stays branch-free), every such element is added to the failures too (ascending).
  auto compare = [&](int64_t s, auto collect) {
    uint32_t differ = 0;
    const float* mine = again.data() + s * k * outer * inner;
    const float* theirs = x.data() + s * size;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < k; ++j) {
        const int64_t full = (o * channels + slice.channels[std::size_t(j)]) * inner, part = (o * k + j) * inner;
        for (int64_t q = 0; q < inner; ++q) {
          const uint32_t d = (fp::bitsOf(mine[part + q]) ^ fp::bitsOf(theirs[full + q])) & mask[full + q];
          differ |= d;
          if constexpr (decltype(collect)::value)
            if (d) failedElements_[std::size_t(v)].push_back(s * size + full + q);
        }
      }
    return differ;
  };
  for (int64_t s = 0; s < batch_; ++s)
    if (compare(s, std::false_type{})) {
      ++stats.recomputeMismatches;
      for (int64_t t = s; t < batch_; ++t) compare(t, std::true_type{});  // for the repair
      return true;
    }
  return false;
}

bool ProtectedRunner::checkType2With(VerifierKind kind, int v, const std::vector<std::vector<float>>& act, RunStats& stats) {
  const Node& n = g_.nodes[std::size_t(v)];
  const int64_t size = n.size();
  const LayerSelection& l = sel_.layers[std::size_t(v - 1)];
  const std::vector<float>& x = act[std::size_t(v)];
  const std::vector<int64_t>& check = type2Unreliable_[std::size_t(v)];
  failedElements_[std::size_t(v)].clear();  // what this check finds, for the repair
  if (check.empty()) return false;
  if (kind != VerifierKind::Recompute && !mixed_[std::size_t(v)])
    throw SaveError("node '" + n.name + "' has only fp32 recomputation (abft and mixed checks need a linear or conv op)");
  if (kind == VerifierKind::Abft) return checksum(v, act, stats);
  stats.recomputed += uint64_t(batch_) * check.size();
  const bool whole = int64_t(check.size()) * 16 > size;  // the vectorised layer is cheaper
  if (kind == VerifierKind::Mixed) {
    MixedChecker* mixed = mixed_[std::size_t(v)].get();
    const float* input = act[std::size_t(n.inputs[0])].data();
    const bool bad = whole ? mixed->mismatch(input, x.data(), batch_, compareMask_[std::size_t(v)])
                           : mixed->mismatchAt(input, x.data(), batch_, check);
    stats.recomputeMismatches += bad;
    return bad;
  }
  std::vector<const float*> in;
  for (int i : n.inputs) in.push_back(act[std::size_t(i)].data());
  // Only some channels hold type-2 values in unreliable memory, and enough of them for the
  // vectorised op: recompute those channels.
  if (!slice_[std::size_t(v)].channels.empty() &&
      int64_t(check.size()) * 16 > int64_t(slice_[std::size_t(v)].channels.size()) * (size / channelCount(n)))
    return sliceMismatch(v, in[0], x, stats);
  std::vector<float>& again = again_;  // only the verifying thread uses it
  if (whole) {
    again.resize(x.size());
    runNode(g_, v, in, batch_, again.data());
  }
  if (whole) {  // one contiguous, vectorisable pass: the mask is zero where nothing is to be compared
    const uint32_t* mask = compareMask_[std::size_t(v)].data();
    for (int64_t s = 0; s < batch_; ++s) {
      uint32_t differ = 0;
      for (int64_t i = 0; i < size; ++i) {
        uint32_t a, b;
        std::memcpy(&a, &again[std::size_t(s * size + i)], 4);
        std::memcpy(&b, &x[std::size_t(s * size + i)], 4);
        differ |= (a ^ b) & mask[i];
      }
      if (differ) {
        ++stats.recomputeMismatches;
        std::vector<int64_t>& failed = failedElements_[std::size_t(v)];  // every changed value, for the repair
        for (int64_t t = s; t < batch_; ++t)
          for (int64_t i = 0; i < size; ++i)
            if ((fp::bitsOf(again[std::size_t(t * size + i)]) ^ fp::bitsOf(x[std::size_t(t * size + i)])) & mask[i])
              failed.push_back(t * size + i);
        return true;
      }
    }
    return false;
  }
  std::vector<const float*> sampleIn(in.size());
  for (int64_t s = 0; s < batch_; ++s) {
    for (std::size_t k = 0; k < in.size(); ++k) sampleIn[k] = in[k] + s * g_.nodes[std::size_t(n.inputs[k])].size();
    for (int64_t i : check) {
      const float value = elementOf(g_, v, sampleIn, i);
      if ((bitsOf(value) ^ bitsOf(x[std::size_t(s * size + i)])) & ~l.robustMask[std::size_t(i)])
        failedElements_[std::size_t(v)].push_back(s * size + i);  // every changed value, for the repair
    }
  }
  if (failedElements_[std::size_t(v)].empty()) return false;
  ++stats.recomputeMismatches;
  return true;
}

std::vector<ProtectedRunner::Fault> ProtectedRunner::drawFaults(Scheme scheme, const FaultModel& m, uint64_t seed) const {
  std::vector<Fault> out;
  if (m.flips <= 0) return out;
  // the targeted part of the unreliable space: [first, first + total)
  const uint64_t all = uint64_t(unreliableWords(scheme)), weights = uint64_t(weightWords_);
  const uint64_t first = m.target == FaultTarget::Activations ? weights : 0;
  const uint64_t total = m.target == FaultTarget::Weights ? weights : m.target == FaultTarget::Activations ? all - weights : all;
  if (total == 0) return out;
  std::mt19937_64 rng(seed);
  auto mask = [&] {
    if (m.pattern == FaultPattern::Adjacent) return uint32_t(3) << (rng() % 31);  // two neighbouring bits
    uint32_t bits = 0;
    const int want = std::clamp(m.bitsPerFault, 1, 32);
    while (__builtin_popcount(bits) < want) bits |= uint32_t(1) << (rng() % 32);
    return bits;
  };
  const uint64_t n = uint64_t(m.flips);
  if (m.pattern == FaultPattern::Random || m.pattern == FaultPattern::Adjacent) {
    for (uint64_t k = 0; k < n; ++k) out.push_back({first + rng() % total, mask()});
  } else if (m.pattern == FaultPattern::Consecutive) {  // virtually consecutive words
    const uint64_t start = total > n ? rng() % (total - n + 1) : 0;
    for (uint64_t k = 0; k < n; ++k) out.push_back({first + (start + k) % total, mask()});
  } else {  // a physically contiguous region (a burst: one tile) takes them all
    const int64_t length = m.pattern == FaultPattern::Burst ? 256 : m.regionWords;
    const uint64_t window = std::min<uint64_t>(total, uint64_t(std::max<int64_t>(1, length)));
    const uint64_t start = rng() % (total - window + 1);
    for (uint64_t k = 0; k < n; ++k) out.push_back({first + start + rng() % window, mask()});
  }
  return out;
}

ProtectedRunner::Place ProtectedRunner::locate(uint64_t word, Scheme scheme) const {
  Place p;
  if (word < uint64_t(weightWords_)) {
    p.weight = true;
    p.node = std::size_t(std::upper_bound(weightOffset_.begin(), weightOffset_.end(), int64_t(word)) - weightOffset_.begin() - 1);
    p.index = int64_t(word) - weightOffset_[p.node];
    return p;
  }
  int64_t rest = int64_t(word) - weightWords_;
  for (std::size_t v = 1; v < g_.nodes.size(); ++v) {
    const int64_t here = scheme == Scheme::Save ? batch_ * int64_t(unreliableIndex_[v].size()) : activationWords_[v];
    if (rest < here) {
      p.node = v;
      if (scheme == Scheme::Save) {
        const int64_t per = int64_t(unreliableIndex_[v].size());
        p.index = (rest / per) * g_.nodes[v].size() + unreliableIndex_[v][std::size_t(rest % per)];
      } else {
        p.index = rest;
      }
      return p;
    }
    rest -= here;
  }
  throw SaveError("internal: a fault outside the unreliable memory");
}

std::vector<int> ProtectedRunner::infer(const float* images, Scheme scheme, const FaultModel& faults, uint64_t seed,
                                        RunStats& stats) {
  if (scheme != Scheme::Tmr) return run(images, scheme, drawFaults(scheme, faults, seed), faults, seed, stats);
  std::vector<std::vector<int>> votes;
  for (uint64_t r = 0; r < 3; ++r) {
    const uint64_t own = seed * 3 + r + 1;
    votes.push_back(run(images, Scheme::None, drawFaults(Scheme::None, faults, own), faults, own, stats));
  }
  std::vector<int> out(static_cast<std::size_t>(batch_));
  for (std::size_t s = 0; s < out.size(); ++s)
    out[s] = votes[1][s] == votes[2][s] ? votes[1][s] : votes[0][s];  // two of three agree, else the first
  return out;
}

// SAVE's inference: each layer's check runs on the second core behind the inference, at most
// FaultModel::checkLag layers behind it (the inference waits when the checks fall further behind). On a
// detection at layer u the checks in flight finish, u's weights are rewritten from the host's
// copy, u is rerun from its inputs (which passed their checks) and checked again, and the inference
// goes on from u + 1, redoing the layers that ran after u (they read its bad output). Each rerun or
// redone step meets new faults at the same rate per layer step (Poisson(flips / N) per step, on
// the weights and tensors of that layer and those after it). After FaultModel::maxRecoveries
// reruns of one layer the inference keeps what the last one computed, counts as unrecovered, and
// goes on.
void ProtectedRunner::runSave(const std::function<void(std::size_t)>& step,
                              std::vector<std::vector<std::pair<int64_t, uint32_t>>>& activationFaults,
                              const std::function<bool(uint64_t, uint32_t, std::size_t)>& place, const FaultModel& model,
                              uint64_t seed, RunStats& stats) {
  if (!verifier_) verifier_ = std::make_unique<Verifier>();
  std::vector<std::vector<float>>& act = act_;
  RunStats verifyStats;  // written by the verifying thread only
  const std::size_t steps = g_.nodes.size() - 1;
  const std::size_t lag = std::size_t(std::max(1, model.checkLag));
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 77);
  // new faults for one redone step (or `share` of one), landing on the weights and tensors of layers >= from
  auto rerunFaults = [&](std::size_t from, double share) {
    ++stats.rerunSteps;
    if (!model.duringReruns || model.flips <= 0) return;
    std::poisson_distribution<int64_t> arrivals(double(model.flips) * share / double(steps));
    FaultModel more = model;
    more.flips = arrivals(rng);
    for (const Fault& f : drawFaults(Scheme::Save, more, rng())) stats.rerunFaults += place(f.word, f.mask, from);
  };
  // Rerun only output channels `channels` of layer u, after its weights are rewritten: the rest of
  // its output stays in memory as it is (with its faults), and new faults arrive for the share of
  // the layer's work this is (a rate per layer step's work).
  auto rerunChannels = [&](std::size_t u, const std::vector<int64_t>& channels) {
    const Node& n = g_.nodes[u];
    const int64_t size = n.size();
    const double share = double(channels.size()) / double(channelCount(n));
    ++stats.channelReruns;
    stats.channelRerunShare += share;
    std::vector<uint8_t> rewritten(std::size_t(channelCount(n)), 0);
    for (int64_t c : channels) rewritten[std::size_t(c)] = 1;
    std::vector<std::pair<int64_t, uint32_t>>& faults = activationFaults[u];
    faults.erase(std::remove_if(faults.begin(), faults.end(),
                                [&](const auto& f) { return rewritten[std::size_t(channelOf(n, f.first % size))] != 0; }),
                 faults.end());
    const std::size_t old = faults.size();
    rerunFaults(u, share);
    const Graph slice = channelSlice(work_, work_.nodes[u], channels);  // the weights as memory holds them now
    const int64_t k = int64_t(channels.size()), count = channelCount(n);
    const auto [outer, inner] = channelLayout(n);
    std::vector<float> part(std::size_t(batch_ * k * outer * inner));
    runNode(slice, 1, {act[std::size_t(n.inputs[0])].data()}, batch_, part.data());
    for (int64_t s = 0; s < batch_; ++s)
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < k; ++j)
          std::copy_n(part.data() + ((s * outer + o) * k + j) * inner, inner,
                      act[u].data() + s * size + (o * count + channels[std::size_t(j)]) * inner);
    for (std::size_t f = old; f < faults.size(); ++f) flip(act[u][std::size_t(faults[f].first)], faults[f].second);
  };
  // Recompute only the values of layer u that failed their check (outside their range, or changed
  // in a non-robust bit), from its checked inputs and its rewritten weights: every other value is in
  // reliable memory or passed its checks, which is all the bit classes ask of it. New faults arrive
  // for the share of the layer's values (over the batch) this recomputes.
  auto repairElements = [&](std::size_t u, const std::vector<int64_t>& elements) {
    const Node& n = g_.nodes[u];
    const int64_t size = n.size();
    const double share = double(elements.size()) / double(batch_ * size);
    ++stats.elementRepairs;
    stats.elementRepairShare += share;
    std::vector<std::pair<int64_t, uint32_t>>& faults = activationFaults[u];
    faults.erase(std::remove_if(faults.begin(), faults.end(),
                                [&](const auto& f) { return std::binary_search(elements.begin(), elements.end(), f.first); }),
                 faults.end());
    const std::size_t old = faults.size();
    rerunFaults(u, share);
    std::vector<const float*> in(n.inputs.size());
    for (int64_t e : elements) {
      const int64_t s = e / size;
      for (std::size_t k = 0; k < in.size(); ++k)
        in[k] = act[std::size_t(n.inputs[k])].data() + s * g_.nodes[std::size_t(n.inputs[k])].size();
      act[u][std::size_t(e)] = elementOf(work_, int(u), in, e % size);  // the weights as memory holds them now
    }
    for (std::size_t f = old; f < faults.size(); ++f) flip(act[u][std::size_t(faults[f].first)], faults[f].second);
  };
  bool gaveUp = false;  // a layer failed its check maxRecoveries times: the inference is unrecovered
  // rerun layer u until its check passes or the budget is spent: only the output channels whose
  // weights changed when the weights alone failed (a linear or ungrouped conv), only the values that
  // failed when the range check or the recomputation said which (under 1/16 of them), else the whole layer
  auto recover = [&](std::size_t u) {
    for (int attempt = 0;; ++attempt) {
      ++stats.recoveries;
      const std::vector<int64_t> channels = weightFaultChannels_[u], elements = failedElements_[u];
      work_.nodes[u].weight = g_.nodes[u].weight;
      work_.nodes[u].bias = g_.nodes[u].bias;
      if (!channels.empty() && int64_t(channels.size()) < channelCount(g_.nodes[u])) {
        rerunChannels(u, channels);
      } else if (channels.empty() && !elements.empty() && int64_t(elements.size()) * 16 <= batch_ * g_.nodes[u].size()) {
        repairElements(u, elements);  // fewer than 1/16 of the values: cheaper one by one than the vectorised layer
      } else {
        activationFaults[u].clear();  // the tensor is rewritten: the faults of its last write are gone
        rerunFaults(u, 1.0);
        step(u);
      }
      if (!verify(int(u), act, stats)) return;
      ++stats.detections;
      if (attempt + 1 >= model.maxRecoveries) {
        gaveUp = true;
        return;
      }
    }
  };
  // A layer with no weights and nothing in unreliable memory has nothing to check: no handoff.
  auto checked = [&](std::size_t w) { return hasWeights(g_.nodes[w]) || !unreliableIndex_[w].empty(); };
  std::size_t ran = 0;  // the furthest layer run so far: a layer at or below it is redone
  std::set<std::size_t> failed;  // layers whose check failed, not yet acted on
  for (std::size_t v = 1; v <= steps;) {
    if (v <= ran) {
      activationFaults[v].clear();  // rewritten: the faults of its last run are gone, new ones arrive
      rerunFaults(v, 1.0);
    }
    step(v);
    ran = std::max(ran, v);
    if (checked(v)) verifier_->post(int(v), [this, v, &act, &verifyStats] { return verify(int(v), act, verifyStats); });
    // The checks of layers up to `due` are finished (the checks run first in, first out, so at most
    // the ones posted for the layers after `due` may still run); a later check that happens to be
    // finished too is acted on only when it is due, so that what happens does not depend on the
    // threads' timing.
    const std::size_t due = v - std::min(v, v == steps ? std::size_t(0) : lag);
    std::size_t pending = 0;
    for (std::size_t w = due + 1; w <= v; ++w) pending += checked(w);
    for (int node : verifier_->waitUntilAtMost(pending)) failed.insert(std::size_t(node));
    if (failed.empty() || *failed.begin() > due) {
      ++v;
      continue;
    }
    verifier_->drain();  // the checks after the failed layer: their layers are redone anyway
    ++stats.detections;
    const std::size_t u = *failed.begin();
    failed.clear();
    recover(u);
    v = u + 1;
  }
  stats.unrecovered += gaveUp;
  stats += verifyStats;
}

std::vector<int> ProtectedRunner::run(const float* images, Scheme scheme, const std::vector<Fault>& faultList,
                                      const FaultModel& model, uint64_t seed, RunStats& stats) {
  // ECC: bits flipped in one word combine; a word left with one flipped bit is corrected, one with
  // two is a detected uncorrectable error that fails the inference, one with more keeps its corruption.
  std::map<uint64_t, uint32_t> words;
  for (const Fault& f : faultList) words[f.word] ^= f.mask;
  Graph& work = work_;  // weights in unreliable memory; g_ holds the host's clean copy
  for (std::size_t v : faultedWeights_) {  // undo the last run's weight faults
    work.nodes[v].weight = g_.nodes[v].weight;
    work.nodes[v].bias = g_.nodes[v].bias;
  }
  faultedWeights_.clear();
  bool failed = false;  // ECC: a detected double error
  std::vector<std::vector<std::pair<int64_t, uint32_t>>> activationFaults(g_.nodes.size());
  auto place = [&](uint64_t word, uint32_t mask, std::size_t from) {  // a fault on the buffers of nodes >= from
    const Place p = locate(word, scheme);
    if (p.node < from) return false;
    if (p.weight) {
      Node& n = work.nodes[p.node];
      faultedWeights_.push_back(p.node);
      flip(p.index < int64_t(n.weight.size()) ? n.weight[std::size_t(p.index)]
                                              : n.bias[std::size_t(p.index - int64_t(n.weight.size()))],
           mask);
    } else {
      activationFaults[p.node].push_back({p.index, mask});
    }
    return true;
  };
  for (const auto& [word, mask] : words) {
    if (mask == 0) continue;
    ++stats.faults;
    if (scheme == Scheme::Ecc) {
      const int bits = __builtin_popcount(mask);
      if (bits == 1) {
        ++stats.eccCorrected;
        continue;
      }
      if (bits == 2) {
        ++stats.eccUncorrectable;
        failed = true;
        continue;
      }
      ++stats.eccMissed;
    }
    place(word, mask, 0);
  }
  if (failed) {
    ++stats.eccFailures;
    return std::vector<int>(static_cast<std::size_t>(batch_), -1);
  }

  std::vector<std::vector<float>>& act = act_;  // kept between runs: no page faults for fresh buffers
  act.resize(g_.nodes.size());
  act[0].assign(images, images + batch_ * g_.nodes[0].size());
  auto step = [&](std::size_t v) {  // one layer step: the op on the weights in memory, then its faults
    const Node& n = g_.nodes[v];
    std::vector<const float*> in;
    for (int i : n.inputs) in.push_back(act[std::size_t(i)].data());
    act[v].resize(std::size_t(batch_ * n.size()));
    runNode(work, int(v), in, batch_, act[v].data());
    for (const auto& [element, mask] : activationFaults[v]) flip(act[v][std::size_t(element)], mask);
  };
  if (scheme == Scheme::Save) {
    runSave(step, activationFaults, place, model, seed, stats);
  } else {
    for (std::size_t v = 1; v < g_.nodes.size(); ++v) {
      step(v);
      if (scheme == Scheme::Ranger) {  // clamp to the profiled bounds
        const NodeRange& r = profiled_[v];
        const int64_t size = g_.nodes[v].size();
        for (int64_t s = 0; s < batch_; ++s)
          for (int64_t i = 0; i < size; ++i) {
            float& x = act[v][std::size_t(s * size + i)];
            const float lo = float(r.lo[std::size_t(i)]), hi = float(r.hi[std::size_t(i)]);
            x = std::isnan(x) ? lo : std::clamp(x, lo, hi);
          }
      }
    }
  }
  std::vector<int> out(static_cast<std::size_t>(batch_));
  const std::vector<float>& logits = act[std::size_t(g_.output)];
  const int64_t classes = g_.nodes[std::size_t(g_.output)].size();
  for (int64_t s = 0; s < batch_; ++s) out[std::size_t(s)] = topClass(logits.data() + s * classes, classes);  // -1: a corrupted output
  return out;
}

}  // namespace peat::save
