// SPDX-License-Identifier: MIT
#include "core/save/sensitivity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "core/save/ranges_detail.h"

namespace peat::save {

namespace {

// One backward pass of |Jacobian| bounds for logit k: s[v][e] bounds |d logit_k / d value (v, e)|.
// Weight sensitivities accumulate alongside (per logit, then maxed by the caller).
void backward(const Graph& g, const std::vector<NodeRange>& r, int64_t k, std::vector<std::vector<double>>& s,
              std::vector<std::vector<double>>& w) {
  for (std::size_t v = 0; v < g.nodes.size(); ++v) std::fill(s[v].begin(), s[v].end(), 0.0);
  for (auto& x : w) std::fill(x.begin(), x.end(), 0.0);
  s[std::size_t(g.output)][std::size_t(k)] = 1.0;
  for (std::size_t v = g.nodes.size(); v-- > 1;) {
    const Node& n = g.nodes[v];
    const std::vector<double>& so = s[v];
    const std::size_t size = so.size();
    const int in0 = n.inputs[0];
    std::vector<double>& si = s[std::size_t(in0)];
    const Node& src = g.nodes[std::size_t(in0)];
    const NodeRange& x = r[std::size_t(in0)];
    switch (n.op) {
      case Op::Input:
        break;
      case Op::Flatten:
      case Op::Relu:
      case Op::Clip:
      case Op::AddConst:
      case Op::Tanh:
        for (std::size_t i = 0; i < size; ++i) si[i] += so[i];
        break;
      case Op::Sigmoid:
        for (std::size_t i = 0; i < size; ++i) si[i] += 0.25 * so[i];
        break;
      case Op::Gelu:
        for (std::size_t i = 0; i < size; ++i) si[i] += 1.13 * so[i];
        break;
      case Op::Select:
        addBackThroughSelect(g, n, so, s);
        break;
      case Op::Add:
      case Op::Max2:
        for (int input : n.inputs)
          for (std::size_t i = 0; i < size; ++i) s[std::size_t(input)][i] += so[i];
        break;
      case Op::BatchNorm: {
        const std::size_t hw = size / std::size_t(n.shape[0]);
        for (std::size_t i = 0; i < size; ++i) si[i] += std::fabs(double(n.weight[i / hw])) * so[i];
        break;
      }
      case Op::GlobalAvgPool: {
        const std::size_t hw = si.size() / size;
        for (std::size_t i = 0; i < si.size(); ++i) si[i] += so[i / hw] / double(hw);
        break;
      }
      case Op::AvgPool2d:
        detail::addBackThroughAvgPool(n, src, so, si);
        break;
      case Op::MaxPool2d: {  // a change of one element moves every window max that reads it by at most as much
        const int64_t c = n.shape[0], oh = n.shape[1], ow = n.shape[2], h = src.shape[1], wd = src.shape[2];
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t y = 0; y < oh; ++y)
            for (int64_t xx = 0; xx < ow; ++xx) {
              const double d = so[std::size_t((ch * oh + y) * ow + xx)];
              if (d == 0) continue;
              // each distinct element of the window once (padding repeats the clamped ones)
              std::vector<int64_t> seen;
              for (int64_t ky = 0; ky < n.kernel; ++ky)
                for (int64_t kx = 0; kx < n.kernel; ++kx) {
                  const int64_t at = poolInput(n, h, wd, ch, y, xx, ky, kx);
                  if (std::find(seen.begin(), seen.end(), at) == seen.end()) {
                    seen.push_back(at);
                    si[std::size_t(at)] += d;
                  }
                }
            }
        break;
      }
      case Op::Softmax: {  // |d y_i / d x_j| <= 1/4 everywhere
        const std::size_t wd = std::size_t(n.features());
        for (std::size_t row = 0; row < size / wd; ++row) {
          double sum = 0;
          for (std::size_t i = 0; i < wd; ++i) sum += so[row * wd + i];
          for (std::size_t j = 0; j < wd; ++j) si[row * wd + j] += 0.25 * sum;
        }
        break;
      }
      case Op::Linear: {
        const std::size_t features = std::size_t(n.features()), taps = n.weight.size() / features;
        std::vector<double>& ws = w[v];
        for (std::size_t j = 0; j < size; ++j) {
          const double d = so[j];
          if (d == 0) continue;
          const std::size_t o = j % features, row = (j / features) * taps;
          for (std::size_t i = 0; i < taps; ++i) {
            si[row + i] += std::fabs(double(n.weight[o * taps + i])) * d;
            ws[o * taps + i] += magnitude(x, row + i) * d;
          }
          ws[n.weight.size() + o] += d;  // the bias
        }
        break;
      }
      case Op::Conv2d: {
        const std::size_t plane = std::size_t(n.shape[1] * n.shape[2]);
        std::vector<double>& ws = w[v];
        for (std::size_t j = 0; j < size; ++j) {
          const double d = so[j];
          if (d == 0) continue;
          detail::forEachTap(n, src, int64_t(j), [&](std::size_t wi, std::size_t i) {
            si[i] += std::fabs(double(n.weight[wi])) * d;
            ws[wi] += magnitude(x, i) * d;
          });
          if (!n.bias.empty()) ws[n.weight.size() + j / plane] += d;
        }
        break;
      }
      case Op::LayerNorm:
      case Op::MatMul:
      case Op::Mul:
      case Op::Embed:  // an id's change swaps a whole row: no derivative bounds it
        throw SaveError(std::string("the output criterion has no bound through ") + opName(n.op) + " ('" + n.name +
                        "'): use the value criterion for this model");
    }
  }
}

}  // namespace

