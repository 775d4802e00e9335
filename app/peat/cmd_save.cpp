// SPDX-License-Identifier: MIT
// peat save analyze: SAVE's offline selection (ranges, bit properties, tiles in reliable memory).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <memory>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <unistd.h>

#include "app/peat/commands.h"
#include "app/peat/text.h"
#include "core/data/datasets.h"
#include "core/save/model_source.h"
#include "core/save/onnx_model.h"
#include "core/save/campaign.h"
#include "core/merge/shards.h"
#include "core/save/analysis_record.h"
#include "core/save/campaign_record.h"
#include "core/save/check_bits.h"
#include "core/save/check_bits_record.h"
#include "core/save/dataset.h"
#include "core/io/tensor_source.h"
#include "core/save/selection.h"
#include "core/store/h5.h"
#include "core/store/run_records.h"
#include "core/store/session.h"
#include "core/util/json_writer.h"
#include "core/util/campaign_key.h"
#include "core/util/events.h"
#include "core/util/text.h"

namespace peat::cli {
namespace {

std::pair<int, int> parseShard(const std::string& text) {
  if (const auto shard = util::parseShard(text)) return *shard;
  throw std::invalid_argument("--shard '" + text + "' is not INDEX/COUNT with 0 <= INDEX < COUNT, e.g. 0/4");
}

std::pair<double, double> parseRange(const std::string& text) {
  const auto comma = text.find(',');
  if (comma != std::string::npos) {
    try {
      std::size_t used = 0;
      const std::string a = text.substr(0, comma), b = text.substr(comma + 1);
      const double lo = std::stod(a, &used);
      if (used == a.size()) {
        const double hi = std::stod(b, &used);
        if (used == b.size()) return {lo, hi};
      }
    } catch (const std::exception&) {
    }
  }
  throw std::invalid_argument("--input-range '" + text + "' is not LO,HI with two numbers, e.g. 0,1");
}

struct Reference : save::TightnessReference {
  bool present = false;
  double intervalSeconds = 0;
};

Reference references(const save::Graph& g, const save::SelectionOptions& so, int steps, int starts) {
  if (steps < 1 || starts < 1) throw std::invalid_argument("--ascent-steps and --ascent-starts must be at least 1");
  Reference ref;
  ref.present = true;
  const data::ImageSet test = data::loadFashionMnist("t10k");
  const std::vector<float> x = save::normalisedImages(g, test.pixels);
  const std::vector<save::NodeRange> seen = save::profiledRanges(g, x.data(), test.count);
  for (const save::NodeRange& r : seen) ref.test.push_back(save::tightnessOf(r));
  const save::NodeRange box = save::inputBox(g, so.pixelLo, so.pixelHi);
  ref.ascent = save::tightnessOf(save::ascentRanges(g, g.output, box, steps, starts));
  save::RangeOptions plain = so.ranges;
  plain.mode = save::RangeMode::Interval;
  const save::RangeResult r = save::analyzeRanges(g, box, plain);
  ref.interval = save::tightnessOf(r.nodes[std::size_t(g.output)]);
  ref.intervalSeconds = r.seconds;
  return ref;
}

double ratio(double a, double b) { return b > 0 ? a / b : NAN; }

// The provenance of a `peat save` session: the model, Fashion-MNIST, the CPU backend.
store::Provenance saveProvenance(const std::string& model, uint64_t seed, const std::string& commandLine) {
  store::Provenance prov;
  prov.model = model;
  prov.dataset = "fashion-mnist";
  prov.backend = prov.device = "cpu";
  prov.seed = int64_t(seed);
  prov.commandLine = commandLine;
  return prov;
}

std::unique_ptr<store::SessionWriter> openSession(const std::string& path, const store::Provenance& prov) {
  const bool exists = std::ifstream(path).good();
  return std::make_unique<store::SessionWriter>(path, prov, exists ? store::WriteMode::Append : store::WriteMode::Create);
}

// `base`, or base-2, base-3, ... when the session holds it already.
std::string freeResultId(const std::string& session, const std::string& base) {
  const store::SessionSummary s = store::SessionReader(session).summary();
  std::string id = base;
  for (int k = 2; std::find(s.saveResults.begin(), s.saveResults.end(), id) != s.saveResults.end(); ++k)
    id = base + "-" + std::to_string(k);
  return id;
}

save::ModelSource modelSource(const SaveAnalyzeOptions& o);

void store(const save::Selection& s, const SaveAnalyzeOptions& o, const Reference& ref) {
  std::unique_ptr<store::SessionWriter> writer = openSession(o.session, saveProvenance(s.model, 0, o.commandLine));
  const std::string id = freeResultId(o.session, save::resultBase(s.model) + "-" + s.mode);
  save::writeAnalysis(*writer, id, s, save::absoluteSource(modelSource(o)), ref.present ? &ref : nullptr);
  std::fprintf(stderr, "stored as SAVE result '%s' in %s\n", id.c_str(), o.session.c_str());
  events::stored(o.session, "save_result", id);
}

}  // namespace

static save::SelectionOptions selectionOptions(const SaveAnalyzeOptions& o) {
  save::SelectionOptions so;
  std::tie(so.pixelLo, so.pixelHi) = parseRange(o.inputRange);
  const auto [tileRows, tileCols] = parseTile(o.tile);
  so.tileRows = int64_t(tileRows);
  so.tileCols = int64_t(tileCols);
  so.tau = o.tau;
  so.rtol = o.rtol;
  so.criterion = o.criterion;
  so.epsilon = o.epsilon;
  so.budgetBytes = int64_t(o.budgetMiB * 1048576.0);
  if (!o.budget.empty()) {  // "5%": a share of the working set; "2.5" or "2.5MiB": MiB
    std::string text = o.budget;
    const bool share = text.back() == '%';
    if (share) text.pop_back();
    if (!share && text.size() > 3 && text.compare(text.size() - 3, 3, "MiB") == 0) text.resize(text.size() - 3);
    const std::vector<double> v = util::parseNumberList(text, "--budget");
    if (v.size() != 1 || !(v[0] > 0)) throw std::invalid_argument("--budget '" + o.budget + "' is not 5% or 2.5MiB");
    if (share) {
      if (v[0] > 100) throw std::invalid_argument("--budget '" + o.budget + "' is more than the whole working set");
      so.budgetShare = v[0] / 100;
    } else {
      so.budgetBytes = int64_t(v[0] * 1048576.0);
    }
  }
  so.batch = o.batch;
  if (o.placement != "ranked" && o.placement != "random" && o.placement != "none")
    throw std::invalid_argument("--placement '" + o.placement + "' is none of ranked, random, none");
  so.placement = o.placement;
  if (o.mode == "symbolic" || o.mode == "profiled")
    so.ranges.mode = save::RangeMode::Symbolic;
  else if (o.mode == "interval")
    so.ranges.mode = save::RangeMode::Interval;
  else
    throw std::invalid_argument("--mode '" + o.mode + "' is not symbolic, interval or profiled");
  if (o.depth < 0 || o.splits < 0 || o.splits > 12) throw std::invalid_argument("--depth must be >= 0 and --splits 0..12");
  so.ranges.depth = o.depth;
  so.ranges.splits = o.splits;
  save::checkOptions(so);  // bad ranges, tiles and budgets are refused before the weights are read
  return so;
}

namespace {
// Where the model comes from, as the options name it.
save::ModelSource modelSource(const SaveAnalyzeOptions& o) {
  save::ModelSource source;
  source.model = o.model;
  source.weights = o.weights;
  source.run = o.run;
  source.iteration = o.iteration;
  source.randomSeed = o.randomWeights;
  auto parse = [](const std::string& text, const char* option) {
    if (text.empty()) return std::vector<float>{};
    const std::vector<double> v = util::parseNumberList(text, option);
    return std::vector<float>(v.begin(), v.end());
  };
  source.inputMean = parse(o.inputMean, "--input-mean");
  source.inputStd = parse(o.inputStd, "--input-std");
  return source;
}
}  // namespace

// The model's graph: a zoo model with the checkpoint's (or seeded random) weights, or an ONNX file
// with its own.
save::Graph modelGraph(const SaveAnalyzeOptions& o) { return save::buildGraph(modelSource(o)); }

int runSaveInspect(const SaveAnalyzeOptions& o) {
  auto numberText = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);
    return std::string(b);
  };
  SaveAnalyzeOptions withSeed = o;
  if (!save::isOnnxModel(o.model) && o.weights.empty() && o.randomWeights == 0) withSeed.randomWeights = 1;  // shapes only
  const save::Graph g = modelGraph(withSeed);
  auto shapeText = [](const std::vector<int64_t>& s) {
    std::string t;
    for (int64_t d : s) t += (t.empty() ? "" : "x") + std::to_string(d);
    return t;
  };
  auto details = [&](const save::Node& n) {
    std::string t;
    if (n.op == save::Op::Conv2d || n.op == save::Op::MaxPool2d || n.op == save::Op::AvgPool2d) {
      t = "kernel " + std::to_string(n.kernel) + ", stride " + std::to_string(n.stride) + ", padding " + std::to_string(n.padding);
      if (n.groups != 1) t += ", groups " + std::to_string(n.groups);
      if (n.dilation != 1) t += ", dilation " + std::to_string(n.dilation);
    } else if (n.op == save::Op::Clip) {
      t = "[" + numberText(n.bias[0]) + ", " + numberText(n.bias[1]) + "]";
    } else if (n.op == save::Op::LayerNorm) {
      t = "eps " + numberText(n.eps);
    }
    return t;
  };
  if (o.json) {
    JsonWriter j(std::cout);
    j.beginObject().field("model", g.model).field("parameters", g.parameterCount()).key("nodes").beginArray();
    for (std::size_t v = 0; v < g.nodes.size(); ++v) {
      const save::Node& n = g.nodes[v];
      j.beginObject().field("index", int64_t(v)).field("name", n.name).field("op", save::opName(n.op));
      j.field("shape", shapeText(n.shape)).key("inputs").beginArray();
      for (int i : n.inputs) j.value(int64_t(i));
      j.endArray().field("weights", int64_t(n.weight.size() + n.bias.size())).field("details", details(n)).endObject();
    }
    j.endArray().field("output", int64_t(g.output)).endObject();
    std::cout << '\n';
    return 0;
  }
  std::printf("SAVE graph of %s: %zu ops, %lld parameters, input %s, output '%s' (%s)\n", g.model.c_str(), g.nodes.size(),
              (long long)g.parameterCount(), shapeText(g.nodes[0].shape).c_str(), g.nodes[std::size_t(g.output)].name.c_str(),
              shapeText(g.nodes[std::size_t(g.output)].shape).c_str());
  int width = 12;
  for (const save::Node& n : g.nodes) width = std::max(width, int(n.name.size()));
  std::printf("%5s  %-*s %-14s %-14s %-10s %s\n", "#", width, "name", "op", "shape", "inputs", "weights / details");
  for (std::size_t v = 0; v < g.nodes.size(); ++v) {
    const save::Node& n = g.nodes[v];
    std::string inputs;
    for (int i : n.inputs) inputs += (inputs.empty() ? "" : ",") + std::to_string(i);
    std::string extra = n.weight.empty() && n.bias.empty() ? "" : std::to_string(n.weight.size() + n.bias.size()) + " weights";
    const std::string d = details(n);
    if (!d.empty()) extra += (extra.empty() ? "" : "; ") + d;
    std::printf("%5zu  %-*s %-14s %-14s %-10s %s\n", v, width, n.name.c_str(), save::opName(n.op), shapeText(n.shape).c_str(),
                inputs.c_str(), extra.c_str());
  }
  return 0;
}

