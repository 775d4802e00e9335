// SPDX-License-Identifier: MIT
// peat save analyze: SAVE's offline selection (ranges, bit properties, tiles in reliable memory).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <memory>
#include <stdexcept>

#include "app/peat/cmd_save.h"
#include "app/peat/commands.h"
#include "core/save/analysis_record.h"
#include "core/save/command_settings.h"
#include "core/save/dataset.h"
#include "core/save/result_json.h"
#include "core/save/save_session.h"
#include "core/save/tightness_reference.h"
#include "core/util/events.h"
#include "core/util/files.h"

namespace peat::cli {
namespace {

double ratio(double a, double b) { return b > 0 ? a / b : NAN; }

void store(const save::Selection& s, const SaveAnalyzeOptions& o, const save::TightnessReferences& ref) {
  std::unique_ptr<store::SessionWriter> writer =
      save::openSaveSession(o.session, save::saveProvenance(s.model, 0, o.commandLine));
  const std::string id = save::freeResultId(o.session, save::resultBase(s.model) + "-" + s.mode);
  save::writeAnalysis(*writer, id, s, save::absoluteSource(save::modelSource(o)), ref.present ? &ref : nullptr);
  std::fprintf(stderr, "stored as SAVE result '%s' in %s\n", id.c_str(), o.session.c_str());
  events::stored(o.session, "save_result", id);
}

// The output's range against the --tightness references.
void printOutputRange(const save::Graph& g, const save::Selection& s, const save::Tightness& out,
                      const save::TightnessReferences& ref) {
  std::printf("\noutput (%s) in [%.4g, %.4g]\n", g.nodes[std::size_t(g.output)].name.c_str(), out.unionLo, out.unionHi);
  for (const save::OutputPart& p : g.outputs) {  // a model with several outputs: each one's bounds
    const save::Tightness t = save::tightnessOf(s.ranges.nodes[std::size_t(g.output)], p.offset, p.size());
    std::printf("  output '%s' in [%.4g, %.4g]\n", p.name.c_str(), t.unionLo, t.unionHi);
  }
  if (!ref.present) return;
  const save::Tightness& t = ref.test[std::size_t(g.output)];
  const double w = out.unionHi - out.unionLo;
  std::printf("  plain intervals   [%.4g, %.4g]  %.2fx the gradient-ascent width (%.3f s)\n", ref.interval.unionLo,
              ref.interval.unionHi, ratio(ref.interval.unionHi - ref.interval.unionLo, ref.ascent.unionHi - ref.ascent.unionLo),
              ref.intervalSeconds);
  std::printf("  this analysis     [%.4g, %.4g]  %.2fx the gradient-ascent width\n", out.unionLo, out.unionHi,
              ratio(w, ref.ascent.unionHi - ref.ascent.unionLo));
  std::printf("  gradient ascent   [%.4g, %.4g]  (inside the box: a lower bound on the true range)\n",
              ref.ascent.unionLo, ref.ascent.unionHi);
  std::printf("  test set          [%.4g, %.4g]  this analysis is %.2fx its width\n", t.unionLo, t.unionHi,
              ratio(w, t.unionHi - t.unionLo));
}

void printAnalysisText(const save::Graph& g, const save::Selection& s, const save::SelectionOptions& so,
                       const save::TightnessReferences& ref) {
  const save::Tightness out = save::tightnessOf(s.ranges.nodes[std::size_t(g.output)]);
  const std::string criterion = save::criterionText(so.criterion, so.tau, so.rtol, so.epsilon);
  if (s.sound)
    std::printf("SAVE selection: %s (%lld parameters), %s ranges (sound) for %s in [%g, %g], %s\n", s.model.c_str(),
                (long long)g.parameterCount(), s.mode.c_str(), g.tokens > 0 ? "token ids" : "pixels", s.options.pixelLo,
                s.options.pixelHi, criterion.c_str());
  else
    std::printf("SAVE selection: %s (%lld parameters), PROFILED ranges over 10,000 training images: UNSOUND, "
                "inputs unlike them leave these ranges; for comparison only, %s\n",
                s.model.c_str(), (long long)g.parameterCount(), criterion.c_str());
  if (!g.batch.empty()) std::printf("%s\n", g.batch.c_str());
  if (g.tokens > 0) std::printf("the input holds token ids in [0, %lld] (the embedding tables' rows)\n", (long long)(g.tokens - 1));
  for (const save::InputPart& p : g.inputs)
    if (g.inputs.size() > 1 || !std::isnan(p.lo)) {  // each input's raw box
      double lo = s.options.pixelLo, hi = s.options.pixelHi;
      save::elementRange(g, p.offset, lo, hi);
      std::printf("input '%s' %s in [%g, %g]", p.name.c_str(), save::dimsText(p.shape).c_str(), lo, hi);
      if (!p.means.empty() || !p.deviations.empty()) {  // its own normalisation
        const auto [means, deviations] = save::partNormalisation(g, p);
        const auto list = [](const std::vector<float>& values) {
          std::string t;
          char number[32];
          for (float v : values) {
            std::snprintf(number, sizeof number, "%g", double(v));
            t += (t.empty() ? "" : ",") + std::string(number);
          }
          return t;
        };
        std::printf(", normalised by mean %s, std %s", list(means).c_str(), list(deviations).c_str());
      }
      std::printf("\n");
    }
  if (s.sensitivity)
    std::printf("output criterion: a bit is robust when its flip cannot move any logit by more than %g for any input in "
                "the box (the fp32 runs' own rounding reaches the logits by at most %.3g; sensitivities in %.3f s)\n",
                so.epsilon, s.sensitivity->rounding, s.sensitivity->seconds);
  std::printf("range analysis %.3f s, whole selection %.3f s\n\n", s.rangeSeconds, s.seconds);
  int nameWidth = 18;
  for (const save::LayerSelection& l : s.layers) nameWidth = std::max(nameWidth, int(l.name.size()));
  std::printf("%-*s %-10s %8s %12s %8s %8s %11s %8s", nameWidth, "layer", "op", "elements", "mean width", "robust",
              "ranging", "vulnerable", "type-2");
  if (ref.present) std::printf(" %11s", "vs test set");
  std::printf("\n");
  for (const save::LayerSelection& l : s.layers) {
    const double bits = 32.0 * double(l.elements);
    std::printf("%-*s %-10s %8lld %12.4g %7.1f%% %7.1f%% %10.1f%% %7.1f%%", nameWidth, l.name.c_str(), l.op.c_str(),
                (long long)l.elements, l.meanWidth, 100 * double(l.robustBits) / bits, 100 * double(l.rangingBits) / bits,
                100 * double(l.vulnerableBits) / bits, 100 * double(l.type2) / double(l.elements));
    if (ref.present) std::printf(" %10.2fx", ratio(l.meanWidth, ref.test[std::size_t(l.node)].meanWidth));
    std::printf("\n");
  }
  printOutputRange(g, s, out, ref);
  std::printf("reliable memory%s: %lld of %lld tiles (%lldx%lld fp32, batch %lld), peak %.1f KiB in use of a %.1f KiB budget "
              "(the working set peaks at %.1f KiB); %lld of %lld values are type 2\n",
              so.placement == "ranked" ? "" : so.placement == "none" ? " (none placed)" : " (random placement)", (long long)s.reliableTiles, (long long)s.totalTiles, (long long)so.tileRows, (long long)so.tileCols,
              (long long)so.batch, double(s.reliableBytes) / 1024, double(s.budgetBytes) / 1024,
              double(s.workingSetBytes) / 1024, (long long)s.type2Elements, (long long)s.elements);
  auto share = [&](double w) { return s.recomputeAllWork > 0 ? 100 * (1 - w / s.recomputeAllWork) : 0.0; };
  std::printf("recomputation per image: %.4g multiply-adds left of %.4g without reliable memory (the placement avoids "
              "%.1f%%; the same budget filled in random order avoids %.1f%%)\n",
              s.recomputeWork, s.recomputeAllWork, share(s.recomputeWork), share(s.randomPlacementWork));
}

}  // namespace

int runSaveAnalyze(const SaveAnalyzeOptions& o) {
  const save::SelectionOptions so = save::selectionOptions(o);
  if (!o.placementProblem.empty()) util::checkWritable(o.placementProblem, o.force);  // before the analysis
  const save::Graph g = save::modelGraph(o);
  if (o.tightness && g.nodes[0].shape != std::vector<int64_t>{1, 28, 28})
    throw std::invalid_argument("--tightness compares with Fashion-MNIST; model " + o.model + " takes other inputs");
  std::vector<save::NodeRange> profiled;
  save::SelectionOptions withProfile = so;
  if (o.mode == "profiled") {  // Ranger-style empirical ranges over 10,000 training images: UNSOUND
    const save::DataSet train = save::loadDataSet(g, o.data, "train", 10000, so.pixelLo, so.pixelHi, true);
    profiled = save::profiledRanges(g, train.normalised.data(), train.count);
    withProfile.profiled = &profiled;
  }
  const save::Selection s = save::selectBits(g, withProfile);
  const save::TightnessReferences ref =
      o.tightness ? save::tightnessReferences(g, so, o.ascentSteps, o.ascentStarts) : save::TightnessReferences{};
  if (!o.placementProblem.empty()) {  // before the session: a bad path leaves the session as it was
    std::ostringstream problem;
    save::writePlacementProblem(s, problem);
    util::writeFileAtomically(o.placementProblem, o.force, problem.str());
  }
  if (!o.session.empty()) store(s, o, ref);
  if (o.json)
    printJson([&](JsonWriter& j) { save::writeAnalysisJson(j, g, s, so, ref); });
  else
    printAnalysisText(g, s, so, ref);
  return 0;
}

}  // namespace peat::cli
