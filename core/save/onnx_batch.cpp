// SPDX-License-Identifier: MIT
// Whether a model exported with a fixed first dimension (torch.onnx.export at a sample batch,
// without dynamic_axes) computes each sample alone: ONNX's shape inference with that dimension
// made symbolic, then every node that reads a sample-carrying value checked for an axis that mixes
// samples (a reduction, a softmax or a normalisation over the batch, a reshape or a concatenation
// across it, a constant that fixes it). Only then may the importer read the dimension as a batch.
#include "core/save/onnx_import_detail.h"  // first: it includes onnx/checker.h first

#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cstring>

namespace peat::save::onnx_import {

namespace {

constexpr const char* kBatch = "peat_batch";

// Ops that compute each output element from the elements at the same (broadcast) position.
const std::set<std::string>& elementwise() {
  static const std::set<std::string> ops{
      "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Where", "Equal", "Less", "LessOrEqual",
      "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Not", "Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Log", "Sqrt",
      "Reciprocal", "Neg", "Abs", "Clip", "LeakyRelu", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Softplus",
      "Softsign", "Gelu", "PRelu", "Cast", "CastLike", "Identity", "Dropout", "Floor", "Ceil", "Round", "Sign", "Sin",
      "Cos", "Tan", "Mish", "ThresholdedRelu", "IsNaN", "IsInf", "Mod", "Shrink"};
  return ops;
}
// Ops that move whole axes or repeat them: the inferred shape shows where the batch goes (a Tile
// that repeats it, an Expand that widens it lose the symbol).
const std::set<std::string>& axisMoves() {
  static const std::set<std::string> ops{"Expand", "Transpose", "Squeeze", "Unsqueeze", "Tile"};
  return ops;
}
// Ops whose first input is [N, C, spatial...]: per sample as long as the batch is axis 0.
const std::set<std::string>& channelsFirst() {
  static const std::set<std::string> ops{
      "Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool",
      "GlobalLpPool", "BatchNormalization", "InstanceNormalization", "LRN", "Resize", "Upsample", "DepthToSpace",
      "SpaceToDepth", "Pad"};
  return ops;
}
// Reductions: the inferred shape loses the batch where they reduce it, whatever keepdims says.
bool reduction(const std::string& op) { return op.rfind("Reduce", 0) == 0 || op == "ArgMax" || op == "ArgMin"; }

int64_t intAttribute(const onnx::NodeProto& n, const char* name, int64_t fallback) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return fallback;
}

struct Axis {
  int64_t at = -1, rank = 0;
  std::vector<int64_t> dims;  // -1 where not a number
};

// Every dimension before the batch is 1: the samples are contiguous blocks in row-major order.
bool leadingOnes(const Axis& a) {
  for (int64_t i = 0; i < a.at; ++i)
    if (a.dims[std::size_t(i)] != 1) return false;
  return true;
}

}  // namespace

std::string Importer::mixesSamples(const std::string& input) {
  onnx::ModelProto m = model_;
  onnx::GraphProto* g0 = m.mutable_graph();
  g0->clear_value_info();
  for (auto& in : *g0->mutable_input())
    if (in.name() == input)
      in.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param(kBatch);
  for (auto& out : *g0->mutable_output()) out.mutable_type()->mutable_tensor_type()->clear_shape();
  // A Reshape to a constant [N, rest...] of a batch-first value is `x.view(x.size(0), -1)` traced at
  // a fixed batch: rewritten to [0, rest...] (0 copies the batch dimension, 1 when the importer runs
  // one sample) in the model and in its copy, and checked again from the start.
  for (int round = 0; round < 256; ++round) {
    int patched = -1;
    std::vector<int64_t> target;
    const std::string why = sampleCheck(m, input, patched, target);
    if (patched < 0) return why;
    const std::string name = "peat_batch_reshape_" + std::to_string(round);
    onnx::TensorProto t;
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::INT64);
    t.add_dims(int64_t(target.size()));
    for (int64_t v : target) t.add_int64_data(v);
    for (onnx::ModelProto* into : {&m, &model_}) {
      *into->mutable_graph()->add_initializer() = t;
      onnx::NodeProto* reshape = into->mutable_graph()->mutable_node(patched);
      reshape->set_input(1, name);
      for (auto& a : *reshape->mutable_attribute())
        if (a.name() == "allowzero") a.set_i(0);
    }
    constants_[name] = Constant{{int64_t(target.size())}, {}, target, false};
  }
  return "more than 256 reshapes fix the batch";
}

