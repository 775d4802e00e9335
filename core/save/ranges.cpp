// SPDX-License-Identifier: MIT
// The range analysis's driver: the input box, one pass over the graph (intervals, then linear
// bounds where they gain), input splitting, and tightness. The steps live in ranges_*.cpp.
#include "core/save/ranges.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/save/ranges_detail.h"
#include "core/util/parallel.h"

namespace peat::save {

using detail::BackSubstitution;
using detail::inputGradient;
using detail::intervalStep;
using detail::isAffine;

namespace {

// The graph the analysis works on: every k x k max-pool becomes k^2 strided gathers and a tree of
// pairwise maxima, so that its relaxation keeps linear dependence on its inputs (a max-pool
// relaxed as a whole can only bound its output by a constant from above). `map` takes each node of
// `g` to the node holding the same values.
Graph rewriteMaxPools(const Graph& g, std::vector<int>& map) {
  Graph out;
  out.model = g.model;
  out.inputMean = g.inputMean;
  out.inputDeviation = g.inputDeviation;
  out.channelMeans = g.channelMeans;
  out.channelDeviations = g.channelDeviations;
  map.assign(g.nodes.size(), -1);
  for (std::size_t v = 0; v < g.nodes.size(); ++v) {
    Node n = g.nodes[v];
    for (int& i : n.inputs) i = map[std::size_t(i)];
    if (n.op != Op::MaxPool2d) {
      out.nodes.push_back(std::move(n));
      map[v] = int(out.nodes.size()) - 1;
      continue;
    }
    const Node& src = out.nodes[std::size_t(n.inputs[0])];
    const int64_t c = n.shape[0], oh = n.shape[1], ow = n.shape[2], h = src.shape[1], w = src.shape[2];
    std::vector<int> level;
    for (int64_t ky = 0; ky < n.kernel; ++ky)
      for (int64_t kx = 0; kx < n.kernel; ++kx) {
        Node sel;
        sel.op = Op::Select;
        sel.name = n.name + ".at" + std::to_string(ky) + std::to_string(kx);
        sel.inputs = n.inputs;
        sel.shape = n.shape;
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t y = 0; y < oh; ++y)
            for (int64_t x = 0; x < ow; ++x)
              sel.gather.push_back(poolInput(n, h, w, ch, y, x, ky, kx));
        out.nodes.push_back(std::move(sel));
        level.push_back(int(out.nodes.size()) - 1);
      }
    while (level.size() > 1) {
      std::vector<int> next;
      for (std::size_t i = 0; i + 1 < level.size(); i += 2) {
        Node m;
        m.op = Op::Max2;
        m.name = n.name + ".max" + std::to_string(out.nodes.size());
        m.inputs = {level[i], level[i + 1]};
        m.shape = n.shape;
        out.nodes.push_back(std::move(m));
        next.push_back(int(out.nodes.size()) - 1);
      }
      if (level.size() % 2) next.push_back(level.back());
      level = std::move(next);
    }
    out.nodes.back().name = n.name;
    map[v] = level[0];
  }
  out.output = map[std::size_t(g.output)];
  return out;
}

std::vector<NodeRange> analyzeOnce(const Graph& original, const NodeRange& input, const RangeOptions& o) {
  std::vector<int> map;
  const Graph g = rewriteMaxPools(original, map);
  std::vector<NodeRange> r(g.nodes.size()), diff(g.nodes.size());
  r[0] = input;
  std::vector<int> level(g.nodes.size(), 0);  // affine ops on the longest path from the input
  int64_t widest = 1;
  for (const Node& n : g.nodes) widest = std::max(widest, n.size());
  const std::size_t block = std::size_t(std::max<int64_t>(1, o.maxEntries / widest));
  const unsigned threads = util::threadsOr(o.threads);
  std::vector<BackSubstitution> workers;  // one per thread: each keeps its own spare matrices
  for (unsigned t = 0; t < threads; ++t) workers.emplace_back(g, r, diff, level, o.depth);
  for (std::size_t v = 1; v < g.nodes.size(); ++v) {
    const Node& n = g.nodes[v];
    for (int i : n.inputs) level[v] = std::max(level[v], level[std::size_t(i)]);
    if (isAffine(n.op)) ++level[v];
    r[v] = intervalStep(g, int(v), r);
    if (n.op == Op::Max2) {  // the difference of its inputs, for its relaxation
      const NodeRange& a = r[std::size_t(n.inputs[0])];
      const NodeRange& b = r[std::size_t(n.inputs[1])];
      diff[v].lo.resize(a.lo.size());
      diff[v].hi.resize(a.lo.size());
      for (std::size_t i = 0; i < a.lo.size(); ++i) {
        diff[v].lo[i] = a.lo[i] - b.hi[i];
        diff[v].hi[i] = a.hi[i] - b.lo[i];
      }
    }
    // Symbolic bounds for affine ops that do not read the input box directly (there intervals are
    // already exact up to rounding).
    if (o.mode != RangeMode::Symbolic || !isAffine(n.op)) continue;
    bool direct = true;
    for (int i : n.inputs) direct = direct && g.nodes[std::size_t(i)].op == Op::Input;
    if (direct) continue;
    const std::size_t size = std::size_t(n.size());
    std::vector<double> lo(size, -std::numeric_limits<double>::infinity());
    std::vector<double> hi(size, std::numeric_limits<double>::infinity());
    // A probe first: the rows of a few output elements spread over the tensor. When the linear
    // bounds gain nothing over the intervals there (deep convolutions over a wide box, where most
    // ReLUs are unstable), the node keeps its intervals and the costly rest is skipped.
    const std::size_t probe = std::min<std::size_t>(size, 16), stride = size / probe;
    double gained = 0, width = 0;
    for (std::size_t k = 0; k < probe; ++k) {
      const std::size_t i = k * stride;
      workers[0].run(int(v), i, 1, lo.data() + i, hi.data() + i);
      width += r[v].hi[i] - r[v].lo[i];
      gained += std::max(0.0, lo[i] - r[v].lo[i]) + std::max(0.0, r[v].hi[i] - hi[i]);
    }
    if (o.probe && probe < size && !(gained > 0.01 * width)) continue;
    // Blocks of rows are independent: the threads take them in turn.
    const std::size_t rows = std::max<std::size_t>(1, std::min(block, (size + threads - 1) / threads));
    std::atomic<std::size_t> next{0};
    auto work = [&](unsigned t) {
      for (std::size_t first; (first = next.fetch_add(rows)) < size;)
        workers[t].run(int(v), first, std::min(rows, size - first), lo.data() + first, hi.data() + first);
    };
    util::parallelFor(unsigned(std::min<std::size_t>(threads, (size + rows - 1) / rows)), work);
    for (std::size_t i = 0; i < size; ++i) {  // both are sound: keep the tighter side of each
      r[v].lo[i] = std::max(r[v].lo[i], lo[i]);
      r[v].hi[i] = std::min(r[v].hi[i], hi[i]);
    }
  }
  std::vector<NodeRange> out(original.nodes.size());
  for (std::size_t v = 0; v < original.nodes.size(); ++v) out[v] = r[std::size_t(map[v])];
  return out;
}

}  // namespace

