// SPDX-License-Identifier: MIT
#include "core/save/ranges.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "core/util/parallel.h"

namespace peat::save {

namespace {

// The analysis itself runs in double; this relative margin covers its own rounding, which is
// smaller than the fp32 error bounds it adds by a factor of about 10^8.
constexpr double kDoubleMargin = 1e-9;

// Runs body(first, last) over [0, count) split between the cores (for the big layers only).
template <class F>
void parallelFor(int64_t count, int64_t work, F&& body) {
  const unsigned cores = util::hardwareThreads();
  if (cores == 1 || work < (int64_t(1) << 20) || count < 2) {
    body(int64_t(0), count);
    return;
  }
  util::parallelRanges(count, cores, [&](int64_t first, int64_t last, unsigned) { body(first, last); });
}

// Calls f(w, i) for every tap of output element j of a conv node that reads the input (the zero
// padding is skipped), in (channel, kernel row, kernel column) order: w indexes the weights, i the input.
template <class F>
inline void forEachTap(const Node& n, const Node& src, int64_t j, F&& f) {
  const int64_t ci = src.shape[0], h = src.shape[1], w = src.shape[2], k = n.kernel;
  const int64_t oh = n.shape[1], ow = n.shape[2];
  const int64_t o = j / (oh * ow), y = (j / ow) % oh, xx = j % ow;
  for (int64_t c = 0; c < ci; ++c)
    for (int64_t ky = 0; ky < k; ++ky) {
      const int64_t iy = y * n.stride + ky - n.padding;
      if (iy < 0 || iy >= h) continue;
      for (int64_t kx = 0; kx < k; ++kx) {
        const int64_t ix = xx * n.stride + kx - n.padding;
        if (ix < 0 || ix >= w) continue;
        f(std::size_t(((o * ci + c) * k + ky) * k + kx), std::size_t((c * h + iy) * w + ix));
      }
    }
}

}  // namespace

// A bound on |fp32 result - exact result| for each output element of `node`, given its inputs' ranges:
// gamma_{n+1} (|bias| + sum |w||x|) for a length-n dot product plus bias, and the like.
std::vector<double> roundingRadius(const Graph& g, int index, const std::vector<NodeRange>& r) {
  const Node& n = g.nodes[std::size_t(index)];
  const std::size_t size = std::size_t(n.size());
  std::vector<double> e(size, 0.0);
  if (n.inputs.empty()) return e;
  const Node& src = g.nodes[std::size_t(n.inputs[0])];
  const NodeRange& x = r[std::size_t(n.inputs[0])];
  switch (n.op) {
    case Op::Linear: {
      const std::size_t out = std::size_t(n.features()), in = n.weight.size() / out;
      const double gm = gamma32(int64_t(in) + 1);
      parallelFor(int64_t(size), int64_t(size * in), [&](int64_t first, int64_t last) {
        for (std::size_t j = std::size_t(first); j < std::size_t(last); ++j) {
          const std::size_t o = j % out, row = (j / out) * in;
          double s = std::fabs(n.bias[o]);
          for (std::size_t i = 0; i < in; ++i) s += std::fabs(n.weight[o * in + i]) * magnitude(x, row + i);
          e[j] = gm * s + double(in + 1) * kTiny32;
        }
      });
      break;
    }
    case Op::AddConst:
      for (std::size_t i = 0; i < size; ++i) e[i] = kU32 * (magnitude(x, i) + std::fabs(n.bias[i]));
      break;
    case Op::MatMul: {
      const NodeRange& y = r[std::size_t(n.inputs[1])];
      const std::size_t k = std::size_t(src.shape[2]), rows = std::size_t(n.shape[1]), cols = std::size_t(n.shape[2]);
      const double gm = gamma32(int64_t(k));
      for (std::size_t j = 0; j < size; ++j) {
        const std::size_t h = j / (rows * cols), m = (j / cols) % rows, c = j % cols;
        double s = 0;
        for (std::size_t i = 0; i < k; ++i) s += magnitude(x, (h * rows + m) * k + i) * magnitude(y, (h * cols + c) * k + i);
        e[j] = gm * s + double(k) * kTiny32;
      }
      break;
    }
    case Op::Gelu:
      // 0.5 x (1 + erf(x c)): erff within 4 ulps, the argument's two roundings moving erf by at
      // most u (|erf'| |x| <= 0.97 max |x| e^(-x^2 / 2)), then 1 + erf and the two products: the
      // result is within 4.6 u |x| of 0.5 x (1 + erf(x / sqrt 2)).
      for (std::size_t i = 0; i < size; ++i) e[i] = 8 * kU32 * magnitude(x, i) + 64 * kTiny32;
      break;
    case Op::Sigmoid:
    case Op::Tanh: {
      // expf and tanhf are within 4 ulps; sigmoid's 1 + e and division add two roundings. The
      // result's magnitude is at most |x| (tanh) or 1 (sigmoid).
      for (std::size_t i = 0; i < size; ++i) {
        const double top = n.op == Op::Sigmoid ? 1.0 : std::min(1.0, magnitude(x, i));
        e[i] = 8 * kU32 * top + 64 * kTiny32;
      }
      break;
    }
    case Op::Mul: {
      const NodeRange& y = r[std::size_t(n.inputs[1])];
      for (std::size_t i = 0; i < size; ++i) e[i] = kU32 * magnitude(x, i) * magnitude(y, i) + kTiny32;
      break;
    }
    case Op::LayerNorm:
    case Op::Softmax:
      // Row-wise: their interval step bounds the rounding of the row statistics itself; no
      // per-element radius exists, and a caller that needs one must not rely on them.
      std::fill(e.begin(), e.end(), std::numeric_limits<double>::infinity());
      break;
    case Op::Conv2d: {
      const int64_t taps = src.shape[0] * n.kernel * n.kernel, plane = n.shape[1] * n.shape[2];
      const double gm = gamma32(taps + 1);
      parallelFor(n.shape[0], int64_t(size) * taps, [&](int64_t first, int64_t last) {
        for (int64_t j = first * plane; j < last * plane; ++j) {
          double s = n.bias.empty() ? 0.0 : std::fabs(n.bias[std::size_t(j / plane)]);
          forEachTap(n, src, j, [&](std::size_t w, std::size_t i) { s += std::fabs(n.weight[w]) * magnitude(x, i); });
          e[std::size_t(j)] = gm * s + double(taps + 1) * kTiny32;
        }
      });
      break;
    }
    case Op::BatchNorm: {
      const std::size_t c = std::size_t(n.shape[0]), hw = size / c;
      for (std::size_t ch = 0; ch < c; ++ch)
        for (std::size_t i = 0; i < hw; ++i)
          e[ch * hw + i] = gamma32(2) * (std::fabs(n.weight[ch]) * magnitude(x, ch * hw + i) + std::fabs(n.bias[ch])) +
                           2 * kTiny32;
      break;
    }
    case Op::Add: {
      const NodeRange& y = r[std::size_t(n.inputs[1])];
      for (std::size_t i = 0; i < size; ++i) e[i] = kU32 * (magnitude(x, i) + magnitude(y, i));
      break;
    }
    case Op::GlobalAvgPool: {
      const std::size_t c = size, hw = std::size_t(src.size()) / c;
      for (std::size_t ch = 0; ch < c; ++ch) {
        double s = 0;
        for (std::size_t i = 0; i < hw; ++i) s += magnitude(x, ch * hw + i);
        e[ch] = gamma32(int64_t(hw) + 1) * s / double(hw);
      }
      break;
    }
    case Op::Input:
    case Op::Relu:
    case Op::MaxPool2d:
    case Op::Flatten:
    case Op::Select:
    case Op::Max2:
      break;  // exact
  }
  return e;
}

namespace {

bool isAffine(Op op) {
  return op == Op::Linear || op == Op::Conv2d || op == Op::BatchNorm || op == Op::Add || op == Op::GlobalAvgPool ||
         op == Op::AddConst;
}

// Ops the linear bounds do not pass through: the back-substitution makes them concrete with their
// intervals (a cut), which is sound and only looser.
bool cutsLinearBounds(Op op) {
  return op == Op::LayerNorm || op == Op::Softmax || op == Op::Gelu || op == Op::MatMul || op == Op::Sigmoid ||
         op == Op::Tanh || op == Op::Mul;
}

// GELU's minimum: x Phi(x) falls on (-inf, kGeluArgMin] and rises after it.
constexpr double kGeluArgMin = -0.7517915246935;
double geluExact(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

// Layer norm over rows of the last dimension, as layerNormStats/layerNormOf compute it in fp32.
// Exact intervals of x_i - mean, widened by the mean's and the subtraction's rounding, give the
// computed d_i; the variance's bounds follow from the d_i's, and |normalised| <= sqrt(N) always
// (d_i^2 <= sum d_j^2 = N var). Then gamma and beta, each product and sum rounded.
void layerNormInterval(const Node& n, const NodeRange& x, NodeRange& out) {
  const std::size_t w = std::size_t(n.features()), rows = std::size_t(n.rows());
  const double nw = double(w), u = kU32, gm = gamma32(int64_t(w) + 1);
  const double eps = double(1e-5f);
  const double cap = std::sqrt(nw / (1 - gm)) * (1 + 6 * u);
  std::vector<double> dl(w), dh(w);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t at = r * w;
    double sumLo = 0, sumHi = 0, mag = 0;
    for (std::size_t j = 0; j < w; ++j) {
      sumLo += x.lo[at + j];
      sumHi += x.hi[at + j];
      mag += magnitude(x, at + j);
    }
    const double meanError = gm * mag / nw + kTiny32;
    double vLo = 0, vHi = 0;
    for (std::size_t j = 0; j < w; ++j) {
      const double l = x.lo[at + j], h = x.hi[at + j];
      const double slack = meanError + u * (magnitude(x, at + j) + mag / nw + meanError);
      dl[j] = l * (1 - 1 / nw) - (sumHi - h) / nw - slack;
      dh[j] = h * (1 - 1 / nw) - (sumLo - l) / nw + slack;
      vLo += dl[j] > 0 ? dl[j] * dl[j] : dh[j] < 0 ? dh[j] * dh[j] : 0.0;
      vHi += std::max(dl[j] * dl[j], dh[j] * dh[j]);
    }
    vLo = std::max(0.0, (1 - gm) * vLo / nw - nw * kTiny32);
    vHi = (1 + gm) * vHi / nw + nw * kTiny32;
    const double rLo = (1 - 4 * u) / std::sqrt(vHi + eps), rHi = (1 + 4 * u) / std::sqrt(vLo + eps);
    for (std::size_t j = 0; j < w; ++j) {
      double nl = dl[j] >= 0 ? dl[j] * rLo : dl[j] * rHi;
      double nh = dh[j] >= 0 ? dh[j] * rHi : dh[j] * rLo;
      const double nm = std::max(std::fabs(nl), std::fabs(nh));
      nl = std::max(nl - u * nm, -cap);
      nh = std::min(nh + u * nm, cap);
      const double gamma = n.weight[j], beta = n.bias[j];
      const double a = nl * gamma + beta, b = nh * gamma + beta;
      const double radius = gamma32(2) * (std::max(std::fabs(nl), std::fabs(nh)) * std::fabs(gamma) + std::fabs(beta)) + 2 * kTiny32;
      const double lo = std::min(a, b) - radius, hi = std::max(a, b) + radius;
      const double m = (std::fabs(lo) + std::fabs(hi)) * kDoubleMargin;
      out.lo[at + j] = lo - m;
      out.hi[at + j] = hi + m;
    }
  }
}

// Softmax over rows: y_i = 1 / (1 + sum_{j != i} exp(x_j - x_i)) lies between the values at the
// box's extreme corners. fp32: each exp(x_j - max) is within a relative eta of the exact one
// (the subtraction's rounding moves the argument by at most u A, A the row's spread, and expf is
// within 4 ulps), the sum and the division add gamma_N and u; every y stays in [0, 1] (the sum
// holds exp(0) = 1 and each term).
void softmaxInterval(const Node& n, const NodeRange& x, NodeRange& out) {
  const std::size_t w = std::size_t(n.features()), rows = std::size_t(n.rows());
  const double u = kU32;
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t at = r * w;
    double top = -std::numeric_limits<double>::infinity(), bottom = std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < w; ++j) {
      top = std::max(top, x.hi[at + j]);
      bottom = std::min(bottom, x.lo[at + j]);
    }
    const double eta = (std::expm1(u * (top - bottom)) + 0x1p-22) * 1.001;
    const bool usable = eta < 0.25;
    const double gm = gamma32(int64_t(w));
    const double up = (1 + eta) / ((1 - eta) * (1 - gm)) * (1 + u), down = (1 - eta) / ((1 + eta) * (1 + gm)) * (1 - u);
    const double tiny = 4 * double(w + 1) * kTiny32;
    for (std::size_t i = 0; i < w; ++i) {
      double sLo = 0, sHi = 0;  // sums for the lower and the upper bound
      for (std::size_t j = 0; j < w; ++j) {
        if (j == i) continue;
        sLo += std::exp(x.hi[at + j] - x.lo[at + i]);
        sHi += std::exp(x.lo[at + j] - x.hi[at + i]);
      }
      double lo = 0, hi = 1;
      if (usable) {
        lo = std::max(0.0, down / (1 + sLo) - tiny);
        hi = std::min(1.0, up / (1 + sHi) + tiny);
      }
      out.lo[at + i] = lo * (1 - kDoubleMargin);
      out.hi[at + i] = std::min(1.0, hi * (1 + kDoubleMargin));
    }
  }
}

