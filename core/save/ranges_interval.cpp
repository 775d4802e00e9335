// SPDX-License-Identifier: MIT
// Interval ranges: each op's exact real interval from its inputs' intervals, widened by a bound on
// its fp32 rounding error (roundingRadius), one node at a time.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>

#include "core/save/engine_simd.h"
#include "core/save/ranges_detail.h"

namespace peat::save {

using detail::forEachPoolTap;
using detail::forEachTap;
using detail::parallelFor;

namespace {

// Convolutions and token-wise linear layers in centre-radius form, as three plain GEMMs in double.
// With [lo, hi] inside [m - r, m + r] per input element, the exact range of bias + sum w x is
// inside bias + W m -+ |W| r, and the fp32 rounding radius needs |W| mag, mag = max(|lo|, |hi|).
// Each double GEMM (any order, FMA or not) is within gamma64(taps) sum |a||b| + taps 2^-1074 of its
// exact value (the standard bound with underflow), so the three computed sums Sm, Sr, Sg give
//   |Sm - W m| + |Sr - |W| r| <= gamma64(taps) (|W| |m| + |W| r) + 2 taps 2^-1074, where |m| <= mag
// (m lies in [lo, hi]) and |W| mag <= (Sg + taps 2^-1074) / (1 - gamma64(taps)), the same for |W| r.
// That bound (errD) widens the exact interval; the few roundings after the GEMMs (bias + Sm, -+ Sr,
// -+ errD, -+ the fp32 radius) stay below 5 u_64 (|lo| + |hi|), far under the kDoubleMargin that
// widenByRounding's form adds at the end. Endpoint loops remain for infinite or NaN bounds.
constexpr double kU64 = 0x1p-53;       // double's unit roundoff
constexpr double kTiny64 = 0x1p-1074;  // double's smallest subnormal: the most one product loses to underflow
double gamma64(int64_t n) { return double(n) * kU64 / (1 - double(n) * kU64); }

// Whether every bound is in order and at most DBL_MAX / 4 in magnitude, so that no centre or
// radius overflows (the endpoint loops handle infinite and NaN bounds).
bool centreRadiusUsable(const NodeRange& x) {
  const double limit = std::numeric_limits<double>::max() / 4;
  bool usable = true;
  for (std::size_t i = 0; i < x.lo.size(); ++i)
    usable = usable && x.lo[i] <= x.hi[i] && x.lo[i] >= -limit && x.hi[i] <= limit;  // false for a NaN
  return usable;
}

// [lo, hi] inside [mid - rad, mid + rad]. lo + hi rounds into [2 lo, 2 hi] and halving stays in
// [lo, hi] (rounding is monotone). Each distance rounds down by at most a relative u (or not at all
// below the normal range): the factor 1 + 2^-50 > 1 / (1 - u)^2 lifts rad over both exact distances.
inline void centreRadius(double lo, double hi, double& mid, double& rad) {
  mid = 0.5 * (lo + hi);
  rad = std::max(hi - mid, mid - lo) * (1 + 0x1p-50);
}

// One affine op as `groups` GEMMs: output (g, o, p) = bias[g rows + o] + sum over t < taps of
// weight[(g rows + o) taps + t] x[i] for the input elements i that source(g, t, p0, count, i) lists
// for columns p0 .. p0 + count - 1 of tap t (-1: a zero of the padding), written at element
// target(g, o, p).
struct AffineGemm {
  int64_t groups = 1, rows = 0, taps = 0, positions = 0;
  const float* weight = nullptr;
  const float* bias = nullptr;  // or null
};

// Fills lo and hi with the widened interval (as widenByRounding would) and e with the fp32 rounding
// radius, or e alone when lo is null (one GEMM instead of three). False: a bound was not finite.
template <class Source, class Target>
bool affineCentreRadius(const AffineGemm& a, const NodeRange& x, Source source, Target target, double* lo,
                        double* hi, double* e) {
  if (!centreRadiusUsable(x)) return false;
  const bool bounds = lo != nullptr;
  const int64_t taps = a.taps, colBlocks = (a.positions + 15) / 16, rowBlocks = (a.rows + 3) / 4;
  // Column chunks whose three packed panels take at most 1 MiB; rows split between parts only
  // when there are too few (group, chunk) pairs to share between the cores.
  const int64_t chunkBlocks = std::clamp<int64_t>((int64_t(1) << 17) / (3 * 16 * taps), 1, colBlocks);
  const int64_t chunks = (colBlocks + chunkBlocks - 1) / chunkBlocks;
  const bool big = a.groups * a.rows * taps * a.positions >= (int64_t(1) << 20);
  const unsigned threads = big ? util::hardwareThreads() : 1u;
  const int64_t pairs = a.groups * chunks;
  const int64_t wanted = 2 * int64_t(threads);
  const int64_t rowParts = pairs >= wanted ? 1 : std::min(rowBlocks, (wanted + pairs - 1) / pairs);
  const int64_t items = pairs * rowParts;
  const double gd = gamma64(taps), g32 = gamma32(taps + 1), tiny = double(taps) * kTiny64;
  std::atomic<int64_t> next{0};
  auto work = [&](unsigned) {
    std::vector<double> wm, wa, bm, br, bg, cm, cr, cg;  // packed weights, panels, products
    int64_t packed = -1;  // the (group, part) whose weights wm and wa hold
    for (int64_t item; (item = next.fetch_add(1)) < items;) {
      // in order of group, part, chunk: a worker mostly takes the next chunk of the same weights
      const int64_t g = item / (chunks * rowParts), part = item / chunks % rowParts, chunk = item % chunks;
      const int64_t rb0 = rowBlocks * part / rowParts, rbs = rowBlocks * (part + 1) / rowParts - rb0;
      const int64_t p0 = chunk * chunkBlocks * 16, cbs = std::min(chunkBlocks, colBlocks - chunk * chunkBlocks);
      if (rbs == 0) continue;
      if (packed != item / chunks) {
        packed = item / chunks;
        wm.assign(std::size_t(rbs * taps * 4), 0.0);
        wa.assign(wm.size(), 0.0);
        for (int64_t rb = 0; rb < rbs; ++rb)
          for (int64_t i = 0; i < 4; ++i) {
            const int64_t o = (rb0 + rb) * 4 + i;
            if (o >= a.rows) break;
            const float* w = a.weight + (g * a.rows + o) * taps;
            for (int64_t t = 0; t < taps; ++t) {
              wm[std::size_t((rb * taps + t) * 4 + i)] = double(w[t]);
              wa[std::size_t((rb * taps + t) * 4 + i)] = std::fabs(double(w[t]));
            }
          }
      }
      const std::size_t panel = std::size_t(cbs * taps * 16);
      bg.resize(panel);  // every entry is written below
      if (bounds) {
        bm.resize(panel);
        br.resize(panel);
      }
      int64_t at[16];
      for (int64_t cb = 0; cb < cbs; ++cb) {
        const int64_t first = p0 + cb * 16, count = std::min<int64_t>(16, a.positions - first);
        std::fill(at + count, at + 16, -1);  // columns past the end
        for (int64_t t = 0; t < taps; ++t) {
          source(g, t, first, count, at);
          const std::size_t to = std::size_t((cb * taps + t) * 16);
          for (std::size_t q = 0; q < 16; ++q) {
            const bool zero = at[q] < 0;  // the padding
            const double l = zero ? 0.0 : x.lo[std::size_t(at[q])], h = zero ? 0.0 : x.hi[std::size_t(at[q])];
            bg[to + q] = std::max(std::fabs(l), std::fabs(h));
            if (bounds) centreRadius(l, h, bm[to + q], br[to + q]);
          }
        }
      }
      const int64_t ldc = cbs * 16;
      cg.resize(std::size_t(rbs * 4 * ldc));
      detail::packedGemmF64(wa.data(), rbs, taps, bg.data(), cbs, cg.data(), ldc);
      if (bounds) {
        cm.resize(cg.size());
        cr.resize(cg.size());
        detail::packedGemmF64(wm.data(), rbs, taps, bm.data(), cbs, cm.data(), ldc);
        detail::packedGemmF64(wa.data(), rbs, taps, br.data(), cbs, cr.data(), ldc);
      }
      for (int64_t o = rb0 * 4; o < std::min(a.rows, (rb0 + rbs) * 4); ++o) {
        const double b = a.bias ? double(a.bias[g * a.rows + o]) : 0.0;
        for (int64_t p = p0; p < std::min(a.positions, p0 + ldc); ++p) {
          const std::size_t k = std::size_t((o - rb0 * 4) * ldc + (p - p0));
          const std::size_t j = std::size_t(target(g, o, p));
          const double magSum = (cg[k] + tiny) / (1 - gd);  // >= |W| mag
          const double radius = g32 * (std::fabs(b) + magSum) + double(taps + 1) * kTiny32;
          e[j] = radius;
          if (!bounds) continue;
          const double radSum = (cr[k] + tiny) / (1 - gd);  // >= |W| r
          const double errD = gd * (magSum + radSum) + 2 * tiny;
          const double centre = b + cm[k];
          const double l = centre - cr[k] - errD, h = centre + cr[k] + errD;
          const double margin = (std::fabs(l) + std::fabs(h) + radius) * detail::kDoubleMargin;
          lo[j] = l - (radius + margin);
          hi[j] = h + (radius + margin);
        }
      }
    }
  };
  util::parallelFor(threads, work);
  return true;
}

// A conv node's GEMMs: per group, output channels by output positions over (channel, kernel row,
// kernel column) taps, as forEachTap walks them.
template <class F>
bool convCentreRadius(const Node& n, const Node& src, F&& run) {
  AffineGemm a;
  a.groups = n.groups;
  a.rows = n.shape[0] / n.groups;
  a.taps = convTaps(n, src);
  a.positions = n.shape[1] * n.shape[2];
  a.weight = n.weight.data();
  a.bias = n.bias.empty() ? nullptr : n.bias.data();
  const int64_t cg = groupChannels(n, src), h = src.shape[1], w = src.shape[2], k = n.kernel, ow = n.shape[2];
  const int64_t plane = a.positions, rows = a.rows;
  // each position's window corner
  std::vector<int64_t> top(static_cast<std::size_t>(plane)), left(static_cast<std::size_t>(plane));
  for (int64_t p = 0; p < plane; ++p) {
    top[std::size_t(p)] = (p / ow) * n.stride - n.padding;
    left[std::size_t(p)] = (p % ow) * n.stride - n.padding;
  }
  auto source = [&](int64_t g, int64_t t, int64_t first, int64_t count, int64_t* at) {
    const int64_t ch = t / (k * k), dy = (t / k) % k * n.dilation, dx = t % k * n.dilation;
    const int64_t base = (g * cg + ch) * h * w;
    for (int64_t q = 0; q < count; ++q) {
      const int64_t iy = top[std::size_t(first + q)] + dy, ix = left[std::size_t(first + q)] + dx;
      at[q] = iy < 0 || iy >= h || ix < 0 || ix >= w ? -1 : base + iy * w + ix;
    }
  };
  auto target = [&](int64_t g, int64_t o, int64_t p) { return (g * rows + o) * plane + p; };
  return run(a, source, target);
}

// A linear node applied to many rows (tokens) as one GEMM: outputs by rows over the inputs.
// Single rows (a classifier's head) keep the endpoint loops: padded to 16 columns, the GEMM would
// do 16 times their work.
bool linearCentreRadius(const Node& n, const NodeRange& x, NodeRange& out) {
  AffineGemm a;
  a.rows = n.features();
  a.taps = int64_t(n.weight.size()) / a.rows;
  a.positions = n.size() / a.rows;
  a.weight = n.weight.data();
  a.bias = n.bias.empty() ? nullptr : n.bias.data();
  if (a.positions < 8) return false;
  const int64_t in = a.taps, features = a.rows;
  std::vector<double> e(out.lo.size());
  return affineCentreRadius(
      a, x,
      [&](int64_t, int64_t t, int64_t first, int64_t count, int64_t* at) {
        for (int64_t q = 0; q < count; ++q) at[q] = (first + q) * in + t;
      },
      [&](int64_t, int64_t o, int64_t p) { return p * features + o; }, out.lo.data(), out.hi.data(), e.data());
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
      const bool done = convCentreRadius(n, src, [&](const AffineGemm& a, auto source, auto target) {
        return affineCentreRadius(a, x, source, target, nullptr, nullptr, e.data());
      });
      if (done) break;
      const int64_t taps = convTaps(n, src), plane = n.shape[1] * n.shape[2];
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
    case Op::AvgPool2d: {
      const int64_t k2 = n.kernel * n.kernel;
      for (std::size_t j = 0; j < size; ++j) {
        double s = 0;
        forEachPoolTap(n, src, int64_t(j), [&](std::size_t i) { s += magnitude(x, i); });
        e[j] = gamma32(k2 + 1) * s / double(k2);
      }
      break;
    }
    case Op::Input:
    case Op::Relu:
    case Op::Clip:
    case Op::MaxPool2d:
    case Op::Embed:
    case Op::Flatten:
    case Op::Select:
    case Op::Max2:
      break;  // exact
  }
  return e;
}

}  // namespace peat::save

