// SPDX-License-Identifier: MIT
// peat save run: the model on the user's inputs with SAVE's engine, plain or protected with faults;
// the outputs written as .npy and compared with a reference.
#include <algorithm>
#include <cctype>
#include <filesystem>
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
#include "core/save/result_json.h"
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

// What the run reports per output: the whole output node for a model with one output, else each
// of its outputs, with the reference given for it and the comparison.
struct Reported {
  save::OutputPart part;
  std::string file;                         // written here (-o)
  std::string reference;                    // --expect
  std::unique_ptr<io::FloatTensor> tensor;  // its values, read before the model
  std::unique_ptr<save::OutputComparison> comparison;
};

// -o Y.npy for one of several outputs: Y.NAME.npy (characters a file name should not hold as '_').
std::string partFile(const std::string& output, const std::string& name) {
  std::string stem = output;
  if (stem.size() > 4 && stem.compare(stem.size() - 4, 4, ".npy") == 0) stem.resize(stem.size() - 4);
  std::string safe;
  for (char ch : name) safe += std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.' ? ch : '_';
  return stem + "." + safe + ".npy";
}

std::vector<Reported> reportedOutputs(const save::Graph& g, const SaveRunOptions& o) {
  std::vector<Reported> out;
  if (g.outputs.empty()) {
    Reported r;
    r.part = save::makePart(g.nodes[std::size_t(g.output)].name, 0, g.nodes[std::size_t(g.output)].shape);
    r.file = o.output;
    out.push_back(std::move(r));
  } else {
    for (const save::OutputPart& p : g.outputs) {
      Reported r;
      r.part = p;
      if (!o.output.empty()) r.file = partFile(o.output, p.name);
      for (const Reported& before : out)
        if (!r.file.empty() && before.file == r.file)
          throw std::invalid_argument("outputs '" + before.part.name + "' and '" + p.name + "' would both be written to " +
                                      r.file);
      out.push_back(std::move(r));
    }
  }
  return out;
}

// FILE or NAME=FILE (--input, --expect): each tensor read before the model is (a wrong file fails in
// milliseconds), with the name it was given for ("" for one given in order)
using Named = std::vector<std::pair<std::string, io::FloatTensor>>;
Named readNamed(const std::vector<std::string>& entries) {
  Named read;
  for (const std::string& e : entries) {
    const std::size_t eq = e.find('=');
    std::error_code ec;
    if (eq != std::string::npos && eq > 0 && !std::filesystem::exists(e, ec))
      read.emplace_back(e.substr(0, eq), io::readSource(e.substr(eq + 1)));
    else
      read.emplace_back("", io::readSource(e));
  }
  return read;
}

// Where each tensor of `given` goes among the model's `names` (of its inputs or outputs): by name,
// else the next in order; std::invalid_argument for a name that is none of them, too many, or two
// for one. `names` empty: a model whose one input or output has no name (a zoo model).
std::vector<std::size_t> placeNamed(const Named& given, const std::vector<std::string>& names, std::size_t count,
                                    const std::string& option, const std::string& what) {
  std::string listed;
  for (const std::string& n : names) listed += (listed.empty() ? "'" : ", '") + n + "'";
  std::vector<std::size_t> at;
  std::vector<bool> taken(count, false);
  std::size_t next = 0;
  for (const auto& [name, tensor] : given) {
    std::size_t k = 0;
    if (name.empty()) {
      k = next++;
      if (k >= count)
        throw std::invalid_argument(std::to_string(given.size()) + " " + option + " files for a model with " +
                                    std::to_string(count) + " " + what + "(s)" + (listed.empty() ? "" : " (" + listed + ")"));
    } else {
      if (names.empty())
        throw std::invalid_argument(option + " names '" + name + "', but the model's one " + what +
                                    " has no name: give the file alone");
      k = std::size_t(std::find(names.begin(), names.end(), name) - names.begin());
      if (k >= count)
        throw std::invalid_argument(option + " names '" + name + "', which is no " + what + " of the model (" +
                                    (listed.empty() ? "it has one: give the file alone" : "its " + what + "s: " + listed) + ")");
    }
    if (taken[k])
      throw std::invalid_argument(option + " gives two files for the " + what + (names.empty() ? "" : " '" + names[k] + "'"));
    taken[k] = true;
    at.push_back(k);
  }
  return at;
}

