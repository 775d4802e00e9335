// SPDX-License-Identifier: MIT
#include "core/save/analysis_record.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>

#include "core/save/graph.h"
#include "core/util/text.h"

namespace peat::save {

namespace {

// "a=0,1;b=-1,1": the named inputs' ranges (or normalisations) as one label (names hold no ';' in practice; a name
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

// Layers of at most kPackUpTo values per sample (writeAnalysis' packUpTo) are stored together as rows of one record
// of kind "save_layers" (docs/session-format.md), not as a record each: HDF5 takes about 1 ms for a
// record's group, nine datasets and their attributes, so a 100,000-node chain took 100 s to store.
constexpr const char* kPackedKind = "save_layers";

// The packed record being built: each layer's scalars as a row, each of its arrays appended to that
// array's column, with the offsets where every layer's part starts.
class PackedLayers {
 public:
  bool empty() const { return nodes_.empty(); }
  void add(const store::ResultRecord& rec) {
    if (nodes_.empty()) {
      for (const auto& [key, value] : rec.scalars) scalarNames_.push_back(key);
      for (const store::NamedTensor& t : rec.arrays) arrays_.push_back({t.name, t.view.dtype, {}, 0});
      offsets_.assign(arrays_.size(), 0);
    }
    if (rec.scalars.size() != scalarNames_.size() || rec.arrays.size() != arrays_.size() ||
        !std::all_of(scalarNames_.begin(), scalarNames_.end(), [&](const std::string& k) { return rec.scalars.count(k) > 0; }))
      throw SaveError("the layers of one analysis store different fields");
    nodes_ += (nodes_.empty() ? "" : "\n") + rec.labels.at("node");
    ops_ += (ops_.empty() ? "" : "\n") + rec.labels.at("op");
    ++count_;
    for (const std::string& key : scalarNames_) scalars_.push_back(rec.scalars.at(key));
    for (std::size_t a = 0; a < arrays_.size(); ++a) {
      const store::NamedTensor& t = rec.arrays[a];
      Column& c = arrays_[a];
      if (t.name != c.name || t.view.dtype != c.type) throw SaveError("the layers of one analysis store different fields");
      const uint64_t n = t.view.elementCount();
      const auto* bytes = static_cast<const unsigned char*>(t.view.data);
      c.bytes.insert(c.bytes.end(), bytes, bytes + n * h5::typeSize(t.view.dtype));
      c.total += n;
      offsets_.push_back(int64_t(c.total));
    }
  }
  // The record (its arrays point into this object).
  store::ResultRecord record(const std::string& analysis) const {
    store::ResultRecord r;
    std::string scalarNames, arrayNames;
    for (const std::string& k : scalarNames_) scalarNames += (scalarNames.empty() ? "" : ",") + k;
    for (const Column& c : arrays_) arrayNames += (arrayNames.empty() ? "" : ",") + c.name;
    r.labels = {{"kind", kPackedKind}, {"analysis", analysis}, {"nodes", nodes_}, {"ops", ops_},
                {"scalar_names", scalarNames}, {"array_names", arrayNames}};
    r.arrays.push_back({"scalars", {store::DType::F64, {count_, uint64_t(scalarNames_.size())}, scalars_.data()}});
    r.arrays.push_back({"offsets", {store::DType::I64, {count_ + 1, uint64_t(arrays_.size())}, offsets_.data()}});
    for (const Column& c : arrays_) r.arrays.push_back({c.name, {c.type, {c.total}, c.bytes.data()}});
    return r;
  }

