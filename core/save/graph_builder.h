// SPDX-License-Identifier: MIT
#pragma once
// Builds a SAVE graph node by node from named parameters, checking each one's presence and shape:
// the zoo's graphs (zoo_graph.cpp) and imported ONNX models (onnx_import.cpp) both use it.
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/save/graph.h"
#include "core/store/session.h"

namespace peat::save::detail {

// Builds a graph node by node, checking each parameter's presence and shape against the model.
class Builder {
 public:
  Builder(Graph& g, const std::map<std::string, store::Tensor>& params) : g_(g), params_(params) {}

  // Missing parameters are drawn instead (fan-in uniform; batch-norm statistics near identity).
  void randomFill(uint64_t seed) {
    random_ = true;
    rng_.seed(seed);
  }

  int input(std::vector<int64_t> shape) {
    Node n;
    n.op = Op::Input;
    n.name = "input";
    n.shape = std::move(shape);
    return add(std::move(n));
  }
  int linear(const std::string& name, int x, int64_t out) {
    Node n;
    n.op = Op::Linear;
    n.name = name;
    n.inputs = {x};
    const Node& from = g_.nodes[std::size_t(x)];
    const bool tokens = from.shape.size() == 2;  // [T, in]: the same layer on every row
    const int64_t in = tokens ? from.shape[1] : from.size();
    n.weight = tensor(name + ".weight", {out, in});
    n.bias = tensor(name + ".bias", {out});
    n.shape = tokens ? std::vector<int64_t>{from.shape[0], out} : std::vector<int64_t>{out};
    return add(std::move(n));
  }
  // A lookup in a [rows, features] table by the token ids in x: output [x's shape..., features].
  int embed(const std::string& name, int x, int64_t rows, int64_t features) {
    Node n;
    n.op = Op::Embed;
    n.name = name;
    n.inputs = {x};
    n.weight = tensor(name + ".weight", {rows, features});
    n.shape = g_.nodes[std::size_t(x)].shape;
    n.shape.push_back(features);
    return add(std::move(n));
  }
  int conv(const std::string& name, int x, int64_t out, int64_t k, int64_t stride, int64_t padding, bool bias,
           int64_t groups = 1, int64_t dilation = 1) {
    const Node& from = g_.nodes[std::size_t(x)];
    if (from.shape.size() != 3) throw SaveError("conv2d '" + name + "' needs a [C, H, W] input");
    if (groups < 1 || from.shape[0] % groups || out % groups)
      throw SaveError("conv2d '" + name + "': " + std::to_string(groups) + " groups do not divide its " +
                      std::to_string(from.shape[0]) + " input and " + std::to_string(out) + " output channels");
    if (k < 1 || stride < 1 || padding < 0 || dilation < 1)
      throw SaveError("conv2d '" + name + "' has a kernel, stride, padding or dilation out of range");
    Node n;
    n.op = Op::Conv2d;
    n.name = name;
    n.inputs = {x};
    n.kernel = k;
    n.stride = stride;
    n.padding = padding;
    n.groups = groups;
    n.dilation = dilation;
    n.weight = tensor(name + ".weight", {out, from.shape[0] / groups, k, k});
    if (bias) n.bias = tensor(name + ".bias", {out});
    const int64_t span = dilation * (k - 1) + 1;
    n.shape = {out, (from.shape[1] + 2 * padding - span) / stride + 1, (from.shape[2] + 2 * padding - span) / stride + 1};
    if (n.shape[1] < 1 || n.shape[2] < 1) throw SaveError("conv2d '" + name + "' has an empty output");
    return add(std::move(n));
  }
  int clip(const std::string& name, int x, float lo, float hi) {
    const int v = unary(Op::Clip, name, x);
    g_.nodes[std::size_t(v)].bias = {lo, hi};
    return v;
  }
  int avgPool(const std::string& name, int x, int64_t k, int64_t stride, int64_t padding) {
    return window(Op::AvgPool2d, "average pool '", name, x, k, stride, padding);
  }
  int batchNorm(const std::string& name, int x, double eps = 1e-5) {
    const int64_t c = g_.nodes[std::size_t(x)].shape[0];
    const std::vector<float> gamma = tensor(name + ".weight", {c}), beta = tensor(name + ".bias", {c});
    const std::vector<float> mean = tensor(name + ".running_mean", {c}), var = tensor(name + ".running_var", {c});
    Node n;
    n.op = Op::BatchNorm;
    n.name = name;
    n.inputs = {x};
    n.shape = g_.nodes[std::size_t(x)].shape;
    n.weight.resize(std::size_t(c));
    n.bias.resize(std::size_t(c));
    for (std::size_t i = 0; i < std::size_t(c); ++i) {  // the eval-mode affine map (torch's eps: 1e-5)
      const double scale = double(gamma[i]) / std::sqrt(double(var[i]) + eps);
      n.weight[i] = float(scale);
      n.bias[i] = float(double(beta[i]) - double(mean[i]) * scale);
    }
    return add(std::move(n));
  }
  int unary(Op op, const std::string& name, int x) {
    Node n;
    n.op = op;
    n.name = name;
    n.inputs = {x};
    n.shape = g_.nodes[std::size_t(x)].shape;
    return add(std::move(n));
  }
  int relu(const std::string& name, int x) { return unary(Op::Relu, name, x); }
  int gelu(const std::string& name, int x) { return unary(Op::Gelu, name, x); }
  int softmax(const std::string& name, int x) { return unary(Op::Softmax, name, x); }
  int layerNorm(const std::string& name, int x, float eps = 1e-5f) {
    const int64_t w = g_.nodes[std::size_t(x)].features();
    const int v = unary(Op::LayerNorm, name, x);
    g_.nodes[std::size_t(v)].eps = eps;
    g_.nodes[std::size_t(v)].weight = tensor(name + ".weight", {w});
    g_.nodes[std::size_t(v)].bias = tensor(name + ".bias", {w});
    return v;
  }
  // x + a stored constant of x's shape.
  int addConst(const std::string& name, int x, const std::string& param) {
    const int v = unary(Op::AddConst, name, x);
    const std::vector<int64_t> s = g_.nodes[std::size_t(v)].shape;
    g_.nodes[std::size_t(v)].bias = tensor(param, s);
    return v;
  }
  // A reshape or transpose: output element i is input element gather[i].
  int select(const std::string& name, int x, std::vector<int64_t> shape, std::vector<int64_t> gather) {
    return select(name, std::vector<int>{x}, std::move(shape), std::move(gather));
  }
  // A concatenation (or any gather) of several inputs: gather indexes their samples laid end to
  // end (see selectOffsets).
  int select(const std::string& name, std::vector<int> inputs, std::vector<int64_t> shape, std::vector<int64_t> gather) {
    Node n;
    n.op = Op::Select;
    n.name = name;
    n.inputs = std::move(inputs);
    n.shape = std::move(shape);
    n.gather = std::move(gather);
    if (int64_t(n.gather.size()) != n.size() || n.inputs.empty())
      throw SaveError("internal: select '" + name + "' has a wrong gather");
    const int64_t total = selectOffsets(g_, n).back();
    for (int64_t i : n.gather)
      if (i < -1 || i >= total) throw SaveError("internal: select '" + name + "' reads outside its input");
    return add(std::move(n));
  }
  // The same values under another shape (a reshape, squeeze or flatten: no arithmetic).
  int view(const std::string& name, int x, std::vector<int64_t> shape) {
    Node n;
    n.op = Op::Flatten;
    n.name = name;
    n.inputs = {x};
    n.shape = std::move(shape);
    if (n.size() != g_.nodes[std::size_t(x)].size()) throw SaveError("internal: view '" + name + "' changes the size");
    return add(std::move(n));
  }
  // y = x * scale[c] + shift[c] per channel c of x's first dimension (a constant product: one
  // channel; the batch-norm op, whose arithmetic is exactly this).
  int affine(const std::string& name, int x, std::vector<float> scale, std::vector<float> shift) {
    Node n;
    n.op = Op::BatchNorm;
    n.name = name;
    n.inputs = {x};
    n.shape = g_.nodes[std::size_t(x)].shape;
    if (int64_t(scale.size()) != n.shape[0] || scale.size() != shift.size())
      throw SaveError("internal: affine '" + name + "' has the wrong number of channels");
    n.weight = std::move(scale);
    n.bias = std::move(shift);
    return add(std::move(n));
  }
  int matmul(const std::string& name, int a, int b) {  // [H, M, K] x [H, N, K]^T -> [H, M, N]
    const std::vector<int64_t>& sa = g_.nodes[std::size_t(a)].shape;
    const std::vector<int64_t>& sb = g_.nodes[std::size_t(b)].shape;
    if (sa.size() != 3 || sb.size() != 3 || sa[0] != sb[0] || sa[2] != sb[2])
      throw SaveError("matmul '" + name + "' has inputs of mismatched shapes");
    Node n;
    n.op = Op::MatMul;
    n.name = name;
    n.inputs = {a, b};
    n.shape = {sa[0], sa[1], sb[1]};
    return add(std::move(n));
  }
  // Scales output rows [first, first + count) of a linear node by s (a power of two keeps every
  // sum bit for bit the scaled one: folding attention's 1 / sqrt(head width) into the queries).
  void scaleRows(int v, int64_t first, int64_t count, float s) {
    Node& n = g_.nodes[std::size_t(v)];
    const int64_t in = int64_t(n.weight.size()) / int64_t(n.bias.size());
    for (int64_t o = first; o < first + count; ++o) {
      n.bias[std::size_t(o)] *= s;
      for (int64_t i = 0; i < in; ++i) n.weight[std::size_t(o * in + i)] *= s;
    }
  }
  // ceil: ONNX's ceil_mode=1 (PyTorch's ceil_mode=True): one more window where the last one would
  // be partial, unless it would start beyond the input and its left padding.
  int maxPool(const std::string& name, int x, int64_t k, int64_t stride, int64_t padding = 0, bool ceil = false) {
    return window(Op::MaxPool2d, "max-pool '", name, x, k, stride, padding, ceil);
  }
  int flatten(const std::string& name, int x) {
    Node n;
    n.op = Op::Flatten;
    n.name = name;
    n.inputs = {x};
    n.shape = {g_.nodes[std::size_t(x)].size()};
    return add(std::move(n));
  }
  int globalAvgPool(const std::string& name, int x) {
    Node n;
    n.op = Op::GlobalAvgPool;
    n.name = name;
    n.inputs = {x};
    n.shape = {g_.nodes[std::size_t(x)].shape[0]};
    return add(std::move(n));
  }
  int mul(const std::string& name, int a, int b) {  // element-wise, equal shapes
    const int v = addNodes(name, a, b);
    g_.nodes[std::size_t(v)].op = Op::Mul;
    return v;
  }
  int addNodes(const std::string& name, int a, int b) {
    if (g_.nodes[std::size_t(a)].shape != g_.nodes[std::size_t(b)].shape)
      throw SaveError("add '" + name + "' has inputs of different shapes");
    Node n;
    n.op = Op::Add;
    n.name = name;
    n.inputs = {a, b};
    n.shape = g_.nodes[std::size_t(a)].shape;
    return add(std::move(n));
  }

