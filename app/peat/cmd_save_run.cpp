// SPDX-License-Identifier: MIT
// peat save run: the model on the user's inputs with SAVE's engine, plain or protected with faults;
// the outputs written as .npy and compared with a reference.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <stdexcept>

#include "app/peat/cmd_save.h"
#include "app/peat/commands.h"
#include "core/io/tensor_source.h"
#include "core/save/command_settings.h"
#include "core/save/dataset.h"
#include "core/save/inference.h"
#include "core/util/files.h"

namespace peat::cli {
namespace {

save::FaultModel faultModel(const SaveRunOptions& o) {
  if (o.flips < 0) throw std::invalid_argument("--flips must be 0 or more");
  if (o.bits < 1 || o.bits > 32) throw std::invalid_argument("--bits must be 1 to 32");
  save::FaultModel f;
  f.flips = o.flips;
  f.pattern = save::patternFromName(o.pattern);
  f.bitsPerFault = o.bits;
  f.target = save::targetFromName(o.target);
  f.checkLag = o.checkLag;
  f.maxRecoveries = o.maxRecoveries;
  return f;
}

// Ranger's bounds: profiled on the data's train split, or on the inputs themselves (said).
std::vector<save::NodeRange> rangerBounds(const save::Graph& g, const SaveRunOptions& o, const save::SelectionOptions& so,
                                          const float* inputs, int64_t samples, std::string& note) {
  try {
    const save::DataSet train = save::loadDataSet(g, o.analysis.data, "train", 5000, so.pixelLo, so.pixelHi, true);
    note = "Ranger's bounds profiled on " + train.name;
    return save::profiledRanges(g, train.normalised.data(), train.count);
  } catch (const io::SourceError&) {
    note = "Ranger's bounds profiled on these inputs themselves (no train split), which flatters it";
    return save::profiledRanges(g, inputs, samples);
  }
}

std::vector<int64_t> topClasses(const float* out, int64_t size, int k) {
  std::vector<int64_t> order(static_cast<std::size_t>(size));
  std::iota(order.begin(), order.end(), 0);
  const std::size_t keep = std::min<std::size_t>(std::size_t(std::max(k, 0)), order.size());
  std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(keep), order.end(), [&](int64_t a, int64_t b) {
    const float x = out[a], y = out[b];
    return x > y || (x == y && a < b);
  });
  order.resize(keep);
  return order;
}

std::string dims(const std::vector<int64_t>& shape) {
  std::string s;
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

void printText(const SaveRunOptions& o, const save::Graph& g, const save::InferenceResult& r, const std::string& note,
               const save::OutputComparison* c) {
  const int64_t size = g.nodes[std::size_t(g.output)].size();
  std::printf("ran %s on %lld sample(s) of %s: outputs %lld x %s in %.2f ms", g.model.c_str(), (long long)r.samples,
              dims(g.nodes[0].shape).c_str(), (long long)r.samples, dims(r.outputShape).c_str(), 1000 * r.seconds);
  if (o.protect != "none" || o.flips > 0)
    std::printf(", protected by %s with %lld %s fault(s) of %d bit(s) on %s", o.protect.c_str(), (long long)o.flips,
                o.pattern.c_str(), o.bits, o.target == "both" ? "weights and activations" : o.target.c_str());
  std::printf("\n");
  if (r.runs > 1)
    std::printf("%d runs on %u engine thread(s): first %.2f ms, warm median %.2f ms\n", r.runs, save::engineThreads(),
                1000 * r.seconds, 1000 * r.warmSeconds);
  if (!g.batch.empty()) std::printf("%s\n", g.batch.c_str());
  if (g.tokens > 0) std::printf("the input holds token ids in [0, %lld] (the embedding tables' rows)\n", (long long)(g.tokens - 1));
  if (!note.empty()) std::printf("%s\n", note.c_str());
  if (o.protect != "none" || o.flips > 0)
    std::printf("unreliable memory %lld words; faults %llu, detections %llu, recoveries %llu%s\n",
                (long long)r.unreliableWords, (unsigned long long)r.stats.faults,
                (unsigned long long)r.stats.detections, (unsigned long long)r.stats.recoveries,
                r.stats.unrecovered ? " (some layers not recovered)" : "");
  const int64_t shown = std::min<int64_t>(r.samples, 10);
  for (int64_t s = 0; s < shown; ++s) {
    const float* out = r.outputs.data() + s * size;
    if (r.predictions[std::size_t(s)] < 0) {
      std::printf("  sample %lld: the output holds NaN or Inf\n", (long long)s);
      continue;
    }
    std::printf("  sample %lld:", (long long)s);
    for (int64_t k : topClasses(out, size, o.top)) std::printf(" %lld (%.6g)", (long long)k, double(out[k]));
    std::printf("\n");
  }
  if (r.samples > shown) std::printf("  ... %lld more sample(s)\n", (long long)(r.samples - shown));
  if (!o.output.empty()) std::printf("outputs written to %s\n", o.output.c_str());
  if (c)
    std::printf("against %s: largest |difference| %.3g (sample %lld, element %lld: %.9g here, %.9g there), largest "
                "relative %.3g; top-1 agrees on %lld of %lld; %lld element(s) finite on one side only\n",
                o.expect.c_str(), c->maxAbs, (long long)c->worstSample, (long long)c->worstElement, c->worstValue,
                c->worstReference, c->maxRel, (long long)c->top1Agree, (long long)c->samples, (long long)c->nonFinite);
}

void printJsonResult(const SaveRunOptions& o, const save::Graph& g, const save::InferenceResult& r,
                     const std::string& note, const save::OutputComparison* c) {
  printJson([&](JsonWriter& j) {
    j.beginObject().field("model", g.model).field("samples", r.samples).field("protect", o.protect);
    if (!note.empty()) j.field("note", note);  // where Ranger's bounds came from
    if (!g.batch.empty()) j.field("batch_reading", g.batch);
    if (g.tokens > 0) j.field("token_ids", g.tokens);
    j.field("flips", o.flips).field("seconds", r.seconds).field("runs", r.runs);
    if (r.runs > 1) j.field("warm_seconds", r.warmSeconds);
    j.field("threads", int64_t(save::engineThreads()));
    j.key("output_shape").beginArray();
    for (int64_t d : r.outputShape) j.value(d);
    j.endArray();
    j.key("predictions").beginArray();
    for (int p : r.predictions) j.value(p);
    j.endArray();
    j.key("stats").beginObject().field("faults", r.stats.faults).field("detections", r.stats.detections);
    j.field("recoveries", r.stats.recoveries).field("unrecovered", r.stats.unrecovered).endObject();
    if (!o.output.empty()) j.field("output", o.output);
    if (c) {
      j.key("comparison").beginObject().field("reference", o.expect).field("max_abs", c->maxAbs);
      j.field("max_rel", c->maxRel).field("worst_sample", c->worstSample).field("worst_element", c->worstElement);
      j.field("top1_agree", c->top1Agree).field("non_finite", c->nonFinite).endObject();
    }
    j.endObject();
  });
}

}  // namespace

int runSaveRun(const SaveRunOptions& o) {
  const save::Scheme scheme = save::schemeFromName(o.protect);
  const save::FaultModel faults = faultModel(o);
  if (o.analysis.mode == "profiled" && scheme == save::Scheme::Save)
    throw std::invalid_argument("SAVE's range checks need sound ranges: --mode profiled is unsound (use symbolic or interval)");
  if (o.maxDiff >= 0 && o.expect.empty()) throw std::invalid_argument("--max-diff needs --expect");
  // read what the user gives before the model's analysis: a wrong file fails in milliseconds
  const io::FloatTensor x = io::readSource(o.input);
  std::unique_ptr<io::FloatTensor> reference;
  if (!o.expect.empty()) reference = std::make_unique<io::FloatTensor>(io::readSource(o.expect));
  if (o.repeat < 1) throw std::invalid_argument("--repeat must be 1 or more");
  if (!o.output.empty()) util::checkWritable(o.output, o.force);  // before the work, and again when written
  const save::Graph g = save::modelGraph(o.analysis);
  const int64_t samples = save::samplesIn(g, x.shape());
  save::setEngineThreads(o.threads);

  std::string note;
  save::InferenceResult r;
  if (scheme == save::Scheme::None && faults.flips == 0) {
    r = save::runPlain(g, x.data(), samples, o.repeat);
  } else {
    save::SelectionOptions so = save::selectionOptions(o.analysis);
    so.batch = samples;  // the tiles' bytes are those of this batch
    if (scheme == save::Scheme::Save) {
      const std::string outside = save::outsideInputBox(g, x.data(), samples, so.pixelLo, so.pixelHi);
      if (!outside.empty())
        throw save::SaveError(outside + (g.tokens > 0 ? std::string(": SAVE's range checks hold only for ids in the tables")
                                                      : std::string(" (--input-range, --input-mean, --input-std): SAVE's "
                                                                    "range checks hold only inside the box its ranges were "
                                                                    "computed for")));
    }
    const save::Selection sel = save::selectBits(g, so);
    std::vector<save::NodeRange> profiled;
    if (scheme == save::Scheme::Ranger) profiled = rangerBounds(g, o, so, x.data(), samples, note);
    save::ProtectedRunner runner(g, sel, std::move(profiled), samples, save::verifierPolicyFromName(o.verifier));
    save::InferenceOptions io;
    io.scheme = scheme;
    io.faults = faults;
    io.seed = o.seed;
    r = save::runProtected(g, runner, x.data(), samples, io, o.repeat);
  }

  if (!o.output.empty()) {
    std::vector<uint64_t> shape{uint64_t(samples)};
    for (int64_t d : r.outputShape) shape.push_back(uint64_t(d));
    io::writeNpy(o.output, r.outputs.data(), shape, o.force);
  }
  std::unique_ptr<save::OutputComparison> c;
  if (reference) c = std::make_unique<save::OutputComparison>(save::compareOutputs(r, *reference));
  if (o.analysis.json)
    printJsonResult(o, g, r, note, c.get());
  else
    printText(o, g, r, note, c.get());
  if (c && o.maxDiff >= 0 && (c->maxAbs > o.maxDiff || c->nonFinite > 0)) {
    char text[160];
    std::snprintf(text, sizeof text, "the outputs differ from %s by up to %.3g, more than --max-diff %.3g",
                  o.expect.c_str(), c->maxAbs, o.maxDiff);
    throw save::SaveError(text);
  }
  return 0;
}

}  // namespace peat::cli
