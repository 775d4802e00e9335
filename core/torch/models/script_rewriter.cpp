// SPDX-License-Identifier: MIT
#include "core/torch/models/script_rewriter.h"

#include <torch/csrc/jit/ir/named_value.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>

namespace peat::models {

namespace {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::NamedValue;
using torch::jit::Node;
using torch::jit::Value;

const std::set<std::string>& unroutableKinds() {
  static const std::set<std::string> kinds{
      "aten::conv3d",        "aten::conv_transpose1d", "aten::conv_transpose2d",
      "aten::conv_transpose3d", "aten::einsum",        "aten::addbmm",
      "aten::addmv",         "aten::mv",               "aten::dot",
      "aten::vdot",          "aten::inner",            "aten::bilinear",
      "aten::tensordot",     "aten::chain_matmul",     "aten::linalg_multi_dot",
      "aten::_transformer_encoder_layer_fwd", "aten::_native_multi_head_attention",
      "aten::mkldnn_convolution", "aten::thnn_conv2d", "aten::slow_conv_dilated2d",
      "aten::cudnn_convolution", "aten::_convolution_mode"};
  return kinds;
}

// Recurrent layers: each step's gate GEMMs happen inside one ATen op the slot cannot enter, so
// they are listed as left on ATen (never skipped silently: `peat models --inspect` names them).
const std::set<std::string>& recurrentKinds() {
  static const std::set<std::string> kinds{
      "aten::lstm",      "aten::gru",       "aten::rnn_tanh",  "aten::rnn_relu",
      "aten::lstm_cell", "aten::gru_cell",  "aten::rnn_tanh_cell", "aten::rnn_relu_cell",
      "aten::_thnn_fused_lstm_cell", "aten::_thnn_fused_gru_cell", "aten::quantized_lstm", "aten::quantized_gru"};
  return kinds;
}

// Kernels a port rewrites that the slot has no op for yet: listed as left on ATen, one site each.
const std::set<std::string>& otherComputeKinds() {
  static const std::set<std::string> kinds{
      "aten::add",        "aten::add_",        "aten::sub",          "aten::sub_",         "aten::mul",
      "aten::mul_",       "aten::div",         "aten::div_",         "aten::batch_norm",   "aten::group_norm",
      "aten::instance_norm", "aten::hardtanh", "aten::hardtanh_",    "aten::hardswish",    "aten::hardswish_",
      "aten::hardsigmoid", "aten::hardsigmoid_", "aten::leaky_relu", "aten::leaky_relu_", "aten::elu",
      "aten::elu_",       "aten::mish",        "aten::softplus",     "aten::relu6",        "aten::max_pool1d",
      "aten::max_pool2d", "aten::avg_pool2d",  "aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d",
      "aten::adaptive_max_pool2d", "aten::mean", "aten::sum",        "aten::amax",         "aten::cat",
      "aten::pow",        "aten::sqrt",        "aten::rsqrt",        "aten::exp",          "aten::log",
      "aten::erf",        "aten::cumsum",      "aten::masked_fill",  "aten::where",        "aten::clamp",
      "aten::feature_dropout", "aten::alpha_dropout", "aten::cross_entropy_loss", "aten::nll_loss",
      "aten::mse_loss",   "aten::upsample_nearest2d", "aten::upsample_bilinear2d", "aten::norm",
      "aten::linalg_vector_norm", "aten::var", "aten::std", "aten::glu", "aten::prelu"};
  return kinds;
}

// Activations the slot routes, by their ATen kind (in-place forms too): the kind peat::activation takes.
const std::map<std::string, std::string>& activationKinds() {
  static const std::map<std::string, std::string> kinds{
      {"aten::relu", "relu"},       {"aten::relu_", "relu"},   {"aten::silu", "silu"},
      {"aten::silu_", "silu"},      {"aten::tanh", "tanh"},    {"aten::tanh_", "tanh"},
      {"aten::sigmoid", "sigmoid"}, {"aten::sigmoid_", "sigmoid"}};
  return kinds;
}

void collectNodes(Block* block, std::vector<Node*>& out) {
  for (Node* n : block->nodes()) {
    out.push_back(n);
    for (Block* b : n->blocks()) collectNodes(b, out);
  }
}

// "a.b.weight" when `v` is an attribute chain from the module (through transposes and views).
std::vector<std::string> attributePath(Value* v, Value* self) {
  static const std::set<std::string> passThrough{"aten::t", "aten::transpose", "aten::permute", "aten::contiguous",
                                                 "aten::detach", "aten::numpy_T", "aten::mT"};
  while (passThrough.count(v->node()->kind().toQualString())) v = v->node()->input(0);
  std::vector<std::string> names;
  while (v->node()->kind() == c10::prim::GetAttr) {
    names.push_back(v->node()->s(c10::attr::name));
    v = v->node()->input(0);
  }
  if (v != self) return {};
  std::reverse(names.begin(), names.end());
  return names;
}

std::string join(const std::vector<std::string>& parts, std::size_t count) {
  std::string out;
  for (std::size_t i = 0; i < count && i < parts.size(); ++i) out += (i ? "." : "") + parts[i];
  return out;
}

// The child of `m` that a call stack names `name`: a direct child, or one inside a container that
// has no forward of its own (a ModuleList, whose loop the trace or the compiler unrolled).
std::optional<std::pair<std::string, torch::jit::Module>> childNamed(const torch::jit::Module& m,
                                                                     const std::string& name) {
  for (const auto& c : m.named_children())
    if (c.name == name) return std::make_pair(c.name, c.value);
  for (const auto& c : m.named_children())
    if (!c.value.find_method("forward"))
      for (const auto& g : c.value.named_children())
        if (g.name == name) return std::make_pair(c.name + "." + g.name, g.value);
  return std::nullopt;
}

// The module path a node runs in, from its inlined call stack's instance names ("blocks", "0",
// "self_attn" -> "blocks.layers.0.self_attn"), or the traced scope where there is no call stack.
std::string modulePathOf(Node* n, const torch::jit::Module& root) {
  std::string path;
  if (auto cs = n->callstack()) {
    torch::jit::Module cur = root;
    for (const auto& entry : (*cs)->vec()) {
      const auto& info = std::get<2>(entry);
      if (!info || info->instance_name().empty()) continue;
      std::string part = info->instance_name();
      if (auto child = childNamed(cur, part)) {
        part = child->first;
        cur = child->second;
      }
      path += (path.empty() ? "" : ".") + part;
    }
    return path;
  }
  if (n->scope() && !n->scope()->isBlank()) {
    path = n->scope()->namesFromRoot();
    const auto slash = path.rfind('/');
    if (slash != std::string::npos) path = path.substr(slash + 1);
    const std::string prefix = "__module.";
    if (path.rfind(prefix, 0) == 0) path = path.substr(prefix.size());
    if (path == "__module") path.clear();
  }
  return path;
}


std::optional<c10::IValue> constantOf(Value* v) { return torch::jit::toIValue(v); }

class Rewriter {
 public:
  Rewriter(torch::jit::Module& module, std::shared_ptr<Graph> graph, bool fuseAttention)
      : module_(module), graph_(std::move(graph)), fuseAttention_(fuseAttention) {}

