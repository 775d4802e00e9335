// SPDX-License-Identifier: MIT
#include "core/save/check_bits_record.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <tuple>

#include "core/save/graph.h"
#include "core/save/save_session.h"
#include "core/store/shard_set.h"
#include "core/util/text.h"

namespace peat::save {

namespace {

constexpr const char* kKind = "save_check_bits";
const char* const kCells[] = {"robust_robust", "robust_vulnerable", "protected_robust", "protected_vulnerable"};

std::string joinLines(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : "\n") + s;
  return out;
}

void putConfusion(store::ResultRecord& rec, const std::string& prefix, const Confusion& c) {
  const uint64_t cells[] = {c.robustRobust, c.robustVulnerable, c.protectedRobust, c.protectedVulnerable};
  for (int i = 0; i < 4; ++i) rec.scalars[prefix + "_" + kCells[i]] = double(cells[i]);
}

Confusion getConfusion(const store::StoredRecord& rec, const std::string& prefix, const std::string& where) {
  uint64_t cells[4];
  for (int i = 0; i < 4; ++i) {
    const auto it = rec.scalars.find(prefix + "_" + kCells[i]);
    if (it == rec.scalars.end() || !(it->second >= 0)) throw SaveError(where + ": no count '" + prefix + "_" + kCells[i] + "'");
    cells[i] = uint64_t(it->second);
  }
  Confusion c;
  c.robustRobust = cells[0], c.robustVulnerable = cells[1], c.protectedRobust = cells[2], c.protectedVulnerable = cells[3];
  return c;
}

const std::string& label(const store::StoredRecord& rec, const std::string& key, const std::string& where) {
  const auto it = rec.labels.find(key);
  if (it == rec.labels.end()) throw SaveError(where + ": the check-bits result has no '" + key + "'");
  return it->second;
}

double scalar(const store::StoredRecord& rec, const std::string& key, const std::string& where) {
  const auto it = rec.scalars.find(key);
  if (it == rec.scalars.end()) throw SaveError(where + ": the check-bits result has no '" + key + "'");
  return it->second;
}

// Two confusions (top-1, then the promise) from eight counts at `at`.
Judged judgedAt(const std::vector<uint64_t>& v, std::size_t at) {
  Judged j;
  for (Confusion* c : {&j.top1, &j.promise}) {
    c->robustRobust = v[at], c->robustVulnerable = v[at + 1], c->protectedRobust = v[at + 2], c->protectedVulnerable = v[at + 3];
    at += 4;
  }
  return j;
}

void putJudged(std::vector<uint64_t>& v, const Judged& j) {
  for (const Confusion* c : {&j.top1, &j.promise})
    for (uint64_t x : {c->robustRobust, c->robustVulnerable, c->protectedRobust, c->protectedVulnerable}) v.push_back(x);
}

const std::vector<uint64_t> u64s(const store::StoredRecord& rec, const std::string& key, uint64_t columns,
                                 const std::string& where) {
  const auto it = rec.arrays.find(key);
  if (it == rec.arrays.end() || it->second.dtype != store::DType::U64 || it->second.shape.size() != 2 ||
      it->second.shape[1] != columns)
    throw SaveError(where + ": the check-bits result has no array '" + key + "' of " + std::to_string(columns) + " columns");
  std::vector<uint64_t> out(std::size_t(it->second.elementCount()));
  std::memcpy(out.data(), it->second.bytes.data(), out.size() * sizeof(uint64_t));
  return out;
}

std::pair<int, int> parseShardText(const std::string& text, const std::string& where) {
  if (const auto shard = util::parseShard(text)) return *shard;
  throw SaveError(where + ": the shard '" + text + "' is not INDEX/COUNT");
}

// The record without its arrays (a ResultRecord borrows them: writeCheckBits owns them).
store::ResultRecord checkBitsRecord(const CheckBitsCampaign& c, int64_t batch, double tau, const CheckBitsResult& r) {
  store::ResultRecord rec;
  rec.labels = {{"kind", kKind},
                {"model", c.model},
                {"weights", c.weights},
                {"campaign", c.settings},
                {"campaign_id", c.id()},
                {"shard", std::to_string(c.shardIndex) + "/" + std::to_string(c.shardCount)}};
  putConfusion(rec, "weights", r.weights);
  putConfusion(rec, "activations", r.activations);
  putConfusion(rec, "weights_promise", r.weightsPromise);
  putConfusion(rec, "activations_promise", r.activationsPromise);
  rec.labels["criterion"] = r.criterion;
  rec.scalars["epsilon"] = r.epsilon;
  if (r.rtol != 0) rec.scalars["rtol"] = r.rtol;
  rec.scalars["batch"] = double(batch);
  rec.scalars["tau"] = tau;
  rec.scalars["seconds"] = r.seconds;
  rec.scalars["clean_accuracy"] = r.cleanAccuracy;
  rec.scalars["settled_by_bound"] = double(r.settledByBound);
  rec.scalars["reruns"] = double(r.reruns);
  rec.scalars["flips"] = double(r.flips);
  std::vector<std::string> layerNames, activationNames, falseRobust;
  for (const auto& [name, conf] : r.weightLayers) layerNames.push_back(name);
  for (const auto& [name, conf] : r.activationLayers) activationNames.push_back(name);
  for (const auto& [k, text] : r.falseRobust) falseRobust.push_back(text);
  rec.labels["layers"] = joinLines(layerNames);
  rec.labels["activation_layers"] = joinLines(activationNames);
  rec.labels["false_robust"] = joinLines(falseRobust);
  return rec;
}

}  // namespace