// Plain interval arithmetic for one node (exact real intervals, then widened by the rounding radius).
NodeRange intervalStep(const Graph& g, int index, const std::vector<NodeRange>& r) {
  const Node& n = g.nodes[std::size_t(index)];
  const std::size_t size = std::size_t(n.size());
  NodeRange out;
  out.lo.assign(size, 0.0);
  out.hi.assign(size, 0.0);
  const Node& src = g.nodes[std::size_t(n.inputs[0])];
  const NodeRange& x = r[std::size_t(n.inputs[0])];
  switch (n.op) {
    case Op::Input:
      break;
    case Op::Flatten:
      out = x;
      return out;
    case Op::Select:
      for (std::size_t i = 0; i < size; ++i) {
        out.lo[i] = x.lo[std::size_t(n.gather[i])];
        out.hi[i] = x.hi[std::size_t(n.gather[i])];
      }
      return out;
    case Op::Max2: {
      const NodeRange& y = r[std::size_t(n.inputs[1])];
      for (std::size_t i = 0; i < size; ++i) {
        out.lo[i] = std::max(x.lo[i], y.lo[i]);
        out.hi[i] = std::max(x.hi[i], y.hi[i]);
      }
      return out;
    }
    case Op::Relu:
      for (std::size_t i = 0; i < size; ++i) {
        out.lo[i] = std::max(0.0, x.lo[i]);
        out.hi[i] = std::max(0.0, x.hi[i]);
      }
      return out;
    case Op::MaxPool2d: {
      const int64_t c = n.shape[0], oh = n.shape[1], ow = n.shape[2], h = src.shape[1], w = src.shape[2];
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t xx = 0; xx < ow; ++xx) {
            double lo = -std::numeric_limits<double>::infinity(), hi = lo;
            for (int64_t ky = 0; ky < n.kernel; ++ky)
              for (int64_t kx = 0; kx < n.kernel; ++kx) {
                const std::size_t at = std::size_t((ch * h + y * n.stride + ky) * w + xx * n.stride + kx);
                lo = std::max(lo, x.lo[at]);
                hi = std::max(hi, x.hi[at]);
              }
            out.lo[std::size_t((ch * oh + y) * ow + xx)] = lo;
            out.hi[std::size_t((ch * oh + y) * ow + xx)] = hi;
          }
      return out;
    }
    case Op::Linear: {
      const std::size_t features = std::size_t(n.features()), in = n.weight.size() / features;
      parallelFor(int64_t(size), int64_t(size * in), [&](int64_t first, int64_t last) {
        for (std::size_t j = std::size_t(first); j < std::size_t(last); ++j) {
          const std::size_t o = j % features, row = (j / features) * in;
          double lo = n.bias[o], hi = n.bias[o];
          for (std::size_t i = 0; i < in; ++i) {
            const double w = n.weight[o * in + i];
            lo += w >= 0 ? w * x.lo[row + i] : w * x.hi[row + i];
            hi += w >= 0 ? w * x.hi[row + i] : w * x.lo[row + i];
          }
          out.lo[j] = lo;
          out.hi[j] = hi;
        }
      });
      break;
    }
    case Op::AddConst:
      for (std::size_t i = 0; i < size; ++i) {
        out.lo[i] = x.lo[i] + n.bias[i];
        out.hi[i] = x.hi[i] + n.bias[i];
      }
      break;
    case Op::Gelu: {
      // non-monotonic: falling up to its minimum, rising after it
      const double floor = geluExact(kGeluArgMin) - 1e-12;
      for (std::size_t i = 0; i < size; ++i) {
        const double l = x.lo[i], h = x.hi[i], gl = geluExact(l), gh = geluExact(h);
        const double tol = 1e-12 * (1 + std::fabs(gl) + std::fabs(gh));  // the double erf's own error
        if (l >= kGeluArgMin) {
          out.lo[i] = gl - tol;
          out.hi[i] = gh + tol;
        } else if (h <= kGeluArgMin) {
          out.lo[i] = gh - tol;
          out.hi[i] = gl + tol;
        } else {
          out.lo[i] = floor;
          out.hi[i] = std::max(gl, gh) + tol;
        }
      }
      break;
    }
    case Op::Sigmoid:
    case Op::Tanh:  // increasing
      for (std::size_t i = 0; i < size; ++i) {
        auto f = [&](double v) { return n.op == Op::Tanh ? std::tanh(v) : 1 / (1 + std::exp(-v)); };
        out.lo[i] = f(x.lo[i]) - 1e-15;  // the double functions' own error
        out.hi[i] = f(x.hi[i]) + 1e-15;
      }
      break;
    case Op::Mul: {
      const NodeRange& y = r[std::size_t(n.inputs[1])];
      for (std::size_t i = 0; i < size; ++i) {
        const double p[4] = {x.lo[i] * y.lo[i], x.lo[i] * y.hi[i], x.hi[i] * y.lo[i], x.hi[i] * y.hi[i]};
        out.lo[i] = *std::min_element(p, p + 4);
        out.hi[i] = *std::max_element(p, p + 4);
      }
      break;
    }
    case Op::MatMul: {
      const NodeRange& y = r[std::size_t(n.inputs[1])];
      const std::size_t k = std::size_t(src.shape[2]), rows = std::size_t(n.shape[1]), cols = std::size_t(n.shape[2]);
      for (std::size_t j = 0; j < size; ++j) {
        const std::size_t h = j / (rows * cols), m = (j / cols) % rows, c = j % cols;
        double lo = 0, hi = 0;
        for (std::size_t i = 0; i < k; ++i) {
          const std::size_t a = (h * rows + m) * k + i, b = (h * cols + c) * k + i;
          const double p[4] = {x.lo[a] * y.lo[b], x.lo[a] * y.hi[b], x.hi[a] * y.lo[b], x.hi[a] * y.hi[b]};
          lo += *std::min_element(p, p + 4);
          hi += *std::max_element(p, p + 4);
        }
        out.lo[j] = lo;
        out.hi[j] = hi;
      }
      break;
    }
    case Op::LayerNorm:
      layerNormInterval(n, x, out);
      return out;
    case Op::Softmax:
      softmaxInterval(n, x, out);
      return out;
    case Op::Conv2d: {
      const int64_t plane = n.shape[1] * n.shape[2];
      parallelFor(n.shape[0], int64_t(size) * src.shape[0] * n.kernel * n.kernel, [&](int64_t first, int64_t last) {
        for (int64_t j = first * plane; j < last * plane; ++j) {
          double lo = n.bias.empty() ? 0.0 : n.bias[std::size_t(j / plane)], hi = lo;
          forEachTap(n, src, j, [&](std::size_t w, std::size_t i) {
            const double wv = n.weight[w];
            lo += wv >= 0 ? wv * x.lo[i] : wv * x.hi[i];
            hi += wv >= 0 ? wv * x.hi[i] : wv * x.lo[i];
          });
          out.lo[std::size_t(j)] = lo;
          out.hi[std::size_t(j)] = hi;
        }
      });
      break;
    }
    case Op::BatchNorm: {
      const std::size_t c = std::size_t(n.shape[0]), hw = size / c;
      for (std::size_t ch = 0; ch < c; ++ch)
        for (std::size_t i = 0; i < hw; ++i) {
          const double s = n.weight[ch], b = n.bias[ch];
          const double a = s * x.lo[ch * hw + i] + b, z = s * x.hi[ch * hw + i] + b;
          out.lo[ch * hw + i] = std::min(a, z);
          out.hi[ch * hw + i] = std::max(a, z);
        }
      break;
    }
    case Op::Add: {
      const NodeRange& y = r[std::size_t(n.inputs[1])];
      for (std::size_t i = 0; i < size; ++i) {
        out.lo[i] = x.lo[i] + y.lo[i];
        out.hi[i] = x.hi[i] + y.hi[i];
      }
      break;
    }
    case Op::GlobalAvgPool: {
      const std::size_t hw = std::size_t(src.size()) / size;
      for (std::size_t ch = 0; ch < size; ++ch) {
        double lo = 0, hi = 0;
        for (std::size_t i = 0; i < hw; ++i) {
          lo += x.lo[ch * hw + i];
          hi += x.hi[ch * hw + i];
        }
        out.lo[ch] = lo / double(hw);
        out.hi[ch] = hi / double(hw);
      }
      break;
    }
  }
  const std::vector<double> e = roundingRadius(g, index, r);
  for (std::size_t i = 0; i < size; ++i) {
    const double m = (std::fabs(out.lo[i]) + std::fabs(out.hi[i]) + e[i]) * kDoubleMargin;
    out.lo[i] -= e[i] + m;
    out.hi[i] += e[i] + m;
  }
  return out;
}

