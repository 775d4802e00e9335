// SPDX-License-Identifier: MIT
// Each rule below is one row of docs/error-models.md; keep them in step.
#include "core/detector/detector.h"

#include <algorithm>
#include <map>
#include <optional>
#include <cmath>
#include <limits>
#include <cstring>
#include <sstream>
#include <thread>

#include "core/detector/block_replay.h"
#include "core/fp/block.h"
#include "core/fp/format.h"

namespace peat::detector {

namespace {

using fp::bitsOf;
using fp::floatOf;

bool finite(float x) { return std::isfinite(x); }

std::string number(double v) {
  std::ostringstream s;
  s.precision(6);
  s << v;
  return s.str();
}

// Facts about the mismatched elements that the report does not keep.
struct Mismatches {
  uint64_t count = 0;
  bool allSingleBit = true, sameBit = true, sameNewValue = true, allZeroCandidate = true, allContiguousBits = true;
  int bit = -1, newValue = -1, highestBit = 0;
  std::vector<double> ratios;  // c / g where both are finite and |g| is normal
  // "Large" mismatches, above any fp32 reordering noise: |c - g| > golden rms * 2^-10.
  uint64_t large = 0, largeDominantGap = 0;
  double largeGapShare = 0;
  uint64_t largeRowsHit = 0, largeColsHit = 0;
};

// One range [lo, hi) of the pass; the ranges' parts merge in order (inspect).
struct MismatchPart {
  Mismatches m;
  std::vector<uint64_t> gaps = std::vector<uint64_t>(4097, 0);
  std::vector<char> rowHit, colHit;
  int64_t firstLarge = -1, lastLarge = -1;
};

void inspectRange(const float* g, const float* c, uint64_t lo, uint64_t hi, const analyzer::Report& r, double threshold,
                  MismatchPart& p) {
  Mismatches& m = p.m;
  p.rowHit.assign(std::min<uint64_t>(r.rows, 1 << 20), 0);
  p.colHit.assign(std::min<uint64_t>(r.cols, 1 << 20), 0);
  int64_t lastLarge = -1;
  for (uint64_t i = lo; i < hi; ++i) {
    const uint32_t gb = bitsOf(g[i]), cb = bitsOf(c[i]);
    if (gb == cb) continue;
    ++m.count;
    const uint32_t x = gb ^ cb;
    const int high = 31 - __builtin_clz(x), low = __builtin_ctz(x);
    m.highestBit = std::max(m.highestBit, high);
    const bool single = (x & (x - 1)) == 0;
    // contiguous: the set bits form one block
    if ((x >> low) & ((x >> low) + 1)) m.allContiguousBits = false;
    if (!single) {
      m.allSingleBit = false;
    } else {
      if (m.bit < 0) m.bit = low;
      if (m.bit != low) m.sameBit = false;
      const int v = int((cb >> low) & 1);
      if (m.newValue < 0) m.newValue = v;
      if (m.newValue != v) m.sameNewValue = false;
    }
    if (c[i] != 0.0f) m.allZeroCandidate = false;
    if (finite(g[i]) && finite(c[i]) && std::fabs(g[i]) > 1e-30f && m.ratios.size() < 100000)
      m.ratios.push_back(double(c[i]) / double(g[i]));
    if (finite(g[i]) && finite(c[i]) && std::fabs(double(c[i]) - double(g[i])) > threshold) {
      ++m.large;
      if (lastLarge >= 0 && i - uint64_t(lastLarge) <= 4096) ++p.gaps[i - uint64_t(lastLarge)];
      if (p.firstLarge < 0) p.firstLarge = int64_t(i);
      lastLarge = int64_t(i);
      p.rowHit[std::min<uint64_t>(i / r.cols, p.rowHit.size() - 1)] = 1;
      p.colHit[std::min<uint64_t>(i % r.cols, p.colHit.size() - 1)] = 1;
    }
  }
  p.lastLarge = lastLarge;
}

// Two halves on two threads for large tensors, merged as one pass in order would have found them.
Mismatches inspect(const float* g, const float* c, uint64_t n, const analyzer::Report& r) {
  const double threshold = r.goldenRms * std::ldexp(1.0, -10);
  const uint64_t half = n >= (uint64_t(1) << 20) ? n / 2 : n;
  MismatchPart first, second;
  std::thread other;
  if (half < n) other = std::thread([&] { inspectRange(g, c, half, n, r, threshold, second); });
  inspectRange(g, c, 0, half, r, threshold, first);
  if (other.joinable()) other.join();
  Mismatches m = first.m;
  std::vector<uint64_t>& gaps = first.gaps;
  if (half < n) {
    const Mismatches& b = second.m;
    m.count += b.count;
    m.highestBit = std::max(m.highestBit, b.highestBit);
    m.allContiguousBits = m.allContiguousBits && b.allContiguousBits;
    m.allSingleBit = m.allSingleBit && b.allSingleBit;
    m.allZeroCandidate = m.allZeroCandidate && b.allZeroCandidate;
    m.sameBit = m.sameBit && b.sameBit && (m.bit < 0 || b.bit < 0 || m.bit == b.bit);
    m.sameNewValue = m.sameNewValue && b.sameNewValue && (m.newValue < 0 || b.newValue < 0 || m.newValue == b.newValue);
    if (m.bit < 0) m.bit = b.bit;
    if (m.newValue < 0) m.newValue = b.newValue;
    for (double q : b.ratios) {
      if (m.ratios.size() >= 100000) break;
      m.ratios.push_back(q);
    }
    m.large += b.large;
    for (std::size_t k = 0; k < gaps.size(); ++k) gaps[k] += second.gaps[k];
    if (first.lastLarge >= 0 && second.firstLarge >= 0 && uint64_t(second.firstLarge - first.lastLarge) <= 4096)
      ++gaps[std::size_t(second.firstLarge - first.lastLarge)];
    for (std::size_t k = 0; k < first.rowHit.size(); ++k) first.rowHit[k] |= second.rowHit[k];
    for (std::size_t k = 0; k < first.colHit.size(); ++k) first.colHit[k] |= second.colHit[k];
  }
  for (std::size_t b = 1; b < gaps.size(); ++b)
    if (gaps[b] > gaps[m.largeDominantGap]) m.largeDominantGap = b;
  if (m.large > 1) m.largeGapShare = double(gaps[m.largeDominantGap]) / double(m.large - 1);
  for (char h : first.rowHit) m.largeRowsHit += h ? 1 : 0;
  for (char h : first.colHit) m.largeColsHit += h ? 1 : 0;
  return m;
}

// The narrowest format in which every finite candidate value is exactly representable, if the
// golden values are not all representable in it too (then rounding of the output is what changed them).
const fp::Format* outputFormat(const float* g, const float* c, uint64_t n) {
  static const fp::Format order[] = {fp::kE4M3, fp::kE5M2, fp::kBf16, fp::kFp16, fp::kTf32};
  for (const fp::Format& f : order) {
    const fp::ElementRounder round(f);  // the codec's rounding of finite values (tst_fp checks it)
    bool candidateFits = true, goldenFits = true;
    for (uint64_t i = 0; i < n && candidateFits; ++i) {
      if (!finite(c[i])) continue;
      if (bitsOf(round(c[i])) != bitsOf(c[i])) candidateFits = false;
      if (goldenFits && finite(g[i]) && bitsOf(round(g[i])) != bitsOf(g[i])) goldenFits = false;
    }
    if (candidateFits && !goldenFits) return &f;
  }
  return nullptr;
}

// The numerical rank of c - g (or of c alone, g null), viewed as [rows, cols], on its first `cap`
// rows and columns (modified Gram-Schmidt on the columns; a column counts when more than 1e-3 of the
// largest column's norm is left after projecting out the others).
int numericalRank(const float* g, const float* c, uint64_t rows, uint64_t cols, uint64_t cap, uint64_t& size) {
  const uint64_t m = std::min(rows, cap), n = std::min(cols, cap);
  size = std::min(m, n);
  auto at = [&](uint64_t i, uint64_t j) { return double(c[i * cols + j]) - (g ? double(g[i * cols + j]) : 0.0); };
  std::vector<std::vector<double>> basis;
  std::vector<double> col(m);
  double largest = 0;
  for (uint64_t j = 0; j < n; ++j) {
    double norm = 0;
    for (uint64_t i = 0; i < m; ++i) norm += at(i, j) * at(i, j);
    largest = std::max(largest, std::sqrt(norm));
  }
  if (largest == 0 || !std::isfinite(largest)) return 0;
  for (uint64_t j = 0; j < n && basis.size() < size; ++j) {
    for (uint64_t i = 0; i < m; ++i) col[i] = at(i, j);
    for (const std::vector<double>& q : basis) {
      double dot = 0;
      for (uint64_t i = 0; i < m; ++i) dot += q[i] * col[i];
      for (uint64_t i = 0; i < m; ++i) col[i] -= dot * q[i];
    }
    double left = 0;
    for (double v : col) left += v * v;
    left = std::sqrt(left);
    if (left <= 1e-3 * largest) continue;
    for (double& v : col) v /= left;
    basis.push_back(col);
  }
  return int(basis.size());
}

// Median floor(log2 ULP) over mismatched pairs: how many low bits a typical mismatch disturbs.
int medianLog2Ulp(const analyzer::Report& r) {
  uint64_t total = 0;
  for (uint64_t v : r.log2Ulp) total += v;
  uint64_t seen = 0;
  for (std::size_t b = 0; b < r.log2Ulp.size(); ++b) {
    seen += r.log2Ulp[b];
    if (2 * seen >= total && total > 0) return int(b);
  }
  return -1;
}

Verdict make(const std::string& model, double confidence, std::string explanation) {
  Verdict v;
  v.model = model;
  v.confidence = confidence;
  v.explanation = std::move(explanation);
  return v;
}

std::string formatId(const fp::Format& f) {
  if (f.name == std::string_view("e4m3")) return "fp8_e4m3";
  if (f.name == std::string_view("e5m2")) return "fp8_e5m2";
  return std::string(f.name);
}

}  // namespace

const std::vector<std::string>& verdictNames() {
  static const std::vector<std::string> names{"exact",        "precision_loss", "accumulation_order", "bit_flip",
                                              "multi_bit_flip", "stuck_at",     "random_value",       "zeroed",
                                              "index_error",  "nondeterministic", "nan_inf",          "scaling",
                                              "unknown"};
  return names;
}

std::string verdictExplanation(const std::string& verdict) {
  static const std::map<std::string, std::string> text{
      {"exact", "Bit-identical to the golden kernel: nothing to explain."},
      {"precision_loss",
       "Dense, small errors whose size matches rounding to a narrower format (fp16, bf16, tf32, fp8): every product "
       "loses about 24 - p low bits. Typical of a kernel that computes in reduced precision, e.g. tensor cores or a "
       "mixed-precision path. When the recorded inputs are known, the format is confirmed by replaying them rounded."},
      {"accumulation_order",
       "A few ULPs of difference, within the worst-case bound of summing the same products in another order. A split-K, "
       "tree or reversed reduction gives this: harmless in itself, but it makes bit-exact comparisons fail."},
      {"bit_flip",
       "One or a few elements differ in exactly one bit, the same bit. Rounding changes many elements by small "
       "amounts; a single high bit flipped is a memory or register upset (or an injected fault)."},
      {"multi_bit_flip", "A few elements differ in one block of adjacent bits reaching the high mantissa or exponent: an "
                         "adjacent multi-bit upset."},
      {"stuck_at", "Every difference is the same bit forced to the same value, over many elements: a stuck-at fault "
                   "in a memory region or a data path."},
      {"random_value", "A few elements hold unrelated values (large relative errors, not single-bit): corrupted "
                       "writes or reads of the wrong address."},
      {"zeroed", "Every differing element reads exactly 0: part of the output was never written or was cleared "
                 "(a missing tail, an early exit, a skipped tile)."},
      {"index_error",
       "Large errors at a regular stride, in a band of rows or columns, or everywhere with a mean far above any "
       "rounding: an addressing bug (tile edges, a shifted row, a missing K tile)."},
      {"nondeterministic", "Two replays of the same input disagree: a race or an uninitialised read. A deterministic "
                           "kernel returns the same bits every time."},
      {"nan_inf", "Finite golden values became NaN or Inf: overflow in a narrower format, or a fault."},
      {"scaling", "The candidate is the golden output times one constant factor: a wrong alpha, scale or "
                  "normalisation."},
      {"unknown", "No documented rule holds: look at the histograms and the bit positions by hand."}};
  const auto it = text.find(verdict);
  return it == text.end() ? std::string() : it->second;
}

GemmBound gemmBound(const float* a, const float* b, int64_t m, int64_t k, int64_t n, const float* bias) {
  GemmBound g;
  g.k = k;
  g.a.assign(a, a + m * k);
  g.b.assign(b, b + k * n);
  if (bias) g.bias.assign(bias, bias + n);
  g.rows = m;
  g.cols = n;
  g.absProduct.assign(std::size_t(m * n), 0.0f);
  g.rowAbsSum.assign(std::size_t(m), 0.0f);
  g.colAbsSum.assign(std::size_t(n), 0.0f);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t q = 0; q < k; ++q) g.rowAbsSum[std::size_t(i)] += std::fabs(a[i * k + q]);
  for (int64_t q = 0; q < k; ++q)
    for (int64_t j = 0; j < n; ++j) g.colAbsSum[std::size_t(j)] += std::fabs(b[q * n + j]);
  std::vector<float> row(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), 0.0f);
    for (int64_t q = 0; q < k; ++q) {
      const float av = std::fabs(a[i * k + q]);
      const float* br = b + q * n;
      for (int64_t j = 0; j < n; ++j) row[std::size_t(j)] += av * std::fabs(br[j]);
    }
    std::copy(row.begin(), row.end(), g.absProduct.begin() + i * n);
  }
  return g;
}

