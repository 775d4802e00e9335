// SPDX-License-Identifier: MIT
// libpeat_onnx.so: reads an ONNX model with Debian's libonnx (protobuf, checker, shape inference)
// and maps it onto SAVE's graph (core/save/graph_builder.h). Loaded at run time by `peat save -m
// FILE.onnx` and by the probe helper, which runs it first on a file from someone else
// (core/save/onnx_model.cpp); no other program maps protobuf. This file walks the graph and keeps
// names and shapes; the steps live beside it (see onnx_import_detail.h).
#include "core/save/onnx_import_detail.h"  // first: it includes onnx/checker.h first

#include <cctype>
#include <cstdio>
#include <stdexcept>
#include <cstring>
#include <sstream>

namespace peat::save::onnx_import {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Graph Importer::run() {
  try {
    return mapped();
  } catch (const SaveError& e) {
    if (!wholeSample_) throw;
    throw SaveError(std::string(e.what()) + " (" + g_.batch + ")");  // why the batch reading was declined
  }
}

Graph Importer::mapped() {
  load();
  const onnx::GraphProto& graph = model_.graph();
  for (const onnx::TensorProto& t : graph.initializer()) {
    constants_[t.name()] = decode(t, "initializer");
    foldBudget_ += countOf(constants_[t.name()].dims);
  }
  if (replacements_) replace();
  for (const onnx::NodeProto& n : graph.node())  // Constant nodes first: patterns look ahead at them
    if (n.op_type() == "Constant" && n.output_size() == 1)
      if (const auto* a = attribute(n, "value"); a && a->has_t()) {
        constants_[n.output(0)] = decode(a->t(), "constant");
        foldBudget_ += countOf(constants_[n.output(0)].dims);  // weights stored as Constant nodes count as initializers
      }
  input();
  for (const onnx::NodeProto& n : graph.node())
    for (const auto& in : n.input()) {
      ++consumers_[in];
      readers_[in].push_back(&n);
    }
  for (const auto& out : graph.output()) ++consumers_[out.name()];
  for (const onnx::NodeProto& n : graph.node()) {
    try {
      node(n);
    } catch (const std::logic_error& e) {
      // an index past its bounds in a file from someone else (a Slice's axes=[99], a Transpose's
      // perm=[5,5], a Split into negative sizes): the node named, not the library's bare words
      refuse(n, std::string("has an axis, permutation or size out of range (") + e.what() + ")");
    }
  }
  if (!unsupported_.empty()) {
    std::string list;
    for (const std::string& u : unsupported_) list += (list.empty() ? "" : "; ") + u;
    throw SaveError("ONNX model '" + path_ + "' has " + std::to_string(unsupported_.size()) + " node" +
                    (unsupported_.size() == 1 ? "" : "s") + " SAVE cannot bound: " + list);
  }
  if (graph.output_size() == 0) throw SaveError("ONNX model '" + path_ + "' has no output");
  std::vector<int> outputs;
  std::set<std::string> outputNames;
  for (const auto& out : graph.output()) {
    if (!outputNames.insert(out.name()).second)
      throw SaveError("ONNX model '" + path_ + "' names two outputs '" + out.name() + "'");
    auto it = values_.find(out.name());
    if (it == values_.end())
      throw SaveError("ONNX model '" + path_ + "': its output '" + out.name() + "' is not computed from its input");
    checkDeclaredOutput(out, it->second);
    outputs.push_back(it->second);
  }
  g_.output = outputs[0];
  if (outputs.size() > 1) {  // several outputs: one node that lays them end to end, each part named
    std::vector<int64_t> gather;
    for (int i = 0; i < graph.output_size(); ++i) {
      const Node& n = b_.node(outputs[std::size_t(i)]);
      g_.outputs.push_back(makePart(graph.output(i).name(), int64_t(gather.size()), n.shape));
      for (int64_t e = 0; e < n.size(); ++e) gather.push_back(int64_t(gather.size()));
    }
    g_.output = b_.select("outputs", outputs, {int64_t(gather.size())}, gather);
  }
  pruneDeadNodes();
  if (!replacements_) g_.model = path_;
  return g_;
}

// --- helpers for nodes
const onnx::AttributeProto* Importer::attribute(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
int64_t Importer::intAttr(const onnx::NodeProto& n, const char* name, int64_t fallback) {
  const auto* a = attribute(n, name);
  return a ? a->i() : fallback;
}
float Importer::floatAttr(const onnx::NodeProto& n, const char* name, float fallback) {
  const auto* a = attribute(n, name);
  return a ? a->f() : fallback;
}
std::vector<int64_t> Importer::intsAttr(const onnx::NodeProto& n, const char* name) {
  const auto* a = attribute(n, name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
}
// The node's name in SAVE's results: the module path where the exporter left one, from the
// weight's initializer ("conv1.weight" -> "conv1") or the node's scope ("/layer1/layer1.0/conv1/Conv"
// -> "layer1.0.conv1", "/features/features.2/conv/conv.0/conv.0.0/Conv" -> "features.2.conv.0.0");
// else the node's name or its output's.
std::string Importer::nameOf(const onnx::NodeProto& n) {
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

void Importer::refuse(const onnx::NodeProto& n, const std::string& why) {
  unsupported_.push_back(n.op_type() + " '" + nameOf(n) + "': " + why);
  for (const auto& out : n.output()) poisoned_.insert(out);
}

// A float weight of a node, stored under the builder's name; false (and the node refused) if not one.
bool Importer::weight(const onnx::NodeProto& n, const std::string& value, const std::string& as,
                      std::vector<int64_t> wantDims) {
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
store::Tensor Importer::tensorOf(const std::vector<float>& v, const std::vector<int64_t>& dims) {
  store::Tensor t;
  t.dtype = store::DType::F32;
  t.shape.assign(dims.begin(), dims.end());
  t.bytes.resize(v.size() * 4);
  if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

void Importer::node(const onnx::NodeProto& n) {
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
std::vector<int64_t> Importer::dimsOf(const std::string& v) const {
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
std::vector<int64_t> Importer::sampleShape(const std::vector<int64_t>& d) {
  if (d.size() >= 2 && d[0] == 1) return std::vector<int64_t>(d.begin() + 1, d.end());
  return d.empty() ? std::vector<int64_t>{1} : d;
}
// A view of x (of a view: of its input; no chains of copies).
int Importer::shaped(const std::string& name, int x, const std::vector<int64_t>& shape) {
  if (b_.node(x).shape == shape) return x;
  while (x > 0 && b_.node(x).op == Op::Flatten && b_.node(b_.node(x).inputs[0]).size() == b_.node(x).size()) {
    x = b_.node(x).inputs[0];
    if (b_.node(x).shape == shape) return x;
  }
  return b_.view(name + ".view", x, shape);
}
// A Select of x, composed with the views and Selects before it (one gather from their sources
// instead of a chain).
int Importer::gathered(const std::string& name, int x, const std::vector<int64_t>& shape, std::vector<int64_t> gather) {
  std::vector<std::pair<int, int64_t>> from(gather.size(), {-1, -1});
  for (std::size_t i = 0; i < gather.size(); ++i)
    if (gather[i] >= 0) from[i] = traced(x, gather[i]);
  return selectOf(name, x, shape, from);
}

// The node and element that element e of node x copies, back through views and Selects (of one
// input or several); {-1, -1}: a Select's constant 0.
std::pair<int, int64_t> Importer::traced(int x, int64_t e) const {
  while (x > 0) {
    const Node& n = b_.node(x);
    if (n.op == Op::Flatten) {
      x = n.inputs[0];
      continue;
    }
    if (n.op != Op::Select) break;
    int64_t at = n.gather[std::size_t(e)];
    if (at < 0) return {-1, -1};
    std::size_t k = 0;
    while (k + 1 < n.inputs.size() && at >= b_.node(n.inputs[k]).size()) at -= b_.node(n.inputs[k++]).size();
    x = n.inputs[k];
    e = at;
  }
  return {x, e};
}

// A Select of the elements `from` (node, element; -1: the constant 0) over their distinct nodes
// in order of first use; a view where it copies one node whole in order. `fallback` is read where
// `from` reads nothing.
int Importer::selectOf(const std::string& name, int fallback, const std::vector<int64_t>& shape,
                       const std::vector<std::pair<int, int64_t>>& from) {
  std::vector<int> sources;
  std::map<int, int64_t> offset;
  for (const auto& [v, e] : from)
    if (v >= 0 && !offset.count(v)) {
      offset[v] = 0;
      sources.push_back(v);
    }
  if (sources.empty()) sources.push_back(fallback);
  int64_t total = 0;
  for (int v : sources) {
    offset[v] = total;
    total += b_.node(v).size();
  }
  std::vector<int64_t> gather(from.size());
  bool same = sources.size() == 1 && int64_t(from.size()) == total;
  for (std::size_t i = 0; i < from.size(); ++i) {
    gather[i] = from[i].first < 0 ? -1 : offset[from[i].first] + from[i].second;
    same = same && gather[i] == int64_t(i);
  }
  if (same) return shaped(name, sources[0], shape);
  return b_.select(name, sources, shape, std::move(gather));
}

// Drops the nodes the output does not read (views and gathers composed away), renumbering the rest.
void Importer::pruneDeadNodes() {
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
void Importer::setActivation(const std::string& v, const std::string& name, int node, const std::vector<int64_t>& dims) {
  values_[v] = shaped(name, node, sampleShape(dims));
  dims_[v] = dims;
}

}  // namespace peat::save::onnx_import

// The module's entry point (core/save/onnx_model.cpp finds it with dlsym): fills *graph and returns
// 0, or writes a one-line reason into `error` and returns 1. `replacements` is null or a
// std::map<std::string, store::Tensor> of initializers to replace by name (the module is built with
// peat, so C++ types may cross).
extern "C" __attribute__((visibility("default"))) int peat_onnx_import_v1(const char* path, const void* replacements,
                                                                         void* graph, char* error,
                                                                         unsigned long errorSize) {
  try {
    const auto* parameters = static_cast<const std::map<std::string, peat::store::Tensor>*>(replacements);
    *static_cast<peat::save::Graph*>(graph) = peat::save::onnx_import::Importer(path, parameters).run();
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error, errorSize, "%s", e.what());
    return 1;
  }
}
