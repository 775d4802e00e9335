// SPDX-License-Identifier: MIT
// libpeat_onnx.so: reads an ONNX model with Debian's libonnx (protobuf, checker, shape inference)
// and maps it onto SAVE's graph (core/save/graph_builder.h). Loaded at run time by `peat save -m
// FILE.onnx` and by the probe helper, which runs it first on a file from someone else
// (core/save/onnx_model.cpp); no other program maps protobuf.
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "core/save/graph_builder.h"
#include "core/save/onnx_model.h"

namespace peat::save {

namespace {

constexpr int64_t kNewestOpset = 17;  // libonnx 1.12

std::string typeName(int t) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return "float32";
    case onnx::TensorProto::DOUBLE: return "float64";
    case onnx::TensorProto::FLOAT16: return "float16";
    case onnx::TensorProto::BFLOAT16: return "bfloat16";
    case onnx::TensorProto::INT64: return "int64";
    case onnx::TensorProto::INT32: return "int32";
    case onnx::TensorProto::INT8: return "int8";
    case onnx::TensorProto::UINT8: return "uint8";
    default: return "type " + std::to_string(t);
  }
}

struct Constant {
  std::vector<int64_t> dims;
  std::vector<float> values;     // FLOAT tensors
  std::vector<int64_t> integers;  // INT64 tensors (shapes, axes)
  bool isFloat = false;
};

class Importer {
 public:
  Importer(const std::string& path, const std::map<std::string, store::Tensor>* replacements)
      : path_(path), replacements_(replacements), b_(g_, params_) {}

  Graph run() {
    load();
    const onnx::GraphProto& graph = model_.graph();
    for (const onnx::TensorProto& t : graph.initializer()) constants_[t.name()] = decode(t, "initializer");
    if (replacements_) replace();
    input();
    for (const onnx::NodeProto& n : graph.node())
      for (const auto& in : n.input()) ++consumers_[in];
    for (const auto& out : graph.output()) ++consumers_[out.name()];
    for (const onnx::NodeProto& n : graph.node()) node(n);
    if (!unsupported_.empty()) {
      std::string list;
      for (const std::string& u : unsupported_) list += (list.empty() ? "" : "; ") + u;
      throw SaveError("ONNX model '" + path_ + "' has " + std::to_string(unsupported_.size()) + " node" +
                      (unsupported_.size() == 1 ? "" : "s") + " SAVE cannot bound: " + list);
    }
    if (graph.output_size() != 1) throw SaveError("ONNX model '" + path_ + "' has " + std::to_string(graph.output_size()) +
                                                  " outputs; SAVE analyses models with one (the logits)");
    auto it = values_.find(graph.output(0).name());
    if (it == values_.end()) throw SaveError("ONNX model '" + path_ + "': its output is not computed from its input");
    g_.output = it->second;
    if (!replacements_) g_.model = path_;
    return g_;
  }

 private:
  void load() {
    std::ifstream in(path_, std::ios::binary);
    if (!in) throw SaveError("cannot read ONNX model '" + path_ + "'");
    if (!model_.ParseFromIstream(&in)) throw SaveError("'" + path_ + "' is not an ONNX model (the protobuf does not parse)");
    for (const auto& op : model_.opset_import())
      if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = op.version();
    for (const auto& op : model_.opset_import())
      if ((op.domain().empty() || op.domain() == "ai.onnx") && op.version() > kNewestOpset)
        throw SaveError("ONNX model '" + path_ + "' uses opset " + std::to_string(op.version()) +
                        ", newer than this ONNX library supports (" + std::to_string(kNewestOpset) +
                        "): export it with torch.onnx.export(..., opset_version=17)");
    for (const onnx::TensorProto& t : model_.graph().initializer())
      if (t.data_location() == onnx::TensorProto::EXTERNAL)
        throw SaveError("ONNX model '" + path_ + "' keeps initializer '" + t.name() +
                        "' in an external data file, which SAVE does not read yet: save it with "
                        "onnx.save(model, path, save_as_external_data=False) (models under 2 GB)");
    try {
      onnx::checker::check_model(model_);
      onnx::shape_inference::InferShapes(model_);
    } catch (const std::exception& e) {
      std::string what = e.what();
      throw SaveError("ONNX model '" + path_ + "' does not pass ONNX's checker: " + what.substr(0, what.find('\n')));
    }
  }

