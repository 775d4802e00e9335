// SPDX-License-Identifier: MIT
#include "core/save/tightness_reference.h"

#include <stdexcept>
#include <vector>

#include "core/data/datasets.h"
#include "core/save/ranges.h"

namespace peat::save {

TightnessReferences tightnessReferences(const Graph& g, const SelectionOptions& so, int steps, int starts) {
  if (steps < 1 || starts < 1) throw std::invalid_argument("--ascent-steps and --ascent-starts must be at least 1");
  TightnessReferences ref;
  ref.present = true;
  const data::ImageSet test = data::loadFashionMnist("t10k");
  const std::vector<float> x = normalisedImages(g, test.pixels);
  const std::vector<NodeRange> seen = profiledRanges(g, x.data(), test.count);
  for (const NodeRange& r : seen) ref.test.push_back(tightnessOf(r));
  const NodeRange box = inputBox(g, so.pixelLo, so.pixelHi);
  ref.ascent = tightnessOf(ascentRanges(g, g.output, box, steps, starts));
  RangeOptions plain = so.ranges;
  plain.mode = RangeMode::Interval;
  const RangeResult r = analyzeRanges(g, box, plain);
  ref.interval = tightnessOf(r.nodes[std::size_t(g.output)]);
  ref.intervalSeconds = r.seconds;
  return ref;
}

}  // namespace peat::save
