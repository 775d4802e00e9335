// SPDX-License-Identifier: MIT
#include "core/plugin/probe_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace peat::plugin {

namespace {

using Shape = std::vector<int64_t>;
using Values = std::vector<double>;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kPi = 3.14159265358979323846;

int64_t elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

void need(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

// rows of the last dimension: [..., n] as rows x n
void rowsOf(const Shape& s, int64_t& rows, int64_t& n) {
  need(!s.empty() && s.back() > 0, "a tensor without a last dimension");
  n = s.back();
  rows = elements(s) / n;
}

// --- GEMM and batched GEMM ------------------------------------------------------------------------

std::vector<Values> gemm(bool batched, const peat_params& p, const std::vector<Shape>& inShapes,
                         const std::vector<Values>& in, const std::vector<Shape>& outShapes) {
  const bool withC0 = p.beta != 0;
  need(in.size() == (withC0 ? 3u : 2u) && outShapes.size() == 1, "gemm: A, B[, C0] in, C out");
  const int64_t m = p.m, n = p.n, k = p.k;
  need(m > 0 && n > 0 && k > 0, "gemm: m, n and k must be positive");
  need(p.lda >= (p.trans_a ? m : k) && p.ldb >= (p.trans_b ? k : n) && p.ldc >= n, "gemm: a leading dimension too small");
  const int64_t batch = batched ? std::max<int64_t>(p.batch, 1) : 1;
  const int64_t sa = batched ? p.stride_a : 0, sb = batched ? p.stride_b : 0, sc = batched ? p.stride_c : 0;
  need(sa >= 0 && sb >= 0 && sc >= 0, "gemm: negative strides");
  // the last element each operand reaches must lie inside it
  const int64_t lastA = (batch - 1) * sa + ((p.trans_a ? k : m) - 1) * p.lda + (p.trans_a ? m : k);
  const int64_t lastB = (batch - 1) * sb + ((p.trans_b ? n : k) - 1) * p.ldb + (p.trans_b ? k : n);
  const int64_t lastC = (batch - 1) * sc + (m - 1) * p.ldc + n;
  need(lastA <= int64_t(in[0].size()) && lastB <= int64_t(in[1].size()), "gemm: A or B smaller than its parameters");
  need(lastC <= elements(outShapes[0]) && (!withC0 || lastC <= int64_t(in[2].size())), "gemm: C smaller than its parameters");
  (void)inShapes;
  Values c(std::size_t(elements(outShapes[0])), kNaN);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t q = 0; q < k; ++q) {
          const double a = in[0][std::size_t(b * sa + (p.trans_a ? q * p.lda + i : i * p.lda + q))];
          const double bb = in[1][std::size_t(b * sb + (p.trans_b ? j * p.ldb + q : q * p.ldb + j))];
          s += a * bb;
        }
        const std::size_t at = std::size_t(b * sc + i * p.ldc + j);
        c[at] = p.alpha * s + (withC0 ? p.beta * in[2][at] : 0.0);
      }
  return {c};
}

// --- conv2d (NCHW) ----------------------------------------------------------------------------------

struct ConvGeometry {
  int64_t N, C, H, W, O, Cg, KH, KW, OH, OW, G, sh, sw, ph, pw, dh, dw;
};

ConvGeometry convGeometry(const peat_params& p, const Shape& x, const Shape& w, const Shape& y) {
  need(x.size() == 4 && w.size() == 4 && y.size() == 4, "conv2d: x, w and y are 4-d");
  ConvGeometry g{};
  g.N = x[0], g.C = x[1], g.H = x[2], g.W = x[3];
  g.O = w[0], g.Cg = w[1], g.KH = w[2], g.KW = w[3];
  g.OH = y[2], g.OW = y[3];
  g.G = p.groups > 0 ? p.groups : 1;
  g.sh = p.stride_h > 0 ? p.stride_h : 1, g.sw = p.stride_w > 0 ? p.stride_w : 1;
  g.ph = p.pad_h, g.pw = p.pad_w;
  g.dh = p.dilation_h > 0 ? p.dilation_h : 1, g.dw = p.dilation_w > 0 ? p.dilation_w : 1;
  need(g.ph >= 0 && g.pw >= 0, "conv2d: negative padding");
  need(g.C == g.Cg * g.G && g.O % g.G == 0 && y[0] == g.N && y[1] == g.O, "conv2d: shapes do not fit the groups");
  need(g.OH == (g.H + 2 * g.ph - g.dh * (g.KH - 1) - 1) / g.sh + 1 &&
           g.OW == (g.W + 2 * g.pw - g.dw * (g.KW - 1) - 1) / g.sw + 1 && g.OH > 0 && g.OW > 0,
       "conv2d: the output size does not follow from stride, padding and dilation");
  return g;
}

// Calls f(xIndex, wIndex, yIndex) for every product a convolution sums.
template <typename F>
void convTerms(const ConvGeometry& g, F f) {
  const int64_t Og = g.O / g.G;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow)
          for (int64_t c = 0; c < g.Cg; ++c)
            for (int64_t kh = 0; kh < g.KH; ++kh)
              for (int64_t kw = 0; kw < g.KW; ++kw) {
                const int64_t ih = oh * g.sh - g.ph + kh * g.dh, iw = ow * g.sw - g.pw + kw * g.dw;
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                const int64_t ci = (o / Og) * g.Cg + c;
                f(std::size_t(((n * g.C + ci) * g.H + ih) * g.W + iw), std::size_t(((o * g.Cg + c) * g.KH + kh) * g.KW + kw),
                  std::size_t(((n * g.O + o) * g.OH + oh) * g.OW + ow));
              }
}