namespace peat::save::detail {

namespace {

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
  const double eps = double(n.eps);
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

// Exact ops (gathers and maxima): their intervals need no widening for rounding.

// A gather from one input, or from several laid end to end (a concatenation).
void intervalSelect(const Graph& g, const Node& n, const std::vector<NodeRange>& r, NodeRange& out) {
  const std::vector<int64_t> off = selectOffsets(g, n);
  for (std::size_t i = 0; i < out.lo.size(); ++i) {
    const int64_t at = n.gather[i];
    if (at < 0) continue;  // the constant 0
    const std::size_t k = selectPart(off, at);
    const NodeRange& x = r[std::size_t(n.inputs[k])];
    out.lo[i] = x.lo[std::size_t(at - off[k])];
    out.hi[i] = x.hi[std::size_t(at - off[k])];
  }
}

// A table lookup: each output row spans the table's rows that an integer id in the input's range
// names (negative ids count from the end, as the engine's); an id range holding none of them, or
// not finite, spans the whole table. Rows of the same id range share one column-wise min and max.
void intervalEmbed(const Node& n, const NodeRange& x, NodeRange& out) {
  const int64_t f = n.features(), rows = int64_t(n.weight.size()) / f;
  std::map<std::pair<int64_t, int64_t>, std::pair<std::vector<double>, std::vector<double>>> spans;
  for (std::size_t t = 0; t < x.lo.size(); ++t) {
    int64_t first = 0, last = rows - 1;  // the ids' range as table rows (both ends counted)
    if (std::isfinite(x.lo[t]) && std::isfinite(x.hi[t])) {
      const double lo = std::max(std::ceil(x.lo[t]), double(-rows)), hi = std::min(std::floor(x.hi[t]), double(rows - 1));
      if (lo <= hi && (lo >= 0 || hi < 0)) {  // all of one sign: a contiguous span of rows
        first = int64_t(lo) < 0 ? int64_t(lo) + rows : int64_t(lo);
        last = int64_t(hi) < 0 ? int64_t(hi) + rows : int64_t(hi);
      }
    }
    auto [it, fresh] = spans.try_emplace({first, last});
    auto& [lo, hi] = it->second;
    if (fresh) {
      lo.assign(std::size_t(f), std::numeric_limits<double>::infinity());
      hi.assign(std::size_t(f), -std::numeric_limits<double>::infinity());
      for (int64_t row = first; row <= last; ++row)
        for (int64_t c = 0; c < f; ++c) {
          const double v = n.weight[std::size_t(row * f + c)];
          lo[std::size_t(c)] = std::min(lo[std::size_t(c)], v);
          hi[std::size_t(c)] = std::max(hi[std::size_t(c)], v);
        }
    }
    std::copy(lo.begin(), lo.end(), out.lo.begin() + std::ptrdiff_t(t) * f);
    std::copy(hi.begin(), hi.end(), out.hi.begin() + std::ptrdiff_t(t) * f);
  }
}

void intervalMax2(const NodeRange& x, const NodeRange& y, NodeRange& out) {
  for (std::size_t i = 0; i < out.lo.size(); ++i) {
    out.lo[i] = std::max(x.lo[i], y.lo[i]);
    out.hi[i] = std::max(x.hi[i], y.hi[i]);
  }
}

void intervalRelu(const NodeRange& x, NodeRange& out) {
  for (std::size_t i = 0; i < out.lo.size(); ++i) {
    out.lo[i] = std::max(0.0, x.lo[i]);
    out.hi[i] = std::max(0.0, x.hi[i]);
  }
}

void intervalMaxPool(const Node& n, const Node& src, const NodeRange& x, NodeRange& out) {
  const int64_t c = n.shape[0], oh = n.shape[1], ow = n.shape[2], h = src.shape[1], w = src.shape[2];
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xx = 0; xx < ow; ++xx) {
        double lo = -std::numeric_limits<double>::infinity(), hi = lo;
        for (int64_t ky = 0; ky < n.kernel; ++ky)
          for (int64_t kx = 0; kx < n.kernel; ++kx) {
            const std::size_t at = std::size_t(poolInput(n, h, w, ch, y, xx, ky, kx));
            lo = std::max(lo, x.lo[at]);
            hi = std::max(hi, x.hi[at]);
          }
        out.lo[std::size_t((ch * oh + y) * ow + xx)] = lo;
        out.hi[std::size_t((ch * oh + y) * ow + xx)] = hi;
      }
}

// Affine ops: each weight takes the end of its input's interval that moves the sum its way.

void intervalLinear(const Node& n, const NodeRange& x, NodeRange& out) {
  const std::size_t size = out.lo.size();
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
}

void intervalConv(const Node& n, const Node& src, const NodeRange& x, NodeRange& out) {
  const std::size_t size = out.lo.size();
  const int64_t plane = n.shape[1] * n.shape[2];
  parallelFor(n.shape[0], int64_t(size) * convTaps(n, src), [&](int64_t first, int64_t last) {
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
}

void intervalBatchNorm(const Node& n, const NodeRange& x, NodeRange& out) {
  const std::size_t size = out.lo.size();
  const std::size_t c = std::size_t(n.shape[0]), hw = size / c;
  for (std::size_t ch = 0; ch < c; ++ch)
    for (std::size_t i = 0; i < hw; ++i) {
      const double s = n.weight[ch], b = n.bias[ch];
      const double a = s * x.lo[ch * hw + i] + b, z = s * x.hi[ch * hw + i] + b;
      out.lo[ch * hw + i] = std::min(a, z);
      out.hi[ch * hw + i] = std::max(a, z);
    }
}

void intervalAddConst(const Node& n, const NodeRange& x, NodeRange& out) {
  for (std::size_t i = 0; i < out.lo.size(); ++i) {
    out.lo[i] = x.lo[i] + n.bias[i];
    out.hi[i] = x.hi[i] + n.bias[i];
  }
}

void intervalAdd(const NodeRange& x, const NodeRange& y, NodeRange& out) {
  for (std::size_t i = 0; i < out.lo.size(); ++i) {
    out.lo[i] = x.lo[i] + y.lo[i];
    out.hi[i] = x.hi[i] + y.hi[i];
  }
}

void intervalGlobalAvgPool(const Node& src, const NodeRange& x, NodeRange& out) {
  const std::size_t size = out.lo.size();
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
}

void intervalAvgPool(const Node& n, const Node& src, const NodeRange& x, NodeRange& out) {
  const double k2 = double(n.kernel * n.kernel);
  for (std::size_t j = 0; j < out.lo.size(); ++j) {
    double lo = 0, hi = 0;
    forEachPoolTap(n, src, int64_t(j), [&](std::size_t i) {
      lo += x.lo[i];
      hi += x.hi[i];
    });
    out.lo[j] = lo / k2;
    out.hi[j] = hi / k2;
  }
}

// Clip is monotone and exact: its interval is the clamped input interval.
void intervalClip(const Node& n, const NodeRange& x, NodeRange& out) {
  const double lo = n.bias[0], hi = n.bias[1];
  for (std::size_t i = 0; i < out.lo.size(); ++i) {
    out.lo[i] = std::min(std::max(x.lo[i], lo), hi);
    out.hi[i] = std::min(std::max(x.hi[i], lo), hi);
  }
}

// Non-linear element-wise ops, from the double functions at the interval's ends.

void intervalGelu(const NodeRange& x, NodeRange& out) {
  // non-monotonic: falling up to its minimum, rising after it
  const double floor = geluExact(kGeluArgMin) - 1e-12;
  for (std::size_t i = 0; i < out.lo.size(); ++i) {
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
}

// Sigmoid and tanh: increasing.
void intervalSigmoidTanh(const Node& n, const NodeRange& x, NodeRange& out) {
  for (std::size_t i = 0; i < out.lo.size(); ++i) {
    auto f = [&](double v) { return n.op == Op::Tanh ? std::tanh(v) : 1 / (1 + std::exp(-v)); };
    out.lo[i] = f(x.lo[i]) - 1e-15;  // the double functions' own error
    out.hi[i] = f(x.hi[i]) + 1e-15;
  }
}

// Products of two tensors: each product's range is the extremes of its four corner products.

void intervalMul(const NodeRange& x, const NodeRange& y, NodeRange& out) {
  for (std::size_t i = 0; i < out.lo.size(); ++i) {
    const double p[4] = {x.lo[i] * y.lo[i], x.lo[i] * y.hi[i], x.hi[i] * y.lo[i], x.hi[i] * y.hi[i]};
    out.lo[i] = *std::min_element(p, p + 4);
    out.hi[i] = *std::max_element(p, p + 4);
  }
}

void intervalMatMul(const Node& n, const Node& src, const NodeRange& x, const NodeRange& y, NodeRange& out) {
  const std::size_t size = out.lo.size();
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
}

// The exact interval widened by the op's fp32 rounding radius and the double margin. The double
// sums behind out (n terms: within gamma64(n) of their sum of magnitudes) err by at most
// u_64 / u_32 = 2^-29 < 2 kDoubleMargin of the fp32 radius e, which bounds the same sum with
// gamma32(n): hence 2 e in the margin; |lo| + |hi| covers the last few roundings.
void widenByRounding(const Graph& g, int index, const std::vector<NodeRange>& r, NodeRange& out) {
  const std::vector<double> e = roundingRadius(g, index, r);
  for (std::size_t i = 0; i < out.lo.size(); ++i) {
    const double m = (std::fabs(out.lo[i]) + std::fabs(out.hi[i]) + 2 * e[i]) * kDoubleMargin;
    out.lo[i] -= e[i] + m;
    out.hi[i] += e[i] + m;
  }
}

}  // namespace

// Exact ops and the row-wise ones (which bound their own rounding) return unwidened; the rest
// are widened by their rounding radius.
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
      intervalSelect(g, n, r, out);
      return out;
    case Op::Embed:
      intervalEmbed(n, x, out);
      return out;
    case Op::Max2:
      intervalMax2(x, r[std::size_t(n.inputs[1])], out);
      return out;
    case Op::Relu:
      intervalRelu(x, out);
      return out;
    case Op::MaxPool2d:
      intervalMaxPool(n, src, x, out);
      return out;
    case Op::Linear:
      if (linearCentreRadius(n, x, out)) return out;  // widened already
      intervalLinear(n, x, out);
      break;
    case Op::AddConst:
      intervalAddConst(n, x, out);
      break;
    case Op::Gelu:
      intervalGelu(x, out);
      break;
    case Op::Sigmoid:
    case Op::Tanh:
      intervalSigmoidTanh(n, x, out);
      break;
    case Op::Mul:
      intervalMul(x, r[std::size_t(n.inputs[1])], out);
      break;
    case Op::MatMul:
      intervalMatMul(n, src, x, r[std::size_t(n.inputs[1])], out);
      break;
    case Op::LayerNorm:
      layerNormInterval(n, x, out);
      return out;
    case Op::Softmax:
      softmaxInterval(n, x, out);
      return out;
    case Op::Conv2d: {
      std::vector<double> e(size);
      const bool done = convCentreRadius(n, src, [&](const AffineGemm& a, auto source, auto target) {
        return affineCentreRadius(a, x, source, target, out.lo.data(), out.hi.data(), e.data());
      });
      if (done) return out;  // widened already
      intervalConv(n, src, x, out);
      break;
    }
    case Op::BatchNorm:
      intervalBatchNorm(n, x, out);
      break;
    case Op::Add:
      intervalAdd(x, r[std::size_t(n.inputs[1])], out);
      break;
    case Op::GlobalAvgPool:
      intervalGlobalAvgPool(src, x, out);
      break;
    case Op::AvgPool2d:
      intervalAvgPool(n, src, x, out);
      break;
    case Op::Clip:
      intervalClip(n, x, out);
      return out;
  }
  widenByRounding(g, index, r, out);
  return out;
}

}  // namespace peat::save::detail
