// SPDX-License-Identifier: MIT
#include "core/save/graph.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/save/engine_simd.h"
#include "core/store/session.h"

namespace peat::save {

const char* opName(Op op) {
  switch (op) {
    case Op::Input: return "input";
    case Op::Linear: return "linear";
    case Op::Conv2d: return "conv2d";
    case Op::Relu: return "relu";
    case Op::MaxPool2d: return "maxpool2d";
    case Op::GlobalAvgPool: return "avgpool2d";
    case Op::BatchNorm: return "batchnorm";
    case Op::Add: return "add";
    case Op::Flatten: return "flatten";
    case Op::Select: return "select";
    case Op::Max2: return "max";
  }
  return "?";
}

int64_t Node::size() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Graph::parameterCount() const {
  int64_t n = 0;
  for (const Node& node : nodes) n += int64_t(node.weight.size() + node.bias.size());
  return n;
}

namespace {

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
    const int64_t in = g_.nodes[std::size_t(x)].size();
    n.weight = tensor(name + ".weight", {out, in});
    n.bias = tensor(name + ".bias", {out});
    n.shape = {out};
    return add(std::move(n));
  }
  int conv(const std::string& name, int x, int64_t out, int64_t k, int64_t stride, int64_t padding, bool bias) {
    const Node& from = g_.nodes[std::size_t(x)];
    if (from.shape.size() != 3) throw SaveError("conv2d '" + name + "' needs a [C, H, W] input");
    Node n;
    n.op = Op::Conv2d;
    n.name = name;
    n.inputs = {x};
    n.kernel = k;
    n.stride = stride;
    n.padding = padding;
    n.weight = tensor(name + ".weight", {out, from.shape[0], k, k});
    if (bias) n.bias = tensor(name + ".bias", {out});
    n.shape = {out, (from.shape[1] + 2 * padding - k) / stride + 1, (from.shape[2] + 2 * padding - k) / stride + 1};
    return add(std::move(n));
  }
  int batchNorm(const std::string& name, int x) {
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
    for (std::size_t i = 0; i < std::size_t(c); ++i) {  // the eval-mode affine map, eps as torch's 1e-5
      const double scale = double(gamma[i]) / std::sqrt(double(var[i]) + 1e-5);
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
  int maxPool(const std::string& name, int x, int64_t k, int64_t stride) {
    const std::vector<int64_t> s = g_.nodes[std::size_t(x)].shape;
    Node n;
    n.op = Op::MaxPool2d;
    n.name = name;
    n.inputs = {x};
    n.kernel = k;
    n.stride = stride;
    n.shape = {s[0], (s[1] - k) / stride + 1, (s[2] - k) / stride + 1};
    return add(std::move(n));
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
  int add(Node n) {
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
  std::mt19937_64 rng_;
};

// ResNet-18's shape (torchvision's layout, without the stem pool's padding) on 3x224x224 images.
int resnet18(Builder& b) {
  int x = b.input({3, 224, 224});
  x = b.relu("relu", b.batchNorm("bn1", b.conv("conv1", x, 64, 7, 2, 3, false)));
  x = b.maxPool("maxpool", x, 3, 2);
  int64_t in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t out = int64_t(64) << stage;
    for (int block = 0; block < 2; ++block) {
      const std::string n = "layer" + std::to_string(stage + 1) + "." + std::to_string(block);
      const int64_t stride = block == 0 && stage > 0 ? 2 : 1;
      int h = b.relu(n + ".relu1", b.batchNorm(n + ".bn1", b.conv(n + ".conv1", x, out, 3, stride, 1, false)));
      h = b.batchNorm(n + ".bn2", b.conv(n + ".conv2", h, out, 3, 1, 1, false));
      int skip = x;
      if (stride != 1 || in != out)
        skip = b.batchNorm(n + ".downsample.1", b.conv(n + ".downsample.0", x, out, 1, stride, 0, false));
      x = b.relu(n + ".relu2", b.addNodes(n + ".add", h, skip));
      in = out;
    }
  }
  return b.linear("fc", b.globalAvgPool("avgpool", x), 1000);
}

}  // namespace

Graph randomGraph(const std::string& model, uint64_t seed) {
  if (model != "resnet18") return zooGraph(model, {}, seed);
  Graph g;
  g.model = model;
  g.inputMean = 0.449f;  // ImageNet's mean and deviation, averaged over the channels
  g.inputDeviation = 0.226f;
  const std::map<std::string, store::Tensor> none;
  Builder b(g, none);
  b.randomFill(seed);
  g.output = resnet18(b);
  return g;
}

Graph zooGraph(const std::string& model, const std::map<std::string, store::Tensor>& parameters) {
  return zooGraph(model, parameters, 0);
}

Graph zooGraph(const std::string& model, const std::map<std::string, store::Tensor>& parameters, uint64_t randomSeed) {
  Graph g;
  g.model = model;
  g.inputMean = 0.2860f;  // Fashion-MNIST, as the trainer normalises it
  g.inputDeviation = 0.3530f;
  Builder b(g, parameters);
  if (randomSeed) b.randomFill(randomSeed);
  if (model == "mlp") {
    int x = b.flatten("flatten", b.input({1, 28, 28}));
    x = b.relu("fc1.relu", b.linear("fc1", x, 256));
    x = b.relu("fc2.relu", b.linear("fc2", x, 128));
    g.output = b.linear("fc3", x, 10);
  } else if (model == "lenet") {
    int x = b.input({1, 28, 28});
    x = b.maxPool("pool1", b.relu("conv1.relu", b.conv("conv1", x, 6, 5, 1, 2, true)), 2, 2);
    x = b.maxPool("pool2", b.relu("conv2.relu", b.conv("conv2", x, 16, 5, 1, 0, true)), 2, 2);
    x = b.flatten("flatten", x);
    x = b.relu("fc1.relu", b.linear("fc1", x, 120));
    x = b.relu("fc2.relu", b.linear("fc2", x, 84));
    g.output = b.linear("fc3", x, 10);
  } else if (model == "resnet") {
    int x = b.input({1, 28, 28});
    x = b.relu("stem.relu", b.batchNorm("stem.bn", b.conv("stem.conv", x, 16, 3, 1, 1, false)));
    const struct {
      const char* name;
      int64_t in, out, stride;
    } blocks[] = {{"block1", 16, 16, 1}, {"block2", 16, 32, 2}, {"block3", 32, 64, 2}};
    for (const auto& blk : blocks) {
      const std::string n = blk.name;
      int h = b.batchNorm(n + ".bn1", b.conv(n + ".conv1", x, blk.out, 3, blk.stride, 1, false));
      h = b.relu(n + ".relu1", h);
      h = b.batchNorm(n + ".bn2", b.conv(n + ".conv2", h, blk.out, 3, 1, 1, false));
      int skip = x;
      if (blk.stride != 1 || blk.in != blk.out)
        skip = b.batchNorm(n + ".shortcut.bn", b.conv(n + ".shortcut", x, blk.out, 1, blk.stride, 0, false));
      x = b.relu(n + ".relu2", b.addNodes(n + ".add", h, skip));
    }
    g.output = b.linear("fc", b.globalAvgPool("pool", x), 10);
  } else if (model == "chargpt") {
    throw SaveError("model chargpt uses op 'embedding', which has no range transfer function in SAVE");
  } else if (model == "vit") {
    throw SaveError("model vit uses op 'layernorm', which has no range transfer function in SAVE yet");
  } else {
    throw SaveError("unknown model '" + model + "' (SAVE knows mlp, lenet, resnet)");
  }
  return g;
}

std::map<std::string, store::Tensor> loadCheckpoint(const std::string& path, const std::string& run,
                                                    int64_t iteration) {
  store::SessionReader reader(path);
  if (iteration < 0) {
    const store::SessionSummary s = reader.summary();
    for (const store::RunInfo& r : s.runs)
      if (r.name == run && !r.checkpoints.empty()) iteration = r.checkpoints.back();
    if (iteration < 0) throw SaveError("run '" + run + "' of " + path + " has no checkpoint");
  }
  return reader.checkpoint(run, iteration).parameters;
}

int topClass(const float* logits, int64_t n) {
  int best = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(logits[i])) return -1;
    if (logits[i] > logits[best]) best = int(i);
  }
  return best;
}