void matchReferences(std::vector<Reported>& outs, Named refs, const save::Graph& g, const SaveRunOptions& o) {
  std::vector<std::string> names;
  if (!g.outputs.empty())
    for (const Reported& r : outs) names.push_back(r.part.name);
  const std::vector<std::size_t> at = placeNamed(refs, names, outs.size(), "--expect", "output");
  for (std::size_t k = 0; k < refs.size(); ++k) {
    outs[at[k]].reference = o.expect[k].substr(refs[k].first.empty() ? 0 : refs[k].first.size() + 1);
    outs[at[k]].tensor = std::make_unique<io::FloatTensor>(std::move(refs[k].second));
  }
}

// The input as node 0 takes it: the one tensor, or each input's in its place (joinInputs).
io::FloatTensor modelInput(Named given, const save::Graph& g) {
  std::vector<std::string> names;
  for (const save::InputPart& p : g.inputs) names.push_back(p.name);
  const std::size_t count = std::max<std::size_t>(g.inputs.size(), 1);
  const std::vector<std::size_t> at = placeNamed(given, names, count, "--input", "input");
  std::vector<const io::FloatTensor*> parts(count, nullptr);
  for (std::size_t k = 0; k < given.size(); ++k) parts[at[k]] = &given[k].second;
  for (std::size_t k = 0; k < count; ++k)
    if (!parts[k])
      throw std::invalid_argument("the model's input '" + names[k] + "' is not given (-i FILE in the inputs' order, or -i " +
                                  names[k] + "=FILE)");
  if (count == 1) return std::move(given[0].second);
  return save::joinInputs(g, parts);
}

void printText(const SaveRunOptions& o, const save::Graph& g, const save::InferenceResult& r, const std::string& note,
               const std::vector<Reported>& outs) {
  std::printf("ran %s on %lld sample(s) of %s: outputs %lld x %s in %.2f ms", g.model.c_str(), (long long)r.samples,
              dims(g.nodes[0].shape).c_str(), (long long)r.samples, dims(r.outputShape).c_str(), 1000 * r.seconds);
  if (o.protect != "none" || o.flips > 0)
    std::printf(", protected by %s with %lld %s fault(s) of %d bit(s) on %s", o.protect.c_str(), (long long)o.flips,
                o.pattern.c_str(), o.bits, o.target == "both" ? "weights and activations" : o.target.c_str());
  std::printf("\n");
  if (g.inputs.size() > 1) std::printf("%zu inputs: %s\n", g.inputs.size(), save::partsText(g.inputs).c_str());
  if (!g.outputs.empty()) std::printf("%zu outputs: %s\n", g.outputs.size(), save::partsText(g.outputs).c_str());
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
  const int64_t total = g.nodes[std::size_t(g.output)].size();
  const int64_t shown = std::min<int64_t>(r.samples, 10);
  for (int64_t s = 0; s < shown; ++s)
    for (const Reported& x : outs) {
      const float* out = r.outputs.data() + s * total + x.part.offset;
      const std::string which = g.outputs.empty() ? "" : ", '" + x.part.name + "'";
      if (save::topClass(out, x.part.size()) < 0) {
        std::printf("  sample %lld%s: the output holds NaN or Inf\n", (long long)s, which.c_str());
        continue;
      }
      std::printf("  sample %lld%s:", (long long)s, which.c_str());
      for (int64_t k : topClasses(out, x.part.size(), o.top)) std::printf(" %lld (%.6g)", (long long)k, double(out[k]));
      std::printf("\n");
    }
  if (r.samples > shown) std::printf("  ... %lld more sample(s)\n", (long long)(r.samples - shown));
  for (const Reported& x : outs)
    if (!x.file.empty()) std::printf("output%s written to %s\n", g.outputs.empty() ? "s" : (" '" + x.part.name + "'").c_str(), x.file.c_str());
  for (const Reported& x : outs) {
    const save::OutputComparison* c = x.comparison.get();
    if (!c) continue;
    std::printf("against %s%s: largest |difference| %.3g (sample %lld, element %lld: %.9g here, %.9g there), largest "
                "relative %.3g; top-1 agrees on %lld of %lld; %lld element(s) finite on one side only\n",
                x.reference.c_str(), g.outputs.empty() ? "" : (" (output '" + x.part.name + "')").c_str(), c->maxAbs,
                (long long)c->worstSample, (long long)c->worstElement, c->worstValue, c->worstReference, c->maxRel,
                (long long)c->top1Agree, (long long)c->samples, (long long)c->nonFinite);
  }
}