std::string CheckBitsCampaign::id() const {
  const std::string text = model + "\n" + weights + "\n" + settings;
  const uLong crc = crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(text.data()), z_size_t(text.size()));
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08lx", static_cast<unsigned long>(crc & 0xffffffffUL));
  return hex;
}

StoredCheckBits checkBitsFromRecord(const store::StoredRecord& rec, const std::string& where) {
  if (label(rec, "kind", where) != kKind) throw SaveError(where + ": is no check-bits result");
  StoredCheckBits s;
  s.campaign.model = label(rec, "model", where);
  s.campaign.weights = label(rec, "weights", where);
  s.campaign.settings = rec.labels.count("campaign") ? rec.labels.at("campaign") : "";
  if (rec.labels.count("shard")) {
    const std::string& shard = rec.labels.at("shard");
    if (shard.rfind("merged", 0) != 0)
      std::tie(s.campaign.shardIndex, s.campaign.shardCount) = parseShardText(shard, where);
  }
  s.batch = int64_t(scalar(rec, "batch", where));
  s.tau = scalar(rec, "tau", where);
  CheckBitsResult& r = s.result;
  r.weights = getConfusion(rec, "weights", where);
  r.activations = getConfusion(rec, "activations", where);
  r.weightsPromise = getConfusion(rec, "weights_promise", where);
  r.activationsPromise = getConfusion(rec, "activations_promise", where);
  r.criterion = label(rec, "criterion", where);
  r.epsilon = scalar(rec, "epsilon", where);
  r.rtol = rec.scalars.count("rtol") ? rec.scalars.at("rtol") : 0.0;  // absent: written before --rtol, or 0
  r.seconds = scalar(rec, "seconds", where);
  r.cleanAccuracy = scalar(rec, "clean_accuracy", where);
  r.settledByBound = uint64_t(scalar(rec, "settled_by_bound", where));
  r.reruns = uint64_t(scalar(rec, "reruns", where));
  r.flips = uint64_t(scalar(rec, "flips", where));
  const std::vector<uint64_t> byBit = u64s(rec, "bit_confusions", 16, where);
  if (byBit.size() != 32 * 16) throw SaveError(where + ": the per-bit counts are not 32 x 16");
  for (std::size_t b = 0; b < 32; ++b) {
    r.weightBits[b] = judgedAt(byBit, 16 * b);
    r.activationBits[b] = judgedAt(byBit, 16 * b + 8);
  }
  for (const auto& [key, names, list] : {std::tuple{"layers", "layer_confusions", &r.weightLayers},
                                         std::tuple{"activation_layers", "activation_layer_confusions", &r.activationLayers}}) {
    const std::vector<std::string> layerNames = util::splitText(label(rec, key, where), '\n');
    const std::vector<uint64_t> counts = u64s(rec, names, 8, where);
    if (counts.size() != layerNames.size() * 8) throw SaveError(where + ": the layer names and counts do not match");
    for (std::size_t i = 0; i < layerNames.size(); ++i) list->emplace_back(layerNames[i], judgedAt(counts, 8 * i));
  }
  const std::vector<std::string> texts = util::splitText(label(rec, "false_robust", where), '\n');
  const std::vector<uint64_t> positions = u64s(rec, "false_robust_positions", 1, where);
  if (positions.size() != texts.size()) throw SaveError(where + ": the false-robust list and its positions do not match");
  for (std::size_t i = 0; i < texts.size(); ++i) r.falseRobust.emplace_back(positions[i], texts[i]);
  return s;
}

std::vector<std::pair<std::string, StoredCheckBits>> checkBitsShardsIn(const std::string& session) {
  const store::SessionReader reader(session);
  std::vector<std::pair<std::string, StoredCheckBits>> out;
  for (const std::string& id : reader.summaryWithoutTensors().saveResults) {
    const store::StoredRecord rec = reader.saveResult(id);
    const auto kind = rec.labels.find("kind"), shard = rec.labels.find("shard");
    if (kind == rec.labels.end() || kind->second != kKind || shard == rec.labels.end() ||
        shard->second.rfind("merged", 0) == 0)
      continue;
    out.emplace_back(id, checkBitsFromRecord(rec, session + ": result '" + id + "'"));
  }
  return out;
}

