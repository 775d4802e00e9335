// SPDX-License-Identifier: MIT
#include "core/save/campaign_merge.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "core/save/graph.h"
#include "core/util/text.h"

namespace peat::save {

namespace {

struct Shard {
  std::string file, run;
  int index = 0, count = 0;
  std::map<std::string, std::string> attributes;
  std::vector<h5::Column> points, latency, verifiers;
};

// "flips=1,2;schemes=none,save;..." -> {"flips": "1,2", ...}
std::map<std::string, std::string> settings(const std::string& campaign) {
  std::map<std::string, std::string> out;
  for (const std::string& kv : util::splitText(campaign, ';')) {
    const auto eq = kv.find('=');
    if (eq != std::string::npos) out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

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

MergeSummary mergeCampaignShards(const std::vector<std::string>& files, const std::string& output,
                                 const store::Provenance& provenance) {
  if (files.empty()) throw SaveError("no shard files to merge");
  std::vector<Shard> shards;
  for (const std::string& f : files) shards.push_back(readShard(f));

  // One campaign: the same model, weights and settings, the same shard count.
  const Shard& first = shards.front();
  for (const Shard& s : shards) {
    for (const char* key : {"model", "weights", "campaign"}) {
      const auto a = first.attributes.find(key), b = s.attributes.find(key);
      const std::string va = a == first.attributes.end() ? "(none)" : a->second;
      const std::string vb = b == s.attributes.end() ? "(none)" : b->second;
      if (va == vb) continue;
      std::string what = std::string(key) + " '" + vb + "' vs '" + va + "'";
      if (std::string(key) == "campaign") {  // name the settings that differ
        const auto sa = settings(va), sb = settings(vb);
        what.clear();
        for (const auto& [k, v] : sb) {
          const auto other = sa.find(k);
          if (other == sa.end() || other->second != v)
            what += (what.empty() ? "" : ", ") + k + " " + v + " vs " + (other == sa.end() ? "(none)" : other->second);
        }
        if (what.empty()) what = "campaign settings differ";
      }
      throw SaveError(s.file + ": belongs to another campaign than " + first.file + " (" + what + ")");
    }
    if (s.count != first.count)
      throw SaveError(s.file + ": is a shard of " + std::to_string(s.count) + ", " + first.file + " one of " +
                      std::to_string(first.count));
    if (!sameTable(s.verifiers, first.verifiers))
      throw SaveError(s.file + ": SAVE chose other verifiers than in " + first.file + " (another build or selection?)");
  }
  std::map<int, const Shard*> byIndex;
  for (const Shard& s : shards) {
    auto [it, fresh] = byIndex.emplace(s.index, &s);
    if (!fresh)
      throw SaveError("shard " + std::to_string(s.index) + "/" + std::to_string(s.count) + " appears twice: " +
                      it->second->file + " and " + s.file);
  }
  for (int i = 0; i < first.count; ++i)
    if (!byIndex.count(i))
      throw SaveError("shard " + std::to_string(i) + "/" + std::to_string(first.count) + " is missing (run it with --shard " +
                      std::to_string(i) + "/" + std::to_string(first.count) + ")");

  // Every point of the campaign, in its order, from the shard that owns it (position mod count).
  const std::map<std::string, std::string> set = settings(first.attributes.at("campaign"));
  if (!set.count("flips") || !set.count("schemes"))
    throw SaveError(first.file + ": the campaign settings name no flips or schemes");
  const std::vector<std::string> flips = util::splitText(set.at("flips"), ','), schemes = util::splitText(set.at("schemes"), ',');
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

}  // namespace peat::save