GemmBound batchedGemmBound(const float* a, const float* b, int64_t batch, int64_t m, int64_t k, int64_t n, bool aShared,
                           bool bShared) {
  GemmBound g;
  g.batch = batch;
  g.k = k;
  g.rows = batch * m;
  g.cols = n;
  g.a.resize(std::size_t(batch * m * k));
  g.b.resize(std::size_t(batch * k * n));
  for (int64_t t = 0; t < batch; ++t) {
    std::copy_n(a + (aShared ? 0 : t * m * k), m * k, g.a.begin() + t * m * k);
    std::copy_n(b + (bShared ? 0 : t * k * n), k * n, g.b.begin() + t * k * n);
  }
  g.absProduct.resize(std::size_t(batch * m * n));
  g.rowAbsSum.resize(std::size_t(batch * m));
  g.colAbsSum.resize(std::size_t(batch * n));
  for (int64_t t = 0; t < batch; ++t) {
    const GemmBound one = gemmBound(g.a.data() + t * m * k, g.b.data() + t * k * n, m, k, n);
    std::copy(one.absProduct.begin(), one.absProduct.end(), g.absProduct.begin() + t * m * n);
    std::copy(one.rowAbsSum.begin(), one.rowAbsSum.end(), g.rowAbsSum.begin() + t * m);
    std::copy(one.colAbsSum.begin(), one.colAbsSum.end(), g.colAbsSum.begin() + t * n);
  }
  return g;
}

