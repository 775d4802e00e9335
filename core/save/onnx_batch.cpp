// SPDX-License-Identifier: MIT
// Whether a model exported with a fixed first dimension (torch.onnx.export at a sample batch,
// without dynamic_axes) computes each sample alone: ONNX's shape inference with that dimension
// made symbolic, then every node that reads a sample-carrying value checked for an axis that mixes
// samples (a reduction, a softmax or a normalisation over the batch, a reshape or a concatenation
// across it, a constant that fixes it). Only then may the importer read the dimension as a batch.
#include "core/save/onnx_import_detail.h"  // first: it includes onnx/checker.h first

#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace peat::save::onnx_import {

namespace {

// The first dimension is given a number no model uses (a prime past any layer's size) rather than a
// symbol: ONNX's shape inference then computes every shape, and values computed from shapes (a
// Resize's sizes from Shape, Slice and Concat, which libonnx 1.12's data propagation does not
// follow) are evaluated here (shapeValues) and put in as constants, so a dimension taken from the
// input's batch stays that number and one computed across it (B * 6) does not.
constexpr int64_t kBatch = 1000003;

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

// Where a value holds the batch: axis `at`, of size outer * B * inner (a reshape may merge the batch
// with the axes around it, as attention's [T, B * heads, d] does; the sample index is then that
// axis' middle digit).
struct Axis {
  int64_t at = -1, rank = 0, outer = 1, inner = 1;
  std::vector<int64_t> dims;  // -1 where not a number
  bool plain() const { return outer == 1 && inner == 1; }
};

// Every dimension before the batch is 1, and the batch is its axis alone: the samples are
// contiguous blocks in row-major order.
bool leadingOnes(const Axis& a) {
  for (int64_t i = 0; i < a.at; ++i)
    if (a.dims[std::size_t(i)] != 1) return false;
  return a.plain();
}

// A row-major reshape keeps every element's flat index. The batch of `x` is the flat index' digit
// of stride s = inner * (the sizes after its axis) and radix B; in `y` it must be the same digit of
// the axis found there: the sizes after that axis divide s, and the axis' size holds s * B whole.
// Fills y's outer and inner; false when the reshape spreads the batch over axes.
bool reshapedBatch(const Axis& x, Axis& y) {
  auto after = [](const Axis& a) {
    int64_t p = 1;
    for (std::size_t i = std::size_t(a.at) + 1; i < a.dims.size(); ++i) {
      if (a.dims[i] <= 0) return int64_t(-1);
      p *= a.dims[i];
    }
    return p;
  };
  const int64_t sx = after(x), sy = after(y);
  if (sx <= 0 || sy <= 0) return false;
  const int64_t stride = x.inner * sx;
  if (stride % sy != 0) return false;
  const int64_t inner = stride / sy, size = y.dims[std::size_t(y.at)];
  if (size % (inner * kBatch) != 0) return false;
  y.inner = inner;
  y.outer = size / (inner * kBatch);
  return true;
}

// The batch-generic form of a Reshape's constant target `t` traced at the fixed batch N: the one
// entry N * r that, read as B * r, keeps every sample of `x` a digit of its own (reshapedBatch),
// with 0s (copies of x's sizes) resolved; empty when no entry does, or when more than one could.
std::vector<int64_t> genericTarget(const Axis& x, std::vector<int64_t> t, int64_t fixed, bool allowzero) {
  if (t.empty() || fixed < 2) return {};
  int64_t total = 1;
  for (int64_t d : x.dims) {
    if (d <= 0 || total > (int64_t(1) << 62) / d) return {};
    total *= d;
  }
  for (std::size_t i = 0; i < t.size(); ++i)
    if (t[i] == 0) {
      if (allowzero || i >= x.dims.size()) return {};
      t[i] = x.dims[i];
    }
  std::vector<int64_t> found;
  for (std::size_t j = 0; j < t.size(); ++j) {
    if (t[j] <= 0 || t[j] % fixed != 0) continue;
    std::vector<int64_t> tt = t;
    tt[j] = t[j] / fixed * kBatch;
    int64_t known = 1, unknown = 0;
    for (int64_t v : tt) {
      if (v == -1) {
        ++unknown;
        continue;
      }
      if (v <= 0 || known > (int64_t(1) << 62) / v) return {};
      known *= v;
    }
    if (unknown > 1 || total % known != 0 || (unknown == 0 && known != total)) continue;
    Axis y;
    y.at = int64_t(j);
    y.rank = int64_t(tt.size());
    y.dims = tt;
    int multiples = 0;
    for (int64_t& v : y.dims) {
      if (v == -1) v = total / known;
      multiples += v % kBatch == 0;
    }
    if (multiples != 1 || !reshapedBatch(x, y)) continue;
    if (!found.empty()) return {};  // two readings: neither is taken
    found = tt;
  }
  return found;
}

}  // namespace

