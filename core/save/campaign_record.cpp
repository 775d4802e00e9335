// SPDX-License-Identifier: MIT
#include "core/save/campaign_record.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <numeric>
#include <set>

#include "core/save/graph.h"
#include "core/store/shard_set.h"
#include "core/store/table.h"
#include "core/util/campaign_key.h"
#include "core/util/text.h"

namespace peat::save {

namespace {

struct Shard {
  std::string file, run;
  int index = 0, count = 0;
  std::map<std::string, std::string> attributes;
  std::vector<h5::Column> points, latency, verifiers;
};

const h5::Column& column(const Shard& s, const std::vector<h5::Column>& table, const std::string& name) {
  if (const h5::Column* c = h5::findColumn(table, name)) return *c;
  throw SaveError(s.file + ": the points table has no column '" + name + "'");
}

bool sameTable(const std::vector<h5::Column>& a, const std::vector<h5::Column>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].isText != b[i].isText || a[i].text != b[i].text || a[i].numbers != b[i].numbers)
      return false;
  return true;
}

Shard readShard(const std::string& file) {
  if (!std::ifstream(file).good()) throw SaveError(file + ": no such file");
  Shard s;
  s.file = file;
  const store::SessionReader reader(file);
  const store::SessionSummary summary = reader.summaryWithoutTensors();
  const store::RunInfo* found = nullptr;
  int campaigns = 0;
  for (const store::RunInfo& r : summary.runs)
    if (r.spec.kind == "save_campaign" && r.attributes.count("shard")) {
      found = &r;
      ++campaigns;
    }
  if (!found) throw SaveError(file + ": holds no SAVE campaign run");
  if (campaigns > 1)
    throw SaveError(file + ": holds " + std::to_string(campaigns) + " SAVE campaign runs; give each shard its own session");
  s.run = found->name;
  s.attributes = found->attributes;
  const std::string shard = s.attributes.at("shard");
  const auto parsed = util::parseShard(shard);
  if (!parsed)
    throw SaveError(file + ": run '" + s.run + "' has the shard '" + shard + "', which is not INDEX/COUNT");
  std::tie(s.index, s.count) = *parsed;
  if (found->status != "complete")
    throw SaveError(file + ": shard " + shard + " did not finish (status " + found->status +
                    "); its finished points are kept there, rerun the shard to complete it");
  for (const char* t : {"points", "latency", "verifiers"})
    if (std::find(found->tables.begin(), found->tables.end(), t) == found->tables.end())
      throw SaveError(file + ": shard " + shard + " has no '" + t + "' table");
  s.points = reader.table(s.run, "points");
  s.latency = reader.table(s.run, "latency");
  s.verifiers = reader.table(s.run, "verifiers");
  return s;
}

}  // namespace

bool holdsCampaignShard(const std::string& file) {
  for (const store::RunInfo& r : store::SessionReader(file).summaryWithoutTensors().runs)
    if (r.spec.kind == "save_campaign" && r.attributes.count("shard")) return true;
  return false;
}