int runSaveAnalyze(const SaveAnalyzeOptions& o) {
  const save::SelectionOptions so = selectionOptions(o);
  const save::Graph g = modelGraph(o);
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
  const Reference ref = o.tightness ? references(g, so, o.ascentSteps, o.ascentStarts) : Reference{};
  if (!o.placementProblem.empty()) {  // before the session: a bad path leaves the session as it was
    std::ofstream problem(o.placementProblem);
    if (problem) save::writePlacementProblem(s, problem);
    if (!problem.flush()) throw std::runtime_error("cannot write the placement problem to " + o.placementProblem);
  }
  if (!o.session.empty()) store(s, o, ref);

  const save::Tightness out = save::tightnessOf(s.ranges.nodes[std::size_t(g.output)]);
  if (o.json) {
    JsonWriter j(std::cout);
    j.beginObject().field("model", s.model).field("mode", s.mode).field("ranges", s.sound ? "sound" : "unsound (profiled)");
    j.field("pixel_lo", so.pixelLo).field("pixel_hi", so.pixelHi).field("tau", so.tau).field("criterion", so.criterion);
    if (so.rtol != 0) j.field("rtol", so.rtol);
    if (s.sensitivity)
      j.field("epsilon", so.epsilon).field("logit_rounding", s.sensitivity->rounding).field("sensitivity_seconds", s.sensitivity->seconds);
    j.field("range_seconds", s.rangeSeconds).field("seconds", s.seconds).field("parameters", g.parameterCount());
    j.field("elements", s.elements).field("type2_elements", s.type2Elements);
    j.field("tile_bytes", s.tileBytes).field("total_tiles", s.totalTiles).field("reliable_tiles", s.reliableTiles);
    j.field("reliable_bytes", s.reliableBytes).field("budget_bytes", s.budgetBytes);
    j.field("working_set_bytes", s.workingSetBytes);
    j.field("recompute_work", s.recomputeWork).field("recompute_work_random_placement", s.randomPlacementWork);
    j.field("recompute_work_without_reliable_memory", s.recomputeAllWork);
    j.key("output").beginObject().field("lo", out.unionLo).field("hi", out.unionHi).field("mean_width", out.meanWidth);
    if (ref.present) {
      j.field("ascent_lo", ref.ascent.unionLo).field("ascent_hi", ref.ascent.unionHi);
      j.field("interval_lo", ref.interval.unionLo).field("interval_hi", ref.interval.unionHi);
      j.field("test_lo", ref.test[std::size_t(g.output)].unionLo).field("test_hi", ref.test[std::size_t(g.output)].unionHi);
    }
    j.endObject().key("layers").beginArray();
    for (const save::LayerSelection& l : s.layers) {
      j.beginObject().field("name", l.name).field("op", l.op).field("elements", l.elements).field("type2", l.type2);
      j.field("robust_bits", l.robustBits).field("ranging_bits", l.rangingBits).field("vulnerable_bits", l.vulnerableBits);
      j.field("mean_width", l.meanWidth);
      if (ref.present) j.field("test_mean_width", ref.test[std::size_t(l.node)].meanWidth);
      int64_t reliable = 0;
      for (uint8_t t : l.tileReliable) reliable += t;
      j.field("tiles", int64_t(l.tileShare.size())).field("reliable_tiles", reliable).endObject();
    }
    j.endArray().endObject();
    std::cout << '\n';
    return 0;
  }
  const std::string criterion = save::criterionText(so.criterion, so.tau, so.rtol, so.epsilon);
  if (s.sound)
    std::printf("SAVE selection: %s (%lld parameters), %s ranges (sound) for pixels in [%g, %g], %s\n",
                s.model.c_str(), (long long)g.parameterCount(), s.mode.c_str(), so.pixelLo, so.pixelHi, criterion.c_str());
  else
    std::printf("SAVE selection: %s (%lld parameters), PROFILED ranges over 10,000 training images: UNSOUND, "
                "inputs unlike them leave these ranges; for comparison only, %s\n",
                s.model.c_str(), (long long)g.parameterCount(), criterion.c_str());
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
  std::printf("\noutput (%s) in [%.4g, %.4g]\n", g.nodes[std::size_t(g.output)].name.c_str(), out.unionLo, out.unionHi);
  if (ref.present) {
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
  std::printf("reliable memory%s: %lld of %lld tiles (%lldx%lld fp32, batch %lld), peak %.1f KiB in use of a %.1f KiB budget "
              "(the working set peaks at %.1f KiB); %lld of %lld values are type 2\n",
              so.placement == "ranked" ? "" : so.placement == "none" ? " (none placed)" : " (random placement)", (long long)s.reliableTiles, (long long)s.totalTiles, (long long)so.tileRows, (long long)so.tileCols,
              (long long)so.batch, double(s.reliableBytes) / 1024, double(s.budgetBytes) / 1024,
              double(s.workingSetBytes) / 1024, (long long)s.type2Elements, (long long)s.elements);
  auto share = [&](double w) { return s.recomputeAllWork > 0 ? 100 * (1 - w / s.recomputeAllWork) : 0.0; };
  std::printf("recomputation per image: %.4g multiply-adds left of %.4g without reliable memory (the placement avoids "
              "%.1f%%; the same budget filled in random order avoids %.1f%%)\n",
              s.recomputeWork, s.recomputeAllWork, share(s.recomputeWork), share(s.randomPlacementWork));
  return 0;
}

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

void confusionJson(JsonWriter& j, const std::string& key, const save::Confusion& c) {
  j.key(key).beginObject().field("predicted_robust_actually_robust", c.robustRobust);
  j.field("predicted_robust_actually_vulnerable", c.robustVulnerable);
  j.field("predicted_nonrobust_actually_robust", c.protectedRobust);
  j.field("predicted_nonrobust_actually_vulnerable", c.protectedVulnerable).endObject();
}

}  // namespace