float affineElement(const Node& n, const Node& src, const float* x, int64_t element) {
  if (n.op == Op::Linear) {
    const int64_t inSize = src.size();
    const float* w = n.weight.data() + element * inSize;
    float acc = n.bias[std::size_t(element)];
    for (int64_t i = 0; i < inSize; ++i) acc += w[i] * x[i];
    return acc;
  }
  // conv2d as a GEMM over the unfolded input (im2col): bias, then every tap in (channel, kernel
  // row, kernel column) order, the zero padding included (it can turn a -0 sum into +0)
  const int64_t ci = src.shape[0], h = src.shape[1], w = src.shape[2], k = n.kernel;
  const int64_t oh = n.shape[1], ow = n.shape[2];
  const int64_t o = element / (oh * ow), y = (element / ow) % oh, xx = element % ow;
  float acc = n.bias.empty() ? 0.0f : n.bias[std::size_t(o)];
  const float* wr = n.weight.data() + o * ci * k * k;
  for (int64_t c = 0; c < ci; ++c)
    for (int64_t ky = 0; ky < k; ++ky) {
      const int64_t iy = y * n.stride + ky - n.padding;
      for (int64_t kx = 0; kx < k; ++kx) {
        const int64_t ix = xx * n.stride + kx - n.padding;
        const float xv = iy < 0 || iy >= h || ix < 0 || ix >= w ? 0.0f : x[(c * h + iy) * w + ix];
        acc += *wr++ * xv;
      }
    }
  return acc;
}

