// SPDX-License-Identifier: MIT
// peat save verifiers: SAVE's three verifiers of linear/conv outputs on the same faults.
#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "app/peat/cmd_save.h"
#include "app/peat/commands.h"
#include "core/save/campaign.h"
#include "core/save/command_settings.h"
#include "core/save/dataset.h"
#include "core/save/result_json.h"

namespace peat::cli {

int runSaveVerifiers(const SaveVerifiersOptions& o) {
  if (o.analysis.mode == "profiled")
    throw std::invalid_argument("SAVE's verifiers need sound ranges: --mode profiled is unsound (use symbolic or interval)");
  if (o.flips <= 0) throw std::invalid_argument("--flips must be positive");
  const save::SelectionOptions so = save::selectionOptions(o.analysis);
  const save::Graph g = save::modelGraph(o.analysis);
  const save::Selection sel = save::selectBits(g, so);
  const int64_t batch = o.analysis.batch;
  if (batch > 10000) throw std::invalid_argument("--batch must be at most 10000");
  const save::DataSet test = save::loadDataSet(g, o.analysis.data, "test", batch, so.pixelLo, so.pixelHi);
  const std::vector<float>& images = test.normalised;
  save::ProtectedRunner runner(g, sel, {}, batch);
  const std::vector<save::VerifierCoverage> cov = save::compareVerifiers(runner, g, images.data(), batch, o.flips, o.seed);
  if (o.analysis.json) {
    printJson([&](JsonWriter& j) { save::writeVerifiersJson(j, g, batch, so, cov); });
    return 0;
  }
  auto name = [](int k) { return save::verifierKindName(save::VerifierKind(k)); };
  std::printf("SAVE's verifiers on the same faults: %s, %lld test images per check, %lld single-bit flips of type-2\n"
              "values in unreliable memory per op; flips the range check catches are counted apart\n\n",
              g.model.c_str(), (long long)batch, (long long)o.flips);
  std::size_t width = 8;
  for (const save::VerifierCoverage& c : cov) width = std::max(width, c.name.size());
  std::printf("%-*s %9s %8s %8s", int(width), "op", "in range", "harmful", "auto");
  for (int k = 0; k < 3; ++k) std::printf(" | %9s %6s %8s", name(k), "missed", "ms");
  std::printf("\n");
  for (const save::VerifierCoverage& c : cov) {
    const int64_t inRange = c.flips - c.outOfRange;
    std::printf("%-*s %9lld %8lld %8s", int(width), c.name.c_str(), (long long)inRange, (long long)c.harmful,
                save::verifierKindName(c.chosen));
    for (int k = 0; k < 3; ++k)
      std::printf(" | %8.1f%% %6lld %8.3f", 100 * double(c.detected[k]) / double(std::max<int64_t>(1, inRange)),
                  (long long)c.harmfulMissed[k], 1000 * c.seconds[k]);
    std::printf("\n");
  }
  for (const save::VerifierCoverage& c : cov)
    for (int k = 0; k < 3; ++k)
      if (c.falsePositives[k])
        std::printf("%s: %s fired on the clean batch (%lld of 3 checks)\n", c.name.c_str(), name(k), (long long)c.falsePositives[k]);
  std::printf("\nper verifier: the share of the in-range flips detected; missed: harmful flips (the image's prediction\n"
              "changed) not detected; ms: one check of the clean batch (best of 3)\n");
  return 0;
}

}  // namespace peat::cli