 private:
  struct Column {
    std::string name;
    store::DType type;
    std::vector<unsigned char> bytes;
    uint64_t total;
  };
  std::string nodes_, ops_;
  uint64_t count_ = 0;
  std::vector<std::string> scalarNames_;
  std::vector<double> scalars_;
  std::vector<Column> arrays_;
  std::vector<int64_t> offsets_;  // [count_ + 1, arrays]: where each layer's part of each array starts
};

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

// A packed record read back: its rows by node name, each cut out as the layer's own record would
// read (its arrays flattened to 1-D) only when asked for; throws SaveError naming what is malformed.
class PackedRows {
 public:
  // `layers`: how many layers the analysis lists (a packed record holds no more)
  PackedRows(store::StoredRecord packed, const std::string& id, std::size_t layers) : r_(std::move(packed)) {
    const auto fail = [&](const std::string& what) { return SaveError("SAVE result '" + id + "' " + what); };
    nodes_ = util::splitText(label(r_, "nodes"), '\n');
    ops_ = util::splitText(label(r_, "ops"), '\n');
    scalarNames_ = util::splitText(label(r_, "scalar_names"), ',');
    arrayNames_ = util::splitText(label(r_, "array_names"), ',');
    const uint64_t count = nodes_.size(), s = scalarNames_.size(), a = arrayNames_.size();
    if (count == 0 || count > layers || ops_.size() != count) throw fail("lists its layers and their ops unevenly");
    if (s == 0 || a == 0) throw fail("names no scalars or no arrays");
    scalars_ = array<double>(r_, "scalars", store::DType::F64, count * s, id);
    offsets_ = array<int64_t>(r_, "offsets", store::DType::I64, (count + 1) * a, id);
    for (std::size_t c = 0; c < a; ++c) {
      const auto it = r_.arrays.find(arrayNames_[c]);
      if (it == r_.arrays.end()) throw fail("has no " + arrayNames_[c] + " array");
      columns_.push_back(&it->second);
      // each column's offsets run from 0 up to its length, never down: every slice lies inside it
      if (offsets_[c] != 0 || uint64_t(offsets_[count * a + c]) != it->second.elementCount())
        throw fail("has offsets that do not cover its " + arrayNames_[c] + " array");
      for (uint64_t p = 0; p < count; ++p)
        if (offsets_[(p + 1) * a + c] < offsets_[p * a + c]) throw fail("has offsets that run backwards");
    }
    for (std::size_t p = 0; p < count; ++p)
      if (!rows_.emplace(nodes_[p], p).second) throw fail("names layer '" + nodes_[p] + "' twice");
  }
  // Layer `name`'s record, or none when this record does not hold it.
  std::optional<store::StoredRecord> row(const std::string& name) const {
    const auto at = rows_.find(name);
    if (at == rows_.end()) return std::nullopt;
    const std::size_t p = at->second, s = scalarNames_.size(), a = arrayNames_.size();
    store::StoredRecord r;
    r.labels = {{"kind", "save_layer"}, {"analysis", label(r_, "analysis")}, {"node", nodes_[p]}, {"op", ops_[p]}};
    for (std::size_t k = 0; k < s; ++k) r.scalars[scalarNames_[k]] = scalars_[p * s + k];
    for (std::size_t c = 0; c < a; ++c) {
      const store::Tensor& col = *columns_[c];
      const uint64_t from = uint64_t(offsets_[p * a + c]), to = uint64_t(offsets_[(p + 1) * a + c]);
      const std::size_t size = h5::typeSize(col.dtype);
      store::Tensor t;
      t.dtype = col.dtype;
      t.shape = {to - from};
      t.bytes.assign(col.bytes.begin() + std::ptrdiff_t(from * size), col.bytes.begin() + std::ptrdiff_t(to * size));
      r.arrays.emplace(arrayNames_[c], std::move(t));
    }
    return r;
  }

