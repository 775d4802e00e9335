// SPDX-License-Identifier: MIT
// One inference under a scheme: the faults landed on weights and tensors, then the layers in order
// (no protection, Ranger's clamp, ECC's correction of single-bit words, TMR's vote of three runs),
// or SAVE's schedule (runtime_schedule.cpp).
#include <algorithm>
#include <cmath>
#include <map>

#include "core/save/runtime_parts.h"

namespace peat::save {

namespace {

// Ranger: every value of node v's tensor clamped to its profiled bounds (NaN to the lower one).
void clampToProfile(std::vector<float>& x, const NodeRange& r, int64_t size, int64_t batch) {
  for (int64_t s = 0; s < batch; ++s)
    for (int64_t i = 0; i < size; ++i) {
      float& value = x[std::size_t(s * size + i)];
      const float lo = float(r.lo[std::size_t(i)]), hi = float(r.hi[std::size_t(i)]);
      value = std::isnan(value) ? lo : std::clamp(value, lo, hi);
    }
}

}  // namespace

std::vector<int> ProtectedRunner::infer(const float* images, Scheme scheme, const FaultModel& faults, uint64_t seed,
                                        RunStats& stats) {
  if (scheme != Scheme::Tmr) return run(images, scheme, faults_->draw(scheme, faults, seed), faults, seed, stats);
  std::vector<std::vector<int>> votes;
  std::vector<std::vector<float>> outputs;
  for (uint64_t r = 0; r < 3; ++r) {
    const uint64_t own = seed * 3 + r + 1;
    votes.push_back(run(images, Scheme::None, faults_->draw(Scheme::None, faults, own), faults, own, stats));
    outputs.push_back(output_);
  }
  std::vector<int> out(static_cast<std::size_t>(batch_));
  const std::size_t classes = std::size_t(g_.nodes[std::size_t(g_.output)].size());
  for (std::size_t s = 0; s < out.size(); ++s) {
    const std::size_t winner = votes[1][s] == votes[2][s] ? 1 : 0;  // two of three agree, else the first
    out[s] = votes[winner][s];
    std::copy_n(outputs[winner].begin() + std::ptrdiff_t(s * classes), classes,
                output_.begin() + std::ptrdiff_t(s * classes));
  }
  return out;
}

std::vector<int> ProtectedRunner::run(const float* images, Scheme scheme, const std::vector<protect::Fault>& faultList,
                                      const FaultModel& model, uint64_t seed, RunStats& stats) {
  // ECC: bits flipped in one word combine; a word left with one flipped bit is corrected, one with
  // two is a detected uncorrectable error that fails the inference, one with more keeps its corruption.
  std::map<uint64_t, uint32_t> words;
  for (const protect::Fault& f : faultList) words[f.word] ^= f.mask;
  Graph& work = work_;  // weights in unreliable memory; g_ holds the host's clean copy
  for (std::size_t v : faultedWeights_) {  // undo the last run's weight faults
    work.nodes[v].weight = g_.nodes[v].weight;
    work.nodes[v].bias = g_.nodes[v].bias;
  }
  faultedWeights_.clear();
  bool failed = false;  // ECC: a detected double error
  std::vector<std::vector<std::pair<int64_t, uint32_t>>> activationFaults(g_.nodes.size());
  auto place = [&](uint64_t word, uint32_t mask, std::size_t from) {  // a fault on the buffers of nodes >= from
    const protect::Place p = faults_->locate(word, scheme);
    if (p.node < from) return false;
    if (p.weight) {
      Node& n = work.nodes[p.node];
      faultedWeights_.push_back(p.node);
      protect::flip(p.index < int64_t(n.weight.size()) ? n.weight[std::size_t(p.index)]
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
    output_.assign(std::size_t(batch_ * g_.nodes[std::size_t(g_.output)].size()), std::nanf(""));
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
    for (const auto& [element, mask] : activationFaults[v]) protect::flip(act[v][std::size_t(element)], mask);
  };
  if (scheme == Scheme::Save) {
    runSave(step, activationFaults, place, model, seed, stats);
  } else {
    for (std::size_t v = 1; v < g_.nodes.size(); ++v) {
      step(v);
      if (scheme == Scheme::Ranger) clampToProfile(act[v], profiled_[v], g_.nodes[v].size(), batch_);
    }
  }
  std::vector<int> out(static_cast<std::size_t>(batch_));
  const std::vector<float>& logits = act[std::size_t(g_.output)];
  const int64_t classes = g_.nodes[std::size_t(g_.output)].size();
  output_.assign(logits.begin(), logits.begin() + batch_ * classes);
  for (int64_t s = 0; s < batch_; ++s) out[std::size_t(s)] = topClassOf(g_, logits.data() + s * classes);  // -1: a corrupted output
  return out;
}

}  // namespace peat::save
