// SPDX-License-Identifier: MIT
#include "core/torch/models/script_model.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/named_value.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/library.h>
#include <torch/script.h>
#include <torch/version.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "base/sys.h"
#include "core/cli/torch_commands.h"
#include "core/util/helper_process.h"

namespace peat::models {

namespace {

// ----------------------------------------------------------------------------- the routed ops

// The dispatcher of the forward in progress on this thread (set by ScriptedModel::forward). The
// backward GEMMs find theirs in their autograd context.
thread_local ops::Dispatcher* currentDispatcher = nullptr;

ops::Dispatcher& slot() {
  if (!currentDispatcher) throw std::logic_error("a peat:: op ran outside a model forward");
  return *currentDispatcher;
}

int64_t pick(c10::IntArrayRef v, std::size_t i, const char* what) {
  if (v.empty()) throw std::invalid_argument(std::string("convolution with an empty ") + what + " list");
  return v.size() == 1 ? v[0] : v[std::min(i, v.size() - 1)];
}

at::Tensor routedLinear(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& b,
                        std::string layer) {
  return slot().linear(layer, x, w, b ? *b : at::Tensor());
}

// conv1d runs as a conv2d of height 1; an unbatched input gets a batch of one.
at::Tensor routedConv(const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& b,
                      c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups,
                      std::string layer) {
  const bool oneD = weight.dim() == 3;
  if (weight.dim() != 3 && weight.dim() != 4)
    throw std::invalid_argument("peat::conv on layer '" + layer + "': only 1-D and 2-D convolutions are routed");
  const int64_t batched = oneD ? 3 : 4;
  at::Tensor x = input.dim() == batched - 1 ? input.unsqueeze(0) : input;
  at::Tensor w = weight;
  ops::ConvGeometry g;
  if (oneD) {
    x = x.unsqueeze(2);
    w = w.unsqueeze(2);
    g.strideW = pick(stride, 0, "stride");
    g.padW = pick(padding, 0, "padding");
    g.dilationW = pick(dilation, 0, "dilation");
  } else {
    g.strideH = pick(stride, 0, "stride");
    g.strideW = pick(stride, 1, "stride");
    g.padH = pick(padding, 0, "padding");
    g.padW = pick(padding, 1, "padding");
    g.dilationH = pick(dilation, 0, "dilation");
    g.dilationW = pick(dilation, 1, "dilation");
  }
  g.groups = groups;
  at::Tensor y = slot().conv2d(layer, x, w, b ? *b : at::Tensor(), g);
  if (oneD) y = y.squeeze(2);
  return input.dim() == batched - 1 ? y.squeeze(0) : y;
}

// matmul's broadcasting, made explicit so that the slot sees one 2-D GEMM or a batch of equal ones
// (the expand's gradient sums over the broadcast dimensions, outside the slot, as ATen's does).
at::Tensor routedMatmul(const at::Tensor& a0, const at::Tensor& b0, std::string layer) {
  if (a0.dim() == 0 || b0.dim() == 0) throw std::invalid_argument("peat::matmul on a scalar ('" + layer + "')");
  const bool aVector = a0.dim() == 1, bVector = b0.dim() == 1;
  const at::Tensor a = aVector ? a0.unsqueeze(0) : a0;
  const at::Tensor b = bVector ? b0.unsqueeze(1) : b0;
  at::Tensor out;
  if (b.dim() == 2) {
    std::vector<int64_t> shape(a.sizes().begin(), a.sizes().end());
    shape.back() = b.size(1);
    out = slot().matmul(layer, a.reshape({-1, a.size(-1)}), b).reshape(shape);
  } else {
    const auto aBatch = a.sizes().slice(0, a.dim() - 2), bBatch = b.sizes().slice(0, b.dim() - 2);
    std::vector<int64_t> batch = at::infer_size(aBatch, bBatch);
    std::vector<int64_t> aShape = batch, bShape = batch, outShape = batch;
    aShape.insert(aShape.end(), {a.size(-2), a.size(-1)});
    bShape.insert(bShape.end(), {b.size(-2), b.size(-1)});
    outShape.insert(outShape.end(), {a.size(-2), b.size(-1)});
    const at::Tensor a3 = a.expand(aShape).reshape({-1, a.size(-2), a.size(-1)});
    const at::Tensor b3 = b.expand(bShape).reshape({-1, b.size(-2), b.size(-1)});
    out = slot().matmul(layer, a3, b3).reshape(outShape);
  }
  if (aVector) out = out.squeeze(-2);
  if (bVector) out = out.squeeze(-1);
  return out;
}

// addmm and baddbmm: beta * self + alpha * (a @ b), the product through the slot.
at::Tensor routedAddmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b, const at::Scalar& beta,
                       const at::Scalar& alpha, std::string layer) {
  at::Tensor product = routedMatmul(a, b, std::move(layer));
  if (!(alpha.isIntegral(false) && alpha.toLong() == 1) && alpha.toDouble() != 1.0) product = product * alpha;
  if (beta.toDouble() == 0.0) return product;
  return beta.toDouble() == 1.0 ? self + product : self * beta + product;
}


// Attention fused from its parts (Rewriter::fuseAttention): one slot call, q already scaled.
at::Tensor routedAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const c10::optional<at::Tensor>& mask, double dropout, bool train, std::string layer) {
  if (dropout > 1) throw std::invalid_argument("dropout probability has to be between 0 and 1, but got " + std::to_string(dropout));
  return slot().attention(layer, q, k, v, mask ? *mask : at::Tensor(), 1.0, false, train ? dropout : 0.0);
}