namespace {

// One row of a per-layer or per-bit table: flips, false robust against top-1 and against the
// promise, over-protection (against top-1), the vulnerable share.
void printJudgedRow(const std::string& name, int width, const save::Judged& j) {
  const save::Confusion& c = j.top1;
  const double n = double(std::max<uint64_t>(1, c.total()));
  std::printf("  %-*s %9llu %8llu %8llu %8.1f%% %8.1f%%\n", width, name.c_str(), (unsigned long long)c.total(),
              (unsigned long long)c.robustVulnerable, (unsigned long long)j.promise.robustVulnerable,
              100 * double(c.protectedRobust) / n, 100 * double(c.robustVulnerable + c.protectedVulnerable) / n);
}

void judgedJson(JsonWriter& j, const save::Judged& x) {
  confusionJson(j, "top1", x.top1);
  confusionJson(j, "promise", x.promise);
}

void printCheckBits(const save::StoredCheckBits& s, bool json) {
  const save::CheckBitsResult& r = s.result;
  if (json) {
    JsonWriter j(std::cout);
    j.beginObject().field("model", s.campaign.model).field("batch", s.batch).field("tau", s.tau);
    j.field("criterion", r.criterion).field("epsilon", r.epsilon);
    if (r.rtol != 0) j.field("rtol", r.rtol);
    j.field("campaign_id", s.campaign.id()).field("flips", r.flips);
    j.field("clean_accuracy", r.cleanAccuracy).field("seconds", r.seconds);
    j.field("settled_by_bound", r.settledByBound).field("reruns", r.reruns);
    confusionJson(j, "weights", r.weights);
    confusionJson(j, "activations", r.activations);
    confusionJson(j, "weights_promise", r.weightsPromise);
    confusionJson(j, "activations_promise", r.activationsPromise);
    for (const auto& [key, list] : {std::pair{"weight_layers", &r.weightLayers}, std::pair{"activation_layers", &r.activationLayers}}) {
      j.key(key).beginArray();
      for (const auto& [name, x] : *list) {
        j.beginObject().field("layer", name);
        judgedJson(j, x);
        j.endObject();
      }
      j.endArray();
    }
    for (const auto& [key, bits] : {std::pair{"weight_bits", &r.weightBits}, std::pair{"activation_bits", &r.activationBits}}) {
      j.key(key).beginArray();
      for (int b = 0; b < 32; ++b) {
        j.beginObject().field("bit", b);
        judgedJson(j, (*bits)[std::size_t(b)]);
        j.endObject();
      }
      j.endArray();
    }
    j.key("false_robust").beginArray();
    for (const auto& [k, f] : r.falseRobust) j.value(f);
    j.endArray().endObject();
    std::cout << '\n';
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

}  // namespace

// The data and the input normalisation, where given (left out otherwise, so that the settings of
// campaigns on Fashion-MNIST read as before and their shards still merge).
util::CampaignKey& addInputSettings(util::CampaignKey& key, const SaveAnalyzeOptions& a) {
  if (!a.data.empty()) key.add("data", a.data);
  if (!a.inputMean.empty()) key.add("input_mean", a.inputMean);
  if (!a.inputStd.empty()) key.add("input_std", a.inputStd);
  if (a.criterion != "value") key.add("criterion", a.criterion).add("epsilon", a.epsilon);
  if (a.rtol != 0) key.add("rtol", a.rtol);
  if (a.placement != "ranked") key.add("placement", a.placement);
  return key;
}

save::CheckBitsCampaign checkBitsCampaign(const SaveCheckBitsOptions& o) {
  const SaveAnalyzeOptions& a = o.analysis;
  save::CheckBitsCampaign c;
  c.model = a.model;
  c.weights = a.weights + ":" + a.run + "@" + std::to_string(a.iteration);
  // Everything the counts depend on; not the threads, the shard or the session.
  util::CampaignKey key = util::CampaignKey()
                   .add("batch", o.batch)
                   .add("weight_flips", o.weightFlips)
                   .add("weights_per_stratum", o.weightsPerStratum)
                   .add("activation_flips", o.activationFlips)
                   .add("activation_images", o.activationImages)
                   .add("seed", o.seed)
                   .add("mode", a.mode)
                   .add("depth", a.depth)
                   .add("splits", a.splits)
                   .add("tau", a.tau)
                   .add("input_range", a.inputRange)
                   .add("tile", a.tile)
                   .add("budget_mib", a.budgetMiB)
                   .add("budget", a.budget)
                   .add("selection_batch", 1);
  c.settings = addInputSettings(key, a).text();
  std::tie(c.shardIndex, c.shardCount) = parseShard(o.shard);
  return c;
}

int runSaveCheckBits(const SaveCheckBitsOptions& o) {
  if (o.analysis.mode == "profiled")
    throw std::invalid_argument("check-bits needs sound ranges: --mode profiled is unsound (use symbolic or interval)");
  save::SelectionOptions so = selectionOptions(o.analysis);
  so.batch = 1;  // the activations' predicted classes, as the settings text says
  if (o.batch <= 0 || o.batch > 10000) throw std::invalid_argument("--batch must be 1..10000");
  if (o.weightFlips < 0 || o.activationFlips < 0 || o.weightsPerStratum < 0 || o.activationImages < 0)
    throw std::invalid_argument("flip and image counts must not be negative");
  if (o.weightFlips > 0 && o.weightsPerStratum > 0)
    throw std::invalid_argument("--weight-flips and --weights-per-stratum are two ways to sample weights: give one");
  const save::CheckBitsCampaign campaign = checkBitsCampaign(o);
  const save::Graph g = modelGraph(o.analysis);
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
        openSession(o.analysis.session, saveProvenance(g.model, o.seed, o.analysis.commandLine));
    const std::string id = freeResultId(o.analysis.session, save::resultBase(g.model) + "-check-bits");
    save::writeCheckBits(*w, id, stored, o.shard);
    if (!o.quiet) {
      std::fprintf(stderr, "stored as SAVE result '%s' in %s\n", id.c_str(), o.analysis.session.c_str());
      events::stored(o.analysis.session, "save_result", id);
    }
  }
  if (!o.quiet) printCheckBits(stored, o.analysis.json);
  return 0;
}

namespace {

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  for (char c : text + ",") {
    if (c == ',') {
      if (!item.empty()) out.push_back(item);
      item.clear();
    } else if (c != ' ') {
      item += c;
    }
  }
  return out;
}


}  // namespace

