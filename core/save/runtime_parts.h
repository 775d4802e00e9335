// SPDX-License-Identifier: MIT
#pragma once
// ProtectedRunner's parts (core/save/runtime.h), private to core/save/runtime*.cpp: the fault
// process over unreliable memory, SAVE's verifiers of one layer, and the thread that runs those
// checks behind the inference. SAVE's schedule and the baselines use them.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/fp/format.h"
#include "core/save/runtime.h"

namespace peat::save::protect {

using Activations = std::vector<std::vector<float>>;  // per node: the batch's tensor

inline bool hasWeights(const Node& n) { return !n.weight.empty() || !n.bias.empty(); }
inline void flip(float& v, uint32_t mask) { v = fp::floatOf(fp::bitsOf(v) ^ mask); }

// Taps of a linear or conv node: its GEMM's inner dimension.
inline int64_t tapsOf(const Node& n) {
  return int64_t(n.weight.size()) / (n.op == Op::Linear ? n.features() : n.shape[0]);
}
// Output channels of a linear or conv node, and the channel of one sample's element.
inline int64_t channelCount(const Node& n) { return n.op == Op::Linear ? n.features() : n.shape[0]; }
inline int64_t channelOf(const Node& n, int64_t element) {
  return n.op == Op::Linear ? element % n.features() : element / (n.size() / n.shape[0]);
}
// One sample's element of such a node is (outer, channel, inner): conv [channels, positions] has
// outer 1; linear [rows, features] has inner 1. Element = (outer * channels + channel) * inner + inner index.
struct ChannelLayout {
  int64_t outer, inner;
};
inline ChannelLayout channelLayout(const Node& n) {
  return n.op == Op::Linear ? ChannelLayout{n.rows(), 1} : ChannelLayout{1, n.size() / n.shape[0]};
}
// A graph of two nodes: node n's input, then n with only output channels (features) `channels`
// (a linear or an ungrouped conv op). Each output sums its bias, then its taps in order, as the
// whole op does: the slice's values are the whole op's bit for bit.
Graph channelSlice(const Graph& g, const Node& n, const std::vector<int64_t>& channels);

struct Fault {
  uint64_t word;
  uint32_t mask;
};

// Where a word of the scheme's unreliable space lies: a weight (node, index into weights then
// biases) or an activation (node, element of the batch's tensor).
struct Place {
  bool weight = false;
  std::size_t node = 0;
  int64_t index = 0;
};

// The fault process: the unreliable memory of each scheme as 32-bit words (every weight and bias,
// then the activations not in reliable memory), and the faults one inference receives over it.
class FaultProcess {
 public:
  FaultProcess(const Graph& g, const Selection& selection, int64_t batch);
  int64_t unreliableWords(Scheme scheme) const;
  int64_t unreliableWords(Scheme scheme, FaultTarget target) const;
  std::vector<Fault> draw(Scheme scheme, const FaultModel& m, uint64_t seed) const;
  Place locate(uint64_t word, Scheme scheme) const;
  // One image's elements of node `node` in unreliable memory under SAVE, ascending.
  const std::vector<int64_t>& unreliable(std::size_t node) const { return unreliableIndex_[node]; }

 private:
  const Graph& g_;
  int64_t batch_;
  std::vector<int64_t> weightOffset_;  // first word of each node's weights, then biases
  int64_t weightWords_ = 0;
  std::vector<std::vector<int64_t>> unreliableIndex_;  // per node: one image's elements in unreliable memory (SAVE)
  std::vector<int64_t> activationWords_;  // per node: words (batch * size)
};

// SAVE's checks of one layer: the weights it used against the host's copy, the range check of its
// output, and the check of its type-2 elements in unreliable memory by the verifier chosen per op
// (fp32 recomputation, ABFT checksums or the mixed-precision check). `work` holds the weights as
// unreliable memory holds them. A check runs on the checking thread; what a failed check found
// (weightFaultChannels, failedElements) is written before it reports, for the recovery.
class Verifiers {
 public:
  Verifiers(const Graph& g, const Selection& selection, const FaultProcess& faults, const Graph& work, int64_t batch,
            VerifierPolicy policy);
  ~Verifiers();
  // SAVE's check of one tensor; true on a detection.
  bool verify(int node, const Activations& act, RunStats& stats);
  bool checkType2With(VerifierKind kind, int node, const Activations& act, RunStats& stats);
  bool withinRange(int node, int64_t element, float value) const;
  const std::vector<int64_t>& type2Unreliable(int node) const { return type2Unreliable_[std::size_t(node)]; }
  const std::vector<int64_t>& recomputedChannels(int node) const { return slice_[std::size_t(node)].channels; }
  const std::vector<VerifierChoice>& choices() const { return choices_; }
  // Per node: the output channels whose weights the last failed weight compare found changed;
  // empty: the failure was not the weights'.
  const std::vector<int64_t>& weightFaultChannels(std::size_t node) const { return weightFaultChannels_[node]; }
  // Per node: the values (batch-wide indices, ascending) that the last failed check found outside
  // their range or changed in a non-robust bit; empty: not known (the weights failed, or ABFT or
  // the mixed check, which do not say where).
  const std::vector<int64_t>& failedElements(std::size_t node) const { return failedElements_[node]; }

 private:
  // Per linear or (ungrouped) conv node whose type-2 elements in unreliable memory lie in only some of
  // its output channels (features): those channels' op, recomputed instead of the whole layer.
  struct Slice {
    std::vector<int64_t> channels;  // empty: recompute the whole layer
    Graph graph;                    // input, then the op with only those channels' weights
  };
  void placeSlices();
  void boundRanges();
  // The verifier of linear or conv node v under `policy`, and ABFT's checksum ops for it.
  void chooseVerifier(std::size_t v, VerifierPolicy policy);
  bool checksum(int node, const Activations& act, RunStats& stats);
  bool sliceMismatch(int node, const float* input, const std::vector<float>& x, RunStats& stats);
  bool weightsChanged(int node, RunStats& stats);
  bool rangeViolated(int node, const std::vector<float>& x, RunStats& stats);
  bool recomputeMismatch(int node, const std::vector<const float*>& in, const std::vector<float>& x, RunStats& stats);

  const Graph& g_;
  const Selection& sel_;
  const FaultProcess& faults_;
  const Graph& work_;
  int64_t batch_;
  std::vector<std::vector<int64_t>> type2Unreliable_;  // per node: the unreliable elements that are type 2
  std::vector<std::vector<uint32_t>> compareMask_;     // per node: bits the recomputation compares
  std::vector<std::vector<float>> rangeLo_, rangeHi_;  // per node: fp32 bounds around the sound ranges
  std::vector<Slice> slice_;
  std::vector<VerifierChoice> choices_;   // linear and conv nodes
  std::vector<VerifierKind> kind_;        // per node: the verifier chosen
  std::vector<std::unique_ptr<MixedChecker>> mixed_;  // per node: checked by integer recomputation
  std::vector<Graph> abftSum_, abftAbs_;  // per linear/conv node: its one-channel checksum ops
  std::vector<float> abftExpect_, abftBound_, abftAbsInput_;  // the checking thread's scratch
  std::vector<float> again_;              // the checking thread's recomputation
  std::vector<std::vector<int64_t>> weightFaultChannels_;
  std::vector<std::vector<int64_t>> failedElements_;
};

// One long-lived thread that runs the verifications of a run in order, behind the inference (as
// SAVE overlaps the CPU's checks with the GPU's next kernel).
class CheckThread {
 public:
  CheckThread() : thread_([this] { loop(); }) {}
  ~CheckThread() {
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

}  // namespace peat::save::protect
