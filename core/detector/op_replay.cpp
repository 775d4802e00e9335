// SPDX-License-Identifier: MIT
#include "core/detector/op_replay.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>

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
};

struct Replay {
  std::vector<double> reference, scale;  // the exact op and its per-element scale
  std::vector<Hypothesis> alternatives;
};

// Layer norm forward over rows of n: x[, gamma][, beta].
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
  r.alternatives = {
      {"variance with Bessel's correction (N-1)", "scaling",
       "every row is the layer norm with its variance divided by N-1 instead of N: a per-row factor sqrt(N/(N-1))",
       std::move(bessel)},
      {"epsilon outside the square root", "scaling",
       "every row is (x - mean) / (sqrt(var) + eps) instead of / sqrt(var + eps): a per-row factor, large where the "
       "variance is small next to eps",
       std::move(outside)},
      {"no mean subtraction (RMSNorm's formula)", "scaling",
       "every row is x / sqrt(mean(x^2) + eps): RMSNorm's formula where the reference is layer norm (a per-row affine "
       "error: the mean was never subtracted)",
       std::move(rms)}};
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
                     std::move(other)}};
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
       std::move(inside)},
      {"moments stored in bf16", "precision_loss",
       "the new moments are the exact ones rounded to bf16, and the parameter moves by the step they give: "
       "reduced-precision optimiser state, legitimate",
       std::move(bf16)}};
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

}  // namespace

bool opReplayCovers(const std::string& op, int64_t variant) {
  if (op == "layernorm") return variant == 0;
  if (op == "gelu") return variant == 0 || variant == 1;
  if (op == "adam") return variant == 4;
  if (op == "dropout") return variant == 0 || variant == 1;
  return false;
}

std::optional<Verdict> replayOp(const float* golden, const float* candidate, uint64_t count, const OpOperands& call) {
  if (!opReplayCovers(call.op, call.variant) || call.inputs.size() != call.shapes.size()) return std::nullopt;
  if (call.op == "dropout") return dropout(candidate, count, call);
  std::optional<Replay> r = call.op == "layernorm" ? layerNorm(call, count)
                            : call.op == "gelu"    ? gelu(call, count)
                                                   : adam(call, count);
  if (!r) return std::nullopt;
  // golden must be the replayed op itself: otherwise the call's semantics are not the replay's
  const double goldenMisfit = misfit(golden, r->reference, r->scale);
  if (!(goldenMisfit <= kFit)) return std::nullopt;
  const double reference = misfit(candidate, r->reference, r->scale);
  for (const Hypothesis& h : r->alternatives) {
    const double fit = misfit(candidate, h.values, r->scale);
    if (fit <= kFit && fit * kBetter < reference) {
      Verdict v;
      v.model = h.model;
      v.confidence = 0.9;
      v.parameters["formula"] = h.name;
      v.evidence["misfit_formula"] = fit;
      v.evidence["misfit_reference"] = reference;
      v.evidence["misfit_golden"] = goldenMisfit;
      v.explanation = "replayed in double from the recorded inputs: " + h.explanation + " (misfit " + number(fit) +
                      " against " + number(reference) + " for the op's own formula, relative to its scale)";
      return v;
    }
  }
  return std::nullopt;
}

}  // namespace peat::detector
