// SPDX-License-Identifier: MIT
// The fault process of ProtectedRunner: unreliable memory as 32-bit words, and the faults drawn over it.
#include <algorithm>
#include <random>

#include "core/save/runtime_parts.h"

namespace peat::save::protect {

FaultProcess::FaultProcess(const Graph& g, const Selection& selection, int64_t batch) : g_(g), batch_(batch) {
  weightOffset_.assign(g.nodes.size() + 1, 0);
  for (std::size_t v = 0; v < g.nodes.size(); ++v)
    weightOffset_[v + 1] = weightOffset_[v] + int64_t(g.nodes[v].weight.size() + g.nodes[v].bias.size());
  weightWords_ = weightOffset_.back();
  unreliableIndex_.resize(g.nodes.size());
  activationWords_.assign(g.nodes.size(), 0);
  for (std::size_t v = 1; v < g.nodes.size(); ++v) {
    const LayerSelection& l = selection.layers[v - 1];
    const int64_t size = g.nodes[v].size();
    activationWords_[v] = batch * size;
    for (int64_t i = 0; i < size; ++i) {  // a tile holds its elements for every image of the batch
      const int64_t tile = (i / l.cols / selection.options.tileRows) * l.tilesAcross + (i % l.cols) / selection.options.tileCols;
      if (l.tileReliable[std::size_t(tile)]) continue;
      unreliableIndex_[v].push_back(i);
    }
  }
}

int64_t FaultProcess::unreliableWords(Scheme scheme) const {
  int64_t words = weightWords_;
  for (std::size_t v = 1; v < g_.nodes.size(); ++v)
    words += scheme == Scheme::Save ? batch_ * int64_t(unreliableIndex_[v].size()) : activationWords_[v];
  return words;
}

int64_t FaultProcess::unreliableWords(Scheme scheme, FaultTarget target) const {
  const int64_t all = unreliableWords(scheme);
  return target == FaultTarget::Weights ? weightWords_ : target == FaultTarget::Activations ? all - weightWords_ : all;
}

std::vector<Fault> FaultProcess::draw(Scheme scheme, const FaultModel& m, uint64_t seed) const {
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

Place FaultProcess::locate(uint64_t word, Scheme scheme) const {
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

}  // namespace peat::save::protect
