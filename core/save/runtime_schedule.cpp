// SPDX-License-Identifier: MIT
// SAVE's schedule at run time: each layer's check on the second core behind the inference, and the
// recovery of a layer whose check failed (a rerun of its changed channels, its failed values, or
// the whole layer), with the new faults that redone work meets.
#include <algorithm>
#include <random>
#include <set>

#include "core/save/runtime_parts.h"

namespace peat::save {

namespace {

using protect::Activations;
using ActivationFaults = std::vector<std::vector<std::pair<int64_t, uint32_t>>>;

// SAVE's inference: each layer's check runs on the second core behind the inference, at most
// FaultModel::checkLag layers behind it (the inference waits when the checks fall further behind). On a
// detection at layer u the checks in flight finish, u's weights are rewritten from the host's
// copy, u is rerun from its inputs (which passed their checks) and checked again, and the inference
// goes on from u + 1, redoing the layers that ran after u (they read its bad output). Each rerun or
// redone step meets new faults at the same rate per layer step (Poisson(flips / N) per step, on
// the weights and tensors of that layer and those after it). After FaultModel::maxRecoveries
// reruns of one layer the inference keeps what the last one computed, counts as unrecovered, and
// goes on.
class SaveSchedule {
 public:
  struct Parts {
    const Graph& g;  // the host's clean copy
    Graph& work;     // the weights as unreliable memory holds them
    Activations& act;
    int64_t batch;
    const protect::FaultProcess& faults;
    protect::Verifiers& verifiers;
    protect::CheckThread& thread;
  };
  SaveSchedule(const Parts& parts, const std::function<void(std::size_t)>& step, ActivationFaults& activationFaults,
               const std::function<bool(uint64_t, uint32_t, std::size_t)>& place, const FaultModel& model, uint64_t seed,
               RunStats& stats)
      : p_(parts), step_(step), activationFaults_(activationFaults), place_(place), model_(model),
        rng_(seed * 0x9E3779B97F4A7C15ull + 77), stats_(stats), steps_(parts.g.nodes.size() - 1) {}

  void run();

 private:
  void rerunFaults(std::size_t from, double share);
  void rerunChannels(std::size_t u, const std::vector<int64_t>& channels);
  void repairElements(std::size_t u, const std::vector<int64_t>& elements);
  void recover(std::size_t u);
  // A layer with no weights and nothing in unreliable memory has nothing to check: no handoff.
  bool checked(std::size_t w) const { return protect::hasWeights(p_.g.nodes[w]) || !p_.faults.unreliable(w).empty(); }