std::string Importer::sampleCheck(onnx::ModelProto m, const std::string& input, int& patched,
                                  std::vector<int64_t>& target) const {
  onnx::GraphProto* g = m.mutable_graph();
  const int64_t fixed = [&] {
    for (const auto& in : model_.graph().input())
      if (in.name() == input) return in.type().tensor_type().shape().dim(0).dim_value();
    return int64_t(0);
  }();
  try {
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(false, 0, true));
  } catch (const std::exception& e) {
    std::string what = e.what();
    return "ONNX's shape inference with a symbolic first dimension fails (" + what.substr(0, what.find('\n')) + ")";
  }
  std::map<std::string, const onnx::TypeProto*> types;
  for (const auto& v : g->input()) types[v.name()] = &v.type();
  for (const auto& v : g->value_info()) types[v.name()] = &v.type();
  for (const auto& v : g->output()) types[v.name()] = &v.type();
  // the integers of a constant input (Slice's axes, CumSum's axis); empty where not constant
  const auto constantInts = [&](const std::string& name) -> std::vector<int64_t> {
    const Constant* c = constant(name);
    return c ? c->integers : std::vector<int64_t>{};
  };
  std::map<std::string, Axis> batch{{input, {}}};
  const auto axisOfValue = [&](const std::string& v, Axis& a) -> std::string {
    auto t = types.find(v);
    if (t == types.end() || !t->second->has_tensor_type() || !t->second->tensor_type().has_shape())
      return "its output's shape is unknown";
    const auto& dims = t->second->tensor_type().shape().dim();
    int count = 0;
    a.rank = dims.size();
    a.dims.clear();
    for (int i = 0; i < dims.size(); ++i) {
      a.dims.push_back(dims[i].has_dim_value() ? dims[i].dim_value() : -1);
      if (dims[i].has_dim_param() && dims[i].dim_param() == kBatch) {
        a.at = i;
        ++count;
      }
    }
    if (count != 1) return count == 0 ? "the batch dimension does not come through it" : "it pairs samples with samples";
    return "";
  };
  if (std::string why = axisOfValue(input, batch[input]); !why.empty()) return "the input: " + why;
  for (int index = 0; index < g->node_size(); ++index) {
    const onnx::NodeProto& n = g->node(index);
    const std::string& op = n.op_type();
    std::vector<std::pair<int, Axis>> in;  // sample-carrying inputs
    for (int i = 0; i < n.input_size(); ++i)
      if (auto it = batch.find(n.input(i)); it != batch.end()) in.push_back({i, it->second});
    if (in.empty() || op == "Shape" || op == "Size") continue;  // constants, or the batch as a number
    const std::string where = "node '" + (n.name().empty() ? n.output(0) : n.name()) + "' (" + op + ")";
    std::vector<Axis> out;
    for (const auto& o : n.output()) {
      if (o.empty()) continue;
      Axis a;
      if (std::string why = axisOfValue(o, a); !why.empty()) {
        const Axis& x = in.front().second;
        std::vector<int64_t> t = op == "Reshape" ? constantInts(n.input(1)) : std::vector<int64_t>{};
        // a 0 in the target means a zero dimension with allowzero=1 (the exporters of PyTorch 2.x
        // set it): the rewrite then drops allowzero, which changes nothing for a target without zeros
        const bool zeros = std::count(t.begin(), t.end(), int64_t(0)) > 0;
        if (op == "Reshape" && in.front().first == 0 && x.at == 0 && !(zeros && intAttribute(n, "allowzero", 0) != 0)) {
          int64_t per = 1, rest = 1;
          bool known = true;
          for (std::size_t i = 1; i < x.dims.size(); ++i) known = known && x.dims[i] > 0, per *= x.dims[i];
          for (std::size_t i = 1; i < t.size(); ++i) rest *= t[i] == -1 ? 1 : t[i];
          bool inferred = false;
          for (std::size_t i = 1; i < t.size(); ++i) inferred = inferred || t[i] == -1;
          if (known && !t.empty() && rest > 0 &&
              ((t[0] == fixed && (inferred ? per % rest == 0 : per == rest)) || (t[0] == -1 && !inferred && per == rest))) {
            t[0] = 0;
            patched = index;
            target = t;
            return "";
          }
        }
        return where + ": " + why;
      }
      batch[o] = a;
      out.push_back(a);
    }
    if (out.empty()) continue;
    const Axis& x = in.front().second;
    const Axis& y = out.front();
    const auto mixes = [&](const std::string& why) { return where + " " + why; };
    if (elementwise().count(op)) {
      for (const auto& [i, a] : in)  // broadcasting aligns from the right
        if (y.rank - a.rank + a.at != y.at) return mixes("broadcasts one sample against another");
    } else if (axisMoves().count(op) || reduction(op)) {
      // where the batch goes is in the inferred shape, checked above
    } else if (op == "Gather") {
      if (in.front().first == 0 && axisOf(intAttribute(n, "axis", 0), std::size_t(x.rank)) == x.at)
        return mixes("gathers along the batch axis");
    } else if (channelsFirst().count(op)) {
      if (in.front().first != 0 || x.at != 0 || y.at != 0) return mixes("reads the batch as another axis");
      if (op == "BatchNormalization" && intAttribute(n, "training_mode", 0) != 0)
        return mixes("normalises with batch statistics (training mode)");
    } else if (op == "RNN" || op == "GRU" || op == "LSTM") {  // X [seq, batch, in] (layout 1: [batch, seq, in])
      if (in.front().first != 0 || x.at != (intAttribute(n, "layout", 0) == 0 ? 1 : 0))
        return mixes("reads the batch as its sequence");
    } else if (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") {
      const int64_t axis = axisOf(intAttribute(n, "axis", opset_ < 13 ? 1 : -1), std::size_t(x.rank));
      if (opset_ < 13 ? x.at >= axis : x.at == axis) return mixes("normalises over the batch axis");
    } else if (op == "LayerNormalization") {
      if (x.at >= axisOf(intAttribute(n, "axis", -1), std::size_t(x.rank))) return mixes("normalises over the batch axis");
    } else if (op == "MatMul") {
      for (const auto& [i, a] : in)
        if (a.rank == 1 || (i == 0 && a.at == a.rank - 1) || (i == 1 && a.at == a.rank - 2))
          return mixes("sums over the batch axis");
    } else if (op == "Gemm") {
      for (const auto& [i, a] : in)
        if ((i == 0 && a.at == (intAttribute(n, "transA", 0) ? 0 : 1)) ||
            (i == 1 && a.at == (intAttribute(n, "transB", 0) ? 1 : 0)))
          return mixes("sums over the batch axis");
    } else if (op == "Reshape" || op == "Flatten") {
      if (in.front().first != 0 || !leadingOnes(x) || !leadingOnes(y)) return mixes("reshapes across the batch axis");
    } else if (op == "Concat" || op == "Split") {
      for (const auto& [i, a] : in)
        if (axisOf(intAttribute(n, "axis", 0), std::size_t(a.rank)) == a.at) return mixes("joins or splits along the batch axis");
    } else if (op == "Slice") {
      if (in.front().first != 0) return mixes("slices with sample-dependent bounds");
      std::vector<int64_t> axes = n.input_size() > 3 ? constantInts(n.input(3)) : std::vector<int64_t>{};
      if (n.input_size() > 3 && axes.empty()) return mixes("slices along axes that are not constants");
      if (n.input_size() <= 3)
        for (int64_t i = 0; i < x.rank; ++i) axes.push_back(i);
      for (int64_t a : axes)
        if (axisOf(a, std::size_t(x.rank)) == x.at) return mixes("slices along the batch axis");
    } else if (op == "CumSum") {
      const std::vector<int64_t> axis = constantInts(n.input(1));
      if (axis.size() != 1 || axisOf(axis[0], std::size_t(x.rank)) == x.at) return mixes("sums along the batch axis");
    } else if (op == "TopK") {
      if (axisOf(intAttribute(n, "axis", -1), std::size_t(x.rank)) == x.at) return mixes("sorts along the batch axis");
    } else {
      return where + ": SAVE cannot tell whether " + op + " mixes samples";
    }
  }
  for (const auto& o : g->output()) {
    auto it = batch.find(o.name());
    if (it == batch.end()) return "output '" + o.name() + "' does not depend on the input";
    if (!leadingOnes(it->second)) return "output '" + o.name() + "' holds the batch on axis " + std::to_string(it->second.at);
  }
  return "";
}

}  // namespace peat::save::onnx_import