  std::vector<ScriptSite> run() {
    std::vector<Node*> nodes;
    if (fuseAttention_) {
      collectNodes(graph_->block(), nodes);
      std::vector<Node*> softmaxes;  // first: a fusion destroys other nodes of the list
      for (Node* n : nodes)
        if (n->kind().toQualString() == std::string("aten::softmax")) softmaxes.push_back(n);
      for (Node* n : softmaxes) fuseAttention(n);
      nodes.clear();
    }
    collectNodes(graph_->block(), nodes);
    for (Node* n : nodes) visit(n);
    torch::jit::EliminateDeadCode(graph_);
    return sites_;
  }

 private:
  // The layer name of a GEMM node: its weight's module path, else the module it runs in.
  std::string layerOf(Node* n, std::initializer_list<std::size_t> weightInputs, const std::string& shortOp) {
    for (std::size_t i : weightInputs) {
      if (i >= n->inputs().size()) continue;
      std::vector<std::string> path = attributePath(n->input(i), graph_->inputs()[0]);
      if (path.empty()) continue;
      std::string& last = path.back();
      if (last == "weight") return join(path, path.size() - 1);
      const std::string suffix = "_weight";
      if (last.size() > suffix.size() && last.compare(last.size() - suffix.size(), suffix.size(), suffix) == 0)
        last.resize(last.size() - suffix.size());
      return join(path, path.size());
    }
    const std::string scope = modulePathOf(n, module_);
    const std::string base = (scope.empty() ? "" : scope + ".") + shortOp;
    const int count = ++unnamed_[base];
    return count == 1 ? base : base + "#" + std::to_string(count);
  }

