// SPDX-License-Identifier: MIT
#include "core/save/results.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/save/graph.h"
#include "core/util/text.h"

namespace peat::save {

namespace {

double scalar(const store::StoredRecord& r, const std::string& key) {
  const auto it = r.scalars.find(key);
  return it == r.scalars.end() ? 0.0 : it->second;
}

std::string label(const store::StoredRecord& r, const std::string& key) {
  const auto it = r.labels.find(key);
  return it == r.labels.end() ? std::string() : it->second;
}

template <class T>
std::vector<T> array(const store::StoredRecord& r, const std::string& name, store::DType type, uint64_t count,
                     const std::string& id) {
  const auto it = r.arrays.find(name);
  if (it == r.arrays.end() || it->second.dtype != type || it->second.elementCount() != count)
    throw SaveError("SAVE result '" + id + "' has no " + name + " array of " + std::to_string(count) + " values");
  std::vector<T> out(static_cast<std::size_t>(count));
  std::memcpy(out.data(), it->second.bytes.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace

std::vector<std::string> storedAnalyses(const store::SessionReader& reader) {
  std::vector<std::string> out;
  for (const std::string& id : reader.summaryWithoutTensors().saveResults)
    if (label(reader.saveResult(id), "kind") == "save_analysis") out.push_back(id);
  return out;
}

StoredAnalysis loadAnalysis(const store::SessionReader& reader, const std::string& id) {
  const store::SessionSummary summary = reader.summaryWithoutTensors();
  if (std::find(summary.saveResults.begin(), summary.saveResults.end(), id) == summary.saveResults.end())
    throw SaveError("the session has no SAVE result '" + id + "'");
  const store::StoredRecord sum = reader.saveResult(id);
  if (label(sum, "kind") != "save_analysis") throw SaveError("SAVE result '" + id + "' is no analysis (it is one layer of one)");
  StoredAnalysis a;
  a.id = id;
  a.model = label(sum, "model");
  a.mode = label(sum, "mode");
  a.ranges = label(sum, "ranges");
  a.tau = scalar(sum, "tau");
  a.pixelLo = scalar(sum, "pixel_lo");
  a.pixelHi = scalar(sum, "pixel_hi");
  a.reliableTiles = int64_t(scalar(sum, "reliable_tiles"));
  a.totalTiles = int64_t(scalar(sum, "total_tiles"));
  a.type2 = int64_t(scalar(sum, "type2_elements"));
  a.elements = int64_t(scalar(sum, "elements"));
  a.reliableBytes = scalar(sum, "reliable_bytes");
  a.budgetBytes = scalar(sum, "budget_bytes");
  a.seconds = scalar(sum, "seconds");
  for (const std::string& name : util::splitText(label(sum, "layers"), ',')) {
    const std::string layerId = id + "." + name;
    const store::StoredRecord r = reader.saveResult(layerId);
    StoredLayer l;
    l.name = name;
    l.op = label(r, "op");
    l.elements = int64_t(scalar(r, "elements"));
    l.type2 = int64_t(scalar(r, "type2"));
    l.robustBits = scalar(r, "robust_bits");
    l.rangingBits = scalar(r, "ranging_bits");
    l.vulnerableBits = scalar(r, "vulnerable_bits");
    l.meanWidth = scalar(r, "mean_width");
    l.tilesDown = int64_t(scalar(r, "tiles_down"));
    l.tilesAcross = int64_t(scalar(r, "tiles_across"));
    l.tileRows = int64_t(scalar(r, "tile_rows"));
    l.tileCols = int64_t(scalar(r, "tile_cols"));
    if (l.tilesDown <= 0 || l.tilesAcross <= 0 || l.tilesDown * l.tilesAcross > (int64_t(1) << 28))
      throw SaveError("SAVE result '" + layerId + "' has an impossible tile grid");
    const uint64_t tiles = uint64_t(l.tilesDown * l.tilesAcross);
    l.tileShare = array<float>(r, "tile_type2_share", store::DType::F32, tiles, layerId);
    l.tileReliable = array<uint8_t>(r, "tile_reliable", store::DType::U8, tiles, layerId);
    a.layers.push_back(std::move(l));
  }
  return a;
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
    if (ls && ratio && ls->isText && !ratio->isText)
      for (std::size_t i = 0; i < ls->size(); ++i)
        for (CampaignSeries& s : c.series)
          if (s.scheme == ls->text[i]) s.latencyRatio = ratio->numbers[i];
  }
  return c;
}

}  // namespace peat::save