std::vector<Values> conv2d(uint32_t variant, const peat_params& p, const std::vector<Shape>& inShapes,
                           const std::vector<Values>& in, const std::vector<Shape>& outShapes) {
  need(outShapes.size() == 1, "conv2d: one output");
  if (variant == PEAT_VARIANT_FORWARD) {
    need(in.size() == 2 || in.size() == 3, "conv2d forward: x, w[, b] in");
    const ConvGeometry g = convGeometry(p, inShapes[0], inShapes[1], outShapes[0]);
    need(in.size() == 2 || int64_t(in[2].size()) == g.O, "conv2d forward: b has O elements");
    Values y(std::size_t(elements(outShapes[0])), 0.0);
    if (in.size() == 3)
      for (std::size_t i = 0; i < y.size(); ++i) y[i] = in[2][(i / std::size_t(g.OH * g.OW)) % std::size_t(g.O)];
    convTerms(g, [&](std::size_t xi, std::size_t wi, std::size_t yi) { y[yi] += in[0][xi] * in[1][wi]; });
    return {y};
  }
  need(in.size() == 2, "conv2d backward: dy and w (grad input) or dy and x (grad weight) in");
  if (variant == PEAT_VARIANT_GRAD_INPUT) {
    const ConvGeometry g = convGeometry(p, outShapes[0], inShapes[1], inShapes[0]);
    Values dx(std::size_t(elements(outShapes[0])), 0.0);
    convTerms(g, [&](std::size_t xi, std::size_t wi, std::size_t yi) { dx[xi] += in[0][yi] * in[1][wi]; });
    return {dx};
  }
  need(variant == PEAT_VARIANT_GRAD_WEIGHT, "conv2d: forward, grad input or grad weight");
  const ConvGeometry g = convGeometry(p, inShapes[1], outShapes[0], inShapes[0]);
  Values dw(std::size_t(elements(outShapes[0])), 0.0);
  convTerms(g, [&](std::size_t xi, std::size_t wi, std::size_t yi) { dw[wi] += in[0][yi] * in[1][xi]; });
  return {dw};
}

// --- softmax over the last dimension ------------------------------------------------------------------

std::vector<Values> softmax(uint32_t variant, const peat_params& p, const std::vector<Shape>& inShapes,
                            const std::vector<Values>& in) {
  int64_t rows, n;
  rowsOf(inShapes[0], rows, n);
  if (variant == PEAT_VARIANT_FORWARD) {
    need(in.size() == 1, "softmax forward: x in");
    Values y(in[0].size());
    for (int64_t r = 0; r < rows; ++r) {
      const double* x = in[0].data() + r * n;
      const double mx = *std::max_element(x, x + n);
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(x[j] - mx);
      for (int64_t j = 0; j < n; ++j) y[std::size_t(r * n + j)] = p.log ? x[j] - mx - std::log(sum) : std::exp(x[j] - mx) / sum;
    }
    return {y};
  }
  need(variant == PEAT_VARIANT_GRAD_INPUT && in.size() == 2 && in[1].size() == in[0].size(),
       "softmax grad input: dy and y in");
  Values dx(in[0].size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* dy = in[0].data() + r * n;
    const double* y = in[1].data() + r * n;
    double s = 0;  // softmax: sum dy y; log-softmax: sum dy
    for (int64_t j = 0; j < n; ++j) s += p.log ? dy[j] : dy[j] * y[j];
    for (int64_t j = 0; j < n; ++j) dx[std::size_t(r * n + j)] = p.log ? dy[j] - std::exp(y[j]) * s : y[j] * (dy[j] - s);
  }
  return {dx};
}

// --- layer norm over the last dimension (biased variance, eps inside the root) -------------------------

