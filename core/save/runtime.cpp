// SPDX-License-Identifier: MIT
#include "core/save/runtime.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

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

FaultPattern patternFromName(const std::string& name) {
  if (name == "random") return FaultPattern::Random;
  if (name == "consecutive") return FaultPattern::Consecutive;
  if (name == "region") return FaultPattern::Region;
  throw SaveError("unknown fault pattern '" + name + "' (patterns: random, consecutive, region)");
}

namespace {

bool hasWeights(const Node& n) { return n.op == Op::Linear || n.op == Op::Conv2d || n.op == Op::BatchNorm; }

uint32_t bitsOf(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

void flip(float& v, uint32_t mask) {
  uint32_t b = bitsOf(v) ^ mask;
  std::memcpy(&v, &b, 4);
}

int argmax(const float* logits, int64_t n) {
  int best = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(logits[i])) return -1;  // a corrupted output is a wrong answer
    if (logits[i] > logits[best]) best = int(i);
  }
  return best;
}

}  // namespace

ProtectedRunner::ProtectedRunner(const Graph& g, const Selection& selection, std::vector<NodeRange> profiled,
                                 int64_t batch)
    : g_(g), sel_(selection), profiled_(std::move(profiled)), batch_(batch) {
  if (batch <= 0) throw SaveError("the batch must hold at least one image");
  if (selection.layers.size() + 1 != g.nodes.size()) throw SaveError("the selection belongs to another graph");
  weightOffset_.assign(g.nodes.size() + 1, 0);
  for (std::size_t v = 0; v < g.nodes.size(); ++v)
    weightOffset_[v + 1] = weightOffset_[v] + int64_t(g.nodes[v].weight.size() + g.nodes[v].bias.size());
  weightWords_ = weightOffset_.back();
  reliable_.resize(g.nodes.size());
  unreliableIndex_.resize(g.nodes.size());
  activationWords_.assign(g.nodes.size(), 0);
  for (std::size_t v = 1; v < g.nodes.size(); ++v) {
    const LayerSelection& l = selection.layers[v - 1];
    const int64_t size = g.nodes[v].size();
    activationWords_[v] = batch * size;
    reliable_[v].assign(std::size_t(batch * size), 0);
    for (int64_t i = 0; i < size; ++i) {
      const int64_t tile = (i / l.cols / selection.options.tileRows) * l.tilesAcross + (i % l.cols) / selection.options.tileCols;
      const bool inReliable = l.tileReliable[std::size_t(tile)] != 0;
      for (int64_t s = 0; s < batch; ++s) {
        reliable_[v][std::size_t(s * size + i)] = inReliable;
        if (!inReliable) unreliableIndex_[v].push_back(s * size + i);
      }
    }
    std::sort(unreliableIndex_[v].begin(), unreliableIndex_[v].end());
  }
}

int64_t ProtectedRunner::unreliableWords(Scheme scheme) const {
  int64_t words = weightWords_;
  for (std::size_t v = 1; v < g_.nodes.size(); ++v)
    words += scheme == Scheme::Save ? int64_t(unreliableIndex_[v].size()) : activationWords_[v];
  return words;
}

std::vector<ProtectedRunner::Fault> ProtectedRunner::drawFaults(Scheme scheme, const FaultModel& m, uint64_t seed) const {
  std::vector<Fault> out;
  if (m.flips <= 0) return out;
  const uint64_t total = uint64_t(unreliableWords(scheme));
  std::mt19937_64 rng(seed);
  auto mask = [&] {
    uint32_t bits = 0;
    const int want = std::clamp(m.bitsPerFault, 1, 32);
    while (__builtin_popcount(bits) < want) bits |= uint32_t(1) << (rng() % 32);
    return bits;
  };
  const uint64_t n = uint64_t(m.flips);
  if (m.pattern == FaultPattern::Random) {
    for (uint64_t k = 0; k < n; ++k) out.push_back({rng() % total, mask()});
  } else if (m.pattern == FaultPattern::Consecutive) {  // virtually consecutive words
    const uint64_t start = total > n ? rng() % (total - n + 1) : 0;
    for (uint64_t k = 0; k < n; ++k) out.push_back({(start + k) % total, mask()});
  } else {  // a physically contiguous region takes them all
    const uint64_t window = std::min<uint64_t>(total, uint64_t(std::max<int64_t>(1, m.regionWords)));
    const uint64_t start = rng() % (total - window + 1);
    for (uint64_t k = 0; k < n; ++k) out.push_back({start + rng() % window, mask()});
  }
  return out;
}

std::vector<int> ProtectedRunner::infer(const float* images, Scheme scheme, const FaultModel& faults, uint64_t seed,
                                        RunStats& stats) {
  if (scheme != Scheme::Tmr) return run(images, scheme, drawFaults(scheme, faults, seed), stats);
  std::vector<std::vector<int>> votes;
  for (uint64_t r = 0; r < 3; ++r)
    votes.push_back(run(images, Scheme::None, drawFaults(Scheme::None, faults, seed * 3 + r + 1), stats));
  std::vector<int> out(static_cast<std::size_t>(batch_));
  for (std::size_t s = 0; s < out.size(); ++s)
    out[s] = votes[1][s] == votes[2][s] ? votes[1][s] : votes[0][s];  // two of three agree, else the first
  return out;
}