float elementOf(const Graph& g, int index, const std::vector<const float*>& in, int64_t e) {
  const Node& n = g.nodes[std::size_t(index)];
  const Node& src = g.nodes[std::size_t(n.inputs.at(0))];
  switch (n.op) {
    case Op::Input:
      throw SaveError("the input node has nothing to compute");
    case Op::Linear:
    case Op::Conv2d:
      return affineElement(n, src, in[0], e);
    case Op::Flatten:
      return in[0][e];
    case Op::Relu:
      return in[0][e] > 0 ? in[0][e] : 0.0f;
    case Op::Add:
      return in[0][e] + in[1][e];
    case Op::Max2:
      return std::max(in[0][e], in[1][e]);
    case Op::Select:
      return in[0][n.gather[std::size_t(e)]];
    case Op::BatchNorm: {
      const int64_t ch = e / (n.size() / n.shape[0]);
      return in[0][e] * n.weight[std::size_t(ch)] + n.bias[std::size_t(ch)];
    }
    case Op::MaxPool2d: {
      const int64_t oh = n.shape[1], ow = n.shape[2], h = src.shape[1], w = src.shape[2];
      const int64_t ch = e / (oh * ow), y = (e / ow) % oh, xx = e % ow;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t ky = 0; ky < n.kernel; ++ky)
        for (int64_t kx = 0; kx < n.kernel; ++kx)
          m = std::max(m, in[0][(ch * h + y * n.stride + ky) * w + xx * n.stride + kx]);
      return m;
    }
    case Op::GlobalAvgPool: {
      const int64_t hw = src.size() / n.shape[0];
      float acc = 0;
      for (int64_t i = 0; i < hw; ++i) acc += in[0][e * hw + i];
      return acc / float(hw);
    }
  }
  return 0;
}

