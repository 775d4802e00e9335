// SPDX-License-Identifier: MIT
#include "core/save/model_source.h"

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "core/save/onnx_model.h"

namespace peat::save {

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