  // A tensor's `count` elements, from its raw bytes (little-endian) or its typed field.
  template <typename T, typename Field>
  static std::vector<T> elements(const onnx::TensorProto& t, const Field& field, int64_t count, const char* what) {
    std::vector<T> out;
    if (t.has_raw_data()) {
      if (t.raw_data().size() != std::size_t(count) * sizeof(T))
        throw SaveError("ONNX " + std::string(what) + " '" + t.name() + "' holds the wrong number of bytes");
      out.resize(std::size_t(count));
      if (count > 0) std::memcpy(out.data(), t.raw_data().data(), t.raw_data().size());
    } else {
      if (field.size() != count)
        throw SaveError("ONNX " + std::string(what) + " '" + t.name() + "' holds the wrong number of values");
      out.assign(field.begin(), field.end());
    }
    return out;
  }

  Constant decode(const onnx::TensorProto& t, const char* what) {
    Constant c;
    c.dims.assign(t.dims().begin(), t.dims().end());
    int64_t count = 1;
    for (int64_t d : c.dims) {
      if (d < 0 || d > (int64_t(1) << 31)) throw SaveError("ONNX " + std::string(what) + " '" + t.name() + "' has a bad shape");
      if (d != 0 && count > (int64_t(1) << 31) / d)
        throw SaveError("ONNX " + std::string(what) + " '" + t.name() + "' is too large");
      count *= d;
    }
    if (t.data_type() == onnx::TensorProto::FLOAT) {
      c.isFloat = true;
      c.values = elements<float>(t, t.float_data(), count, what);
    } else if (t.data_type() == onnx::TensorProto::INT64) {
      typeOf_[t.name()] = "int64";
      c.integers = elements<int64_t>(t, t.int64_data(), count, what);
    } else {
      nonFloat_.insert(t.name());  // refused where a node uses it as a weight
      typeOf_[t.name()] = typeName(t.data_type());
    }
    return c;
  }

  // Initializers replaced by name from a checkpoint (a model fine-tuned with PEAT): every tensor of
  // the checkpoint that names a float initializer must have its shape; at least one must match.
  void replace() {
    int64_t replaced = 0;
    for (const auto& [name, t] : *replacements_) {
      auto it = constants_.find(name);
      if (it == constants_.end() || !it->second.isFloat) continue;
      std::vector<int64_t> shape(t.shape.begin(), t.shape.end());
      if (shape != it->second.dims || t.dtype != store::DType::F32)
        throw SaveError("checkpoint tensor '" + name + "' does not have the shape of ONNX initializer '" + name + "'");
      std::memcpy(it->second.values.data(), t.bytes.data(), t.bytes.size());
      ++replaced;
    }
    if (replaced == 0)
      throw SaveError("no initializer of ONNX model '" + path_ + "' has the name of a checkpoint tensor (e.g. '" +
                      (replacements_->empty() ? std::string("?") : replacements_->begin()->first) +
                      "'); export with torch.onnx.export(..., do_constant_folding=False) so that the initializers "
                      "keep the module's parameter names");
    g_.model = path_ + " (" + std::to_string(replaced) + " initializers from the checkpoint)";
  }

