// SPDX-License-Identifier: MIT
// Weight-only group quantisation replayed on a GEMM's recorded operands (gemm_replay.h).
#include <algorithm>
#include <cmath>

#include "core/detector/gemm_replay.h"
#include "core/detector/rules.h"

namespace peat::detector::rules {

namespace {

// One column of b^T (K values) quantised and dequantised in place, in groups along K.
void quantiseColumn(float* w, int64_t k, const WeightQuantScheme& s) {
  const double levels = std::ldexp(1.0, s.bits) - 1;  // 15 or 255 steps
  const double qmax = std::ldexp(1.0, s.bits - 1) - 1, qmin = -qmax - 1;
  for (int64_t g0 = 0; g0 < k; g0 += s.group) {
    const int64_t g1 = std::min<int64_t>(k, g0 + s.group);
    float lo = 0, hi = 0, amax = 0;
    for (int64_t q = g0; q < g1; ++q) {
      lo = std::min(lo, w[q]);
      hi = std::max(hi, w[q]);
      amax = std::max(amax, std::fabs(w[q]));
    }
    float scale = s.asymmetric ? float((double(hi) - double(lo)) / levels) : float(double(amax) / qmax);
    if (s.scaleFormat == "fp16") scale = fp::roundTo(fp::kFp16, scale);
    if (!(scale > 0) || !std::isfinite(scale)) continue;  // a group of zeros stays zero
    if (s.asymmetric) {
      const double zero = std::nearbyint(-double(lo) / double(scale));
      for (int64_t q = g0; q < g1; ++q) {
        const double v = std::clamp(std::nearbyint(double(w[q]) / double(scale)) + zero, 0.0, levels);
        w[q] = float((v - zero) * double(scale));
      }
    } else {
      for (int64_t q = g0; q < g1; ++q) {
        const double v = std::clamp(std::nearbyint(double(w[q]) / double(scale)), qmin, qmax);
        w[q] = float(v * double(scale));
      }
    }
  }
}

// Whether rows `rows` of the replay (a rounded, bt quantised) give the candidate within the slack.
bool rowsMatch(const float* c, const GemmBound& b, const std::vector<float>& a, const std::vector<float>& bt,
               const fp::Format* out, const std::vector<int64_t>& rows) {
  const int64_t n = b.cols, k = b.k;
  const double u32 = std::ldexp(1.0, -24), gamma = 2 * double(k) * u32 / (1 - double(k) * u32);
  const double outStep = out ? std::ldexp(1.0, -out->manBits) : 0.0;  // one step of the output's grid, relative
  for (int64_t i : rows)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0, mag = 0;
      const float* ar = a.data() + i * k;
      const float* wr = bt.data() + j * k;
      for (int64_t q = 0; q < k; ++q) {
        acc += ar[q] * wr[q];
        mag += std::fabs(ar[q] * wr[q]);
      }
      double y = double(acc);
      if (!b.bias.empty()) y += double(b.bias[std::size_t(j)]);
      const double slack =
          2 * gamma * double(mag) * 1.01 + 4 * u32 * std::fabs(y) + outStep * std::fabs(y) + (out ? 6e-8 : 1e-30);
      if (!(std::fabs(double(c[i * n + j]) - y) <= slack)) return false;
    }
  return true;
}

}  // namespace

std::optional<WeightQuantScheme> reproducingWeightQuant(const float* c, const GemmBound& b) {
  const int64_t m = b.rows, n = b.cols, k = b.k;
  if (b.a.empty() || b.batch != 1 || k < 32 || double(m) * double(n) * double(k) > 5e8) return std::nullopt;
  if (!b.bias.empty() && b.bias.size() != std::size_t(n)) return std::nullopt;
  const fp::Format* out = outputGrid(c, uint64_t(m * n));
  std::vector<float> bt(std::size_t(n * k)), wq(std::size_t(n * k));
  for (int64_t q = 0; q < k; ++q)
    for (int64_t j = 0; j < n; ++j) bt[std::size_t(j * k + q)] = b.b[std::size_t(q * n + j)];
  // a few rows spread over the output screen each scheme before the whole check
  std::vector<int64_t> screen, all;
  for (int64_t i = 0; i < m; i += std::max<int64_t>(1, m / 4)) screen.push_back(i);
  for (int64_t i = 0; i < m; ++i) all.push_back(i);
  struct Activations {
    const char* id;
    const fp::Format* format;
  };
  const Activations acts[] = {{"fp32", nullptr}, {"fp16", &fp::kFp16}, {"bf16", &fp::kBf16}};
  std::vector<float> a;
  for (const Activations& act : acts) {
    a = b.a;
    if (act.format) fp::roundInPlace(*act.format, a.data(), a.size(), fp::Overflow::Standard);
    for (int bits : {4, 8})
      for (bool asymmetric : {false, true})
        for (int group : {128, 64, 32})
          for (const char* scaleFormat : {"fp16", "fp32"}) {
            if (group > k) continue;
            WeightQuantScheme s{bits, asymmetric, group, scaleFormat, act.id, out ? std::string(out->name) : "fp32"};
            wq = bt;
            for (int64_t j = 0; j < n; ++j) quantiseColumn(wq.data() + j * k, k, s);
            if (rowsMatch(c, b, a, wq, out, screen) && rowsMatch(c, b, a, wq, out, all)) return s;
          }
  }
  return std::nullopt;
}

}  // namespace peat::detector::rules