// The op-wise ops: activations, softmax, layer norm, dropout and embedding through the slot, their
// backward too (ops::Dispatcher's autograd functions).
at::Tensor routedSoftmax(const at::Tensor& x, int64_t dim, bool log, std::string layer) {
  return log ? slot().logSoftmax(layer, x, dim) : slot().softmax(layer, x, dim);
}

at::Tensor routedLayerNorm(const at::Tensor& x, c10::IntArrayRef normalizedShape, const c10::optional<at::Tensor>& w,
                           const c10::optional<at::Tensor>& b, double eps, std::string layer) {
  const int64_t nd = int64_t(normalizedShape.size());
  if (nd == 0 || nd > x.dim() || x.sizes().slice(std::size_t(x.dim() - nd)) != normalizedShape)
    throw std::invalid_argument("peat::layer_norm on layer '" + layer + "': normalized shape does not end the input's");
  return slot().layerNorm(layer, x, w ? *w : at::Tensor(), b ? *b : at::Tensor(), nd, eps);
}

at::Tensor routedActivation(const at::Tensor& x, std::string kind, std::string layer) {
  ops::Dispatcher& d = slot();
  if (kind == "relu") return d.relu(layer, x);
  if (kind == "gelu") return d.gelu(layer, x, false);
  if (kind == "gelu_tanh") return d.gelu(layer, x, true);
  if (kind == "silu") return d.silu(layer, x);
  if (kind == "tanh") return d.tanh(layer, x);
  if (kind == "sigmoid") return d.sigmoid(layer, x);
  throw std::invalid_argument("peat::activation: unknown kind '" + kind + "'");
}

at::Tensor routedDropout(const at::Tensor& x, double p, bool train, std::string layer) {
  if (!train || p <= 0) return x;  // as ATen: no kernel runs
  if (p > 1) throw std::invalid_argument("dropout probability has to be between 0 and 1, but got " + std::to_string(p));
  return slot().dropout(layer, x, p);
}

at::Tensor routedEmbedding(const at::Tensor& weight, const at::Tensor& ids, int64_t paddingIdx, std::string layer) {
  return slot().embedding(layer, ids, weight, paddingIdx);
}


// Recurrent layers decomposed, so that their gate GEMMs go through the slot: per layer and
// direction, the input projection of every step as one linear call ("<prefix>.ih_l0", its
// "_reverse" twin), then each step's hidden projection ("<prefix>.hh_l0"); the gates' element-wise
// maths on ATen, as in cuDNN's split. Dropout between layers (training) through the slot.
struct Recurrent {
  bool gru = false;
  int64_t layers = 1, directions = 1;
  bool biases = true;
  double dropout = 0;
  bool train = false;
  std::string prefix;
};