// Linear bounds over a block of `rows` target elements: coefficients on each node still to be
// substituted, plus constants. `mag` accumulates the magnitude of everything summed, for the
// final margin against the double arithmetic's own rounding.
struct Bounds {
  std::vector<double> lower, upper;  // rows x node size
};

class BackSubstitution {
 public:
  BackSubstitution(const Graph& g, const std::vector<NodeRange>& r, const std::vector<NodeRange>& diff,
                   const std::vector<int>& level, int depth)
      : g_(g), r_(r), diff_(diff), level_(level), depth_(depth) {}

  // Bounds of elements [first, first + rows) of node v.
  void run(int v, std::size_t first, std::size_t rows, double* lo, double* hi) {
    start(rows);
    set(v, first, 1.0);
    finish(level_[std::size_t(v)], lo, hi);
  }

 private:
  void start(std::size_t rows) {
    rows_ = rows;
    pending_.clear();
    cL_.assign(rows, 0.0);
    cU_.assign(rows, 0.0);
    mag_.assign(rows, 0.0);
  }

  void set(int v, std::size_t first, double coefficient) {
    const std::size_t size = std::size_t(g_.nodes[std::size_t(v)].size());
    Bounds& b = at(v);
    for (std::size_t r = 0; r < rows_; ++r) {
      b.lower[r * size + first + r] += coefficient;
      b.upper[r * size + first + r] += coefficient;
    }
  }