std::vector<int> ProtectedRunner::run(const float* images, Scheme scheme, const std::vector<Fault>& faultList,
                                      RunStats& stats) {
  // ECC: bits flipped in one word combine; a word left with one flipped bit is corrected.
  std::map<uint64_t, uint32_t> words;
  for (const Fault& f : faultList) words[f.word] ^= f.mask;
  Graph work = g_;  // weights in unreliable memory; g_ holds the host's clean copy
  std::vector<std::vector<std::pair<int64_t, uint32_t>>> activationFaults(g_.nodes.size());
  for (const auto& [word, mask] : words) {
    if (mask == 0) continue;
    ++stats.faults;
    if (scheme == Scheme::Ecc && __builtin_popcount(mask) == 1) {
      ++stats.eccCorrected;
      continue;
    }
    if (scheme == Scheme::Ecc) ++stats.eccUncorrectable;
    if (word < uint64_t(weightWords_)) {
      const std::size_t v = std::size_t(std::upper_bound(weightOffset_.begin(), weightOffset_.end(), int64_t(word)) -
                                        weightOffset_.begin() - 1);
      Node& n = work.nodes[v];
      const int64_t at = int64_t(word) - weightOffset_[v];
      flip(at < int64_t(n.weight.size()) ? n.weight[std::size_t(at)] : n.bias[std::size_t(at - int64_t(n.weight.size()))],
           mask);
      continue;
    }
    int64_t rest = int64_t(word) - weightWords_;
    for (std::size_t v = 1; v < g_.nodes.size(); ++v) {
      const int64_t here = scheme == Scheme::Save ? int64_t(unreliableIndex_[v].size()) : activationWords_[v];
      if (rest < here) {
        activationFaults[v].push_back({scheme == Scheme::Save ? unreliableIndex_[v][std::size_t(rest)] : rest, mask});
        break;
      }
      rest -= here;
    }
  }

  std::vector<std::vector<float>> act(g_.nodes.size());
  act[0].assign(images, images + batch_ * g_.nodes[0].size());
  for (std::size_t v = 1; v < g_.nodes.size(); ++v) {
    const Node& n = g_.nodes[v];
    const int64_t size = n.size();
    std::vector<const float*> in;
    for (int i : n.inputs) in.push_back(act[std::size_t(i)].data());
    act[v].resize(std::size_t(batch_ * size));
    runNode(work, int(v), in, batch_, act[v].data());
    if (scheme == Scheme::Save && hasWeights(n)) {  // weight check against the host copy
      Node& w = work.nodes[v];
      if (w.weight != n.weight || w.bias != n.bias) {
        ++stats.detections;
        ++stats.weightRepairs;
        ++stats.recoveries;
        w.weight = n.weight;
        w.bias = n.bias;
        runNode(work, int(v), in, batch_, act[v].data());  // restart the interrupted layer
      }
    }
    for (const auto& [element, mask] : activationFaults[v]) flip(act[v][std::size_t(element)], mask);
    if (scheme == Scheme::Ranger) {  // clamp to the profiled bounds
      const NodeRange& r = profiled_[v];
      for (int64_t s = 0; s < batch_; ++s)
        for (int64_t i = 0; i < size; ++i) {
          float& x = act[v][std::size_t(s * size + i)];
          const float lo = float(r.lo[std::size_t(i)]), hi = float(r.hi[std::size_t(i)]);
          x = std::isnan(x) ? lo : std::clamp(x, lo, hi);
        }
    }
    if (scheme == Scheme::Save) {
      // Range check of the unreliable elements, and recomputation of the type-2 ones from the
      // op's (verified) inputs, compared outside their robust bits.
      const NodeRange& r = sel_.ranges.nodes[v];
      const LayerSelection& l = sel_.layers[v - 1];
      bool detected = false;
      std::vector<const float*> sampleIn(n.inputs.size());
      for (int64_t e : unreliableIndex_[v]) {
        const int64_t s = e / size, i = e % size;
        const float x = act[v][std::size_t(e)];
        if (!(x >= r.lo[std::size_t(i)] && x <= r.hi[std::size_t(i)])) {
          ++stats.rangeViolations;
          detected = true;
          break;
        }
        const uint32_t robust = l.robustMask[std::size_t(i)], ranging = l.rangingMask[std::size_t(i)];
        if (~(robust | ranging) == 0) continue;  // type 1: the range check covers it
        for (std::size_t k = 0; k < n.inputs.size(); ++k)
          sampleIn[k] = act[std::size_t(n.inputs[k])].data() + s * g_.nodes[std::size_t(n.inputs[k])].size();
        ++stats.recomputed;
        const float again = elementOf(g_, int(v), sampleIn, i);
        if ((bitsOf(again) ^ bitsOf(x)) & ~robust) {
          ++stats.recomputeMismatches;
          detected = true;
          break;
        }
      }
      if (detected) {
        ++stats.detections;
        ++stats.recoveries;
        runNode(work, int(v), in, batch_, act[v].data());  // recompute from clean inputs
      }
    }
  }
  std::vector<int> out(static_cast<std::size_t>(batch_));
  const std::vector<float>& logits = act[std::size_t(g_.output)];
  const int64_t classes = g_.nodes[std::size_t(g_.output)].size();
  for (int64_t s = 0; s < batch_; ++s) out[std::size_t(s)] = argmax(logits.data() + s * classes, classes);
  return out;
}

}  // namespace peat::save