std::vector<at::Tensor> runRecurrent(const Recurrent& r, const at::Tensor& input0, const std::vector<at::Tensor>& h0s,
                                     at::TensorList params, bool batchFirst) {
  ops::Dispatcher& d = slot();
  const bool unbatched = input0.dim() == 2;
  at::Tensor x = unbatched ? input0.unsqueeze(1) : batchFirst ? input0.transpose(0, 1) : input0;  // [T, N, I]
  const int64_t stride = r.biases ? 4 : 2;
  if (int64_t(params.size()) != r.layers * r.directions * stride)
    throw std::invalid_argument("peat::" + std::string(r.gru ? "gru" : "lstm") + " on '" + r.prefix +
                                "': unexpected parameter count (projections are not routed)");
  const int64_t steps = x.size(0);
  std::vector<at::Tensor> lastH, lastC;
  for (int64_t l = 0; l < r.layers; ++l) {
    std::vector<at::Tensor> outputs;
    for (int64_t dir = 0; dir < r.directions; ++dir) {
      const int64_t idx = l * r.directions + dir;
      const at::Tensor& wih = params[std::size_t(idx * stride)];
      const at::Tensor& whh = params[std::size_t(idx * stride + 1)];
      const at::Tensor bih = r.biases ? params[std::size_t(idx * stride + 2)] : at::Tensor();
      const at::Tensor bhh = r.biases ? params[std::size_t(idx * stride + 3)] : at::Tensor();
      const std::string suffix = "_l" + std::to_string(l) + (dir ? "_reverse" : "");
      const at::Tensor xs = d.linear(r.prefix + ".ih" + suffix, x, wih, bih);  // [T, N, G*H]
      at::Tensor h = h0s[0][idx];
      at::Tensor c = r.gru ? at::Tensor() : h0s[1][idx];
      if (unbatched) {
        h = h.unsqueeze(0);
        if (c.defined()) c = c.unsqueeze(0);
      }
      std::vector<at::Tensor> out(static_cast<std::size_t>(steps));
      for (int64_t k = 0; k < steps; ++k) {
        const int64_t t = dir ? steps - 1 - k : k;
        const at::Tensor gh = d.linear(r.prefix + ".hh" + suffix, h, whh, bhh);
        const at::Tensor gi = xs[t];
        if (r.gru) {  // r, z, n
          const auto a = gi.chunk(3, 1), b = gh.chunk(3, 1);
          const at::Tensor reset = at::sigmoid(a[0] + b[0]), update = at::sigmoid(a[1] + b[1]);
          const at::Tensor n = at::tanh(a[2] + reset * b[2]);
          h = (1 - update) * n + update * h;
        } else {  // i, f, g, o
          const auto g = (gi + gh).chunk(4, 1);
          c = at::sigmoid(g[1]) * c + at::sigmoid(g[0]) * at::tanh(g[2]);
          h = at::sigmoid(g[3]) * at::tanh(c);
        }
        out[std::size_t(t)] = h;
      }
      outputs.push_back(at::stack(out));
      lastH.push_back(h);
      if (c.defined()) lastC.push_back(c);
    }
    x = r.directions == 1 ? outputs[0] : at::cat(outputs, 2);
    if (r.train && r.dropout > 0 && l + 1 < r.layers) x = d.dropout(r.prefix + ".dropout_l" + std::to_string(l), x, r.dropout);
  }
  at::Tensor y = unbatched ? x.squeeze(1) : batchFirst ? x.transpose(0, 1) : x;
  at::Tensor hn = at::stack(lastH), cn = lastC.empty() ? at::Tensor() : at::stack(lastC);
  if (unbatched) {
    hn = hn.squeeze(1);
    if (cn.defined()) cn = cn.squeeze(1);
  }
  return {y, hn, cn};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> routedLstm(const at::Tensor& input, at::TensorList hx, at::TensorList params,
                                                          bool hasBiases, int64_t numLayers, double dropout, bool train,
                                                          bool bidirectional, bool batchFirst, std::string prefix) {
  const Recurrent r{false, numLayers, bidirectional ? 2 : 1, hasBiases, dropout, train, prefix};
  const auto out = runRecurrent(r, input, {hx[0], hx[1]}, params, batchFirst);
  return {out[0], out[1], out[2]};
}

std::tuple<at::Tensor, at::Tensor> routedGru(const at::Tensor& input, const at::Tensor& hx, at::TensorList params,
                                             bool hasBiases, int64_t numLayers, double dropout, bool train,
                                             bool bidirectional, bool batchFirst, std::string prefix) {
  const Recurrent r{true, numLayers, bidirectional ? 2 : 1, hasBiases, dropout, train, prefix};
  const auto out = runRecurrent(r, input, {hx}, params, batchFirst);
  return {out[0], out[1]};
}

}  // namespace

