// SPDX-License-Identifier: MIT
// Empirical ranges from the fp32 engine, NOT sound: profiled min/max over samples, and gradient
// ascent inside the box (with the input gradient that also ranks input splits).
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "core/save/ranges_detail.h"

namespace peat::save {

namespace detail {

namespace {

using Tensors = std::vector<std::vector<float>>;

// Ops whose backward pass takes more than a few lines, one function each (gradientStep dispatches).

void gradientLinear(const Node& n, const std::vector<float>& gy, std::vector<float>& gx) {
  const std::size_t size = gy.size();
  const std::size_t features = std::size_t(n.features()), taps = n.weight.size() / features;
  for (std::size_t j = 0; j < size; ++j)
    if (gy[j] != 0) {
      const std::size_t o = j % features, row = (j / features) * taps;
      for (std::size_t i = 0; i < taps; ++i) gx[row + i] += gy[j] * n.weight[o * taps + i];
    }
}

void gradientConv(const Node& n, const Node& src, const std::vector<float>& gy, std::vector<float>& gx) {
  const std::size_t size = gy.size();
  for (std::size_t j = 0; j < size; ++j) {
    const float d = gy[j];
    if (d != 0) forEachTap(n, src, int64_t(j), [&](std::size_t w, std::size_t i) { gx[i] += d * n.weight[w]; });
  }
}

void gradientMaxPool(const Node& n, const Node& src, const std::vector<float>& x, const std::vector<float>& gy,
                     std::vector<float>& gx) {
  const int64_t c = n.shape[0], oh = n.shape[1], ow = n.shape[2], h = src.shape[1], w = src.shape[2];
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xx = 0; xx < ow; ++xx) {
        std::size_t best = std::size_t(poolInput(n, h, w, ch, y, xx, 0, 0));
        for (int64_t ky = 0; ky < n.kernel; ++ky)
          for (int64_t kx = 0; kx < n.kernel; ++kx) {
            const std::size_t at = std::size_t(poolInput(n, h, w, ch, y, xx, ky, kx));
            if (x[at] > x[best]) best = at;
          }
        gx[best] += gy[std::size_t((ch * oh + y) * ow + xx)];
      }
}

void gradientMul(const Node& n, const Tensors& act, Tensors& grad, const std::vector<float>& gy) {
  const std::size_t size = gy.size();
  std::vector<float>& gx = grad[std::size_t(n.inputs[0])];
  const std::vector<float>& x = act[std::size_t(n.inputs[0])];
  const std::vector<float>& y = act[std::size_t(n.inputs[1])];
  std::vector<float>& gyIn = grad[std::size_t(n.inputs[1])];
  for (std::size_t i = 0; i < size; ++i) {
    gx[i] += gy[i] * y[i];
    gyIn[i] += gy[i] * x[i];
  }
}

void gradientSoftmax(const Node& n, const std::vector<float>& y, const std::vector<float>& gy, std::vector<float>& gx) {
  const std::size_t size = gy.size();
  const std::size_t w = std::size_t(n.features());
  for (std::size_t r = 0; r < size / w; ++r) {
    double dot = 0;
    for (std::size_t i = 0; i < w; ++i) dot += double(gy[r * w + i]) * y[r * w + i];
    for (std::size_t i = 0; i < w; ++i) gx[r * w + i] += float(y[r * w + i] * (gy[r * w + i] - dot));
  }
}

void gradientLayerNorm(const Node& n, const std::vector<float>& x, const std::vector<float>& gy,
                       std::vector<float>& gx) {
  const std::size_t size = gy.size();
  // n = (x - mean) / sigma; dx = (g - mean(g) - n mean(g n)) / sigma, g = dy * gamma
  const std::size_t w = std::size_t(n.features());
  for (std::size_t r = 0; r < size / w; ++r) {
    const float* xr = x.data() + r * w;
    double mean = 0, var = 0;
    for (std::size_t i = 0; i < w; ++i) mean += xr[i];
    mean /= double(w);
    for (std::size_t i = 0; i < w; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const double rstd = 1 / std::sqrt(var / double(w) + double(n.eps));
    double gMean = 0, gnMean = 0;
    for (std::size_t i = 0; i < w; ++i) {
      const double gi = double(gy[r * w + i]) * n.weight[i];
      gMean += gi;
      gnMean += gi * (xr[i] - mean) * rstd;
    }
    gMean /= double(w);
    gnMean /= double(w);
    for (std::size_t i = 0; i < w; ++i) {
      const double gi = double(gy[r * w + i]) * n.weight[i];
      gx[r * w + i] += float(rstd * (gi - gMean - (xr[i] - mean) * rstd * gnMean));
    }
  }
}

void gradientMatMul(const Node& n, const Node& src, const Tensors& act, Tensors& grad, const std::vector<float>& gy) {
  const std::size_t size = gy.size();
  std::vector<float>& gx = grad[std::size_t(n.inputs[0])];
  const std::vector<float>& x = act[std::size_t(n.inputs[0])];
  const std::vector<float>& b = act[std::size_t(n.inputs[1])];
  std::vector<float>& gb = grad[std::size_t(n.inputs[1])];
  const std::size_t k = std::size_t(src.shape[2]), rows = std::size_t(n.shape[1]), cols = std::size_t(n.shape[2]);
  for (std::size_t j = 0; j < size; ++j) {
    if (gy[j] == 0) continue;
    const std::size_t h = j / (rows * cols), m = (j / cols) % rows, c = j % cols;
    for (std::size_t i = 0; i < k; ++i) {
      gx[(h * rows + m) * k + i] += gy[j] * b[(h * cols + c) * k + i];
      gb[(h * cols + c) * k + i] += gy[j] * x[(h * rows + m) * k + i];
    }
  }
}

// Adds node v's gradient into its inputs' gradients.
void gradientStep(const Graph& g, const Tensors& act, int v, Tensors& grad) {
  const Node& n = g.nodes[std::size_t(v)];
  const std::vector<float>& gy = grad[std::size_t(v)];
  std::vector<float>& gx = grad[std::size_t(n.inputs[0])];
  const Node& src = g.nodes[std::size_t(n.inputs[0])];
  const std::vector<float>& x = act[std::size_t(n.inputs[0])];
  const std::size_t size = gy.size(), inSize = gx.size();
  switch (n.op) {
    case Op::Input:
    case Op::Embed:  // token ids are discrete: no gradient reaches them
      break;
    case Op::Flatten:
      for (std::size_t i = 0; i < size; ++i) gx[i] += gy[i];
      break;
    case Op::Relu:
      for (std::size_t i = 0; i < size; ++i) gx[i] += x[i] > 0 ? gy[i] : 0.0f;
      break;
    case Op::Add:
      for (int in : n.inputs)
        for (std::size_t i = 0; i < size; ++i) grad[std::size_t(in)][i] += gy[i];
      break;
    case Op::Select:
      addBackThroughSelect(g, n, gy, grad);
      break;
    case Op::Max2: {
      const std::vector<float>& y = act[std::size_t(n.inputs[1])];
      for (std::size_t i = 0; i < size; ++i) grad[std::size_t(x[i] >= y[i] ? n.inputs[0] : n.inputs[1])][i] += gy[i];
      break;
    }
    case Op::BatchNorm: {
      const std::size_t hw = size / std::size_t(n.shape[0]);
      for (std::size_t i = 0; i < size; ++i) gx[i] += gy[i] * n.weight[i / hw];
      break;
    }
    case Op::GlobalAvgPool: {
      const std::size_t hw = inSize / size;
      for (std::size_t i = 0; i < inSize; ++i) gx[i] += gy[i / hw] / float(hw);
      break;
    }
    case Op::Linear:
      gradientLinear(n, gy, gx);
      break;
    case Op::AddConst:
      for (std::size_t i = 0; i < size; ++i) gx[i] += gy[i];
      break;
    case Op::Sigmoid:
    case Op::Tanh: {
      const std::vector<float>& y = act[std::size_t(v)];
      for (std::size_t i = 0; i < size; ++i) gx[i] += gy[i] * (n.op == Op::Tanh ? 1 - y[i] * y[i] : y[i] * (1 - y[i]));
      break;
    }
    case Op::Mul:
      gradientMul(n, act, grad, gy);
      break;
    case Op::Gelu:
      for (std::size_t i = 0; i < size; ++i) {
        const double xi = x[i], cdf = 0.5 * (1 + std::erf(xi / std::sqrt(2.0)));
        gx[i] += float(gy[i] * (cdf + xi * std::exp(-0.5 * xi * xi) / std::sqrt(2 * M_PI)));
      }
      break;
    case Op::Softmax:
      gradientSoftmax(n, act[std::size_t(v)], gy, gx);
      break;
    case Op::LayerNorm:
      gradientLayerNorm(n, x, gy, gx);
      break;
    case Op::MatMul:
      gradientMatMul(n, src, act, grad, gy);
      break;
    case Op::Conv2d:
      gradientConv(n, src, gy, gx);
      break;
    case Op::MaxPool2d:
      gradientMaxPool(n, src, x, gy, gx);
      break;
    case Op::AvgPool2d:
      detail::addBackThroughAvgPool(n, src, gy, gx);
      break;
    case Op::Clip:
      for (std::size_t i = 0; i < size; ++i) gx[i] += x[i] > n.bias[0] && x[i] < n.bias[1] ? gy[i] : 0.0f;
      break;
  }
}

}  // namespace

std::vector<float> inputGradient(const Graph& g, const std::vector<std::vector<float>>& act, int node,
                                 std::size_t element) {
  std::vector<std::vector<float>> grad(g.nodes.size());
  for (std::size_t v = 0; v <= std::size_t(node); ++v) grad[v].assign(std::size_t(g.nodes[v].size()), 0.0f);
  grad[std::size_t(node)][element] = 1;
  for (int v = node; v >= 1; --v) gradientStep(g, act, v, grad);
  return grad[0];
}

}  // namespace detail

std::vector<NodeRange> profiledRanges(const Graph& g, const float* inputs, int64_t samples) {
  std::vector<NodeRange> r(g.nodes.size());
  for (std::size_t v = 0; v < g.nodes.size(); ++v) {
    r[v].lo.assign(std::size_t(g.nodes[v].size()), std::numeric_limits<double>::infinity());
    r[v].hi.assign(std::size_t(g.nodes[v].size()), -std::numeric_limits<double>::infinity());
  }
  const int64_t batch = 256, inSize = g.nodes[0].size();
  for (int64_t first = 0; first < samples; first += batch) {
    const int64_t n = std::min(batch, samples - first);
    const std::vector<std::vector<float>> act = runAll(g, inputs + first * inSize, n);
    for (std::size_t v = 0; v < g.nodes.size(); ++v) {
      const std::size_t size = std::size_t(g.nodes[v].size());
      for (int64_t s = 0; s < n; ++s)
        for (std::size_t i = 0; i < size; ++i) {
          const double val = act[v][std::size_t(s) * size + i];
          r[v].lo[i] = std::min(r[v].lo[i], val);
          r[v].hi[i] = std::max(r[v].hi[i], val);
        }
    }
  }
  return r;
}

NodeRange ascentRanges(const Graph& g, int node, const NodeRange& input, int steps, int starts, uint64_t seed) {
  const std::size_t size = std::size_t(g.nodes[std::size_t(node)].size()), inSize = input.lo.size();
  NodeRange out;
  out.lo.assign(size, std::numeric_limits<double>::infinity());
  out.hi.assign(size, -std::numeric_limits<double>::infinity());
  std::mt19937_64 rng(seed);
  std::vector<float> x(inSize);
  // token ids and integer inputs (masks) take whole values inside their box
  std::vector<char> integral(inSize, g.tokens > 0 ? 1 : 0);
  for (const OutputPart& p : g.inputs)
    if (g.inputs.size() > 1 && (p.tokens > 0 || p.integer))
      std::fill(integral.begin() + p.offset, integral.begin() + p.offset + p.size(), 1);
  const auto whole = [&](std::size_t i) {
    if (integral[i]) x[i] = std::clamp(std::round(x[i]), float(std::ceil(input.lo[i])), float(std::floor(input.hi[i])));
  };
  for (std::size_t e = 0; e < size; ++e)
    for (int direction : {1, -1})
      for (int s = 0; s < starts; ++s) {
        for (std::size_t i = 0; i < inSize; ++i) {
          const double t = s == 0 ? 0.5 : std::uniform_real_distribution<double>(0, 1)(rng);
          x[i] = float(input.lo[i] + t * (input.hi[i] - input.lo[i]));
          whole(i);
        }
        for (int step = 0; step <= steps; ++step) {
          const std::vector<std::vector<float>> act = runAll(g, x.data(), 1);
          const double value = act[std::size_t(node)][e];
          out.lo[e] = std::min(out.lo[e], value);
          out.hi[e] = std::max(out.hi[e], value);
          if (step == steps) break;
          const std::vector<float> grad = detail::inputGradient(g, act, node, e);
          const double rate = 0.2 * (1.0 - double(step) / steps) + 0.01;
          for (std::size_t i = 0; i < inSize; ++i) {
            const double move = direction * (grad[i] > 0 ? 1 : grad[i] < 0 ? -1 : 0) * rate * (input.hi[i] - input.lo[i]);
            x[i] = float(std::clamp(double(x[i]) + move, input.lo[i], input.hi[i]));
            whole(i);
          }
        }
      }
  return out;
}

}  // namespace peat::save