  // Substitutes back node by node (highest index first, so every node has all its coefficients
  // when it is expanded). The pending nodes always form a cut of the graph, so making them concrete
  // with their intervals gives a sound bound at every step: each row keeps the best one. Relaxations
  // that lose more than they gain further back then cost nothing.
  void finish(int top, double* lo, double* hi) {
    const std::size_t rows = rows_;
    for (std::size_t r = 0; r < rows; ++r) {
      lo[r] = -std::numeric_limits<double>::infinity();
      hi[r] = std::numeric_limits<double>::infinity();
    }
    std::vector<double> cL, cU, mag;
    while (true) {
      cL = cL_;
      cU = cU_;
      mag = mag_;
      for (const auto& [u, b] : pending_) concretise(u, b, cL, cU, mag);
      for (std::size_t r = 0; r < rows; ++r) {
        const double m = mag[r] * kDoubleMargin;
        lo[r] = std::max(lo[r], cL[r] - m);
        hi[r] = std::min(hi[r], cU[r] + m);
      }
      if (pending_.empty()) break;
      auto it = std::prev(pending_.end());
      const int u = it->first;
      Bounds cur = std::move(it->second);
      pending_.erase(it);
      const Node& n = g_.nodes[std::size_t(u)];
      if (n.op == Op::Input || cutsLinearBounds(n.op) || (depth_ > 0 && top - level_[std::size_t(u)] >= depth_))
        concretise(u, cur, cL_, cU_, mag_);
      else
        expand(u, cur);
      spare_.push_back(std::move(cur.lower));  // reused: no page faults for the next node's matrices
      spare_.push_back(std::move(cur.upper));
    }
  }

  std::vector<double> zeros(std::size_t n) {
    std::vector<double> v;
    if (!spare_.empty()) {
      v = std::move(spare_.back());
      spare_.pop_back();
    }
    v.assign(n, 0.0);
    return v;
  }

  Bounds& at(int u) {
    auto it = pending_.find(u);
    if (it == pending_.end()) {
      const std::size_t size = std::size_t(g_.nodes[std::size_t(u)].size());
      Bounds b;
      b.lower = zeros(rows_ * size);
      b.upper = zeros(rows_ * size);
      it = pending_.emplace(u, std::move(b)).first;
    }
    return it->second;
  }

  void concretise(int u, const Bounds& b, std::vector<double>& cL, std::vector<double>& cU,
                  std::vector<double>& magnitudes) const {
    const NodeRange& x = r_[std::size_t(u)];
    const std::size_t size = x.lo.size();
    for (std::size_t r = 0; r < rows_; ++r) {
      const double* al = b.lower.data() + r * size;
      const double* au = b.upper.data() + r * size;
      double lo = 0, hi = 0, mag = 0;
      for (std::size_t j = 0; j < size; ++j) {
        if (al[j] != 0) {
          lo += al[j] >= 0 ? al[j] * x.lo[j] : al[j] * x.hi[j];
          mag += std::fabs(al[j]) * magnitude(x, j);
        }
        if (au[j] != 0) {
          hi += au[j] >= 0 ? au[j] * x.hi[j] : au[j] * x.lo[j];
          mag += std::fabs(au[j]) * magnitude(x, j);
        }
      }
      cL[r] += lo;
      cU[r] += hi;
      magnitudes[r] += mag;
    }
  }