 private:
  // A pooling window op (max or average) of kernel k over a [C, H, W] input.
  int window(Op op, const char* what, const std::string& name, int x, int64_t k, int64_t stride, int64_t padding,
             bool ceil = false) {
    const std::vector<int64_t> s = g_.nodes[std::size_t(x)].shape;
    if (s.size() != 3 || k < 1 || stride < 1 || padding < 0 || padding >= k)
      throw SaveError(what + name + "' needs a [C, H, W] input and 0 <= padding < kernel");
    Node n;
    n.op = op;
    n.name = name;
    n.inputs = {x};
    n.kernel = k;
    n.stride = stride;
    n.padding = padding;
    auto extent = [&](int64_t in) {
      if (in + 2 * padding < k) throw SaveError(what + name + "' has a window larger than its padded input");
      int64_t out = (in + 2 * padding - k + (ceil ? stride - 1 : 0)) / stride + 1;
      if (ceil && (out - 1) * stride >= in + padding) --out;  // PyTorch's rule: the last window starts inside
      return out;
    };
    n.shape = {s[0], extent(s[1]), extent(s[2])};
    return add(std::move(n));
  }
  // Every node's name is unique (a session stores each layer under it): a name taken already
  // (two views made for one ONNX node, an exporter's name that equals a derived one) gets "-2", "-3".
  int add(Node n) {
    if (used_.count(n.name)) {
      std::string unique;
      for (int k = 2; used_.count(unique = n.name + "-" + std::to_string(k)); ++k) {
      }
      n.name = unique;
    }
    used_.insert(n.name);
    g_.nodes.push_back(std::move(n));
    return int(g_.nodes.size()) - 1;
  }