namespace {
// The smallest error model whose worst-case bound holds at every element: fp32 reordering
// (gamma_K of 2^-24 on both sides), else inputs rounded to a format with unit roundoff u
// ((2u + u^2) |a||b| on top). Returns the index into `models`, or -1 when even fp8 e5m2's bound fails.
// u: unit roundoff; eta: half the smallest subnormal, the absolute error of rounding a tiny value
// (underflow), which a relative bound alone does not cover.
struct BoundModel {
  const char* model;
  const char* format;
  double u, eta;
};
const BoundModel kBoundModels[] = {
    {"accumulation_order", "", 0, 0},
    {"precision_loss", "tf32", std::ldexp(1.0, -11), std::ldexp(1.0, -137)},
    {"precision_loss", "fp16", std::ldexp(1.0, -11), std::ldexp(1.0, -25)},
    {"precision_loss", "bf16", std::ldexp(1.0, -8), std::ldexp(1.0, -134)},
    {"precision_loss", "fp8_e4m3", std::ldexp(1.0, -4), std::ldexp(1.0, -10)},
    {"precision_loss", "fp8_e5m2", std::ldexp(1.0, -3), std::ldexp(1.0, -17)}};

// The bias added to output (i, j) of a bound's GEMM: none, one per column, or (a batched bound's
// [batch, n], as a grouped conv's per-group channels) one per column of each GEMM.
double biasAt(const GemmBound& b, int64_t i, int64_t j) {
  if (b.bias.empty()) return 0.0;
  const int64_t perBatch = b.rows / std::max<int64_t>(1, b.batch);
  return b.bias.size() == std::size_t(b.cols) ? double(b.bias[std::size_t(j)]) : double(b.bias[std::size_t((i / perBatch) * b.cols + j)]);
}

// The GEMM of a bound replayed from copies of its operands (rounded to a format by the caller), one
// output row at a time, with the bias added, in fp32 and this replay's own summation order: what
// every format hypothesis is judged by.
struct RowReplay {
  const GemmBound& b;
  const std::vector<float>& a;
  const std::vector<float>& bb;
  std::vector<float> row = std::vector<float>(static_cast<std::size_t>(b.cols));
  int64_t perBatch = b.rows / std::max<int64_t>(1, b.batch);
  // row i's values; out[j] for column j
  void run(int64_t i, std::vector<double>& out) {
    const int64_t n = b.cols, k = b.k;
    std::fill(row.begin(), row.end(), 0.0f);
    const float* bBatch = bb.data() + (i / perBatch) * k * n;  // row i's GEMM of the batch
    for (int64_t q = 0; q < k; ++q) {
      const float av = a[std::size_t(i * k + q)];
      const float* br = bBatch + q * n;
      for (int64_t j = 0; j < n; ++j) row[std::size_t(j)] += av * br[j];
    }
    out.resize(std::size_t(n));
    for (int64_t j = 0; j < n; ++j) out[std::size_t(j)] = double(row[std::size_t(j)]) + biasAt(b, i, j);
  }
};

// The formats whose rounding of the recorded inputs reproduces the candidate, up to fp32 reordering.
// The elementwise formats the replay tries, in the order they are named when they round alike.
struct Hypothesis {
  const fp::Format* format;
  fp::Overflow overflow;
  const char* id;
};
const Hypothesis kHypotheses[] = {{&fp::kTf32, fp::Overflow::Standard, "tf32"},
                                  {&fp::kFp16, fp::Overflow::Standard, "fp16"},
                                  {&fp::kBf16, fp::Overflow::Standard, "bf16"},
                                  {&fp::kE4M3, fp::Overflow::Saturate, "fp8_e4m3"},
                                  {&fp::kE5M2, fp::Overflow::Saturate, "fp8_e5m2"}};

std::vector<std::string> reproducingFormats(const float* c, const GemmBound& b) {
  std::vector<std::string> out;
  const int64_t m = b.rows, n = b.cols, k = b.k;
  if (b.a.empty() || double(m) * double(n) * double(k) > 5e8) return out;  // too costly to replay here
  const double u32 = std::ldexp(1.0, -24), gamma = 2 * double(k) * u32 / (1 - double(k) * u32);
  std::vector<float> a(b.a), bb(b.b);
  std::vector<double> y;
  for (const Hypothesis& h : kHypotheses) {
    a = b.a;
    bb = b.b;
    fp::roundInPlace(*h.format, a.data(), a.size(), h.overflow);
    fp::roundInPlace(*h.format, bb.data(), bb.size(), h.overflow);
    RowReplay replay{b, a, bb};
    bool holds = true;
    for (int64_t i = 0; i < m && holds; ++i) {
      replay.run(i, y);
      for (int64_t j = 0; j < n; ++j) {
        const double yj = y[std::size_t(j)];
        const double slack = 2 * gamma * double(b.absProduct[std::size_t(i * n + j)]) * 1.01 + 4 * u32 * std::fabs(yj) + 1e-30;
        if (!(std::fabs(double(c[i * n + j]) - yj) <= slack)) {
          holds = false;
          break;
        }
      }
    }
    if (holds) out.push_back(h.id);
  }
  return out;
}

// The sum of squared differences between the candidate and the GEMM replayed on the recorded inputs
// rounded to `format` (null: as they are, in fp32), in this replay's own summation order, over at
// most 64 rows spread evenly over the output (the same rows for every format: a comparison between
// replays, not a bound); it stops (returning what it has summed) as soon as the sum passes `limit`.
double replaySse(const float* c, const GemmBound& b, const fp::Format* format,
                 double limit = std::numeric_limits<double>::infinity()) {
  const int64_t m = b.rows, n = b.cols, step = std::max<int64_t>(1, m / 64);
  std::vector<float> a(b.a), bb(b.b);
  if (format) {
    fp::roundInPlace(*format, a.data(), a.size(), fp::Overflow::Standard);
    fp::roundInPlace(*format, bb.data(), bb.size(), fp::Overflow::Standard);
  }
  RowReplay replay{b, a, bb};
  std::vector<double> y;
  double sse = 0;
  for (int64_t i = 0; i < m; i += step) {
    replay.run(i, y);
    for (int64_t j = 0; j < n; ++j) {
      const double d = double(c[i * n + j]) - y[std::size_t(j)];
      sse += d * d;
    }
    if (sse > limit) break;  // already too far: the caller only asks whether it stays below
  }
  return sse;
}

// Several formats can reproduce a candidate within the replay's slack (the fp32 reordering bound,
// which is worst-case and linear in K): at K = 4096 a bf16 GEMM's typical error sits inside it, so
// tf32's and fp16's replays "reproduce" a bf16 candidate too. Of those, the format whose replay lies
// closest to the candidate (least squared difference over the same rows) is the one it was made
// with; formats whose replays are as close as the best (within 1%: identical rounding, as tf32 and
// fp16 on inputs inside fp16's range) keep their order, the others follow by distance.
std::vector<std::string> rankedByReplay(const float* c, const GemmBound& b, const std::vector<std::string>& formats) {
  if (formats.size() < 2) return formats;
  std::vector<std::pair<double, std::string>> byDistance;
  for (const std::string& id : formats) {
    const fp::Format* f = nullptr;
    for (const Hypothesis& h : kHypotheses)
      if (id == h.id) f = h.format;
    byDistance.emplace_back(f ? replaySse(c, b, f) : std::numeric_limits<double>::infinity(), id);
  }
  double best = std::numeric_limits<double>::infinity();
  for (const auto& d : byDistance) best = std::min(best, d.first);
  std::vector<std::string> out;
  for (const auto& d : byDistance)
    if (d.first <= best * 1.01) out.push_back(d.second);
  std::stable_sort(byDistance.begin(), byDistance.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  for (const auto& d : byDistance)
    if (!(d.first <= best * 1.01)) out.push_back(d.second);
  return out;
}

// A kernel that accumulates in fp16 (an HGEMM with an fp16 accumulator, or fp16 inputs summed in
// fp16 blocks) errs by the rounding of its running sums, not only of its inputs, so no replay that
// sums in fp32 reproduces it, and its error, about that of bf16 inputs, once made it look like bf16.
// Two signs of it, both needed: (1) its values before the bias lie on fp16's grid (the accumulator
// is fp16; a value that is not fp16 lands on the grid by chance with probability about 2^-12), and
// (2) it sits no farther from the replay of fp16-rounded inputs summed in fp32 than one fp16
// accumulation (this replay's own, in reverse order) does: at most 4x in RMS. A missing K tile or
// a misindexed operand in such a kernel is on the grid too, but tens of times farther away.
struct Fp16Accumulation {
  bool onGrid = false;
  double candidateRms = 0, accumulationRms = 0;  // from the fp16-input replay summed in fp32
  bool holds() const { return onGrid && candidateRms <= 4 * accumulationRms && accumulationRms > 0; }
};
Fp16Accumulation fp16Accumulation(const float* c, const GemmBound& b) {
  Fp16Accumulation out;
  const int64_t m = b.rows, n = b.cols, k = b.k, perBatch = b.rows / std::max<int64_t>(1, b.batch);
  if (b.a.empty() || double(m) * double(n) * double(k) > 5e8) return out;
  uint64_t off = 0, finiteCount = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float v = c[i * n + j];
      if (!finite(v)) continue;
      ++finiteCount;
      const double s = double(v) - biasAt(b, i, j);  // the accumulator's value, up to fp32's rounding of v
      const double nearest = double(fp::roundTo(fp::kFp16, float(s)));
      if (std::fabs(s - nearest) > std::ldexp(std::fabs(double(v)), -23) + 1e-30) ++off;
    }
  out.onGrid = finiteCount > 0 && double(off) <= 1e-3 * double(finiteCount);
  if (!out.onGrid) return out;
  std::vector<float> a(b.a), bb(b.b);
  fp::roundInPlace(fp::kFp16, a.data(), a.size(), fp::Overflow::Standard);
  fp::roundInPlace(fp::kFp16, bb.data(), bb.size(), fp::Overflow::Standard);
  RowReplay replay{b, a, bb};
  std::vector<double> y;
  std::vector<float> acc(static_cast<std::size_t>(n));
  double dc = 0, da = 0;
  const int64_t step = std::max<int64_t>(1, m / 64);
  for (int64_t i = 0; i < m; i += step) {
    replay.run(i, y);  // fp16 inputs, fp32 sums, bias added
    std::fill(acc.begin(), acc.end(), 0.0f);
    const float* bBatch = bb.data() + (i / perBatch) * k * n;
    for (int64_t q = k - 1; q >= 0; --q) {  // fp16 inputs, an fp16 accumulator, in reverse order
      const float av = a[std::size_t(i * k + q)];
      for (int64_t j = 0; j < n; ++j) acc[std::size_t(j)] = fp::roundTo(fp::kFp16, acc[std::size_t(j)] + av * bBatch[q * n + j]);
    }
    for (int64_t j = 0; j < n; ++j) {
      const double ref = y[std::size_t(j)], withAcc = double(acc[std::size_t(j)]) + biasAt(b, i, j);
      const double d = double(c[i * n + j]) - ref;
      if (finite(c[i * n + j])) dc += d * d;
      da += (withAcc - ref) * (withAcc - ref);
    }
  }
  out.candidateRms = std::sqrt(dc);
  out.accumulationRms = std::sqrt(da);
  return out;
}

int smallestBound(const float* g, const float* c, uint64_t n, const GemmBound& b, double& worstRatio) {
  const double u32 = std::ldexp(1.0, -24);
  const double kk = double(b.k);
  const double gamma = 2 * kk * u32 / (1 - kk * u32);  // golden and candidate each reorder or round once per step
  for (int idx = 0; idx < int(std::size(kBoundModels)); ++idx) {
    const double u = kBoundModels[idx].u;
    worstRatio = 0;
    bool holds = true;
    for (uint64_t i = 0; i < n; ++i) {
      if (!finite(g[i]) || !finite(c[i])) return -1;
      const double err = std::fabs(double(c[i]) - double(g[i]));
      if (err == 0) continue;
      // (a + da)(b + db) - ab with |da| <= u|a| + eta: (2u + u^2)|a||b| + eta(1 + u)(|a| + |b|) + eta^2, summed over k.
      const double eta = kBoundModels[idx].eta;
      const uint64_t row = i / uint64_t(b.cols), col = i % uint64_t(b.cols);
      const uint64_t batchOf = row / uint64_t(b.rows / std::max<int64_t>(1, b.batch));  // colAbsSum is per batch
      const double under =
          eta * (1 + u) * (double(b.rowAbsSum[row]) + double(b.colAbsSum[batchOf * uint64_t(b.cols) + col])) + kk * eta * eta;
      const double bound =
          (2 * u + u * u + gamma) * double(b.absProduct[i]) + under + 2 * u32 * std::fabs(double(g[i]));
      worstRatio = std::max(worstRatio, err / std::max(bound, 1e-300));
      if (err > bound) {
        holds = false;
        break;
      }
    }
    if (holds) return idx;
  }
  return -1;
}
}  // namespace