std::vector<Values> layerNorm(uint32_t variant, const peat_params& p, const std::vector<Shape>& inShapes,
                              const std::vector<Values>& in) {
  int64_t rows, n;
  rowsOf(inShapes[0], rows, n);
  const std::size_t need1 = variant == PEAT_VARIANT_FORWARD ? 3 : variant == PEAT_VARIANT_GRAD_INPUT ? 3
                            : variant == PEAT_VARIANT_GRAD_WEIGHT                                   ? 2
                                                                                                    : 1;
  need(variant <= PEAT_VARIANT_GRAD_BIAS && in.size() == need1, "layer norm: the inputs of the variant");
  for (std::size_t i = 1; i < in.size(); ++i) {
    const bool perColumn = (variant == PEAT_VARIANT_FORWARD && i >= 1) || (variant == PEAT_VARIANT_GRAD_INPUT && i == 2);
    need(int64_t(in[i].size()) == (perColumn ? n : rows * n), "layer norm: input sizes");
  }
  if (variant == PEAT_VARIANT_GRAD_BIAS) {
    Values db(std::size_t(n), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) db[std::size_t(j)] += in[0][std::size_t(r * n + j)];
    return {db};
  }
  // the x of the variant: the forward's first input, the backward's second
  const Values& x = variant == PEAT_VARIANT_FORWARD ? in[0] : in[1];
  Values out(variant == PEAT_VARIANT_GRAD_WEIGHT ? std::size_t(n) : x.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data() + r * n;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += xr[j];
    mean /= double(n);
    for (int64_t j = 0; j < n; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    var /= double(n);
    const double rstd = 1.0 / std::sqrt(var + p.eps);
    if (variant == PEAT_VARIANT_FORWARD) {
      for (int64_t j = 0; j < n; ++j)
        out[std::size_t(r * n + j)] = (xr[j] - mean) * rstd * in[1][std::size_t(j)] + in[2][std::size_t(j)];
    } else if (variant == PEAT_VARIANT_GRAD_WEIGHT) {
      for (int64_t j = 0; j < n; ++j) out[std::size_t(j)] += in[0][std::size_t(r * n + j)] * (xr[j] - mean) * rstd;
    } else {
      // dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma
      double mg = 0, mgx = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double g = in[0][std::size_t(r * n + j)] * in[2][std::size_t(j)];
        mg += g;
        mgx += g * (xr[j] - mean) * rstd;
      }
      mg /= double(n);
      mgx /= double(n);
      for (int64_t j = 0; j < n; ++j) {
        const double g = in[0][std::size_t(r * n + j)] * in[2][std::size_t(j)];
        out[std::size_t(r * n + j)] = rstd * (g - mg - (xr[j] - mean) * rstd * mgx);
      }
    }
  }
  return {out};
}

// --- attention ------------------------------------------------------------------------------------------

std::vector<Values> attention(uint32_t variant, const peat_params& p, const std::vector<Shape>& inShapes,
                              const std::vector<Values>& in, const std::vector<Shape>& outShapes) {
  const std::size_t first = variant == PEAT_VARIANT_FORWARD ? 0 : 1;  // where q is
  need(variant <= PEAT_VARIANT_GRAD_INPUT && in.size() == first + 3 + (p.has_mask ? 1 : 0) + (p.has_dropout ? 1 : 0),
       "attention: q, k, v[, mask][, keep] (forward) or do, q, k, v[, mask][, keep] (grad input) in");
  const Shape &qs = inShapes[first], &ks = inShapes[first + 1], &vs = inShapes[first + 2];
  need(qs.size() == 3 && ks.size() == 3 && vs.size() == 3, "attention: q, k and v are [B, T, D]");
  const int64_t B = qs[0], Tq = qs[1], D = qs[2], Tk = ks[1], Dv = vs[2];
  need(ks[0] == B && ks[2] == D && vs[0] == B && vs[1] == Tk, "attention: q, k and v do not fit");
  need(!p.has_mask || int64_t(in[first + 3].size()) == Tq * Tk, "attention: the mask is [Tq, Tk]");
  need(outShapes.size() == (variant == PEAT_VARIANT_FORWARD ? 1u : 3u), "attention: o out, or dq, dk, dv");
  const Values &q = in[first], &k = in[first + 1], &v = in[first + 2];
  const Values* mask = p.has_mask ? &in[first + 3] : nullptr;
  // the dropout's multipliers of the probabilities, [B, Tq, Tk]
  const Values* keep = p.has_dropout ? &in[first + 3 + (p.has_mask ? 1 : 0)] : nullptr;
  need(!keep || int64_t(keep->size()) == B * Tq * Tk, "attention: keep is [B, Tq, Tk]");
  Values o(std::size_t(B * Tq * Dv), 0.0), dq, dk, dv;
  if (variant == PEAT_VARIANT_GRAD_INPUT) {
    need(int64_t(in[0].size()) == B * Tq * Dv, "attention grad input: do is [B, Tq, Dv]");
    dq.assign(std::size_t(B * Tq * D), 0.0);
    dk.assign(std::size_t(B * Tk * D), 0.0);
    dv.assign(std::size_t(B * Tk * Dv), 0.0);
  }
  std::vector<double> s(static_cast<std::size_t>(Tk)), prob(static_cast<std::size_t>(Tk));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < Tq; ++i) {
      // query i sees keys 0 .. i + (Tk - Tq) when causal; none, and a zero row, when that is negative
      const int64_t last = p.causal ? std::min(Tk - 1, i + (Tk - Tq)) : Tk - 1;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j <= last; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += q[std::size_t((b * Tq + i) * D + d)] * k[std::size_t((b * Tk + j) * D + d)];
        s[std::size_t(j)] = p.scale * dot + (mask ? (*mask)[std::size_t(i * Tk + j)] : 0.0);
        mx = std::max(mx, s[std::size_t(j)]);
      }
      double sum = 0;
      for (int64_t j = 0; j < Tk; ++j) {
        prob[std::size_t(j)] = j <= last && std::isfinite(mx) ? std::exp(s[std::size_t(j)] - mx) : 0.0;
        sum += prob[std::size_t(j)];
      }
      for (int64_t j = 0; j < Tk; ++j) prob[std::size_t(j)] = sum > 0 ? prob[std::size_t(j)] / sum : 0.0;
      double* oi = o.data() + (b * Tq + i) * Dv;
      auto kept = [&](int64_t j) { return keep ? (*keep)[std::size_t((b * Tq + i) * Tk + j)] : 1.0; };
      for (int64_t j = 0; j < Tk; ++j)
        for (int64_t d = 0; d < Dv; ++d) oi[d] += prob[std::size_t(j)] * kept(j) * v[std::size_t((b * Tk + j) * Dv + d)];
      if (variant == PEAT_VARIANT_FORWARD) continue;
      // dP = dO V^T, dS = P (dP - rowsum(dO o)), dq = scale dS K, dk = scale dS^T Q, dv = P^T dO
      const double* doi = in[0].data() + (b * Tq + i) * Dv;
      double rowDot = 0;
      for (int64_t d = 0; d < Dv; ++d) rowDot += doi[d] * oi[d];
      for (int64_t j = 0; j < Tk; ++j) {
        const double pj = prob[std::size_t(j)];
        if (pj == 0) continue;
        double dp = 0;
        for (int64_t d = 0; d < Dv; ++d) {
          dp += doi[d] * v[std::size_t((b * Tk + j) * Dv + d)];
          dv[std::size_t((b * Tk + j) * Dv + d)] += pj * kept(j) * doi[d];
        }
        // with dropout, dP = (dO V^T) keep, and rowsum(P dP) is still rowsum(dO o)
        const double ds = pj * (kept(j) * dp - rowDot) * p.scale;
        for (int64_t d = 0; d < D; ++d) {
          dq[std::size_t((b * Tq + i) * D + d)] += ds * k[std::size_t((b * Tk + j) * D + d)];
          dk[std::size_t((b * Tk + j) * D + d)] += ds * q[std::size_t((b * Tq + i) * D + d)];
        }
      }
    }
  if (variant == PEAT_VARIANT_FORWARD) return {o};
  return {dq, dk, dv};
}

