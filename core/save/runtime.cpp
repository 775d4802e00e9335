// SPDX-License-Identifier: MIT
// The scheme names, the run counts, and ProtectedRunner's assembly of its parts
// (core/save/runtime_parts.h).
#include "core/save/runtime.h"

#include <initializer_list>
#include <string>
#include <utility>

#include "core/save/runtime_parts.h"

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

namespace {

// The value `names` gives `name`, or SaveError "unknown <what> '<name>' (<plural>: <every name>)".
template <class E>
E fromName(const std::string& name, std::initializer_list<std::pair<const char*, E>> names, const char* what,
           const char* plural) {
  std::string all;
  for (const auto& [text, value] : names) {
    if (name == text) return value;
    all += (all.empty() ? "" : ", ") + std::string(text);
  }
  throw SaveError("unknown " + std::string(what) + " '" + name + "' (" + plural + ": " + all + ")");
}

}  // namespace

VerifierPolicy verifierPolicyFromName(const std::string& name) {
  return fromName<VerifierPolicy>(name,
                                  {{"auto", VerifierPolicy::Auto},
                                   {"recompute", VerifierPolicy::Recompute},
                                   {"abft", VerifierPolicy::Abft},
                                   {"mixed", VerifierPolicy::Mixed}},
                                  "verifier", "verifiers");
}

FaultPattern patternFromName(const std::string& name) {
  return fromName<FaultPattern>(name,
                                {{"random", FaultPattern::Random},
                                 {"consecutive", FaultPattern::Consecutive},
                                 {"region", FaultPattern::Region},
                                 {"adjacent", FaultPattern::Adjacent},
                                 {"burst", FaultPattern::Burst}},
                                "fault pattern", "patterns");
}

FaultTarget targetFromName(const std::string& name) {
  return fromName<FaultTarget>(
      name, {{"both", FaultTarget::Both}, {"weights", FaultTarget::Weights}, {"activations", FaultTarget::Activations}},
      "fault target", "targets");
}

ProtectedRunner::ProtectedRunner(const Graph& g, const Selection& selection, std::vector<NodeRange> profiled,
                                 int64_t batch, VerifierPolicy policy)
    : g_(g), profiled_(std::move(profiled)), batch_(batch), work_(g) {
  if (batch <= 0) throw SaveError("the batch must hold at least one image");
  if (selection.layers.size() + 1 != g.nodes.size()) throw SaveError("the selection belongs to another graph");
  faults_ = std::make_unique<protect::FaultProcess>(g, selection, batch);
  verifiers_ = std::make_unique<protect::Verifiers>(g, selection, *faults_, work_, batch, policy);
}

ProtectedRunner::~ProtectedRunner() = default;

int64_t ProtectedRunner::unreliableWords(Scheme scheme) const { return faults_->unreliableWords(scheme); }

int64_t ProtectedRunner::unreliableWords(Scheme scheme, FaultTarget target) const {
  return faults_->unreliableWords(scheme, target);
}

bool ProtectedRunner::checkType2With(VerifierKind kind, int node, const std::vector<std::vector<float>>& act,
                                     RunStats& stats) {
  return verifiers_->checkType2With(kind, node, act, stats);
}

const std::vector<int64_t>& ProtectedRunner::type2Unreliable(int node) const { return verifiers_->type2Unreliable(node); }

const std::vector<int64_t>& ProtectedRunner::recomputedChannels(int node) const {
  return verifiers_->recomputedChannels(node);
}

bool ProtectedRunner::withinRange(int node, int64_t element, float value) const {
  return verifiers_->withinRange(node, element, value);
}

const std::vector<VerifierChoice>& ProtectedRunner::verifierChoices() const { return verifiers_->choices(); }

}  // namespace peat::save