std::string campaignSettings(const SaveCampaignOptions& o) {
  util::CampaignKey key = util::CampaignKey()
      .add("flips", o.flips)
      .add("schemes", o.schemes)
      .add("pattern", o.pattern)
      .add("bits", o.bits)
      .add("images", o.images)
      .add("batch", o.analysis.batch)
      .add("seed", o.seed)
      .add("budget_mib", o.analysis.budgetMiB)
      .add("budget", o.analysis.budget)
      .add("mode", o.analysis.mode)
      .add("tau", o.analysis.tau)
      .add("tile", o.analysis.tile)
      .add("input_range", o.analysis.inputRange)
      .add("verifier", o.verifier);
  if (o.agreement) key.add("agreement", "1");
  // the fault model, where it differs from the first round's (whose shards keep merging)
  if (o.target != "both") key.add("target", o.target);
  if (o.basis != "inference") key.add("basis", o.basis);
  if (!o.noRerunFaults) key.add("rerun_faults", "1").add("max_recoveries", o.maxRecoveries);
  key.add("recovery", "layer").add("check_lag", o.checkLag);  // a failed layer is rerun and checked (2026-12-02)
  return addInputSettings(key, o.analysis).text();
}

namespace {

// The campaign's points and fault model from the command line, checked.
save::CampaignOptions campaignOptions(const SaveCampaignOptions& o) {
  save::CampaignOptions co;
  co.flips.clear();
  for (const std::string& f : splitList(o.flips)) {
    std::size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(f, &used);
    } catch (const std::exception&) {
    }
    if (used != f.size() || v < 0) throw std::invalid_argument("--flips '" + o.flips + "' is not a list of counts >= 0");
    co.flips.push_back(v);
  }
  co.schemes.clear();
  for (const std::string& s : splitList(o.schemes)) co.schemes.push_back(save::schemeFromName(s));
  if (co.flips.empty() || co.schemes.empty()) throw std::invalid_argument("--flips and --schemes must not be empty");
  co.faults.pattern = save::patternFromName(o.pattern);
  co.faults.target = save::targetFromName(o.target);
  if (o.basis != "inference" && o.basis != "memory")
    throw std::invalid_argument("unknown --basis '" + o.basis + "'; valid: inference, memory");
  co.sameRatePerByte = o.basis == "memory";
  co.faults.duringReruns = !o.noRerunFaults;
  if (o.maxRecoveries < 1 || o.maxRecoveries > 100) throw std::invalid_argument("--max-recoveries must be 1..100");
  co.faults.maxRecoveries = o.maxRecoveries;
  if (o.checkLag < 1 || o.checkLag > 64) throw std::invalid_argument("--check-lag must be 1..64");
  co.faults.checkLag = o.checkLag;
  if (o.bits < 1 || o.bits > 32) throw std::invalid_argument("--bits must be 1..32");
  co.faults.bitsPerFault = o.bits;
  co.images = o.images;
  co.batch = o.analysis.batch;
  co.seed = o.seed;
  std::tie(co.shardIndex, co.shardCount) = parseShard(o.shard);
  if (co.batch <= 0 || co.images < co.batch || co.images % co.batch || co.images > 10000)
    throw std::invalid_argument("--images must be a multiple of --batch, at most 10000");
  return co;
}

