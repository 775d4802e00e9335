// SPDX-License-Identifier: MIT
#include <cmath>
#include "core/save/result_json.h"

#include <cstdio>
#include <utility>

namespace peat::save {

namespace {

std::string numberText(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return std::string(b);
}

void confusionJson(JsonWriter& j, const std::string& key, const Confusion& c) {
  j.key(key).beginObject().field("predicted_robust_actually_robust", c.robustRobust);
  j.field("predicted_robust_actually_vulnerable", c.robustVulnerable);
  j.field("predicted_nonrobust_actually_robust", c.protectedRobust);
  j.field("predicted_nonrobust_actually_vulnerable", c.protectedVulnerable).endObject();
}

void judgedJson(JsonWriter& j, const Judged& x) {
  confusionJson(j, "top1", x.top1);
  confusionJson(j, "promise", x.promise);
}

}  // namespace

std::string partsText(const std::vector<OutputPart>& parts) {
  std::string t;
  for (const OutputPart& p : parts) t += (t.empty() ? "'" : ", '") + p.name + "' " + dimsText(p.shape);
  return t;
}

std::string dimsText(const std::vector<int64_t>& shape) {
  std::string t;
  for (int64_t d : shape) t += (t.empty() ? "" : "x") + std::to_string(d);
  return t;
}

std::string nodeDetails(const Node& n) {
  std::string t;
  if (n.op == Op::Conv2d || n.op == Op::MaxPool2d || n.op == Op::AvgPool2d) {
    t = "kernel " + std::to_string(n.kernel) + ", stride " + std::to_string(n.stride) + ", padding " + std::to_string(n.padding);
    if (n.groups != 1) t += ", groups " + std::to_string(n.groups);
    if (n.dilation != 1) t += ", dilation " + std::to_string(n.dilation);
  } else if (n.op == Op::Clip) {
    t = "[" + numberText(n.bias[0]) + ", " + numberText(n.bias[1]) + "]";
  } else if (n.op == Op::LayerNorm) {
    t = "eps " + numberText(n.eps);
  }
  return t;
}

const char* verifierKindName(VerifierKind kind) {
  static const char* const names[3] = {"recompute", "abft", "mixed"};
  return names[int(kind)];
}

void writeGraphJson(JsonWriter& j, const Graph& g) {
  j.beginObject().field("model", g.model).field("parameters", g.parameterCount());
  if (!g.batch.empty()) j.field("batch_reading", g.batch);
  if (g.tokens > 0) j.field("token_ids", g.tokens);
  j.key("nodes").beginArray();
  for (std::size_t v = 0; v < g.nodes.size(); ++v) {
    const Node& n = g.nodes[v];
    j.beginObject().field("index", int64_t(v)).field("name", n.name).field("op", opName(n.op));
    j.field("shape", dimsText(n.shape)).key("inputs").beginArray();
    for (int i : n.inputs) j.value(int64_t(i));
    j.endArray().field("weights", int64_t(n.weight.size() + n.bias.size())).field("details", nodeDetails(n)).endObject();
  }
  j.endArray().field("output", int64_t(g.output)).endObject();
}

void writeAnalysisJson(JsonWriter& j, const Graph& g, const Selection& s, const SelectionOptions& so,
                       const TightnessReferences& ref) {
  const Tightness out = tightnessOf(s.ranges.nodes[std::size_t(g.output)]);
  j.beginObject().field("model", s.model).field("mode", s.mode).field("ranges", s.sound ? "sound" : "unsound (profiled)");
  j.field("pixel_lo", s.options.pixelLo).field("pixel_hi", s.options.pixelHi).field("tau", so.tau).field("criterion", so.criterion);
  if (g.inputs.size() > 1 || (g.inputs.size() == 1 && !std::isnan(g.inputs[0].lo))) {  // each input's raw box
    j.key("inputs").beginArray();
    for (const OutputPart& p : g.inputs) {
      double lo = s.options.pixelLo, hi = s.options.pixelHi;
      elementRange(g, p.offset, lo, hi);
      j.beginObject().field("name", p.name).field("shape", dimsText(p.shape)).field("lo", lo).field("hi", hi);
      const auto [means, deviations] = partNormalisation(g, p);  // ids and integer values: 0 and 1
      j.key("mean").beginArray();
      for (float v : means) j.value(double(v));
      j.endArray().key("std").beginArray();
      for (float v : deviations) j.value(double(v));
      j.endArray().endObject();
    }
    j.endArray();
  }
  if (so.rtol != 0) j.field("rtol", so.rtol);
  if (s.sensitivity)
    j.field("epsilon", so.epsilon).field("logit_rounding", s.sensitivity->rounding).field("sensitivity_seconds", s.sensitivity->seconds);
  j.field("range_seconds", s.rangeSeconds).field("seconds", s.seconds).field("parameters", g.parameterCount());
  j.field("elements", s.elements).field("type2_elements", s.type2Elements);
  j.field("tile_bytes", s.tileBytes).field("total_tiles", s.totalTiles).field("reliable_tiles", s.reliableTiles);
  j.field("reliable_bytes", s.reliableBytes).field("budget_bytes", s.budgetBytes);
  j.field("working_set_bytes", s.workingSetBytes);
  j.field("recompute_work", s.recomputeWork).field("recompute_work_random_placement", s.randomPlacementWork);
  j.field("recompute_work_without_reliable_memory", s.recomputeAllWork);
  j.key("output").beginObject().field("lo", out.unionLo).field("hi", out.unionHi).field("mean_width", out.meanWidth);
  if (ref.present) {
    j.field("ascent_lo", ref.ascent.unionLo).field("ascent_hi", ref.ascent.unionHi);
    j.field("interval_lo", ref.interval.unionLo).field("interval_hi", ref.interval.unionHi);
    j.field("test_lo", ref.test[std::size_t(g.output)].unionLo).field("test_hi", ref.test[std::size_t(g.output)].unionHi);
  }
  j.endObject();
  if (!g.outputs.empty()) {  // a model with several outputs: each one's bounds, named
    j.key("outputs").beginArray();
    for (const OutputPart& p : g.outputs) {
      const Tightness t = tightnessOf(s.ranges.nodes[std::size_t(g.output)], p.offset, p.size());
      j.beginObject().field("name", p.name).field("shape", dimsText(p.shape)).field("lo", t.unionLo);
      j.field("hi", t.unionHi).field("mean_width", t.meanWidth).endObject();
    }
    j.endArray();
  }
  j.key("layers").beginArray();
  for (const LayerSelection& l : s.layers) {
    j.beginObject().field("name", l.name).field("op", l.op).field("elements", l.elements).field("type2", l.type2);
    j.field("robust_bits", l.robustBits).field("ranging_bits", l.rangingBits).field("vulnerable_bits", l.vulnerableBits);
    j.field("mean_width", l.meanWidth);
    if (ref.present) j.field("test_mean_width", ref.test[std::size_t(l.node)].meanWidth);
    int64_t reliable = 0;
    for (uint8_t t : l.tileReliable) reliable += t;
    j.field("tiles", int64_t(l.tileShare.size())).field("reliable_tiles", reliable).endObject();
  }
  j.endArray().endObject();
}

void writeCheckBitsJson(JsonWriter& j, const StoredCheckBits& s) {
  const CheckBitsResult& r = s.result;
  j.beginObject().field("model", s.campaign.model).field("batch", s.batch).field("tau", s.tau);
  j.field("criterion", r.criterion).field("epsilon", r.epsilon);
  if (r.rtol != 0) j.field("rtol", r.rtol);
  j.field("campaign_id", s.campaign.id()).field("flips", r.flips);
  j.field("clean_accuracy", r.cleanAccuracy).field("seconds", r.seconds);
  j.field("settled_by_bound", r.settledByBound).field("reruns", r.reruns);
  confusionJson(j, "weights", r.weights);
  confusionJson(j, "activations", r.activations);
  confusionJson(j, "weights_promise", r.weightsPromise);
  confusionJson(j, "activations_promise", r.activationsPromise);
  for (const auto& [key, list] : {std::pair{"weight_layers", &r.weightLayers}, std::pair{"activation_layers", &r.activationLayers}}) {
    j.key(key).beginArray();
    for (const auto& [name, x] : *list) {
      j.beginObject().field("layer", name);
      judgedJson(j, x);
      j.endObject();
    }
    j.endArray();
  }
  for (const auto& [key, bits] : {std::pair{"weight_bits", &r.weightBits}, std::pair{"activation_bits", &r.activationBits}}) {
    j.key(key).beginArray();
    for (int b = 0; b < 32; ++b) {
      j.beginObject().field("bit", b);
      judgedJson(j, (*bits)[std::size_t(b)]);
      j.endObject();
    }
    j.endArray();
  }
  j.key("false_robust").beginArray();
  for (const auto& [k, f] : r.falseRobust) j.value(f);
  j.endArray().endObject();
}

void writeCampaignJson(JsonWriter& j, const Graph& g, const Selection& sel, const ProtectedRunner& runner,
                       const CampaignOptions& co, const CampaignResult& r, const std::string& data, bool profiledOnTest,
                       bool agreement) {
  j.beginObject().field("model", g.model).field("data", data).field("ranger_profiled_on_test", profiledOnTest);
  j.field("scored_against", agreement ? "fault-free prediction" : "labels");
  j.field("images", co.images).field("batch", co.batch);
  j.field("clean_accuracy", r.cleanAccuracy).field("reliable_bytes", sel.reliableBytes);
  j.field("unreliable_words_none", runner.unreliableWords(Scheme::None));
  j.field("unreliable_words_save", runner.unreliableWords(Scheme::Save));
  j.key("latency").beginArray();
  for (const SchemeLatency& l : r.latency)
    j.beginObject().field("scheme", schemeName(l.scheme)).field("seconds_per_batch", l.seconds).field("ratio", l.ratio)
        .field("cpu_seconds_per_batch", l.cpuSeconds).field("cpu_ratio", l.cpuRatio)
        .field("accuracy", l.accuracy).field("false_positives", l.falsePositives).endObject();
  j.endArray().key("points").beginArray();
  for (const CampaignPoint& p : r.points) {
    j.beginObject().field("scheme", schemeName(p.scheme)).field("flips", p.flips).field("accuracy", p.accuracy);
    j.field("error_rate", p.errorRate).field("detections", p.stats.detections).field("recoveries", p.stats.recoveries);
    j.field("silent", p.silent).field("faults", p.stats.faults).field("weight_repairs", p.stats.weightRepairs);
    j.field("range_violations", p.stats.rangeViolations).field("recompute_mismatches", p.stats.recomputeMismatches);
    j.field("checksum_mismatches", p.stats.checksumMismatches).field("ecc_corrected", p.stats.eccCorrected);
    j.field("ecc_detected_uncorrectable", p.stats.eccUncorrectable).field("ecc_failures", p.stats.eccFailures);
    j.field("ecc_missed", p.stats.eccMissed).field("rerun_steps", p.stats.rerunSteps).field("rerun_faults", p.stats.rerunFaults);
    j.field("unrecovered", p.stats.unrecovered).field("channel_reruns", p.stats.channelReruns);
    j.field("channel_rerun_share", p.stats.channelRerunShare);
    j.field("element_repairs", p.stats.elementRepairs).field("element_repair_share", p.stats.elementRepairShare);
    double ratio = 1;
    for (const SchemeLatency& l : r.latency)
      if (l.scheme == p.scheme) ratio = l.ratio;
    j.field("accurate_latency", ratio * (1 + p.errorRate)).endObject();
  }
  j.endArray().endObject();
}

void writeVerifiersJson(JsonWriter& j, const Graph& g, int64_t batch, const SelectionOptions& so,
                        const std::vector<VerifierCoverage>& cov) {
  j.beginObject().field("model", g.model).field("batch", batch).field("tau", so.tau);
  if (so.rtol != 0) j.field("rtol", so.rtol);
  j.key("ops").beginArray();
  for (const VerifierCoverage& c : cov) {
    j.beginObject().field("node", c.name).field("chosen", verifierKindName(c.chosen)).field("flips", c.flips);
    j.field("out_of_range", c.outOfRange).field("harmful", c.harmful);
    for (int k = 0; k < 3; ++k)
      j.key(verifierKindName(VerifierKind(k))).beginObject().field("detected", c.detected[k]).field("harmful_missed", c.harmfulMissed[k])
          .field("false_positives", c.falsePositives[k]).field("seconds", c.seconds[k]).endObject();
    j.endObject();
  }
  j.endArray().endObject();
}

}  // namespace peat::save