  void input() {
    std::set<std::string> initialisers;
    for (const auto& t : model_.graph().initializer()) initialisers.insert(t.name());
    const onnx::ValueInfoProto* in = nullptr;
    for (const auto& v : model_.graph().input())
      if (!initialisers.count(v.name())) {
        if (in) throw SaveError("ONNX model '" + path_ + "' has more than one input; SAVE analyses models with one");
        in = &v;
      }
    if (!in) throw SaveError("ONNX model '" + path_ + "' has no input");
    const auto& type = in->type().tensor_type();
    if (type.elem_type() != onnx::TensorProto::FLOAT)
      throw SaveError("ONNX model '" + path_ + "': input '" + in->name() + "' is " + typeName(type.elem_type()) +
                      "; SAVE analyses float32 inputs");
    std::vector<int64_t> shape;
    const auto& dims = type.shape().dim();
    for (int i = 1; i < dims.size(); ++i) {  // the first dimension is the batch
      if (!dims[i].has_dim_value() || dims[i].dim_value() <= 0)
        throw SaveError("ONNX model '" + path_ + "': dimension " + std::to_string(i) + " of input '" + in->name() +
                        "' is dynamic ('" + dims[i].dim_param() + "'); export with a fixed input shape");
      shape.push_back(dims[i].dim_value());
    }
    if (shape.empty()) throw SaveError("ONNX model '" + path_ + "': input '" + in->name() + "' has no sample dimensions");
    values_[in->name()] = b_.input(shape);
  }

