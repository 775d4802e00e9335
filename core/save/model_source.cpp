// SPDX-License-Identifier: MIT
#include "core/save/model_source.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <tuple>

#include "core/save/onnx_model.h"
#include "core/util/text.h"

namespace peat::save {

std::pair<double, double> rangeText(const std::string& text, const std::string& option) {
  const auto cut = text.find_first_of(",:");
  if (cut != std::string::npos) {
    try {
      std::size_t used = 0;
      const std::string a = text.substr(0, cut), b = text.substr(cut + 1);
      const double lo = std::stod(a, &used);
      if (used == a.size()) {
        const double hi = std::stod(b, &used);
        if (used == b.size()) return {lo, hi};
      }
    } catch (const std::exception&) {
    }
  }
  throw std::invalid_argument(option + " '" + text + "' is not LO,HI with two numbers, e.g. 0,1");
}

namespace {

// The input called `name` of several, for an option that names one (`option`); otherwise one line
// listing the model's inputs (`alone`: what to give a model of one input instead).
OutputPart& namedInput(Graph& g, const std::string& name, const std::string& option, const std::string& model,
                       const std::string& alone) {
  std::string names;
  for (OutputPart& p : g.inputs) {
    names += (names.empty() ? "'" : ", '") + p.name + "'";
    if (p.name == name) return p;
  }
  throw std::invalid_argument(option + " names '" + name + "', which is no input of model " + model +
                              (g.inputs.empty() ? " (a zoo model: give " + alone + " alone)" : " (its inputs: " + names + ")"));
}

// --input-mean NAME=V[,V...] and --input-std NAME=V[,V...]: one input's own normalisation, one value
// or one per channel of a [C, H, W] input (per feature of a [F] one); not for ids or integer values.
void applyInputNormalisations(const ModelSource& o, Graph& g) {
  for (auto [entries, option] : {std::pair{&o.inputMeans, "--input-mean"}, std::pair{&o.inputStds, "--input-std"}}) {
    std::set<std::string> named;
    for (const std::string& e : *entries) {
      const std::size_t eq = e.find('=');
      const std::string name = e.substr(0, eq);
      OutputPart& part = namedInput(g, name, option, o.model, "V or V,V,...");
      if (part.tokens > 0 || part.integer)
        throw std::invalid_argument(std::string(option) + " " + e + ": input '" + name + "' holds " +
                                    (part.tokens > 0 ? "token ids" : "integers") + ", which are not normalised");
      if (!named.insert(name).second)
        throw std::invalid_argument(std::string(option) + " gives two values for input '" + name + "'");
      std::vector<float> values;
      for (double v : util::parseNumberList(eq == std::string::npos ? "" : e.substr(eq + 1), option + std::string(" ") + name + "="))
        values.push_back(float(v));
      const bool deviation = std::string(option) == "--input-std";
      for (float v : values)
        if (!std::isfinite(v) || (deviation && !(v > 0)))
          throw std::invalid_argument(std::string(option) + " " + e + ": " +
                                      (deviation ? "deviations must be positive" : "means must be finite"));
      const int64_t channels = part.shape.size() == 3 || part.shape.size() == 1 ? part.shape[0] : 1;
      if (values.size() != 1 && int64_t(values.size()) != channels)
        throw std::invalid_argument(std::string(option) + " " + e + ": input '" + name + "' takes 1 or " +
                                    std::to_string(channels) + " values (its channels), not " + std::to_string(values.size()));
      (deviation ? part.deviations : part.means) = values;
    }
  }
}

// A model of one input named in --input-mean or --input-std: those values are the model's, as if
// given without the name (Graph::meanOf reads parts only for several inputs).
ModelSource namedOnlyInput(ModelSource o, const Graph& g) {
  if (g.inputs.size() != 1) return o;
  for (auto [entries, all, option] : {std::tuple{&o.inputMeans, &o.inputMean, "--input-mean"},
                                      std::tuple{&o.inputStds, &o.inputStd, "--input-std"}}) {
    for (const std::string& e : *entries) {
      const std::size_t eq = e.find('=');
      if (e.substr(0, eq) != g.inputs[0].name) continue;
      if (!all->empty() || entries->size() > 1)
        throw std::invalid_argument(std::string(option) + " gives two values for input '" + g.inputs[0].name + "'");
      for (double v : util::parseNumberList(eq == std::string::npos ? "" : e.substr(eq + 1), option))
        all->push_back(float(v));
    }
    if (!all->empty()) entries->clear();
  }
  return o;
}

// --input-range NAME=LO,HI: that input's own raw range (an ONNX model's input, float32)
void applyInputRanges(const ModelSource& o, Graph& g) {
  std::set<std::string> named;
  for (const std::string& e : o.inputRanges) {
    const std::size_t eq = e.find('=');
    const std::string name = e.substr(0, eq);
    const auto [lo, hi] = rangeText(eq == std::string::npos ? "" : e.substr(eq + 1), "--input-range " + name + "=");
    if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi)
      throw std::invalid_argument("--input-range " + e + " is no finite range with LO <= HI");
    if (g.tokens > 0)
      throw std::invalid_argument("--input-range " + e + ": model " + o.model + " takes token ids, whose range is its "
                                  "embedding tables' rows");
    OutputPart* part = &namedInput(g, name, "--input-range", o.model, "LO,HI");
    if (part->tokens > 0)
      throw std::invalid_argument("--input-range " + e + ": input '" + name + "' holds token ids, whose range is its "
                                  "embedding tables' rows");
    if (part->integer && std::ceil(lo) > std::floor(hi))
      throw std::invalid_argument("--input-range " + e + ": input '" + name + "' holds integers, and no integer lies in "
                                  "that range");
    if (named.count(name)) throw std::invalid_argument("--input-range gives two ranges for input '" + name + "'");
    named.insert(name);
    part->lo = lo;
    part->hi = hi;
  }
}

}  // namespace