TORCH_LIBRARY(peat, m) {
  m.def("linear(Tensor input, Tensor weight, Tensor? bias, str layer) -> Tensor");
  m.def("conv(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, int groups, "
        "str layer) -> Tensor");
  m.def("matmul(Tensor self, Tensor other, str layer) -> Tensor");
  m.def("addmm(Tensor self, Tensor mat1, Tensor mat2, Scalar beta, Scalar alpha, str layer) -> Tensor");
  m.def("softmax(Tensor self, int dim, bool log, str layer) -> Tensor");
  m.def("attention(Tensor q, Tensor k, Tensor v, Tensor? mask, float dropout, bool train, str layer) -> Tensor");
  m.def("layer_norm(Tensor input, int[] normalized_shape, Tensor? weight, Tensor? bias, float eps, str layer) -> Tensor");
  m.def("activation(Tensor self, str kind, str layer) -> Tensor");
  m.def("dropout(Tensor input, float p, bool train, str layer) -> Tensor");
  m.def("embedding(Tensor weight, Tensor indices, int padding_idx, str layer) -> Tensor");
  m.def("lstm(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, "
        "bool bidirectional, bool batch_first, str layer) -> (Tensor, Tensor, Tensor)");
  m.def("gru(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, "
        "bool bidirectional, bool batch_first, str layer) -> (Tensor, Tensor)");
}

// Composite: autograd sees the slot's own autograd functions inside.
TORCH_LIBRARY_IMPL(peat, CompositeImplicitAutograd, m) {
  m.impl("linear", TORCH_FN(routedLinear));
  m.impl("conv", TORCH_FN(routedConv));
  m.impl("matmul", TORCH_FN(routedMatmul));
  m.impl("addmm", TORCH_FN(routedAddmm));
  m.impl("softmax", TORCH_FN(routedSoftmax));
  m.impl("attention", TORCH_FN(routedAttention));
  m.impl("layer_norm", TORCH_FN(routedLayerNorm));
  m.impl("activation", TORCH_FN(routedActivation));
  m.impl("dropout", TORCH_FN(routedDropout));
  m.impl("embedding", TORCH_FN(routedEmbedding));
  m.impl("lstm", TORCH_FN(routedLstm));
  m.impl("gru", TORCH_FN(routedGru));
}

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

bool hasCalls(Block* block) {
  for (Node* n : block->nodes()) {
    if (n->kind() == c10::prim::CallMethod || n->kind() == c10::prim::CallFunction) return true;
    for (Block* b : n->blocks())
      if (hasCalls(b)) return true;
  }
  return false;
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

// What a file that torch::jit::load refused is, for a message that says what to do.
std::string describeLoadFailure(const std::string& path, const std::string& loaderMessage) {
  std::ifstream in(path, std::ios::binary);
  char head[8] = {};
  in.read(head, sizeof head);
  const std::string howTo =
      "export TorchScript with torch.jit.trace(model, example_input).save(FILE) or torch.jit.script(model).save(FILE)";
  if (in.gcount() >= 2 && static_cast<unsigned char>(head[0]) == 0x80)
    return "'" + path + "' is a pickled Python object (torch.save of a module or state dict), not TorchScript: " + howTo;
  if (in.gcount() >= 4 && head[0] == 'P' && head[1] == 'K') {
    try {
      caffe2::serialize::PyTorchStreamReader reader(path);
      const auto records = reader.getAllRecords();
      const bool hasCode = std::any_of(records.begin(), records.end(),
                                       [](const std::string& r) { return r.rfind("code/", 0) == 0; });
      if (!hasCode)
        return "'" + path + "' is a torch.save archive (an eager module or state dict), not TorchScript: " + howTo;
      return "LibTorch " + std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + " cannot load '" + path + "' (archive format version " +
             std::to_string(reader.version()) + "): " + loaderMessage +
             "; it was probably saved by a newer PyTorch: re-export it with PyTorch 1.13 (Debian's python3-torch), "
             "avoiding operators newer than 1.13";
    } catch (const c10::Error&) {
    }
  }
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0)
    return "'" + path + "' is an ONNX file, not TorchScript: training needs TorchScript; " + howTo;
  return "'" + path + "' is not a TorchScript archive (" + loaderMessage + "): " + howTo;
}

