// SPDX-License-Identifier: MIT
// The ONNX importer's operator mapping: every node in graph order (constants, identities, folding,
// patterns first), then the operator table, one mapper per ONNX operator.
#include "core/save/onnx_import_detail.h"  // first: it includes onnx/checker.h first

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace peat::save::onnx_import {

// A row of the operator table. AnyInput: the mapper finds the node's computed input itself (element
// moves, Split, Pad); FirstActivation: the node's first input is computed from the model's input
// (a zero Pad before it is folded in first, see mapAfterZeroPad) and its SaveError refuses it.
struct Importer::OpMapping {
  enum Reads { AnyInput, FirstActivation } reads;
  void (Importer::*map)(const onnx::NodeProto& n);
};

// To map a new operator: write a mapper that sets values_ for the node's outputs (and dims_ where
// the ONNX shape is not [1] + SAVE's) or refuses the node with one line saying why; add its row
// here, to keepsShape() if its output has its input's shape, and to fold() if constants fold through it.
const Importer::OpMapping* Importer::mappingOf(const std::string& op) {
  constexpr auto anyInput = OpMapping::AnyInput, onFirst = OpMapping::FirstActivation;
  static const std::map<std::string, OpMapping> table{
      // element moves (onnx_moves.cpp; each also has an index map in moveIndices)
      {"Reshape", {anyInput, &Importer::move}},
      {"Flatten", {anyInput, &Importer::move}},
      {"Squeeze", {anyInput, &Importer::move}},
      {"Unsqueeze", {anyInput, &Importer::move}},
      {"Transpose", {anyInput, &Importer::move}},
      {"Slice", {anyInput, &Importer::move}},
      {"Gather", {anyInput, &Importer::move}},
      {"Expand", {anyInput, &Importer::move}},
      {"Concat", {anyInput, &Importer::move}},
      {"Split", {anyInput, &Importer::split}},
      {"Pad", {anyInput, &Importer::pad}},  // onnx_patterns.cpp: folded into the next Conv or AveragePool
      // layers
      {"Conv", {onFirst, &Importer::mapConv}},
      {"ConvTranspose", {onFirst, &Importer::mapConvTranspose}},  // onnx_conv.cpp
      {"RNN", {onFirst, &Importer::mapRecurrent}},  // onnx_rnn.cpp
      {"GRU", {onFirst, &Importer::mapRecurrent}},
      {"LSTM", {onFirst, &Importer::mapRecurrent}},
      {"Gemm", {onFirst, &Importer::mapGemm}},
      {"MatMul", {onFirst, &Importer::mapMatMul}},
      {"BatchNormalization", {onFirst, &Importer::mapBatchNormalization}},
      {"LayerNormalization", {onFirst, &Importer::mapLayerNormalization}},
      {"MaxPool", {onFirst, &Importer::mapMaxPool}},
      {"AveragePool", {onFirst, &Importer::mapAveragePool}},
      {"GlobalAveragePool", {onFirst, &Importer::mapGlobalAveragePool}},
      {"Resize", {onFirst, &Importer::mapResize}},  // onnx_resize.cpp
      {"Upsample", {onFirst, &Importer::mapResize}},
      // element-wise
      {"Add", {onFirst, &Importer::mapBinary}},
      {"Mul", {onFirst, &Importer::mapBinary}},
      {"Div", {onFirst, &Importer::mapBinary}},
      {"Sub", {onFirst, &Importer::mapBinary}},
      {"HardSigmoid", {onFirst, &Importer::mapHardSigmoid}},
      {"HardSwish", {onFirst, &Importer::mapHardSwish}},
      {"ReduceMean", {onFirst, &Importer::mapReduceMean}},
      {"Relu", {onFirst, &Importer::mapRelu}},
      {"Sigmoid", {onFirst, &Importer::mapSigmoid}},
      {"Tanh", {onFirst, &Importer::mapTanh}},
      {"Clip", {onFirst, &Importer::mapClip}},
      {"Softmax", {onFirst, &Importer::mapSoftmax}},
  };
  const auto it = table.find(op);
  return it == table.end() ? nullptr : &it->second;
}

// Ops whose output has their (first activation) input's shape.
bool Importer::keepsShape(const std::string& op) {
  static const std::set<std::string> same{"Relu",     "Sigmoid", "Tanh", "Clip", "Softmax", "LayerNormalization",
                                          "BatchNormalization", "Identity", "Dropout", "Add", "Mul", "Div", "Sub",
                                          "HardSigmoid", "HardSwish"};
  return same.count(op) > 0;
}

// The first attribute of `n` that its mapping or folding does not read ("" if none): an attribute
// SAVE ignored could change what the node computes (old opsets' broadcast and axis on Add, a
// batch norm's spatial=0), so a node carrying one is refused by name. Ops without a row are
// refused or left to the mapper that reads them.
std::string Importer::unreadAttribute(const onnx::NodeProto& n) {
  static const std::map<std::string, std::set<std::string>> read{
      {"Conv", {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}},
      {"RNN", {"activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "layout"}},
      {"GRU", {"activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "layout",
               "linear_before_reset"}},
      {"LSTM", {"activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "input_forget",
                "layout"}},
      {"ConvTranspose", {"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads", "strides"}},
      {"Gemm", {"alpha", "beta", "transA", "transB"}},
      {"MatMul", {}},
      {"BatchNormalization", {"epsilon", "momentum", "training_mode"}},  // momentum: training only
      {"LayerNormalization", {"axis", "epsilon", "stash_type"}},        // stash_type: the statistics' precision
      {"MaxPool", {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}},
      {"AveragePool", {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"}},
      {"GlobalAveragePool", {}},
      {"Resize", {"antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                  "extrapolation_value", "keep_aspect_ratio_policy", "mode", "nearest_mode"}},
      {"Upsample", {"mode", "scales"}},
      {"Add", {}}, {"Sub", {}}, {"Mul", {}}, {"Div", {}}, {"Pow", {}}, {"Sqrt", {}}, {"Erf", {}},
      {"Relu", {}}, {"Sigmoid", {}}, {"Tanh", {}}, {"HardSwish", {}},
      {"HardSigmoid", {"alpha", "beta"}},
      {"Clip", {"min", "max"}},
      {"Softmax", {"axis"}},
      {"ReduceMean", {"axes", "keepdims", "noop_with_empty_axes"}},
      {"Reshape", {"allowzero"}}, {"Flatten", {"axis"}}, {"Squeeze", {"axes"}}, {"Unsqueeze", {"axes"}},
      {"Transpose", {"perm"}}, {"Slice", {}}, {"Gather", {"axis"}}, {"Expand", {}}, {"Concat", {"axis"}},
      {"Split", {"axis", "split"}},
      {"Pad", {"mode", "pads", "value"}},
      {"Dropout", {"ratio", "seed"}},  // seed: which values a training-mode dropout drops
      {"Identity", {}},
      {"Shape", {"start", "end"}}, {"Cast", {"to"}}, {"ConstantOfShape", {"value"}}, {"Range", {}},
      {"Where", {}}, {"Equal", {}}, {"Less", {}}, {"Greater", {}}, {"Neg", {}}, {"Not", {}},
      {"Mod", {"fmod"}}, {"ScatterND", {"reduction"}},
  };
  const auto it = read.find(n.op_type());
  if (it == read.end()) return {};
  for (const auto& a : n.attribute())
    if (!it->second.count(a.name())) return a.name();
  return {};
}

void Importer::nodeInner(const onnx::NodeProto& n) {
  for (const auto& in : n.input())
    if (poisoned_.count(in)) {  // already reported upstream
      for (const auto& out : n.output()) poisoned_.insert(out);
      return;
    }
  const std::string& op = n.op_type();
  const std::string name = nameOf(n);  // here, before any refusal: duplicate names are numbered in graph order
  if (!n.domain().empty() && n.domain() != "ai.onnx") return refuse(n, "operator domain '" + n.domain() + "'");
  if (const std::string a = unreadAttribute(n); !a.empty())
    return refuse(n, "its attribute '" + a + "' is not read by SAVE's mapping (it could change what the node computes)");
  if (op == "Constant") {
    const auto* a = attribute(n, "value");
    if (!a || !a->has_t()) return refuse(n, "only tensor constants are read");
    constants_[n.output(0)] = decode(a->t(), "constant");
    return;
  }
  if (mapIntegerValue(n)) return;
  if (op == "Identity" || op == "Dropout") return mapIdentity(n);
  if (op == "Cast" && n.input_size() == 1 && isActivation(n.input(0))) {  // SAVE's activations are float32
    if (intAttr(n, "to", 0) != onnx::TensorProto::FLOAT)
      return refuse(n, "it casts a float32 activation to " + typeName(int(intAttr(n, "to", 0))) + "; SAVE computes in float32");
    values_[n.output(0)] = values_[n.input(0)];
    if (auto d = dims_.find(n.input(0)); d != dims_.end()) dims_[n.output(0)] = d->second;
    return;
  }
  bool anyActivation = false;
  for (const auto& in : n.input()) anyActivation = anyActivation || isActivation(in);
  if ((op == "Shape" || !anyActivation) && foldConstants(n)) return;  // shape arithmetic, masks and other constants
  if (mapGeluChain(n, name) || mapLayerNormChain(n, name)) return;
  mapOperator(n);
}

// A node reading an integer input's values (a mask beside other inputs): moves keep them integers
// (their outputs tracked), a Cast to float32 makes them an ordinary activation (SAVE holds them as
// float32 already: exact for |v| <= 2^24, a mask's 0 and 1), Shape reads only the dims; any
// other node would compute on integers (an integer Div truncates): refused by name. False where
// the node reads no integer value or is a move to map as usual.
bool Importer::mapIntegerValue(const onnx::NodeProto& n) {
  bool reads = false;
  for (const auto& in : n.input()) reads = reads || integerValues_.count(in) > 0;
  if (!reads) return false;
  const std::string& op = n.op_type();
  if (op == "Cast") {
    if (intAttr(n, "to", 0) != onnx::TensorProto::FLOAT)
      refuse(n, "it casts an integer input's values to " + typeName(int(intAttr(n, "to", 0))) + ", not float32");
    else if (!isActivation(n.input(0)))
      refuse(n, "its input is not computed from the model's input");
    else {
      values_[n.output(0)] = values_[n.input(0)];
      if (auto d = dims_.find(n.input(0)); d != dims_.end()) dims_[n.output(0)] = d->second;
    }
    return true;
  }
  static const std::set<std::string> moves{"Unsqueeze", "Squeeze", "Reshape", "Flatten", "Transpose",
                                           "Slice",     "Expand",  "Identity", "Shape"};
  if (!moves.count(op)) {
    refuse(n, "it computes on an integer input's values as integers; SAVE reads an integer input beside others "
              "(a mask) through moves and a Cast to float32 only");
    return true;
  }
  if (op != "Shape")
    for (const auto& out : n.output()) integerValues_.insert(out);
  return false;
}

// Identity, and Dropout as the identity of inference (refused where it would drop values):
// exporters alias shared initializers through Identity.
void Importer::mapIdentity(const onnx::NodeProto& n) {
  if (n.op_type() == "Dropout") {
    if (n.input_size() >= 3 && !n.input(2).empty()) {
      const Constant* mode = constant(n.input(2));
      if (!mode) return refuse(n, "its training_mode is not a constant");
      const bool training = mode->isFloat ? (!mode->values.empty() && mode->values[0] != 0)
                                          : (!mode->integers.empty() && mode->integers[0] != 0);
      // ratio 0 drops nothing and scales by 1/(1 - 0): the identity even in training mode
      // (torchvision's Swin calls F.dropout(attn, p=0.0), whose training flag defaults to true)
      const Constant* ratio = n.input_size() >= 2 && !n.input(1).empty() ? constant(n.input(1)) : nullptr;
      const bool dropsNothing = ratio && ratio->isFloat && ratio->values.size() == 1 && ratio->values[0] == 0.0f;
      if (training && !dropsNothing)
        return refuse(n, "Dropout in training mode (training_mode=1) drops values at random; export with model.eval()");
    }
    if (n.output_size() > 1 && !n.output(1).empty() && consumers_[n.output(1)] > 0)
      return refuse(n, "its mask output is read; SAVE maps Dropout as the identity of inference");
  }
  if (const Constant* c = constant(n.input(0))) {
    constants_[n.output(0)] = *c;
    if (nonFloat_.count(n.input(0))) {
      nonFloat_.insert(n.output(0));
      typeOf_[n.output(0)] = typeOf_[n.input(0)];
    }
    return;
  }
  if (!isActivation(n.input(0))) return refuse(n, "its input is not computed from the model's input");
  values_[n.output(0)] = values_[n.input(0)];
}

// True where the node was folded to a constant or refused while folding.
bool Importer::foldConstants(const onnx::NodeProto& n) {
  concatPart_ = 0;
  try {
    return fold(n);
  } catch (const SaveError& e) {
    refuse(n, e.what());
  } catch (const std::exception& e) {
    refuse(n, std::string("a constant it cannot evaluate: ") + e.what());
  }
  return true;
}

void Importer::mapOperator(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  const OpMapping* mapping = mappingOf(op);
  if (mapping && mapping->reads == OpMapping::AnyInput) return (this->*mapping->map)(n);
  if (n.input_size() > 0 && zeroPad_.count(n.input(0))) return mapAfterZeroPad(n);
  if (n.input_size() == 0 || !isActivation(n.input(0))) return mapConstantFirst(n);
  if (!mapping) return refuse(n, "SAVE has no sound transfer function for " + op + " yet");
  try {
    (this->*mapping->map)(n);
  } catch (const SaveError& e) {
    refuse(n, e.what());
  }
}

// A node whose first input is a constant: an Add or Mul with its operands swapped, else refused.
void Importer::mapConstantFirst(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (op == "Add" || op == "Mul" || op == "Sub") {
    if (n.input_size() == 2 && isActivation(n.input(1))) return binary(n, n.input(1), n.input(0));
  }
  if (op == "MatMul" && n.input_size() == 2 && isActivation(n.input(1)))
    return refuse(n, "a product of a constant and an activation (constant on the left) is not mapped");
  return refuse(n, "its first input is not computed from the model's input (constant folding left it?)");
}

// --- the mappers of the table

void Importer::mapConv(const onnx::NodeProto& n) { values_[n.output(0)] = conv(n, first(n)); }

void Importer::mapConvTranspose(const onnx::NodeProto& n) { values_[n.output(0)] = convPatches(n, first(n)); }

void Importer::mapGemm(const onnx::NodeProto& n) {
  const int x = first(n);
  const std::vector<int64_t> d = dimsOf(n.input(0));
  const int out = gemm(n, x);
  if (out < 0) return;
  if (d.size() == 2) dims_[n.output(0)] = {d[0], b_.node(out).features()};
  values_[n.output(0)] = out;
}

void Importer::mapMatMul(const onnx::NodeProto& n) {
  if (n.input_size() == 2 && isActivation(n.input(1))) return matmulActivations(n);
  const std::string name = nameOf(n);
  const int x = first(n);
  const Constant* w = constant(n.input(1));
  if (!w || w->dims.size() != 2 || !w->isFloat) return refuse(n, "its right operand is not a float32 2-D initializer");
  std::vector<float> t(w->values.size());
  const int64_t in = w->dims[0], o = w->dims[1];
  for (int64_t i = 0; i < in; ++i)
    for (int64_t j = 0; j < o; ++j) t[std::size_t(j * in + i)] = w->values[std::size_t(i * o + j)];
  params_[name + ".weight"] = tensorOf(t, {o, in});
  params_[name + ".bias"] = tensorOf(std::vector<float>(std::size_t(o), 0.0f), {o});
  std::vector<int64_t> d = dimsOf(n.input(0));
  if (d.empty() || d.back() != in) return refuse(n, "its weight does not fit its input");
  const int64_t rows = countOf(d) / in;  // every row of every leading dimension: a token-wise linear layer
  const int xv = shaped(name, x, rows == 1 ? std::vector<int64_t>{in} : std::vector<int64_t>{rows, in});
  const int lin = b_.linear(name, xv, o);
  d.back() = o;
  setActivation(n.output(0), name, lin, d);
  if (consumers_[n.output(0)] == 1) biasFree_[n.output(0)] = lin;  // a bias Add may fold into it (a view keeps its last dim)
}

void Importer::mapBinary(const onnx::NodeProto& n) { binary(n, n.input(0), n.input(1)); }

void Importer::mapRelu(const onnx::NodeProto& n) { values_[n.output(0)] = b_.relu(nameOf(n), first(n)); }

void Importer::mapSigmoid(const onnx::NodeProto& n) {
  values_[n.output(0)] = b_.unary(Op::Sigmoid, nameOf(n), first(n));
}

void Importer::mapTanh(const onnx::NodeProto& n) { values_[n.output(0)] = b_.unary(Op::Tanh, nameOf(n), first(n)); }

void Importer::mapSoftmax(const onnx::NodeProto& n) {
  const int64_t rank = int64_t(dimsOf(n.input(0)).size());
  const int64_t axis = intAttr(n, "axis", opset_ >= 13 ? -1 : 1);
  if (opset_ < 13 && axis != rank - 1) return refuse(n, "softmax before opset 13 flattens from its axis");
  if (axis != -1 && axis != rank - 1) return refuse(n, "softmax over another axis than the last");
  values_[n.output(0)] = b_.softmax(nameOf(n), first(n));
}

// HardSigmoid: clip(alpha x + beta, 0, 1), an affine map then a clip (ONNX's own definition).
int Importer::hardSigmoid(const std::string& name, int x, float alpha, float beta) {
  const std::vector<int64_t> shape = b_.node(x).shape;  // a copy: adding nodes moves them
  const int flat = shaped(name + ".affine", x, {1, countOf(shape)});
  const int affine = b_.affine(name + ".affine", flat, {alpha}, {beta});
  return b_.clip(name, shaped(name + ".affine.shape", affine, shape), 0.0f, 1.0f);
}

void Importer::mapHardSigmoid(const onnx::NodeProto& n) {
  values_[n.output(0)] = hardSigmoid(nameOf(n), first(n), floatAttr(n, "alpha", 0.2f), floatAttr(n, "beta", 0.5f));
}

// HardSwish: x * HardSigmoid(x) with ONNX's fixed alpha 1/6 and beta 1/2 (it has no attributes;
// MobileNetV3); the product of two activations (sound, if loose where x changes sign).
void Importer::mapHardSwish(const onnx::NodeProto& n) {
  const std::string name = nameOf(n);
  const int x = first(n);
  values_[n.output(0)] = b_.mul(name, x, hardSigmoid(name + ".gate", x, 1.0f / 6.0f, 0.5f));
}

// ReduceMean over trailing axes (after moving the reduced axes last with a Select where they are
// not): the global average pool of a [kept, reduced] view, which sums in order and divides, as
// ONNX's mean. A spatial mean over [C, H, W] is global average pooling itself. Inside a decomposed
// layer norm the pattern maps it instead (onnx_patterns.cpp).
void Importer::mapReduceMean(const onnx::NodeProto& n) {
  const std::string name = nameOf(n);
  const std::vector<int64_t> d = dimsOf(n.input(0));
  const std::size_t rank = d.size();
  std::vector<int64_t> axes = n.input_size() > 1 && !n.input(1).empty() ? ints(n, 1) : intsAttr(n, "axes");
  if (axes.empty() && intAttr(n, "noop_with_empty_axes", 0) != 0) return mapIdentity(n);
  std::vector<char> reduced(rank, axes.empty() ? 1 : 0);
  for (int64_t a : axes) {
    const int64_t ax = axisOf(a, rank);
    if (ax < 0 || ax >= int64_t(rank)) return refuse(n, "an axis out of range");
    reduced[std::size_t(ax)] = 1;
  }
  if (reduced[0] && d[0] == 1) return refuse(n, "a mean over the batch axis (SAVE runs one sample at a time)");
  std::vector<int64_t> perm, kept, outDims;
  int64_t keptCount = 1, reducedCount = 1;
  for (std::size_t i = 0; i < rank; ++i)
    if (!reduced[i]) {
      perm.push_back(int64_t(i));
      keptCount *= d[i];
    }
  for (std::size_t i = 0; i < rank; ++i)
    if (reduced[i]) {
      perm.push_back(int64_t(i));
      reducedCount *= d[i];
    }
  const bool keep = intAttr(n, "keepdims", 1) != 0;
  for (std::size_t i = 0; i < rank; ++i)
    if (!reduced[i] || keep) outDims.push_back(reduced[i] ? 1 : d[i]);
  try {
    std::vector<int64_t> gather(std::size_t(countOf(d)));
    const std::vector<int64_t> st = stridesOf(d);
    std::vector<int64_t> pd;
    for (int64_t p : perm) pd.push_back(d[std::size_t(p)]);
    bool identity = true;
    for (int64_t e = 0; e < countOf(d); ++e) {
      const std::vector<int64_t> c = coordOf(e, pd);
      int64_t at = 0;
      for (std::size_t k = 0; k < rank; ++k) at += c[k] * st[std::size_t(perm[k])];
      gather[std::size_t(e)] = at;
      identity = identity && at == e;
    }
    const int x = first(n);
    const int moved = identity ? shaped(name + ".view", x, {keptCount, reducedCount})
                               : gathered(name + ".moved", x, {keptCount, reducedCount}, std::move(gather));
    setActivation(n.output(0), name, b_.globalAvgPool(name, moved), outDims);
  } catch (const SaveError& e) {
    refuse(n, e.what());
  }
}

void Importer::mapMaxPool(const onnx::NodeProto& n) {
  const int x = first(n);
  const auto k = intsAttr(n, "kernel_shape"), s = intsAttr(n, "strides"), p = intsAttr(n, "pads");
  if (k.size() != 2 || k[0] != k[1]) return refuse(n, "only square 2-D windows are mapped");
  for (int64_t v : p)
    if (v != (p.empty() ? 0 : p[0])) return refuse(n, "unequal max-pool padding is not mapped");
  const int64_t ceil = intAttr(n, "ceil_mode", 0);
  if (ceil != 0 && ceil != 1) return refuse(n, "a ceil_mode other than 0 or 1");
  for (int64_t d : intsAttr(n, "dilations"))
    if (d != 1) return refuse(n, "dilated max-pooling is not mapped");
  const int64_t stride = s.empty() ? 1 : s[0];
  if (s.size() == 2 && s[0] != s[1]) return refuse(n, "unequal strides are not mapped");
  if (stride <= 0 || k[0] <= 0) return refuse(n, "a stride or kernel out of range");
  if (b_.node(x).shape.size() != 3) return refuse(n, "its input is not [C, H, W]");
  if (const auto* a = attribute(n, "auto_pad"); a && a->s() != "NOTSET") return refuse(n, "auto_pad is not mapped");
  if (n.output_size() > 1 && !n.output(1).empty() && consumers_[n.output(1)] > 0)
    return refuse(n, "its indices output is read");
  values_[n.output(0)] = b_.maxPool(nameOf(n), x, k[0], stride, p.empty() ? 0 : p[0], ceil == 1);
}

void Importer::mapClip(const onnx::NodeProto& n) {
  // bounds from inputs 1 and 2 (opset >= 11) or from attributes (older opsets); absent: unbounded
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (opset_ < 11) {
    lo = floatAttr(n, "min", lo);
    hi = floatAttr(n, "max", hi);
  }
  for (int i : {1, 2})
    if (n.input_size() > i && !n.input(i).empty()) {
      const Constant* c = constant(n.input(i));
      if (!c || !c->isFloat || c->values.size() != 1) return refuse(n, "its bounds are not float32 scalar constants");
      (i == 1 ? lo : hi) = c->values[0];
    }
  if (!(lo <= hi)) return refuse(n, "its lower bound is above its upper bound");
  values_[n.output(0)] = b_.clip(nameOf(n), first(n), lo, hi);
}

void Importer::mapAveragePool(const onnx::NodeProto& n) {
  const int out = avgPool(n, first(n), 0);
  if (out < 0) return;
  values_[n.output(0)] = out;
}

void Importer::mapGlobalAveragePool(const onnx::NodeProto& n) {
  const int x = first(n);
  const std::vector<int64_t> d = dimsOf(n.input(0));
  if (b_.node(x).shape.size() != 3 && d.size() >= 3 && (d[0] == 1 || wholeSample_)) {
    // 1-D, 3-D (or a whole-sample batch): the mean of each channel's row, a linear layer of
    // weight 1/L over [B x C, L]
    const std::string name = nameOf(n);
    const int64_t rows = d[0] * d[1], len = countOf(d) / rows;
    params_[name + ".weight"] = tensorOf(std::vector<float>(std::size_t(len), 1.0f / float(len)), {1, len});
    params_[name + ".bias"] = tensorOf({0.0f}, {1});
    const int mean = b_.linear(name, shaped(name + ".rows", x, {rows, len}), 1);
    std::vector<int64_t> out(d.size(), 1);
    out[0] = d[0];
    out[1] = d[1];
    return setActivation(n.output(0), name, mean, out);
  }
  if (b_.node(x).shape.size() != 3) return refuse(n, "its input is not [C, H, W]");
  const int out = b_.globalAvgPool(nameOf(n), x);
  shape1x1_.insert(n.output(0));  // [C] here, [C, 1, 1] in ONNX
  values_[n.output(0)] = out;
}

void Importer::mapBatchNormalization(const onnx::NodeProto& n) {
  const std::string name = nameOf(n);
  const int x = first(n);
  if (n.input_size() != 5) return refuse(n, "expected scale, bias, mean and variance");
  if (intAttr(n, "training_mode", 0) != 0 || n.output_size() > 1)
    return refuse(n, "batch norm in training mode (batch statistics) has no fixed affine map");
  const int64_t c = b_.node(x).shape.empty() ? 0 : b_.node(x).shape[0];
  for (auto [i, suffix] : {std::pair<int, const char*>{1, ".weight"}, {2, ".bias"}, {3, ".running_mean"}, {4, ".running_var"}})
    if (!weight(n, n.input(i), name + suffix, {c})) return;
  const float eps = floatAttr(n, "epsilon", 1e-5f);
  values_[n.output(0)] = b_.batchNorm(name, x, eps == 1e-5f ? 1e-5 : double(eps));  // torch's 1e-5, as the zoo's graphs
}

void Importer::mapLayerNormalization(const onnx::NodeProto& n) {
  const std::string name = nameOf(n);
  const int x = first(n);
  const int64_t axis = intAttr(n, "axis", -1), rank = int64_t(dimsOf(n.input(0)).size());
  if (axis != -1 && axis != rank - 1) return refuse(n, "normalisation over more than the last axis");
  const float eps = floatAttr(n, "epsilon", 1e-5f);
  if (!(eps > 0)) return refuse(n, "an epsilon that is not positive");
  const int64_t w = b_.node(x).features();
  if (!weight(n, n.input(1), name + ".weight", {w})) return;
  if (n.input_size() > 2 && !n.input(2).empty()) {
    if (!weight(n, n.input(2), name + ".bias", {w})) return;
  } else {
    params_[name + ".bias"] = tensorOf(std::vector<float>(std::size_t(w), 0.0f), {w});
  }
  values_[n.output(0)] = b_.layerNorm(name, x, eps);
}

// --- layers and products the mappers share

int Importer::avgPool(const onnx::NodeProto& n, int x, int64_t extra) {
  const std::string name = nameOf(n);
  const auto k = intsAttr(n, "kernel_shape"), s = intsAttr(n, "strides"), p = intsAttr(n, "pads");
  auto no = [&](const std::string& why) {
    refuse(n, why);
    return -1;
  };
  if (k.size() != 2 || k[0] != k[1]) return no("only square 2-D windows are mapped");
  for (int64_t v : p)
    if (v != (p.empty() ? 0 : p[0])) return no("unequal average-pool padding is not mapped");
  for (int64_t v : s)
    if (v != (s.empty() ? 1 : s[0])) return no("unequal strides are not mapped");
  if (intAttr(n, "ceil_mode", 0) != 0) return no("ceil_mode=1 is not mapped");
  const int64_t own = p.empty() ? 0 : p[0];
  if (own != 0 && intAttr(n, "count_include_pad", 0) != 1)
    return no("padding left out of the divisor (count_include_pad=0) is not mapped");
  if (const auto* a = attribute(n, "auto_pad"); a && a->s() != "NOTSET") return no("auto_pad is not mapped");
  return b_.avgPool(name, x, k[0], s.empty() ? 1 : s[0], own + extra);
}

int Importer::conv(const onnx::NodeProto& n, int x, int64_t extraPad) {
  const std::string name = nameOf(n);
  if (b_.node(x).shape.size() != 3 && isActivation(n.input(0))) {  // a global pool's [C] is [1, C, 1, 1] in ONNX
    const std::vector<int64_t> d = dimsOf(n.input(0));
    if (d.size() == 4 && d[0] == 1 && countOf(d) == b_.node(x).size()) x = shaped(name + ".input", x, {d[1], d[2], d[3]});
  }
  const int64_t groups = intAttr(n, "group", 1);
  const Constant* w = constant(n.input(1));
  const auto s = intsAttr(n, "strides"), p = intsAttr(n, "pads"), d = intsAttr(n, "dilations");
  const auto equal = [](const std::vector<int64_t>& v) { return std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) == v.end(); };
  const auto* autoPad = attribute(n, "auto_pad");
  // SAVE's Conv2d: 2-D, a square kernel, one stride, padding and dilation; any other as patches
  if (w && w->isFloat && groups == 1 && isActivation(n.input(0)) && dimsOf(n.input(0)).size() == w->dims.size() &&
      !(w->dims.size() == 4 && w->dims[2] == w->dims[3] && equal(s) && equal(p) && equal(d) &&
        (!autoPad || autoPad->s() == "NOTSET") && !wholeSample_))
    return convPatches(n, x, extraPad);
  if (!w || w->dims.size() != 4 || w->dims[2] != w->dims[3]) {
    refuse(n, "only 2-D convolutions with square kernels from an initializer are mapped when grouped");
    return -1;
  }
  const int64_t dilation = d.empty() ? 1 : d[0];
  for (int64_t v : d)
    if (v != dilation) {
      refuse(n, "unequal dilations are not mapped");
      return -1;
    }
  const int64_t stride = s.empty() ? 1 : s[0], pad = p.empty() ? 0 : p[0];
  if (stride <= 0 || pad < 0 || w->dims[2] <= 0) {
    refuse(n, "a stride, padding or kernel out of range");
    return -1;
  }
  for (int64_t v : s)
    if (v != stride) {
      refuse(n, "unequal strides are not mapped");
      return -1;
    }
  for (int64_t v : p)
    if (v != pad) {
      refuse(n, "unequal padding is not mapped");
      return -1;
    }
  if (const auto* a = attribute(n, "auto_pad"); a && a->s() != "NOTSET") {
    refuse(n, "auto_pad=" + a->s() + " is not mapped (export with explicit pads)");
    return -1;
  }
  if (groups < 1 || b_.node(x).shape.size() != 3 || b_.node(x).shape[0] != w->dims[1] * groups || w->dims[0] % groups) {
    refuse(n, "its weight does not fit its input (group " + std::to_string(groups) + ")");
    return -1;
  }
  if (!weight(n, n.input(1), name + ".weight")) return -1;
  const bool bias = n.input_size() > 2 && !n.input(2).empty();
  if (bias && !weight(n, n.input(2), name + ".bias", {w->dims[0]})) return -1;
  return b_.conv(name, x, w->dims[0], w->dims[2], stride, pad + extraPad, bias, groups, dilation);
}

int Importer::gemm(const onnx::NodeProto& n, int x) {
  const std::string name = nameOf(n);
  if (intAttr(n, "transA", 0) != 0 || floatAttr(n, "alpha", 1) != 1.0f || floatAttr(n, "beta", 1) != 1.0f) {
    refuse(n, "only Gemm with transA=0, alpha=1, beta=1 is mapped");
    return -1;
  }
  const Constant* w = constant(n.input(1));
  if (!w || w->dims.size() != 2 || !w->isFloat) {
    refuse(n, "its weight is not a float32 2-D initializer");
    return -1;
  }
  const bool transB = intAttr(n, "transB", 0) != 0;
  const int64_t out = transB ? w->dims[0] : w->dims[1], in = transB ? w->dims[1] : w->dims[0];
  std::vector<float> weight = w->values;
  if (!transB)
    for (int64_t i = 0; i < in; ++i)
      for (int64_t j = 0; j < out; ++j) weight[std::size_t(j * in + i)] = w->values[std::size_t(i * out + j)];
  params_[name + ".weight"] = tensorOf(weight, {out, in});
  std::vector<float> bias(std::size_t(out), 0.0f);
  if (n.input_size() > 2 && !n.input(2).empty()) {
    const Constant* c = constant(n.input(2));
    if (!c || !c->isFloat || (c->values.size() != 1 && int64_t(c->values.size()) != out)) {
      refuse(n, "its bias is not a float32 initializer of the output's width");
      return -1;
    }
    for (int64_t j = 0; j < out; ++j) bias[std::size_t(j)] = c->values[c->values.size() == 1 ? 0 : std::size_t(j)];
  }
  params_[name + ".bias"] = tensorOf(bias, {out});
  if (perSample(x) != in && b_.node(x).features() != in) {
    refuse(n, "its weight does not fit its input");
    return -1;
  }
  return b_.linear(name, x, out);
}

// A product of two computed tensors, [..., M, K] x [..., K, N] with the same leading dims
// (attention's scores and values): SAVE's matmul of A and B transposed, per leading index.
void Importer::matmulActivations(const onnx::NodeProto& n) {
  const std::string name = nameOf(n);
  const std::vector<int64_t> da = dimsOf(n.input(0)), db = dimsOf(n.input(1));
  if (da.size() < 2 || db.size() != da.size() || da.back() != db[db.size() - 2] ||
      !std::equal(da.begin(), da.end() - 2, db.begin()))
    return refuse(n, "a product of two activations whose shapes are not [..., M, K] and [..., K, N] (no broadcasting)");
  const int64_t m = da[da.size() - 2], k = da.back(), nn = db.back();
  const int64_t h = countOf(std::vector<int64_t>(da.begin(), da.end() - 2));
  try {
    const int a = shaped(name + ".a", values_.at(n.input(0)), {h, m, k});
    std::vector<int64_t> gather(std::size_t(h * nn * k));
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < nn; ++j)
        for (int64_t q = 0; q < k; ++q) gather[std::size_t((i * nn + j) * k + q)] = (i * k + q) * nn + j;
    const int bt = gathered(name + ".bT", values_.at(n.input(1)), {h, nn, k}, gather);
    std::vector<int64_t> out(da.begin(), da.end() - 2);
    out.push_back(m);
    out.push_back(nn);
    setActivation(n.output(0), name, b_.matmul(name, a, bt), out);
  } catch (const SaveError& e) {
    refuse(n, e.what());
  }
}

// Add, Sub, Mul or Div of the activation `a` and `other` (an activation or a constant), with
// numpy broadcasting.
void Importer::binary(const onnx::NodeProto& n, const std::string& a, const std::string& other) {
  const std::string name = nameOf(n);
  const std::string& op = n.op_type();
  const int x = values_.at(a);
  if (isActivation(other)) return binaryActivations(n, a, other);
  const Constant* c = constant(other);
  if (!c || !c->isFloat) return refuse(n, "its constant operand is not a float32 tensor");
  if (op == "Mul" || op == "Div") return scale(n, a, x, *c);
  const Node& xn = b_.node(x);
  std::vector<int64_t> cdims = c->dims;
  while (!cdims.empty() && cdims.front() == 1 && cdims.size() > xn.shape.size()) cdims.erase(cdims.begin());
  if (op == "Sub") {  // x - c = x + (-c); c - x = (-x) + c: IEEE subtraction is the addition of the negation
    Constant negated = *c;
    if (a == n.input(0)) {
      for (float& v : negated.values) v = -v;
      return addConstant(n, x, negated, cdims);
    }
    return addConstant(n, negate(name + ".neg", x), *c, cdims);
  }
  // x + c: into a bias-free linear layer's bias (MatMul + Add, as exporters write Linear; only when
  // the Add is the MatMul's one consumer), else AddConst with the constant broadcast as numpy does
  if (foldIntoLinearBias(n, a, x, *c, cdims)) return;
  addConstant(n, x, *c, cdims);
}

// -x, exactly: x * -1 + 0 as a one-channel affine map.
int Importer::negate(const std::string& name, int x) {
  const std::vector<int64_t> shape = b_.node(x).shape;  // a copy: adding nodes moves them
  const int flat = shaped(name, x, {1, countOf(shape)});
  const int negated = b_.affine(name, flat, {-1.0f}, {0.0f});
  return shaped(name + ".shape", negated, shape);
}

// Two computed tensors: each operand broadcast to the output's shape by a Select where it is
// smaller (a squeeze-excitation gate [C, 1, 1] over [C, H, W]), then Add, Mul, or Add of the
// negation for Sub. A division by a computed tensor is refused.
void Importer::binaryActivations(const onnx::NodeProto& n, const std::string& a, const std::string& other) {
  const std::string name = nameOf(n);
  const std::string& op = n.op_type();
  if (op == "Div") return refuse(n, "a division by an activation is not mapped");
  const std::vector<int64_t> da = dimsOf(a), db = dimsOf(other);
  std::vector<int64_t> out;
  if (!broadcastDims(da, db, out)) return refuse(n, "operands whose shapes do not broadcast");
  const std::vector<int64_t> sample = sampleShape(out);
  auto operand = [&](const std::string& v, const std::vector<int64_t>& d) {
    if (d == out) return shaped(name + (v == a ? ".a" : ".b"), values_.at(v), sample);
    std::vector<int64_t> gather(std::size_t(countOf(out)));
    for (int64_t e = 0; e < countOf(out); ++e) gather[std::size_t(e)] = broadcastIndex(d, out, coordOf(e, out));
    return gathered(name + (v == a ? ".a" : ".b") + ".expand", values_.at(v), sample, std::move(gather));
  };
  try {
    const int x = operand(a, da);
    int y = operand(other, db);
    int v = -1;
    if (op == "Mul") {
      v = b_.mul(name, x, y);
    } else {
      if (op == "Sub") {
        if (a != n.input(0)) return refuse(n, "internal: a subtraction with its operands swapped");
        y = negate(name + ".neg", y);
      }
      v = b_.addNodes(name, x, y);
    }
    setActivation(n.output(0), name, v, out);
  } catch (const SaveError& e) {
    refuse(n, e.what());
  }
}

// A product with a constant, as an affine map x * s + 0: one channel for a scalar; SAVE's first
// dimension's channels for a constant that varies only along it (a layer scale [C, 1, 1] over
// [C, H, W]); else one factor per element. A division as the product with 1 / c (the same bits
// when c is a power of two, as attention's 1 / sqrt(head width) mostly is; else within one
// rounding of ONNX's quotient).
void Importer::scale(const onnx::NodeProto& n, const std::string& a, int x, const Constant& c) {
  const std::string name = nameOf(n);
  if (n.op_type() == "Div" && a != n.input(0)) return refuse(n, "a constant divided by an activation is not mapped");
  std::vector<float> f;
  if (c.values.size() == 1) {
    f = c.values;
  } else {
    const Node& xn = b_.node(x);
    std::vector<int64_t> cdims = c.dims;
    while (!cdims.empty() && cdims.front() == 1 && cdims.size() > xn.shape.size()) cdims.erase(cdims.begin());
    if (!expandConstant(n, xn.shape, c, cdims, f)) return;
  }
  for (float& v : f) {
    if (n.op_type() == "Div") v = 1.0f / v;
    if (!std::isfinite(v)) return refuse(n, "a factor that is not finite");
  }
  const int64_t size = b_.node(x).size();
  if (f.size() == 1) {
    const int flat = shaped(name, x, {1, size});
    return setActivation(n.output(0), name, b_.affine(name, flat, f, {0.0f}), dimsOf(a));
  }
  const std::vector<int64_t>& shape = b_.node(x).shape;
  const int64_t channels = shape.empty() ? 1 : shape[0], inner = size / channels;
  bool perChannel = true;  // constant along everything after SAVE's first dimension
  for (int64_t e = 0; perChannel && e < size; ++e) perChannel = f[std::size_t(e)] == f[std::size_t(e - e % inner)];
  if (perChannel) {
    std::vector<float> factors(static_cast<std::size_t>(channels));
    for (int64_t ch = 0; ch < channels; ++ch) factors[std::size_t(ch)] = f[std::size_t(ch * inner)];
    return setActivation(n.output(0), name, b_.affine(name, x, factors, std::vector<float>(factors.size(), 0.0f)), dimsOf(a));
  }
  const int flat = shaped(name, x, {size, 1});
  setActivation(n.output(0), name, b_.affine(name, flat, f, std::vector<float>(f.size(), 0.0f)), dimsOf(a));
}

// The constant (of dims `cdims`, leading 1s beyond the sample's rank dropped) broadcast to one
// sample of `shape` as numpy does; false (and the node refused) where it does not broadcast.
bool Importer::expandConstant(const onnx::NodeProto& n, const std::vector<int64_t>& shape, const Constant& c,
                              const std::vector<int64_t>& cdims, std::vector<float>& expanded) {
  if (cdims.size() > shape.size()) {
    refuse(n, "its constant has more dimensions than one sample");
    return false;
  }
  // right-aligned broadcasting: each constant dimension is 1 or the sample's
  const std::size_t offset = shape.size() - cdims.size();
  for (std::size_t i = 0; i < cdims.size(); ++i)
    if (cdims[i] != 1 && cdims[i] != shape[offset + i]) {
      refuse(n, "its constant does not broadcast to one sample");
      return false;
    }
  const int64_t size = countOf(shape);
  expanded.assign(std::size_t(size), 0.0f);
  for (int64_t e = 0; e < size; ++e) {
    int64_t rest = e, ci = 0, stride = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
      const int64_t coord = rest % shape[i];
      rest /= shape[i];
      if (i >= offset) {
        const int64_t cd = cdims[i - offset];
        ci += (cd == 1 ? 0 : coord) * stride;
        stride *= cd;
      }
    }
    expanded[std::size_t(e)] = c.values[std::size_t(ci)];
  }
  return true;
}

// x + c as AddConst, the constant (of dims `cdims`, leading 1s beyond the sample's rank dropped)
// broadcast to one sample as numpy does.
void Importer::addConstant(const onnx::NodeProto& n, int x, const Constant& c, const std::vector<int64_t>& cdims) {
  const std::string name = nameOf(n);
  const Node& xn = b_.node(x);
  std::vector<float> expanded;
  if (!expandConstant(n, xn.shape, c, cdims, expanded)) return;
  if (!maskInfinities(n, expanded)) return;
  params_[name + ".constant"] = tensorOf(expanded, xn.shape);
  values_[n.output(0)] = b_.addConst(name, x, name + ".constant");
}

}  // namespace peat::save::onnx_import