// --- element-wise activations -------------------------------------------------------------------------

double phi(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * kPi); }
double Phi(double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))); }
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
constexpr double kGeluTanhC = 0.044715;

double activationForward(int32_t kind, double x) {
  switch (kind) {
    case PEAT_ACTIVATION_RELU: return x > 0 ? x : 0;
    case PEAT_ACTIVATION_GELU: return x * Phi(x);
    case PEAT_ACTIVATION_GELU_TANH: return 0.5 * x * (1 + std::tanh(std::sqrt(2 / kPi) * (x + kGeluTanhC * x * x * x)));
    case PEAT_ACTIVATION_SILU: return x * sigmoid(x);
    case PEAT_ACTIVATION_TANH: return std::tanh(x);
    case PEAT_ACTIVATION_SIGMOID: return sigmoid(x);
    default: throw std::invalid_argument("activation: an unknown kind");
  }
}

// dy f'(.) from s: x for GELU, GELU_TANH and SILU, the forward's y for RELU, TANH and SIGMOID
double activationBackward(int32_t kind, double dy, double s) {
  switch (kind) {
    case PEAT_ACTIVATION_RELU: return s > 0 ? dy : 0;
    case PEAT_ACTIVATION_GELU: return dy * (Phi(s) + s * phi(s));
    case PEAT_ACTIVATION_GELU_TANH: {
      const double c = std::sqrt(2 / kPi), t = std::tanh(c * (s + kGeluTanhC * s * s * s));
      return dy * (0.5 * (1 + t) + 0.5 * s * (1 - t * t) * c * (1 + 3 * kGeluTanhC * s * s));
    }
    case PEAT_ACTIVATION_SILU: {
      const double g = sigmoid(s);
      return dy * g * (1 + s * (1 - g));
    }
    case PEAT_ACTIVATION_TANH: return dy * (1 - s * s);
    case PEAT_ACTIVATION_SIGMOID: return dy * s * (1 - s);
    default: throw std::invalid_argument("activation: an unknown kind");
  }
}

std::vector<Values> activation(uint32_t variant, const peat_params& p, const std::vector<Values>& in) {
  if (variant == PEAT_VARIANT_FORWARD) {
    need(in.size() == 1, "activation forward: x in");
    Values y(in[0].size());
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = activationForward(p.activation, in[0][i]);
    return {y};
  }
  need(variant == PEAT_VARIANT_GRAD_INPUT && in.size() == 2 && in[0].size() == in[1].size(),
       "activation grad input: dy and s in");
  Values dx(in[0].size());
  for (std::size_t i = 0; i < dx.size(); ++i) dx[i] = activationBackward(p.activation, in[0][i], in[1][i]);
  return {dx};
}

// --- optimiser steps: weight decay as torch.optim's SGD and Adam, added to the gradient -------------------