void comparisonJson(JsonWriter& j, const Reported& x) {
  const save::OutputComparison* c = x.comparison.get();
  j.beginObject().field("output", x.part.name).field("reference", x.reference).field("max_abs", c->maxAbs);
  j.field("max_rel", c->maxRel).field("worst_sample", c->worstSample).field("worst_element", c->worstElement);
  j.field("top1_agree", c->top1Agree).field("non_finite", c->nonFinite).endObject();
}

// The comparison that fails first: finite on one side only, else the largest difference.
const Reported* worstCompared(const std::vector<Reported>& outs) {
  const Reported* worst = nullptr;
  for (const Reported& x : outs) {
    if (!x.comparison) continue;
    const auto key = [](const Reported& y) { return std::make_pair(y.comparison->nonFinite > 0, y.comparison->maxAbs); };
    if (!worst || key(x) > key(*worst)) worst = &x;
  }
  return worst;
}

void printJsonResult(const SaveRunOptions& o, const save::Graph& g, const save::InferenceResult& r,
                     const std::string& note, const std::vector<Reported>& outs) {
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
    if (g.inputs.size() > 1) {  // several inputs: each one named, with its shape
      j.key("inputs").beginArray();
      for (const save::InputPart& p : g.inputs) {
        j.beginObject().field("name", p.name).key("shape").beginArray();
        for (int64_t d : p.shape) j.value(d);
        j.endArray().endObject();
      }
      j.endArray();
    }
    if (!g.outputs.empty()) {  // several outputs: each one named, with its shape and file
      j.key("outputs").beginArray();
      for (const Reported& x : outs) {
        j.beginObject().field("name", x.part.name).key("shape").beginArray();
        for (int64_t d : x.part.shape) j.value(d);
        j.endArray();
        if (!x.file.empty()) j.field("file", x.file);
        j.endObject();
      }
      j.endArray();
    }
    j.key("predictions").beginArray();
    for (int p : r.predictions) j.value(p);
    j.endArray();
    j.key("stats").beginObject().field("faults", r.stats.faults).field("detections", r.stats.detections);
    j.field("recoveries", r.stats.recoveries).field("unrecovered", r.stats.unrecovered).endObject();
    if (!o.output.empty()) j.field("output", o.output);
    if (const Reported* worst = worstCompared(outs)) {
      j.key("comparison");
      comparisonJson(j, *worst);
      j.key("comparisons").beginArray();
      for (const Reported& x : outs)
        if (x.comparison) comparisonJson(j, x);
      j.endArray();
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
  Named inputs = readNamed(o.input);
  Named references = readNamed(o.expect);
  if (o.repeat < 1) throw std::invalid_argument("--repeat must be 1 or more");
  const save::Graph g = save::modelGraph(o.analysis);
  const io::FloatTensor x = modelInput(std::move(inputs), g);
  std::vector<Reported> outs = reportedOutputs(g, o);
  matchReferences(outs, std::move(references), g, o);
  for (const Reported& out : outs)  // before the work, and again when written
    if (!out.file.empty()) util::checkWritable(out.file, o.force);
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

  for (Reported& out : outs) {
    if (!out.file.empty()) {
      std::vector<uint64_t> shape{uint64_t(samples)};
      for (int64_t d : out.part.shape) shape.push_back(uint64_t(d));
      if (g.outputs.empty())
        io::writeNpy(out.file, r.outputs.data(), shape, o.force);
      else
        io::writeNpy(out.file, save::outputValues(r, out.part).data(), shape, o.force);
    }
    if (out.tensor)
      out.comparison = std::make_unique<save::OutputComparison>(
          save::compareOutputs(r, *out.tensor, g.outputs.empty() ? nullptr : &out.part));
  }
  if (o.analysis.json)
    printJsonResult(o, g, r, note, outs);
  else
    printText(o, g, r, note, outs);
  for (const Reported& out : outs) {
    const save::OutputComparison* c = out.comparison.get();
    if (c && o.maxDiff >= 0 && (c->maxAbs > o.maxDiff || c->nonFinite > 0)) {
      char text[160];
      std::snprintf(text, sizeof text, "differ from %s by up to %.3g, more than --max-diff %.3g", out.reference.c_str(),
                    c->maxAbs, o.maxDiff);
      throw save::SaveError((g.outputs.empty() ? std::string("the outputs ") : "the output '" + out.part.name + "' ") + text);
    }
  }
  return 0;
}

}  // namespace peat::cli