std::string Importer::mixesSamples(const std::vector<std::string>& inputs) {
  onnx::ModelProto m = model_;
  onnx::GraphProto* g0 = m.mutable_graph();
  g0->clear_value_info();
  for (auto& in : *g0->mutable_input())
    if (std::find(inputs.begin(), inputs.end(), in.name()) != inputs.end())
      in.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(kBatch);
  for (auto& out : *g0->mutable_output()) out.mutable_type()->mutable_tensor_type()->clear_shape();
  // A Reshape to a constant target traced at the fixed batch N (`x.view(x.size(0), -1)`, attention's
  // `view(T, N * heads, d)`) is rewritten to the batch-generic target: in the check's copy with
  // B * r where the target holds N * r, in the model with r (the importer runs one sample). The
  // copy is checked again from the start; the model is rewritten only when the whole check passes
  // (a model read as one sample keeps its targets).
  struct Patch {
    int node;
    std::vector<int64_t> target;
  };
  std::vector<Patch> patches;
  for (int round = 0; round < 256; ++round) {
    int patched = -1;
    std::vector<int64_t> target, generic;
    const std::string why = sampleCheck(m, inputs, patched, target);
    if (patched < 0) {
      if (!why.empty()) return why;
      for (std::size_t k = 0; k < patches.size(); ++k) {
        const std::string name = "peat_batch_reshape_" + std::to_string(k);
        putReshapeTarget(model_, patches[k].node, name, patches[k].target);
        constants_[name] = Constant{{int64_t(patches[k].target.size())}, {}, patches[k].target, false};
      }
      return "";
    }
    putReshapeTarget(m, patched, "peat_batch_check_reshape_" + std::to_string(round), target);
    for (int64_t& v : target)
      if (v > 0 && v % kBatch == 0) v /= kBatch;  // B * r -> r: one sample
    patches.push_back({patched, target});
  }
  return "more than 256 reshapes fix the batch";
}

void Importer::putReshapeTarget(onnx::ModelProto& m, int node, const std::string& name,
                                const std::vector<int64_t>& target) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::INT64);
  t.add_dims(int64_t(target.size()));
  for (int64_t v : target) t.add_int64_data(v);
  *m.mutable_graph()->add_initializer() = t;
  onnx::NodeProto* reshape = m.mutable_graph()->mutable_node(node);
  reshape->set_input(reshape->op_type() == "Resize" ? 3 : 1, name);  // a Reshape's target, a Resize's sizes
  for (auto& a : *reshape->mutable_attribute())
    if (a.name() == "allowzero") a.set_i(0);
}