  const Parts& p_;
  const std::function<void(std::size_t)>& step_;
  ActivationFaults& activationFaults_;
  const std::function<bool(uint64_t, uint32_t, std::size_t)>& place_;
  const FaultModel& model_;
  std::mt19937_64 rng_;
  RunStats& stats_;
  RunStats verifyStats_;  // written by the checking thread only
  const std::size_t steps_;
  bool gaveUp_ = false;  // a layer failed its check maxRecoveries times: the inference is unrecovered
};

// New faults for one redone step (or `share` of one), landing on the weights and tensors of layers >= from.
void SaveSchedule::rerunFaults(std::size_t from, double share) {
  ++stats_.rerunSteps;
  if (!model_.duringReruns || model_.flips <= 0) return;
  std::poisson_distribution<int64_t> arrivals(double(model_.flips) * share / double(steps_));
  FaultModel more = model_;
  more.flips = arrivals(rng_);
  for (const protect::Fault& f : p_.faults.draw(Scheme::Save, more, rng_()))
    stats_.rerunFaults += place_(f.word, f.mask, from);
}

// Rerun only output channels `channels` of layer u, after its weights are rewritten: the rest of
// its output stays in memory as it is (with its faults), and new faults arrive for the share of
// the layer's work this is (a rate per layer step's work).
void SaveSchedule::rerunChannels(std::size_t u, const std::vector<int64_t>& channels) {
  const Node& n = p_.g.nodes[u];
  const int64_t size = n.size();
  const double share = double(channels.size()) / double(protect::channelCount(n));
  ++stats_.channelReruns;
  stats_.channelRerunShare += share;
  std::vector<uint8_t> rewritten(std::size_t(protect::channelCount(n)), 0);
  for (int64_t c : channels) rewritten[std::size_t(c)] = 1;
  std::vector<std::pair<int64_t, uint32_t>>& faults = activationFaults_[u];
  faults.erase(std::remove_if(faults.begin(), faults.end(),
                              [&](const auto& f) { return rewritten[std::size_t(protect::channelOf(n, f.first % size))] != 0; }),
               faults.end());
  const std::size_t old = faults.size();
  rerunFaults(u, share);
  const Graph slice = protect::channelSlice(p_.work, p_.work.nodes[u], channels);  // the weights as memory holds them now
  const int64_t k = int64_t(channels.size()), count = protect::channelCount(n);
  const auto [outer, inner] = protect::channelLayout(n);
  std::vector<float> part(std::size_t(p_.batch * k * outer * inner));
  runNode(slice, 1, {p_.act[std::size_t(n.inputs[0])].data()}, p_.batch, part.data());
  for (int64_t s = 0; s < p_.batch; ++s)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < k; ++j)
        std::copy_n(part.data() + ((s * outer + o) * k + j) * inner, inner,
                    p_.act[u].data() + s * size + (o * count + channels[std::size_t(j)]) * inner);
  for (std::size_t f = old; f < faults.size(); ++f) protect::flip(p_.act[u][std::size_t(faults[f].first)], faults[f].second);
}

// Recompute only the values of layer u that failed their check (outside their range, or changed
// in a non-robust bit), from its checked inputs and its rewritten weights: every other value is in
// reliable memory or passed its checks, which is all the bit classes ask of it. New faults arrive
// for the share of the layer's values (over the batch) this recomputes.
void SaveSchedule::repairElements(std::size_t u, const std::vector<int64_t>& elements) {
  const Node& n = p_.g.nodes[u];
  const int64_t size = n.size();
  const double share = double(elements.size()) / double(p_.batch * size);
  ++stats_.elementRepairs;
  stats_.elementRepairShare += share;
  std::vector<std::pair<int64_t, uint32_t>>& faults = activationFaults_[u];
  faults.erase(std::remove_if(faults.begin(), faults.end(),
                              [&](const auto& f) { return std::binary_search(elements.begin(), elements.end(), f.first); }),
               faults.end());
  const std::size_t old = faults.size();
  rerunFaults(u, share);
  std::vector<const float*> in(n.inputs.size());
  for (int64_t e : elements) {
    const int64_t s = e / size;
    for (std::size_t k = 0; k < in.size(); ++k)
      in[k] = p_.act[std::size_t(n.inputs[k])].data() + s * p_.g.nodes[std::size_t(n.inputs[k])].size();
    p_.act[u][std::size_t(e)] = elementOf(p_.work, int(u), in, e % size);  // the weights as memory holds them now
  }
  for (std::size_t f = old; f < faults.size(); ++f) protect::flip(p_.act[u][std::size_t(faults[f].first)], faults[f].second);
}

// Rerun layer u until its check passes or the budget is spent: only the output channels whose
// weights changed when the weights alone failed (a linear or ungrouped conv), only the values that
// failed when the range check or the recomputation said which (under 1/16 of them), else the whole layer.
void SaveSchedule::recover(std::size_t u) {
  for (int attempt = 0;; ++attempt) {
    ++stats_.recoveries;
    const std::vector<int64_t> channels = p_.verifiers.weightFaultChannels(u), elements = p_.verifiers.failedElements(u);
    p_.work.nodes[u].weight = p_.g.nodes[u].weight;
    p_.work.nodes[u].bias = p_.g.nodes[u].bias;
    if (!channels.empty() && int64_t(channels.size()) < protect::channelCount(p_.g.nodes[u])) {
      rerunChannels(u, channels);
    } else if (channels.empty() && !elements.empty() && int64_t(elements.size()) * 16 <= p_.batch * p_.g.nodes[u].size()) {
      repairElements(u, elements);  // fewer than 1/16 of the values: cheaper one by one than the vectorised layer
    } else {
      activationFaults_[u].clear();  // the tensor is rewritten: the faults of its last write are gone
      rerunFaults(u, 1.0);
      step_(u);
    }
    if (!p_.verifiers.verify(int(u), p_.act, stats_)) return;
    ++stats_.detections;
    if (attempt + 1 >= model_.maxRecoveries) {
      gaveUp_ = true;
      return;
    }
  }
}

void SaveSchedule::run() {
  const std::size_t lag = std::size_t(std::max(1, model_.checkLag));
  std::size_t ran = 0;  // the furthest layer run so far: a layer at or below it is redone
  std::set<std::size_t> failed;  // layers whose check failed, not yet acted on
  for (std::size_t v = 1; v <= steps_;) {
    if (v <= ran) {
      activationFaults_[v].clear();  // rewritten: the faults of its last run are gone, new ones arrive
      rerunFaults(v, 1.0);
    }
    step_(v);
    ran = std::max(ran, v);
    if (checked(v)) {
      protect::Verifiers& verifiers = p_.verifiers;
      const Activations& act = p_.act;
      RunStats& verifyStats = verifyStats_;
      p_.thread.post(int(v), [&verifiers, v, &act, &verifyStats] { return verifiers.verify(int(v), act, verifyStats); });
    }
    // The checks of layers up to `due` are finished (the checks run first in, first out, so at most
    // the ones posted for the layers after `due` may still run); a later check that happens to be
    // finished too is acted on only when it is due, so that what happens does not depend on the
    // threads' timing.
    const std::size_t due = v - std::min(v, v == steps_ ? std::size_t(0) : lag);
    std::size_t pending = 0;
    for (std::size_t w = due + 1; w <= v; ++w) pending += checked(w);
    for (int node : p_.thread.waitUntilAtMost(pending)) failed.insert(std::size_t(node));
    if (failed.empty() || *failed.begin() > due) {
      ++v;
      continue;
    }
    p_.thread.drain();  // the checks after the failed layer: their layers are redone anyway
    ++stats_.detections;
    const std::size_t u = *failed.begin();
    failed.clear();
    recover(u);
    v = u + 1;
  }
  stats_.unrecovered += gaveUp_;
  stats_ += verifyStats_;
}

}  // namespace

void ProtectedRunner::runSave(const std::function<void(std::size_t)>& step, ActivationFaults& activationFaults,
                              const std::function<bool(uint64_t, uint32_t, std::size_t)>& place, const FaultModel& model,
                              uint64_t seed, RunStats& stats) {
  if (!checkThread_) checkThread_ = std::make_unique<protect::CheckThread>();
  const SaveSchedule::Parts parts{g_, work_, act_, batch_, *faults_, *verifiers_, *checkThread_};
  SaveSchedule(parts, step, activationFaults, place, model, seed, stats).run();
}

}  // namespace peat::save