  std::vector<float> tensor(const std::string& name, const std::vector<int64_t>& shape) {
    auto it = params_.find(name);
    if (it == params_.end() && random_) {
      int64_t count = 1, fanIn = 1;
      for (std::size_t d = 0; d < shape.size(); ++d) {
        count *= shape[d];
        if (d > 0) fanIn *= shape[d];
      }
      std::vector<float> v(static_cast<std::size_t>(count));
      const bool bn = name.find("bn") != std::string::npos || name.find("running") != std::string::npos;
      const float bound = bn ? 0.1f : 1.0f / std::sqrt(float(shape.size() > 1 ? fanIn : shape[0]));
      std::uniform_real_distribution<float> u(-bound, bound);
      for (float& x : v) x = u(rng_);
      if (name.find("running_var") != std::string::npos || (bn && name.find("weight") != std::string::npos))
        for (float& x : v) x += 1.0f;
      return v;
    }
    if (it == params_.end())
      throw SaveError("the checkpoint has no tensor '" + name + "' of model " + g_.model +
                      " (was it written by another model?)");
    const store::Tensor& t = it->second;
    std::vector<uint64_t> want(shape.begin(), shape.end());
    if (t.shape != want || t.dtype != store::DType::F32)
      throw SaveError("checkpoint tensor '" + name + "' is not the fp32 shape model " + g_.model +
                      " expects (was it written by another model?)");
    std::vector<float> v(t.elementCount());
    std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(float));
    return v;
  }
  Graph& g_;
  const std::map<std::string, store::Tensor>& params_;
  bool random_ = false;
  std::set<std::string> used_;  // the names of the nodes added
 public:
  const Node& node(int v) const { return g_.nodes[std::size_t(v)]; }
 private:
  std::mt19937_64 rng_;
};

}  // namespace peat::save::detail
