// SPDX-License-Identifier: MIT
// peat save campaign: accuracy under faults per protection scheme, with SAVE's detections and
// recoveries and each scheme's latency.
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include <unistd.h>

#include "app/peat/cmd_save.h"
#include "app/peat/commands.h"
#include "core/io/tensor_source.h"
#include "core/save/campaign_record.h"
#include "core/save/campaign_scoring.h"
#include "core/save/command_settings.h"
#include "core/save/dataset.h"
#include "core/save/result_json.h"
#include "core/save/save_session.h"
#include "core/util/events.h"

namespace peat::cli {
namespace {

// Top-1 accuracy per number of faults (rows) and scheme (columns).
void printAccuracyTable(const save::CampaignOptions& co, const save::CampaignResult& r) {
  std::printf("\ntop-1 accuracy (%%) by faults per inference:\n%-8s", "flips");
  for (save::Scheme s : co.schemes) std::printf(" %8s", save::schemeName(s));
  std::printf("\n");
  for (int64_t f : co.flips) {
    bool any = false;
    for (const save::CampaignPoint& p : r.points) any = any || p.flips == f;
    if (!any) continue;
    std::printf("%-8lld", (long long)f);
    for (save::Scheme s : co.schemes) {
      const save::CampaignPoint* found = nullptr;
      for (const save::CampaignPoint& p : r.points)
        if (p.flips == f && p.scheme == s) found = &p;
      if (found)
        std::printf(" %8.1f", 100 * found->accuracy);
      else
        std::printf(" %8s", "-");
    }
    std::printf("\n");
  }
}

// SAVE's totals, then which mechanism caught what, per point, and what got through silently.
void printDetections(const save::CampaignResult& r) {
  const save::RunStats t = save::saveTotals(r);
  std::printf("\nSAVE: %llu detections, %llu recoveries (reruns of the interrupted layer)",
              (unsigned long long)t.detections, (unsigned long long)t.recoveries);
  if (t.channelReruns)
    std::printf("; %llu of them reran only the output channels whose weights changed (%.1f%% of the layer on average)",
                (unsigned long long)t.channelReruns, 100 * t.channelRerunShare / double(t.channelReruns));
  if (t.elementRepairs)
    std::printf("; %llu recomputed only the values that failed their checks (%.2f%% of the layer's values on average)",
                (unsigned long long)t.elementRepairs, 100 * t.elementRepairShare / double(t.elementRepairs));
  if (t.checksums) std::printf("; %llu of %llu ABFT checksums failed", (unsigned long long)t.checksumMismatches, (unsigned long long)t.checksums);
  std::printf("\n");
  std::printf("\nwhat caught the faults (detections per mechanism; silent: predictions changed with nothing detected):\n");
  std::printf("%-8s %7s %9s %8s %8s %8s %8s %9s %8s %8s %7s\n", "scheme", "flips", "faults", "weights", "range", "recomp",
              "ecc-fix", "ecc-fail", "reruns", "rerun-f", "silent");
  for (const save::CampaignPoint& p : r.points) {
    if (p.scheme == save::Scheme::None) continue;
    std::printf("%-8s %7lld %9llu %8llu %8llu %8llu %8llu %9llu %8llu %8llu %7lld\n", save::schemeName(p.scheme),
                (long long)p.flips, (unsigned long long)p.stats.faults, (unsigned long long)p.stats.weightRepairs,
                (unsigned long long)p.stats.rangeViolations,
                (unsigned long long)(p.stats.recomputeMismatches + p.stats.checksumMismatches),
                (unsigned long long)p.stats.eccCorrected, (unsigned long long)p.stats.eccFailures,
                (unsigned long long)p.stats.recoveries, (unsigned long long)p.stats.rerunFaults, (long long)p.silent);
  }
}

void printCampaignText(const SaveCampaignOptions& o, const save::Graph& g, const save::Selection& sel,
                       const save::ProtectedRunner& runner, const save::CampaignOptions& co,
                       const save::CampaignResult& r, const std::string& data, bool profiledOnTest) {
  std::printf("SAVE campaign: %s, %lld test images in batches of %lld (fault-free top-1 %.1f%%), %s faults of %d bit(s)\n",
              g.model.c_str(), (long long)co.images, (long long)co.batch, 100 * r.cleanAccuracy, o.pattern.c_str(), o.bits);
  if (o.agreement)
    std::printf("scored as top-1 agreement with the fault-free prediction (--agreement), not accuracy on the labels\n");
  std::printf("data: %s%s\n", data.c_str(),
              profiledOnTest ? " (no train split: Ranger's bounds were profiled on these test samples, which flatters it)" : "");
  std::printf("unreliable memory: %lld words without SAVE, %lld with SAVE (reliable memory: a peak of %.1f KiB in use)\n\n",
              (long long)runner.unreliableWords(save::Scheme::None), (long long)runner.unreliableWords(save::Scheme::Save),
              double(sel.reliableBytes) / 1024);
  std::printf("SAVE's check of each linear/conv output (--verifier %s):\n", o.verifier.c_str());
  std::size_t nameWidth = 8;
  for (const save::VerifierChoice& c : runner.verifierChoices()) nameWidth = std::max(nameWidth, c.name.size());
  for (const save::VerifierChoice& c : runner.verifierChoices())
    std::printf("  %-*s %s\n", int(nameWidth), c.name.c_str(), c.reason.c_str());
  std::printf("\n%-8s %14s %8s %14s %9s %10s %16s\n", "scheme", "ms per batch", "latency", "CPU ms/batch", "CPU time",
              "accuracy", "false positives");
  for (const save::SchemeLatency& l : r.latency)
    std::printf("%-8s %14.2f %7.2fx %14.2f %8.2fx %9.1f%% %16llu\n", save::schemeName(l.scheme), 1000 * l.seconds, l.ratio,
                1000 * l.cpuSeconds, l.cpuRatio, 100 * l.accuracy, (unsigned long long)l.falsePositives);
  std::printf("(latency: wall time; CPU time: every thread of the process, the checks on the second core included)\n");
  printAccuracyTable(co, r);
  printDetections(r);
  std::printf("fault model: %s faults of %d bit(s) on %s, %s; reruns %s; SAVE's checks trail by at most %d layer(s) and it reruns a failed layer at most %d times (%s)\n",
              o.pattern.c_str(), o.bits, o.target == "both" ? "weights and activations" : o.target.c_str(),
              o.basis == "memory" ? "the same rate per byte of each scheme's unreliable memory (flips: the unprotected run's)"
                                  : "the same flips per inference for every scheme",
              o.noRerunFaults ? "meet no new faults" : "meet new faults at the same rate per layer step", o.checkLag, o.maxRecoveries,
              "docs/save.md");
}

// Ctrl-C (or the workbench's Cancel, or closing it during the campaign): the point in flight
// ends, the points finished stay in the session and the run is marked cancelled.
std::atomic<bool> interrupted{false};
void onInterrupt(int) {
  interrupted.store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C stops at once
}
struct Interrupted {};

}  // namespace

int runSaveCampaign(const SaveCampaignOptions& o) {
  if (o.analysis.mode == "profiled")
    throw std::invalid_argument("SAVE's range checks need sound ranges: --mode profiled is unsound (use symbolic or interval)");
  save::SelectionOptions so = save::selectionOptions(o.analysis);
  const save::CampaignOptions co = save::campaignOptions(o);
  const save::VerifierPolicy policy = save::verifierPolicyFromName(o.verifier);

  const save::Graph g = save::modelGraph(o.analysis);
  const save::Selection sel = save::selectBits(g, so);
  const int64_t inSize = g.nodes[0].size();
  const save::DataSet test = save::loadDataSet(g, o.analysis.data, "test", co.images, so.pixelLo, so.pixelHi);
  // Ranger's bounds are profiled on up to 5000 training samples; data without a train split
  // profiles its test samples instead (optimistic for Ranger: said in the output).
  save::DataSet train;
  bool profiledOnTest = false;
  try {
    train = save::loadDataSet(g, o.analysis.data, "train", 5000, so.pixelLo, so.pixelHi, true);
  } catch (const io::SourceError&) {
    train = test;
    profiledOnTest = true;
  }
  save::ProtectedRunner runner(g, sel, save::profiledRanges(g, train.normalised.data(), train.count), co.batch, policy);
  const std::vector<float>& images = test.normalised;
  std::vector<int32_t> labels = test.labels;
  if (o.agreement) save::agreementLabels(g, images.data(), test.count, co.batch, labels);

  std::unique_ptr<store::SessionWriter> w;
  if (!o.analysis.session.empty()) {
    w = save::openSaveSession(o.analysis.session, save::saveProvenance(g.model, o.seed, o.analysis.commandLine));
    const std::string name = save::beginCampaignRun(*w, {g.model, o.analysis.weights, o.shard, save::campaignSettings(o)},
                                                     runner.verifierChoices());
    if (!o.quiet) {
      std::fprintf(stderr, "storing points in run '%s' of %s as they finish\n", name.c_str(), o.analysis.session.c_str());
      events::stored(o.analysis.session, "run", name);
    }
  }
  const bool tty = !o.analysis.json && !o.quiet && isatty(2);
  events::Progress lines("points");
  const int64_t totalPoints =
      (int64_t(co.flips.size() * co.schemes.size()) - co.shardIndex + co.shardCount - 1) / co.shardCount;
  bool latencyWritten = false;
  interrupted.store(false);
  std::signal(SIGINT, onInterrupt);
  save::CampaignResult r;
  bool cancelled = false;
  try {
    r = save::runCampaign(runner, images.data(), labels.data(), co, inSize,
                                                   [&](const save::CampaignResult& sofar) {
                                                     if (w) {  // flushed: a killed campaign keeps this point
                                                       save::writeCampaignTables(*w, sofar, !latencyWritten);
                                                       latencyWritten = true;
                                                     }
                                                     const save::CampaignPoint& last = sofar.points.back();
                                                     // every point, before the progress that counts it:
                                                     // the workbench draws each
                                                     events::send(events::Event("point")
                                                                      .add("scheme", save::schemeName(last.scheme))
                                                                      .add("flips", int64_t(last.flips))
                                                                      .add("accuracy", last.accuracy));
                                                     lines(int64_t(sofar.points.size()), totalPoints, {}, true);
                                                     if (tty)
                                                       std::fprintf(stderr, "\r%zu points done", sofar.points.size());
                                                     if (interrupted.load()) {
                                                       r = sofar;
                                                       throw Interrupted{};
                                                     }
                                                   });
  } catch (const Interrupted&) {
    cancelled = true;
  }
  std::signal(SIGINT, SIG_DFL);
  if (tty) std::fprintf(stderr, "\n");
  if (w) {
    save::writeCampaignTables(*w, r, !latencyWritten);
    w->endRun(cancelled ? store::RunStatus::Cancelled : store::RunStatus::Complete);
  }
  if (cancelled) {
    std::fprintf(stderr, "peat: campaign stopped early after %zu of %lld points%s\n", r.points.size(), (long long)totalPoints,
                 w ? "; the session keeps them, the run marked cancelled" : "");
    return 130;
  }
  if (o.quiet) return 0;

  if (o.analysis.json)
    printJson([&](JsonWriter& j) {
      save::writeCampaignJson(j, g, sel, runner, co, r, test.name, profiledOnTest, o.agreement);
    });
  else
    printCampaignText(o, g, sel, runner, co, r, test.name, profiledOnTest);
  return 0;
}

}  // namespace peat::cli
