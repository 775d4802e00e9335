// SPDX-License-Identifier: MIT
#include "core/save/output_summary.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace peat::save {

std::vector<int64_t> topClasses(const float* outputs, int64_t size, int k) {
  std::vector<int64_t> order(static_cast<std::size_t>(std::max<int64_t>(size, 0)));
  std::iota(order.begin(), order.end(), 0);
  const std::size_t keep = std::min<std::size_t>(std::size_t(std::max(k, 0)), order.size());
  std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(keep), order.end(), [&](int64_t a, int64_t b) {
    const float x = outputs[a], y = outputs[b];
    if (std::isnan(x) != std::isnan(y)) return std::isnan(y);  // a strict weak order with NaN last
    return x > y || (!(y > x) && a < b);
  });
  order.resize(keep);
  return order;
}

OutputSummary summariseOutputs(const float* outputs, int64_t samples, const std::vector<int64_t>& sampleShape, int top,
                               int64_t maxSamples, int firstValues) {
  if (samples < 0) throw std::invalid_argument("a negative sample count");
  int64_t size = 1, wide = 0;
  for (int64_t d : sampleShape) {
    if (d < 0) throw std::invalid_argument("a negative output dimension");
    size *= d;
    wide += d > 1;
  }
  OutputSummary out;
  out.samples = samples;
  out.sampleShape = sampleShape;
  out.scoreVector = size >= 2 && wide == 1;
  out.stats = analyzer::valueStats(outputs, uint64_t(samples * size));
  for (int64_t s = 0; s < std::min(samples, maxSamples); ++s) {
    const float* o = outputs + s * size;
    SampleOutputs row;
    row.sample = s;
    row.stats = analyzer::valueStats(o, uint64_t(size));
    if (out.scoreVector && row.stats.finite == row.stats.count)
      for (int64_t c : topClasses(o, size, top)) {
        row.classes.push_back(c);
        row.scores.push_back(o[c]);
      }
    row.first.assign(o, o + std::min<int64_t>(size, std::max(firstValues, 0)));
    out.shown.push_back(std::move(row));
  }
  return out;
}

}  // namespace peat::save