MergeSummary mergeCampaignShards(const std::vector<std::string>& files, const std::string& output,
                                 const store::Provenance& provenance) {
  if (files.empty()) throw SaveError("no shard files to merge");
  std::vector<Shard> shards;
  for (const std::string& f : files) shards.push_back(readShard(f));

  // One campaign: the same model, weights and settings, the same shard count, each shard once
  // (the check every sharded kind shares); and the same verifiers chosen.
  std::vector<store::ShardTag> tags;
  for (const Shard& s : shards) {
    const auto attribute = [&](const char* key) {
      const auto it = s.attributes.find(key);
      return it == s.attributes.end() ? std::string("(none)") : it->second;
    };
    util::CampaignKey key = util::CampaignKey().add("model", attribute("model")).add("weights", attribute("weights"));
    const util::CampaignKey settings = util::CampaignKey::parse(attribute("campaign"));
    for (const auto& [k, v] : settings.fields()) key.add(k, v);
    tags.push_back({s.file, s.index, s.count, key.text()});
  }
  const std::vector<std::size_t> order = store::checkShardSet(tags, "belongs to");
  std::map<int, const Shard*> byIndex;
  for (std::size_t i = 0; i < order.size(); ++i) byIndex[int(i)] = &shards[order[i]];
  const Shard& first = shards.front();
  for (const Shard& s : shards)
    if (!sameTable(s.verifiers, first.verifiers))
      throw SaveError(s.file + ": SAVE chose other verifiers than in " + first.file + " (another build or selection?)");

  // Every point of the campaign, in its order, from the shard that owns it (position mod count).
  const util::CampaignKey set = util::CampaignKey::parse(first.attributes.at("campaign"));
  if (set.value("flips").empty() || set.value("schemes").empty())
    throw SaveError(first.file + ": the campaign settings name no flips or schemes");
  const std::vector<std::string> flips = util::splitText(set.value("flips"), ','),
                                 schemes = util::splitText(set.value("schemes"), ',');
  std::vector<h5::Column> merged = first.points;
  for (h5::Column& c : merged) {
    c.text.clear();
    c.numbers.clear();
  }
  std::map<int, std::size_t> taken;  // rows used per shard
  std::size_t position = 0;
  for (const std::string& f : flips)
    for (const std::string& scheme : schemes) {
      const Shard& s = *byIndex.at(int(position++ % std::size_t(first.count)));
      std::size_t& row = taken[s.index];
      const h5::Column& sc = column(s, s.points, "scheme");
      const h5::Column& fc = column(s, s.points, "flips");
      if (row >= sc.size() || sc.text[row] != scheme || std::to_string(int64_t(fc.numbers[row])) != f)
        throw SaveError(s.file + ": shard " + std::to_string(s.index) + "/" + std::to_string(s.count) +
                        " does not hold the point (" + scheme + ", " + f + " flips) where its campaign puts it");
      for (std::size_t c = 0; c < merged.size(); ++c) {
        const h5::Column& from = s.points[c];
        if (from.name != merged[c].name) throw SaveError(s.file + ": its points table has other columns");
        if (from.isText)
          merged[c].text.push_back(from.text[row]);
        else
          merged[c].numbers.push_back(from.numbers[row]);
      }
      ++row;
    }
  for (const Shard& s : shards)
    if (taken[s.index] != column(s, s.points, "scheme").size())
      throw SaveError(s.file + ": shard " + std::to_string(s.index) + "/" + std::to_string(s.count) +
                      " holds points its campaign does not have");

  // All checks passed: write.
  const bool exists = std::ifstream(output).good();
  store::Provenance prov = provenance;
  if (prov.model.empty() && first.attributes.count("model")) prov.model = first.attributes.at("model");
  store::SessionWriter w(output, prov, exists ? store::WriteMode::Append : store::WriteMode::Create);
  std::string name = "save-campaign";
  for (int k = 2; w.hasRun(name); ++k) name = "save-campaign-" + std::to_string(k);
  w.beginRun({name, "save_campaign", "golden", "SAVE campaign: accuracy against faults per scheme (merged shards)"});
  const std::set<std::string> own{"shard", "kind", "kernel", "description", "status", "started", "finished"};
  for (const auto& [key, value] : first.attributes)
    if (!own.count(key)) w.setRunAttribute(key, value);
  w.setRunAttribute("shard", "merged " + std::to_string(first.count));
  std::string from;
  for (int i = 0; i < first.count; ++i) from += (i ? "," : "") + byIndex.at(i)->file;
  w.setRunAttribute("merged_from", from);
  w.setRunAttribute("latency_from", "shard 0/" + std::to_string(first.count) + " (" + byIndex.at(0)->file + ")");
  w.writeTable("verifiers", first.verifiers);
  w.writeTable("latency", byIndex.at(0)->latency);
  w.writeTable("points", merged);
  w.endRun(store::RunStatus::Complete);
  MergeSummary out;
  out.run = name;
  out.shards = first.count;
  out.points = int64_t(merged.front().size());
  return out;
}

std::string beginCampaignRun(store::SessionWriter& w, const CampaignRunInfo& info,
                             const std::vector<VerifierChoice>& verifiers) {
  std::string name = "save-campaign";
  for (int k = 2; w.hasRun(name); ++k) name = "save-campaign-" + std::to_string(k);
  w.beginRun({name, "save_campaign", "golden", "SAVE campaign: accuracy against faults per scheme"});
  w.setRunAttribute("model", info.model);
  w.setRunAttribute("weights", info.weights);
  w.setRunAttribute("shard", info.shard);
  using T = store::TableBuilder;
  T v({{"node", T::Text}, {"kind", T::Text}, {"abft_tolerance", T::Number}, {"mixed_bound", T::Number},
       {"reason", T::Text}});
  const char* kinds[] = {"recompute", "abft", "mixed"};
  for (const VerifierChoice& c : verifiers) v.row({c.name, kinds[int(c.kind)], c.reason}, {c.tolerance, c.mixedTolerance});
  w.writeTable("verifiers", v.columns());
  w.setRunAttribute("campaign", info.settings);
  return name;
}