 private:
  store::StoredRecord r_;
  std::vector<std::string> nodes_, ops_, scalarNames_, arrayNames_;
  std::vector<double> scalars_;
  std::vector<int64_t> offsets_;  // [layers + 1, arrays]
  std::vector<const store::Tensor*> columns_;
  std::map<std::string, std::size_t> rows_;
};

// An analysis' layer records: each its own ("<id>.<name>"), or a row of the packed record its
// summary names (label packed_layers), read once when a layer first needs it.
class LayerRecords {
 public:
  LayerRecords(const store::SessionReader& reader, const std::string& id, const store::StoredRecord& summary)
      : reader_(reader), id_(id), packedId_(label(summary, "packed_layers")),
        layers_(util::splitText(label(summary, "layers"), ',').size()) {}
  store::StoredRecord get(const std::string& name) {
    if (!packedId_.empty()) {
      if (!packed_) {
        store::StoredRecord rec = reader_.saveResult(packedId_);
        if (label(rec, "kind") != kPackedKind || label(rec, "analysis") != id_)
          throw SaveError("SAVE result '" + packedId_ + "' holds no layers of analysis '" + id_ + "'");
        packed_.emplace(std::move(rec), packedId_, layers_);
      }
      if (std::optional<store::StoredRecord> row = packed_->row(name)) return std::move(*row);
    }
    return reader_.saveResult(id_ + "." + name);
  }

 private:
  const store::SessionReader& reader_;
  std::string id_, packedId_;
  std::size_t layers_;
  std::optional<PackedRows> packed_;
};

}  // namespace

void writeAnalysis(store::SessionWriter& w, const std::string& id, const Selection& s, const ModelSource& source,
                   const TightnessReference* ref, int64_t packUpTo) {
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
                {"input_means", inputRangesText(source.inputMeans)}, {"input_stds", inputRangesText(source.inputStds)},
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
  PackedLayers packed;
  for (std::size_t i = 0; i < s.layers.size(); ++i) {
    if (s.layers[i].elements <= packUpTo)
      packed.add(records[i]);
    else
      named.push_back({id + "." + s.layers[i].name, &records[i]});
  }
  store::ResultRecord packedRecord;
  if (!packed.empty()) {
    // "<id>.packed-layers", or -2, -3, ... where a layer of its own is named so
    std::string packedId = id + ".packed-layers";
    for (int k = 2; std::any_of(named.begin(), named.end(), [&](const auto& n) { return n.first == packedId; }); ++k)
      packedId = id + ".packed-layers-" + std::to_string(k);
    sum.labels["packed_layers"] = packedId;
    packedRecord = packed.record(id);
    named.push_back({packedId, &packedRecord});
  }
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
  for (auto [key, into] : {std::pair{"input_ranges", &a.source.inputRanges},  // absent before 2026-12-06
                           std::pair{"input_means", &a.source.inputMeans}, std::pair{"input_stds", &a.source.inputStds}})  // before 2026-12-07
    for (const std::string& e : util::splitText(label(sum, key), ';'))
      if (!e.empty()) into->push_back(e);
  LayerRecords records(reader, id, sum);
  for (const std::string& name : util::splitText(label(sum, "layers"), ','))
    a.layers.push_back(storedLayer(records.get(name), name, id + "." + name));
  return a;
}

namespace {

// One layer's map from its record (`id`: "<analysis>.<layer>").
LayerMap layerMapOf(const store::StoredRecord& r, const std::string& analysis, const std::string& layer) {
  const std::string id = analysis + "." + layer;
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

}  // namespace

LayerMap loadLayerMap(const store::SessionReader& reader, const std::string& analysis, const std::string& layer) {
  // the summary's list of layers, then that one layer's record only (not every layer's values;
  // a small layer's packed record is read whole)
  const store::StoredRecord sum = analysisSummary(reader, analysis);
  const std::vector<std::string> names = util::splitText(label(sum, "layers"), ',');
  if (std::find(names.begin(), names.end(), layer) == names.end())
    throw SaveError("SAVE analysis '" + analysis + "' has no layer '" + layer + "'");
  return layerMapOf(LayerRecords(reader, analysis, sum).get(layer), analysis, layer);
}

std::vector<LayerMap> loadLayerMaps(const store::SessionReader& reader, const std::string& analysis) {
  const store::StoredRecord sum = analysisSummary(reader, analysis);
  LayerRecords records(reader, analysis, sum);
  std::vector<LayerMap> out;
  for (const std::string& layer : util::splitText(label(sum, "layers"), ','))
    out.push_back(layerMapOf(records.get(layer), analysis, layer));
  return out;
}

}  // namespace peat::save
