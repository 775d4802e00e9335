// SPDX-License-Identifier: MIT
// The routed ops: what peat::linear, peat::conv, peat::attention, ... do (the kernel slot of the
// forward in progress), and their registration as CompositeImplicitAutograd kernels, so that
// autograd sees the slot's own autograd functions inside.
#include "core/torch/models/script_ops.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

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

SlotScope::SlotScope(ops::Dispatcher* dispatcher) : saved_(currentDispatcher) { currentDispatcher = dispatcher; }
SlotScope::~SlotScope() { currentDispatcher = saved_; }

}  // namespace peat::models