Graph buildGraph(const ModelSource& given) {
  Graph g;
  if (isOnnxModel(given.model)) {
    if (given.randomSeed != 0) throw std::invalid_argument("an ONNX model carries its weights: leave out --random-weights");
    if (given.weights.empty()) {
      g = onnxGraph(given.model);
    } else {  // a fine-tuned model's parameters replace the initializers of the same names
      const auto params = loadCheckpoint(given.weights, given.run, given.iteration);
      g = onnxGraph(given.model, &params);
    }
  } else {
    if (given.weights.empty() == (given.randomSeed == 0))
      throw std::invalid_argument("give --weights FILE or --random-weights SEED (a seed > 0)");
    g = given.randomSeed ? randomGraph(given.model, given.randomSeed) : zooGraph(given.model, loadCheckpoint(given.weights, given.run, given.iteration));
  }
  applyInputRanges(given, g);
  const ModelSource o = namedOnlyInput(given, g);
  if (!o.inputMeans.empty() || !o.inputStds.empty()) {
    if (!isOnnxModel(o.model))
      throw std::invalid_argument("--input-mean and --input-std are for ONNX models; zoo model " + o.model +
                                  " is normalised as it was trained");
    applyInputNormalisations(o, g);
  }
  if (o.inputMean.empty() && o.inputStd.empty()) return g;
  if (g.tokens > 0)
    throw std::invalid_argument("--input-mean and --input-std normalise pixels; model " + o.model + " takes token ids");
  if (!isOnnxModel(o.model))
    throw std::invalid_argument("--input-mean and --input-std are for ONNX models; zoo model " + o.model +
                                " is normalised as it was trained");
  std::vector<float> mean = o.inputMean.empty() ? std::vector<float>{g.inputMean} : o.inputMean;
  std::vector<float> deviation = o.inputStd.empty() ? std::vector<float>{g.inputDeviation} : o.inputStd;
  for (float d : deviation)
    if (!(d > 0)) throw std::invalid_argument("--input-std values must be positive");
  const int64_t channels = g.nodes[0].shape.size() == 3 ? g.nodes[0].shape[0] : 1;
  for (auto* v : {&mean, &deviation}) {
    if (v->size() == 1) v->assign(std::size_t(channels), v->front());
    if (int64_t(v->size()) != channels)
      throw std::invalid_argument("--input-mean and --input-std take 1 or " + std::to_string(channels) +
                                  " values (the input's channels)");
  }
  g.channelMeans = mean;
  g.channelDeviations = deviation;
  return g;
}

ModelSource absoluteSource(ModelSource source) {
  auto absolute = [](std::string& path) {
    if (path.empty()) return;
    std::error_code error;
    const std::filesystem::path p = std::filesystem::absolute(path, error);
    if (!error) path = p.lexically_normal().string();
  };
  if (isOnnxModel(source.model)) absolute(source.model);
  absolute(source.weights);
  return source;
}

std::string numberListText(const std::vector<float>& values) {
  std::string out;
  for (float v : values) {
    char b[32];
    std::snprintf(b, sizeof b, "%.9g", double(v));
    out += (out.empty() ? "" : ",") + std::string(b);
  }
  return out;
}

}  // namespace peat::save