  // The tensor a weight input names in the module, when it is one of its attributes.
  std::optional<at::Tensor> weightTensor(Value* v) {
    const std::vector<std::string> path = attributePath(v, graph_->inputs()[0]);
    if (path.empty()) return std::nullopt;
    c10::IValue cur = module_._ivalue();
    for (const std::string& name : path) {
      if (!cur.isObject()) return std::nullopt;
      auto obj = cur.toObject();
      if (!obj->type()->hasAttribute(name)) return std::nullopt;
      cur = obj->getAttr(name);
    }
    if (!cur.isTensor()) return std::nullopt;
    return cur.toTensor();
  }

  void leave(Node* n, const std::string& layer, const std::string& reason) {
    sites_.push_back({layer, n->kind().toQualString(), false, reason, ""});
  }

  void replace(Node* n, const char* op, std::vector<NamedValue> args, const std::string& layer,
               const std::string& detail, const std::string& slotOp) {
    torch::jit::WithInsertPoint guard(n);
    args.emplace_back(graph_->insertConstant(layer));
    Value* out = graph_->insert(c10::Symbol::fromQualString(op), args);
    out->setType(n->output()->type());
    n->output()->replaceAllUsesWith(out);
    n->destroy();
    sites_.push_back({layer, lastKind_, true, detail, slotOp});
  }

  void visit(Node* n) {
    const std::string kind = n->kind().toQualString();
    lastKind_ = kind;
    if (kind == "aten::linear") {
      const std::string layer = layerOf(n, {1}, "linear");
      replace(n, "peat::linear", {n->input(0), n->input(1), n->input(2)}, layer, "linear", "linear");
    } else if (kind == "aten::conv1d" || kind == "aten::conv2d" || kind == "aten::_convolution") {
      visitConv(n, kind);
    } else if (kind == "aten::matmul" || kind == "aten::mm" || kind == "aten::bmm") {
      const std::string shortOp = kind.substr(6);
      const std::string layer = layerOf(n, {1, 0}, shortOp);
      replace(n, "peat::matmul", {n->input(0), n->input(1)}, layer, "matmul (" + shortOp + ")", "matmul");
    } else if (kind == "aten::addmm" || kind == "aten::baddbmm") {
      const std::string shortOp = kind.substr(6);
      const std::string layer = layerOf(n, {2, 1}, shortOp);
      if (n->inputs().size() != 5) return leave(n, layer, "an overload with " + std::to_string(n->inputs().size()) + " inputs");
      replace(n, "peat::addmm", {n->input(0), n->input(1), n->input(2), n->input(3), n->input(4)}, layer,
              "matmul (" + shortOp + ", then the addition outside the slot)", "matmul");
    } else if (kind == "aten::softmax" || kind == "aten::log_softmax") {
      visitSoftmax(n, kind);
    } else if (kind == "aten::layer_norm") {
      visitLayerNorm(n);
    } else if (kind == "aten::gelu" || kind == "aten::gelu_" || activationKinds().count(kind)) {
      visitActivation(n, kind);
    } else if (kind == "aten::dropout" || kind == "aten::dropout_") {
      const std::string layer = layerOf(n, {}, "dropout");
      const auto p = constantOf(n->input(1));
      if (n->inputs().size() != 3 || !p) return leave(n, layer, "its probability is not a constant");
      if (p->toDouble() == 0) return leave(n, layer, "p = 0: the identity, no kernel runs");
      if (kind == "aten::dropout_" && !inPlaceSafe(n)) return leave(n, layer, inPlaceReason());
      replace(n, "peat::dropout", {n->input(0), n->input(1), n->input(2)}, layer,
              "dropout p " + number(p->toDouble()) + ", its mask recorded with the call", "dropout");
    } else if (kind == "aten::embedding") {
      const std::string layer = layerOf(n, {0}, "embedding");
      const auto scale = constantOf(n->input(3)), sparse = constantOf(n->input(4));
      if (!scale || !sparse || scale->toBool() || sparse->toBool())
        return leave(n, layer, "scale_grad_by_freq or sparse gradients are not routed");
      replace(n, "peat::embedding", {n->input(0), n->input(1), n->input(2)}, layer,
              "embedding (its backward a scatter-add through the slot)", "embedding");
    } else if (unroutableKinds().count(kind)) {
      leave(n, layerOf(n, {1}, kind.substr(6)), "the kernel slot has no op for " + kind);
    } else if ((kind == "aten::lstm" || kind == "aten::gru") && visitRecurrent(n, kind)) {
      // routed: decomposed into slot GEMMs
    } else if (recurrentKinds().count(kind)) {
      leave(n, layerOf(n, {}, kind.substr(6)),
            "the kernel slot has no op for " + kind + ": its gate GEMMs (input and hidden, every step) run on ATen, unchecked");
    } else if (otherComputeKinds().count(kind) && !bookkeeping(n, kind)) {
      leave(n, layerOf(n, {}, kind.substr(6)), "the kernel slot has no op for " + kind + ": it runs on ATen, unchecked");
    }
  }

