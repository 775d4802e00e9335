// SPDX-License-Identifier: MIT
#include "core/save/flip_in_model.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "core/save/analysis_record.h"
#include "core/save/dataset.h"
#include "core/save/model_source.h"

namespace peat::save {

namespace {

// The fp32 bounds that contain [lo, hi] (what the runtime's range check compares with).
bool outside(float v, double lo, double hi) {
  float l = float(lo), h = float(hi);
  if (double(l) > lo) l = std::nextafter(l, -std::numeric_limits<float>::infinity());
  if (double(h) < hi) h = std::nextafter(h, std::numeric_limits<float>::infinity());
  return !(v >= l && v <= h);  // NaN is outside
}

}  // namespace

ModelFlip flipInModel(const Graph& g, const std::vector<LayerMap>& layers, const float* image, int label,
                      const std::string& layer, int64_t element, uint32_t mask) {
  const auto start = std::chrono::steady_clock::now();
  if (mask == 0) throw SaveError("no bit to flip: toggle a bit first");
  int node = -1;
  for (std::size_t v = 1; v < g.nodes.size(); ++v)
    if (g.nodes[v].name == layer) node = int(v);
  if (node < 0) throw SaveError("the network has no layer '" + layer + "'");
  std::vector<const LayerMap*> mapOf(g.nodes.size(), nullptr);  // per node
  for (const LayerMap& m : layers)
    for (std::size_t v = 1; v < g.nodes.size(); ++v)
      if (g.nodes[v].name == m.name && m.elements() == g.nodes[v].size()) mapOf[v] = &m;
  const LayerMap* here = mapOf[std::size_t(node)];
  if (!here) throw SaveError("the analysis has no ranges of layer '" + layer + "' of this network's shape");
  if (element < 0 || element >= here->elements())
    throw SaveError("layer '" + layer + "' has " + std::to_string(here->elements()) + " values; there is no value " +
                    std::to_string(element));

  ModelFlip f;
  f.layer = layer;
  f.element = element;
  f.mask = mask;
  f.label = label;
  const MapElement e = here->element(element);
  f.lo = e.lo;
  f.hi = e.hi;
  f.robustMask = here->robustMask[std::size_t(element)];
  f.rangingMask = here->rangingMask[std::size_t(element)];
  f.reliable = e.reliable;
  const bool type2 = e.vulnerableBits > 0;
  f.recomputed = type2 && !e.reliable;
  f.recomputeCatches = f.recomputed && (mask & ~f.robustMask) != 0;

  std::vector<std::vector<float>> act = runAll(g, image, 1);
  const std::vector<float>& clean = act[std::size_t(g.output)];
  f.logitsBefore.assign(clean.begin(), clean.end());
  f.classBefore = topClassOf(g, clean.data());
  float& value = act[std::size_t(node)][std::size_t(element)];
  f.before = value;
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  bits ^= mask;
  std::memcpy(&value, &bits, 4);
  f.after = value;
  // the rest of the network from the corrupted tensor (nodes are in topological order), each tensor
  // range-checked as SAVE's runtime checks it
  for (std::size_t v = std::size_t(node); v < g.nodes.size(); ++v) {
    if (v > std::size_t(node)) {
      std::vector<const float*> in;
      for (int j : g.nodes[v].inputs) in.push_back(act[std::size_t(j)].data());
      runNode(g, int(v), in, 1, act[v].data());
    }
    const LayerMap* m = mapOf[v];
    if (!m) continue;
    for (int64_t i = 0; i < m->elements(); ++i)
      if (outside(act[v][std::size_t(i)], m->lo[std::size_t(i)], m->hi[std::size_t(i)])) {
        if (f.firstViolation.empty()) f.firstViolation = g.nodes[v].name;
        ++f.violations;
      }
  }
  f.outOfRange = outside(f.after, f.lo, f.hi);
  const std::vector<float>& flipped = act[std::size_t(g.output)];
  f.logitsAfter.assign(flipped.begin(), flipped.end());
  f.classAfter = topClassOf(g, flipped.data());
  f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return f;
}

ModelFlip flipInModel(const store::SessionReader& reader, const std::string& analysis, const std::string& layer,
                      int64_t element, uint32_t mask, int64_t image, const std::string& data) {
  const StoredAnalysis a = loadAnalysis(reader, analysis);
  if (a.ranges != "sound") throw SaveError("analysis '" + analysis + "' has unsound (profiled) ranges: its checks prove nothing");
  // the files the analysis read, where it found them
  if (!a.source.weights.empty() && !std::filesystem::exists(a.source.weights))
    throw SaveError("the analysed weights " + a.source.weights + " are not there any more");
  if (a.source.model != a.model && !std::filesystem::exists(a.source.model))
    throw SaveError("the analysed model " + a.source.model + " is not there any more");
  if (image < 0) throw SaveError("image " + std::to_string(image) + " does not exist");
  const Graph g = buildGraph(a.source);
  const std::vector<LayerMap> layers = loadLayerMaps(reader, analysis);
  const DataSet d = loadDataSet(g, data, "test", image + 1, a.pixelLo, a.pixelHi, true);
  if (d.count <= image)
    throw SaveError("the test set has " + std::to_string(d.count) + " images; there is no image " + std::to_string(image));
  const int64_t size = g.nodes[0].size();
  ModelFlip f = flipInModel(g, layers, d.normalised.data() + image * size, d.labels[std::size_t(image)], layer, element, mask);
  f.image = image;
  return f;
}

}  // namespace peat::save