  // Constants of an affine op: coefficient times bias, minus (plus) |coefficient| times the op's
  // fp32 rounding radius.
  void addConstants(std::size_t r, double aL, double aU, double bias, double radius) {
    cL_[r] += aL * bias - std::fabs(aL) * radius;
    cU_[r] += aU * bias + std::fabs(aU) * radius;
    mag_[r] += (std::fabs(aL) + std::fabs(aU)) * (std::fabs(bias) + radius);
  }

  void expand(int u, const Bounds& b) {
    const Node& n = g_.nodes[std::size_t(u)];
    const std::size_t size = std::size_t(n.size());
    const int in0 = n.inputs[0];
    const Node& src = g_.nodes[std::size_t(in0)];
    const std::size_t inSize = std::size_t(src.size());
    const NodeRange& x = r_[std::size_t(in0)];
    std::vector<double> radius;
    if (isAffine(n.op)) radius = roundingRadius(g_, u, r_);
    switch (n.op) {
      case Op::Input:
        break;
      case Op::Flatten: {
        Bounds& t = at(in0);
        for (std::size_t i = 0; i < rows_ * size; ++i) {
          t.lower[i] += b.lower[i];
          t.upper[i] += b.upper[i];
        }
        break;
      }
      case Op::Relu: {
        Bounds& t = at(in0);
        for (std::size_t j = 0; j < size; ++j) {
          const double l = x.lo[j], h = x.hi[j];
          if (h <= 0) continue;  // always 0
          const bool exact = l >= 0;
          const double s = exact ? 1.0 : h / (h - l), lambda = exact ? 1.0 : (h > -l ? 1.0 : 0.0);
          for (std::size_t r = 0; r < rows_; ++r) {
            const double aL = b.lower[r * size + j], aU = b.upper[r * size + j];
            if (aL != 0) {
              if (aL >= 0 || exact) {
                t.lower[r * inSize + j] += aL * lambda;
              } else {
                t.lower[r * inSize + j] += aL * s;
                cL_[r] -= aL * s * l;
                mag_[r] += std::fabs(aL * s * l);
              }
            }
            if (aU != 0) {
              if (aU < 0 || exact) {
                t.upper[r * inSize + j] += aU * lambda;
              } else {
                t.upper[r * inSize + j] += aU * s;
                cU_[r] -= aU * s * l;
                mag_[r] += std::fabs(aU * s * l);
              }
            }
          }
        }
        break;
      }
      case Op::MaxPool2d:
        throw SaveError("internal: max-pooling reached the symbolic analysis without being rewritten");
      case Op::Select: {
        Bounds& t = at(in0);
        for (std::size_t r = 0; r < rows_; ++r)
          for (std::size_t j = 0; j < size; ++j) {
            t.lower[r * inSize + std::size_t(n.gather[j])] += b.lower[r * size + j];
            t.upper[r * inSize + std::size_t(n.gather[j])] += b.upper[r * size + j];
          }
        break;
      }
      case Op::Max2: {
        // y = max(a, b) = b + relu(d), d = a - b in [l, h]: exact when d keeps one sign; else
        // y >= lambda a + (1 - lambda) b and y <= s a + (1 - s) b - s l, s = h / (h - l).
        Bounds& ta = at(n.inputs[0]);
        Bounds& tb = at(n.inputs[1]);
        const NodeRange& d = diff_[std::size_t(u)];
        for (std::size_t j = 0; j < size; ++j) {
          const double l = d.lo[j], h = d.hi[j];
          double lambda, s, offset;
          if (l >= 0) {
            lambda = s = 1;
            offset = 0;
          } else if (h <= 0) {
            lambda = s = 0;
            offset = 0;
          } else {
            lambda = h > -l ? 1 : 0;
            s = h / (h - l);
            offset = -s * l;
          }
          for (std::size_t r = 0; r < rows_; ++r) {
            const double aL = b.lower[r * size + j], aU = b.upper[r * size + j];
            if (aL != 0) {
              const double w = aL >= 0 ? lambda : s;  // a lower bound takes the upper plane when aL < 0
              ta.lower[r * size + j] += aL * w;
              tb.lower[r * size + j] += aL * (1 - w);
              if (aL < 0) {
                cL_[r] += aL * offset;
                mag_[r] += std::fabs(aL * offset);
              }
            }
            if (aU != 0) {
              const double w = aU >= 0 ? s : lambda;
              ta.upper[r * size + j] += aU * w;
              tb.upper[r * size + j] += aU * (1 - w);
              if (aU > 0) {
                cU_[r] += aU * offset;
                mag_[r] += std::fabs(aU * offset);
              }
            }
          }
        }
        break;
      }
      case Op::Linear: {
        Bounds& t = at(in0);
        const std::size_t features = std::size_t(n.features()), taps = n.weight.size() / features;
        for (std::size_t r = 0; r < rows_; ++r)
          for (std::size_t j = 0; j < size; ++j) {
            const double aL = b.lower[r * size + j], aU = b.upper[r * size + j];
            if (aL == 0 && aU == 0) continue;
            const std::size_t o = j % features;
            addConstants(r, aL, aU, n.bias[o], radius[j]);
            const float* wr = n.weight.data() + o * taps;
            double* tl = t.lower.data() + r * inSize + (j / features) * taps;
            double* tu = t.upper.data() + r * inSize + (j / features) * taps;
            for (std::size_t i = 0; i < taps; ++i) {
              tl[i] += aL * wr[i];
              tu[i] += aU * wr[i];
            }
          }
        break;
      }
      case Op::AddConst: {
        Bounds& t = at(in0);
        for (std::size_t r = 0; r < rows_; ++r)
          for (std::size_t j = 0; j < size; ++j) {
            const double aL = b.lower[r * size + j], aU = b.upper[r * size + j];
            if (aL == 0 && aU == 0) continue;
            addConstants(r, aL, aU, n.bias[j], radius[j]);
            t.lower[r * inSize + j] += aL;
            t.upper[r * inSize + j] += aU;
          }
        break;
      }
      case Op::LayerNorm:
      case Op::Gelu:
      case Op::Softmax:
      case Op::MatMul:
      case Op::Sigmoid:
      case Op::Tanh:
      case Op::Mul:
        throw SaveError("internal: the linear bounds cannot pass through " + std::string(opName(n.op)));
      case Op::Conv2d: {
        Bounds& t = at(in0);
        const std::size_t plane = std::size_t(n.shape[1] * n.shape[2]);
        for (std::size_t r = 0; r < rows_; ++r) {
          double* tl = t.lower.data() + r * inSize;
          double* tu = t.upper.data() + r * inSize;
          for (std::size_t j = 0; j < size; ++j) {
            const double aL = b.lower[r * size + j], aU = b.upper[r * size + j];
            if (aL == 0 && aU == 0) continue;
            addConstants(r, aL, aU, n.bias.empty() ? 0.0 : n.bias[j / plane], radius[j]);
            forEachTap(n, src, int64_t(j), [&](std::size_t w, std::size_t i) {
              tl[i] += aL * n.weight[w];
              tu[i] += aU * n.weight[w];
            });
          }
        }
        break;
      }
      case Op::BatchNorm: {
        Bounds& t = at(in0);
        const std::size_t c = std::size_t(n.shape[0]), hw = size / c;
        for (std::size_t r = 0; r < rows_; ++r)
          for (std::size_t j = 0; j < size; ++j) {
            const double aL = b.lower[r * size + j], aU = b.upper[r * size + j];
            if (aL == 0 && aU == 0) continue;
            addConstants(r, aL, aU, n.bias[j / hw], radius[j]);
            t.lower[r * inSize + j] += aL * n.weight[j / hw];
            t.upper[r * inSize + j] += aU * n.weight[j / hw];
          }
        break;
      }
      case Op::Add: {
        for (int input : n.inputs) {
          Bounds& t = at(input);
          for (std::size_t i = 0; i < rows_ * size; ++i) {
            t.lower[i] += b.lower[i];
            t.upper[i] += b.upper[i];
          }
        }
        for (std::size_t r = 0; r < rows_; ++r)
          for (std::size_t j = 0; j < size; ++j) {
            const double aL = b.lower[r * size + j], aU = b.upper[r * size + j];
            if (aL != 0 || aU != 0) addConstants(r, aL, aU, 0.0, radius[j]);
          }
        break;
      }
      case Op::GlobalAvgPool: {
        Bounds& t = at(in0);
        const std::size_t hw = inSize / size;
        for (std::size_t r = 0; r < rows_; ++r)
          for (std::size_t ch = 0; ch < size; ++ch) {
            const double aL = b.lower[r * size + ch], aU = b.upper[r * size + ch];
            if (aL == 0 && aU == 0) continue;
            addConstants(r, aL, aU, 0.0, radius[ch]);
            for (std::size_t i = 0; i < hw; ++i) {
              t.lower[r * inSize + ch * hw + i] += aL / double(hw);
              t.upper[r * inSize + ch * hw + i] += aU / double(hw);
            }
          }
        break;
      }
    }
  }