  // --attention fused: softmax(bmm(q, k^T) | baddbmm(mask, q, k^T) | matmul(q, k^T)) over the last
  // dimension, then (a dropout, its probability a constant) a product with v, becomes one
  // peat::attention call, as nn.MultiheadAttention's graph has it; a dropout's multipliers are drawn by
  // the call, as the dropout would have drawn them. Anything else (a scale or mask applied between, a
  // score read elsewhere) keeps its parts, routed one by one.
  bool fuseAttention(Node* sm) {
    if (sm->inputs().size() != 3 || sm->output()->uses().size() != 1) return false;
    const auto dim = constantOf(sm->input(1)), dtype = constantOf(sm->input(2));
    if (!dim || !dim->isInt() || !dtype || !dtype->isNone()) return false;
    Value* scores = sm->input(0);
    Node* s = scores->node();
    const std::string sk = s->kind().toQualString();
    Value *q = nullptr, *kt = nullptr, *mask = nullptr;
    if ((sk == "aten::bmm" || sk == "aten::matmul") && s->inputs().size() == 2) {
      q = s->input(0), kt = s->input(1);
    } else if (sk == "aten::baddbmm" && s->inputs().size() == 5) {
      const auto beta = constantOf(s->input(3)), alpha = constantOf(s->input(4));
      if (!beta || !alpha || beta->toScalar().toDouble() != 1.0 || alpha->toScalar().toDouble() != 1.0) return false;
      mask = s->input(0), q = s->input(1), kt = s->input(2);
    } else {
      return false;
    }
    if (scores->uses().size() != 1) return false;
    const bool threeD = sk != "aten::matmul";
    if (!(dim->toInt() == -1 || (threeD && dim->toInt() == 2))) return false;
    Node* t = kt->node();
    if (t->kind().toQualString() != std::string("aten::transpose")) return false;
    const auto d0 = constantOf(t->input(1)), d1 = constantOf(t->input(2));
    if (!d0 || !d1) return false;
    const std::set<int64_t> swapped{d0->toInt(), d1->toInt()};
    if (swapped != std::set<int64_t>{-2, -1} && !(threeD && swapped == std::set<int64_t>{1, 2})) return false;
    Value* k = t->input(0);
    Node* u = sm->output()->uses()[0].user;
    Node* drop = nullptr;
    if (u->kind().toQualString() == std::string("aten::dropout")) {
      // its probability a constant, as peat::dropout wants it; its mask drawn by the fused call
      const auto p = constantOf(u->input(1));
      if (u->inputs().size() != 3 || !p || u->output()->uses().size() != 1) return false;
      drop = u;
      u = drop->output()->uses()[0].user;
    }
    const std::string uk = u->kind().toQualString();
    if ((uk != "aten::bmm" && uk != "aten::matmul") || u->inputs().size() != 2 ||
        u->input(0) != (drop ? drop->output() : sm->output()))
      return false;
    const std::string layer = layerOf(sm, {}, "attention");  // "#2" for a module's second attention
    torch::jit::WithInsertPoint guard(u);
    Value* maskValue = mask ? mask : graph_->insertConstant(c10::IValue());
    Value* dropP = drop ? drop->input(1) : graph_->insertConstant(0.0);
    Value* dropTrain = drop ? drop->input(2) : graph_->insertConstant(false);
    Value* out = graph_->insert(c10::Symbol::fromQualString("peat::attention"),
                                {q, k, u->input(1), maskValue, dropP, dropTrain, graph_->insertConstant(layer)});
    out->setType(u->output()->type());
    u->output()->replaceAllUsesWith(out);
    u->destroy();
    if (drop) drop->destroy();
    sm->destroy();
    s->destroy();
    if (t->output()->uses().empty()) t->destroy();
    sites_.push_back({layer, "aten::softmax", true,
                      std::string("attention: scores (") + sk.substr(6) + (mask ? ", with its mask" : "") +
                          "), softmax" + (drop ? ", dropout (its multipliers recorded)" : "") +
                          " and values as one call (--attention fused); backward dq, dk, dv",
                      "attention"});
    return true;
  }