NodeRange inputBox(const Graph& g, double pixelLo, double pixelHi) {
  fitInputRange(g, pixelLo, pixelHi);
  if (std::isnan(pixelLo) || std::isnan(pixelHi)) throw SaveError("the input range holds a NaN");
  if (pixelLo > pixelHi)
    throw SaveError("the input range is empty: lo " + std::to_string(pixelLo) + " > hi " + std::to_string(pixelHi));
  if (std::isinf(pixelLo) || std::isinf(pixelHi)) throw SaveError("the input range must be finite");
  // The trainer normalises in fp32: allow one fp32 rounding on each side.
  const std::size_t size = std::size_t(g.nodes[0].size());
  NodeRange box;
  box.lo.resize(size);
  box.hi.resize(size);
  for (const OutputPart& p : g.inputs)
    if (p.integer && std::isnan(p.lo))
      throw SaveError("input '" + p.name + "' holds integers read as values (a mask cast to float): give its range, "
                      "--input-range " + p.name + "=LO,HI");
  for (std::size_t i = 0; i < size; ++i) {
    const double mean = g.meanOf(int64_t(i)), deviation = g.deviationOf(int64_t(i));
    double rawLo = pixelLo, rawHi = pixelHi;
    elementRange(g, int64_t(i), rawLo, rawHi);  // an input's own range, where one was named
    const double lo = (rawLo - mean) / deviation, hi = (rawHi - mean) / deviation;
    box.lo[i] = lo - 4 * kU32 * (std::fabs(lo) + 1);
    box.hi[i] = hi + 4 * kU32 * (std::fabs(hi) + 1);
  }
  return box;
}