void printCampaignJson(const save::Graph& g, const save::Selection& sel, const save::ProtectedRunner& runner,
                       const save::CampaignOptions& co, const save::CampaignResult& r, const std::string& data,
                       bool profiledOnTest, bool agreement) {
  JsonWriter j(std::cout);
  j.beginObject().field("model", g.model).field("data", data).field("ranger_profiled_on_test", profiledOnTest);
  j.field("scored_against", agreement ? "fault-free prediction" : "labels");
  j.field("images", co.images).field("batch", co.batch);
  j.field("clean_accuracy", r.cleanAccuracy).field("reliable_bytes", sel.reliableBytes);
  j.field("unreliable_words_none", runner.unreliableWords(save::Scheme::None));
  j.field("unreliable_words_save", runner.unreliableWords(save::Scheme::Save));
  j.key("latency").beginArray();
  for (const save::SchemeLatency& l : r.latency)
    j.beginObject().field("scheme", save::schemeName(l.scheme)).field("seconds_per_batch", l.seconds).field("ratio", l.ratio)
        .field("cpu_seconds_per_batch", l.cpuSeconds).field("cpu_ratio", l.cpuRatio)
        .field("accuracy", l.accuracy).field("false_positives", l.falsePositives).endObject();
  j.endArray().key("points").beginArray();
  for (const save::CampaignPoint& p : r.points) {
    j.beginObject().field("scheme", save::schemeName(p.scheme)).field("flips", p.flips).field("accuracy", p.accuracy);
    j.field("error_rate", p.errorRate).field("detections", p.stats.detections).field("recoveries", p.stats.recoveries);
    j.field("silent", p.silent).field("faults", p.stats.faults).field("weight_repairs", p.stats.weightRepairs);
    j.field("range_violations", p.stats.rangeViolations).field("recompute_mismatches", p.stats.recomputeMismatches);
    j.field("checksum_mismatches", p.stats.checksumMismatches).field("ecc_corrected", p.stats.eccCorrected);
    j.field("ecc_detected_uncorrectable", p.stats.eccUncorrectable).field("ecc_failures", p.stats.eccFailures);
    j.field("ecc_missed", p.stats.eccMissed).field("rerun_steps", p.stats.rerunSteps).field("rerun_faults", p.stats.rerunFaults);
    j.field("unrecovered", p.stats.unrecovered).field("channel_reruns", p.stats.channelReruns);
    j.field("channel_rerun_share", p.stats.channelRerunShare);
    j.field("element_repairs", p.stats.elementRepairs).field("element_repair_share", p.stats.elementRepairShare);
    double ratio = 1;
    for (const save::SchemeLatency& l : r.latency)
      if (l.scheme == p.scheme) ratio = l.ratio;
    j.field("accurate_latency", ratio * (1 + p.errorRate)).endObject();
  }
  j.endArray().endObject();
  std::cout << '\n';
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
  uint64_t detections = 0, recoveries = 0, checksums = 0, checksumMismatches = 0, channelReruns = 0, elementRepairs = 0;
  double channelShare = 0, elementShare = 0;
  for (const save::CampaignPoint& p : r.points)
    if (p.scheme == save::Scheme::Save) {
      detections += p.stats.detections;
      recoveries += p.stats.recoveries;
      checksums += p.stats.checksums;
      checksumMismatches += p.stats.checksumMismatches;
      channelReruns += p.stats.channelReruns;
      channelShare += p.stats.channelRerunShare;
      elementRepairs += p.stats.elementRepairs;
      elementShare += p.stats.elementRepairShare;
    }
  std::printf("\nSAVE: %llu detections, %llu recoveries (reruns of the interrupted layer)",
              (unsigned long long)detections, (unsigned long long)recoveries);
  if (channelReruns)
    std::printf("; %llu of them reran only the output channels whose weights changed (%.1f%% of the layer on average)",
                (unsigned long long)channelReruns, 100 * channelShare / double(channelReruns));
  if (elementRepairs)
    std::printf("; %llu recomputed only the values that failed their checks (%.2f%% of the layer's values on average)",
                (unsigned long long)elementRepairs, 100 * elementShare / double(elementRepairs));
  if (checksums) std::printf("; %llu of %llu ABFT checksums failed", (unsigned long long)checksumMismatches, (unsigned long long)checksums);
  std::printf("\n");
  // which mechanism caught what, per point, and what got through silently
  std::printf("\nwhat caught the faults (detections per mechanism; silent: predictions changed with nothing detected):\n");
  std::printf("%-8s %7s %9s %8s %8s %8s %8s %9s %8s %8s %7s\n", "scheme", "flips", "faults", "weights", "range", "recomp",
              "ecc-fix", "ecc-fail", "reruns", "rerun-f", "silent");
  for (const save::CampaignPoint& p : r.points) {
    if (p.scheme == save::Scheme::Tmr || p.scheme == save::Scheme::Ranger || p.scheme == save::Scheme::None) {
      if (p.scheme == save::Scheme::None) continue;
    }
    std::printf("%-8s %7lld %9llu %8llu %8llu %8llu %8llu %9llu %8llu %8llu %7lld\n", save::schemeName(p.scheme),
                (long long)p.flips, (unsigned long long)p.stats.faults, (unsigned long long)p.stats.weightRepairs,
                (unsigned long long)p.stats.rangeViolations,
                (unsigned long long)(p.stats.recomputeMismatches + p.stats.checksumMismatches),
                (unsigned long long)p.stats.eccCorrected, (unsigned long long)p.stats.eccFailures,
                (unsigned long long)p.stats.recoveries, (unsigned long long)p.stats.rerunFaults, (long long)p.silent);
  }
  std::printf("fault model: %s faults of %d bit(s) on %s, %s; reruns %s; SAVE's checks trail by at most %d layer(s) and it reruns a failed layer at most %d times (%s)\n",
              o.pattern.c_str(), o.bits, o.target == "both" ? "weights and activations" : o.target.c_str(),
              o.basis == "memory" ? "the same rate per byte of each scheme's unreliable memory (flips: the unprotected run's)"
                                  : "the same flips per inference for every scheme",
              o.noRerunFaults ? "meet no new faults" : "meet new faults at the same rate per layer step", o.checkLag, o.maxRecoveries,
              "docs/save.md");
}

}  // namespace