// The rules of docs/error-models.md in their documented order (R1-R12), each a few lines that add a
// verdict when its sufficient condition holds; the function is long (about 230 lines) because the
// rule list is, and reading them in one place is how they are reviewed against the document.
namespace {
// `report`: where to leave the analyzer's report of the first candidate (R13 reads it), or null.
Detection detectOne(const float* golden, const std::vector<const float*>& candidates, const std::vector<uint64_t>& shape,
                    const analyzer::ReportOptions& options, const GemmBound* bound, analyzer::Report* report = nullptr) {
  const float* c = candidates.front();
  analyzer::Report local;
  analyzer::Report& r = report ? *report : local;
  r = analyzer::analyze(golden, c, shape, options);
  const uint64_t n = r.elements, mis = r.mismatched;
  const double fraction = double(mis) / double(n);
  std::vector<Verdict> found;
  auto common = [&](Verdict& v) {
    v.evidence["elements"] = double(n);
    v.evidence["mismatched"] = double(mis);
    v.evidence["max_abs_over_scale"] = r.maxAbsOverScale;
    found.push_back(v);
  };

  // R1 nondeterministic: replays of the same input disagree with each other.
  for (std::size_t k = 1; k < candidates.size(); ++k) {
    uint64_t differ = 0;
    for (uint64_t i = 0; i < n; ++i) differ += bitsOf(candidates[k][i]) != bitsOf(c[i]) ? 1 : 0;
    if (differ > 0) {
      Verdict v = make("nondeterministic", 0.97,
                       "replays of the same input differ in " + std::to_string(differ) + " elements");
      v.evidence["replays"] = double(candidates.size());
      v.evidence["elements_differing_between_replays"] = double(differ);
      common(v);
      break;
    }
  }

  // R0 exact
  if (mis == 0) {
    Verdict v = make("exact", found.empty() ? 1.0 : 0.5, "bit-identical to golden");
    common(v);
  } else {
    const Mismatches m = inspect(golden, c, n, r);
    const bool sparse = mis <= std::max<uint64_t>(8, n / 1000);
    const int ulpMedian = medianLog2Ulp(r);

    // R2 nan_inf. When the few mismatches each differ from golden in one bit, a flip made the NaN or
    // Inf (an exponent bit of a large value): R4's bit_flip names the cause and outranks this symptom.
    if (r.newlyNonFinite > 0) {
      const bool flipped = sparse && m.allSingleBit;
      Verdict v = make("nan_inf", flipped ? 0.7 : 0.6 + 0.35 * double(r.newlyNonFinite) / double(mis),
                       std::to_string(r.newlyNonFinite) + " finite golden values became NaN or Inf" +
                           (flipped ? " by one flipped bit each" : ""));
      v.evidence["newly_non_finite"] = double(r.newlyNonFinite);
      common(v);
    }
    // R3 stuck_at: every mismatch is the same single bit forced to the same value, more than once.
    // The confidence allows for chance: k random flips of one bit all land on the same value with
    // probability 2^(1-k), so two or three such mismatches are weak evidence of a stuck bit.
    if (m.allSingleBit && m.sameBit && m.sameNewValue && mis >= 2) {
      Verdict v = make("stuck_at", 0.93 * (1 - std::ldexp(1.0, 1 - int(std::min<uint64_t>(mis, 60)))), "bit " + std::to_string(m.bit) + " reads " + std::to_string(m.newValue) +
                                             " in all " + std::to_string(mis) + " mismatched elements");
      v.parameters["bit"] = std::to_string(m.bit);
      v.parameters["value"] = std::to_string(m.newValue);
      v.evidence["bit"] = m.bit;
      v.evidence["longest_run"] = double(r.longestRun);
      common(v);
    }
    // R4 bit_flip: a few elements, each off by one bit, and not a rounding-sized bit.
    if (sparse && m.allSingleBit) {
      // A flip of a low mantissa bit in one or two elements looks like a one-ULP rounding change too.
      const bool lowBit = m.highestBit < 8;
      if (!lowBit || mis <= 2) {
        Verdict v = make("bit_flip", lowBit ? 0.6 : (mis == 1 ? 0.95 : (m.sameBit ? 0.85 : 0.75)),
                         std::to_string(mis) + " element(s) differ in one bit (bit " + std::to_string(m.bit) + ")");
        v.parameters["bit"] = std::to_string(m.bit);
        v.evidence["bit"] = m.bit;
        common(v);
        if (lowBit) {
          Verdict a = make("accumulation_order", 0.5, "a change of a low mantissa bit can also come from rounding");
          common(a);
        }
      }
    }
    // R5 multi_bit_flip: a few elements, each off by one block of adjacent bits reaching high bits.
    if (sparse && !m.allSingleBit && m.allContiguousBits && m.highestBit >= 12) {
      Verdict v = make("multi_bit_flip", 0.85,
                       std::to_string(mis) + " element(s) differ in adjacent bits up to bit " + std::to_string(m.highestBit));
      v.evidence["highest_bit"] = m.highestBit;
      common(v);
    }
    // R6 zeroed: every mismatched candidate value is zero.
    if (m.allZeroCandidate) {
      Verdict v = make("zeroed", mis >= 2 ? 0.94 : 0.85,
                       std::to_string(mis) + " element(s) are zero where golden is not; longest run " +
                           std::to_string(r.longestRun));
      v.evidence["longest_run"] = double(r.longestRun);
      common(v);
    }
    // R7 scaling: c = s g for one factor s over the mismatched elements.
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
        common(v);
      }
    }
    // Structure of the large mismatches (R8, R9). Confinement is judged against chance: L large
    // errors scattered at random over R rows hit R (1 - (1 - 1/R)^L) distinct rows on average, so a
    // few dozen large rounding errors in a 512 x 512 output hit "only" 60 of its columns without
    // any structure. Confined means at most a quarter of the rows (or columns) chance would hit.
    const double largeFraction = double(m.large) / double(n);
    const bool periodic = m.largeDominantGap > 1 && m.largeGapShare >= 0.5;
    auto chanceHits = [&](uint64_t lines) {
      return lines > 1 ? double(lines) * -std::expm1(double(m.large) * std::log1p(-1.0 / double(lines))) : 1.0;
    };
    const uint64_t cols = std::min<uint64_t>(r.cols, 1 << 20), rows = std::min<uint64_t>(r.rows, 1 << 20);
    const bool confined = r.cols > 1 && ((cols > 1 && double(m.largeColsHit) * 4 <= chanceHits(cols)) ||
                                         (rows > 1 && double(m.largeRowsHit) * 4 <= chanceHits(rows)));
    // R8 random_value: large errors in single elements, a few of them (sparse), or up to a fifth of
    // the tensor scattered without structure (nearly every mismatch large, none periodic or confined).
    const bool scattered = !sparse && fraction <= 0.2 && double(m.large) >= 0.9 * double(mis) && !periodic && !confined;
    if ((sparse || scattered) && !m.allSingleBit && !m.allZeroCandidate && r.newlyNonFinite == 0 && r.maxRel > 1e-2 &&
        !(m.allContiguousBits && m.highestBit >= 12)) {
      Verdict v = make("random_value", 0.7, std::to_string(mis) + " element(s) replaced by unrelated values");
      v.evidence["max_rel"] = r.maxRel;
      common(v);
    }
    // R9 index_error: large errors at structured places (periodic, or confined to some rows or
    // columns), judged on the large mismatches only, so reordering noise elsewhere does not hide them.
    if (m.large > std::max<uint64_t>(8, n / 1000) && largeFraction <= 0.5 && (periodic || confined) &&
        !m.allZeroCandidate && !(m.allSingleBit && m.sameBit)) {
      Verdict v = make("index_error", periodic ? 0.85 : 0.75,
                       periodic ? "large errors repeat every " + std::to_string(m.largeDominantGap) + " elements"
                                : "large errors confined to " + std::to_string(m.largeColsHit) + " columns and " +
                                      std::to_string(m.largeRowsHit) + " rows");
      v.evidence["large_mismatches"] = double(m.large);
      v.evidence["dominant_gap"] = double(m.largeDominantGap);
      v.evidence["dominant_gap_share"] = m.largeGapShare;
      v.evidence["columns_hit"] = double(m.largeColsHit);
      v.evidence["rows_hit"] = double(m.largeRowsHit);
      v.evidence["columns_hit_by_chance"] = chanceHits(cols);
      v.evidence["rows_hit_by_chance"] = chanceHits(rows);
      // what the views draw: the period of a periodic pattern, or that it is confined to rows/columns
      if (periodic) v.evidence["stride"] = double(m.largeDominantGap);
      else v.evidence["confined"] = 1;
      common(v);
    }
    // R12: with the GEMM's operands, the smallest worst-case rounding bound that holds decides.
    bool bounded = false, blocksReplayed = false;  // blocksReplayed: the block-scaled formats were replayed on operands
    if (bound && bound->absProduct.size() == n && r.newlyNonFinite == 0 && !sparse) {
      double ratio = 0;
      int idx = smallestBound(golden, c, n, *bound, ratio);
      std::vector<std::string> reproduced = idx > 0 ? rankedByReplay(c, *bound, reproducingFormats(c, *bound)) : std::vector<std::string>{};
      // Within the fp32 reordering bound (a worst case, linear in K), a 10-bit format's rounding can
      // hide too: at K = 1024 a tf32 GEMM's typical error is below that bound. The candidate then
      // says which it is by which replay it sits closer to: a reordered fp32 sum is near the fp32
      // replay and far from any format's (their rounding dominates), a format's GEMM the reverse.
      // Closer by 16x in squared error (4x in RMS), and reproduced within the replay's bound, names
      // the format.
      double closer = 0;
      if (idx == 0 && !bound->a.empty() && double(bound->rows) * double(bound->cols) * double(bound->k) <= 5e8) {
        const double fp32 = replaySse(c, *bound, nullptr);
        for (const fp::Format* format : {&fp::kTf32, &fp::kFp16, &fp::kBf16}) {
          if (!(fp32 > 0)) break;
          const double sse = replaySse(c, *bound, format, fp32 / 16);  // a reordered sum stops within a few rows
          if (!(sse * 16 < fp32)) continue;
          const std::string f(format->name);
          const std::vector<std::string> formats = reproducingFormats(c, *bound);  // and within the replay's bound
          if (std::find(formats.begin(), formats.end(), f) == formats.end()) continue;
          for (int t = 1; t < int(std::size(kBoundModels)); ++t)
            if (f == kBoundModels[t].format) idx = t;
          reproduced = {f};  // first, then the others that also reproduce it
          for (const std::string& other : formats)
            if (other != f) reproduced.push_back(other);
          closer = fp32 / std::max(sse, 1e-300);
          break;
        }
      }
      // block-scaled formats (core/detector/block_replay.h): where no element format reproduces it,
      // or no bound holds at all (MXFP4's and NVFP4's errors exceed even fp8's elementwise bound)
      std::optional<BlockMatch> blockMatch;
      if (idx != 0 && reproduced.empty()) {
        blockMatch = reproducingBlockScheme(c, *bound);
        blocksReplayed = double(bound->rows) * double(bound->cols) * double(bound->k) <= 5e8 && !bound->a.empty() && bound->batch == 1;
      }
      // fp16 inputs accumulated in fp16: no fp32-summing replay reproduces it (above)
      std::optional<Fp16Accumulation> halfAcc;
      if (idx != 0 && reproduced.empty() && !blockMatch) {
        halfAcc = fp16Accumulation(c, *bound);
        if (!halfAcc->holds()) halfAcc.reset();
      }
      if (halfAcc) {
        Verdict v = make("precision_loss", 0.95,
                         "the candidate lies on fp16's grid (before the bias) and as close to the replay of fp16 inputs "
                         "as one fp16 accumulation: fp16 inputs summed in fp16 (K = " + std::to_string(bound->k) + ")");
        v.parameters["format"] = "fp16";
        v.parameters["accumulation"] = "fp16";
        v.evidence["k"] = double(bound->k);
        v.evidence["rms_from_fp16_replay"] = halfAcc->candidateRms;
        v.evidence["rms_of_one_fp16_accumulation"] = halfAcc->accumulationRms;
        bounded = true;
        common(v);
      }
      if (blockMatch) {
        const BlockScheme& s = blockMatch->scheme;
        const std::string name(s.format.name), size = std::to_string(s.block);
        const std::string how = "quantising the recorded inputs" + std::string(s.output ? " and the output" : "") +
                                " to " + name + " in blocks of " + size;
        Verdict v;
        if (s.legitimate()) {
          v = make("precision_loss", 0.98, how + " along K = " + std::to_string(bound->k) + " reproduces the candidate");
        } else if (s.bug == fp::BlockBug::TruncatedScale) {
          v = make("scaling", 0.97, how + " with each block's scale truncated instead of rounded as the format "
                                   "specifies reproduces the candidate: values scaled up to twice too far, blocks saturate");
        } else if (s.wrongDimension) {
          v = make("index_error", 0.97, how + " along M and N instead of along the reduction (K = " +
                                        std::to_string(bound->k) + ") reproduces the candidate");
        } else {
          v = make("index_error", 0.97, how + " along K, each block scaled with the next block's scale (off by one "
                                        "block), reproduces the candidate");
        }
        v.parameters["format"] = name;
        v.parameters["block"] = size;
        if (s.output) v.parameters["output"] = "quantised";
        if (!s.legitimate()) v.parameters["bug"] = s.bugName();
        if (!blockMatch->alsoReproducedBy.empty()) {
          std::string also;
          for (const std::string& f : blockMatch->alsoReproducedBy) also += (also.empty() ? "" : ",") + f;
          v.parameters["also_reproduced_by"] = also;
        }
        v.evidence["k"] = double(bound->k);
        v.evidence["block"] = double(s.block);
        v.evidence["reproduced"] = 1.0;
        bounded = true;
        common(v);
      }
      if (idx >= 0 && !blockMatch && !halfAcc) {
        bounded = true;
        const BoundModel& b = kBoundModels[idx];
        // Worst-case bounds are loose (rounding errors mostly cancel), so the smallest bound that holds
        // settles reordering against rounding; replaying each format on the recorded inputs, or else
        // the typical error size, names the format.
        std::string format = b.format;
        double confidence = 0.9;
        if (!reproduced.empty()) {
          format = reproduced.front();
          confidence = 0.98;
        } else if (idx > 0) {
          const char* typical = ulpMedian <= 12 ? "" : ulpMedian <= 16 ? "bf16" : ulpMedian <= 18 ? "fp8_e4m3" : "fp8_e5m2";
          for (int t = idx; t < int(std::size(kBoundModels)); ++t)
            if (*typical && std::string(kBoundModels[t].format) == typical) format = typical;
          // Without a replay that reproduces it, only fp8's loose bound says "rounding": too weak alone.
          confidence = b.u >= std::ldexp(1.0, -4) ? 0.45 : 0.75;
        }
        Verdict v = make(b.model, confidence,
                         !reproduced.empty()
                             ? "rounding the recorded inputs to " + format + " reproduces the candidate (K = " +
                                   std::to_string(bound->k) + ")"
                             : std::string("every error is within the bound of ") +
                                   (*b.format ? std::string("inputs rounded to ") + b.format
                                              : std::string("an fp32 reordering")) +
                                   " for K = " + std::to_string(bound->k));
        if (!format.empty()) v.parameters["format"] = format;
        if (reproduced.size() > 1) {
          std::string also;
          for (std::size_t t = 1; t < reproduced.size(); ++t) also += (also.empty() ? "" : ",") + reproduced[t];
          v.parameters["also_reproduced_by"] = also;
        }
        v.evidence["k"] = double(bound->k);
        v.evidence["worst_error_over_bound"] = ratio;
        v.evidence["reproduced"] = reproduced.empty() ? 0.0 : 1.0;
        if (closer > 0) v.evidence["closer_than_fp32"] = closer;  // squared-error ratio, fp32 replay over the format's
        common(v);
        if (confidence < 0.5) {
          Verdict u = make("unknown", 0.5,
                           "errors fit only fp8's loose bound, and no format's rounding of the recorded inputs "
                           "reproduces them");
          common(u);
        }
      }
    }
    // R9b: dense errors larger than rounding to any per-element format makes (fp8 e5m2 gives a mean
    // of about 5% of the tensor's scale): part of a reduction is missing or misindexed. Block-scaled
    // 4-bit inputs (MXFP4, NVFP4) make dense errors up to about a quarter of the scale too (0.04 to
    // 0.16 on the zoo's chargpt attention): below 0.3, without operands whose replay rules them out, the
    // outputs alone cannot tell the two apart, and the verdict says so rather than name a fault.
    if (fraction >= 0.5 && r.newlyNonFinite == 0 && r.meanAbsOverScale > 0.08) {
      uint64_t size = 0;
      // one matrix of a batch ([B, T, N]: its first [T, N]; stacked matrices add their ranks)
      const uint64_t slab = shape.size() >= 3 ? shape[shape.size() - 2] : (r.cols > 0 ? n / r.cols : 0);
      // A sum that misses a few of its K terms errs by a product of thin matrices, of rank at most the
      // terms missed, while the golden output has rank up to K and perturbed inputs give errors of
      // rank up to 2K (rounded outputs: full rank). An error of at most half the golden's rank is low.
      const int rank = r.cols > 1 ? numericalRank(golden, c, slab, r.cols, 192, size) : 0;
      const int goldenRank = r.cols > 1 ? numericalRank(nullptr, golden, slab, r.cols, 192, size) : 0;
      const bool lowRank = size >= 16 && rank * 2 <= goldenRank;
      const bool fp4Sized = r.meanAbsOverScale <= 0.3 && !bounded && !blocksReplayed && !lowRank;
      Verdict v = make("index_error", fp4Sized ? 0.5 : lowRank ? 0.8 : 0.7,
                       "dense errors averaging " + number(r.meanAbsOverScale) +
                           " of the tensor's scale, beyond any per-element format's rounding" +
                           (lowRank ? ", of rank " + std::to_string(rank) + " where the golden output's is " +
                                          std::to_string(goldenRank) + " (rounded inputs give errors of rank up to twice it)"
                                    : std::string()) +
                           ": part of a reduction is missing");
      v.evidence["mean_abs_over_scale"] = r.meanAbsOverScale;
      if (size > 0) v.evidence["error_rank"] = rank, v.evidence["golden_rank"] = goldenRank;
      common(v);
      if (fp4Sized) {
        Verdict u = make("unknown", 0.55,
                         "dense errors averaging " + number(r.meanAbsOverScale) +
                             " of the tensor's scale: as large as block-scaled 4-bit inputs (MXFP4, NVFP4) make, or part "
                             "of a reduction missing; outputs alone cannot tell them apart (record the call's operands "
                             "and the detector replays the formats)");
        u.evidence["mean_abs_over_scale"] = r.meanAbsOverScale;
        common(u);
        Verdict p = make("precision_loss", 0.45, "dense errors of the size block-scaled 4-bit inputs make");
        p.parameters["format"] = "mxfp4|nvfp4";
        p.evidence["mean_abs_over_scale"] = r.meanAbsOverScale;
        common(p);
      }
    }
    // R10b: a kernel that quantised its output to a block-scaled format leaves every block of values
    // along the rows on that format's grid with one scale per block (core/detector/block_replay.h).
    // 4-bit elements first: no per-element format has one mantissa bit.
    std::optional<OutputGrid> grid;
    if (fraction >= 0.2 && r.newlyNonFinite == 0 && r.cols > 0) grid = outputBlockGrid(golden, c, n, r.cols, false);
    if (grid) {
      Verdict v = make("precision_loss", 0.96,
                       "every block of " + std::to_string(grid->block) + " values along the rows lies on " + grid->format +
                           "'s grid with one scale per block: the output was quantised");
      v.parameters["format"] = grid->format;
      v.parameters["block"] = std::to_string(grid->block);
      v.parameters["output"] = "quantised";
      v.evidence["block"] = grid->block;
      common(v);
    }
    // R10/R11 dense small errors: rounding to a narrower format, or another summation order.
    const bool dense = fraction >= 0.2 && r.newlyNonFinite == 0 && r.signOnly == 0;
    if ((dense || (!sparse && r.newlyNonFinite == 0)) && r.meanAbsOverScale <= 0.08) {
      if (const fp::Format* f = outputFormat(golden, c, n)) {
        Verdict v = make("precision_loss", 0.96, "every candidate value is exactly representable in " + formatId(*f));
        v.parameters["format"] = formatId(*f);
        v.evidence["median_log2_ulp"] = ulpMedian;
        common(v);
      } else if (const std::optional<OutputGrid> wide = grid ? std::nullopt : outputBlockGrid(golden, c, n, r.cols, true)) {
        Verdict v = make("precision_loss", 0.95,
                         "every block of " + std::to_string(wide->block) + " values along the rows lies on " +
                             wide->format + "'s grid with one scale per block: the output was quantised");
        v.parameters["format"] = wide->format;
        v.parameters["block"] = std::to_string(wide->block);
        v.parameters["output"] = "quantised";
        v.evidence["block"] = wide->block;
        common(v);
      } else if (!bounded && ulpMedian >= 0 && r.maxAbsOverScale < 0.5) {
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
        for (const Band& b : bands)
          if (ulpMedian >= b.lo && ulpMedian <= b.hi) {
            Verdict v = make(b.model, dense ? b.confidence : b.confidence * 0.8,
                             std::string("dense errors, median ") + std::to_string(ulpMedian) + " of 23 mantissa bits disturbed");
            if (*b.format) v.parameters["format"] = b.format;
            v.evidence["median_log2_ulp"] = ulpMedian;
            v.evidence["mismatch_fraction"] = fraction;
            common(v);
          }
      }
    }
    if (found.empty()) {
      Verdict v = make("unknown", 0.2, "no rule of docs/error-models.md holds");
      v.evidence["median_log2_ulp"] = ulpMedian;
      common(v);
    }
  }

  std::stable_sort(found.begin(), found.end(), [](const Verdict& a, const Verdict& b) { return a.confidence > b.confidence; });
  Detection d;
  d.verdict = found.front();
  d.alternatives.assign(found.begin() + 1, found.end());
  return d;
}