namespace {

// How much each input element's width moves the output: width_i * sum_o |d output_o / d x_i| at
// the part's centre.
std::vector<double> influence(const Graph& g, const NodeRange& part) {
  std::vector<float> centre(part.lo.size());
  for (std::size_t i = 0; i < centre.size(); ++i) centre[i] = float(0.5 * (part.lo[i] + part.hi[i]));
  const std::vector<std::vector<float>> act = runAll(g, centre.data(), 1);
  std::vector<double> weight(centre.size(), 0.0);
  for (std::size_t o = 0; o < std::size_t(g.nodes[std::size_t(g.output)].size()); ++o) {
    const std::vector<float> grad = inputGradient(g, act, g.output, o);
    for (std::size_t i = 0; i < weight.size(); ++i) weight[i] += std::fabs(double(grad[i]));
  }
  for (std::size_t i = 0; i < weight.size(); ++i) weight[i] *= part.hi[i] - part.lo[i];
  return weight;
}
}  // namespace

RangeResult analyzeRanges(const Graph& g, const NodeRange& input, const RangeOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  RangeResult result;
  if (o.splits <= 0 || o.mode != RangeMode::Symbolic) {
    result.nodes = analyzeOnce(g, input, o);
  } else {
    // Bisect the input element of most influence on the output (its width times the summed
    // |gradient| of the outputs at the part's centre), analyse every part, merge by union.
    std::vector<NodeRange> parts{input};
    for (int s = 0; s < o.splits; ++s) {
      std::vector<NodeRange> next;
      for (const NodeRange& p : parts) {
        const std::vector<double> w = influence(g, p);
        const std::size_t pick = std::size_t(std::max_element(w.begin(), w.end()) - w.begin());
        const double mid = 0.5 * (p.lo[pick] + p.hi[pick]);
        NodeRange a = p, b = p;
        a.hi[pick] = mid;
        b.lo[pick] = mid;
        next.push_back(std::move(a));
        next.push_back(std::move(b));
      }
      parts = std::move(next);
    }
    for (const NodeRange& p : parts) {
      std::vector<NodeRange> r = analyzeOnce(g, p, o);
      if (result.nodes.empty()) {
        result.nodes = std::move(r);
        continue;
      }
      for (std::size_t v = 0; v < r.size(); ++v)
        for (std::size_t i = 0; i < r[v].lo.size(); ++i) {
          result.nodes[v].lo[i] = std::min(result.nodes[v].lo[i], r[v].lo[i]);
          result.nodes[v].hi[i] = std::max(result.nodes[v].hi[i], r[v].hi[i]);
        }
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::vector<float> normalisedImages(const Graph& g, const std::vector<uint8_t>& pixels) {
  std::vector<float> x(pixels.size());
  const int64_t size = g.nodes[0].size();
  for (std::size_t i = 0; i < pixels.size(); ++i)
    x[i] = (float(pixels[i]) / 255.0f - g.meanOf(int64_t(i) % size)) / g.deviationOf(int64_t(i) % size);
  return x;
}

Tightness tightnessOf(const NodeRange& r) { return tightnessOf(r, 0, int64_t(r.lo.size())); }

Tightness tightnessOf(const NodeRange& r, int64_t offset, int64_t size) {
  Tightness t;
  if (size <= 0 || offset < 0 || offset + size > int64_t(r.lo.size())) return t;
  const auto lo = r.lo.begin() + offset, hi = r.hi.begin() + offset;
  t.unionLo = *std::min_element(lo, lo + size);
  t.unionHi = *std::max_element(hi, hi + size);
  double w = 0;
  for (int64_t i = 0; i < size; ++i) w += hi[i] - lo[i];
  t.meanWidth = w / double(size);
  return t;
}

}  // namespace peat::save