std::vector<Values> optimizer(uint32_t variant, const peat_params& p, const std::vector<Values>& in) {
  need(variant == PEAT_VARIANT_UPDATE, "optimizer: update");
  const bool adam = p.optimizer == PEAT_OPTIMIZER_ADAM;
  need(adam || p.optimizer == PEAT_OPTIMIZER_SGD, "optimizer: SGD or Adam");
  need(in.size() == (adam ? 4u : 3u), "optimizer: p, g, m[, v] in");
  for (const Values& t : in) need(t.size() == in[0].size(), "optimizer: inputs of one size");
  need(!adam || p.step >= 1, "optimizer: Adam's step starts at 1");
  const std::size_t n = in[0].size();
  Values pn(n), mn(n), vn(adam ? n : 0);
  for (std::size_t i = 0; i < n; ++i) {
    const double g = in[1][i] + p.weight_decay * in[0][i];
    if (!adam) {
      mn[i] = p.momentum * in[2][i] + g;
      pn[i] = in[0][i] - p.lr * mn[i];
      continue;
    }
    mn[i] = p.beta1 * in[2][i] + (1 - p.beta1) * g;
    vn[i] = p.beta2 * in[3][i] + (1 - p.beta2) * g * g;
    const double mhat = mn[i] / (1 - std::pow(p.beta1, double(p.step)));
    const double vhat = vn[i] / (1 - std::pow(p.beta2, double(p.step)));
    pn[i] = in[0][i] - p.lr * mhat / (std::sqrt(vhat) + p.eps);
  }
  if (adam) return {pn, mn, vn};
  return {pn, mn};
}

// --- the cases ------------------------------------------------------------------------------------------

// Deterministic values (an LCG): the same cases on every machine.
class Draw {
 public:
  explicit Draw(uint32_t seed) : state_(seed * 2654435761u + 12345u) {}
  float next(float lo, float hi) {
    state_ = state_ * 1664525u + 1013904223u;
    return lo + (hi - lo) * float(state_ >> 8) / 16777216.0f;
  }
  std::vector<float> values(int64_t n, float lo = -1, float hi = 1) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = next(lo, hi);
    return v;
  }

 private:
  uint32_t state_;
};

ProbeInput input(Shape shape, std::vector<float> values, bool keepF32 = false) {
  return ProbeInput{std::move(shape), std::move(values), keepF32};
}

constexpr float kPad = std::numeric_limits<float>::quiet_NaN();

// `count` matrices at `stride` elements, each `rows` rows of `ld` elements whose columns past `cols`
// are NaN (a kernel that reads a row's padding gets NaN)
std::vector<float> padded(Draw& draw, int64_t count, int64_t stride, int64_t rows, int64_t cols, int64_t ld) {
  std::vector<float> v(std::size_t((count - 1) * stride + rows * ld), kPad);
  for (int64_t b = 0; b < count; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) v[std::size_t(b * stride + r * ld + c)] = draw.next(-1, 1);
  return v;
}

struct GemmShape {
  const char* label;
  int32_t ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  double alpha, beta;
  int64_t batch;     // 0: GEMM
  bool sharedB;      // batched: stride_b 0
};

ProbeCase gemmCase(const GemmShape& s, Draw& draw) {
  ProbeCase c;
  c.opKind = s.batch ? PEAT_OP_BATCHED_GEMM : PEAT_OP_GEMM;
  c.variant = PEAT_VARIANT_FORWARD;
  c.label = s.label;
  peat_params& p = c.params;
  p.trans_a = s.ta, p.trans_b = s.tb;
  p.m = s.m, p.n = s.n, p.k = s.k, p.lda = s.lda, p.ldb = s.ldb, p.ldc = s.ldc;
  p.alpha = s.alpha, p.beta = s.beta;
  const int64_t rowsA = s.ta ? s.k : s.m, colsA = s.ta ? s.m : s.k;
  const int64_t rowsB = s.tb ? s.n : s.k, colsB = s.tb ? s.k : s.n;
  if (s.batch) {
    p.batch = s.batch;
    p.stride_a = rowsA * s.lda;
    p.stride_b = s.sharedB ? 0 : rowsB * s.ldb;
    p.stride_c = s.m * s.ldc;
  }
  const int64_t batchA = s.batch ? s.batch : 1, batchB = s.batch && !s.sharedB ? s.batch : 1;
  auto shape = [](int64_t count, int64_t rows, int64_t ld) { return count > 1 ? Shape{count, rows, ld} : Shape{rows, ld}; };
  c.inputs.push_back(input(shape(batchA, rowsA, s.lda), padded(draw, batchA, rowsA * s.lda, rowsA, colsA, s.lda)));
  c.inputs.push_back(input(shape(batchB, rowsB, s.ldb), padded(draw, batchB, rowsB * s.ldb, rowsB, colsB, s.ldb)));
  if (s.beta != 0) {
    c.inputs.push_back(input(shape(batchA, s.m, s.ldc), padded(draw, batchA, s.m * s.ldc, s.m, s.n, s.ldc)));
    c.inputs.back().outputDtype = true;
  }
  c.outputShapes.push_back(shape(batchA, s.m, s.ldc));
  return c;
}

