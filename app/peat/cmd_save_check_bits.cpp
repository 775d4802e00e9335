// SPDX-License-Identifier: MIT
// peat save check-bits: SAVE's bit classes against single-bit fault injection.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include <unistd.h>

#include "app/peat/cmd_save.h"
#include "app/peat/commands.h"
#include "core/save/check_bits.h"
#include "core/save/command_settings.h"
#include "core/save/dataset.h"
#include "core/save/result_json.h"
#include "core/save/save_session.h"
#include "core/util/events.h"

namespace peat::cli {
namespace {

void printConfusion(const char* what, const save::Confusion& c) {
  const double n = double(std::max<uint64_t>(1, c.total()));
  std::printf("%s: %llu flips\n", what, (unsigned long long)c.total());
  std::printf("                          actually robust   actually vulnerable\n");
  std::printf("  predicted robust        %8llu %5.1f%%   %8llu %5.1f%%\n", (unsigned long long)c.robustRobust,
              100 * double(c.robustRobust) / n, (unsigned long long)c.robustVulnerable, 100 * double(c.robustVulnerable) / n);
  std::printf("  predicted non-robust    %8llu %5.1f%%   %8llu %5.1f%%   (over-protected: %.1f%%)\n",
              (unsigned long long)c.protectedRobust, 100 * double(c.protectedRobust) / n,
              (unsigned long long)c.protectedVulnerable, 100 * double(c.protectedVulnerable) / n,
              100 * double(c.protectedRobust) / n);
}

// One row of a per-layer or per-bit table: flips, false robust against top-1 and against the
// promise, over-protection (against top-1), the vulnerable share.
void printJudgedRow(const std::string& name, int width, const save::Judged& j) {
  const save::Confusion& c = j.top1;
  const double n = double(std::max<uint64_t>(1, c.total()));
  std::printf("  %-*s %9llu %8llu %8llu %8.1f%% %8.1f%%\n", width, name.c_str(), (unsigned long long)c.total(),
              (unsigned long long)c.robustVulnerable, (unsigned long long)j.promise.robustVulnerable,
              100 * double(c.protectedRobust) / n, 100 * double(c.robustVulnerable + c.protectedVulnerable) / n);
}

}  // namespace

void printCheckBits(const save::StoredCheckBits& s, bool json) {
  const save::CheckBitsResult& r = s.result;
  if (json) {
    printJson([&](JsonWriter& j) { save::writeCheckBitsJson(j, s); });
    return;
  }
  std::printf("SAVE bit classes against single-bit fault injection: %s, %lld evaluation images for weights (clean top-1 "
              "%.1f%%), criterion %s",
              s.campaign.model.c_str(), (long long)s.batch, 100 * r.cleanAccuracy, r.criterion.c_str());
  if (r.criterion == "output")
    std::printf(" (epsilon %g)\n", r.epsilon);
  else if (r.rtol != 0)
    std::printf(" (tau %g, rtol %g)\n", s.tau, r.rtol);
  else
    std::printf(" (tau %g)\n", s.tau);
  if (s.campaign.shardCount > 1)
    std::printf("shard %d/%d of campaign %s: %llu of its flips\n", s.campaign.shardIndex, s.campaign.shardCount,
                s.campaign.id().c_str(), (unsigned long long)r.flips);
  std::printf("outcomes judged twice: top-1 (a flip is vulnerable when a top-1 prediction it touches changes) and the\n"
              "criterion's promise (%s)\n\n",
              r.criterion == "output" ? "no logit moves by more than epsilon"
                  : r.rtol != 0 ? "the value v moves by less than tau + rtol |v|, or the ReLU reading it gives the same output"
                                : "the value moves by less than tau, or the ReLU reading it gives the same output");
  printConfusion("weights, against top-1", r.weights);
  printConfusion("weights, against the promise", r.weightsPromise);
  printConfusion("activations (sampled bits), against top-1", r.activations);
  printConfusion("activations, against the promise", r.activationsPromise);
  std::size_t width = 8;
  for (const auto* list : {&r.weightLayers, &r.activationLayers})
    for (const auto& layer : *list) width = std::max(width, layer.first.size());
  const char* header = "  %-*s %9s %8s %8s %9s %9s\n";
  for (const auto& [title, list] : {std::pair{"\nweights per layer", &r.weightLayers}, std::pair{"\nactivations per layer", &r.activationLayers}}) {
    std::printf("%s (false robust against top-1 / against the promise; over-protected against top-1):\n", title);
    std::printf(header, int(width), "layer", "flips", "f.r.top1", "f.r.prom", "over-prot", "vulnerable");
    for (const auto& [name, x] : *list)
      if (x.top1.total()) printJudgedRow(name, int(width), x);
  }
  for (const auto& [title, bits] : {std::pair{"\nweights per bit position", &r.weightBits}, std::pair{"\nactivations per bit position", &r.activationBits}}) {
    std::printf("%s (31: the sign, 30-23: the exponent):\n", title);
    std::printf(header, int(width), "bit", "flips", "f.r.top1", "f.r.prom", "over-prot", "vulnerable");
    for (int b = 31; b >= 0; --b)
      if ((*bits)[std::size_t(b)].top1.total()) printJudgedRow(std::to_string(b), int(width), (*bits)[std::size_t(b)]);
  }
  std::printf("\n%llu (flip, image) pairs settled by a sound bound, %llu rerun exactly; %.1f s\n",
              (unsigned long long)r.settledByBound, (unsigned long long)r.reruns, r.seconds);
  if (!r.falseRobust.empty()) {
    std::printf("predicted robust but vulnerable:\n");
    for (const auto& [k, f] : r.falseRobust) std::printf("  %s\n", f.c_str());
  }
}

int runSaveCheckBits(const SaveCheckBitsOptions& o) {
  if (o.analysis.mode == "profiled")
    throw std::invalid_argument("check-bits needs sound ranges: --mode profiled is unsound (use symbolic or interval)");
  save::SelectionOptions so = save::selectionOptions(o.analysis);
  so.batch = 1;  // the activations' predicted classes, as the settings text says
  if (o.batch <= 0 || o.batch > 10000) throw std::invalid_argument("--batch must be 1..10000");
  if (o.weightFlips < 0 || o.activationFlips < 0 || o.weightsPerStratum < 0 || o.activationImages < 0)
    throw std::invalid_argument("flip and image counts must not be negative");
  if (o.weightFlips > 0 && o.weightsPerStratum > 0)
    throw std::invalid_argument("--weight-flips and --weights-per-stratum are two ways to sample weights: give one");
  const save::CheckBitsCampaign campaign = save::checkBitsCampaign(o);
  const save::Graph g = save::modelGraph(o.analysis);
  const save::Selection sel = save::selectBits(g, so);
  // the evaluation batch (weights) and the images activation flips are drawn from: the whole test
  // split by default, at most 10,000 images and 1 GiB of them
  const int64_t inSize = g.nodes[0].size();
  const int64_t cap = std::max<int64_t>(1, std::min<int64_t>(10000, (int64_t(1) << 28) / std::max<int64_t>(1, inSize)));
  const int64_t wanted = o.activationImages > 0 ? o.activationImages : cap;
  const save::DataSet test = save::loadDataSet(g, o.analysis.data, "test", std::max(o.batch, wanted), so.pixelLo, so.pixelHi,
                                               o.activationImages == 0);
  if (test.count < o.batch)
    throw std::invalid_argument("the test split holds " + std::to_string(test.count) + " samples, fewer than --batch " +
                                std::to_string(o.batch));
  const std::vector<float>& images = test.normalised;
  save::CheckBitsOptions co;
  co.batch = o.batch;
  co.tau = so.tau;
  co.weightFlips = o.weightFlips;
  co.weightsPerStratum = o.weightsPerStratum;
  co.activationFlips = o.activationFlips;
  co.activationImages = o.activationImages > 0 ? o.activationImages : test.count;
  co.seed = o.seed;
  co.threads = o.threads;
  co.shardIndex = campaign.shardIndex;
  co.shardCount = campaign.shardCount;
  const bool tty = !o.analysis.json && !o.quiet && isatty(2);
  events::Progress lines("flips");
  save::StoredCheckBits stored;
  stored.campaign = campaign;
  stored.campaign.model = g.model;
  stored.batch = o.batch;
  stored.tau = so.tau;
  stored.result = save::checkBits(g, sel, images.data(), test.labels.data(), co, [&](uint64_t done, uint64_t total) {
    if (o.quiet) return;
    lines(int64_t(done), int64_t(total));
    if (tty) std::fprintf(stderr, "\r%llu / %llu flips", (unsigned long long)done, (unsigned long long)total);
  });
  if (tty) std::fprintf(stderr, "\n");

  if (!o.analysis.session.empty()) {
    std::unique_ptr<store::SessionWriter> w =
        save::openSaveSession(o.analysis.session, save::saveProvenance(g.model, o.seed, o.analysis.commandLine));
    const std::string id = save::freeResultId(o.analysis.session, save::resultBase(g.model) + "-check-bits");
    save::writeCheckBits(*w, id, stored, o.shard);
    if (!o.quiet) {
      std::fprintf(stderr, "stored as SAVE result '%s' in %s\n", id.c_str(), o.analysis.session.c_str());
      events::stored(o.analysis.session, "save_result", id);
    }
  }
  if (!o.quiet) printCheckBits(stored, o.analysis.json);
  return 0;
}

}  // namespace peat::cli