StoredCheckBits mergeCheckBitsShards(const std::vector<std::string>& files, const std::string& output,
                                     const store::Provenance& provenance, std::string* storedAs) {
  if (files.empty()) throw SaveError("no shard files to merge");
  std::vector<std::pair<std::string, StoredCheckBits>> shards;  // file, result
  for (const std::string& f : files) {
    if (!std::ifstream(f).good()) throw SaveError(f + ": no such file");
    auto in = checkBitsShardsIn(f);
    if (in.empty()) throw SaveError(f + ": holds no check-bits shard");
    if (in.size() > 1)
      throw SaveError(f + ": holds " + std::to_string(in.size()) + " check-bits shards; give each shard its own session");
    shards.emplace_back(f, std::move(in.front().second));
  }
  // One campaign (model, weights and settings), one count, each index once: the merges' common check.
  std::vector<store::ShardTag> tags;
  for (const auto& [file, s] : shards)
    tags.push_back({file, s.campaign.shardIndex, s.campaign.shardCount,
                    "model=" + s.campaign.model + ";weights=" + s.campaign.weights + ";" + s.campaign.settings});
  store::checkShardSet(tags, "belongs to");
  const auto& [firstFile, first] = shards.front();
  const int count = first.campaign.shardCount;

  StoredCheckBits merged;
  merged.campaign = first.campaign;
  merged.campaign.shardIndex = 0;
  merged.campaign.shardCount = 1;
  merged.batch = first.batch;
  merged.tau = first.tau;
  CheckBitsResult& m = merged.result;
  m.cleanAccuracy = first.result.cleanAccuracy;
  m.criterion = first.result.criterion;
  m.epsilon = first.result.epsilon;
  m.rtol = first.result.rtol;
  m.weightLayers = first.result.weightLayers;
  m.activationLayers = first.result.activationLayers;
  for (auto* list : {&m.weightLayers, &m.activationLayers})
    for (auto& [name, j] : *list) j = Judged{};
  for (const auto& [file, s] : shards) {
    const CheckBitsResult& r = s.result;
    auto sameNames = [](const auto& a, const auto& b) {
      return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](const auto& x, const auto& y) { return x.first == y.first; });
    };
    if (!sameNames(r.weightLayers, m.weightLayers) || !sameNames(r.activationLayers, m.activationLayers))
      throw SaveError(file + ": its layers differ from " + firstFile + "'s");
    m.weights.merge(r.weights);
    m.activations.merge(r.activations);
    m.weightsPromise.merge(r.weightsPromise);
    m.activationsPromise.merge(r.activationsPromise);
    for (std::size_t b = 0; b < 32; ++b) {
      m.weightBits[b].merge(r.weightBits[b]);
      m.activationBits[b].merge(r.activationBits[b]);
    }
    for (std::size_t i = 0; i < r.weightLayers.size(); ++i) m.weightLayers[i].second.merge(r.weightLayers[i].second);
    for (std::size_t i = 0; i < r.activationLayers.size(); ++i) m.activationLayers[i].second.merge(r.activationLayers[i].second);
    m.settledByBound += r.settledByBound;
    m.reruns += r.reruns;
    m.flips += r.flips;
    m.seconds += r.seconds;
    keepFirstFalseRobust(m.falseRobust, r.falseRobust);
  }

  if (!output.empty()) {
    const bool exists = std::ifstream(output).good();
    store::Provenance prov = provenance;
    if (prov.model.empty()) prov.model = merged.campaign.model;
    store::SessionWriter w(output, prov, exists ? store::WriteMode::Append : store::WriteMode::Create);
    const std::string base = resultBase(merged.campaign.model) + "-check-bits";
    const std::string id = exists ? freeResultId(output, base) : base;
    writeCheckBits(w, id, merged, "merged " + std::to_string(count));
    if (storedAs) *storedAs = id;
  }
  return merged;
}

void writeCheckBits(store::SessionWriter& w, const std::string& id, const StoredCheckBits& s, const std::string& shard) {
  store::ResultRecord rec = checkBitsRecord(s.campaign, s.batch, s.tau, s.result);
  rec.labels["shard"] = shard;
  const CheckBitsResult& r = s.result;
  std::vector<uint64_t> byBit, layers, activationLayers, positions;
  for (std::size_t b = 0; b < 32; ++b) {
    putJudged(byBit, r.weightBits[b]);
    putJudged(byBit, r.activationBits[b]);
  }
  for (const auto& [name, j] : r.weightLayers) putJudged(layers, j);
  for (const auto& [name, j] : r.activationLayers) putJudged(activationLayers, j);
  for (const auto& [k, text] : r.falseRobust) positions.push_back(k);
  rec.arrays = {{"bit_confusions", {store::DType::U64, {32, 16}, byBit.data()}},
                {"layer_confusions", {store::DType::U64, {uint64_t(r.weightLayers.size()), 8}, layers.data()}},
                {"activation_layer_confusions", {store::DType::U64, {uint64_t(r.activationLayers.size()), 8}, activationLayers.data()}},
                {"false_robust_positions", {store::DType::U64, {uint64_t(positions.size()), 1}, positions.data()}}};
  w.writeSaveResult(id, rec);
}

}  // namespace peat::save
