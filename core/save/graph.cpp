// SPDX-License-Identifier: MIT
// A SAVE graph's structure: op names, node sizes, concatenation offsets, normalisation constants,
// result names and the top class. Building the zoo's graphs is in zoo_graph.cpp, running them in
// engine.cpp.
#include "core/save/graph.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace peat::save {

const char* opName(Op op) {
  switch (op) {
    case Op::Input: return "input";
    case Op::Linear: return "linear";
    case Op::Conv2d: return "conv2d";
    case Op::Relu: return "relu";
    case Op::MaxPool2d: return "maxpool2d";
    case Op::GlobalAvgPool: return "avgpool2d";
    case Op::BatchNorm: return "batchnorm";
    case Op::Add: return "add";
    case Op::Flatten: return "flatten";
    case Op::Select: return "select";
    case Op::Max2: return "max";
    case Op::AddConst: return "add_const";
    case Op::LayerNorm: return "layernorm";
    case Op::Gelu: return "gelu";
    case Op::Softmax: return "softmax";
    case Op::MatMul: return "matmul";
    case Op::Sigmoid: return "sigmoid";
    case Op::Tanh: return "tanh";
    case Op::Mul: return "mul";
    case Op::Clip: return "clip";
    case Op::AvgPool2d: return "avgpool_window";
    case Op::Embed: return "embed";
  }
  return "?";
}

std::vector<int64_t> selectOffsets(const Graph& g, const Node& n) {
  std::vector<int64_t> off{0};
  for (int i : n.inputs) off.push_back(off.back() + g.nodes[std::size_t(i)].size());
  return off;
}

int64_t Node::size() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string resultBase(const std::string& model) {
  const auto slash = model.find_last_of('/');
  std::string base = model.substr(slash == std::string::npos ? 0 : slash + 1);
  base = base.substr(0, base.find(" ("));  // "net.onnx (3 initializers from the checkpoint)"
  for (char& c : base)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) c = '-';
  return base.empty() ? std::string("model") : base;
}

namespace {
// The value of `values` (one, or one per channel) for element `element` of input part `p`.
float partValue(const OutputPart& p, const std::vector<float>& values, int64_t element) {
  const int64_t perValue = std::max<int64_t>(1, p.size() / int64_t(values.size()));
  return values[std::size_t(std::min<int64_t>((element - p.offset) / perValue, int64_t(values.size()) - 1))];
}
}  // namespace

float Graph::meanOf(int64_t element) const {
  if (tokens > 0) return 0.0f;  // token ids are not normalised
  const OutputPart* p = inputPartOf(*this, element);
  if (p && (p->tokens > 0 || p->integer)) return 0.0f;
  if (p && !p->means.empty()) return partValue(*p, p->means, element);
  if (channelMeans.empty()) return inputMean;
  return channelMeans[std::size_t(element / (nodes[0].size() / int64_t(channelMeans.size())))];
}

float Graph::deviationOf(int64_t element) const {
  if (tokens > 0) return 1.0f;
  const OutputPart* p = inputPartOf(*this, element);
  if (p && (p->tokens > 0 || p->integer)) return 1.0f;
  if (p && !p->deviations.empty()) return partValue(*p, p->deviations, element);
  if (channelDeviations.empty()) return inputDeviation;
  return channelDeviations[std::size_t(element / (nodes[0].size() / int64_t(channelDeviations.size())))];
}

int64_t Graph::parameterCount() const {
  int64_t n = 0;
  for (const Node& node : nodes) n += int64_t(node.weight.size() + node.bias.size());
  return n;
}


int topClassOf(const Graph& g, const float* sampleOutput) {
  if (g.outputs.empty()) return topClass(sampleOutput, g.nodes[std::size_t(g.output)].size());
  return topClass(sampleOutput + g.outputs[0].offset, g.outputs[0].size());
}

int64_t classCount(const Graph& g) {
  return g.outputs.empty() ? g.nodes[std::size_t(g.output)].size() : g.outputs[0].size();
}

int topClass(const float* logits, int64_t n) {
  int best = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(logits[i])) return -1;
    if (logits[i] > logits[best]) best = int(i);
  }
  return best;
}

}  // namespace peat::save