  // A constant inserted before `n` (its insertion point ends here: replace() destroys `n`).
  Value* constantAt(Node* n, const c10::IValue& value) {
    torch::jit::WithInsertPoint guard(n);
    return graph_->insertConstant(value);
  }

  // aten::lstm / aten::gru (the padded, not the packed, overload) as peat::lstm / peat::gru; false
  // (the node is then listed as left on ATen) when its form is not one the decomposition takes.
  bool visitRecurrent(Node* n, const std::string& kind) {
    const bool gru = kind == "aten::gru";
    if (n->inputs().size() != 9 || (!gru && n->input(1)->type()->kind() != c10::TypeKind::ListType) ||
        (gru && n->input(1)->type()->kind() != c10::TypeKind::TensorType))
      return false;  // the packed-sequence overload
    Value* params = n->input(2);
    const auto biases = constantOf(n->input(3)), layers = constantOf(n->input(4)), bidirectional = constantOf(n->input(7));
    if (!biases || !layers || !bidirectional || params->node()->kind() != c10::prim::ListConstruct) return false;
    const int64_t expected = layers->toInt() * (bidirectional->toBool() ? 2 : 1) * (biases->toBool() ? 4 : 2);
    if (int64_t(params->node()->inputs().size()) != expected) return false;  // projections (proj_size)
    std::vector<std::string> path = attributePath(params->node()->input(0), graph_->inputs()[0]);
    std::string prefix = path.size() > 1 ? join(path, path.size() - 1) : layerOf(n, {}, kind.substr(6));
    Value* name = constantAt(n, prefix);
    std::vector<Value*> args(n->inputs().begin(), n->inputs().end());
    args.push_back(name);
    Node* routed = graph_->create(c10::Symbol::fromQualString(gru ? "peat::gru" : "peat::lstm"), args, n->outputs().size());
    routed->insertBefore(n);
    for (std::size_t i = 0; i < n->outputs().size(); ++i) {
      routed->output(i)->setType(n->output(i)->type());
      n->output(i)->replaceAllUsesWith(routed->output(i));
    }
    n->destroy();
    sites_.push_back({prefix, kind, true,
                      std::string(gru ? "GRU" : "LSTM") + " decomposed: each layer's input projection (" + prefix +
                          ".ih_l0, one linear call over all steps) and each step's hidden projection (" + prefix +
                          ".hh_l0) through the slot; the gates' element-wise maths on ATen",
                      "linear"});
    return true;
  }

  // A module's counter updated in place (batch norm's num_batches_tracked += 1): not a kernel.
  static bool bookkeeping(Node* n, const std::string& kind) {
    return kind.back() == '_' && n->input(0)->node()->kind() == c10::prim::GetAttr;
  }