bool legitimate(const std::string& model) {
  return model == "exact" || model == "precision_loss" || model == "accumulation_order";
}
}  // namespace

// R13, two errors at once: dense small errors (rounding, reordering) with a few elements far beyond
// them. The bulk is what 99% of the mismatches stay within (to a power of two); an outlier is more than 64 times that
// and beyond 2^-6 of the tensor's scale (its rms), and there are at most max(8, n/1000) of them. When every outlier is one flipped bit away from the bulk
// (flipping that bit back brings its error within 4x the bulk), the fault is bit_flip; otherwise
// random_value. The rest of the pair, with the outliers repaired, is detected on its own and, when
// legitimate, becomes the secondary finding: a bf16 kernel with a bug is named as the bug, with the
// precision loss beside it, not as a third model.
Detection detect(const float* golden, const std::vector<const float*>& candidates, const std::vector<uint64_t>& shape,
                 const analyzer::ReportOptions& options, const GemmBound* bound) {
  if (candidates.empty()) throw std::invalid_argument("detect needs at least one candidate");
  analyzer::Report report;
  Detection d = detectOne(golden, candidates, shape, options, bound, &report);
  if (candidates.size() != 1 || d.verdict.model == "exact") return d;
  const float* c = candidates.front();
  uint64_t n = 1;
  for (uint64_t e : shape) n *= e;
  // the analyzer's report (which the rules used) holds what this needs: the tensor's scale (its rms,
  // here over all n elements), and the histogram of floor(log2 |c - g|) over the finite mismatches
  const uint64_t goldenFinite = n - report.goldenNaN - report.goldenInf;
  const double scale = report.goldenRms * std::sqrt(double(goldenFinite) / double(std::max<uint64_t>(n, 1)));
  uint64_t mismatched = 0;
  for (uint64_t count : report.log2Abs) mismatched += count;
  if (mismatched < std::max<uint64_t>(100, n / 5)) return d;  // not a dense bulk
  // the bulk: the top of the histogram bin holding the 99th percentile (within a factor of 2)
  std::size_t bin = 0;
  for (uint64_t seen = 0; bin < report.log2Abs.size(); ++bin)
    if ((seen += report.log2Abs[bin]) >= mismatched * 99 / 100) break;
  const double bulk = std::ldexp(1.0, int(bin) + analyzer::Report::kLog2AbsMin + 1);
  const double threshold = std::max(bulk * 64.0, scale * std::ldexp(1.0, -6));
  // no element beyond it (the largest finite error is not, and no finite golden became NaN or Inf)
  if (report.maxAbs <= threshold && report.newlyNonFinite == 0) return d;
  std::vector<uint64_t> outliers;
  for (uint64_t i = 0; i < n && outliers.size() <= std::max<uint64_t>(8, n / 1000); ++i)
    if (finite(golden[i]) && (!finite(c[i]) || std::fabs(double(c[i]) - double(golden[i])) > threshold)) outliers.push_back(i);
  if (outliers.empty() || outliers.size() > std::max<uint64_t>(8, n / 1000)) return d;
  std::vector<float> repaired(c, c + n);
  int bitsExplained = 0, firstBit = -1;
  bool sameBit = true;
  for (uint64_t i : outliers) {
    int explained = -1;
    for (int b = 31; b >= 0 && explained < 0; --b) {
      const float back = floatOf(bitsOf(c[i]) ^ (uint32_t(1) << b));
      if (finite(back) && std::fabs(double(back) - double(golden[i])) <= 4 * bulk) explained = b;
    }
    if (explained >= 0) {
      ++bitsExplained;
      repaired[i] = floatOf(bitsOf(c[i]) ^ (uint32_t(1) << explained));
      if (firstBit < 0) firstBit = explained;
      sameBit = sameBit && explained == firstBit;
    } else {
      repaired[i] = golden[i];
    }
  }
  const Detection rest = detectOne(golden, {repaired.data()}, shape, options, bound);
  if (!legitimate(rest.verdict.model)) return d;
  const bool flips = bitsExplained == int(outliers.size());
  std::string secondary = rest.verdict.model;
  if (rest.verdict.parameters.count("format")) secondary += " (" + rest.verdict.parameters.at("format") + ")";
  Verdict v = make(flips ? "bit_flip" : "random_value", flips ? 0.9 : 0.8,
                   std::to_string(outliers.size()) + " element(s) " +
                       (flips ? "one flipped bit" + std::string(sameBit ? " (bit " + std::to_string(firstBit) + ")" : "") +
                                    " away from the rest"
                              : "far beyond the rest") +
                       ", on top of " + secondary + " everywhere else");
  if (flips && sameBit) {
    v.parameters["bit"] = std::to_string(firstBit);
    v.evidence["bit"] = firstBit;
  }
  v.parameters["secondary"] = secondary;
  v.evidence["outliers"] = double(outliers.size());
  v.evidence["first_outlier"] = double(outliers.front());
  v.evidence["bulk_error_p99"] = bulk;
  v.evidence["elements"] = double(n);
  v.evidence["mismatched"] = double(mismatched);
  Detection out;
  out.verdict = v;
  out.findings.push_back(rest.verdict);
  out.alternatives.push_back(d.verdict);
  out.alternatives.insert(out.alternatives.end(), d.alternatives.begin(), d.alternatives.end());
  return out;
}

}  // namespace peat::detector