void runNode(const Graph& g, int index, const std::vector<const float*>& in, int64_t batch, float* out) {
  const Node& n = g.nodes[std::size_t(index)];
  const int64_t size = n.size();
  const Node* src = n.inputs.empty() ? nullptr : &g.nodes[std::size_t(n.inputs[0])];
  const int64_t inSize = src ? src->size() : 0;
  switch (n.op) {
    case Op::Input:
      throw SaveError("the input node has nothing to run");
    case Op::Flatten:
      std::memcpy(out, in[0], std::size_t(batch * size) * sizeof(float));
      return;
    case Op::Relu:
      for (int64_t i = 0; i < batch * size; ++i) out[i] = in[0][i] > 0 ? in[0][i] : 0.0f;
      return;
    case Op::Add:
      for (int64_t i = 0; i < batch * size; ++i) out[i] = in[0][i] + in[1][i];
      return;
    case Op::Max2:
      for (int64_t i = 0; i < batch * size; ++i) out[i] = std::max(in[0][i], in[1][i]);
      return;
    case Op::Select:
      for (int64_t s = 0; s < batch; ++s)
        for (int64_t i = 0; i < size; ++i) out[s * size + i] = in[0][s * inSize + n.gather[std::size_t(i)]];
      return;
    case Op::BatchNorm: {
      const int64_t c = n.shape[0], hw = size / c;
      for (int64_t s = 0; s < batch; ++s)
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t i = 0; i < hw; ++i) {
            const int64_t at = s * size + ch * hw + i;
            out[at] = in[0][at] * n.weight[std::size_t(ch)] + n.bias[std::size_t(ch)];
          }
      return;
    }
    case Op::Linear: {
      if (batch < 4) {
        for (int64_t s = 0; s < batch; ++s)
          for (int64_t o = 0; o < size; ++o) out[s * size + o] = affineElement(n, *src, in[0] + s * inSize, o);
        return;
      }
      // The same sums as a GEMM over the batch: positions are the samples.
      std::vector<float> xt(std::size_t(inSize * batch)), yt(std::size_t(size * batch));
      for (int64_t s = 0; s < batch; ++s)
        for (int64_t i = 0; i < inSize; ++i) xt[std::size_t(i * batch + s)] = in[0][s * inSize + i];
      detail::convGemm(n.weight.data(), size, inSize, xt.data(), batch, n.bias.data(), yt.data());
      for (int64_t s = 0; s < batch; ++s)
        for (int64_t o = 0; o < size; ++o) out[s * size + o] = yt[std::size_t(o * batch + s)];
      return;
    }
    case Op::Conv2d: {
      // im2col, then a GEMM vectorised over output positions: each element still sums bias, then
      // the taps in affineElement's order.
      const int64_t ci = src->shape[0], h = src->shape[1], w = src->shape[2], k = n.kernel, st = n.stride;
      const int64_t co = n.shape[0], oh = n.shape[1], ow = n.shape[2], positions = oh * ow, taps = ci * k * k;
      std::vector<float> cols(std::size_t(taps * positions));
      for (int64_t s = 0; s < batch; ++s) {
        const float* x = in[0] + s * inSize;
        float* col = cols.data();
        for (int64_t c = 0; c < ci; ++c)
          for (int64_t ky = 0; ky < k; ++ky)
            for (int64_t kx = 0; kx < k; ++kx)
              for (int64_t y = 0; y < oh; ++y) {
                const int64_t iy = y * st + ky - n.padding;
                for (int64_t xx = 0; xx < ow; ++xx) {
                  const int64_t ix = xx * st + kx - n.padding;
                  *col++ = iy < 0 || iy >= h || ix < 0 || ix >= w ? 0.0f : x[(c * h + iy) * w + ix];
                }
              }
        detail::convGemm(n.weight.data(), co, taps, cols.data(), positions, n.bias.empty() ? nullptr : n.bias.data(),
                         out + s * size);
      }
      return;
    }
    case Op::MaxPool2d: {
      const int64_t c = n.shape[0], oh = n.shape[1], ow = n.shape[2], h = src->shape[1], w = src->shape[2];
      for (int64_t s = 0; s < batch; ++s)
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t y = 0; y < oh; ++y)
            for (int64_t xx = 0; xx < ow; ++xx) {
              float m = -std::numeric_limits<float>::infinity();
              for (int64_t ky = 0; ky < n.kernel; ++ky)
                for (int64_t kx = 0; kx < n.kernel; ++kx)
                  m = std::max(m, in[0][s * inSize + (ch * h + y * n.stride + ky) * w + xx * n.stride + kx]);
              out[s * size + (ch * oh + y) * ow + xx] = m;
            }
      return;
    }
    case Op::GlobalAvgPool: {
      const int64_t c = n.shape[0], hw = inSize / c;
      for (int64_t s = 0; s < batch; ++s)
        for (int64_t ch = 0; ch < c; ++ch) {
          float acc = 0;
          for (int64_t i = 0; i < hw; ++i) acc += in[0][s * inSize + ch * hw + i];
          out[s * size + ch] = acc / float(hw);
        }
      return;
    }
  }
}

std::vector<std::vector<float>> runAll(const Graph& g, const float* input, int64_t batch) {
  std::vector<std::vector<float>> act(g.nodes.size());
  act[0].assign(input, input + batch * g.nodes[0].size());
  for (std::size_t i = 1; i < g.nodes.size(); ++i) {
    std::vector<const float*> in;
    for (int j : g.nodes[i].inputs) in.push_back(act[std::size_t(j)].data());
    act[i].resize(std::size_t(batch * g.nodes[i].size()));
    runNode(g, int(i), in, batch, act[i].data());
  }
  return act;
}

}  // namespace peat::save