  static std::string number(double v) {
    std::ostringstream out;
    out << v;
    return out.str();
  }

  // An in-place op (relu_) becomes its functional form only where nothing can see the mutation:
  // its input is computed in the graph (not a parameter or the model's input), is not a view of
  // another tensor, and is read by no node after it.
  bool inPlaceSafe(Node* n) {
    static const std::set<std::string> views{
        "aten::view",    "aten::reshape", "aten::slice",  "aten::select",    "aten::transpose", "aten::permute",
        "aten::narrow",  "aten::expand",  "aten::flatten", "aten::squeeze",  "aten::unsqueeze", "aten::t",
        "aten::chunk",   "aten::split",   "aten::unbind", "aten::as_strided", "aten::detach",   "aten::alias",
        "aten::__getitem__", "prim::ListUnpack", "prim::TupleUnpack", "prim::GetAttr", "prim::Param"};
    Value* x = n->input(0);
    if (views.count(x->node()->kind().toQualString())) return false;
    for (const torch::jit::Use& u : x->uses())
      if (u.user != n && !u.user->isBefore(n)) return false;
    return true;
  }
  static std::string inPlaceReason() {
    return "in place on a tensor that is a view, a parameter or read again later: routing it would change what the "
           "model computes";
  }

  void visitSoftmax(Node* n, const std::string& kind) {
    const bool log = kind == "aten::log_softmax";
    const std::string layer = layerOf(n, {}, log ? "log_softmax" : "softmax");
    if (n->inputs().size() != 3) return leave(n, layer, "an overload with " + std::to_string(n->inputs().size()) + " inputs");
    const auto dim = constantOf(n->input(1));
    if (!dim || !dim->isInt()) return leave(n, layer, "its dimension is not a constant");
    const auto dtype = constantOf(n->input(2));
    if (!dtype || !(dtype->isNone() || (dtype->isInt() && dtype->toInt() == int64_t(at::kFloat))))
      return leave(n, layer, "it casts to another dtype");
    replace(n, "peat::softmax", {n->input(0), n->input(1), constantAt(n, log)}, layer,
            std::string(log ? "log-softmax" : "softmax") + " over dimension " + std::to_string(dim->toInt()),
            log ? "log_softmax" : "softmax");
  }

  void visitLayerNorm(Node* n) {
    const std::string layer = layerOf(n, {2}, "layer_norm");
    if (n->inputs().size() != 6) return leave(n, layer, "an overload with " + std::to_string(n->inputs().size()) + " inputs");
    // normalized_shape: an int[] constant, or a list built from sizes (traced graphs)
    Value* shape = n->input(1);
    const auto constantShape = constantOf(shape);
    std::size_t dims = 0;
    if (constantShape && constantShape->isIntList())
      dims = constantShape->toIntVector().size();
    else if (shape->node()->kind() == c10::prim::ListConstruct)
      dims = shape->node()->inputs().size();
    const auto eps = constantOf(n->input(4));
    if (dims == 0 || !eps || !eps->isDouble()) return leave(n, layer, "its normalized shape or eps is not known");
    replace(n, "peat::layer_norm", {n->input(0), n->input(1), n->input(2), n->input(3), n->input(4)}, layer,
            "layer norm over " + std::to_string(dims) + " dimension(s), eps " +
                number(eps->toDouble()) + "; backward dX, dGamma, dBeta through the slot",
            "layernorm");
  }

  void visitActivation(Node* n, const std::string& kind) {
    const bool gelu = kind == "aten::gelu" || kind == "aten::gelu_";
    std::string which = gelu ? "gelu" : activationKinds().at(kind);
    const std::string layer = layerOf(n, {}, which);
    if (kind.back() == '_' && !inPlaceSafe(n)) return leave(n, layer, inPlaceReason());
    if (gelu && n->inputs().size() == 2) {
      const auto approximate = constantOf(n->input(1));
      if (!approximate || !approximate->isString()) return leave(n, layer, "its approximation is not a constant");
      if (approximate->toStringRef() == "tanh") which = "gelu_tanh";
      else if (approximate->toStringRef() != "none") return leave(n, layer, "approximate='" + approximate->toStringRef() + "'");
    } else if (n->inputs().size() != 1) {
      return leave(n, layer, "an overload with " + std::to_string(n->inputs().size()) + " inputs");
    }
    replace(n, "peat::activation", {n->input(0), constantAt(n, which)}, layer,
            (which == "gelu_tanh" ? std::string("gelu (tanh form)") : which) + ", forward and backward", gelu ? "gelu" : which);
  }