namespace {

// A small integer tensor computed from shapes (a scalar or a 1-D list), and its element type.
struct ShapeValue {
  std::vector<int64_t> v, dims;
  int type = onnx::TensorProto::INT64;
};

// The value of `n`'s output from its inputs' values, for the ops that compute shapes in exported
// models; nullopt where an input is not known or the op is not one of them. Integer arithmetic as
// ONNX defines it (Div truncates), and only over lists of at most 64 entries.
std::optional<ShapeValue> evaluate(const onnx::NodeProto& n, const std::vector<const ShapeValue*>& in, int64_t opset) {
  const std::string& op = n.op_type();
  for (const ShapeValue* x : in) {  // every operand at most 64 values, its dims >= 0 and holding them
    if (!x || x->v.size() > 64) return std::nullopt;
    uint64_t count = 1;
    for (int64_t d : x->dims)
      if (d < 0 || (count *= uint64_t(d)) > 64) return std::nullopt;
    if (count != x->v.size()) return std::nullopt;
  }
  if (in.empty()) return std::nullopt;
  const ShapeValue& a = *in[0];
  ShapeValue out;
  out.type = a.type;
  if (op == "Identity" || op == "Cast") {
    out = a;
    if (op == "Cast") {
      out.type = int(intAttribute(n, "to", 0));
      if (out.type != onnx::TensorProto::INT64 && out.type != onnx::TensorProto::INT32) return std::nullopt;
    }
    return out;
  }
  if (op == "Gather" && in.size() == 2 && a.dims.size() == 1 && intAttribute(n, "axis", 0) == 0) {
    const int64_t size = int64_t(a.v.size());
    for (int64_t i : in[1]->v) {
      const int64_t k = i < 0 ? i + size : i;
      if (k < 0 || k >= size) return std::nullopt;
      out.v.push_back(a.v[std::size_t(k)]);
    }
    out.dims = in[1]->dims;
    return out;
  }
  if (op == "Slice" && !a.dims.empty() && in.size() >= 3 && opset >= 10) {  // along one axis, any step
    if (in[1]->v.size() != 1 || in[2]->v.size() != 1) return std::nullopt;
    const int64_t rank = int64_t(a.dims.size());
    int64_t axis = in.size() > 3 ? (in[3]->v.size() == 1 ? in[3]->v[0] : rank) : 0;
    axis = axis < 0 ? axis + rank : axis;
    const int64_t step = in.size() > 4 ? (in[4]->v.size() == 1 ? in[4]->v[0] : 0) : 1;
    if (axis < 0 || axis >= rank || step == 0 || step > 64 || step < -64 || (in.size() <= 3 && rank != 1))
      return std::nullopt;
    const int64_t size = a.dims[std::size_t(axis)];
    int64_t inner = 1, outer = 1;
    for (int64_t k = axis + 1; k < rank; ++k) inner *= a.dims[std::size_t(k)];
    for (int64_t k = 0; k < axis; ++k) outer *= a.dims[std::size_t(k)];
    // ONNX's clamping: [0, size] for a positive step, [-1, size - 1] for a negative one
    auto at = [&](int64_t i, bool forward) {
      const int64_t k = i < 0 ? i + size : i;
      return forward ? std::clamp(k, int64_t(0), size) : std::clamp(k, int64_t(-1), size - 1);
    };
    std::vector<int64_t> picked;
    for (int64_t i = at(in[1]->v[0], step > 0); step > 0 ? i < at(in[2]->v[0], true) : i > at(in[2]->v[0], false); i += step)
      picked.push_back(i);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i : picked)
        for (int64_t k = 0; k < inner; ++k) out.v.push_back(a.v[std::size_t((o * size + i) * inner + k)]);
    out.dims = a.dims;
    out.dims[std::size_t(axis)] = int64_t(picked.size());
    return out;
  }
  if (op == "Reshape" && in.size() == 2) {  // the same values, new dims (0 copies, -1 fills)
    out = a;
    out.dims = in[1]->v;
    int64_t known = 1, fill = -1;
    for (std::size_t k = 0; k < out.dims.size(); ++k) {
      if (out.dims[k] == 0 && k < a.dims.size()) out.dims[k] = a.dims[k];
      if (out.dims[k] == -1) fill = int64_t(k);
      else if (out.dims[k] > 0) known *= out.dims[k];
      else return std::nullopt;
    }
    if (fill >= 0) {
      if (known == 0 || int64_t(a.v.size()) % known != 0) return std::nullopt;
      out.dims[std::size_t(fill)] = int64_t(a.v.size()) / known;
    } else if (known != int64_t(a.v.size())) {
      return std::nullopt;
    }
    return out;
  }
  if (op == "Transpose" && a.dims.size() == 2) {  // [r, c] -> [c, r] (the only 2-D permutation but identity)
    const std::vector<int64_t> perm = [&] {
      for (const auto& attr : n.attribute())
        if (attr.name() == "perm") return std::vector<int64_t>(attr.ints().begin(), attr.ints().end());
      return std::vector<int64_t>{1, 0};
    }();
    if (perm == std::vector<int64_t>{0, 1}) return a;
    if (perm != std::vector<int64_t>{1, 0}) return std::nullopt;
    const int64_t r = a.dims[0], c = a.dims[1];
    for (int64_t j = 0; j < c; ++j)
      for (int64_t i = 0; i < r; ++i) out.v.push_back(a.v[std::size_t(i * c + j)]);
    out.dims = {c, r};
    return out;
  }
  if (op == "ConstantOfShape" && a.dims.size() == 1) {  // an integer fill (its value attribute, 0 by default)
    int64_t fill = 0, count = 1;
    for (const auto& attr : n.attribute())
      if (attr.name() == "value" && attr.has_t()) {
        const auto& t = attr.t();
        if (t.data_type() == onnx::TensorProto::INT64 && t.int64_data_size() == 1) fill = t.int64_data(0);
        else if (t.data_type() == onnx::TensorProto::INT64 && t.raw_data().size() == 8) std::memcpy(&fill, t.raw_data().data(), 8);
        else return std::nullopt;
        out.type = onnx::TensorProto::INT64;
      }
    for (int64_t d : a.v) {
      if (d < 0 || (d > 0 && count > 64 / d)) return std::nullopt;
      count *= d;
    }
    out.v.assign(std::size_t(count), fill);
    out.dims = a.v;
    out.type = onnx::TensorProto::INT64;
    return out;
  }
  if (op == "Concat") {
    for (const ShapeValue* x : in) {
      if (x->dims.size() != 1) return std::nullopt;
      out.v.insert(out.v.end(), x->v.begin(), x->v.end());
    }
    out.dims = {int64_t(out.v.size())};
    return out;
  }
  if (op == "Unsqueeze" || op == "Squeeze") {  // a scalar to [1] and back (axes 0)
    out = a;
    if (op == "Unsqueeze" && a.dims.empty()) out.dims = {1};
    else if (op == "Squeeze" && a.dims == std::vector<int64_t>{1}) out.dims = {};
    else return std::nullopt;
    return out;
  }
  if (op == "Where" && in.size() == 3) {  // cond ? x : y, element by element (a scalar broadcast)
    const ShapeValue &x = *in[1], &y = *in[2];
    std::size_t size = 1;
    for (const ShapeValue* v : in) size = std::max(size, v->v.size());
    const ShapeValue* widest = in[0];
    for (const ShapeValue* v : in)
      if (v->v.size() > widest->v.size()) widest = v;
    for (const ShapeValue* v : in)  // equal dims, or one value (ONNX's broadcasting otherwise: not evaluated)
      if (v->v.empty() || (v->v.size() != 1 && v->dims != widest->dims) || v->dims.size() > widest->dims.size())
        return std::nullopt;
    const auto at = [&](const ShapeValue& v, std::size_t i) { return v.v[v.v.size() == 1 ? 0 : i]; };
    for (std::size_t i = 0; i < size; ++i) out.v.push_back(at(a, i) != 0 ? at(x, i) : at(y, i));
    for (const ShapeValue* v : in)
      if (v->v.size() == size) out.dims = v->dims;
    out.type = x.type;
    return out;
  }
  static const std::set<std::string> arithmetic{"Add", "Sub", "Mul", "Div", "Mod", "Equal"};
  if (arithmetic.count(op) && in.size() == 2) {
    const ShapeValue& b = *in[1];
    const bool aOne = a.v.size() == 1 && a.dims.size() <= 1, bOne = b.v.size() == 1 && b.dims.size() <= 1;
    if (a.v.empty() || b.v.empty()) return std::nullopt;
    if (!aOne && !bOne && a.dims != b.dims) return std::nullopt;  // ONNX's broadcasting of two shapes: not evaluated
    out.dims = a.v.size() >= b.v.size() ? (a.dims.size() >= b.dims.size() ? a.dims : b.dims) : b.dims;
    for (std::size_t i = 0; i < std::max(a.v.size(), b.v.size()); ++i) {
      const int64_t x = a.v[aOne ? 0 : i], y = b.v[bOne ? 0 : i];
      if ((op == "Div" || op == "Mod") && y == 0) return std::nullopt;
      if (op == "Mod" && intAttribute(n, "fmod", 0) != 0) return std::nullopt;
      constexpr int64_t kLimit = int64_t(1) << 30;  // no overflow
      if (x > kLimit || x < -kLimit || y > kLimit || y < -kLimit) return std::nullopt;
      const int64_t m = op == "Mod" ? x % y : 0;  // Mod: the sign of the divisor, as Python's
      out.v.push_back(op == "Equal" ? int64_t(x == y)
                      : op == "Add" ? x + y
                      : op == "Sub" ? x - y
                      : op == "Mul" ? x * y
                      : op == "Div" ? x / y
                                    : (m != 0 && (m < 0) != (y < 0) ? m + y : m));
    }
    if (op == "Equal") out.type = onnx::TensorProto::BOOL;
    return out;
  }
  return std::nullopt;
}

}  // namespace