int runSaveCampaign(const SaveCampaignOptions& o) {
  if (o.analysis.mode == "profiled")
    throw std::invalid_argument("SAVE's range checks need sound ranges: --mode profiled is unsound (use symbolic or interval)");
  save::SelectionOptions so = selectionOptions(o.analysis);
  const save::CampaignOptions co = campaignOptions(o);
  const save::VerifierPolicy policy = save::verifierPolicyFromName(o.verifier);

  const save::Graph g = modelGraph(o.analysis);
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
  if (o.agreement) {  // the fault-free engine's own predictions become the labels
    const int64_t classes = g.nodes[std::size_t(g.output)].size();
    for (int64_t first = 0; first < test.count; first += co.batch) {
      const int64_t n = std::min(co.batch, test.count - first);
      const auto act = save::runAll(g, images.data() + first * inSize, n);
      for (int64_t s = 0; s < n; ++s) {
        const int top = save::topClass(act[std::size_t(g.output)].data() + s * classes, classes);
        if (top < 0) throw std::invalid_argument("--agreement: the fault-free logits of sample " +
                                                 std::to_string(first + s) + " are not finite");
        labels[std::size_t(first + s)] = top;
      }
    }
  }

  std::unique_ptr<store::SessionWriter> w;
  if (!o.analysis.session.empty()) {
    w = openSession(o.analysis.session, saveProvenance(g.model, o.seed, o.analysis.commandLine));
    const std::string name = save::beginCampaignRun(*w, {g.model, o.analysis.weights, o.shard, campaignSettings(o)},
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
  const save::CampaignResult r = save::runCampaign(runner, images.data(), labels.data(), co, inSize,
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
                                                   });
  if (tty) std::fprintf(stderr, "\n");
  if (w) {
    save::writeCampaignTables(*w, r, !latencyWritten);
    w->endRun(store::RunStatus::Complete);
  }
  if (o.quiet) return 0;

  if (o.analysis.json)
    printCampaignJson(g, sel, runner, co, r, test.name, profiledOnTest, o.agreement);
  else
    printCampaignText(o, g, sel, runner, co, r, test.name, profiledOnTest);
  return 0;
}

int runSaveMerge(const SaveMergeOptions& o) {
  const merge::MergeResult m = merge::mergeShards(o.shards, o.session, saveProvenance("", 0, o.commandLine));
  if (m.kind == merge::ShardKind::CheckBits) {
    std::fprintf(stderr, "%s\n", m.summary.c_str());
    printCheckBits(m.checkBits, o.json);
  } else {
    std::printf("%s\n", m.summary.c_str());
  }
  return 0;
}

int runSaveVerifiers(const SaveVerifiersOptions& o) {
  if (o.analysis.mode == "profiled")
    throw std::invalid_argument("SAVE's verifiers need sound ranges: --mode profiled is unsound (use symbolic or interval)");
  if (o.flips <= 0) throw std::invalid_argument("--flips must be positive");
  const save::SelectionOptions so = selectionOptions(o.analysis);
  const save::Graph g = modelGraph(o.analysis);
  const save::Selection sel = save::selectBits(g, so);
  const int64_t batch = o.analysis.batch;
  if (batch > 10000) throw std::invalid_argument("--batch must be at most 10000");
  const save::DataSet test = save::loadDataSet(g, o.analysis.data, "test", batch, so.pixelLo, so.pixelHi);
  const std::vector<float>& images = test.normalised;
  save::ProtectedRunner runner(g, sel, {}, batch);
  const std::vector<save::VerifierCoverage> cov = save::compareVerifiers(runner, g, images.data(), batch, o.flips, o.seed);
  const char* names[3] = {"recompute", "abft", "mixed"};
  if (o.analysis.json) {
    JsonWriter j(std::cout);
    j.beginObject().field("model", g.model).field("batch", batch).field("tau", so.tau);
    if (so.rtol != 0) j.field("rtol", so.rtol);
    j.key("ops").beginArray();
    for (const save::VerifierCoverage& c : cov) {
      j.beginObject().field("node", c.name).field("chosen", names[int(c.chosen)]).field("flips", c.flips);
      j.field("out_of_range", c.outOfRange).field("harmful", c.harmful);
      for (int k = 0; k < 3; ++k)
        j.key(names[k]).beginObject().field("detected", c.detected[k]).field("harmful_missed", c.harmfulMissed[k])
            .field("false_positives", c.falsePositives[k]).field("seconds", c.seconds[k]).endObject();
      j.endObject();
    }
    j.endArray().endObject();
    std::cout << '\n';
    return 0;
  }
  std::printf("SAVE's verifiers on the same faults: %s, %lld test images per check, %lld single-bit flips of type-2\n"
              "values in unreliable memory per op; flips the range check catches are counted apart\n\n",
              g.model.c_str(), (long long)batch, (long long)o.flips);
  std::size_t width = 8;
  for (const save::VerifierCoverage& c : cov) width = std::max(width, c.name.size());
  std::printf("%-*s %9s %8s %8s", int(width), "op", "in range", "harmful", "auto");
  for (const char* n : names) std::printf(" | %9s %6s %8s", n, "missed", "ms");
  std::printf("\n");
  for (const save::VerifierCoverage& c : cov) {
    const int64_t inRange = c.flips - c.outOfRange;
    std::printf("%-*s %9lld %8lld %8s", int(width), c.name.c_str(), (long long)inRange, (long long)c.harmful, names[int(c.chosen)]);
    for (int k = 0; k < 3; ++k)
      std::printf(" | %8.1f%% %6lld %8.3f", 100 * double(c.detected[k]) / double(std::max<int64_t>(1, inRange)),
                  (long long)c.harmfulMissed[k], 1000 * c.seconds[k]);
    std::printf("\n");
  }
  for (const save::VerifierCoverage& c : cov)
    for (int k = 0; k < 3; ++k)
      if (c.falsePositives[k])
        std::printf("%s: %s fired on the clean batch (%lld of 3 checks)\n", c.name.c_str(), names[k], (long long)c.falsePositives[k]);
  std::printf("\nper verifier: the share of the in-range flips detected; missed: harmful flips (the image's prediction\n"
              "changed) not detected; ms: one check of the clean batch (best of 3)\n");
  return 0;
}

}  // namespace peat::cli
