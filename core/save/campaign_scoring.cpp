// SPDX-License-Identifier: MIT
#include "core/save/campaign_scoring.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace peat::save {

void agreementLabels(const Graph& g, const float* images, int64_t count, int64_t batch, std::vector<int32_t>& labels) {
  const int64_t inSize = g.nodes[0].size();
  const int64_t classes = g.nodes[std::size_t(g.output)].size();
  for (int64_t first = 0; first < count; first += batch) {
    const int64_t n = std::min(batch, count - first);
    const auto act = runAll(g, images + first * inSize, n);
    for (int64_t s = 0; s < n; ++s) {
      const int top = topClassOf(g, act[std::size_t(g.output)].data() + s * classes);
      if (top < 0) throw std::invalid_argument("--agreement: the fault-free logits of sample " +
                                               std::to_string(first + s) + " are not finite");
      labels[std::size_t(first + s)] = top;
    }
  }
}

RunStats saveTotals(const CampaignResult& r) {
  RunStats total;
  for (const CampaignPoint& p : r.points)
    if (p.scheme == Scheme::Save) total += p.stats;
  return total;
}

}  // namespace peat::save
