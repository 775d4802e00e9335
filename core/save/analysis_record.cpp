// SPDX-License-Identifier: MIT
#include "core/save/analysis_record.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/save/graph.h"
#include "core/util/text.h"

namespace peat::save {

namespace {

// "a=0,1;b=-1,1": the named inputs' ranges as one label (names hold no ';' in practice; a name
// that does is stored with it, and the reload then refuses the range by name)
std::string inputRangesText(const std::vector<std::string>& ranges) {
  std::string t;
  for (const std::string& e : ranges) t += (t.empty() ? "" : ";") + e;
  return t;
}


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

// One layer's record (`layerId`: "<analysis>.<name>"), its counts and tile map.
StoredLayer storedLayer(const store::StoredRecord& r, const std::string& name, const std::string& layerId) {
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
  if (r.arrays.count("tile_vulnerable_bits"))  // written since issue 43; older sessions lack it
    l.tileVulnerableBits = array<float>(r, "tile_vulnerable_bits", store::DType::F32, tiles, layerId);
  return l;
}

// The summary record of analysis `id`; throws SaveError when the session has none of that name.
store::StoredRecord analysisSummary(const store::SessionReader& reader, const std::string& id) {
  const store::SessionSummary summary = reader.summaryWithoutTensors();
  if (std::find(summary.saveResults.begin(), summary.saveResults.end(), id) == summary.saveResults.end())
    throw SaveError("the session has no SAVE result '" + id + "'");
  store::StoredRecord sum = reader.saveResult(id);
  if (label(sum, "kind") != "save_analysis") throw SaveError("SAVE result '" + id + "' is no analysis (it is one layer of one)");
  return sum;
}

}  // namespace

void writeAnalysis(store::SessionWriter& w, const std::string& id, const Selection& s, const ModelSource& source,
                   const TightnessReference* ref) {
  std::string layers;
  // every record built first and written as a whole (none left behind when one fails)
  std::vector<store::ResultRecord> records;
  std::vector<std::vector<uint64_t>> perBits;  // the arrays' storage, alive until written
  records.reserve(s.layers.size() + 1);
  perBits.reserve(s.layers.size());
  for (const LayerSelection& l : s.layers) {
    const NodeRange& r = s.ranges.nodes[std::size_t(l.node)];
    store::ResultRecord& rec = records.emplace_back();
    rec.labels = {{"kind", "save_layer"}, {"analysis", id}, {"node", l.name}, {"op", l.op}};
    rec.scalars = {{"elements", double(l.elements)},       {"type2", double(l.type2)},
                   {"robust_bits", double(l.robustBits)},  {"ranging_bits", double(l.rangingBits)},
                   {"vulnerable_bits", double(l.vulnerableBits)}, {"mean_width", l.meanWidth},
                   {"tile_rows", double(s.options.tileRows)}, {"tile_cols", double(s.options.tileCols)},
                   {"tiles_down", double(l.tilesDown)},    {"tiles_across", double(l.tilesAcross)},
                   {"feeds_relu", l.feedsRelu ? 1.0 : 0.0}};
    if (ref) rec.scalars["test_mean_width"] = ref->test[std::size_t(l.node)].meanWidth;
    std::vector<uint64_t>& perBit = perBits.emplace_back();
    for (const auto& row : l.perBit) perBit.insert(perBit.end(), row.begin(), row.end());
    const uint64_t n = uint64_t(l.elements);
    rec.arrays = {
        {"lo", {store::DType::F64, {n}, r.lo.data()}},
        {"hi", {store::DType::F64, {n}, r.hi.data()}},
        {"robust_mask", {store::DType::U32, {n}, l.robustMask.data()}},
        {"ranging_mask", {store::DType::U32, {n}, l.rangingMask.data()}},
        {"shape", {store::DType::I64, {uint64_t(l.shape.size())}, l.shape.data()}},
        {"bit_class_counts", {store::DType::U64, {32, 3}, perBit.data()}},
        {"tile_type2_share", {store::DType::F32, {uint64_t(l.tilesDown), uint64_t(l.tilesAcross)}, l.tileShare.data()}},
        {"tile_reliable", {store::DType::U8, {uint64_t(l.tilesDown), uint64_t(l.tilesAcross)}, l.tileReliable.data()}},
        {"tile_vulnerable_bits",
         {store::DType::F32, {uint64_t(l.tilesDown), uint64_t(l.tilesAcross)}, l.tileVulnerableBits.data()}},
    };
    layers += (layers.empty() ? "" : ",") + l.name;
  }
  store::ResultRecord& sum = records.emplace_back();
  sum.labels = {{"kind", "save_analysis"}, {"model", s.model}, {"mode", s.mode}, {"layers", layers},
                {"weights", source.weights}, {"weights_run", source.run},
                {"model_source", source.model}, {"input_mean", numberListText(source.inputMean)},
                {"input_std", numberListText(source.inputStd)}, {"random_weights", std::to_string(source.randomSeed)},
                {"input_ranges", inputRangesText(source.inputRanges)},
                {"ranges", s.sound ? "sound" : "unsound (profiled)"},
                {"criterion", s.options.criterion}, {"placement", s.options.placement}};
  sum.scalars = {{"pixel_lo", s.options.pixelLo},          {"pixel_hi", s.options.pixelHi},
                 {"tau", s.options.tau},                   {"depth", double(s.options.ranges.depth)},
                 {"splits", double(s.options.ranges.splits)}, {"budget_bytes", double(s.budgetBytes > 0 ? s.budgetBytes : s.options.budgetBytes)},
                 {"tile_bytes", double(s.tileBytes)},       {"reliable_tiles", double(s.reliableTiles)},
                 {"total_tiles", double(s.totalTiles)},     {"reliable_bytes", double(s.reliableBytes)},
                 {"type2_elements", double(s.type2Elements)}, {"elements", double(s.elements)},
                 {"range_seconds", s.rangeSeconds},         {"seconds", s.seconds},
                 {"epsilon", s.options.epsilon},           {"working_set_bytes", double(s.workingSetBytes)},
                 {"recompute_work", s.recomputeWork},      {"recompute_work_random_placement", s.randomPlacementWork},
                 {"recompute_work_without_reliable_memory", s.recomputeAllWork},
                 {"weights_iteration", double(source.iteration)}};
  if (s.options.rtol != 0) sum.scalars["rtol"] = s.options.rtol;
  if (ref) {
    const Tightness out = tightnessOf(s.ranges.nodes[std::size_t(s.layers.back().node)]);
    sum.scalars["ascent_union_width"] = ref->ascent.unionHi - ref->ascent.unionLo;
    sum.scalars["interval_union_width"] = ref->interval.unionHi - ref->interval.unionLo;
    sum.scalars["union_width"] = out.unionHi - out.unionLo;
  }
  std::vector<std::pair<std::string, const store::ResultRecord*>> named;
  for (std::size_t i = 0; i < s.layers.size(); ++i) named.push_back({id + "." + s.layers[i].name, &records[i]});
  named.push_back({id, &sum});
  w.writeSaveResults(named);
}

std::vector<std::string> storedAnalyses(const store::SessionReader& reader) {
  std::vector<std::string> out;
  for (const std::string& id : reader.summaryWithoutTensors().saveResults)
    if (label(reader.saveResult(id), "kind") == "save_analysis") out.push_back(id);
  return out;
}

StoredAnalysis loadAnalysis(const store::SessionReader& reader, const std::string& id) {
  const store::StoredRecord sum = analysisSummary(reader, id);
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
  a.criterion = label(sum, "criterion").empty() ? "value" : label(sum, "criterion");
  a.epsilon = scalar(sum, "epsilon");
  a.rtol = sum.scalars.count("rtol") ? sum.scalars.at("rtol") : 0.0;  // absent: 0 (or written before --rtol)
  a.workingSetBytes = scalar(sum, "working_set_bytes");
  a.recomputeWork = scalar(sum, "recompute_work");
  a.randomPlacementWork = scalar(sum, "recompute_work_random_placement");
  a.recomputeAllWork = scalar(sum, "recompute_work_without_reliable_memory");
  a.source.model = label(sum, "model_source").empty() ? a.model : label(sum, "model_source");
  a.source.weights = label(sum, "weights");
  if (!label(sum, "weights_run").empty()) a.source.run = label(sum, "weights_run");
  if (sum.scalars.count("weights_iteration")) a.source.iteration = int64_t(scalar(sum, "weights_iteration"));
  if (const std::string seed = label(sum, "random_weights"); !seed.empty()) {
    std::size_t used = 0;
    try {
      a.source.randomSeed = std::stoull(seed, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != seed.size()) throw SaveError("SAVE result '" + id + "' has a random seed '" + seed + "' that is no number");
  }
  for (auto [text, into] : {std::pair{label(sum, "input_mean"), &a.source.inputMean}, std::pair{label(sum, "input_std"), &a.source.inputStd}})
    if (!text.empty())
      for (double v : util::parseNumberList(text, "the stored input normalisation")) into->push_back(float(v));
  for (const std::string& e : util::splitText(label(sum, "input_ranges"), ';'))  // absent before 2026-12-06
    if (!e.empty()) a.source.inputRanges.push_back(e);
  for (const std::string& name : util::splitText(label(sum, "layers"), ','))
    a.layers.push_back(storedLayer(reader.saveResult(id + "." + name), name, id + "." + name));
  return a;
}

LayerMap loadLayerMap(const store::SessionReader& reader, const std::string& analysis, const std::string& layer) {
  // the summary's list of layers, then that one layer's record only (not every layer's values)
  const std::vector<std::string> names = util::splitText(label(analysisSummary(reader, analysis), "layers"), ',');
  if (std::find(names.begin(), names.end(), layer) == names.end())
    throw SaveError("SAVE analysis '" + analysis + "' has no layer '" + layer + "'");
  const std::string id = analysis + "." + layer;
  const store::StoredRecord r = reader.saveResult(id);
  const StoredLayer stored = storedLayer(r, layer, id);
  LayerMap m;
  m.analysis = analysis;
  m.name = stored.name;
  m.op = stored.op;
  const auto shapeIt = r.arrays.find("shape");
  if (shapeIt == r.arrays.end())
    throw SaveError("SAVE result '" + id + "' stores no layer shape (written by an older build): run peat save analyze again");
  const uint64_t dims = shapeIt->second.elementCount();
  if (dims < 1 || dims > 4) throw SaveError("SAVE result '" + id + "' has a shape of " + std::to_string(dims) + " dimensions");
  m.shape = array<int64_t>(r, "shape", store::DType::I64, dims, id);
  int64_t n = 1;
  for (int64_t d : m.shape) {
    if (d <= 0 || d > (int64_t(1) << 31)) throw SaveError("SAVE result '" + id + "' has an impossible shape");
    n *= d;
    if (n > (int64_t(1) << 31)) throw SaveError("SAVE result '" + id + "' has an impossible shape");
  }
  if (n != stored.elements) throw SaveError("SAVE result '" + id + "': its shape does not hold its " + std::to_string(stored.elements) + " elements");
  m.rows = m.shape.size() >= 2 ? m.shape[0] : 1;
  m.cols = n / m.rows;
  if (m.shape.size() >= 3) {
    m.channels = m.shape[0];
    m.width = m.shape.back();
    m.height = n / m.channels / m.width;
  } else if (m.shape.size() == 2) {
    m.height = m.shape[0];
    m.width = m.shape[1];
  } else {
    m.width = n;
  }
  m.tileRows = stored.tileRows;
  m.tileCols = stored.tileCols;
  m.tilesDown = stored.tilesDown;
  m.tilesAcross = stored.tilesAcross;
  if (m.tileRows <= 0 || m.tileCols <= 0 || (m.rows + m.tileRows - 1) / m.tileRows != m.tilesDown ||
      (m.cols + m.tileCols - 1) / m.tileCols != m.tilesAcross)
    throw SaveError("SAVE result '" + id + "': its tile grid does not cover its shape");
  m.tileReliable = stored.tileReliable;
  m.lo = array<double>(r, "lo", store::DType::F64, uint64_t(n), id);
  m.hi = array<double>(r, "hi", store::DType::F64, uint64_t(n), id);
  m.robustMask = array<uint32_t>(r, "robust_mask", store::DType::U32, uint64_t(n), id);
  m.rangingMask = array<uint32_t>(r, "ranging_mask", store::DType::U32, uint64_t(n), id);
  return m;
}

}  // namespace peat::save