std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

std::string interpreterMessage(const std::string& what) {
  std::istringstream in(what);
  std::string line, found;
  while (std::getline(in, line)) {
    const auto colon = line.find("Error: ");
    if (colon != std::string::npos && line.find(' ') > colon) found = line.substr(colon + 7);
  }
  return found.empty() ? firstLine(what) : found;
}

bool isModelFile(const std::string& spec) {
  const auto& zoo = cli::zooModelNames();
  return std::find(zoo.begin(), zoo.end(), spec) == zoo.end();
}

struct ScriptedModel::Impl {
  torch::jit::Module module;
};

ScriptedModel::ScriptedModel(const std::string& path, Task task, bool fuseAttention)
    : impl_(std::make_unique<Impl>()), path_(path), task_(task) {
  {
    std::ifstream probe(path, std::ios::binary);
    if (!probe) throw std::invalid_argument("cannot read model file '" + path + "'");
  }
  // The rewritten graph runs as it is: no profiling executor, no fusion, no autodiff subgraphs.
  torch::jit::getExecutorMode() = false;
  torch::jit::getProfilingMode() = false;
  torch::jit::setGraphExecutorOptimize(false);
  try {
    impl_->module = torch::jit::load(path, c10::Device(c10::kCPU));
  } catch (const c10::Error& e) {
    throw std::invalid_argument(describeLoadFailure(path, firstLine(e.what_without_backtrace())));
  } catch (const std::exception& e) {
    throw std::invalid_argument(describeLoadFailure(path, firstLine(e.what())));
  }
  torch::jit::Module& m = impl_->module;
  if (!m.find_method("forward")) throw std::invalid_argument("model file '" + path + "' has no forward method");
  auto graph = m.get_method("forward").graph();
  // Inline takes each callee's optimised graph, itself inlined only while the executor optimises:
  // on for the inlining, so that every node's call stack names its whole module path.
  torch::jit::setGraphExecutorOptimize(true);
  for (int depth = 0; depth < 256 && hasCalls(graph->block()); ++depth) torch::jit::Inline(*graph);
  torch::jit::setGraphExecutorOptimize(false);
  // PEAT_BENCH_NO_SLOT=1 (benchmarks only: tests/bench/models.sh) leaves the graph on ATen, to time
  // the slot against plain LibTorch on the same module, data and training loop.
  if (const char* plain = std::getenv("PEAT_BENCH_NO_SLOT"); plain && *plain == '1')
    sites_.push_back({"(all)", "-", false, "PEAT_BENCH_NO_SLOT=1: the graph runs on ATen, nothing is routed", ""});
  else
    sites_ = Rewriter(m, graph, fuseAttention).run();
  std::set<const void*> seen;  // a tied parameter (one tensor under two names) is trained once
  for (const auto& p : m.named_parameters(true)) {
    const at::Tensor& t = p.value;
    if (!seen.insert(t.unsafeGetTensorImpl()).second) continue;
    if (t.scalar_type() != at::kFloat)
      throw std::invalid_argument("model file '" + path + "': parameter '" + p.name + "' is " +
                                  std::string(c10::toString(t.scalar_type())) + "; only float32 models are trained");
    adoptParameter(p.name, t);  // frozen parameters (requires_grad false) stay frozen
  }
  for (const auto& b : m.named_buffers(true)) {
    if (b.value.scalar_type() == at::kFloat || b.value.scalar_type() == at::kLong)
      adoptBuffer(b.name, b.value);
    else
      skippedBuffers_.push_back(b.name);
  }
  if (parameters().empty()) throw std::invalid_argument("model file '" + path + "' has no parameters to train");
}

ScriptedModel::~ScriptedModel() = default;