  const Graph& g_;
  const std::vector<NodeRange>& r_;
  const std::vector<NodeRange>& diff_;  // Max2 nodes: bounds of a - b
  const std::vector<int>& level_;
  int depth_;
  std::size_t rows_ = 0;
  std::map<int, Bounds> pending_;
  std::vector<std::vector<double>> spare_;
  std::vector<double> cL_, cU_, mag_;
};

// The graph the analysis works on: every k x k max-pool becomes k^2 strided gathers and a tree of
// pairwise maxima, so that its relaxation keeps linear dependence on its inputs (a max-pool
// relaxed as a whole can only bound its output by a constant from above). `map` takes each node of
// `g` to the node holding the same values.
Graph rewriteMaxPools(const Graph& g, std::vector<int>& map) {
  Graph out;
  out.model = g.model;
  out.inputMean = g.inputMean;
  out.inputDeviation = g.inputDeviation;
  map.assign(g.nodes.size(), -1);
  for (std::size_t v = 0; v < g.nodes.size(); ++v) {
    Node n = g.nodes[v];
    for (int& i : n.inputs) i = map[std::size_t(i)];
    if (n.op != Op::MaxPool2d) {
      out.nodes.push_back(std::move(n));
      map[v] = int(out.nodes.size()) - 1;
      continue;
    }
    const Node& src = out.nodes[std::size_t(n.inputs[0])];
    const int64_t c = n.shape[0], oh = n.shape[1], ow = n.shape[2], h = src.shape[1], w = src.shape[2];
    std::vector<int> level;
    for (int64_t ky = 0; ky < n.kernel; ++ky)
      for (int64_t kx = 0; kx < n.kernel; ++kx) {
        Node sel;
        sel.op = Op::Select;
        sel.name = n.name + ".at" + std::to_string(ky) + std::to_string(kx);
        sel.inputs = n.inputs;
        sel.shape = n.shape;
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t y = 0; y < oh; ++y)
            for (int64_t x = 0; x < ow; ++x)
              sel.gather.push_back((ch * h + y * n.stride + ky) * w + x * n.stride + kx);
        out.nodes.push_back(std::move(sel));
        level.push_back(int(out.nodes.size()) - 1);
      }
    while (level.size() > 1) {
      std::vector<int> next;
      for (std::size_t i = 0; i + 1 < level.size(); i += 2) {
        Node m;
        m.op = Op::Max2;
        m.name = n.name + ".max" + std::to_string(out.nodes.size());
        m.inputs = {level[i], level[i + 1]};
        m.shape = n.shape;
        out.nodes.push_back(std::move(m));
        next.push_back(int(out.nodes.size()) - 1);
      }
      if (level.size() % 2) next.push_back(level.back());
      level = std::move(next);
    }
    out.nodes.back().name = n.name;
    map[v] = level[0];
  }
  out.output = map[std::size_t(g.output)];
  return out;
}