void writeCampaignTables(store::SessionWriter& w, const CampaignResult& r, bool latency) {
  if (latency) {
    store::TableBuilder t({"scheme"}, {"seconds_per_batch", "ratio", "accuracy", "false_positives", "cpu_seconds_per_batch", "cpu_ratio"});
    for (const SchemeLatency& l : r.latency)
      t.row({schemeName(l.scheme)}, {l.seconds, l.ratio, l.accuracy, double(l.falsePositives), l.cpuSeconds, l.cpuRatio});
    w.writeTable("latency", t.columns());
  }
  store::TableBuilder t({"scheme"}, {"flips", "accuracy", "error_rate", "detections", "recoveries", "weight_repairs",
                                     "range_violations", "recompute_mismatches", "faults", "seconds"});
  for (const CampaignPoint& p : r.points)
    t.row({schemeName(p.scheme)},
          {double(p.flips), p.accuracy, p.errorRate, double(p.stats.detections), double(p.stats.recoveries),
           double(p.stats.weightRepairs), double(p.stats.rangeViolations), double(p.stats.recomputeMismatches),
           double(p.stats.faults), p.seconds});
  w.writeTable("points", t.columns());
}

StoredCampaign loadCampaign(const store::SessionReader& reader, const std::string& run) {
  const store::SessionSummary summary = reader.summaryWithoutTensors();
  const store::RunInfo* info = nullptr;
  for (const store::RunInfo& r : summary.runs)
    if (r.name == run) info = &r;
  if (!info) throw SaveError("the session has no run '" + run + "'");
  if (info->spec.kind != "save_campaign" ||
      std::find(info->tables.begin(), info->tables.end(), "points") == info->tables.end())
    throw SaveError("run '" + run + "' is no SAVE campaign with points");
  StoredCampaign c;
  c.run = run;
  auto attribute = [&](const char* key) {
    const auto it = info->attributes.find(key);
    return it == info->attributes.end() ? std::string() : it->second;
  };
  c.model = attribute("model");
  c.shard = attribute("shard");
  c.settings = attribute("campaign");
  const std::vector<h5::Column> points = reader.table(run, "points");
  const h5::Column* scheme = h5::findColumn(points, "scheme");
  const h5::Column* flips = h5::findColumn(points, "flips");
  const h5::Column* accuracy = h5::findColumn(points, "accuracy");
  const h5::Column* errorRate = h5::findColumn(points, "error_rate");
  if (!scheme || !flips || !accuracy || !scheme->isText || flips->isText || accuracy->isText)
    throw SaveError("run '" + run + "' has a points table without scheme, flips and accuracy");
  for (std::size_t i = 0; i < scheme->size(); ++i) {
    auto it = std::find_if(c.series.begin(), c.series.end(), [&](const CampaignSeries& s) { return s.scheme == scheme->text[i]; });
    if (it == c.series.end()) {
      c.series.push_back({scheme->text[i], {}, {}, {}, 0});
      it = std::prev(c.series.end());
    }
    it->flips.push_back(flips->numbers[i]);
    it->accuracy.push_back(accuracy->numbers[i]);
    it->errorRate.push_back(errorRate && !errorRate->isText ? errorRate->numbers[i] : 0.0);
  }
  for (CampaignSeries& s : c.series) {  // by flips
    std::vector<std::size_t> order(s.flips.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return s.flips[a] < s.flips[b]; });
    CampaignSeries sorted{s.scheme, {}, {}, {}, 0};
    for (std::size_t k : order) {
      sorted.flips.push_back(s.flips[k]);
      sorted.accuracy.push_back(s.accuracy[k]);
      sorted.errorRate.push_back(s.errorRate[k]);
    }
    s = std::move(sorted);
  }
  if (std::find(info->tables.begin(), info->tables.end(), "latency") != info->tables.end()) {
    const std::vector<h5::Column> latency = reader.table(run, "latency");
    const h5::Column* ls = h5::findColumn(latency, "scheme");
    const h5::Column* ratio = h5::findColumn(latency, "ratio");
    const h5::Column* cpu = h5::findColumn(latency, "cpu_ratio");
    if (ls && ratio && ls->isText && !ratio->isText)
      for (std::size_t i = 0; i < ls->size(); ++i)
        for (CampaignSeries& s : c.series)
          if (s.scheme == ls->text[i]) {
            s.latencyRatio = ratio->numbers[i];
            if (cpu && !cpu->isText && i < cpu->size()) s.cpuRatio = cpu->numbers[i];
          }
  }
  return c;
}

}  // namespace peat::save