// Evaluates the values computed from shapes (Shape, then the ops of `evaluate`) over the inferred
// shapes of `m`, and gives each reader of a value so computed that constant instead (in `m`, the
// check's copy). True when a reader was given one.
bool Importer::putShapeValues(onnx::ModelProto& m) const {
  onnx::GraphProto* g = m.mutable_graph();
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto* list : {&g->input(), &g->value_info(), &g->output()})
    for (const auto& v : *list) {
      if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) continue;
      std::vector<int64_t> d;
      bool known = true;
      for (const auto& dim : v.type().tensor_type().shape().dim()) {
        known = known && dim.has_dim_value();
        d.push_back(dim.dim_value());
      }
      if (known) shapes[v.name()] = d;
    }
  std::map<std::string, ShapeValue> values, computed;
  for (const auto& t : g->initializer())
    if (const Constant* c = constant(t.name()); c && !c->isFloat && c->integers.size() <= 64)
      values[t.name()] = ShapeValue{c->integers, c->dims, t.data_type()};
  for (const auto& [name, c] : constants_)
    if (!c.isFloat && c.integers.size() <= 64 && !values.count(name)) values[name] = ShapeValue{c.integers, c.dims};
  for (const onnx::NodeProto& n : g->node()) {
    if (n.output_size() != 1 || values.count(n.output(0))) continue;
    std::optional<ShapeValue> v;
    if (n.op_type() == "Constant") {  // a small integer tensor (the exporter's [N, -1, -1] and the like)
      for (const auto& attr : n.attribute()) {
        if (attr.name() != "value" || !attr.has_t()) continue;
        const onnx::TensorProto& t = attr.t();
        ShapeValue c{{}, std::vector<int64_t>(t.dims().begin(), t.dims().end()), t.data_type()};
        if (t.data_type() == onnx::TensorProto::INT64 && t.int64_data_size() > 0 && t.int64_data_size() <= 64)
          c.v.assign(t.int64_data().begin(), t.int64_data().end());
        else if (t.data_type() == onnx::TensorProto::INT64 && !t.raw_data().empty() && t.raw_data().size() <= 512 &&
                 t.raw_data().size() % 8 == 0) {
          c.v.resize(t.raw_data().size() / 8);
          std::memcpy(c.v.data(), t.raw_data().data(), t.raw_data().size());
        }
        int64_t count = 1;
        for (int64_t d : c.dims) count *= d;
        if (!c.v.empty() && int64_t(c.v.size()) == count) v = c;
      }
    } else if (n.op_type() == "Shape" && n.input_size() == 1) {
      auto it = shapes.find(n.input(0));
      if (it == shapes.end()) continue;
      const int64_t rank = int64_t(it->second.size());
      auto clampAt = [&](int64_t i) { return std::clamp(i < 0 ? i + rank : i, int64_t(0), rank); };
      const int64_t first = clampAt(intAttribute(n, "start", 0)), last = clampAt(intAttribute(n, "end", rank));
      v = ShapeValue{};
      for (int64_t i = first; i < last; ++i) v->v.push_back(it->second[std::size_t(i)]);
      v->dims = {int64_t(v->v.size())};
    } else {
      std::vector<const ShapeValue*> in;
      for (const auto& name : n.input()) {
        auto it = name.empty() ? values.end() : values.find(name);
        in.push_back(it == values.end() ? nullptr : &it->second);
      }
      v = evaluate(n, in, opset_);
    }
    if (!v) continue;
    values[n.output(0)] = *v;
    computed[n.output(0)] = *v;
  }
  bool put = false;
  for (int i = 0; i < g->node_size(); ++i) {
    onnx::NodeProto* n = g->mutable_node(i);
    for (int k = 0; k < n->input_size(); ++k) {
      auto it = computed.find(n->input(k));
      if (it == computed.end()) continue;
      const std::string name = "peat_shape_value_" + n->input(k);
      bool exists = false;
      for (const auto& t : g->initializer()) exists = exists || t.name() == name;
      if (!exists) {
        onnx::TensorProto t;
        t.set_name(name);
        t.set_data_type(it->second.type);
        for (int64_t d : it->second.dims) t.add_dims(d);
        for (int64_t x : it->second.v)
          if (it->second.type == onnx::TensorProto::INT32 || it->second.type == onnx::TensorProto::BOOL)
            t.add_int32_data(int32_t(x));  // bool's field too
          else
            t.add_int64_data(x);
        *g->add_initializer() = t;
      }
      n->set_input(k, name);
      put = true;
    }
  }
  return put;
}