std::vector<NodeRange> analyzeOnce(const Graph& original, const NodeRange& input, const RangeOptions& o) {
  std::vector<int> map;
  const Graph g = rewriteMaxPools(original, map);
  std::vector<NodeRange> r(g.nodes.size()), diff(g.nodes.size());
  r[0] = input;
  std::vector<int> level(g.nodes.size(), 0);  // affine ops on the longest path from the input
  int64_t widest = 1;
  for (const Node& n : g.nodes) widest = std::max(widest, n.size());
  const std::size_t block = std::size_t(std::max<int64_t>(1, o.maxEntries / widest));
  const unsigned threads = util::threadsOr(o.threads);
  std::vector<BackSubstitution> workers;  // one per thread: each keeps its own spare matrices
  for (unsigned t = 0; t < threads; ++t) workers.emplace_back(g, r, diff, level, o.depth);
  for (std::size_t v = 1; v < g.nodes.size(); ++v) {
    const Node& n = g.nodes[v];
    for (int i : n.inputs) level[v] = std::max(level[v], level[std::size_t(i)]);
    if (isAffine(n.op)) ++level[v];
    r[v] = intervalStep(g, int(v), r);
    if (n.op == Op::Max2) {  // the difference of its inputs, for its relaxation
      const NodeRange& a = r[std::size_t(n.inputs[0])];
      const NodeRange& b = r[std::size_t(n.inputs[1])];
      diff[v].lo.resize(a.lo.size());
      diff[v].hi.resize(a.lo.size());
      for (std::size_t i = 0; i < a.lo.size(); ++i) {
        diff[v].lo[i] = a.lo[i] - b.hi[i];
        diff[v].hi[i] = a.hi[i] - b.lo[i];
      }
    }
    // Symbolic bounds for affine ops that do not read the input box directly (there intervals are
    // already exact up to rounding).
    if (o.mode != RangeMode::Symbolic || !isAffine(n.op)) continue;
    bool direct = true;
    for (int i : n.inputs) direct = direct && g.nodes[std::size_t(i)].op == Op::Input;
    if (direct) continue;
    const std::size_t size = std::size_t(n.size());
    std::vector<double> lo(size, -std::numeric_limits<double>::infinity());
    std::vector<double> hi(size, std::numeric_limits<double>::infinity());
    // A probe first: the rows of a few output elements spread over the tensor. When the linear
    // bounds gain nothing over the intervals there (deep convolutions over a wide box, where most
    // ReLUs are unstable), the node keeps its intervals and the costly rest is skipped.
    const std::size_t probe = std::min<std::size_t>(size, 16), stride = size / probe;
    double gained = 0, width = 0;
    for (std::size_t k = 0; k < probe; ++k) {
      const std::size_t i = k * stride;
      workers[0].run(int(v), i, 1, lo.data() + i, hi.data() + i);
      width += r[v].hi[i] - r[v].lo[i];
      gained += std::max(0.0, lo[i] - r[v].lo[i]) + std::max(0.0, r[v].hi[i] - hi[i]);
    }
    if (o.probe && probe < size && !(gained > 0.01 * width)) continue;
    // Blocks of rows are independent: the threads take them in turn.
    const std::size_t rows = std::max<std::size_t>(1, std::min(block, (size + threads - 1) / threads));
    std::atomic<std::size_t> next{0};
    auto work = [&](unsigned t) {
      for (std::size_t first; (first = next.fetch_add(rows)) < size;)
        workers[t].run(int(v), first, std::min(rows, size - first), lo.data() + first, hi.data() + first);
    };
    util::parallelFor(unsigned(std::min<std::size_t>(threads, (size + rows - 1) / rows)), work);
    for (std::size_t i = 0; i < size; ++i) {  // both are sound: keep the tighter side of each
      r[v].lo[i] = std::max(r[v].lo[i], lo[i]);
      r[v].hi[i] = std::min(r[v].hi[i], hi[i]);
    }
  }
  std::vector<NodeRange> out(original.nodes.size());
  for (std::size_t v = 0; v < original.nodes.size(); ++v) out[v] = r[std::size_t(map[v])];
  return out;
}

}  // namespace

NodeRange inputBox(const Graph& g, double pixelLo, double pixelHi) {
  if (std::isnan(pixelLo) || std::isnan(pixelHi)) throw SaveError("the input range holds a NaN");
  if (pixelLo > pixelHi)
    throw SaveError("the input range is empty: lo " + std::to_string(pixelLo) + " > hi " + std::to_string(pixelHi));
  if (std::isinf(pixelLo) || std::isinf(pixelHi)) throw SaveError("the input range must be finite");
  // The trainer normalises in fp32: allow one fp32 rounding on each side.
  const double lo = (pixelLo - g.inputMean) / g.inputDeviation, hi = (pixelHi - g.inputMean) / g.inputDeviation;
  const std::size_t size = std::size_t(g.nodes[0].size());
  NodeRange box;
  box.lo.assign(size, lo - 4 * kU32 * (std::fabs(lo) + 1));
  box.hi.assign(size, hi + 4 * kU32 * (std::fabs(hi) + 1));
  return box;
}

namespace {
std::vector<float> inputGradient(const Graph& g, const std::vector<std::vector<float>>& act, int node, std::size_t element);

// How much each input element's width moves the output: width_i * sum_o |d output_o / d x_i| at
// the part's centre.
std::vector<double> influence(const Graph& g, const NodeRange& part) {
  std::vector<float> centre(part.lo.size());
  for (std::size_t i = 0; i < centre.size(); ++i) centre[i] = float(0.5 * (part.lo[i] + part.hi[i]));
  const std::vector<std::vector<float>> act = runAll(g, centre.data(), 1);
  std::vector<double> weight(centre.size(), 0.0);
  for (std::size_t o = 0; o < std::size_t(g.nodes[std::size_t(g.output)].size()); ++o) {
    const std::vector<float> grad = inputGradient(g, act, g.output, o);
    for (std::size_t i = 0; i < weight.size(); ++i) weight[i] += std::fabs(double(grad[i]));
  }
  for (std::size_t i = 0; i < weight.size(); ++i) weight[i] *= part.hi[i] - part.lo[i];
  return weight;
}
}  // namespace

