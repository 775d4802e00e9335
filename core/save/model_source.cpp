// SPDX-License-Identifier: MIT
#include "core/save/model_source.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "core/save/onnx_model.h"

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
    std::string names;
    OutputPart* part = nullptr;
    for (OutputPart& p : g.inputs) {
      names += (names.empty() ? "'" : ", '") + p.name + "'";
      if (p.name == name) part = &p;
    }
    if (!part)
      throw std::invalid_argument("--input-range names '" + name + "', which is no input of model " + o.model +
                                  (g.inputs.empty() ? std::string(" (a zoo model: give LO,HI alone)") : " (its inputs: " + names + ")"));
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

Graph buildGraph(const ModelSource& o) {
  Graph g;
  if (isOnnxModel(o.model)) {
    if (o.randomSeed != 0) throw std::invalid_argument("an ONNX model carries its weights: leave out --random-weights");
    if (o.weights.empty()) {
      g = onnxGraph(o.model);
    } else {  // a fine-tuned model's parameters replace the initializers of the same names
      const auto params = loadCheckpoint(o.weights, o.run, o.iteration);
      g = onnxGraph(o.model, &params);
    }
  } else {
    if (o.weights.empty() == (o.randomSeed == 0))
      throw std::invalid_argument("give --weights FILE or --random-weights SEED (a seed > 0)");
    g = o.randomSeed ? randomGraph(o.model, o.randomSeed) : zooGraph(o.model, loadCheckpoint(o.weights, o.run, o.iteration));
  }
  applyInputRanges(o, g);
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