void addConvCases(std::vector<ProbeCase>& out, uint32_t variants, Draw& draw) {
  struct Geometry {
    const char* label;
    int64_t N, C, H, W, O, KH, KW, stride, pad, groups;
    bool bias;
  };
  const Geometry geometries[] = {
      {"2x4x5x6 by 4x2x3x3, stride 2, padding 1, groups 2", 2, 4, 5, 6, 4, 3, 3, 2, 1, 2, true},
      {"1x3x4x4 by 2x3x2x2", 1, 3, 4, 4, 2, 2, 2, 1, 0, 1, false},
  };
  for (const Geometry& g : geometries) {
    const int64_t OH = (g.H + 2 * g.pad - g.KH) / g.stride + 1, OW = (g.W + 2 * g.pad - g.KW) / g.stride + 1;
    const Shape x{g.N, g.C, g.H, g.W}, w{g.O, g.C / g.groups, g.KH, g.KW}, y{g.N, g.O, OH, OW};
    ProbeCase c;
    c.opKind = PEAT_OP_CONV2D;
    peat_params& p = c.params;
    p.stride_h = p.stride_w = g.stride;
    p.pad_h = p.pad_w = g.pad;
    p.dilation_h = p.dilation_w = 1;
    p.groups = g.groups;
    if (variants & PEAT_VARIANT_BIT(PEAT_VARIANT_FORWARD)) {
      ProbeCase f = c;
      f.variant = PEAT_VARIANT_FORWARD;
      f.label = std::string(g.label) + (g.bias ? ", bias" : "");
      f.inputs = {input(x, draw.values(elements(x))), input(w, draw.values(elements(w)))};
      if (g.bias) f.inputs.push_back(input({g.O}, draw.values(g.O)));
      f.outputShapes = {y};
      out.push_back(f);
    }
    if (variants & PEAT_VARIANT_BIT(PEAT_VARIANT_GRAD_INPUT)) {
      ProbeCase b = c;
      b.variant = PEAT_VARIANT_GRAD_INPUT;
      b.label = g.label;
      b.inputs = {input(y, draw.values(elements(y))), input(w, draw.values(elements(w)))};
      b.outputShapes = {x};
      out.push_back(b);
    }
    if (variants & PEAT_VARIANT_BIT(PEAT_VARIANT_GRAD_WEIGHT)) {
      ProbeCase b = c;
      b.variant = PEAT_VARIANT_GRAD_WEIGHT;
      b.label = g.label;
      b.inputs = {input(y, draw.values(elements(y))), input(x, draw.values(elements(x)))};
      b.outputShapes = {w};
      out.push_back(b);
    }
  }
}

void addSoftmaxCases(std::vector<ProbeCase>& out, uint32_t variants, Draw& draw) {
  const int64_t rows = 3, n = 7;
  for (int32_t log = 0; log <= 1; ++log) {
    ProbeCase c;
    c.opKind = PEAT_OP_SOFTMAX;
    c.params.log = log;
    const std::vector<float> x = draw.values(rows * n, -3, 3);
    if (variants & PEAT_VARIANT_BIT(PEAT_VARIANT_FORWARD)) {
      ProbeCase f = c;
      f.variant = PEAT_VARIANT_FORWARD;
      f.label = log ? "log-softmax, 3x7 rows" : "3x7 rows";
      f.inputs = {input({rows, n}, x)};
      f.outputShapes = {{rows, n}};
      out.push_back(f);
    }
    if (variants & PEAT_VARIANT_BIT(PEAT_VARIANT_GRAD_INPUT)) {
      // y: the forward's output of x, as the backward is given it
      std::vector<double> xd(x.begin(), x.end());
      const std::vector<double> yd = softmax(PEAT_VARIANT_FORWARD, c.params, {{rows, n}}, {xd})[0];
      ProbeCase b = c;
      b.variant = PEAT_VARIANT_GRAD_INPUT;
      b.label = log ? "log-softmax, 3x7 rows" : "3x7 rows";
      b.inputs = {input({rows, n}, draw.values(rows * n)), input({rows, n}, std::vector<float>(yd.begin(), yd.end()))};
      b.outputShapes = {{rows, n}};
      out.push_back(b);
    }
  }
}

void addLayerNormCases(std::vector<ProbeCase>& out, uint32_t variants, Draw& draw) {
  const int64_t rows = 3, n = 8;
  std::vector<float> x = draw.values(rows * n, -2, 2);
  for (float& v : x) v += 1.5f;  // a mean away from zero, for the subtraction to matter
  const std::vector<float> gamma = draw.values(n, 0.5f, 1.5f), beta = draw.values(n), dy = draw.values(rows * n);
  for (uint32_t v = PEAT_VARIANT_FORWARD; v <= PEAT_VARIANT_GRAD_BIAS; ++v) {
    if (!(variants & PEAT_VARIANT_BIT(v))) continue;
    ProbeCase c;
    c.opKind = PEAT_OP_LAYER_NORM;
    c.variant = v;
    c.label = "3x8 rows";
    c.params.eps = 1e-5;
    switch (v) {
      case PEAT_VARIANT_FORWARD: c.inputs = {input({rows, n}, x), input({n}, gamma), input({n}, beta)}; break;
      case PEAT_VARIANT_GRAD_INPUT: c.inputs = {input({rows, n}, dy), input({rows, n}, x), input({n}, gamma)}; break;
      case PEAT_VARIANT_GRAD_WEIGHT: c.inputs = {input({rows, n}, dy), input({rows, n}, x)}; break;
      default: c.inputs = {input({rows, n}, dy)}; break;
    }
    c.outputShapes = {v == PEAT_VARIANT_GRAD_WEIGHT || v == PEAT_VARIANT_GRAD_BIAS ? Shape{n} : Shape{rows, n}};
    out.push_back(c);
  }
}