RangeResult analyzeRanges(const Graph& g, const NodeRange& input, const RangeOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  RangeResult result;
  if (o.splits <= 0 || o.mode != RangeMode::Symbolic) {
    result.nodes = analyzeOnce(g, input, o);
  } else {
    // Bisect the input element of most influence on the output (its width times the summed
    // |gradient| of the outputs at the part's centre), analyse every part, merge by union.
    std::vector<NodeRange> parts{input};
    for (int s = 0; s < o.splits; ++s) {
      std::vector<NodeRange> next;
      for (const NodeRange& p : parts) {
        const std::vector<double> w = influence(g, p);
        const std::size_t pick = std::size_t(std::max_element(w.begin(), w.end()) - w.begin());
        const double mid = 0.5 * (p.lo[pick] + p.hi[pick]);
        NodeRange a = p, b = p;
        a.hi[pick] = mid;
        b.lo[pick] = mid;
        next.push_back(std::move(a));
        next.push_back(std::move(b));
      }
      parts = std::move(next);
    }
    for (const NodeRange& p : parts) {
      std::vector<NodeRange> r = analyzeOnce(g, p, o);
      if (result.nodes.empty()) {
        result.nodes = std::move(r);
        continue;
      }
      for (std::size_t v = 0; v < r.size(); ++v)
        for (std::size_t i = 0; i < r[v].lo.size(); ++i) {
          result.nodes[v].lo[i] = std::min(result.nodes[v].lo[i], r[v].lo[i]);
          result.nodes[v].hi[i] = std::max(result.nodes[v].hi[i], r[v].hi[i]);
        }
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

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

namespace {

// d(node element)/d(input) for one sample whose activations are `act`.
std::vector<float> inputGradient(const Graph& g, const std::vector<std::vector<float>>& act, int node,
                                 std::size_t element) {
  std::vector<std::vector<float>> grad(g.nodes.size());
  for (std::size_t v = 0; v <= std::size_t(node); ++v) grad[v].assign(std::size_t(g.nodes[v].size()), 0.0f);
  grad[std::size_t(node)][element] = 1;
  for (int v = node; v >= 1; --v) {
    const Node& n = g.nodes[std::size_t(v)];
    const std::vector<float>& gy = grad[std::size_t(v)];
    std::vector<float>& gx = grad[std::size_t(n.inputs[0])];
    const Node& src = g.nodes[std::size_t(n.inputs[0])];
    const std::vector<float>& x = act[std::size_t(n.inputs[0])];
    const std::size_t size = gy.size(), inSize = gx.size();
    switch (n.op) {
      case Op::Input:
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
        for (std::size_t i = 0; i < size; ++i) gx[std::size_t(n.gather[i])] += gy[i];
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
      case Op::Linear: {
        const std::size_t features = std::size_t(n.features()), taps = n.weight.size() / features;
        for (std::size_t j = 0; j < size; ++j)
          if (gy[j] != 0) {
            const std::size_t o = j % features, row = (j / features) * taps;
            for (std::size_t i = 0; i < taps; ++i) gx[row + i] += gy[j] * n.weight[o * taps + i];
          }
        break;
      }
      case Op::AddConst:
        for (std::size_t i = 0; i < size; ++i) gx[i] += gy[i];
        break;
      case Op::Sigmoid:
      case Op::Tanh: {
        const std::vector<float>& y = act[std::size_t(v)];
        for (std::size_t i = 0; i < size; ++i) gx[i] += gy[i] * (n.op == Op::Tanh ? 1 - y[i] * y[i] : y[i] * (1 - y[i]));
        break;
      }
      case Op::Mul: {
        const std::vector<float>& y = act[std::size_t(n.inputs[1])];
        std::vector<float>& gyIn = grad[std::size_t(n.inputs[1])];
        for (std::size_t i = 0; i < size; ++i) {
          gx[i] += gy[i] * y[i];
          gyIn[i] += gy[i] * x[i];
        }
        break;
      }
      case Op::Gelu:
        for (std::size_t i = 0; i < size; ++i) {
          const double xi = x[i], cdf = 0.5 * (1 + std::erf(xi / std::sqrt(2.0)));
          gx[i] += float(gy[i] * (cdf + xi * std::exp(-0.5 * xi * xi) / std::sqrt(2 * M_PI)));
        }
        break;
      case Op::Softmax: {
        const std::vector<float>& y = act[std::size_t(v)];
        const std::size_t w = std::size_t(n.features());
        for (std::size_t r = 0; r < size / w; ++r) {
          double dot = 0;
          for (std::size_t i = 0; i < w; ++i) dot += double(gy[r * w + i]) * y[r * w + i];
          for (std::size_t i = 0; i < w; ++i) gx[r * w + i] += float(y[r * w + i] * (gy[r * w + i] - dot));
        }
        break;
      }
      case Op::LayerNorm: {
        // n = (x - mean) / sigma; dx = (g - mean(g) - n mean(g n)) / sigma, g = dy * gamma
        const std::size_t w = std::size_t(n.features());
        for (std::size_t r = 0; r < size / w; ++r) {
          const float* xr = x.data() + r * w;
          double mean = 0, var = 0;
          for (std::size_t i = 0; i < w; ++i) mean += xr[i];
          mean /= double(w);
          for (std::size_t i = 0; i < w; ++i) var += (xr[i] - mean) * (xr[i] - mean);
          const double rstd = 1 / std::sqrt(var / double(w) + 1e-5);
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
        break;
      }
      case Op::MatMul: {
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
        break;
      }
      case Op::Conv2d:
        for (std::size_t j = 0; j < size; ++j) {
          const float d = gy[j];
          if (d != 0) forEachTap(n, src, int64_t(j), [&](std::size_t w, std::size_t i) { gx[i] += d * n.weight[w]; });
        }
        break;
      case Op::MaxPool2d: {
        const int64_t c = n.shape[0], oh = n.shape[1], ow = n.shape[2], h = src.shape[1], w = src.shape[2];
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t y = 0; y < oh; ++y)
            for (int64_t xx = 0; xx < ow; ++xx) {
              std::size_t best = std::size_t((ch * h + y * n.stride) * w + xx * n.stride);
              for (int64_t ky = 0; ky < n.kernel; ++ky)
                for (int64_t kx = 0; kx < n.kernel; ++kx) {
                  const std::size_t at = std::size_t((ch * h + y * n.stride + ky) * w + xx * n.stride + kx);
                  if (x[at] > x[best]) best = at;
                }
              gx[best] += gy[std::size_t((ch * oh + y) * ow + xx)];
            }
        break;
      }
    }
  }
  return grad[0];
}

}  // namespace

NodeRange ascentRanges(const Graph& g, int node, const NodeRange& input, int steps, int starts, uint64_t seed) {
  const std::size_t size = std::size_t(g.nodes[std::size_t(node)].size()), inSize = input.lo.size();
  NodeRange out;
  out.lo.assign(size, std::numeric_limits<double>::infinity());
  out.hi.assign(size, -std::numeric_limits<double>::infinity());
  std::mt19937_64 rng(seed);
  std::vector<float> x(inSize);
  for (std::size_t e = 0; e < size; ++e)
    for (int direction : {1, -1})
      for (int s = 0; s < starts; ++s) {
        for (std::size_t i = 0; i < inSize; ++i) {
          const double t = s == 0 ? 0.5 : std::uniform_real_distribution<double>(0, 1)(rng);
          x[i] = float(input.lo[i] + t * (input.hi[i] - input.lo[i]));
        }
        for (int step = 0; step <= steps; ++step) {
          const std::vector<std::vector<float>> act = runAll(g, x.data(), 1);
          const double value = act[std::size_t(node)][e];
          out.lo[e] = std::min(out.lo[e], value);
          out.hi[e] = std::max(out.hi[e], value);
          if (step == steps) break;
          const std::vector<float> grad = inputGradient(g, act, node, e);
          const double rate = 0.2 * (1.0 - double(step) / steps) + 0.01;
          for (std::size_t i = 0; i < inSize; ++i) {
            const double move = direction * (grad[i] > 0 ? 1 : grad[i] < 0 ? -1 : 0) * rate * (input.hi[i] - input.lo[i]);
            x[i] = float(std::clamp(double(x[i]) + move, input.lo[i], input.hi[i]));
          }
        }
      }
  return out;
}

}  // namespace peat::save

namespace peat::save {

std::vector<float> normalisedImages(const Graph& g, const std::vector<uint8_t>& pixels) {
  std::vector<float> x(pixels.size());
  for (std::size_t i = 0; i < pixels.size(); ++i) x[i] = (float(pixels[i]) / 255.0f - g.inputMean) / g.inputDeviation;
  return x;
}

Tightness tightnessOf(const NodeRange& r) {
  Tightness t;
  if (r.lo.empty()) return t;
  t.unionLo = *std::min_element(r.lo.begin(), r.lo.end());
  t.unionHi = *std::max_element(r.hi.begin(), r.hi.end());
  double w = 0;
  for (std::size_t i = 0; i < r.lo.size(); ++i) w += r.hi[i] - r.lo[i];
  t.meanWidth = w / double(r.lo.size());
  return t;
}

}  // namespace peat::save
