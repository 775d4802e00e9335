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

// --- index arithmetic over row-major dims (the importer evaluates shapes and moves elements with it)

int64_t countOf(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

std::vector<int64_t> stridesOf(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (std::size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

// numpy broadcasting of two shapes; false if they do not broadcast
bool broadcastDims(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::vector<int64_t>& out) {
  const std::size_t r = std::max(a.size(), b.size());
  out.assign(r, 1);
  for (std::size_t i = 0; i < r; ++i) {
    const int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())], y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x != y && x != 1 && y != 1) return false;
    out[i] = std::max(x, y);
  }
  return true;
}

// the flat index in a tensor of dims `from` that broadcasts to output coordinate `coord` of dims `to`
int64_t broadcastIndex(const std::vector<int64_t>& from, const std::vector<int64_t>& to, const std::vector<int64_t>& coord) {
  int64_t at = 0, stride = 1;
  for (std::size_t i = from.size(); i-- > 0;) {
    const std::size_t j = i + (to.size() - from.size());
    at += (from[i] == 1 ? 0 : coord[j]) * stride;
    stride *= from[i];
  }
  return at;
}

std::vector<int64_t> coordOf(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> c(dims.size());
  for (std::size_t i = dims.size(); i-- > 0;) {
    c[i] = flat % dims[i];
    flat /= dims[i];
  }
  return c;
}