void addAttentionCases(std::vector<ProbeCase>& out, uint32_t variants, uint32_t features, Draw& draw) {
  struct Shape4 {
    const char* label;
    int64_t B, Tq, Tk, D, Dv;
    int32_t causal, mask;
  };
  // Tk 18 and 20: more than one block of 16 keys, for kernels that tile over keys
  const Shape4 shapes[] = {
      {"2x5x5, D 4", 2, 5, 5, 4, 3, 0, 0},
      {"causal 5x18", 1, 5, 18, 4, 3, 1, 0},
      {"causal 2x6x6, mask", 2, 6, 6, 4, 3, 1, 1},
      {"3x20, mask", 1, 3, 20, 4, 5, 0, 1},
  };
  for (uint32_t v = PEAT_VARIANT_FORWARD; v <= PEAT_VARIANT_GRAD_INPUT; ++v) {
    if (!(variants & PEAT_VARIANT_BIT(v))) continue;
    for (const Shape4& s : shapes) {
      ProbeCase c;
      c.opKind = PEAT_OP_ATTENTION;
      c.variant = v;
      c.label = s.label;
      c.params.scale = 1 / std::sqrt(double(s.D));
      c.params.causal = s.causal;
      c.params.has_mask = s.mask;
      if (v == PEAT_VARIANT_GRAD_INPUT) c.inputs.push_back(input({s.B, s.Tq, s.Dv}, draw.values(s.B * s.Tq * s.Dv)));
      c.inputs.push_back(input({s.B, s.Tq, s.D}, draw.values(s.B * s.Tq * s.D, -1.5f, 1.5f)));
      c.inputs.push_back(input({s.B, s.Tk, s.D}, draw.values(s.B * s.Tk * s.D, -1.5f, 1.5f)));
      c.inputs.push_back(input({s.B, s.Tk, s.Dv}, draw.values(s.B * s.Tk * s.Dv)));
      if (s.mask) c.inputs.push_back(input({s.Tq, s.Tk}, draw.values(s.Tq * s.Tk), true));
      if (v == PEAT_VARIANT_FORWARD) c.outputShapes = {{s.B, s.Tq, s.Dv}};
      else c.outputShapes = {{s.B, s.Tq, s.D}, {s.B, s.Tk, s.D}, {s.B, s.Tk, s.Dv}};
      out.push_back(c);
      if (!(features & PEAT_FEATURE_ATTENTION_DROPOUT)) continue;
      // the same case with dropout p = 0.25 on the probabilities: keep is 0 or 4/3
      ProbeCase d = c;
      d.label = std::string(s.label) + ", dropout";
      d.params.has_dropout = 1;
      std::vector<float> keep = draw.values(s.B * s.Tq * s.Tk, 0, 1);
      for (float& x : keep) x = x < 0.25f ? 0.0f : 4.0f / 3.0f;
      d.inputs.push_back(input({s.B, s.Tq, s.Tk}, keep, true));
      out.push_back(d);
    }
  }
}

void addActivationCases(std::vector<ProbeCase>& out, uint32_t variants, Draw& draw) {
  const char* names[] = {"", "relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid"};
  const int64_t rows = 4, n = 6;
  for (int32_t kind = PEAT_ACTIVATION_RELU; kind <= PEAT_ACTIVATION_SIGMOID; ++kind) {
    std::vector<float> x = draw.values(rows * n, -3, 3);
    for (float& v : x)
      if (std::fabs(v) < 1e-3f) v = 0.25f;  // no ReLU at its kink
    ProbeCase c;
    c.opKind = PEAT_OP_ACTIVATION;
    c.params.activation = kind;
    c.label = std::string(names[kind]) + ", 4x6";
    if (variants & PEAT_VARIANT_BIT(PEAT_VARIANT_FORWARD)) {
      ProbeCase f = c;
      f.variant = PEAT_VARIANT_FORWARD;
      f.inputs = {input({rows, n}, x)};
      f.outputShapes = {{rows, n}};
      out.push_back(f);
    }
    if (variants & PEAT_VARIANT_BIT(PEAT_VARIANT_GRAD_INPUT)) {
      // the second input: x for GELU, GELU_TANH and SILU, the forward's y for the others
      std::vector<float> s = x;
      if (kind == PEAT_ACTIVATION_RELU || kind == PEAT_ACTIVATION_TANH || kind == PEAT_ACTIVATION_SIGMOID)
        for (float& v : s) v = float(activationForward(kind, v));
      ProbeCase b = c;
      b.variant = PEAT_VARIANT_GRAD_INPUT;
      b.inputs = {input({rows, n}, draw.values(rows * n)), input({rows, n}, s)};
      b.outputShapes = {{rows, n}};
      out.push_back(b);
    }
  }
}