Sensitivity sensitivityOf(const Graph& g, const std::vector<NodeRange>& r) {
  const auto start = std::chrono::steady_clock::now();
  Sensitivity out;
  std::vector<std::vector<double>> s(g.nodes.size()), w(g.nodes.size());
  out.roundingFrom.assign(g.nodes.size() + 1, 0.0);
  out.activation.resize(g.nodes.size());
  out.weight.resize(g.nodes.size());
  for (std::size_t v = 0; v < g.nodes.size(); ++v) {
    s[v].assign(std::size_t(g.nodes[v].size()), 0.0);
    out.activation[v].assign(s[v].size(), 0.0);
    const Node& n = g.nodes[v];
    if (n.op == Op::Linear || n.op == Op::Conv2d) {
      const std::size_t biases = n.op == Op::Linear ? std::size_t(n.features()) : std::size_t(n.shape[0]);
      w[v].assign(n.weight.size() + biases, 0.0);
      out.weight[v].assign(w[v].size(), 0.0);
    }
  }
  const int64_t logits = g.nodes[std::size_t(g.output)].size();
  for (int64_t k = 0; k < logits; ++k) {
    backward(g, r, k, s, w);
    for (std::size_t v = 0; v < g.nodes.size(); ++v) {
      for (std::size_t i = 0; i < s[v].size(); ++i) out.activation[v][i] = std::max(out.activation[v][i], s[v][i]);
      for (std::size_t i = 0; i < w[v].size(); ++i) out.weight[v][i] = std::max(out.weight[v][i], w[v][i]);
    }
  }
  // The runs' own rounding: each op's radius carried to the logits by its sensitivity; the product
  // of (1 + gamma) over the affine ops bounds how much more a perturbed run may round.
  double gammaSum = 0;
  for (std::size_t v = 1; v < g.nodes.size(); ++v) {
    const std::vector<double> radius = roundingRadius(g, int(v), r);
    for (std::size_t i = 0; i < radius.size(); ++i)
      if (out.activation[v][i] > 0) out.roundingFrom[v] += out.activation[v][i] * radius[i];
    const Node& n = g.nodes[v];
    if (n.op == Op::Linear || n.op == Op::Conv2d) {
      const int64_t outs = n.op == Op::Linear ? n.features() : n.shape[0];
      gammaSum += gamma32(int64_t(n.weight.size()) / outs + 1);
    } else if (detail::isAffine(n.op) || n.op == Op::Gelu || n.op == Op::Sigmoid || n.op == Op::Tanh) {
      gammaSum += gamma32(8);
    }
  }
  for (std::size_t v = g.nodes.size() - 1; v-- > 0;) out.roundingFrom[v] += out.roundingFrom[v + 1];
  for (double& bound : out.roundingFrom) bound *= 1 + 1e-9;
  out.rounding = out.roundingFrom[0];
  out.growth = std::expm1(gammaSum) + 1e-9;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

double allowedChange(const Sensitivity& sens, double rounding, double s, double epsilon) {
  const double room = epsilon / (1 + sens.growth) - 2 * rounding;
  if (!(room > 0)) return 0;
  if (s == 0) return std::numeric_limits<double>::infinity();
  return room / s;
}

}  // namespace peat::save