int64_t axisOf(int64_t axis, std::size_t rank) { return axis < 0 ? axis + int64_t(rank) : axis; }

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
    for (const onnx::NodeProto& n : graph.node())  // Constant nodes first: patterns look ahead at them
      if (n.op_type() == "Constant" && n.output_size() == 1)
        if (const auto* a = attribute(n, "value"); a && a->has_t()) constants_[n.output(0)] = decode(a->t(), "constant");
    for (const onnx::NodeProto& n : graph.node())
      for (const auto& in : n.input()) {
        ++consumers_[in];
        readers_[in].push_back(&n);
      }
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
    checkDeclaredOutput(graph.output(0));
    pruneDeadNodes();
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
    for (onnx::TensorProto& t : *model_.mutable_graph()->mutable_initializer())
      if (t.data_location() == onnx::TensorProto::EXTERNAL) readExternal(t);
    try {
      onnx::checker::check_model(model_);
      onnx::shape_inference::InferShapes(model_);
    } catch (const std::exception& e) {
      std::string what = e.what();
      throw SaveError("ONNX model '" + path_ + "' does not pass ONNX's checker: " + what.substr(0, what.find('\n')));
    }
  }

  // An initializer kept in an external data file (models over 2 GB; onnx.save(...,
  // save_as_external_data=True)): its bytes, read from the file named relative to the model's
  // folder (no absolute paths, no "..": a model from someone else reads nothing outside it).
  void readExternal(onnx::TensorProto& t) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto& kv : t.external_data()) {
      try {
        if (kv.key() == "location") location = kv.value();
        else if (kv.key() == "offset") offset = std::stoll(kv.value());
        else if (kv.key() == "length") length = std::stoll(kv.value());
      } catch (const std::exception&) {
        throw SaveError("ONNX model '" + path_ + "': initializer '" + t.name() + "' has a bad external-data " + kv.key());
      }
    }
    const std::string what = "ONNX model '" + path_ + "': initializer '" + t.name() + "' ";
    if (location.empty() || location[0] == '/' || location.find("..") != std::string::npos)
      throw SaveError(what + "names an external data file outside the model's folder ('" + location + "')");
    const std::size_t slash = path_.rfind('/');
    const std::string file = (slash == std::string::npos ? std::string() : path_.substr(0, slash + 1)) + location;
    std::ifstream in(file, std::ios::binary | std::ios::ate);
    if (!in) throw SaveError(what + "is kept in external data file '" + file + "', which is missing");
    const int64_t size = int64_t(in.tellg());
    if (length < 0) length = size - offset;
    if (offset < 0 || length < 0 || offset + length > size)
      throw SaveError(what + "lies outside its external data file '" + file + "' (" + std::to_string(size) + " bytes)");
    std::string bytes(std::size_t(length), '\0');
    in.seekg(offset);
    if (!in.read(bytes.data(), length)) throw SaveError(what + "could not be read from '" + file + "'");
    t.set_raw_data(std::move(bytes));
    t.clear_external_data();
    t.set_data_location(onnx::TensorProto::DEFAULT);
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
    } else if (t.data_type() == onnx::TensorProto::INT32 || t.data_type() == onnx::TensorProto::BOOL) {
      // shape arithmetic and masks; kept as integers, refused where a node wants float weights
      nonFloat_.insert(t.name());
      typeOf_[t.name()] = typeName(t.data_type());
      if (t.data_type() == onnx::TensorProto::INT32) {
        const std::vector<int32_t> v = elements<int32_t>(t, t.int32_data(), count, what);
        c.integers.assign(v.begin(), v.end());
      } else if (t.has_raw_data()) {
        const std::vector<uint8_t> v = elements<uint8_t>(t, t.int32_data(), count, what);
        c.integers.assign(v.begin(), v.end());
      } else {
        const std::vector<int32_t> v = elements<int32_t>(t, t.int32_data(), count, what);
        c.integers.assign(v.begin(), v.end());
      }
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
    // The first dimension is a batch only where the model says so: a symbolic dimension, or 1. A
    // model that fixes it above 1 computes on the whole input at once (a Transpose, Concat or
    // Reshape over axis 0 mixes its samples): refused, never read as that many samples.
    if (dims.size() > 0 && dims[0].has_dim_value() && dims[0].dim_value() != 1)
      throw SaveError("ONNX model '" + path_ + "': input '" + in->name() + "' fixes its first dimension to " +
                      std::to_string(dims[0].dim_value()) +
                      ", which SAVE cannot read as a batch of single samples; export with a batch of 1 or a dynamic "
                      "batch axis (torch.onnx.export(..., dynamic_axes={'" + in->name() + "': {0: 'batch'}}))");
    for (int i = 1; i < dims.size(); ++i) {
      if (dims[i].has_dim_value() && dims[i].dim_value() == 0)
        throw SaveError("ONNX model '" + path_ + "': dimension " + std::to_string(i) + " of input '" + in->name() +
                        "' is 0 (an empty tensor); export with a non-empty input");
      if (!dims[i].has_dim_value() || dims[i].dim_value() <= 0)
        throw SaveError("ONNX model '" + path_ + "': dimension " + std::to_string(i) + " of input '" + in->name() +
                        "' is dynamic ('" + dims[i].dim_param() + "'); export with a fixed input shape");
      shape.push_back(dims[i].dim_value());
    }
    if (shape.empty()) throw SaveError("ONNX model '" + path_ + "': input '" + in->name() + "' has no sample dimensions");
    // the declared size, bounded before anything is allocated for it (a 150-byte file may declare
    // [1, 2^62, 4], whose count wraps to 0 in 64 bits)
    constexpr int64_t kMaxInputElements = int64_t(1) << 26;  // 256 MiB of fp32 per sample
    int64_t count = 1;
    for (int64_t d : shape)
      if (d > kMaxInputElements / count)
        throw SaveError("ONNX model '" + path_ + "': input '" + in->name() + "' declares more than 2^26 elements per "
                        "sample (dimension " + std::to_string(d) + "); SAVE's limit is 2^26 (67,108,864)");
      else
        count *= d;
    values_[in->name()] = b_.input(shape);
  }

  // The output's computed shape against the shape the model declares (its batch dimension and
  // leading 1s aside: SAVE keeps one sample's shape, [1000] for a declared [1, 1000]). A model
  // whose declared and computed shapes differ was misread: refused, naming both.
  void checkDeclaredOutput(const onnx::ValueInfoProto& out) const {
    const std::vector<int64_t>& computed = g_.nodes[std::size_t(g_.output)].shape;
    const auto text = [](const std::vector<int64_t>& d) {
      std::string t = "[";
      for (std::size_t i = 0; i < d.size(); ++i) t += (i ? "x" : "") + std::to_string(d[i]);
      return t + "]";
    };
    if (countOf(computed) == 0)
      throw SaveError("ONNX model '" + path_ + "': its output '" + out.name() + "' is computed empty " + text(computed));
    if (!out.type().has_tensor_type() || !out.type().tensor_type().has_shape()) return;  // nothing declared
    const auto& dims = out.type().tensor_type().shape().dim();
    std::vector<int64_t> declared;
    for (int i = 1; i < dims.size(); ++i) {
      if (!dims[i].has_dim_value()) return;  // a symbolic dimension: nothing to compare
      declared.push_back(dims[i].dim_value());
    }
    if (dims.size() > 0 && dims[0].has_dim_value() && dims[0].dim_value() != 1)
      throw SaveError("ONNX model '" + path_ + "': its output '" + out.name() + "' declares a first dimension of " +
                      std::to_string(dims[0].dim_value()) + " where SAVE computes one sample");
    const auto squeezed = [](std::vector<int64_t> d) {
      while (!d.empty() && d.front() == 1) d.erase(d.begin());
      return d;
    };
    if (squeezed(declared) != squeezed(computed))
      throw SaveError("ONNX model '" + path_ + "': its output '" + out.name() + "' is declared " +
                      (dims.size() > 0 ? "[N]x" : "") + text(declared) + " per sample but SAVE computes " + text(computed) +
                      "; refused rather than read wrong");
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

  // Ops whose output has their (first activation) input's shape.
  static bool keepsShape(const std::string& op) {
    static const std::set<std::string> same{"Relu", "Sigmoid", "Tanh", "Clip", "Softmax", "LayerNormalization",
                                            "BatchNormalization", "Identity", "Dropout", "Add", "Mul", "Div", "Sub"};
    return same.count(op) > 0;
  }

  void node(const onnx::NodeProto& n) {
    nodeInner(n);
    if (n.output_size() == 0 || !isActivation(n.output(0)) || dims_.count(n.output(0))) return;
    if (!keepsShape(n.op_type())) return;  // the shape follows from the node (see dimsOf)
    for (const auto& in : n.input())
      if (isActivation(in)) {
        dims_[n.output(0)] = dimsOf(in);
        return;
      }
  }

  // --- the full ONNX shape of an activation, its batch dimension 1 (SAVE runs one sample): set by
  // the ops that move elements; else [1] + the node's shape ([1, C, 1, 1] for a global pool).
  std::vector<int64_t> dimsOf(const std::string& v) const {
    auto it = dims_.find(v);
    if (it != dims_.end()) return it->second;
    const Node& n = b_.node(values_.at(v));
    std::vector<int64_t> d{1};
    if (shape1x1_.count(v)) return {1, n.shape[0], 1, 1};
    d.insert(d.end(), n.shape.begin(), n.shape.end());
    return d;
  }
  // SAVE's shape of one sample for full dims: the leading batch 1 dropped ([1, T, E] -> [T, E]);
  // dims that do not start with it (a sequence-first layout [T, 1, E]) are kept whole.
  static std::vector<int64_t> sampleShape(const std::vector<int64_t>& d) {
    if (d.size() >= 2 && d[0] == 1) return std::vector<int64_t>(d.begin() + 1, d.end());
    return d.empty() ? std::vector<int64_t>{1} : d;
  }
  // A view of x (of a view: of its input; no chains of copies).
  int shaped(const std::string& name, int x, const std::vector<int64_t>& shape) {
    if (b_.node(x).shape == shape) return x;
    while (x > 0 && b_.node(x).op == Op::Flatten && b_.node(b_.node(x).inputs[0]).size() == b_.node(x).size()) {
      x = b_.node(x).inputs[0];
      if (b_.node(x).shape == shape) return x;
    }
    return b_.view(name + ".view", x, shape);
  }
  // A Select of x, composed with x's own Select or view (one gather from their source instead of two).
  int gathered(const std::string& name, int x, const std::vector<int64_t>& shape, std::vector<int64_t> gather) {
    while (x > 0) {
      const Node& n = b_.node(x);
      if (n.op == Op::Flatten) {
        x = n.inputs[0];
      } else if (n.op == Op::Select) {
        for (int64_t& i : gather)
          if (i >= 0) i = n.gather[std::size_t(i)];
        x = n.inputs[0];
      } else {
        break;
      }
    }
    bool same = int64_t(gather.size()) == b_.node(x).size();
    for (std::size_t i = 0; same && i < gather.size(); ++i) same = gather[i] == int64_t(i);
    if (same) return shaped(name, x, shape);
    return b_.select(name, x, shape, std::move(gather));
  }

  // Drops the nodes the output does not read (views and gathers composed away), renumbering the rest.
  void pruneDeadNodes() {
    std::vector<char> live(g_.nodes.size(), 0);
    live[0] = 1;
    live[std::size_t(g_.output)] = 1;
    for (std::size_t v = g_.nodes.size(); v-- > 1;)
      if (live[v])
        for (int i : g_.nodes[v].inputs) live[std::size_t(i)] = 1;
    std::vector<int> map(g_.nodes.size(), -1);
    std::vector<Node> kept;
    for (std::size_t v = 0; v < g_.nodes.size(); ++v)
      if (live[v]) {
        map[v] = int(kept.size());
        kept.push_back(std::move(g_.nodes[v]));
        for (int& i : kept.back().inputs) i = map[std::size_t(i)];
      }
    g_.output = map[std::size_t(g_.output)];
    g_.nodes = std::move(kept);
  }
  void setActivation(const std::string& v, const std::string& name, int node, const std::vector<int64_t>& dims) {
    values_[v] = shaped(name, node, sampleShape(dims));
    dims_[v] = dims;
  }

  // --- constant folding (shape arithmetic, masks, tokens): every input a constant
  static std::vector<double> numbers(const Constant& c) {
    return c.isFloat ? std::vector<double>(c.values.begin(), c.values.end())
                     : std::vector<double>(c.integers.begin(), c.integers.end());
  }
  static Constant make(std::vector<int64_t> dims, const std::vector<double>& v, bool isFloat) {
    Constant c;
    c.dims = std::move(dims);
    c.isFloat = isFloat;
    for (double x : v) {
      if (isFloat) c.values.push_back(float(x));
      else c.integers.push_back(int64_t(x));
    }
    return c;
  }
  std::vector<int64_t> ints(const onnx::NodeProto& n, int input) {
    const Constant* c = n.input_size() > input && !n.input(input).empty() ? constant(n.input(input)) : nullptr;
    if (!c) throw SaveError("input " + std::to_string(input) + " is not a constant");
    std::vector<int64_t> out;
    for (double x : numbers(*c)) out.push_back(int64_t(x));
    return out;
  }

  // Evaluates a node whose inputs are all constants (false: not an op folded here).
  bool fold(const onnx::NodeProto& n) {
    const std::string& op = n.op_type();
    std::vector<const Constant*> in;
    for (const auto& v : n.input()) in.push_back(v.empty() ? nullptr : constant(v));
    auto set = [&](Constant c) { constants_[n.output(0)] = std::move(c); };
    if (op == "Shape") {
      std::vector<int64_t> d = isActivation(n.input(0)) ? dimsOf(n.input(0)) : in[0] ? in[0]->dims : std::vector<int64_t>{};
      const int64_t r = int64_t(d.size());
      int64_t start = axisOf(intAttr(n, "start", 0), d.size()), end = attribute(n, "end") ? axisOf(intAttr(n, "end", r), d.size()) : r;
      start = std::clamp<int64_t>(start, 0, r);
      end = std::clamp<int64_t>(end, start, r);
      set(make({end - start}, std::vector<double>(d.begin() + start, d.begin() + end), false));
      return true;
    }
    for (const Constant* c : in)
      if (!c && !(op == "Clip" || op == "Slice" || op == "Squeeze" || op == "Unsqueeze")) return false;
    if (in.empty() || !in[0]) return false;
    const Constant& a = *in[0];
    const std::vector<double> av = numbers(a);
    if (op == "Cast") {
      const int64_t to = intAttr(n, "to", 1);
      std::vector<double> v = av;
      if (to != onnx::TensorProto::FLOAT)
        for (double& x : v) x = std::trunc(x);
      set(make(a.dims, v, to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::DOUBLE));
      return true;
    }
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Equal" || op == "Pow" || op == "Less" ||
        op == "Greater") {
      if (in.size() != 2) return false;
      const Constant& b = *in[1];
      std::vector<int64_t> dims;
      if (!broadcastDims(a.dims, b.dims, dims)) throw SaveError("constant operands that do not broadcast");
      const std::vector<double> bv = numbers(b);
      std::vector<double> out(std::size_t(countOf(dims)));
      const bool isFloat = a.isFloat || b.isFloat;
      for (int64_t e = 0; e < countOf(dims); ++e) {
        const std::vector<int64_t> c = coordOf(e, dims);
        const double x = av[std::size_t(broadcastIndex(a.dims, dims, c))], y = bv[std::size_t(broadcastIndex(b.dims, dims, c))];
        double r = op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : op == "Pow" ? std::pow(x, y)
                 : op == "Equal" ? double(x == y) : op == "Less" ? double(x < y) : op == "Greater" ? double(x > y)
                 : isFloat ? x / y : std::trunc(x / y);
        if (op == "Div" && isFloat) r = double(float(x) / float(y));
        out[std::size_t(e)] = r;
      }
      const bool logical = op == "Equal" || op == "Less" || op == "Greater";
      set(make(dims, out, isFloat && !logical));
      return true;
    }
    if (op == "Sqrt" || op == "Neg" || op == "Not") {
      std::vector<double> v = av;
      for (double& x : v) x = op == "Sqrt" ? double(std::sqrt(float(x))) : op == "Neg" ? -x : double(x == 0);
      set(make(a.dims, v, a.isFloat && op != "Not"));
      return true;
    }
    if (op == "Where") {
      if (in.size() != 3) return false;
      std::vector<int64_t> d1, dims;
      if (!broadcastDims(a.dims, in[1]->dims, d1) || !broadcastDims(d1, in[2]->dims, dims))
        throw SaveError("constant operands that do not broadcast");
      const std::vector<double> x = numbers(*in[1]), y = numbers(*in[2]);
      std::vector<double> out(std::size_t(countOf(dims)));
      for (int64_t e = 0; e < countOf(dims); ++e) {
        const std::vector<int64_t> c = coordOf(e, dims);
        out[std::size_t(e)] = av[std::size_t(broadcastIndex(a.dims, dims, c))] != 0
                                  ? x[std::size_t(broadcastIndex(in[1]->dims, dims, c))]
                                  : y[std::size_t(broadcastIndex(in[2]->dims, dims, c))];
      }
      set(make(dims, out, in[1]->isFloat || in[2]->isFloat));
      return true;
    }
    if (op == "ConstantOfShape") {
      std::vector<int64_t> dims;
      for (double x : av) dims.push_back(int64_t(x));
      double value = 0;
      bool isFloat = true;
      if (const auto* v = attribute(n, "value"); v && v->has_t()) {
        const Constant c = decode(v->t(), "constant");
        value = numbers(c).empty() ? 0.0 : numbers(c)[0];
        isFloat = c.isFloat;
      }
      set(make(dims, std::vector<double>(std::size_t(countOf(dims)), value), isFloat));
      return true;
    }
    if (op == "Range") {
      const double start = av.at(0), limit = numbers(*in.at(1)).at(0), delta = numbers(*in.at(2)).at(0);
      if (delta == 0) throw SaveError("a range with step 0");
      std::vector<double> v;
      for (double x = start; delta > 0 ? x < limit : x > limit; x += delta) v.push_back(x);
      set(make({int64_t(v.size())}, v, a.isFloat));
      return true;
    }
    // element moves: the same index arithmetic as for activations (see move())
    std::vector<int64_t> dims;
    std::vector<int64_t> gather;
    if (!moveIndices(n, a.dims, dims, gather)) return false;
    std::vector<double> v(gather.size());
    for (std::size_t i = 0; i < gather.size(); ++i) v[i] = gather[i] < 0 ? 0.0 : av[std::size_t(gather[i])];
    Constant c = make(dims, v, a.isFloat);
    if (op == "Concat") {  // the other constants' elements
      int64_t offset = 0;
      const int64_t axis = axisOf(intAttr(n, "axis", 0), a.dims.size());
      for (const Constant* part : in) {
        const std::vector<double> pv = numbers(*part);
        for (int64_t e = 0; e < countOf(part->dims); ++e) {
          std::vector<int64_t> coord = coordOf(e, part->dims);
          coord[std::size_t(axis)] += offset;
          int64_t at = 0;
          for (std::size_t k = 0; k < coord.size(); ++k) at = at * dims[k] + coord[k];
          if (c.isFloat) c.values[std::size_t(at)] = float(pv[std::size_t(e)]);
          else c.integers[std::size_t(at)] = int64_t(pv[std::size_t(e)]);
        }
        offset += part->dims[std::size_t(axis)];
      }
    }
    set(std::move(c));
    return true;
  }

  // The output dims of an op that moves the elements of its first input (of dims `d`) and, for
  // each output element, the input element it takes (-1: none, a zero or another Concat input).
  // Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Slice, Gather (constant indices), Expand,
  // Concat (the first input's part). False for other ops.
  bool moveIndices(const onnx::NodeProto& n, const std::vector<int64_t>& d, std::vector<int64_t>& out,
                   std::vector<int64_t>& gather) {
    const std::string& op = n.op_type();
    const std::size_t rank = d.size();
    auto identity = [&] {
      gather.resize(std::size_t(countOf(out)));
      for (std::size_t i = 0; i < gather.size(); ++i) gather[i] = int64_t(i);
    };
    if (op == "Reshape") {
      const std::vector<int64_t> target = ints(n, 1);
      const bool allowZero = intAttr(n, "allowzero", 0) != 0;
      out.clear();
      int64_t known = 1, infer = -1;
      for (std::size_t i = 0; i < target.size(); ++i) {
        int64_t t = target[i];
        if (t == 0 && !allowZero) {
          if (i >= rank) throw SaveError("a reshape copies a dimension its input lacks");
          t = d[i];
        }
        if (t == -1) {
          if (infer >= 0) throw SaveError("a reshape with two inferred dimensions");
          infer = int64_t(i);
          out.push_back(1);
          continue;
        }
        if (t < 0) throw SaveError("a reshape to a negative dimension");
        known *= t;
        out.push_back(t);
      }
      if (infer >= 0) {
        if (known == 0 || countOf(d) % known) throw SaveError("a reshape whose inferred dimension does not divide");
        out[std::size_t(infer)] = countOf(d) / known;
      }
      if (countOf(out) != countOf(d)) {
        std::string from, to;
        for (int64_t v : d) from += (from.empty() ? "" : "x") + std::to_string(v);
        for (int64_t v : target) to += (to.empty() ? "" : ",") + std::to_string(v);
        throw SaveError("a reshape of " + from + " (one sample) to [" + to + "] changes the element count");
      }
      identity();
      return true;
    }
    if (op == "Flatten") {
      const int64_t axis = axisOf(intAttr(n, "axis", 1), rank);
      int64_t left = 1;
      for (int64_t i = 0; i < axis; ++i) left *= d[std::size_t(i)];
      out = {left, countOf(d) / std::max<int64_t>(left, 1)};
      identity();
      return true;
    }
    if (op == "Squeeze" || op == "Unsqueeze") {
      std::vector<int64_t> axes = n.input_size() > 1 ? ints(n, 1) : intsAttr(n, "axes");
      out = d;
      if (op == "Squeeze") {
        std::set<int64_t> drop;
        for (int64_t a : axes) drop.insert(axisOf(a, rank));
        out.clear();
        for (std::size_t i = 0; i < rank; ++i)
          if (!(drop.count(int64_t(i)) || (axes.empty() && d[i] == 1))) out.push_back(d[i]);
          else if (d[i] != 1) throw SaveError("a squeeze of a dimension that is not 1");
      } else {
        const std::size_t r = rank + axes.size();
        std::set<int64_t> add;
        for (int64_t a : axes) add.insert(axisOf(a, r));
        out.clear();
        std::size_t k = 0;
        for (std::size_t i = 0; i < r; ++i) out.push_back(add.count(int64_t(i)) ? 1 : d.at(k++));
      }
      identity();
      return true;
    }
    if (op == "Transpose") {
      std::vector<int64_t> perm = intsAttr(n, "perm");
      if (perm.empty())
        for (std::size_t i = rank; i-- > 0;) perm.push_back(int64_t(i));
      if (perm.size() != rank) throw SaveError("a permutation of the wrong rank");
      out.clear();
      for (int64_t p : perm) out.push_back(d.at(std::size_t(p)));
      const std::vector<int64_t> st = stridesOf(d);
      gather.resize(std::size_t(countOf(out)));
      for (int64_t e = 0; e < countOf(out); ++e) {
        const std::vector<int64_t> c = coordOf(e, out);
        int64_t at = 0;
        for (std::size_t k = 0; k < rank; ++k) at += c[k] * st[std::size_t(perm[k])];
        gather[std::size_t(e)] = at;
      }
      return true;
    }
    if (op == "Slice") {
      const std::vector<int64_t> starts = ints(n, 1), ends = ints(n, 2);
      std::vector<int64_t> axes = n.input_size() > 3 && !n.input(3).empty() ? ints(n, 3) : std::vector<int64_t>{};
      std::vector<int64_t> steps = n.input_size() > 4 && !n.input(4).empty() ? ints(n, 4) : std::vector<int64_t>{};
      if (axes.empty())
        for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
      if (steps.empty()) steps.assign(starts.size(), 1);
      std::vector<int64_t> first(rank, 0), step(rank, 1);
      out = d;
      for (std::size_t i = 0; i < starts.size(); ++i) {
        const std::size_t ax = std::size_t(axisOf(axes.at(i), rank));
        const int64_t dim = d.at(ax), st = steps.at(i);
        if (st <= 0) throw SaveError("a slice with a step below 1");
        int64_t b = starts[i] < 0 ? starts[i] + dim : starts[i], e = ends.at(i) < 0 ? ends[i] + dim : ends[i];
        b = std::clamp<int64_t>(b, 0, dim);
        e = std::clamp<int64_t>(e, 0, dim);
        first[ax] = b;
        step[ax] = st;
        out[ax] = e > b ? (e - b + st - 1) / st : 0;
      }
      const std::vector<int64_t> sd = stridesOf(d);
      gather.resize(std::size_t(countOf(out)));
      for (int64_t e = 0; e < countOf(out); ++e) {
        const std::vector<int64_t> c = coordOf(e, out);
        int64_t at = 0;
        for (std::size_t k = 0; k < rank; ++k) at += (first[k] + c[k] * step[k]) * sd[k];
        gather[std::size_t(e)] = at;
      }
      return true;
    }
    if (op == "Gather") {
      const Constant* idx = constant(n.input(1));
      if (!idx || idx->isFloat) throw SaveError("only gathers at constant indices are mapped");
      const std::size_t ax = std::size_t(axisOf(intAttr(n, "axis", 0), rank));
      out.clear();
      out.insert(out.end(), d.begin(), d.begin() + long(ax));
      out.insert(out.end(), idx->dims.begin(), idx->dims.end());
      out.insert(out.end(), d.begin() + long(ax) + 1, d.end());
      const std::vector<int64_t> sd = stridesOf(d);
      gather.resize(std::size_t(countOf(out)));
      const std::size_t ir = idx->dims.size();
      for (int64_t e = 0; e < countOf(out); ++e) {
        const std::vector<int64_t> c = coordOf(e, out);
        int64_t flatIdx = 0;
        for (std::size_t k = 0; k < ir; ++k) flatIdx = flatIdx * idx->dims[k] + c[ax + k];
        int64_t j = idx->integers.at(std::size_t(flatIdx));
        if (j < 0) j += d[ax];
        if (j < 0 || j >= d[ax]) throw SaveError("a gather index out of range");
        int64_t at = j * sd[ax];
        for (std::size_t k = 0; k < ax; ++k) at += c[k] * sd[k];
        for (std::size_t k = ax + 1; k < rank; ++k) at += c[k + ir - 1] * sd[k];
        gather[std::size_t(e)] = at;
      }
      return true;
    }
    if (op == "Expand") {
      std::vector<int64_t> shape = ints(n, 1);
      if (!broadcastDims(d, shape, out)) throw SaveError("an expand that does not broadcast");
      gather.resize(std::size_t(countOf(out)));
      for (int64_t e = 0; e < countOf(out); ++e) gather[std::size_t(e)] = broadcastIndex(d, out, coordOf(e, out));
      return true;
    }
    if (op == "Concat") {
      const std::size_t ax = std::size_t(axisOf(intAttr(n, "axis", 0), rank));
      out = d;
      out[ax] = 0;
      int64_t offset = -1;
      for (int i = 0; i < n.input_size(); ++i) {
        const std::vector<int64_t> pd = isActivation(n.input(i)) ? dimsOf(n.input(i)) : constant(n.input(i))->dims;
        if (pd.size() != rank) throw SaveError("concatenated tensors of different ranks");
        for (std::size_t k = 0; k < rank; ++k)
          if (k != ax && pd[k] != d[k]) throw SaveError("concatenated tensors of different shapes");
        if (i == concatPart_) offset = out[ax];
        out[ax] += pd[ax];
      }
      const std::vector<int64_t> sd = stridesOf(d);
      gather.assign(std::size_t(countOf(out)), -1);
      for (int64_t e = 0; e < countOf(out); ++e) {
        const std::vector<int64_t> c = coordOf(e, out);
        if (c[ax] < offset || c[ax] >= offset + d[ax]) continue;
        int64_t at = 0;
        for (std::size_t k = 0; k < rank; ++k) at += (k == ax ? c[k] - offset : c[k]) * sd[k];
        gather[std::size_t(e)] = at;
      }
      return true;
    }
    return false;
  }

  void nodeInner(const onnx::NodeProto& n) {
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
    if (op == "Dropout") {  // identity at inference; refused where it would drop values
      if (n.input_size() >= 3 && !n.input(2).empty()) {
        const Constant* mode = constant(n.input(2));
        if (!mode) return refuse(n, "its training_mode is not a constant");
        const bool training = mode->isFloat ? (!mode->values.empty() && mode->values[0] != 0)
                                            : (!mode->integers.empty() && mode->integers[0] != 0);
        if (training)
          return refuse(n, "Dropout in training mode (training_mode=1) drops values at random; export with model.eval()");
      }
      if (n.output_size() > 1 && !n.output(1).empty() && consumers_[n.output(1)] > 0)
        return refuse(n, "its mask output is read; SAVE maps Dropout as the identity of inference");
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
    bool anyActivation = false;
    for (const auto& in : n.input()) anyActivation = anyActivation || isActivation(in);
    if (op == "Shape" || !anyActivation) {  // shape arithmetic, masks and other constants
      concatPart_ = 0;
      try {
        if (fold(n)) return;
      } catch (const SaveError& e) {
        return refuse(n, e.what());
      } catch (const std::exception& e) {
        return refuse(n, std::string("a constant it cannot evaluate: ") + e.what());
      }
    }
    if (geluInside_.count(n.output(0))) return;  // part of an erf GELU, mapped at its last node
    if (auto g = geluEnd_.find(n.output(0)); g != geluEnd_.end()) {
      const int x = values_.at(g->second);
      try {
        values_[n.output(0)] = b_.gelu(name, x);
      } catch (const SaveError& e) {
        return refuse(n, e.what());
      }
      dims_[n.output(0)] = dimsOf(g->second);
      return;
    }
    if (op == "Div" && matchGelu(n)) return;
    if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Transpose" ||
        op == "Slice" || op == "Gather" || op == "Expand" || op == "Concat")
      return move(n);
    if (op == "Split") return split(n);
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
      if (op == "MatMul" && n.input_size() == 2 && isActivation(n.input(1)))
        return refuse(n, "a product of a constant and an activation (constant on the left) is not mapped");
      return refuse(n, "its first input is not computed from the model's input (constant folding left it?)");
    }
    const int x = values_.at(n.input(0));
    int out = -1;
    try {
      if (op == "Conv") {
        out = conv(n, x);
      } else if (op == "Gemm") {
        const std::vector<int64_t> d = dimsOf(n.input(0));
        if ((out = gemm(n, x)) < 0) return;
        if (d.size() == 2) dims_[n.output(0)] = {d[0], b_.node(out).features()};
      } else if (op == "MatMul") {
        if (n.input_size() == 2 && isActivation(n.input(1))) return matmulActivations(n);
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
        return;
      } else if (op == "Add" || op == "Mul" || op == "Div") {
        return binary(n, n.input(0), n.input(1));
      } else if (op == "Relu") {
        out = b_.relu(name, x);
      } else if (op == "Sigmoid") {
        out = b_.unary(Op::Sigmoid, name, x);
      } else if (op == "Tanh") {
        out = b_.unary(Op::Tanh, name, x);
      } else if (op == "Softmax") {
        const int64_t rank = int64_t(dimsOf(n.input(0)).size());
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
        out = b_.layerNorm(name, x, eps);
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

  // Reshape, Flatten, Squeeze, Unsqueeze (views), Transpose, Slice, Gather, Expand and Concat (a
  // Select over the one computed input; a Concat's constant parts added after it).
  void move(const onnx::NodeProto& n) {
    const std::string& op = n.op_type();
    int part = -1;
    for (int i = 0; i < n.input_size(); ++i)
      if (isActivation(n.input(i))) {
        if (part >= 0 && op == "Concat") return refuse(n, "a concatenation of several computed tensors is not mapped");
        part = i;
        if (op != "Concat") break;
      }
    if (part < 0 || (part != 0 && op != "Concat")) return refuse(n, "its data input is not computed from the model's input");
    if (op == "Concat")
      for (int i = 0; i < n.input_size(); ++i) {
        const Constant* c = i == part ? nullptr : constant(n.input(i));
        if (i != part && (!c || !c->isFloat)) return refuse(n, "a concatenated constant that is not float32");
      }
    concatPart_ = part;
    const std::string name = nameOf(n);
    std::vector<int64_t> out, gather;
    try {
      if (!moveIndices(n, dimsOf(n.input(part)), out, gather)) return refuse(n, "internal: no index map");
      const int x = values_.at(n.input(part));
      int v = gathered(name, x, sampleShape(out), gather);  // a view where no data moves
      if (op == "Concat") {  // the constants' elements where the Select left zeros
        const std::size_t ax = std::size_t(axisOf(intAttr(n, "axis", 0), out.size()));
        std::vector<float> fill(std::size_t(countOf(out)), 0.0f);
        int64_t offset = 0;
        for (int i = 0; i < n.input_size(); ++i) {
          const std::vector<int64_t> pd = i == part ? dimsOf(n.input(i)) : constant(n.input(i))->dims;
          if (i != part) {
            const Constant& c = *constant(n.input(i));
            for (int64_t e = 0; e < countOf(pd); ++e) {
              std::vector<int64_t> coord = coordOf(e, pd);
              coord[ax] += offset;
              int64_t at = 0;
              for (std::size_t k = 0; k < coord.size(); ++k) at = at * out[k] + coord[k];
              fill[std::size_t(at)] = c.values[std::size_t(e)];
            }
          }
          offset += pd[ax];
        }
        params_[name + ".constant"] = tensorOf(fill, sampleShape(out));
        v = b_.addConst(name + ".constant", v, name + ".constant");
      }
      setActivation(n.output(0), name, v, out);
    } catch (const SaveError& e) {
      refuse(n, e.what());
    }
  }

  // Split along an axis into parts given by input 1, the `split` attribute or equal shares.
  void split(const onnx::NodeProto& n) {
    if (!isActivation(n.input(0))) return refuse(n, "its input is not computed from the model's input");
    try {
      const std::vector<int64_t> d = dimsOf(n.input(0));
      const std::size_t ax = std::size_t(axisOf(intAttr(n, "axis", 0), d.size()));
      std::vector<int64_t> parts = n.input_size() > 1 && !n.input(1).empty() ? ints(n, 1) : intsAttr(n, "split");
      if (parts.empty()) {
        if (d[ax] % n.output_size()) return refuse(n, "a split into unequal parts without sizes");
        parts.assign(std::size_t(n.output_size()), d[ax] / n.output_size());
      }
      if (int(parts.size()) != n.output_size()) return refuse(n, "split sizes that do not match its outputs");
      const int x = values_.at(n.input(0));
      const std::vector<int64_t> sd = stridesOf(d);
      int64_t offset = 0;
      for (int k = 0; k < n.output_size(); ++k) {
        std::vector<int64_t> out = d;
        out[ax] = parts[std::size_t(k)];
        std::vector<int64_t> gather(std::size_t(countOf(out)));
        for (int64_t e = 0; e < countOf(out); ++e) {
          const std::vector<int64_t> c = coordOf(e, out);
          int64_t at = 0;
          for (std::size_t j = 0; j < d.size(); ++j) at += (j == ax ? c[j] + offset : c[j]) * sd[j];
          gather[std::size_t(e)] = at;
        }
        offset += parts[std::size_t(k)];
        const std::string name = nameOf(n) + "." + std::to_string(k);
        setActivation(n.output(k), name, gathered(name, x, sampleShape(out), gather), out);
      }
    } catch (const SaveError& e) {
      refuse(n, e.what());
    }
  }

  // A product of two computed tensors, [..., M, K] x [..., K, N] with the same leading dims
  // (attention's scores and values): SAVE's matmul of A and B transposed, per leading index.
  void matmulActivations(const onnx::NodeProto& n) {
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

  // GELU as exporters without a Gelu op write it: Div(x, sqrt 2) -> Erf -> Add(1) -> Mul(x) ->
  // Mul(0.5), each the one reader of the one before. True (and the chain remembered) on a match.
  bool matchGelu(const onnx::NodeProto& div) {
    auto only = [&](const std::string& v, const char* op) -> const onnx::NodeProto* {
      auto it = readers_.find(v);
      if (it == readers_.end() || it->second.size() != 1 || it->second[0]->op_type() != op || consumers_[v] != 1) return nullptr;
      return it->second[0];
    };
    auto scalar = [&](const onnx::NodeProto& n, const std::string& other, double want, double tol) {
      for (const auto& in : n.input())
        if (in != other) {
          const Constant* c = constant(in);
          return c && c->isFloat && c->values.size() == 1 && std::fabs(double(c->values[0]) - want) <= tol;
        }
      return false;
    };
    if (div.input_size() != 2 || !isActivation(div.input(0)) || !scalar(div, div.input(0), std::sqrt(2.0), 1e-6)) return false;
    const std::string x = div.input(0);
    const onnx::NodeProto* erf = only(div.output(0), "Erf");
    const onnx::NodeProto* add = erf ? only(erf->output(0), "Add") : nullptr;
    if (!add || !scalar(*add, erf->output(0), 1.0, 0)) return false;
    const onnx::NodeProto* mul = only(add->output(0), "Mul");
    if (!mul || !(mul->input(0) == x || mul->input(1) == x)) return false;
    const onnx::NodeProto* half = only(mul->output(0), "Mul");
    if (!half || !scalar(*half, mul->output(0), 0.5, 0)) return false;
    for (const std::string& v : {div.output(0), erf->output(0), add->output(0), mul->output(0)}) geluInside_.insert(v);
    geluEnd_[half->output(0)] = x;
    return true;
  }

  void binary(const onnx::NodeProto& n, const std::string& a, const std::string& other) {
    const std::string name = nameOf(n);
    const int x = values_.at(a);
    if (isActivation(other)) {
      if (n.op_type() == "Div") return refuse(n, "a division by an activation is not mapped");
      const int y = values_.at(other);
      if (b_.node(x).shape != b_.node(y).shape) return refuse(n, "operands of different shapes (broadcasting is not mapped)");
      values_[n.output(0)] = n.op_type() == "Add" ? b_.addNodes(name, x, y) : b_.mul(name, x, y);
      return;
    }
    const Constant* c = constant(other);
    if (!c || !c->isFloat) return refuse(n, "its constant operand is not a float32 tensor");
    if (n.op_type() == "Mul" || n.op_type() == "Div") {
      // a scalar factor, as one-channel affine map x * s + 0 (a division as the product with 1 / c:
      // the same bits when c is a power of two, as attention's 1 / sqrt(head width) mostly is)
      if (c->values.size() != 1) return refuse(n, "a product with a constant that is not a scalar is not mapped");
      if (n.op_type() == "Div" && a != n.input(0)) return refuse(n, "a constant divided by an activation is not mapped");
      const float f = n.op_type() == "Div" ? 1.0f / c->values[0] : c->values[0];
      if (!std::isfinite(f)) return refuse(n, "a scale that is not finite");
      const int64_t size = b_.node(x).size();
      const int flat = shaped(name, x, {1, size});
      setActivation(n.output(0), name, b_.affine(name, flat, {f}, {0.0f}), dimsOf(a));
      return;
    }
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
    // An attention mask's -inf (a causal mask): before a softmax, -1e30 gives the same exact zeros
    // (exp of about -1e30 underflows to 0) and keeps every range finite; elsewhere it is refused.
    bool infinite = false;
    for (float& v : expanded)
      if (std::isinf(v)) {
        infinite = true;
        if (v > 0) return refuse(n, "a constant +inf is not mapped");
        v = -1e30f;
      } else if (std::isnan(v)) {
        return refuse(n, "a NaN constant");
      }
    if (infinite) {
      auto r = readers_.find(n.output(0));
      if (r == readers_.end() || r->second.size() != 1 || r->second[0]->op_type() != "Softmax" || consumers_[n.output(0)] != 1)
        return refuse(n, "a -inf constant that does not mask a softmax's input is not mapped");
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
  std::map<std::string, std::vector<int64_t>> dims_;        // full ONNX dims of activations (batch 1)
  std::map<std::string, std::vector<const onnx::NodeProto*>> readers_;
  std::set<std::string> geluInside_;                      // values inside an erf GELU chain
  std::map<std::string, std::string> geluEnd_;            // the chain's last value -> its input
  int concatPart_ = 0;                                    // the Concat input moveIndices places
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
