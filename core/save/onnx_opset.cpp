// SPDX-License-Identifier: MIT
// ONNX as current exporters write it (opsets 18 to 24) lowered to opset 17, the newest Debian's
// libonnx 1.12 checks: for a float model most version bumps only add types (fp8, int4, bfloat16
// where it was missing; 22-24: bfloat16, float4e2m1, int4, float8e8m0), so the node is the same at
// 17 (onnx.defs says so: every op bumped in 22-24 keeps its attributes and inputs, Cast's and
// CastLike's round_mode and the quantisers aside, which the importer refuses by name). The signature changes are rewritten:
//  - Reduce* (18; ReduceSum since 13): axes as an input -> the attribute, when it is a constant;
//  - Split (18): num_outputs -> no attribute (opset 13-17 splits into equal parts, one per output);
//  - Pad (18): axes as an input -> refused unless absent; Pad (19) mode wrap -> refused;
//  - Resize (18, 19): antialias, axes, keep_aspect_ratio_policy at their defaults are dropped;
//  - AveragePool (19): dilations of 1 are dropped;
//  - Gelu (20): written out as ONNX's own definition, 0.5 x (1 + erf(x / sqrt 2)) (the importer's
//    erf pattern maps it), or with approximate="tanh" as its tanh form;
// and the IR version comes down to 8. Anything else new is refused by name, never misread.
#include "core/save/onnx_import_detail.h"  // first: it includes onnx/checker.h first

#include <cmath>
#include <cstring>

namespace peat::save::onnx_import {

namespace {

bool isDefaultDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// Ops whose opset 18-21 versions differ from 17 in more than the types they take, and how.
const std::set<std::string>& reduceWithAxesInput() {
  static const std::set<std::string> ops{"ReduceL1",  "ReduceL2",  "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
                                         "ReduceMean", "ReduceMin", "ReduceProd",   "ReduceSumSquare"};
  return ops;
}

// Ops new in opsets 18-21: there is no opset-17 node to lower them to (Gelu aside).
const std::set<std::string>& newOps() {
  static const std::set<std::string> ops{"BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor", "CenterCropPad",
                                         "Col2Im", "GroupNormalization", "OptionalGetElement", "OptionalHasElement",
                                         "DeformConv", "AffineGrid", "ImageDecoder", "RegexFullMatch", "StringConcat",
                                         "StringSplit", "DFT", "QLinearMatMul",
                                         // new in 23 and 24
                                         "Attention", "RMSNormalization", "RotaryEmbedding", "Swish", "TensorScatter"};
  return ops;
}

std::vector<int64_t> int64Values(const onnx::TensorProto& t) {
  std::vector<int64_t> v(t.int64_data().begin(), t.int64_data().end());
  if (v.empty() && t.has_raw_data()) {
    v.resize(t.raw_data().size() / sizeof(int64_t));
    std::memcpy(v.data(), t.raw_data().data(), v.size() * sizeof(int64_t));
  }
  return v;
}

class Lowering {
 public:
  Lowering(onnx::ModelProto& m, const std::string& path) : m_(m), path_(path) {
    for (const onnx::TensorProto& t : m.graph().initializer()) initializers_[t.name()] = &t;
    for (const onnx::NodeProto& n : m.graph().node())
      if (n.op_type() == "Constant" && n.output_size() == 1)
        for (const onnx::AttributeProto& a : n.attribute())
          if (a.name() == "value" && a.has_t()) constants_[n.output(0)] = &a.t();
  }

