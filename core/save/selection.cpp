// SPDX-License-Identifier: MIT
#include "core/save/selection.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <random>

namespace peat::save {

void checkOptions(const SelectionOptions& o) {
  if (std::isnan(o.pixelLo) || std::isnan(o.pixelHi)) throw SaveError("the input range holds a NaN");
  if (o.pixelLo > o.pixelHi)
    throw SaveError("the input range is empty: lo " + std::to_string(o.pixelLo) + " > hi " + std::to_string(o.pixelHi));
  if (o.tileRows <= 0 || o.tileCols <= 0) throw SaveError("tile sizes must be positive");
  if (!(o.tau > 0) || !(o.tau < 1e30)) throw SaveError("tau must be a positive number");
  if (o.criterion != "value" && o.criterion != "output")
    throw SaveError("unknown criterion '" + o.criterion + "'; valid criteria: value, output");
  if (!(o.rtol >= 0 && o.rtol <= 1)) throw SaveError("the relative tolerance (--rtol) must be between 0 and 1");
  if (o.criterion == "output" && o.rtol != 0)
    throw SaveError("the relative tolerance (--rtol) belongs to the value criterion, not the output criterion");
  if (o.criterion == "output" && !(o.epsilon > 0 && o.epsilon < 1e30))
    throw SaveError("the output criterion needs a positive epsilon (--epsilon)");
  if (o.batch <= 0) throw SaveError("the batch must be positive");
  const int64_t tileBytes = o.tileRows * o.tileCols * int64_t(sizeof(float)) * o.batch;
  if (std::isnan(o.budgetShare) || o.budgetShare < 0 || o.budgetShare > 1)
    throw SaveError("the budget share must be between 0% and 100%");
  if (o.budgetShare == 0 && o.budgetBytes < tileBytes)
    throw SaveError("the reliable-memory budget (" + std::to_string(o.budgetBytes) + " bytes) is smaller than one tile (" +
                    std::to_string(tileBytes) + " bytes)");
}

// The selection's stages in order (ranges, each layer's bit classes and tiles, liveness and in-place
// outputs, the placement problem, the greedy placement and its random baseline) share their tables
// of tiles, lifetimes and costs; one function (about 220 lines) keeps those tables local to it, and
// each stage is marked by its comment.
Selection selectBits(const Graph& g, const SelectionOptions& asked) {
  const auto start = std::chrono::steady_clock::now();
  SelectionOptions o = asked;
  fitInputRange(g, o.pixelLo, o.pixelHi);  // token ids: the tables' rows
  checkOptions(o);
  Selection s;
  s.model = g.model;
  s.mode = o.profiled ? "profiled" : o.ranges.mode == RangeMode::Symbolic ? "symbolic" : "interval";
  s.sound = o.profiled == nullptr;
  s.options = o;
  s.options.profiled = nullptr;  // not kept: the ranges are copied below
  s.tileBytes = o.tileRows * o.tileCols * int64_t(sizeof(float)) * o.batch;
  if (o.profiled) {
    if (o.profiled->size() != g.nodes.size()) throw SaveError("the profiled ranges belong to another graph");
    s.ranges.nodes = *o.profiled;
  } else {
    s.ranges = analyzeRanges(g, inputBox(g, o.pixelLo, o.pixelHi), o.ranges);
  }
  s.rangeSeconds = s.ranges.seconds;
  if (o.criterion == "output") s.sensitivity = std::make_shared<const Sensitivity>(sensitivityOf(g, s.ranges.nodes));

  std::vector<std::vector<int>> consumers(g.nodes.size());
  for (std::size_t v = 0; v < g.nodes.size(); ++v)
    for (int i : g.nodes[v].inputs) consumers[std::size_t(i)].push_back(int(v));

  struct TileRef {
    std::size_t layer, tile;
    double work;  // multiply-adds per image to recompute the tile's type-2 elements
  };
  // Recomputing one element: a linear or conv output costs its taps (plus the bias), anything else one op.
  auto elementCost = [&](const Node& n) {
    if (n.op == Op::Linear) return double(n.weight.size() / std::size_t(n.features()) + 1);
    if (n.op == Op::Conv2d) return double(n.weight.size() / std::size_t(n.shape[0]) + 1);
    return 1.0;
  };
  std::vector<TileRef> withType2;  // every tile holding type-2 values, in-place outputs' included
  std::vector<std::vector<int64_t>> tileBytes;  // per layer, per tile
  for (std::size_t v = 1; v < g.nodes.size(); ++v) {
    const Node& n = g.nodes[v];
    const NodeRange& r = s.ranges.nodes[v];
    LayerSelection l;
    l.node = int(v);
    l.name = n.name;
    l.op = opName(n.op);
    l.elements = n.size();
    l.feedsRelu = !consumers[v].empty();
    for (int c : consumers[v]) {  // ReLU, or a clip whose lower end is 0 (ReLU6): both map x <= 0 and NaN to 0
      const Node& cn = g.nodes[std::size_t(c)];
      l.feedsRelu = l.feedsRelu && (cn.op == Op::Relu || (cn.op == Op::Clip && cn.bias[0] == 0.0f));
    }
    l.shape = n.shape.empty() ? std::vector<int64_t>{l.elements} : n.shape;
    l.rows = n.shape.size() >= 2 ? n.shape[0] : 1;  // [C, H, W]: channels; [T, F]: tokens
    l.cols = l.elements / l.rows;
    l.tilesDown = (l.rows + o.tileRows - 1) / o.tileRows;
    l.tilesAcross = (l.cols + o.tileCols - 1) / o.tileCols;
    std::vector<int64_t> tileType2(std::size_t(l.tilesDown * l.tilesAcross)), tileCount(tileType2.size()),
        tileVulnerable(tileType2.size());
    l.robustMask.resize(std::size_t(l.elements));
    l.rangingMask.resize(std::size_t(l.elements));
    BitContext context{o.tau, l.feedsRelu, s.sensitivity != nullptr, o.rtol};
    const std::vector<double>* sens = s.sensitivity ? &s.sensitivity->activation[v] : nullptr;
    double width = 0;
    // The bit counts add up a run of equal masks at once (neighbouring elements mostly share theirs):
    // 32 class look-ups per element were a tenth of a ResNet-50 selection's time.
    BitProperties run;
    uint64_t runLength = 0;
    auto countRun = [&] {
      if (runLength == 0) return;
      l.robustBits += runLength * uint64_t(__builtin_popcount(run.robust));
      l.rangingBits += runLength * uint64_t(__builtin_popcount(run.ranging));
      l.vulnerableBits += runLength * uint64_t(__builtin_popcount(run.vulnerable));
      for (int b = 0; b < 32; ++b) l.perBit[std::size_t(b)][std::size_t(run.classOf(b))] += runLength;
      runLength = 0;
    };
    for (int64_t i = 0; i < l.elements; ++i) {
      // the output criterion: this element's own tau, the change its flip may make
      if (sens) context.tau = allowedChange(*s.sensitivity, s.sensitivity->roundingFrom[v + 1], (*sens)[std::size_t(i)], o.epsilon);
      const BitProperties p = classifyBits(r.lo[std::size_t(i)], r.hi[std::size_t(i)], context);
      l.robustMask[std::size_t(i)] = p.robust;
      l.rangingMask[std::size_t(i)] = p.ranging;
      if (runLength > 0 && (p.robust != run.robust || p.ranging != run.ranging)) countRun();
      run = p;
      ++runLength;
      width += r.hi[std::size_t(i)] - r.lo[std::size_t(i)];
      const std::size_t tile = std::size_t((i / l.cols / o.tileRows) * l.tilesAcross + (i % l.cols) / o.tileCols);
      ++tileCount[tile];
      tileVulnerable[tile] += __builtin_popcount(p.vulnerable);
      if (p.type2()) {
        ++l.type2;
        ++tileType2[tile];
      }
    }
    countRun();
    l.meanWidth = width / double(l.elements);
    tileBytes.emplace_back();
    l.tileShare.resize(tileType2.size());
    l.tileVulnerableBits.resize(tileType2.size());
    l.tileReliable.assign(tileType2.size(), 0);
    for (std::size_t t = 0; t < tileType2.size(); ++t) {
      l.tileShare[t] = float(double(tileType2[t]) / double(tileCount[t]));
      l.tileVulnerableBits[t] = float(double(tileVulnerable[t]) / double(tileCount[t]));
      const int64_t bytes = tileCount[t] * int64_t(sizeof(float)) * o.batch;
      tileBytes.back().push_back(bytes);
      if (tileType2[t] > 0) withType2.push_back({s.layers.size(), t, double(tileType2[t]) * elementCost(n)});
      s.recomputeAllWork += double(tileType2[t]) * elementCost(n);
    }
    s.totalTiles += int64_t(tileType2.size());
    s.type2Elements += l.type2;
    s.elements += l.elements;
    s.layers.push_back(std::move(l));
  }
  // Liveness: a node's output occupies memory from its op (step = node index) to its last reader.
  // In place: an element-wise op (ReLU, clip, batch norm, GELU, a constant's addition) that is the only
  // reader of its input writes its output over it, in the same memory (both reliable or both unreliable: the two placement cases
  // that allow it), so the output takes no memory of its own and keeps its input's tiles.
  const std::size_t steps = g.nodes.size();
  std::vector<std::size_t> last(steps);
  for (std::size_t v = 0; v < steps; ++v) {
    last[v] = v;
    for (int c : consumers[v]) last[v] = std::max(last[v], std::size_t(c));
  }
  std::vector<int> inPlaceOf(steps, -1);  // the node whose memory v's output reuses
  for (std::size_t v = 1; v < steps; ++v) {
    const Node& n = g.nodes[v];
    const int in = n.inputs.empty() ? -1 : n.inputs[0];
    const bool elementwise =
        n.op == Op::Relu || n.op == Op::Clip || n.op == Op::BatchNorm || n.op == Op::Gelu || n.op == Op::AddConst;
    if (elementwise && in > 0 && consumers[std::size_t(in)].size() == 1)
      inPlaceOf[v] = in;
  }
  std::vector<std::size_t> end(last);  // memory stays in use until the last reader of an in-place chain
  for (std::size_t v = steps; v-- > 1;)
    if (inPlaceOf[v] > 0) end[std::size_t(inPlaceOf[v])] = std::max(end[std::size_t(inPlaceOf[v])], end[v]);
  for (LayerSelection& l : s.layers) l.inPlace = inPlaceOf[std::size_t(l.node)] > 0;
  // the node owning each node's memory, the head of its in-place chain (nodes come in topological
  // order, so an input's owner is known first): one pass, not a walk per tile (quadratic in a
  // chain's length: a 100k-node ReLU chain took minutes)
  std::vector<std::size_t> ownerOf(steps);
  for (std::size_t v = 0; v < steps; ++v) ownerOf[v] = inPlaceOf[v] > 0 ? ownerOf[std::size_t(inPlaceOf[v])] : v;
  // The placement problem: each tile of a tensor that owns its memory, with the recomputation its
  // type-2 values and those of the in-place outputs sharing it save (they take its placement).
  std::vector<PlacementItem> items;
  std::vector<float> itemShare;  // the owning tile's type-2 share (ties)
  {
    std::vector<std::vector<std::size_t>> itemOf(s.layers.size());
    for (const TileRef& t : withType2) {
      const std::size_t v = ownerOf[std::size_t(s.layers[t.layer].node)];
      std::vector<std::size_t>& of = itemOf[v - 1];
      if (of.empty()) of.assign(s.layers[v - 1].tileReliable.size(), SIZE_MAX);
      std::size_t& k = of[t.tile];
      if (k == SIZE_MAX) {
        k = items.size();
        items.push_back({int(v), int64_t(t.tile), int64_t(v), int64_t(end[v]), tileBytes[v - 1][t.tile], 0.0, false});
        itemShare.push_back(s.layers[v - 1].tileShare[t.tile]);
      }
      items[k].work += t.work;
    }
  }
  // The most recomputation saved per reliable byte first (ties: the higher type-2 share, then
  // earlier layers), each tile while the reliable memory in use during its lifetime leaves room for
  // it: a greedy knapsack by density.
  std::vector<std::size_t> ranking(items.size());
  for (std::size_t k = 0; k < ranking.size(); ++k) ranking[k] = k;
  std::stable_sort(ranking.begin(), ranking.end(), [&](std::size_t a, std::size_t b) {
    const double da = items[a].work / double(items[a].bytes), db = items[b].work / double(items[b].bytes);
    return da != db ? da > db : itemShare[a] > itemShare[b];
  });
  // The working set: every tile of every tensor, over its lifetime (in-place outputs reuse theirs).
  std::vector<int64_t> all(steps, 0);
  for (const LayerSelection& l : s.layers) {
    const std::size_t v = std::size_t(l.node);
    if (inPlaceOf[v] > 0) continue;
    int64_t bytes = 0;
    for (int64_t b : tileBytes[std::size_t(&l - s.layers.data())]) bytes += b;
    for (std::size_t k = v; k <= end[v]; ++k) all[k] += bytes;
  }
  s.workingSetBytes = *std::max_element(all.begin(), all.end());
  s.budgetBytes = o.budgetShare > 0 ? int64_t(o.budgetShare * double(s.workingSetBytes)) : o.budgetBytes;
  // A budget in bytes must hold a whole tile (checkOptions); a share of the working set the smallest
  // tile at least (a tensor's edge tiles are smaller: a transformer's [tokens, 32] tensors are).
  int64_t smallest = s.tileBytes;
  for (const std::vector<int64_t>& layer : tileBytes)
    for (int64_t b : layer) smallest = std::min(smallest, b);
  if (s.budgetBytes < (o.budgetShare > 0 ? smallest : s.tileBytes))
    throw SaveError("the reliable-memory budget (" + std::to_string(s.budgetBytes) + " bytes" +
                    (o.budgetShare > 0 ? ", " + std::to_string(100 * o.budgetShare) + "% of the working set" : std::string()) +
                    ") is smaller than " + (o.budgetShare > 0 ? "the smallest tile (" + std::to_string(smallest) : "one tile (" + std::to_string(s.tileBytes)) + " bytes)");
  // Places tiles in `order` (indices into items) while they fit; in-place outputs share their input's
  // tiles (same shape). Returns the placement and sets the peak of reliable memory in use.
  auto place = [&](const std::vector<std::size_t>& order, int64_t& peakUsed) {
    std::vector<std::vector<uint8_t>> reliable(s.layers.size());
    for (std::size_t k = 0; k < s.layers.size(); ++k) reliable[k].assign(s.layers[k].tileReliable.size(), 0);
    std::vector<int64_t> used(steps, 0);
    for (std::size_t k : order) {
      const PlacementItem& t = items[k];
      const int64_t peak = *std::max_element(used.begin() + t.first, used.begin() + t.last + 1);
      if (peak + t.bytes > s.budgetBytes) continue;
      reliable[std::size_t(t.node) - 1][std::size_t(t.tile)] = 1;
      for (int64_t step = t.first; step <= t.last; ++step) used[std::size_t(step)] += t.bytes;
    }
    for (std::size_t v = 1; v < steps; ++v)
      if (inPlaceOf[v] > 0) reliable[v - 1] = reliable[std::size_t(inPlaceOf[v]) - 1];
    peakUsed = *std::max_element(used.begin(), used.end());
    return reliable;
  };
  auto workLeft = [&](const std::vector<std::vector<uint8_t>>& reliable) {
    double left = 0;
    for (const PlacementItem& t : items) left += reliable[std::size_t(t.node) - 1][std::size_t(t.tile)] ? 0.0 : t.work;
    return left;
  };
  int64_t peak = 0;
  std::vector<std::size_t> order = ranking;
  if (o.placement == "random") {
    std::mt19937_64 orderRng(777);
    std::shuffle(order.begin(), order.end(), orderRng);
  } else if (o.placement == "none") {
    order.clear();
  } else if (o.placement != "ranked") {
    throw SaveError("placement '" + o.placement + "' is none of ranked, random, none");
  }
  const std::vector<std::vector<uint8_t>> placed = place(order, peak);
  for (std::size_t k = 0; k < s.layers.size(); ++k) {
    s.layers[k].tileReliable = placed[k];
    for (uint8_t r : placed[k]) s.reliableTiles += r;
  }
  s.recomputeWork = workLeft(placed);
  for (std::size_t k : ranking) {
    PlacementItem t = items[k];
    t.reliable = placed[std::size_t(t.node) - 1][std::size_t(t.tile)] != 0;
    s.placementItems.push_back(t);
  }
  // the same budget filled in a random order (the mean of 5 seeded shuffles): what the ranking buys
  std::vector<std::size_t> shuffled = ranking;
  std::mt19937_64 rng(12345);
  for (int k = 0; k < 5; ++k) {
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    int64_t ignored = 0;
    s.randomPlacementWork += workLeft(place(shuffled, ignored)) / 5;
  }
  s.reliableBytes = peak;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

bool weightChangeRobust(const Selection& s, int node, std::size_t index, float clean, float now) {
  const double change = std::fabs(double(now) - double(clean));
  if (!std::isfinite(change)) return false;  // NaN or infinity reaches the logits
  if (!s.sensitivity) {  // the value criterion: a move below tau that only mantissa bits made
    uint32_t a, b;
    std::memcpy(&a, &clean, 4);
    std::memcpy(&b, &now, 4);
    return ((a ^ b) >> 23) == 0 && change < s.options.tau + s.options.rtol * std::fabs(double(clean));
  }
  const std::vector<double>& sens = s.sensitivity->weight.at(std::size_t(node));
  if (index >= sens.size()) return false;  // batch norm, clip or constant parameters: no bound here
  const double allowed = allowedChange(*s.sensitivity, s.sensitivity->roundingFrom.at(std::size_t(node)), sens[index],
                                       s.options.epsilon);
  return change < allowed;
}

bool weightChangesRobust(const Selection& s, int node, const std::vector<float>& clean, const std::vector<float>& now) {
  if (clean.size() != now.size()) return false;
  if (!s.sensitivity) {  // the value criterion judges each value on its own
    for (std::size_t i = 0; i < clean.size(); ++i)
      if (std::memcmp(&clean[i], &now[i], 4) != 0 && !weightChangeRobust(s, node, i, clean[i], now[i])) return false;
    return true;
  }
  // the output criterion: the changes act together, so their moves of the logits add up
  const std::vector<double>& sens = s.sensitivity->weight.at(std::size_t(node));
  double total = 0;
  for (std::size_t i = 0; i < clean.size(); ++i) {
    if (std::memcmp(&clean[i], &now[i], 4) == 0) continue;
    const double change = std::fabs(double(now[i]) - double(clean[i]));
    if (i >= sens.size() || !std::isfinite(change)) return false;
    total += sens[i] * change;
  }
  return total < allowedChange(*s.sensitivity, s.sensitivity->roundingFrom.at(std::size_t(node)), 1.0, s.options.epsilon);
}

bool weightBitRobust(const Selection& s, int node, std::size_t index, float value, int bit) {
  if (!s.sensitivity) return (classifyWeightBits(value, s.options.tau, s.options.rtol).robust >> bit) & 1;
  uint32_t b;
  std::memcpy(&b, &value, 4);
  b ^= uint32_t(1) << bit;
  float flipped;
  std::memcpy(&flipped, &b, 4);
  return weightChangeRobust(s, node, index, value, flipped);
}

std::string criterionText(const std::string& criterion, double tau, double rtol, double epsilon) {
  char text[96];
  if (criterion == "output")
    std::snprintf(text, sizeof text, "output criterion, epsilon %g", epsilon);
  else if (rtol != 0)
    std::snprintf(text, sizeof text, "tau %g, rtol %g", tau, rtol);
  else
    std::snprintf(text, sizeof text, "tau %g", tau);
  return text;
}

void writePlacementProblem(const Selection& s, std::ostream& out) {
  int64_t steps = 0;
  for (const PlacementItem& t : s.placementItems) steps = std::max(steps, t.last + 1);
  out << "# budget_bytes=" << s.budgetBytes << " steps=" << steps << "\n";
  out << "# model=" << s.model << "\n";  // a line of its own: a name may hold spaces
  out << "node,tile,first_step,last_step,bytes,work,reliable\n";
  out.precision(17);
  for (const PlacementItem& t : s.placementItems)
    out << t.node << ',' << t.tile << ',' << t.first << ',' << t.last << ',' << t.bytes << ',' << t.work << ','
        << (t.reliable ? 1 : 0) << "\n";
}

}  // namespace peat::save