void addOptimizerCases(std::vector<ProbeCase>& out, uint32_t variants, Draw& draw) {
  if (!(variants & PEAT_VARIANT_BIT(PEAT_VARIANT_UPDATE))) return;
  const int64_t n = 12;
  ProbeCase sgd;
  sgd.opKind = PEAT_OP_OPTIMIZER;
  sgd.variant = PEAT_VARIANT_UPDATE;
  sgd.label = "sgd, momentum 0.9, 12 elements";
  sgd.params.optimizer = PEAT_OPTIMIZER_SGD;
  sgd.params.lr = 0.1;
  sgd.params.momentum = 0.9;
  sgd.inputs = {input({n}, draw.values(n)), input({n}, draw.values(n)), input({n}, draw.values(n, -0.5f, 0.5f))};
  sgd.outputShapes = {{n}, {n}};
  out.push_back(sgd);
  // a large learning rate, so that the step shows against p
  ProbeCase adam;
  adam.opKind = PEAT_OP_OPTIMIZER;
  adam.variant = PEAT_VARIANT_UPDATE;
  adam.label = "adam, step 3, 12 elements";
  peat_params& p = adam.params;
  p.optimizer = PEAT_OPTIMIZER_ADAM;
  p.lr = 0.05;
  p.beta1 = 0.9;
  p.beta2 = 0.999;
  p.eps = 1e-8;
  p.step = 3;
  adam.inputs = {input({n}, draw.values(n)), input({n}, draw.values(n)), input({n}, draw.values(n, -0.2f, 0.2f)),
                 input({n}, draw.values(n, 0.001f, 0.05f))};
  adam.outputShapes = {{n}, {n}, {n}};
  out.push_back(adam);
}

}  // namespace

std::vector<ProbeCase> probeCases(uint32_t opKind, uint32_t variants, uint32_t features) {
  std::vector<ProbeCase> out;
  Draw draw(opKind);
  switch (opKind) {
    case PEAT_OP_GEMM:
      if (!(variants & PEAT_VARIANT_BIT(PEAT_VARIANT_FORWARD))) break;
      // the four transpose combinations; a padded lda, ldb and ldc; alpha and beta with C0; K-blocks
      for (const GemmShape& s : {GemmShape{"5x6x7", 0, 0, 5, 6, 7, 7, 6, 6, 1, 0, 0, false},
                                 GemmShape{"A^T 5x4x6, lda 9, alpha 0.5, beta 2", 1, 0, 5, 4, 6, 9, 4, 4, 0.5, 2, 0, false},
                                 GemmShape{"B^T 3x5x40, ldc 8", 0, 1, 3, 5, 40, 40, 41, 8, 1, 0, 0, false},
                                 GemmShape{"A^T B^T 4x3x5, alpha 0.5", 1, 1, 4, 3, 5, 4, 5, 3, 0.5, 0, 0, false}})
        out.push_back(gemmCase(s, draw));
      break;
    case PEAT_OP_BATCHED_GEMM:
      if (!(variants & PEAT_VARIANT_BIT(PEAT_VARIANT_FORWARD))) break;
      for (const GemmShape& s : {GemmShape{"3 of 4x5x6, shared B", 0, 0, 4, 5, 6, 6, 5, 5, 1, 0, 3, true},
                                 GemmShape{"3 of A^T 3x4x5, alpha 0.5, beta 2", 1, 0, 3, 4, 5, 3, 4, 4, 0.5, 2, 3, false}})
        out.push_back(gemmCase(s, draw));
      break;
    case PEAT_OP_CONV2D: addConvCases(out, variants, draw); break;
    case PEAT_OP_SOFTMAX: addSoftmaxCases(out, variants, draw); break;
    case PEAT_OP_LAYER_NORM: addLayerNormCases(out, variants, draw); break;
    case PEAT_OP_ATTENTION: addAttentionCases(out, variants, features, draw); break;
    case PEAT_OP_ACTIVATION: addActivationCases(out, variants, draw); break;
    case PEAT_OP_OPTIMIZER: addOptimizerCases(out, variants, draw); break;
    default: break;
  }
  return out;
}

std::vector<std::vector<double>> referenceOutputs(uint32_t opKind, uint32_t variant, const peat_params& p,
                                                  const std::vector<std::vector<int64_t>>& inputShapes,
                                                  const std::vector<std::vector<double>>& inputs,
                                                  const std::vector<std::vector<int64_t>>& outputShapes) {
  need(inputShapes.size() == inputs.size() && !inputs.empty(), "one shape per input");
  for (std::size_t i = 0; i < inputs.size(); ++i)
    need(elements(inputShapes[i]) == int64_t(inputs[i].size()), "an input's values do not fill its shape");
  std::vector<Values> out;
  switch (opKind) {
    case PEAT_OP_GEMM:
    case PEAT_OP_BATCHED_GEMM:
      need(variant == PEAT_VARIANT_FORWARD, "gemm: forward only");
      out = gemm(opKind == PEAT_OP_BATCHED_GEMM, p, inputShapes, inputs, outputShapes);
      break;
    case PEAT_OP_CONV2D: out = conv2d(variant, p, inputShapes, inputs, outputShapes); break;
    case PEAT_OP_SOFTMAX: out = softmax(variant, p, inputShapes, inputs); break;
    case PEAT_OP_LAYER_NORM: out = layerNorm(variant, p, inputShapes, inputs); break;
    case PEAT_OP_ATTENTION: out = attention(variant, p, inputShapes, inputs, outputShapes); break;
    case PEAT_OP_ACTIVATION: out = activation(variant, p, inputs); break;
    case PEAT_OP_OPTIMIZER: out = optimizer(variant, p, inputs); break;
    default: throw std::invalid_argument("an unknown op kind");
  }
  need(out.size() == outputShapes.size(), "the number of outputs");
  for (std::size_t i = 0; i < out.size(); ++i)
    need(int64_t(out[i].size()) == elements(outputShapes[i]), "an output's shape does not fit the call");
  return out;
}

}  // namespace peat::plugin
