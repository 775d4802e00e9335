// SPDX-License-Identifier: MIT
// Dense small errors: rounding of the output to a narrower format or a block-scaled grid (R10b, R10),
// or the rounding of the inputs and another summation order, told apart by their size (R10, R11).
#include <cmath>
#include <cstring>

#include "core/detector/rules.h"
#include "core/fp/block.h"
#include "core/fp/block_simd.h"

namespace peat::detector::rules {

void roundChunk(const fp::ElementRounder& round, const float* v, float* out, uint64_t m) {
  std::memcpy(out, v, m * sizeof(float));
  const float one = 1.0f;  // x * 1 and r * 1 are exact: the loop's rounding alone
  fp::detail::scaleRoundBlocks(out, m, m, &one, true, round.parameters());
}

namespace {

using fp::bitsOf;

// Whether every finite value of v[0, m) is on the grid `round` rounds to (`buffer`: m floats).
bool onGrid(const fp::ElementRounder& round, const float* v, uint64_t m, float* buffer) {
  roundChunk(round, v, buffer, m);
  if (std::memcmp(buffer, v, m * sizeof(float)) == 0) return true;
  for (uint64_t i = 0; i < m; ++i)
    if (finite(v[i]) && bitsOf(buffer[i]) != bitsOf(v[i])) return false;
  return true;
}

// The narrowest format in which every finite candidate value is exactly representable, if the
// golden values are not all representable in it too (then rounding of the output is what changed them).
// In chunks rounded by the vectorised loop: the element-at-a-time rounding was a sixth of peat
// detect's time on a 16 M-element pair.
const fp::Format* outputFormat(const float* g, const float* c, uint64_t n) {
  static const fp::Format order[] = {fp::kE4M3, fp::kE5M2, fp::kBf16, fp::kFp16, fp::kTf32};
  std::vector<float> buffer(kRoundChunk);
  for (const fp::Format& f : order) {
    const fp::ElementRounder round(f);  // the codec's rounding of finite values (tst_fp checks it)
    bool candidateFits = true, goldenFits = true;
    for (uint64_t lo = 0; lo < n && candidateFits; lo += kRoundChunk) {
      const uint64_t m = std::min(kRoundChunk, n - lo);
      candidateFits = onGrid(round, c + lo, m, buffer.data());
      if (candidateFits && goldenFits) goldenFits = onGrid(round, g + lo, m, buffer.data());
    }
    if (candidateFits && !goldenFits) return &f;
  }
  return nullptr;
}

// How many finite candidate values are more than one step of f from golden (withinOneStep: not golden
// rounded to f either way), with `far` the largest such distance over the tensor's scale. The output's
// grid alone reproduces nothing: a bug in a kernel that stores bf16 lands on bf16's grid too.
struct OffGrid {
  uint64_t count = 0;
  double far = 0;
};
OffGrid offGoldenRounded(const fp::Format& f, const float* g, const float* c, uint64_t n, double rms) {
  OffGrid o;
  const float near = std::ldexp(1.0f, -f.manBits - 2);  // |c - g| below |g| 2^-(p+2): no grid point between
  for (uint64_t i = 0; i < n; ++i) {
    if (!finite(c[i]) || !finite(g[i])) continue;
    const float d = std::fabs(c[i] - g[i]);
    if (d <= std::fabs(g[i]) * near || withinOneStep(f, g[i], c[i])) continue;
    ++o.count;
    o.far = std::max(o.far, rms > 0 ? d / rms : double(INFINITY));
  }
  return o;
}

// With a GEMM's operands (playback): whether each candidate value is a rounding to f of some value
// within the fp32 reordering bound of golden (the kernel summed in fp32 in its own order, then stored
// f): |c - g| <= 2 gamma_K sum|a||b| + 2^-22 |g| + 2^-p max(|c|, |g|) (one step of f, p its
// mantissa bits), the slack the GEMM replays allow a candidate stored in f. Sound for round-to-nearest
// and truncation alike; golden rounded to f alone misses where a cancelled sum's reordering noise exceeds
// a step of f (small values of a long K). A bias comes to the kernel in the output's format (C0, as
// cuBLAS's C: docs/plugins.md), so its rounding to f is added.
bool roundedWithinReordering(const fp::Format& f, const float* g, const float* c, uint64_t n, const GemmBound& b) {
  if (b.absProduct.size() != n || b.cols <= 0) return false;
  const double gamma = reorderGamma(b.k), u32 = std::ldexp(1.0, -24);
  const uint64_t cols = uint64_t(b.cols), rowsPerGemm = uint64_t(std::max<int64_t>(1, b.rows / std::max<int64_t>(1, b.batch)));
  for (uint64_t i = 0; i < n; ++i) {
    if (!finite(c[i]) || !finite(g[i])) continue;
    const double err = std::fabs(double(c[i]) - double(g[i]));
    if (err == 0) continue;
    // one step of f at the larger of the two, relative (as the GEMM replays allow it: gemm_replay.cpp)
    const double step = std::ldexp(1.0, -f.manBits) * std::max(std::fabs(double(c[i])), std::fabs(double(g[i])));
    double biasRounding = 0;
    if (!b.bias.empty()) {
      const uint64_t col = i % cols, at = b.bias.size() == cols ? col : (i / cols / rowsPerGemm) * cols + col;
      if (at < b.bias.size() && finite(b.bias[at]))
        biasRounding = std::fabs(double(fp::roundTo(f, b.bias[at])) - double(b.bias[at]));
    }
    if (err > 2 * gamma * double(b.absProduct[i]) * 1.01 + 4 * u32 * std::fabs(double(g[i])) + step + biasRounding)
      return false;
  }
  return true;
}

std::string formatId(const fp::Format& f) {
  if (f.name == std::string_view("e4m3")) return "fp8_e4m3";
  if (f.name == std::string_view("e5m2")) return "fp8_e5m2";
  return std::string(f.name);
}

// The output quantised to a block-scaled grid, in blocks of `grid.block` along the rows.
void addOutputGrid(RuleContext& x, const OutputGrid& grid, double confidence) {
  Verdict v = make("precision_loss", confidence,
                   "every block of " + std::to_string(grid.block) + " values along the rows lies on " + grid.format +
                       "'s grid with one scale per block: the output was quantised");
  v.parameters["format"] = grid.format;
  v.parameters["block"] = std::to_string(grid.block);
  v.parameters["output"] = "quantised";
  v.evidence["block"] = grid.block;
  x.add(v);
}

// The median number of mantissa bits disturbed, against the band each format's rounding gives. The
// size of an error alone reproduces nothing (a wrong attention scale's errors are the size of bf16's
// rounding): the band's reading is only the closest hypothesis, an alternative under `unknown`,
// which says what would settle it. A legitimate verdict needs a replay, a bound or a format's grid.
void addUlpBands(RuleContext& x, bool dense) {
  struct Band {
    int lo, hi;
    const char* model;
    const char* format;
    double confidence;
  };
  // Median log2 ULP of a GEMM whose inputs were rounded: about 23 - p + 1 for a format with p
  // significand bits (unit roundoff 2^-p, times sums of |a||b| over |c|).
  // Bands measured with `peat detect-eval` on GEMM, conv, softmax and layernorm calls.
  static const Band bands[] = {{0, 6, "accumulation_order", "", 0.8},   {7, 12, "precision_loss", "fp16", 0.6},
                               {7, 12, "precision_loss", "tf32", 0.55}, {13, 16, "precision_loss", "bf16", 0.75},
                               {17, 18, "precision_loss", "fp8_e4m3", 0.6}, {19, 32, "precision_loss", "fp8_e5m2", 0.6}};
  const std::string size = "median " + std::to_string(x.ulpMedian) + " of 23 mantissa bits disturbed";
  std::string closest;
  double confidence = 0;
  for (const Band& b : bands)
    if (x.ulpMedian >= b.lo && x.ulpMedian <= b.hi) {
      const std::string reading = *b.format ? std::string("inputs rounded to ") + b.format : "another summation order";
      Verdict v = make(b.model, (dense ? b.confidence : b.confidence * 0.8) / 2,
                       "dense errors the size of " + reading + " (" + size + "), not reproduced by anything");
      if (*b.format) v.parameters["format"] = b.format;
      v.parameters["reproduced"] = "no";
      v.evidence["median_log2_ulp"] = x.ulpMedian;
      v.evidence["mismatch_fraction"] = x.fraction;
      x.add(v);
      if (closest.empty()) closest = std::string(b.model) + (*b.format ? std::string(" (") + b.format + ")" : "");
      confidence = std::max(confidence, dense ? b.confidence : b.confidence * 0.8);
    }
  if (closest.empty()) return;
  Verdict u = make("unknown", confidence,
                   "dense errors (" + size + ") the size of " + closest + ", but nothing reproduces them: " +
                       (x.bound ? std::string("no format's replay of the recorded operands and no rounding bound fits")
                                : std::string("only the outputs are known; record the call's inputs (peat profile, peat "
                                              "record) and replay it to settle it")));
  u.parameters["closest"] = closest;
  u.evidence["median_log2_ulp"] = x.ulpMedian;
  x.add(u);
}

}  // namespace

// R10b: a kernel that quantised its output to a block-scaled format leaves every block of values
// along the rows on that format's grid with one scale per block (core/detector/block_replay.h).
// 4-bit elements first: no per-element format has one mantissa bit.
void quantisedOutput(RuleContext& x) {
  const analyzer::Report& r = x.r;
  if (x.zeroedOutput) return;  // zeros where golden is not: R6, before any quantisation
  if (x.fraction >= 0.2 && r.newlyNonFinite == 0 && r.cols > 0)
    x.grid = outputBlockGrid(x.golden, x.c, x.n, r.cols, false);
  if (x.grid) addOutputGrid(x, *x.grid, 0.96);
}

// R10/R11 dense small errors: rounding to a narrower format, or another summation order.
void denseRounding(RuleContext& x) {
  const analyzer::Report& r = x.r;
  const bool dense = x.fraction >= 0.2 && r.newlyNonFinite == 0 && r.signOnly == 0;
  if (x.zeroedOutput) return;
  if (!((dense || (!x.sparse && r.newlyNonFinite == 0)) && r.meanAbsOverScale <= 0.08)) return;
  if (const fp::Format* f = outputFormat(x.golden, x.c, x.n)) {
    // Golden rounded to f reproduces it: every value within one step of f of golden, but for a few far
    // below the tensor's scale (fp32 reordering noise in a cancelled sum exceeds a step of f there: at
    // most max(8, n / 1000), each off by less than a step of f at the scale). Or R12's replay of the
    // operands reproduced it (inputs in f too); fp8's loose bound alone does not. Else the grid is only
    // the closest reading: a bug in a kernel that stores f lands on f's grid too.
    const OffGrid off = offGoldenRounded(*f, x.golden, x.c, x.n, r.goldenRms);
    const double step = std::ldexp(1.0, -f->manBits);
    const bool nearGolden = off.count == 0 || (off.count <= std::max<uint64_t>(8, x.n / 1000) && off.far <= step);
    const bool nearReordered = !nearGolden && x.bound && roundedWithinReordering(*f, x.golden, x.c, x.n, *x.bound);
    const bool rounded = nearGolden || nearReordered;
    if (rounded || x.reproduced) {
      Verdict v = make("precision_loss", 0.96,
                       "every candidate value is exactly representable in " + formatId(*f) +
                           (nearGolden      ? ", and golden rounded to it reproduces each within one step"
                            : nearReordered ? ", each within one step of it from golden give or take the fp32 "
                                              "reordering bound of the recorded operands (a bias in " +
                                                  formatId(*f) + " too)"
                                            : ", and a replay of the recorded operands reproduces it"));
      v.parameters["format"] = formatId(*f);
      v.evidence["median_log2_ulp"] = x.ulpMedian;
      v.evidence["off_one_step"] = double(off.count);
      x.add(v);
    } else {
      const std::string closest = "precision_loss (" + formatId(*f) + ")";
      Verdict u = make("unknown", 0.8,
                       "every candidate value is on " + formatId(*f) + "'s grid, but " + std::to_string(off.count) +
                           " are more than one " + formatId(*f) + " step from golden (up to " +
                           std::to_string(off.far) + " of the tensor's scale): golden rounded to " + formatId(*f) +
                           " does not reproduce them, " +
                           (x.bound ? std::string("nor does any format's replay of the recorded operands")
                                    : std::string("and only the outputs are known; record the call's inputs and "
                                                  "replay it to settle whether inputs in that format do")));
      u.parameters["closest"] = closest;
      u.parameters["format"] = formatId(*f);
      u.evidence["off_one_step"] = double(off.count);
      u.evidence["max_off_over_scale"] = off.far;
      x.add(u);
    }
  } else if (const std::optional<OutputGrid> wide =
                 x.grid ? std::nullopt : outputBlockGrid(x.golden, x.c, x.n, r.cols, true)) {
    addOutputGrid(x, *wide, 0.95);
  } else if (!x.bounded && x.ulpMedian >= 0 && r.maxAbsOverScale < 0.5) {
    addUlpBands(x, dense);
  }
}

}  // namespace peat::detector::rules