void ScriptedModel::setTrainingMode(bool training) { impl_->module.train(training); }

at::Tensor ScriptedModel::forward(ops::Dispatcher& ops, const at::Tensor& input) {
  struct Current {
    explicit Current(ops::Dispatcher* d) : saved(currentDispatcher) { currentDispatcher = d; }
    ~Current() { currentDispatcher = saved; }
    ops::Dispatcher* saved;
  } current(&ops);
  c10::IValue out = impl_->module.forward({input});
  if (out.isTuple() && !out.toTupleRef().elements().empty()) out = out.toTupleRef().elements()[0];
  if (!out.isTensor())
    throw std::invalid_argument("model file '" + path_ + "' returns " + out.tagKind() + ", not a tensor");
  return out.toTensor();
}

std::string ScriptedModel::routingSummary() const {
  // routed sites counted by slot op; GEMMs and recurrent layers left on ATen named one by one with
  // their reason; the other kernels left on ATen counted by kind
  std::map<std::string, int64_t> routed, others;
  int64_t routedCount = 0, leftCount = 0;
  std::string namedLeft;
  for (const ScriptSite& s : sites_) {
    if (s.routed) {
      ++routedCount;
      ++routed[s.op.empty() ? s.aten : s.op];
      continue;
    }
    ++leftCount;
    if (otherComputeKinds().count(s.aten))
      ++others[s.aten];
    else
      namedLeft += (namedLeft.empty() ? "" : "; ") + s.layer + " (" + s.aten + "): " + s.detail;
  }
  std::string out = "routed " + std::to_string(routedCount) + " op site" + (routedCount == 1 ? "" : "s");
  if (!routed.empty()) {
    std::string parts;
    for (const auto& [op, n] : routed) parts += (parts.empty() ? "" : ", ") + std::to_string(n) + " " + op;
    out += " (" + parts + ")";
  }
  if (leftCount > 0) {
    out += ", " + std::to_string(leftCount) + " left on ATen: " + namedLeft;
    std::string counted;
    for (const auto& [kind, n] : others) counted += (counted.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
    if (!counted.empty()) out += (namedLeft.empty() ? "" : "; ") + std::string("no slot op for ") + counted;
  }
  return out;
}

namespace {

std::string shapeText(at::IntArrayRef shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

class FirstCalls final : public ops::CallObserver {
 public:
  void onCall(const store::CallId& id, const ops::OpCall& call, const at::Tensor& output) override {
    const std::string key = id.layer + "\t" + ops::opName(call.kind);
    auto it = index_.find(key);
    if (it != index_.end()) {
      ++calls[it->second].calls;
      return;
    }
    SiteCall s{id.layer, ops::opName(call.kind), "", 0, 1};
    if (ops::isGemmOp(call.kind)) {
      const at::Tensor& a = call.inputs[0];
      const at::Tensor& b = call.inputs[1];
      s.shapes = (call.kind == ops::OpKind::Matmul ? "a " : "x ") + shapeText(a.sizes()) +
                 (call.kind == ops::OpKind::Matmul ? " b " : " w ") + shapeText(b.sizes()) + " -> " + shapeText(output.sizes());
      if (call.kind == ops::OpKind::Linear) s.reduction = b.size(1);
      if (call.kind == ops::OpKind::Matmul) s.reduction = a.size(-1);
      if (call.kind == ops::OpKind::Conv2d) {
        s.reduction = b.size(1) * b.size(2) * b.size(3);
        s.shapes += ", " + ops::convGeometry(call).text();
      }
    } else {
      for (std::size_t i = 0; i < call.inputs.size(); ++i)
        s.shapes += (i ? " " : "") + std::string(i == 0 ? "x " : "in" + std::to_string(i) + " ") + shapeText(call.inputs[i].sizes());
      s.shapes += " -> " + shapeText(output.sizes());
      if (call.kind == ops::OpKind::Softmax || call.kind == ops::OpKind::LogSoftmax)
        s.reduction = call.inputs[0].size(call.paramOr("dim", call.inputs[0].dim() - 1));
      if (call.kind == ops::OpKind::LayerNorm) s.reduction = call.inputs[0].size(-1);
    }
    index_[key] = calls.size();
    calls.push_back(s);
  }
  void reset() {  // a forward that failed part-way: its calls do not count
    calls.clear();
    index_.clear();
  }
  std::vector<SiteCall> calls;

 private:
  std::map<std::string, std::size_t> index_;
};

}  // namespace

std::vector<SiteCall> forwardCalls(ScriptedModel& model, const std::vector<int64_t>& inputShape) {
  at::NoGradGuard noGrad;
  ops::Dispatcher d;
  FirstCalls observer;
  d.addObserver(&observer);
  model.setTrainingMode(false);
  at::Tensor input = model.task() == Task::Text ? at::zeros(inputShape, at::kLong) : at::zeros(inputShape);
  try {
    try {
      model.forward(d, input);
    } catch (const std::exception& e) {  // c10::Error, or the model's own wrapping of it
      // a token classifier's embedding wants ids: the same shape as int64 (as its data would be fed)
      const std::string what = e.what();
      if (input.scalar_type() != at::kFloat ||
          (what.find("Long") == std::string::npos && what.find("indices") == std::string::npos))
        throw;
      observer.reset();
      input = at::zeros(inputShape, at::kLong);
      model.forward(d, input);
    }
  } catch (const c10::Error& e) {
    throw std::invalid_argument("model file '" + model.modelName() + "' does not take an input of shape " +
                                shapeText(inputShape) + ": " + interpreterMessage(e.what_without_backtrace()));
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& e) {
    throw std::invalid_argument("model file '" + model.modelName() + "' does not take an input of shape " +
                                shapeText(inputShape) + ": " + interpreterMessage(e.what()));
  }
  return observer.calls;
}

namespace {

// A model file as the probes remember it: its path, size and modification time (a changed file is
// probed again).
std::string probeKey(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw std::invalid_argument("cannot read model file '" + path + "'");
  return path + "\t" + std::to_string(st.st_size) + "\t" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

}  // namespace

void probeModelFile(const std::string& path) {
  static std::mutex mutex;
  static std::set<std::string> probed;  // once per file per process
  const std::string key = probeKey(path);
  std::lock_guard<std::mutex> lock(mutex);
  if (probed.count(key)) return;
  const sys::HelperResult r =
      sys::runProbeHelper({"torchscript", path}, sys::probeTimeout(120), "loading model file '" + path + "'",
                          "LibTorch's loader crashed on model file '" + path + "'");
  if (r.exitCode != 0)  // the helper's refusal, passed on: a file it refused is never loaded here
    throw std::invalid_argument(r.output.rfind("error\t", 0) == 0 ? r.output.substr(6) : r.output);
  probed.insert(key);
}

void probeModelForward(const std::string& path, const std::vector<int64_t>& inputShape, Task task) {
  static std::mutex mutex;
  static std::set<std::string> probed;
  std::string shape;
  for (int64_t d : inputShape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
  const std::string taskText = task == Task::Text ? "lm" : task == Task::Regression ? "regression" : "classification";
  const std::string key = probeKey(path) + "\t" + shape + "\t" + taskText;
  std::lock_guard<std::mutex> lock(mutex);
  if (probed.count(key)) return;
  const double seconds = sys::probeTimeout(120);
  const std::string limits = "under " + std::to_string(sys::modelMemoryMiB()) +
                             " MiB (PEAT_MODEL_MEMORY_MIB) and " + std::to_string(int(seconds)) + " s (PEAT_PROBE_TIMEOUT)";
  const sys::HelperResult r =
      sys::runProbeHelper({"torchscript", path, shape, taskText}, seconds,
                          "the first forward of model file '" + path + "' (" + limits + ")",
                          "the first forward of model file '" + path + "' crashed");
  if (r.exitCode != 0) {
    const std::string why = r.output.rfind("error\t", 0) == 0 ? r.output.substr(6) : r.output;
    throw std::invalid_argument(why + " (its first forward ran in the probe helper " + limits + ")");
  }
  probed.insert(key);
}

std::shared_ptr<ScriptedModel> loadScriptedModel(const std::string& path, Task task, Probe probe, bool fuseAttention) {
  if (probe == Probe::First) probeModelFile(path);
  return std::make_shared<ScriptedModel>(path, task, fuseAttention);
}

}  // namespace peat::models
