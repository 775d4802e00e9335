// SPDX-License-Identifier: MIT
#include "core/detector/op_replay.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>

#include "core/fp/format.h"

namespace peat::detector {

namespace {

constexpr double kU32 = 5.9604644775390625e-08;  // fp32's unit roundoff, 2^-24
// A formula "fits" a candidate when the candidate is that formula to within 64 fp32 roundings of
// the op's scale (the fp32 kernels' own error, with room for their order), and it fits "clearly
// better" than another when its misfit is at least 8 times smaller.
constexpr double kFit = 64 * kU32;
constexpr double kBetter = 8;

double realParam(const OpOperands& c, const std::string& name, double fallback) {
  auto it = c.params.find(name + "_f64");
  if (it == c.params.end()) return fallback;
  double v = 0;
  std::memcpy(&v, &it->second, sizeof v);
  return v;
}

int64_t intParam(const OpOperands& c, const std::string& name, int64_t fallback) {
  auto it = c.params.find(name);
  return it == c.params.end() ? fallback : it->second;
}

// max_i |c_i - h_i| / (|h_i| + s_i); infinite where c is not finite and h is.
double misfit(const float* c, const std::vector<double>& h, const std::vector<double>& s) {
  double worst = 0;
  for (std::size_t i = 0; i < h.size(); ++i) {
    if (!std::isfinite(h[i])) continue;
    if (!std::isfinite(c[i])) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::fabs(double(c[i]) - h[i]) / (std::fabs(h[i]) + s[i] + 1e-300));
  }
  return worst;
}

double roundBf16(double v) {  // fp32, then round to nearest even on bf16's 8 bits
  float f = float(v);
  uint32_t b = 0;
  std::memcpy(&b, &f, 4);
  if ((b & 0x7f800000u) == 0x7f800000u) return f;
  b += 0x7fffu + ((b >> 16) & 1u);
  b &= 0xffff0000u;
  std::memcpy(&f, &b, 4);
  return f;
}

std::string number(double v) {
  std::ostringstream out;
  out.precision(3);
  out << v;
  return out.str();
}

// One formula a candidate may follow.
struct Hypothesis {
  std::string name;        // what it is, for the verdict's parameters
  std::string model;       // the verdict it gives: a legitimate reading or a fault
  std::string explanation;
  std::vector<double> values;
  std::string format;  // a precision_loss reading's format ("bf16"), for the verdict's parameters
  double factor = 0;   // a scale hypothesis' factor (attention), for the verdict's parameters
  // judged by its misfits' 99th percentile (as Replay::robust), for a format's hypothesis whose output
  // is stored in 16 bits: where fp32's value sits at a rounding midpoint the kernel may round the other way
  bool robust = false;
  // the largest misfit any element may have when the 99th percentile judges it (0: no limit): two steps
  // of the 16-bit output, so that a fault in a few elements of such a port is not read as its rounding
  double maxMisfit = 0;
};

double stepsOf16(bool bf16) { return std::ldexp(1.0, bf16 ? -6 : -9); }  // two steps, relative

struct Replay {
  std::vector<double> reference, scale;  // the exact op and its per-element scale
  std::vector<Hypothesis> alternatives;
  // The candidate's misfits as their 99th percentile, not their maximum: for kernels whose own
  // rounding of the inputs (bf16 q, k, v) is amplified where a gradient cancels (a row of dq whose
  // two scores' gradients sum to zero), so that a few elements would hide which formula it follows.
  bool robust = false;
};

double misfitQuantile(const float* c, const std::vector<double>& h, const std::vector<double>& s, double q) {
  std::vector<double> e;
  e.reserve(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) {
    if (!std::isfinite(h[i])) continue;
    if (!std::isfinite(c[i])) return std::numeric_limits<double>::infinity();
    e.push_back(std::fabs(double(c[i]) - h[i]) / (std::fabs(h[i]) + s[i] + 1e-300));
  }
  if (e.empty()) return 0;
  const auto at = e.begin() + std::ptrdiff_t(double(e.size() - 1) * q);
  std::nth_element(e.begin(), at, e.end());
  return *at;
}

double roundTo16(double v, bool bf16);

// Layer norm forward over rows of n: x[, gamma][, beta]; the reference in double, the bugs' formulas,
// and the 16-bit ports: x, gamma and beta rounded to bf16 or fp16 (or not), the statistics in fp32 or
// wider, the output stored in bf16 or fp16 (or not), as a kernel declaring those dtypes computes it.
std::optional<Replay> layerNorm(const OpOperands& c, uint64_t count) {
  if (c.inputs.empty() || c.inputs[0].size() != count) return std::nullopt;
  const std::vector<uint64_t>& sx = c.shapes[0];
  const int64_t nd = intParam(c, "normalized", 1);
  if (nd < 1 || nd > int64_t(sx.size())) return std::nullopt;
  uint64_t n = 1;
  for (int64_t i = int64_t(sx.size()) - nd; i < int64_t(sx.size()); ++i) n *= sx[std::size_t(i)];
  if (n < 2 || count % n) return std::nullopt;
  const bool weight = intParam(c, "weight", 1) != 0, bias = intParam(c, "bias", 1) != 0;
  const std::vector<float>* gamma = weight && c.inputs.size() > 1 ? &c.inputs[1] : nullptr;
  const std::vector<float>* beta = bias && c.inputs.size() > (weight ? 2u : 1u) ? &c.inputs[weight ? 2 : 1] : nullptr;
  if ((gamma && gamma->size() != n) || (beta && beta->size() != n)) return std::nullopt;
  const double eps = realParam(c, "eps", 1e-5);
  Replay r;
  r.reference.resize(count);
  r.scale.resize(count);
  std::vector<double> bessel(count), outside(count), rms(count);
  const float* x = c.inputs[0].data();
  for (uint64_t row = 0; row < count / n; ++row) {
    const float* xr = x + row * n;
    double mean = 0, sq = 0;
    for (uint64_t j = 0; j < n; ++j) {
      mean += xr[j];
      sq += double(xr[j]) * xr[j];
    }
    mean /= double(n);
    double var = 0;
    for (uint64_t j = 0; j < n; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    const double biased = var / double(n), unbiased = var / double(n - 1), meanSquare = sq / double(n);
    double rowScale = 0;
    for (uint64_t j = 0; j < n; ++j) {
      const double g = gamma ? (*gamma)[j] : 1.0, b = beta ? (*beta)[j] : 0.0;
      const uint64_t i = row * n + j;
      r.reference[i] = (xr[j] - mean) / std::sqrt(biased + eps) * g + b;
      bessel[i] = (xr[j] - mean) / std::sqrt(unbiased + eps) * g + b;
      outside[i] = (xr[j] - mean) / (std::sqrt(biased) + eps) * g + b;
      rms[i] = xr[j] / std::sqrt(meanSquare + eps) * g + b;
      rowScale = std::max(rowScale, std::fabs(r.reference[i]));
    }
    for (uint64_t j = 0; j < n; ++j) r.scale[row * n + j] = rowScale;
  }
  // the ports: {input format, output format}, -1 as recorded / not stored narrower, 0 bf16, 1 fp16
  static const int kPorts[][2] = {{0, 0}, {1, 1}, {1, 0}, {0, 1}, {-1, 0}, {-1, 1}, {0, -1}, {1, -1}};
  static const char* kName[] = {"bf16", "fp16"};
  std::vector<Hypothesis> ports;
  std::vector<double> xr(n);
  for (const auto& port : kPorts) {
    const int in = port[0], out = port[1];
    auto rd = [](double v, int f) { return f < 0 ? v : roundTo16(v, f == 0); };
    std::vector<double> h(count);
    for (uint64_t row = 0; row < count / n; ++row) {
      double mean = 0;
      for (uint64_t j = 0; j < n; ++j) mean += (xr[j] = rd(x[row * n + j], in));
      mean /= double(n);
      double var = 0;
      for (uint64_t j = 0; j < n; ++j) var += (xr[j] - mean) * (xr[j] - mean);
      const double inv = 1 / std::sqrt(var / double(n) + eps);
      for (uint64_t j = 0; j < n; ++j) {
        const double g = gamma ? rd((*gamma)[j], in) : 1.0, b = beta ? rd((*beta)[j], in) : 0.0;
        h[row * n + j] = rd((xr[j] - mean) * inv * g + b, out);
      }
    }
    const std::string inName = in < 0 ? "f32" : kName[in], outName = out < 0 ? "f32" : kName[out];
    Hypothesis p{"layer norm, " + inName + " in, " + outName + " out", "precision_loss",
                 (in < 0 ? std::string("computed from the fp32 input")
                         : "x, gamma and beta rounded to " + inName + ", the statistics in fp32") +
                     (out < 0 ? std::string(", the output in fp32") : ", the output stored in " + outName) +
                     ": a " + (in < 0 ? outName : inName) + " kernel",
                 std::move(h), in < 0 ? outName : inName};
    p.robust = out >= 0;
    if (out >= 0) p.maxMisfit = stepsOf16(out == 0);
    ports.push_back(std::move(p));
  }
  r.alternatives = {
      {"variance with Bessel's correction (N-1)", "scaling",
       "every row is the layer norm with its variance divided by N-1 instead of N: a per-row factor sqrt(N/(N-1))",
       std::move(bessel), ""},
      {"epsilon outside the square root", "scaling",
       "every row is (x - mean) / (sqrt(var) + eps) instead of / sqrt(var + eps): a per-row factor, large where the "
       "variance is small next to eps",
       std::move(outside), ""},
      {"no mean subtraction (RMSNorm's formula)", "scaling",
       "every row is x / sqrt(mean(x^2) + eps): RMSNorm's formula where the reference is layer norm (a per-row affine "
       "error: the mean was never subtracted)",
       std::move(rms), ""}};
  for (Hypothesis& p : ports) r.alternatives.push_back(std::move(p));
  return r;
}

double geluExact(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double geluTanh(double x) {
  const double k = std::sqrt(2 / M_PI);
  return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double geluExactGrad(double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI); }
double geluTanhGrad(double x) {
  const double k = std::sqrt(2 / M_PI), inner = k * (x + 0.044715 * x * x * x), t = std::tanh(inner);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}

// GELU forward (x) or grad_input (dy, x), in the call's form; the other form is the legitimate port.
std::optional<Replay> gelu(const OpOperands& c, uint64_t count) {
  const bool grad = c.variant == 1;
  const std::size_t xi = grad ? 1 : 0;
  if (c.inputs.size() <= xi || c.inputs[xi].size() != count || (grad && c.inputs[0].size() != count)) return std::nullopt;
  const bool tanhCall = intParam(c, "approximate", 0) != 0;
  Replay r;
  r.reference.resize(count);
  r.scale.resize(count);
  std::vector<double> other(count);
  for (uint64_t i = 0; i < count; ++i) {
    const double x = c.inputs[xi][i], dy = grad ? c.inputs[0][i] : 1.0;
    const double exact = grad ? dy * geluExactGrad(x) : geluExact(x), approx = grad ? dy * geluTanhGrad(x) : geluTanh(x);
    r.reference[i] = tanhCall ? approx : exact;
    other[i] = tanhCall ? exact : approx;
    r.scale[i] = grad ? std::fabs(dy) * (1 + std::fabs(x)) : std::fabs(x);  // the fp32 kernels' error scale
  }
  r.alternatives = {{tanhCall ? "GELU by erf (the exact form)" : "GELU by its tanh approximation", "precision_loss",
                     std::string("the candidate is GELU's ") + (tanhCall ? "exact (erf) form" : "tanh approximation") +
                         " to fp32 precision, where the call asked for the other: the approximation's own error, "
                         "legitimate",
                     std::move(other), ""}};
  return r;
}

// Adam's update (p, g, m, v) -> [p', m', v'].
std::optional<Replay> adam(const OpOperands& c, uint64_t count) {
  if (c.inputs.size() < 4) return std::nullopt;
  const uint64_t n = c.inputs[0].size();
  if (count != 3 * n) return std::nullopt;
  for (int k = 1; k < 4; ++k)
    if (c.inputs[std::size_t(k)].size() != n) return std::nullopt;
  const double lr = realParam(c, "lr", NAN), b1 = realParam(c, "beta1", NAN), b2 = realParam(c, "beta2", NAN),
               eps = realParam(c, "eps", NAN), step = double(intParam(c, "step", 0));
  if (!std::isfinite(lr) || !std::isfinite(b1) || !std::isfinite(b2) || !std::isfinite(eps) || step < 1)
    return std::nullopt;
  const double c1 = 1 - std::pow(b1, step), c2 = 1 - std::pow(b2, step);
  Replay r;
  r.reference.resize(count);
  r.scale.resize(count);
  std::vector<double> inside(count), bf16(count);
  for (uint64_t i = 0; i < n; ++i) {
    const double p = c.inputs[0][i], g = c.inputs[1][i], m = c.inputs[2][i], v = c.inputs[3][i];
    const double m2 = b1 * m + (1 - b1) * g, v2 = b2 * v + (1 - b2) * g * g;
    const double mb = roundBf16(m2), vb = roundBf16(v2);
    r.reference[i] = p - lr * (m2 / c1) / (std::sqrt(v2 / c2) + eps);
    inside[i] = p - lr * (m2 / c1) / std::sqrt(v2 / c2 + eps);
    bf16[i] = p - lr * (mb / c1) / (std::sqrt(vb / c2) + eps);
    r.reference[n + i] = inside[n + i] = m2;
    r.reference[2 * n + i] = inside[2 * n + i] = v2;
    bf16[n + i] = mb;
    bf16[2 * n + i] = vb;
    r.scale[i] = std::fabs(p) + lr;
    r.scale[n + i] = std::fabs(m2) + std::fabs(g);
    r.scale[2 * n + i] = std::fabs(v2) + g * g;
  }
  r.alternatives = {
      {"epsilon inside the square root", "accumulation_order",
       "the update divides by sqrt(v_hat + eps) instead of sqrt(v_hat) + eps, to fp32 precision: a legitimate "
       "formulation of Adam that differs only where v_hat is near eps",
       std::move(inside), ""},
      {"moments stored in bf16", "precision_loss",
       "the new moments are the exact ones rounded to bf16, and the parameter moves by the step they give: "
       "reduced-precision optimiser state, legitimate",
       std::move(bf16), ""}};
  return r;
}

// Dropout forward (x, mask) or grad_input (dy, mask): the output is x times a mask of 0 and 1/(1-p).
std::optional<Verdict> dropout(const float* candidate, uint64_t count, const OpOperands& c) {
  if (c.inputs.size() < 2 || c.inputs[0].size() != count || c.inputs[1].size() != count) return std::nullopt;
  const std::vector<float>& x = c.inputs[0];
  const std::vector<float>& mask = c.inputs[1];
  double keep = 0;
  for (float m : mask) keep = std::max(keep, double(m));
  if (!(keep > 0)) return std::nullopt;
  uint64_t seen = 0, differ = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (x[i] == 0) continue;
    ++seen;
    if (!std::isfinite(candidate[i])) return std::nullopt;
    const double ratio = double(candidate[i]) / double(x[i]);
    const bool zero = std::fabs(ratio) <= kFit, kept = std::fabs(ratio - keep) <= kFit * keep;
    if (!zero && !kept) return std::nullopt;  // not x times some 0 / 1/(1-p) mask
    if ((kept ? keep : 0.0) != double(mask[i])) ++differ;
  }
  if (differ == 0 || seen == 0) return std::nullopt;
  Verdict v;
  v.model = "index_error";
  v.confidence = 0.85;
  v.parameters["formula"] = "another dropout mask";
  v.evidence["elements_with_another_mask"] = double(differ);
  v.evidence["fraction"] = double(differ) / double(seen);
  v.explanation = "replayed from the recorded mask: the output is the input times a mask of 0 and 1/(1-p), but not the "
                  "call's mask (" + std::to_string(differ) + " of " + std::to_string(seen) +
                  " elements differ): a stale or reused mask";
  return v;
}

double roundTo16(double v, bool bf16) {  // fp32, then to nearest even on bf16 or fp16 (fp16 overflows to inf)
  return fp::roundTo(bf16 ? fp::kBf16 : fp::kFp16, float(v));
}

// Softmax's rows over the call's "dim" (of the first input's shape): element (o, j, i) of the
// [outer, n, inner] view is at (o n + j) inner + i; none when the shape does not give `count`.
struct SoftmaxRows {
  uint64_t n = 0, inner = 1, outer = 0;
};
std::optional<SoftmaxRows> softmaxRows(const OpOperands& c, uint64_t count) {
  const std::vector<uint64_t>& shape = c.shapes[0];
  int64_t d = intParam(c, "dim", -1);
  if (d < 0) d += int64_t(shape.size());
  if (d < 0 || d >= int64_t(shape.size())) return std::nullopt;
  SoftmaxRows r;
  r.n = shape[std::size_t(d)];
  for (std::size_t i = std::size_t(d) + 1; i < shape.size(); ++i) r.inner *= shape[i];
  if (r.n < 2 || r.inner == 0 || count % (r.n * r.inner)) return std::nullopt;
  r.outer = count / (r.n * r.inner);
  return r;
}

// Softmax and log-softmax forward over "dim": the reference in double from the recorded input, and
// the 16-bit kernels' formulas: input and output in bf16 or fp16 (the sums in fp32), or only the
// output stored in it. A candidate that follows one is precision_loss with that format. Kernels that
// compute in fp32 another way (a fast exp, one pass) fit none and keep the detector's verdict.
std::optional<Replay> softmax(const OpOperands& c, uint64_t count) {
  if (c.inputs.empty() || c.inputs[0].size() != count || c.shapes[0].empty()) return std::nullopt;
  const std::optional<SoftmaxRows> rows = softmaxRows(c, count);
  if (!rows) return std::nullopt;
  const uint64_t n = rows->n, inner = rows->inner, outer = rows->outer;
  const bool log = c.op == "log_softmax";
  const float* x = c.inputs[0].data();
  Replay r;
  r.robust = true;  // a 16-bit output may round the other way where fp32's sum sits at a midpoint
  r.reference.resize(count);
  r.scale.resize(count);
  // hypotheses: 0 bf16 in+out, 1 fp16 in+out, 2 bf16 out, 3 fp16 out
  std::vector<std::vector<double>> h(4, std::vector<double>(count));
  std::vector<double> row(n);
  auto rowSoftmax = [&](uint64_t o, uint64_t i, int roundInput, double* out) {
    double mx = -std::numeric_limits<double>::infinity();
    for (uint64_t j = 0; j < n; ++j) {
      const double v = x[(o * n + j) * inner + i];
      row[j] = roundInput < 0 ? v : roundTo16(v, roundInput == 0);
      mx = std::max(mx, row[j]);
    }
    double sum = 0;
    for (uint64_t j = 0; j < n; ++j) sum += std::exp(row[j] - mx);
    for (uint64_t j = 0; j < n; ++j) out[j] = log ? row[j] - mx - std::log(sum) : std::exp(row[j] - mx) / sum;
  };
  std::vector<double> tmp(n);
  for (uint64_t o = 0; o < outer; ++o)
    for (uint64_t i = 0; i < inner; ++i) {
      rowSoftmax(o, i, -1, tmp.data());
      double rowScale = 0;
      for (uint64_t j = 0; j < n; ++j) rowScale = std::max(rowScale, std::fabs(tmp[j]));
      for (uint64_t j = 0; j < n; ++j) {
        const uint64_t at = (o * n + j) * inner + i;
        r.reference[at] = tmp[j];
        r.scale[at] = rowScale;
        h[2][at] = roundTo16(tmp[j], true);
        h[3][at] = roundTo16(tmp[j], false);
      }
      for (int f = 0; f < 2; ++f) {
        rowSoftmax(o, i, f, tmp.data());
        for (uint64_t j = 0; j < n; ++j) h[std::size_t(f)][(o * n + j) * inner + i] = roundTo16(tmp[j], f == 0);
      }
    }
  const std::string what = log ? "log-softmax" : "softmax";
  r.alternatives = {
      {what + " with its input and output in bf16", "precision_loss",
       "the input rounded to bf16, the sums in fp32, the output stored in bf16: a bf16 kernel", std::move(h[0]), "bf16"},
      {what + " with its input and output in fp16", "precision_loss",
       "the input rounded to fp16, the sums in fp32, the output stored in fp16: an fp16 kernel", std::move(h[1]), "fp16"},
      {what + " with its output in bf16", "precision_loss", "computed from the fp32 input, the output stored in bf16",
       std::move(h[2]), "bf16"},
      {what + " with its output in fp16", "precision_loss", "computed from the fp32 input, the output stored in fp16",
       std::move(h[3]), "fp16"}};
  for (Hypothesis& p : r.alternatives) p.maxMisfit = stepsOf16(p.format == "bf16");
  return r;
}

// Softmax and log-softmax backward over "dim" from (dy, y), as ATen keeps them: dx = y (dy - sum(dy y))
// and dx = dy - exp(y) sum(dy). The hypotheses: dy and y rounded to bf16 or fp16 and dx stored in it.
std::optional<Replay> softmaxBackward(const OpOperands& c, uint64_t count) {
  if (c.inputs.size() < 2 || c.inputs[0].size() != count || c.inputs[1].size() != count || c.shapes[0].empty())
    return std::nullopt;
  const std::optional<SoftmaxRows> rows = softmaxRows(c, count);
  if (!rows) return std::nullopt;
  const uint64_t n = rows->n, inner = rows->inner, outer = rows->outer;
  const bool log = c.op == "log_softmax";
  const float *dy = c.inputs[0].data(), *y = c.inputs[1].data();
  Replay r;
  r.robust = true;
  r.reference.resize(count);
  r.scale.resize(count);
  std::vector<std::vector<double>> h(2, std::vector<double>(count));  // bf16, fp16
  auto rowGrad = [&](uint64_t o, uint64_t i, int format, std::vector<double>& out) {
    auto in = [&](const float* t, uint64_t j) {
      const double v = t[(o * n + j) * inner + i];
      return format < 0 ? v : roundTo16(v, format == 0);
    };
    double sum = 0;
    for (uint64_t j = 0; j < n; ++j) sum += log ? in(dy, j) : in(dy, j) * in(y, j);
    for (uint64_t j = 0; j < n; ++j) {
      const double g = log ? in(dy, j) - std::exp(in(y, j)) * sum : in(y, j) * (in(dy, j) - sum);
      out[j] = format < 0 ? g : roundTo16(g, format == 0);
    }
  };
  std::vector<double> tmp(n);
  for (uint64_t o = 0; o < outer; ++o)
    for (uint64_t i = 0; i < inner; ++i) {
      rowGrad(o, i, -1, tmp);
      double rowScale = 0;
      for (uint64_t j = 0; j < n; ++j) rowScale = std::max(rowScale, std::fabs(tmp[j]));
      for (uint64_t j = 0; j < n; ++j) {
        r.reference[(o * n + j) * inner + i] = tmp[j];
        r.scale[(o * n + j) * inner + i] = rowScale;
      }
      for (int f = 0; f < 2; ++f) {
        rowGrad(o, i, f, tmp);
        for (uint64_t j = 0; j < n; ++j) h[std::size_t(f)][(o * n + j) * inner + i] = tmp[j];
      }
    }
  const std::string what = log ? "log-softmax's gradient" : "softmax's gradient";
  r.alternatives = {
      {what + " in bf16", "precision_loss", "dy and y rounded to bf16, the sums in fp32, dx stored in bf16",
       std::move(h[0]), "bf16"},
      {what + " in fp16", "precision_loss", "dy and y rounded to fp16, the sums in fp32, dx stored in fp16",
       std::move(h[1]), "fp16"}};
  return r;
}

// Attention forward and its gradients: q [.., Tq, D], k [.., Tk, D], v [.., Tk, Dv][, mask]. The
// reference is the exact op in double. The hypotheses: the causal limit moved by one key either way (a
// mask off by one; causal calls only: the call's "causal" flag or a recorded mask that is exactly the
// causal one), the softmax scale times a factor other than 1 (the call's scale_f64 missed, applied
// twice, 1/d for 1/sqrt(d), ...), and the legitimate ports' formats: q, k, v (and dO) rounded to bf16
// or fp16, with the probabilities rounded to that format before they multiply V as FlashAttention's
// kernels do, or not. Attention ports round their probabilities, so a hypothesis fits within
// kLooseFit of the output's row scale, where an off-by-one limit or a wrong scale is wrong by a large
// part of it.
constexpr double kLooseFit = 1.0 / 64;

std::optional<Replay> attention(const OpOperands& c, uint64_t count) {
  const bool grad = c.variant == 1;
  const std::size_t base = grad ? 1 : 0;
  if (c.inputs.size() < base + 3) return std::nullopt;
  const auto& sq = c.shapes[base];
  const auto& sk = c.shapes[base + 1];
  const auto& sv = c.shapes[base + 2];
  if (sq.size() < 2 || sk.size() < 2 || sv.size() < 2) return std::nullopt;
  const uint64_t tq = sq[sq.size() - 2], d = sq.back(), tk = sk[sk.size() - 2], dv = sv.back();
  if (tq == 0 || tk == 0 || d == 0 || dv == 0 || sk.back() != d || sv[sv.size() - 2] != tk) return std::nullopt;
  const std::vector<float>&q = c.inputs[base], &k = c.inputs[base + 1], &v = c.inputs[base + 2];
  const uint64_t b = q.size() / (tq * d);
  if (b * tq * d != q.size() || k.size() != b * tk * d || v.size() != b * tk * dv) return std::nullopt;
  const int64_t wrt = grad ? intParam(c, "wrt", 0) : -1;
  if (grad && (wrt < 0 || wrt > 2 || c.inputs[0].size() != b * tq * dv)) return std::nullopt;
  const uint64_t width = !grad ? dv : wrt == 2 ? dv : d;
  const uint64_t rowsPerBatch = !grad || wrt == 0 ? tq : tk;
  if (count != b * rowsPerBatch * width) return std::nullopt;  // broadcast batch dimensions: not replayed
  bool causal = intParam(c, "causal", 0) != 0;
  const std::vector<float>* mask = intParam(c, "mask", 0) && c.inputs.size() > base + 3 ? &c.inputs[base + 3] : nullptr;
  if (mask) {  // one [Tq, Tk] mask (or [1, .., Tq, Tk]); a mask per batch entry is not replayed
    const std::vector<uint64_t>& ms = c.shapes[base + 3];
    if (mask->size() != tq * tk || ms.size() < 2 || ms[ms.size() - 2] != tq || ms.back() != tk) return std::nullopt;
  }
  const std::size_t keepAt = base + 3 + (intParam(c, "mask", 0) ? 1 : 0);
  const std::vector<float>* keep = intParam(c, "dropout", 0) && c.inputs.size() > keepAt ? &c.inputs[keepAt] : nullptr;
  if (intParam(c, "dropout", 0) && (!keep || keep->size() != b * tq * tk)) return std::nullopt;
  const int64_t offset = int64_t(tk) - int64_t(tq);
  if (mask && !causal) {
    bool isCausal = true;
    for (uint64_t i = 0; i < tq && isCausal; ++i)
      for (uint64_t j = 0; j < tk && isCausal; ++j) {
        const float m = (*mask)[i * tk + j];
        isCausal = int64_t(j) <= int64_t(i) + offset ? m == 0.0f : (std::isinf(m) && m < 0);
      }
    if (isCausal) causal = true, mask = nullptr;
  }
  const double scale = realParam(c, "scale", 1.0);
  // The inputs rounded to a format (bf16, fp16), for the ports' hypotheses.
  auto rounded = [&](const fp::Format* f, const std::vector<float>& x) {
    std::vector<float> out(x);
    if (f) fp::roundInPlace(*f, out.data(), out.size());
    return out;
  };
  // The op's output in double with the causal limit moved by `shift` keys, the scale times `factor`,
  // the inputs rounded to `format` (null: as recorded) and the probabilities rounded to it before
  // they multiply V (and dO, for dv) when `roundP`.
  auto compute = [&](int64_t shift, double factor, const fp::Format* format, bool roundP) {
    const std::vector<float> qf = rounded(format, q), kf = rounded(format, k), vf = rounded(format, v);
    const std::vector<float> dOf = grad ? rounded(format, c.inputs[0]) : std::vector<float>();
    const double sc = scale * factor;
    auto pRound = [&](double x) { return roundP && format ? double(fp::roundTo(*format, float(x))) : x; };
    std::vector<double> out(count, 0.0), p(tq * tk), ds(tq * tk);
    for (uint64_t batch = 0; batch < b; ++batch) {
      const float *qb = qf.data() + batch * tq * d, *kb = kf.data() + batch * tk * d, *vb = vf.data() + batch * tk * dv;
      for (uint64_t i = 0; i < tq; ++i) {
        const int64_t limit =
            causal ? std::clamp<int64_t>(int64_t(i) + offset + shift, 0, int64_t(tk) - 1) : int64_t(tk) - 1;
        double mx = -std::numeric_limits<double>::infinity();
        double* pr = &p[i * tk];
        for (uint64_t j = 0; j < tk; ++j) {
          double dot = 0;
          for (uint64_t e = 0; e < d; ++e) dot += double(qb[i * d + e]) * kb[j * d + e];
          pr[j] = int64_t(j) <= limit ? sc * dot + (mask ? (*mask)[i * tk + j] : 0.0)
                                      : -std::numeric_limits<double>::infinity();
          mx = std::max(mx, pr[j]);
        }
        double sum = 0;
        for (uint64_t j = 0; j < tk; ++j) sum += pr[j] = std::isfinite(pr[j]) ? std::exp(pr[j] - mx) : 0.0;
        for (uint64_t j = 0; j < tk; ++j) pr[j] = sum > 0 ? pr[j] / sum : 0.0;
        const float* kr = keep ? keep->data() + (batch * tq + i) * tk : nullptr;  // the dropout's multipliers
        if (!grad) {
          // the probabilities as a port multiplies them with V: unnormalised exp(s - max) rounded, the
          // sum kept exact (FlashAttention divides by it at the end)
          for (uint64_t j = 0; j < tk; ++j)
            if (pr[j] != 0) {
              const double pj = roundP ? pRound(pr[j] * sum) / sum : pr[j];
              for (uint64_t e = 0; e < dv; ++e) out[(batch * tq + i) * dv + e] += pj * (kr ? kr[j] : 1.0) * vb[j * dv + e];
            }
          continue;
        }
        const float* dO = dOf.data() + (batch * tq + i) * dv;
        double dot = 0;
        for (uint64_t j = 0; j < tk; ++j) {
          double dp = 0;
          for (uint64_t e = 0; e < dv; ++e) dp += double(dO[e]) * vb[j * dv + e];
          if (kr) dp *= kr[j];
          ds[i * tk + j] = dp;
          dot += pr[j] * dp;
        }
        for (uint64_t j = 0; j < tk; ++j) ds[i * tk + j] = pr[j] * (ds[i * tk + j] - dot) * sc;
      }
      if (!grad) continue;
      const float* dOb = dOf.data() + batch * tq * dv;
      double* ob = out.data() + batch * rowsPerBatch * width;
      for (uint64_t i = 0; i < tq; ++i)
        for (uint64_t j = 0; j < tk; ++j) {
          const double pij = p[i * tk + j] * (keep ? (*keep)[(batch * tq + i) * tk + j] : 1.0f), sij = ds[i * tk + j];
          if (wrt == 0 && sij != 0)
            for (uint64_t e = 0; e < d; ++e) ob[i * d + e] += sij * kb[j * d + e];
          else if (wrt == 1 && sij != 0)
            for (uint64_t e = 0; e < d; ++e) ob[j * d + e] += sij * qb[i * d + e];
          else if (wrt == 2 && pij != 0)
            for (uint64_t e = 0; e < dv; ++e) ob[j * dv + e] += pRound(pij) * dOb[i * dv + e];
        }
    }
    return out;
  };
  Replay r;
  r.robust = true;
  r.reference = compute(0, 1, nullptr, false);
  if (causal) {
    r.alternatives.push_back({"causal limit one key late (query i sees key i+1)", "index_error",
                              "every query but the last attends to one key past its causal limit: a causal mask off by one",
                              compute(1, 1, nullptr, false), ""});
    r.alternatives.push_back({"causal limit one key early (query i does not see key i)", "index_error",
                              "every query but the first misses the last key it may see: a causal mask off by one",
                              compute(-1, 1, nullptr, false), ""});
  }
  // A softmax scale other than the call's: the factors a port gets wrong (with s the call's scale and
  // d the head size): 1/sqrt(d) (1/d for 1/sqrt(d), or the scale applied on top of pre-scaled q),
  // sqrt(d) and d, 1/s (the call's scale ignored), s (applied twice), 2 and 1/2.
  std::vector<std::pair<double, std::string>> factors = {
      {1 / std::sqrt(double(d)), "1/sqrt(d)"}, {std::sqrt(double(d)), "sqrt(d)"}, {1 / double(d), "1/d"},
      {double(d), "d"}, {2.0, "2"}, {0.5, "1/2"}};
  if (scale != 1 && scale > 0) factors.insert(factors.begin(), {{1 / scale, "1/scale (the scale ignored)"},
                                                                 {scale, "scale (applied twice)"}});
  std::vector<double> tried;
  for (const auto& [factor, what] : factors) {
    if (!(factor > 0) || std::fabs(factor - 1) < 1e-3 ||
        std::any_of(tried.begin(), tried.end(), [f = factor](double t) { return std::fabs(t / f - 1) < 1e-3; }))
      continue;
    tried.push_back(factor);
    Hypothesis h{"softmax scale x " + what, "scaling",
                 "the scores are scaled by " + number(scale * factor) + " instead of the call's " + number(scale) +
                     " (a factor of " + number(factor) + ", " + what + ", d = " + std::to_string(d) + ")",
                 compute(0, factor, nullptr, false), ""};
    h.factor = factor;
    r.alternatives.push_back(std::move(h));
  }
  // legitimate ports: bf16 or fp16 inputs, probabilities rounded too (FlashAttention) or not
  for (const fp::Format* f : {&fp::kBf16, &fp::kFp16})
    for (const bool roundP : {true, false}) {
      const std::string id(f->name);
      r.alternatives.push_back({"q, k, v" + std::string(grad ? " and dO" : "") + " in " + id +
                                    (roundP ? ", probabilities rounded to " + id + " before V" : ""),
                                "precision_loss",
                                "computed from " + id + " inputs" +
                                    (roundP ? " with " + id + " probabilities, as FlashAttention's kernels do" : ""),
                                compute(0, 1, f, roundP), id});
    }
  // Each row's scale: the largest magnitude in that row of the reference or of a hypothesis (a row
  // the causal limit leaves zero, dq of the first query, is judged against what the hypothesis
  // gives there), and at least 1/1000 of the tensor's.
  r.scale.assign(count, 0);
  double floor = 0;
  for (double x : r.reference) floor = std::max(floor, std::fabs(x) * 1e-3);
  for (uint64_t row = 0; row < count / width; ++row) {
    double rowScale = floor;
    for (uint64_t e = 0; e < width; ++e) {
      rowScale = std::max(rowScale, std::fabs(r.reference[row * width + e]));
      for (const Hypothesis& h : r.alternatives)
        if (h.model == "index_error") rowScale = std::max(rowScale, std::fabs(h.values[row * width + e]));
    }
    for (uint64_t e = 0; e < width; ++e) r.scale[row * width + e] = rowScale;
  }
  return r;
}

}  // namespace

bool opReplayCovers(const std::string& op, int64_t variant) {
  if (op == "layernorm") return variant == 0;
  if (op == "gelu") return variant == 0 || variant == 1;
  if (op == "adam") return variant == 4;
  if (op == "dropout") return variant == 0 || variant == 1;
  if (op == "attention") return variant == 0 || variant == 1;
  if (op == "softmax" || op == "log_softmax") return variant == 0 || variant == 1;
  return false;
}

namespace {

// The replay of a call op replay covers (not dropout's, which has no formula to recompute), or none.
std::optional<Replay> replayOf(const OpOperands& call, uint64_t count) {
  if (!opReplayCovers(call.op, call.variant) || call.inputs.size() != call.shapes.size() || call.op == "dropout")
    return std::nullopt;
  return call.op == "layernorm"   ? layerNorm(call, count)
         : call.op == "gelu"      ? gelu(call, count)
         : call.op == "attention" ? attention(call, count)
         : (call.op == "softmax" || call.op == "log_softmax") && call.variant == 1 ? softmaxBackward(call, count)
         : call.op == "softmax" || call.op == "log_softmax" ? softmax(call, count)
                                                            : adam(call, count);
}

}  // namespace

std::optional<Verdict> replayOp(const float* golden, const float* candidate, uint64_t count, const OpOperands& call,
                                ReplayValues* replayed) {
  if (replayed) *replayed = {};
  if (!opReplayCovers(call.op, call.variant) || call.inputs.size() != call.shapes.size()) return std::nullopt;
  if (call.op == "dropout") return dropout(candidate, count, call);
  std::optional<Replay> r = replayOf(call, count);
  if (!r) return std::nullopt;
  // golden must be the replayed op itself: otherwise the call's semantics are not the replay's
  auto misfitOf = [&](const float* values, const std::vector<double>& h) {
    return r->robust ? misfitQuantile(values, h, r->scale, 0.99) : misfit(values, h, r->scale);
  };
  // (attention's golden is within 64 fp32 roundings of the op's values but not of its gradients,
  // whose scores' gradients cancel: there a semantics check at 1/512 of the row's scale)
  const double goldenMisfit = misfitOf(golden, r->reference);
  if (!(goldenMisfit <= (r->robust ? kLooseFit / kBetter : kFit))) return std::nullopt;
  if (replayed && r->reference.size() == count) replayed->reference = r->reference;
  auto candidateMisfit = [&](const std::vector<double>& h) { return misfitOf(candidate, h); };
  const double reference = candidateMisfit(r->reference);
  const double fits = call.op == "attention" ? kLooseFit : kFit;
  for (const Hypothesis& h : r->alternatives) {
    const double fit = h.robust && !r->robust ? misfitQuantile(candidate, h.values, r->scale, 0.99)
                                              : candidateMisfit(h.values);
    if (fit <= fits && fit * kBetter < reference &&
        (h.maxMisfit <= 0 || misfit(candidate, h.values, r->scale) <= h.maxMisfit)) {
      if (replayed && !h.format.empty() && h.values.size() == count)
        replayed->matched = h.values, replayed->matchedFormat = h.format;
      Verdict v;
      v.model = h.model;
      v.confidence = 0.9;
      v.parameters["formula"] = h.name;
      if (!h.format.empty()) v.parameters["format"] = h.format;
      if (h.factor > 0) {
        v.parameters["factor"] = number(h.factor);
        v.evidence["factor"] = h.factor;
      }
      v.evidence["misfit_formula"] = fit;
      v.evidence["misfit_reference"] = reference;
      v.evidence["misfit_golden"] = goldenMisfit;
      v.explanation = "replayed in double from the recorded inputs: " + h.explanation + " (misfit " + number(fit) +
                      " against " + number(reference) + " for the op's own formula, relative to its scale)";
      return v;
    }
  }
  // No other formula, and the op's own, recomputed in double, is within 64 fp32 roundings of the row's
  // scale at every element (the largest misfit, not a quantile), with more than a few elements changed:
  // the same formula in another order or another fp32 way (a one-pass softmax, a fast exp), an error
  // bound that reproduces it. Judged only
  // where the outputs' own verdict names no fault (the caller's part): a fault below that size is a
  // fault the outputs show better.
  // The bound reads a reordering, which moves many elements: a few changed elements (at most
  // max(8, n/1000), the detector's "sparse") within rounding are a fault the size of rounding, not one.
  uint64_t changed = 0;
  for (uint64_t i = 0; i < count; ++i) changed += std::memcmp(golden + i, candidate + i, sizeof(float)) != 0;
  if (changed <= std::max<uint64_t>(8, count / 1000)) return std::nullopt;
  const double worst = misfit(candidate, r->reference, r->scale);
  if (worst > 0 && worst <= kFit) {
    Verdict v;
    v.model = "accumulation_order";
    v.confidence = 0.9;
    v.parameters["reading"] = "bound";
    v.parameters["formula"] = "the op's own, within fp32 rounding";
    v.evidence["misfit_reference"] = worst;
    v.evidence["misfit_golden"] = goldenMisfit;
    v.explanation = "replayed in double from the recorded inputs: every element within " + number(worst / kU32) +
                    " fp32 roundings of the row's scale of the op's own formula (the bound is 64): the same op "
                    "computed in another order";
    return v;
  }
  return std::nullopt;
}

}  // namespace peat::detector
