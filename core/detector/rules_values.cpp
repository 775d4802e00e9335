// SPDX-License-Identifier: MIT
// Whole values replaced in a regular way: by zeros, or by the golden values times one factor (R6, R7,
// R7b), or each channel by a factor of its own (R7c), and zeros that are flushed subnormals (R6's
// legitimate reading, FTZ).
#include <algorithm>
#include <cmath>
#include <optional>

#include "core/detector/rules.h"

namespace peat::detector::rules {

namespace {


}  // namespace

// R6 zeroed: every mismatched candidate value is zero. When every one of those golden values is an
// fp32 subnormal, the kernel flushed subnormals to zero (FTZ/DAZ, as fast-math builds and many GPU
// kernels do): a legitimate loss of precision below 2^-126, not a part of the output left unwritten.
void zeroed(RuleContext& x) {
  if (!x.m.allZeroCandidate) return;
  // Every mismatch is a zero against a zero of the other sign (|c - g| = 0 everywhere): the values are
  // equal (IEEE -0 == +0); another order or formula gives an exact zero the other sign (GELU's tanh
  // form underflows to +0 where the erf form keeps -0).
  if (x.r.maxAbs == 0) {
    Verdict v = make("accumulation_order", 0.95,
                     std::to_string(x.mis) + " zero(s) differ from golden only in their sign (-0 and +0 are equal)");
    v.evidence["signed_zeros"] = double(x.mis);
    x.add(v);
    x.add(make("zeroed", 0.2, "every mismatch reads 0, but golden is a zero of the other sign there"));
    return;
  }
  if (x.m.allSubnormalGolden) {
    Verdict v = make("precision_loss", 0.95,
                     std::to_string(x.mis) + " subnormal golden value(s) read 0: subnormals flushed to zero (FTZ)");
    v.parameters["format"] = "fp32";
    v.parameters["flush"] = "ftz";
    v.evidence["flushed_subnormals"] = double(x.mis);
    x.add(v);
    x.add(make("zeroed", 0.3, "every mismatch reads 0, but each golden value there is subnormal"));
    return;
  }
  Verdict v = make("zeroed", x.mis >= 2 ? 0.94 : 0.85,
                   std::to_string(x.mis) + " element(s) are zero where golden is not; longest run " +
                       std::to_string(x.r.longestRun));
  v.evidence["longest_run"] = double(x.r.longestRun);
  x.add(v);
  x.zeroedOutput = true;
}

// R7 scaling: c = s g for one factor s over the mismatched elements.
void scaling(RuleContext& x) {
  const Mismatches& m = x.m;
  if (m.ratios.size() >= 8) {
    std::vector<double> ratios = m.ratios;
    std::nth_element(ratios.begin(), ratios.begin() + std::ptrdiff_t(ratios.size() / 2), ratios.end());
    const double s = ratios[ratios.size() / 2];
    uint64_t fit = 0;
    for (double q : m.ratios) fit += std::fabs(q - s) <= 1e-6 * std::fabs(s) ? 1 : 0;
    if (std::fabs(s - 1.0) > 1e-5 && double(fit) >= 0.99 * double(m.ratios.size())) {
      Verdict v = make("scaling", 0.92, "candidate = " + number(s) + " x golden");
      v.parameters["factor"] = number(s);
      v.evidence["factor"] = s;
      x.add(v);
    }
  }
}

// R7b scaling on top of rounding: a wrong factor applied to a reduced-precision result (fp8
// dequantised with its scale applied twice, an fp16 gradient never unscaled) is a constant ratio
// c / g only up to the format's rounding, which R7's 1e-6 rejects. A robust fit of the ratio (its
// median, with most ratios within 2^-2 of it), then the candidate with the factor divided out judged
// by every rule: when that is legitimate rounding, the factor is the fault. Rounding alone moves the
// median ratio by far less than the 2^-3 (in log2) asked of the factor: its errors are as often up
// as down.
void scaleOnRounding(RuleContext& x) {
  const Mismatches& m = x.m;
  if (m.ratios.size() < 64 || x.fraction < 0.5 || x.r.newlyNonFinite > 0) return;
  for (const Verdict& v : x.found)
    if (v.model == "scaling") return;
  std::vector<double> ratios = m.ratios;
  std::nth_element(ratios.begin(), ratios.begin() + std::ptrdiff_t(ratios.size() / 2), ratios.end());
  double s = ratios[ratios.size() / 2];
  if (!(s != 0 && std::isfinite(s) && std::fabs(std::log2(std::fabs(s))) >= 0.125)) return;
  // loss scales and MX scales are powers of two: a median within 2^-6 (in log2) of one is taken as it
  const double log2s = std::log2(std::fabs(s));
  if (std::fabs(log2s - std::round(log2s)) < 1.0 / 64) s = std::copysign(std::ldexp(1.0, int(std::round(log2s))), s);
  uint64_t near = 0;
  for (double q : m.ratios) near += std::fabs(q - s) <= 0.25 * std::fabs(s) ? 1 : 0;
  if (double(near) < 0.75 * double(m.ratios.size())) return;
  std::vector<float> rescaled(x.c, x.c + x.n);
  for (float& v : rescaled) v = float(double(v) / s);
  const Detection rest = detectOne(x.golden, {rescaled.data()}, x.shape, x.options, x.bound);
  if (!roundingSized(rest)) return;
  const std::string secondary = restReading(rest);
  const bool powerOfTwo = std::fabs(std::log2(std::fabs(s)) - std::round(std::log2(std::fabs(s)))) < 1e-12;
  Verdict v = make("scaling", 0.93,
                   "candidate = " + number(s) + " x golden" + (powerOfTwo ? " (a power of two)" : "") + " up to " +
                       secondary + ": a wrong scale on top of reduced-precision rounding");
  v.parameters["factor"] = number(s);
  v.parameters["secondary"] = secondary;
  v.evidence["factor"] = s;
  v.evidence["ratios_within_quarter"] = double(near) / double(m.ratios.size());
  x.add(v);
  x.findingOf.emplace_back("scaling", rest.verdict);
}

namespace {

// One axis' reading of R7c: per line (row or column) the factor s = <c, g> / <g, g> that fits the
// candidate to golden best, and how much of the error such factors leave.
struct ChannelFit {
  std::vector<double> factor;  // per line; 1 where the line's golden is all zero
  double errorBefore = 0, errorAfter = 0;  // sum (c - g)^2, and sum (c - s g)^2 with each line's s
  uint64_t off = 0;       // lines whose values vary and whose factor is at least 2^(1/4) away from 1
  double lo = 1, hi = 1;  // the smallest and largest factor of those lines
};

ChannelFit fitChannels(const ChannelSums::Axis& a) {
  ChannelFit f;
  const uint64_t lines = a.gg.size();
  f.factor.assign(lines, 1.0);
  for (uint64_t k = 0; k < lines; ++k) {
    f.errorBefore += a.ee[k];
    if (!(a.gg[k] > 0)) {
      f.errorAfter += a.ee[k];
      continue;
    }
    const double s = a.cg[k] / a.gg[k];
    f.factor[k] = s;
    f.errorAfter += std::max(0.0, a.cc[k] - s * a.cg[k]);  // sum (c - s g)^2 at the best s
    const double mean = a.g[k] / double(a.samples);
    const bool varies = a.gg[k] - double(a.samples) * mean * mean >= 0.25 * a.gg[k];  // not a constant line
    if (varies && s > 0 && std::fabs(std::log2(s)) >= 0.25) {
      if (f.off == 0) f.lo = f.hi = s;
      f.lo = std::min(f.lo, s), f.hi = std::max(f.hi, s);
      ++f.off;
    }
  }
  return f;
}

}  // namespace

// R7c scaling per channel: each output channel (column) or each row off by a factor of its own, on
// top of rounding: per-channel or per-token scales applied to the wrong channel, or wrong for some.
// Rounding errs independently of the value it rounds, so a factor per line can take away only about
// one part in (elements per line) of its squared error; here the factors take at least 15/16 of it,
// at least two lines whose values vary are off by 2^(1/4) or more (a scale or a normaliser rounded
// to any format, e5m2 at the coarsest, errs by at most 2^-3: a bf16 softmax's row sums make per-row
// factors too, within 2^-8), and the candidate with the factors divided out is legitimate by every
// rule. R7 and R7b find one factor for all; this finds many.
void channelScaling(RuleContext& x) {
  const analyzer::Report& r = x.r;
  if (x.fraction < 0.5 || r.newlyNonFinite > 0 || r.meanAbsOverScale < std::ldexp(1.0, -8)) return;
  for (const Verdict& v : x.found)
    if (v.model == "scaling") return;
  const ChannelSums& sums = x.channels();
  std::optional<ChannelFit> best;
  bool byColumn = true;
  for (const bool columns : {true, false}) {
    const ChannelSums::Axis& a = columns ? sums.cols : sums.rows;
    if (a.gg.size() < 2 || a.samples < 16) continue;
    ChannelFit f = fitChannels(a);
    if (f.off < 2 || !(f.errorAfter * 16 <= f.errorBefore)) continue;
    if (!best || f.errorAfter < best->errorAfter) best = std::move(f), byColumn = columns;
  }
  if (!best) return;
  const uint64_t rows = r.rows, cols = r.cols;
  std::vector<float> rescaled(x.c, x.c + x.n);
  for (uint64_t i = 0; i < rows; ++i)
    for (uint64_t j = 0; j < cols; ++j) rescaled[i * cols + j] = float(double(rescaled[i * cols + j]) /
                                                                      best->factor[byColumn ? j : i]);
  const Detection rest = detectOne(x.golden, {rescaled.data()}, x.shape, x.options, x.bound);
  if (!roundingSized(rest)) return;
  const std::string secondary = restReading(rest);
  const char* line = byColumn ? "column" : "row";
  Verdict v = make("scaling", 0.92,
                   std::string("each ") + line + " is golden times a factor of its own (" + std::to_string(best->off) +
                       " " + line + "s off by 2^(1/4) or more, from " + number(best->lo) + " to " + number(best->hi) +
                       ") up to " + secondary + ": per-channel scales wrong or applied to the wrong channel");
  v.parameters["per"] = line;
  v.parameters["secondary"] = secondary;
  v.evidence["channels_off"] = double(best->off);
  v.evidence["factor_min"] = best->lo;
  v.evidence["factor_max"] = best->hi;
  v.evidence["error_left_by_factors"] = best->errorBefore > 0 ? best->errorAfter / best->errorBefore : 0.0;
  x.add(v);
  x.findingOf.emplace_back("scaling", rest.verdict);
}

}  // namespace peat::detector::rules