  void run() {
    onnx::GraphProto& g = *m_.mutable_graph();
    std::vector<onnx::NodeProto> out;
    for (onnx::NodeProto& n : *g.mutable_node()) {
      if (!isDefaultDomain(n.domain())) {
        out.push_back(n);
        continue;
      }
      if (newOps().count(n.op_type()))
        refuse(n, "is an opset 18-24 operator with no opset-17 form");
      if (n.op_type() == "Gelu") {
        writeGelu(n, out);
        continue;
      }
      if (reduceWithAxesInput().count(n.op_type())) axesInputToAttribute(n);
      else if (n.op_type() == "Split") dropAttribute(n, "num_outputs");
      else if (n.op_type() == "Pad") lowerPad(n);
      else if (n.op_type() == "Resize") lowerResize(n);
      else if (n.op_type() == "AveragePool") dropDefault(n, "dilations", 1);
      out.push_back(n);
    }
    g.clear_node();
    for (onnx::NodeProto& n : out) *g.add_node() = std::move(n);
    for (onnx::TensorProto& t : extra_) *g.add_initializer() = std::move(t);
    for (auto& op : *m_.mutable_opset_import())
      if (isDefaultDomain(op.domain())) op.set_version(kNewestOpset);
    if (m_.ir_version() > 8) m_.set_ir_version(8);
  }

 private:
  [[noreturn]] void refuse(const onnx::NodeProto& n, const std::string& why) const {
    throw SaveError("ONNX model '" + path_ + "': " + n.op_type() + " '" + n.name() + "' " + why +
                    "; export with torch.onnx.export(..., opset_version=17)");
  }

  const onnx::TensorProto* constant(const std::string& name) const {
    if (auto it = initializers_.find(name); it != initializers_.end()) return it->second;
    if (auto it = constants_.find(name); it != constants_.end()) return it->second;
    return nullptr;
  }

  static void dropAttribute(onnx::NodeProto& n, const std::string& name) {
    auto* attrs = n.mutable_attribute();
    for (int i = attrs->size(); i-- > 0;)
      if (attrs->Get(i).name() == name) attrs->DeleteSubrange(i, 1);
  }

  void dropDefault(onnx::NodeProto& n, const std::string& name, int64_t neutral) const {
    for (const onnx::AttributeProto& a : n.attribute())
      if (a.name() == name)
        for (int64_t v : a.ints())
          if (v != neutral) refuse(n, "has " + name + " other than " + std::to_string(neutral) + " (opset 19)");
    dropAttribute(n, name);
  }

  void axesInputToAttribute(onnx::NodeProto& n) const {
    // noop_with_empty_axes (18): with no axes, 1 makes the reduction the identity, which 17
    // cannot say; 0 is 17's meaning (reduce all), and with axes given it changes nothing
    bool noop = false;
    for (const onnx::AttributeProto& a : n.attribute())
      if (a.name() == "noop_with_empty_axes") noop = a.i() != 0;
    if (noop && (n.input_size() < 2 || n.input(1).empty())) refuse(n, "has noop_with_empty_axes=1 and no axes (opset 18)");
    dropAttribute(n, "noop_with_empty_axes");
    if (n.input_size() < 2 || n.input(1).empty()) {
      if (n.input_size() == 2) n.mutable_input()->RemoveLast();
      return;  // no axes: all of them, as at 17
    }
    const onnx::TensorProto* axes = constant(n.input(1));
    if (!axes) refuse(n, "takes its axes from a computed tensor (opset 18)");
    if (int64Values(*axes).empty() && noop) refuse(n, "has noop_with_empty_axes=1 and empty axes (opset 18)");
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name("axes");
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : int64Values(*axes)) a->add_ints(v);
    n.mutable_input()->RemoveLast();
  }

  void lowerPad(onnx::NodeProto& n) const {
    for (const onnx::AttributeProto& a : n.attribute())
      if (a.name() == "mode" && a.s() == "wrap") refuse(n, "pads in mode wrap (opset 19)");
    if (n.input_size() >= 4 && !n.input(3).empty()) refuse(n, "pads only some axes (its axes input, opset 18)");
    while (n.input_size() > 3) n.mutable_input()->RemoveLast();
  }