std::string Importer::sampleCheck(onnx::ModelProto m, const std::vector<std::string>& inputs, int& patched,
                                  std::vector<int64_t>& target) const {
  onnx::GraphProto* g = m.mutable_graph();
  const int64_t fixed = [&] {  // the inputs' fixed first dimension (input() checked that they agree)
    for (const auto& in : model_.graph().input())
      if (in.name() == inputs.front()) return in.type().tensor_type().shape().dim(0).dim_value();
    return int64_t(0);
  }();
  for (int pass = 0;; ++pass) {  // shapes, then the values computed from them, until nothing new is known
    g->clear_value_info();
    try {
      // without libonnx's own data propagation: putShapeValues evaluates those values, and 1.12's
      // propagation crashes on some models once their dimensions are numbers (Swin-T's Shape)
      onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(),
                                         onnx::ShapeInferenceOptions(false, 0, false));
    } catch (const std::exception& e) {
      std::string what = e.what();
      return "ONNX's shape inference with a marked first dimension fails (" + what.substr(0, what.find('\n')) + ")";
    }
    if (pass == 256 || !putShapeValues(m)) break;
  }
  std::map<std::string, const onnx::TypeProto*> types;
  for (const auto& v : g->input()) types[v.name()] = &v.type();
  for (const auto& v : g->value_info()) types[v.name()] = &v.type();
  for (const auto& v : g->output()) types[v.name()] = &v.type();
  // the integers of a constant input (Slice's axes, CumSum's axis); empty where not constant
  const auto constantInts = [&](const std::string& name) -> std::vector<int64_t> {
    if (const Constant* c = constant(name)) return c->integers;
    for (const auto& t : g->initializer())  // a value putShapeValues computed (int64_data or int32_data)
      if (t.name() == name) {
        std::vector<int64_t> v(t.int64_data().begin(), t.int64_data().end());
        v.insert(v.end(), t.int32_data().begin(), t.int32_data().end());
        return v;
      }
    return {};
  };
  std::map<std::string, Axis> batch;
  for (const std::string& input : inputs) batch[input] = {};
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
      const int64_t d = a.dims.back();
      if (d > 0 && d % kBatch == 0) {  // B, or the batch merged with other axes (kBatch is past any layer's size)
        a.at = i;
        a.inner = d / kBatch;  // outer and inner as one until the op that made it says which
        ++count;
      }
    }
    if (count != 1) return count == 0 ? "the batch dimension does not come through it" : "it pairs samples with samples";
    return "";
  };
  for (const std::string& input : inputs)
    if (std::string why = axisOfValue(input, batch[input]); !why.empty()) return "input '" + input + "': " + why;
  // a value's dims: a constant's, else the inferred ones (-1 where unknown); nullopt where nothing is known
  const auto dimsOf = [&](const std::string& v) -> std::optional<std::vector<int64_t>> {
    if (const Constant* c = constant(v)) return c->dims;
    for (const auto& t : g->initializer())
      if (t.name() == v) return std::vector<int64_t>(t.dims().begin(), t.dims().end());
    auto t = types.find(v);
    if (t == types.end() || !t->second->tensor_type().has_shape()) return std::nullopt;
    std::vector<int64_t> d;
    for (const auto& dim : t->second->tensor_type().shape().dim()) d.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
    return d;
  };
  std::map<std::string, int> producer;  // which node computes a value
  for (int index = 0; index < g->node_size(); ++index)
    for (const auto& o : g->node(index).output()) producer[o] = index;
  // An Expand of a sample-independent value (size 1 at the batch's axis) to a constant shape traced
  // at the fixed batch (ViT's class_token.expand(N, -1, -1)), read by a node whose samples sit on
  // axis `a`: patched (`patched`, `target`) to expand to the batch instead. False where `v` is no such
  // value.
  int patchedAt = -1;
  std::vector<int64_t> patchTarget;
  const auto expandPatch = [&](const std::string& v, const Axis& a) {
    const auto p = producer.find(v);
    if (p == producer.end() || g->node(p->second).op_type() != "Expand") return false;
    const onnx::NodeProto& e = g->node(p->second);
    int readers = 0;  // the expanded value read by one node only (another could reduce over its copies)
    for (const onnx::NodeProto& r : g->node())
      for (const auto& i : r.input()) readers += i == v;
    for (const auto& o : g->output()) readers += o.name() == v;
    if (readers != 1) return false;
    std::vector<int64_t> shape = constantInts(e.input(1));
    const auto data = dimsOf(e.input(0));
    const int64_t at = int64_t(shape.size()) - (a.rank - a.at);
    if (!data || at < 0 || at >= int64_t(shape.size()) || shape[std::size_t(at)] != fixed) return false;
    const int64_t atData = int64_t(data->size()) - (int64_t(shape.size()) - at);
    if (atData >= 0 && (*data)[std::size_t(atData)] != 1) return false;
    shape[std::size_t(at)] = kBatch;
    patchedAt = p->second;
    patchTarget = shape;
    return true;
  };
  for (int index = 0; index < g->node_size(); ++index) {
    const onnx::NodeProto& n = g->node(index);
    const std::string& op = n.op_type();
    std::vector<std::pair<int, Axis>> in;  // sample-carrying inputs
    for (int i = 0; i < n.input_size(); ++i)
      if (auto it = batch.find(n.input(i)); it != batch.end()) in.push_back({i, it->second});
    // The batch size as a number (a value computed from Shape: the constants put in hold multiples
    // of kBatch) may shape things and be computed on as integers; read as data it would be N in the
    // model and 1 in SAVE's one-sample graph (x * x.shape[0], a Range over the batch, a Tile by it)
    for (int i = 0; i < n.input_size(); ++i) {
      if (n.input(i).empty() || batch.count(n.input(i))) continue;
      const std::vector<int64_t> v = constantInts(n.input(i));
      if (std::none_of(v.begin(), v.end(), [](int64_t e) { return e != 0 && e % kBatch == 0; })) continue;
      static const std::map<std::string, std::set<int>> shapeInputs{
          {"Reshape", {1}}, {"Expand", {1}}, {"ConstantOfShape", {0}}, {"Resize", {1, 2, 3}}, {"Upsample", {1}},
          {"Slice", {1, 2, 3, 4}}, {"Pad", {1}}, {"Unsqueeze", {1}}, {"Squeeze", {1}}, {"Split", {1}}};
      static const std::set<std::string> integerOps{"Gather", "Slice", "Concat", "Unsqueeze", "Squeeze", "Cast",
                                                    "Identity", "Add", "Sub", "Mul", "Div", "Mod", "Equal", "Where",
                                                    "Reshape", "Shape", "Size"};
      const auto shape = shapeInputs.find(op);
      if (shape != shapeInputs.end() && shape->second.count(i)) continue;
      const int64_t to = intAttribute(n, "to", onnx::TensorProto::INT64);
      if (in.empty() && integerOps.count(op) &&
          !(op == "Cast" && to != onnx::TensorProto::INT64 && to != onnx::TensorProto::INT32))
        continue;
      return "node '" + (n.name().empty() ? n.output(0) : n.name()) + "' (" + op + ") reads the batch size as a number";
    }
    if (in.empty() || op == "Shape" || op == "Size") continue;  // constants, or the batch as a number
    const std::string where = "node '" + (n.name().empty() ? n.output(0) : n.name()) + "' (" + op + ")";
    std::vector<Axis> out;
    for (const auto& o : n.output()) {
      if (o.empty()) continue;
      Axis a;
      std::string why = axisOfValue(o, a);
      const Axis& x = in.front().second;
      const bool reshape = (op == "Reshape" || op == "Flatten") && in.front().first == 0;
      if (why.empty() && reshape && !reshapedBatch(x, a)) why = "it reshapes across the batch axis";
      if (!why.empty()) {
        if (op == "Concat" || elementwise().count(op))  // joined with an Expand traced at the fixed batch?
          for (int i = 0; i < n.input_size(); ++i)
            if (!batch.count(n.input(i)) && !n.input(i).empty() && expandPatch(n.input(i), x)) {
              patched = patchedAt;
              target = patchTarget;
              return "";
            }
        if (op == "Reshape" && in.front().first == 0) {  // a target traced at the fixed batch?
          const std::vector<int64_t> generic =
              genericTarget(x, constantInts(n.input(1)), fixed, intAttribute(n, "allowzero", 0) != 0);
          if (!generic.empty()) {
            patched = index;
            target = generic;
            return "";
          }
        }
        // a Resize to constant sizes traced at the fixed batch ([N, C, H, W]: the dynamo exporter's
        // F.interpolate) of a batch-first value: the batch's own size instead
        if (op == "Resize" && in.front().first == 0 && x.at == 0 && x.plain() && n.input_size() > 3) {
          std::vector<int64_t> sizes = constantInts(n.input(3));
          if (sizes.size() == std::size_t(x.rank) && sizes[0] == fixed) {
            sizes[0] = kBatch;
            patched = index;
            target = sizes;
            return "";
          }
        }
        return where + ": " + why;
      }
      if (!reshape) {
        if (a.inner != x.outer * x.inner) return where + " merges the batch with another axis";
        a.outer = x.outer;
        a.inner = x.inner;
      }
      batch[o] = a;
      out.push_back(a);
    }
    for (const auto& [i, a] : in)
      if (a.outer != in.front().second.outer || a.inner != in.front().second.inner)
        return where + " pairs samples laid out differently";
    if (out.empty()) continue;
    const Axis& x = in.front().second;
    const Axis& y = out.front();
    const auto mixes = [&](const std::string& why) { return where + " " + why; };
    // a value that does not come from the input, at the batch's axis: 1 (broadcast), or computed
    // from the batch (a constant expanded to it); another size was traced at the fixed batch
    // (an Expand of a sample-independent value to a constant shape traced at the fixed batch, ViT's
    // class_token.expand(N, -1, -1), is patched to expand to the batch instead: `patched`)
    const auto tracedAtFixed = [&](bool oneIsFine) {
      for (int i = 0; i < n.input_size(); ++i) {
        if (batch.count(n.input(i)) || n.input(i).empty()) continue;
        const auto known = dimsOf(n.input(i));
        if (!known) return true;  // nothing known of it
        const std::vector<int64_t>& d = *known;
        const int64_t k = int64_t(d.size()) - (y.rank - y.at);  // aligned from the right
        if (k < 0) continue;  // broadcast over the batch axis
        const int64_t size = d[std::size_t(k)];
        if (!(size > 0 && size % kBatch == 0) && !(oneIsFine && size == 1)) {
          if (size == fixed && expandPatch(n.input(i), y)) return false;
          return true;
        }
      }
      return false;
    };
    if (elementwise().count(op)) {
      for (const auto& [i, a] : in)  // broadcasting aligns from the right
        if (y.rank - a.rank + a.at != y.at) return mixes("broadcasts one sample against another");
      if (tracedAtFixed(true)) return mixes("combines the samples with a tensor traced at the fixed batch");
      if (patchedAt >= 0) return patched = patchedAt, target = patchTarget, "";
    } else if (axisMoves().count(op) || reduction(op)) {
      // where the batch goes is in the inferred shape, checked above
    } else if (op == "Gather") {
      if (in.front().first == 0 && axisOf(intAttribute(n, "axis", 0), std::size_t(x.rank)) == x.at)
        return mixes("gathers along the batch axis");
    } else if (channelsFirst().count(op)) {
      if (in.front().first != 0 || x.at != 0 || y.at != 0 || !x.plain() || !y.plain())
        return mixes("reads the batch as another axis");
      if (op == "BatchNormalization" && intAttribute(n, "training_mode", 0) != 0)
        return mixes("normalises with batch statistics (training mode)");
      for (const auto& a : n.attribute())  // a crop box may reach across samples
        if (op == "Resize" && a.name() == "coordinate_transformation_mode" && a.s() == "tf_crop_and_resize")
          return mixes("crops and resizes with a box that may span the batch axis (tf_crop_and_resize)");
    } else if (op == "RNN" || op == "GRU" || op == "LSTM") {  // X [seq, batch, in] (layout 1: [batch, seq, in])
      if (in.front().first != 0 || !x.plain() || x.at != (intAttribute(n, "layout", 0) == 0 ? 1 : 0))
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
      if (in.front().first != 0) return mixes("reshapes by a shape computed from the samples");
    } else if (op == "Concat" || op == "Split") {
      for (const auto& [i, a] : in)
        if (axisOf(intAttribute(n, "axis", 0), std::size_t(a.rank)) == a.at) return mixes("joins or splits along the batch axis");
      if (op == "Concat" && tracedAtFixed(false)) return mixes("joins the samples with a tensor traced at the fixed batch");
      if (patchedAt >= 0) return patched = patchedAt, target = patchTarget, "";
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