  void visitConv(Node* n, const std::string& kind) {
    const std::string layer = layerOf(n, {1}, "conv");
    Value* stride = n->input(3);
    Value* padding = n->input(4);
    Value* dilation = n->input(5);
    Value* groups = nullptr;
    if (kind == "aten::_convolution") {
      const auto transposed = constantOf(n->input(6));
      if (!transposed || !transposed->isBool()) return leave(n, layer, "whether it is transposed is not a constant");
      if (transposed->toBool()) return leave(n, layer, "transposed convolutions are not routed");
      groups = n->input(8);
    } else {
      groups = n->input(6);
    }
    const auto w = weightTensor(n->input(1));
    if (w && w->dim() != 3 && w->dim() != 4)
      return leave(n, layer, std::to_string(w->dim() - 2) + "-D convolutions are not routed");
    if (!w && kind == "aten::_convolution") return leave(n, layer, "its weight is not a module attribute (dimension unknown)");
    for (Value* v : {stride, dilation, groups})
      if (!constantOf(v)) return leave(n, layer, "its geometry is not constant");
    const auto pad = constantOf(padding);
    if (!pad) return leave(n, layer, "its padding is not constant");
    if (pad->isString()) {  // conv2d(..., padding='same' | 'valid')
      const std::string mode = pad->toStringRef();
      std::vector<int64_t> p;
      const auto dil = constantOf(dilation)->toIntVector();
      const auto st = constantOf(stride)->toIntVector();
      if (mode == "valid") {
        p.assign(std::size_t(w ? w->dim() - 2 : 2), 0);
      } else if (mode == "same" && w) {
        for (int64_t i = 0; i < w->dim() - 2; ++i) {
          const int64_t d = dil.empty() ? 1 : dil[std::min<std::size_t>(std::size_t(i), dil.size() - 1)];
          const int64_t total = d * (w->size(2 + i) - 1);
          if (total % 2 != 0) return leave(n, layer, "padding='same' would be asymmetric here");
          p.push_back(total / 2);
        }
        for (int64_t s : st)
          if (s != 1) return leave(n, layer, "padding='same' with a stride");
      } else {
        return leave(n, layer, "padding='" + mode + "' is not routed");
      }
      torch::jit::WithInsertPoint guard(n);
      padding = graph_->insertConstant(p);
    }
    std::ostringstream detail;
    detail << "conv" << (w && w->dim() == 3 ? "1d as conv2d" : "2d");
    const auto g = constantOf(groups)->toInt();
    if (g != 1) detail << ", groups " << g << (w && g == w->size(0) ? " (depthwise)" : "");
    replace(n, "peat::conv", {n->input(0), n->input(1), n->input(2), stride, padding, dilation, groups}, layer,
            detail.str(), "conv2d");
  }

  torch::jit::Module& module_;
  std::shared_ptr<Graph> graph_;
  std::vector<ScriptSite> sites_;
  std::map<std::string, int> unnamed_;
  std::string lastKind_;
  bool fuseAttention_ = false;
};


}  // namespace

std::vector<ScriptSite> rewriteForSlot(torch::jit::Module& module, std::shared_ptr<torch::jit::Graph> graph,
                                       bool fuseAttention) {
  return Rewriter(module, std::move(graph), fuseAttention).run();
}

bool isOtherComputeKind(const std::string& atenKind) { return otherComputeKinds().count(atenKind) > 0; }

bool hasCalls(torch::jit::Block* block) {
  for (Node* n : block->nodes()) {
    if (n->kind() == c10::prim::CallMethod || n->kind() == c10::prim::CallFunction) return true;
    for (Block* b : n->blocks())
      if (hasCalls(b)) return true;
  }
  return false;
}

}  // namespace peat::models