  // --- helpers for nodes
  static const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const char* name) {
    for (const auto& a : n.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  static int64_t intAttr(const onnx::NodeProto& n, const char* name, int64_t fallback) {
    const auto* a = attribute(n, name);
    return a ? a->i() : fallback;
  }
  static float floatAttr(const onnx::NodeProto& n, const char* name, float fallback) {
    const auto* a = attribute(n, name);
    return a ? a->f() : fallback;
  }
  static std::vector<int64_t> intsAttr(const onnx::NodeProto& n, const char* name) {
    const auto* a = attribute(n, name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
  }
  // The node's name in SAVE's results: the module path where the exporter left one, from the
  // weight's initializer ("conv1.weight" -> "conv1") or the node's scope ("/layer1/layer1.0/conv1/Conv"
  // -> "layer1.0.conv1", "/features/features.2/conv/conv.0/conv.0.0/Conv" -> "features.2.conv.0.0");
  // else the node's name or its output's.
  std::string nameOf(const onnx::NodeProto& n) {
    auto it = names_.find(&n);
    if (it != names_.end()) return it->second;
    std::string name;
    const std::string suffix = ".weight";
    if (n.input_size() > 1) {
      const std::string& w = n.input(1);
      if (w.size() > suffix.size() && w.compare(w.size() - suffix.size(), suffix.size(), suffix) == 0 &&
          w.rfind("onnx::", 0) != 0)
        name = w.substr(0, w.size() - suffix.size());
    }
    if (name.empty() && !n.name().empty() && n.name()[0] == '/') {
      std::vector<std::string> parts;
      std::stringstream ss(n.name().substr(1));
      for (std::string part; std::getline(ss, part, '/');) parts.push_back(part);
      if (parts.size() == 1) name = lower(n.op_type());
      if (parts.size() >= 2) {
        parts.pop_back();  // the op type
        // Each scope is named relative to its parent's module, and a ModuleList's element repeats
        // the list's name ("features", "features.2", "conv", "conv.0", "conv.0.0"): a part that
        // extends the previous one replaces it, any other is a child.
        std::string previous;
        for (const std::string& part : parts) {
          if (!previous.empty() && part.rfind(previous + ".", 0) == 0)
            name += part.substr(previous.size());
          else
            name += (name.empty() ? "" : ".") + part;
          previous = part;
        }
        if (n.op_type() != "Conv" && n.op_type() != "Gemm" && n.op_type() != "MatMul")
          name += "." + lower(n.op_type());
      }
    }
    if (name.empty()) name = n.name().empty() ? n.output(0) : n.name();
    for (char& ch : name)  // as SAVE's result names allow
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.')) ch = '-';
    const int seen = ++nameCount_[name];
    if (seen > 1) name += "-" + std::to_string(seen);
    names_[&n] = name;
    return name;
  }
  static std::string lower(std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }

  void refuse(const onnx::NodeProto& n, const std::string& why) {
    unsupported_.push_back(n.op_type() + " '" + nameOf(n) + "': " + why);
    for (const auto& out : n.output()) poisoned_.insert(out);
  }
  bool isActivation(const std::string& v) const { return values_.count(v) > 0; }
  const Constant* constant(const std::string& v) const {
    auto it = constants_.find(v);
    return it == constants_.end() ? nullptr : &it->second;
  }
  // A float weight of a node, stored under the builder's name; false (and the node refused) if not one.
  bool weight(const onnx::NodeProto& n, const std::string& value, const std::string& as, std::vector<int64_t> wantDims = {}) {
    const Constant* c = constant(value);
    if (!c) {
      refuse(n, "its weight '" + value + "' is computed at run time, not an initializer");
      return false;
    }
    if (!c->isFloat) {
      refuse(n, "its weight '" + value + "' is " + (typeOf_.count(value) ? typeOf_[value] : std::string("not float32")) +
                    "; SAVE reads float32 models");
      return false;
    }
    if (!wantDims.empty() && c->dims != wantDims) {
      refuse(n, "its weight '" + value + "' has an unexpected shape");
      return false;
    }
    params_[as] = tensorOf(c->values, c->dims);
    return true;
  }
  static store::Tensor tensorOf(const std::vector<float>& v, const std::vector<int64_t>& dims) {
    store::Tensor t;
    t.dtype = store::DType::F32;
    t.shape.assign(dims.begin(), dims.end());
    t.bytes.resize(v.size() * 4);
    if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    return t;
  }
  int64_t perSample(int v) const { return b_.node(v).size(); }

  void node(const onnx::NodeProto& n) {
    for (const auto& in : n.input())
      if (poisoned_.count(in)) {  // already reported upstream
        for (const auto& out : n.output()) poisoned_.insert(out);
        return;
      }
    const std::string& op = n.op_type();
    const std::string name = nameOf(n);
    if (!n.domain().empty() && n.domain() != "ai.onnx") return refuse(n, "operator domain '" + n.domain() + "'");
    if (op == "Constant") {
      const auto* a = attribute(n, "value");
      if (!a || !a->has_t()) return refuse(n, "only tensor constants are read");
      constants_[n.output(0)] = decode(a->t(), "constant");
      return;
    }
    if (op == "Identity" || op == "Dropout") {  // exporters alias shared initializers through Identity
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
      return;
    }
    if (op == "Pad") return pad(n);
    if (n.input_size() > 0 && zeroPad_.count(n.input(0))) {  // a zero Pad folds into the next window op
      const auto [x, extra] = zeroPad_.at(n.input(0));
      int out = -1;
      try {
        if (op == "Conv")
          out = conv(n, x, extra);
        else if (op == "AveragePool")
          out = avgPool(n, x, extra);
        else
          return refuse(n, "a zero Pad feeding " + op + " is not mapped (only Conv and AveragePool take one)");
      } catch (const SaveError& e) {
        return refuse(n, e.what());
      }
      if (out >= 0) values_[n.output(0)] = out;
      return;
    }
    if (n.input_size() == 0 || !isActivation(n.input(0))) {
      if (op == "Add" || op == "Mul") {
        if (n.input_size() == 2 && isActivation(n.input(1))) return binary(n, n.input(1), n.input(0));
      }
      return refuse(n, "its first input is not computed from the model's input (constant folding left it?)");
    }
    const int x = values_.at(n.input(0));
    int out = -1;
    try {
      if (op == "Conv") {
        out = conv(n, x);
      } else if (op == "Gemm") {
        out = gemm(n, x);
      } else if (op == "MatMul") {
        if (n.input_size() == 2 && isActivation(n.input(1)))
          return refuse(n, "a product of two activations other than attention's is not mapped yet");
        const Constant* w = constant(n.input(1));
        if (!w || w->dims.size() != 2 || !w->isFloat) return refuse(n, "its right operand is not a float32 2-D initializer");
        std::vector<float> t(w->values.size());
        const int64_t in = w->dims[0], o = w->dims[1];
        for (int64_t i = 0; i < in; ++i)
          for (int64_t j = 0; j < o; ++j) t[std::size_t(j * in + i)] = w->values[std::size_t(i * o + j)];
        params_[name + ".weight"] = tensorOf(t, {o, in});
        params_[name + ".bias"] = tensorOf(std::vector<float>(std::size_t(o), 0.0f), {o});
        if (b_.node(x).features() != in) return refuse(n, "its weight does not fit its input");
        out = b_.linear(name, x, o);
        if (consumers_[n.output(0)] == 1) biasFree_[n.output(0)] = out;  // a bias Add may fold into it
      } else if (op == "Add" || op == "Mul") {
        return binary(n, n.input(0), n.input(1));
      } else if (op == "Relu") {
        out = b_.relu(name, x);
      } else if (op == "Sigmoid") {
        out = b_.unary(Op::Sigmoid, name, x);
      } else if (op == "Tanh") {
        out = b_.unary(Op::Tanh, name, x);
      } else if (op == "Softmax") {
        const int64_t rank = int64_t(b_.node(x).shape.size()) + 1;
        const int64_t axis = intAttr(n, "axis", opset_ >= 13 ? -1 : 1);
        if (opset_ < 13 && axis != rank - 1) return refuse(n, "softmax before opset 13 flattens from its axis");
        if (axis != -1 && axis != rank - 1) return refuse(n, "softmax over another axis than the last");
        out = b_.softmax(name, x);
      } else if (op == "MaxPool") {
        const auto k = intsAttr(n, "kernel_shape"), s = intsAttr(n, "strides"), p = intsAttr(n, "pads");
        if (k.size() != 2 || k[0] != k[1]) return refuse(n, "only square 2-D windows are mapped");
        for (int64_t v : p)
          if (v != (p.empty() ? 0 : p[0])) return refuse(n, "unequal max-pool padding is not mapped");
        if (intAttr(n, "ceil_mode", 0) != 0) return refuse(n, "ceil_mode=1 is not mapped");
        for (int64_t d : intsAttr(n, "dilations"))
          if (d != 1) return refuse(n, "dilated max-pooling is not mapped");
        const int64_t stride = s.empty() ? 1 : s[0];
        if (s.size() == 2 && s[0] != s[1]) return refuse(n, "unequal strides are not mapped");
        if (stride <= 0 || k[0] <= 0) return refuse(n, "a stride or kernel out of range");
        if (b_.node(x).shape.size() != 3) return refuse(n, "its input is not [C, H, W]");
        if (const auto* a = attribute(n, "auto_pad"); a && a->s() != "NOTSET") return refuse(n, "auto_pad is not mapped");
        out = b_.maxPool(name, x, k[0], stride, p.empty() ? 0 : p[0]);
      } else if (op == "Clip") {
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
        out = b_.clip(name, x, lo, hi);
      } else if (op == "AveragePool") {
        if ((out = avgPool(n, x, 0)) < 0) return;
      } else if (op == "GlobalAveragePool") {
        if (b_.node(x).shape.size() != 3) return refuse(n, "its input is not [C, H, W]");
        out = b_.globalAvgPool(name, x);
        shape1x1_.insert(n.output(0));  // [C] here, [C, 1, 1] in ONNX
      } else if (op == "Flatten") {
        if (intAttr(n, "axis", 1) != 1) return refuse(n, "flattening from another axis than 1");
        out = b_.flatten(name, x);
      } else if (op == "Reshape") {
        const Constant* shape = n.input_size() > 1 ? constant(n.input(1)) : nullptr;
        if (!shape || shape->integers.size() != 2) return refuse(n, "only a reshape to [batch, features] is mapped");
        const int64_t f = shape->integers[1];
        if (f != -1 && f != perSample(x)) return refuse(n, "only a reshape to [batch, features] is mapped");
        out = b_.flatten(name, x);
      } else if (op == "BatchNormalization") {
        if (n.input_size() != 5) return refuse(n, "expected scale, bias, mean and variance");
        if (intAttr(n, "training_mode", 0) != 0 || n.output_size() > 1)
          return refuse(n, "batch norm in training mode (batch statistics) has no fixed affine map");
        const int64_t c = b_.node(x).shape.empty() ? 0 : b_.node(x).shape[0];
        for (auto [i, suffix] : {std::pair<int, const char*>{1, ".weight"}, {2, ".bias"}, {3, ".running_mean"}, {4, ".running_var"}})
          if (!weight(n, n.input(i), name + suffix, {c})) return;
        const float eps = floatAttr(n, "epsilon", 1e-5f);
        out = b_.batchNorm(name, x, eps == 1e-5f ? 1e-5 : double(eps));  // torch's 1e-5, as the zoo's graphs
      } else if (op == "LayerNormalization") {
        const int64_t axis = intAttr(n, "axis", -1), rank = int64_t(b_.node(x).shape.size()) + 1;
        if (axis != -1 && axis != rank - 1) return refuse(n, "normalisation over more than the last axis");
        if (std::fabs(floatAttr(n, "epsilon", 1e-5f) - 1e-5f) > 1e-9f) return refuse(n, "an epsilon other than 1e-5");
        const int64_t w = b_.node(x).features();
        if (!weight(n, n.input(1), name + ".weight", {w})) return;
        if (n.input_size() > 2 && !n.input(2).empty()) {
          if (!weight(n, n.input(2), name + ".bias", {w})) return;
        } else {
          params_[name + ".bias"] = tensorOf(std::vector<float>(std::size_t(w), 0.0f), {w});
        }
        out = b_.layerNorm(name, x);
      } else {
        return refuse(n, "SAVE has no sound transfer function for " + op + " yet");
      }
    } catch (const SaveError& e) {
      return refuse(n, e.what());
    }
    values_[n.output(0)] = out;
  }

  // Pad with zeros on the spatial axes only, the same on every side (an exporter's explicit padding
  // before AveragePool): remembered, and folded into the Conv or AveragePool that reads it.
  void pad(const onnx::NodeProto& n) {
    if (n.input_size() == 0 || !isActivation(n.input(0))) return refuse(n, "its input is not computed from the model's input");
    const auto* mode = attribute(n, "mode");
    if (mode && mode->s() != "constant") return refuse(n, "only zero padding is mapped (mode " + mode->s() + ")");
    const Constant* pads = n.input_size() > 1 ? constant(n.input(1)) : nullptr;
    if (!pads || pads->integers.size() != 8) return refuse(n, "its pads are not a constant for a [N, C, H, W] tensor");
    const std::vector<int64_t>& p = pads->integers;
    if (p[0] || p[1] || p[4] || p[5] || p[2] != p[3] || p[2] != p[6] || p[2] != p[7] || p[2] < 0)
      return refuse(n, "only equal padding of height and width is mapped");
    if (n.input_size() > 2 && !n.input(2).empty()) {
      const Constant* v = constant(n.input(2));
      if (!v || !v->isFloat || v->values.size() != 1 || v->values[0] != 0.0f) return refuse(n, "padding with a value other than 0");
    }
    if (consumers_[n.output(0)] != 1) return refuse(n, "its output has more than one reader");
    zeroPad_[n.output(0)] = {values_.at(n.input(0)), p[2]};
  }

  int avgPool(const onnx::NodeProto& n, int x, int64_t extra) {
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

  int conv(const onnx::NodeProto& n, int x, int64_t extraPad = 0) {
    const std::string name = nameOf(n);
    const int64_t groups = intAttr(n, "group", 1);
    const Constant* w = constant(n.input(1));
    if (!w || w->dims.size() != 4 || w->dims[2] != w->dims[3]) {
      refuse(n, "only 2-D convolutions with square kernels from an initializer are mapped");
      return -1;
    }
    const auto s = intsAttr(n, "strides"), p = intsAttr(n, "pads"), d = intsAttr(n, "dilations");
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

  int gemm(const onnx::NodeProto& n, int x) {
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

  void binary(const onnx::NodeProto& n, const std::string& a, const std::string& other) {
    const std::string name = nameOf(n);
    const int x = values_.at(a);
    if (isActivation(other)) {
      const int y = values_.at(other);
      if (b_.node(x).shape != b_.node(y).shape) return refuse(n, "operands of different shapes (broadcasting is not mapped)");
      values_[n.output(0)] = n.op_type() == "Add" ? b_.addNodes(name, x, y) : b_.mul(name, x, y);
      return;
    }
    const Constant* c = constant(other);
    if (!c || !c->isFloat) return refuse(n, "its constant operand is not a float32 tensor");
    if (n.op_type() == "Mul") return refuse(n, "a product with a constant is not mapped yet");
    // x + c: into a bias-free linear layer's bias (MatMul + Add, as exporters write Linear; only when
    // the Add is the MatMul's one consumer), else AddConst with the constant broadcast as numpy does
    const Node& xn = b_.node(x);
    std::vector<int64_t> cdims = c->dims;
    while (!cdims.empty() && cdims.front() == 1 && cdims.size() > xn.shape.size()) cdims.erase(cdims.begin());
    auto folded = biasFree_.find(a);
    if (folded != biasFree_.end() && cdims.size() == 1 && cdims[0] == xn.features()) {
      Node& linear = g_.nodes[std::size_t(folded->second)];
      for (std::size_t j = 0; j < linear.bias.size(); ++j) linear.bias[j] += c->values[j];
      biasFree_.erase(folded);
      values_[n.output(0)] = x;
      return;
    }
    if (cdims.size() > xn.shape.size()) return refuse(n, "its constant has more dimensions than one sample");
    // right-aligned broadcasting: each constant dimension is 1 or the sample's
    const std::size_t offset = xn.shape.size() - cdims.size();
    for (std::size_t i = 0; i < cdims.size(); ++i)
      if (cdims[i] != 1 && cdims[i] != xn.shape[offset + i]) return refuse(n, "its constant does not broadcast to one sample");
    std::vector<float> expanded(std::size_t(xn.size()));
    for (int64_t e = 0; e < xn.size(); ++e) {
      int64_t rest = e, ci = 0, stride = 1;
      for (std::size_t i = xn.shape.size(); i-- > 0;) {
        const int64_t coord = rest % xn.shape[i];
        rest /= xn.shape[i];
        if (i >= offset) {
          const int64_t cd = cdims[i - offset];
          ci += (cd == 1 ? 0 : coord) * stride;
          stride *= cd;
        }
      }
      expanded[std::size_t(e)] = c->values[std::size_t(ci)];
    }
    params_[name + ".constant"] = tensorOf(expanded, xn.shape);
    values_[n.output(0)] = b_.addConst(name, x, name + ".constant");
  }

  int64_t opset_ = kNewestOpset;
  std::string path_;
  const std::map<std::string, store::Tensor>* replacements_;
  onnx::ModelProto model_;
  Graph g_;
  std::map<std::string, store::Tensor> params_;
  detail::Builder b_;
  std::map<std::string, Constant> constants_;
  std::map<std::string, int> values_, biasFree_, consumers_;
  std::map<std::string, std::pair<int, int64_t>> zeroPad_;  // a Pad's output: its input and padding
  std::set<std::string> poisoned_, nonFloat_, shape1x1_;
  std::map<std::string, std::string> typeOf_;
  std::vector<std::string> unsupported_;
  std::map<const onnx::NodeProto*, std::string> names_;
  std::map<std::string, int> nameCount_;
};

}  // namespace

}  // namespace peat::save

// The module's entry point (core/save/onnx_model.cpp finds it with dlsym): fills *graph and returns
// 0, or writes a one-line reason into `error` and returns 1. `replacements` is null or a
// std::map<std::string, store::Tensor> of initializers to replace by name (the module is built with
// peat, so C++ types may cross).
extern "C" int peat_onnx_import_v1(const char* path, const void* replacements, void* graph, char* error,
                                   unsigned long errorSize) {
  try {
    *static_cast<peat::save::Graph*>(graph) =
        peat::save::Importer(path, static_cast<const std::map<std::string, peat::store::Tensor>*>(replacements)).run();
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error, errorSize, "%s", e.what());
    return 1;
  }
}