  void lowerResize(onnx::NodeProto& n) const {
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.name() == "antialias" && a.i() != 0) refuse(n, "antialiases (opset 18)");
      if (a.name() == "axes") refuse(n, "resizes only some axes (opset 18)");
      if (a.name() == "keep_aspect_ratio_policy" && a.s() != "stretch") refuse(n, "keeps the aspect ratio (opset 18)");
      if (a.name() == "coordinate_transformation_mode" && a.s() == "half_pixel_symmetric")
        refuse(n, "uses half_pixel_symmetric coordinates (opset 19)");
    }
    dropAttribute(n, "antialias");
    dropAttribute(n, "keep_aspect_ratio_policy");
  }

  std::string scalar(const std::string& stem, float value) {
    onnx::TensorProto t;
    t.set_name(uniqueName(stem));
    t.set_data_type(onnx::TensorProto::FLOAT);
    t.add_float_data(value);
    extra_.push_back(t);
    return t.name();
  }

  std::string uniqueName(const std::string& stem) { return stem + "__peat_lowered_" + std::to_string(counter_++); }

  void add(std::vector<onnx::NodeProto>& out, const std::string& op, const std::string& name,
           std::vector<std::string> inputs, const std::string& output) {
    onnx::NodeProto n;
    n.set_op_type(op);
    n.set_name(name);
    for (const std::string& i : inputs) n.add_input(i);
    n.add_output(output);
    out.push_back(std::move(n));
  }

  // Gelu-20 as ONNX's function body: exact 0.5 x (1 + erf(x / sqrt 2)), or the tanh form
  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). The nodes keep the Gelu's name as their stem.
  void writeGelu(const onnx::NodeProto& n, std::vector<onnx::NodeProto>& out) {
    std::string approximate = "none";
    for (const onnx::AttributeProto& a : n.attribute())
      if (a.name() == "approximate") approximate = a.s();
    if (approximate != "none" && approximate != "tanh") refuse(n, "has approximate='" + approximate + "'");
    const std::string x = n.input(0), stem = n.name().empty() ? n.output(0) : n.name();
    std::string inner;
    if (approximate == "none") {
      const std::string scaled = uniqueName(stem);
      add(out, "Div", stem + "/div", {x, scalar(stem, float(std::sqrt(2.0)))}, scaled);
      inner = uniqueName(stem);
      add(out, "Erf", stem + "/erf", {scaled}, inner);
    } else {
      const std::string square = uniqueName(stem), cube = uniqueName(stem), scaledCube = uniqueName(stem),
                        sum = uniqueName(stem), arg = uniqueName(stem);
      add(out, "Mul", stem + "/square", {x, x}, square);  // x^3 as two products: no Pow to bound
      add(out, "Mul", stem + "/cube", {square, x}, cube);
      add(out, "Mul", stem + "/mul_c", {cube, scalar(stem, 0.044715f)}, scaledCube);
      add(out, "Add", stem + "/add_x", {x, scaledCube}, sum);
      add(out, "Mul", stem + "/mul_k", {sum, scalar(stem, float(std::sqrt(2.0 / M_PI)))}, arg);
      inner = uniqueName(stem);
      add(out, "Tanh", stem + "/tanh", {arg}, inner);
    }
    const std::string plusOne = uniqueName(stem), product = uniqueName(stem);
    add(out, "Add", stem + "/add", {inner, scalar(stem, 1.0f)}, plusOne);
    add(out, "Mul", stem + "/mul", {x, plusOne}, product);
    add(out, "Mul", stem + "/mul_half", {product, scalar(stem, 0.5f)}, n.output(0));
  }

  onnx::ModelProto& m_;
  const std::string& path_;
  std::map<std::string, const onnx::TensorProto*> initializers_, constants_;
  std::vector<onnx::TensorProto> extra_;
  int counter_ = 0;
};

}  // namespace

void lowerToOpset17(onnx::ModelProto& model, const std::string& path) { Lowering(model, path).run(); }

}  // namespace peat::save::onnx_import
