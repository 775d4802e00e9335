// SPDX-License-Identifier: MIT
#include "core/detector/block_replay.h"
#include "core/detector/gemm_replay.h"

#include <algorithm>
#include <cmath>

namespace peat::detector {

std::string BlockScheme::bugName() const {
  if (wrongDimension) return "wrong-dim";
  if (bug == fp::BlockBug::WrongBlock) return "wrong-block";
  if (bug == fp::BlockBug::TruncatedScale) return "truncated-scale";
  return "none";
}

namespace {

// b^T [n, k] as the scheme quantises it, and a [m, k] when the blocks run along M (along K, a's rows
// are quantised one at a time as the replay reaches them: a scheme that fails on the first row
// costs one pass over b).
struct Quantised {
  std::vector<float> a, bt;
  float aAmax = 0;
};

Quantised quantiseOperands(const GemmBound& g, const BlockScheme& s) {
  const int64_t m = g.rows, n = g.cols, k = g.k;
  Quantised q{{}, std::vector<float>(std::size_t(n * k))};
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) q.bt[std::size_t(j * k + p)] = g.b[std::size_t(p * n + j)];
  q.aAmax = operandAmaxA(g);  // made once per bound, shared with the elementwise replays
  const float bAmax = operandAmaxB(g);  // b^T holds b's values
  if (!s.wrongDimension) {
    for (int64_t j = 0; j < n; ++j) fp::quantizeBlocks(s.format, q.bt.data() + j * k, uint64_t(k), s.block, s.bug, bAmax);
    return q;
  }
  // blocks along M for a (its columns) and along N for b (its rows)
  q.a = g.a;
  std::vector<float> line(static_cast<std::size_t>(std::max(m, n)));
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t i = 0; i < m; ++i) line[std::size_t(i)] = q.a[std::size_t(i * k + p)];
    fp::quantizeBlocks(s.format, line.data(), uint64_t(m), s.block, s.bug, q.aAmax);
    for (int64_t i = 0; i < m; ++i) q.a[std::size_t(i * k + p)] = line[std::size_t(i)];
    for (int64_t j = 0; j < n; ++j) line[std::size_t(j)] = q.bt[std::size_t(j * k + p)];
    fp::quantizeBlocks(s.format, line.data(), uint64_t(n), s.block, s.bug, bAmax);
    for (int64_t j = 0; j < n; ++j) q.bt[std::size_t(j * k + p)] = line[std::size_t(j)];
  }
  return q;
}

bool compareRows(const float* c, const GemmBound& g, const BlockScheme& s, const Quantised& q) {
  const int64_t m = g.rows, n = g.cols, k = g.k;
  const double u32 = std::ldexp(1.0, -24), gamma = 2 * double(k) * u32 / (1 - double(k) * u32);
  // NVFP4's output tensor scale: the largest output keeps its value exactly (its block scale is
  // E4M3's largest and its element E2M1's), so the candidate's amax (less the bias) is the product's.
  float outAmax = 0;
  if (s.output)
    for (int64_t i = 0; i < m * n; ++i)
      outAmax = std::max(outAmax, std::fabs(c[i] - (g.bias.empty() ? 0.0f : g.bias[std::size_t(i % n)])));
  // an output that is all zeros has no scale to replay: every block would underflow to the zeros
  // the candidate left (a dropped K tile), which is R6's, not a quantisation's
  if (s.output && !(outAmax > 0)) return false;
  uint64_t stepOff = 0;
  const uint64_t stepBudget = std::max<uint64_t>(2, uint64_t(m * n) / 1000);
  std::vector<float> row(static_cast<std::size_t>(n)), aRow(static_cast<std::size_t>(k));
  std::vector<double> mag(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    if (s.wrongDimension) {
      std::copy_n(q.a.begin() + i * k, k, aRow.begin());
    } else {
      std::copy_n(g.a.begin() + i * k, k, aRow.begin());
      fp::quantizeBlocks(s.format, aRow.data(), uint64_t(k), s.block, s.bug, q.aAmax);
    }
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0;
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const float prod = aRow[std::size_t(p)] * q.bt[std::size_t(j * k + p)];
        acc += prod;
        sum += std::fabs(double(prod));
      }
      row[std::size_t(j)] = acc;
      mag[std::size_t(j)] = sum;
    }
    float rowAmax = 0;
    if (s.output) {
      rowAmax = finiteAmax(row.data(), row.size());
      fp::quantizeBlocks(s.format, row.data(), uint64_t(n), s.block, fp::BlockBug::None, outAmax);
    }
    for (int64_t j = 0; j < n; ++j) {
      const double y = double(row[std::size_t(j)]) + (g.bias.empty() ? 0.0 : double(g.bias[std::size_t(j)]));
      const double err = std::fabs(double(c[i * n + j]) - y);
      const double slack = 2 * gamma * mag[std::size_t(j)] * 1.01 + 4 * u32 * std::fabs(y) + 1e-30;
      if (err <= slack) continue;
      // a sum at a rounding midpoint may round the other way in the candidate's order: one step
      if (s.output && err <= 0.25 * double(rowAmax) + slack && ++stepOff <= stepBudget) continue;
      return false;
    }
  }
  return true;
}

// GEMM t of a batched bound, as a bound of its own: a block-scaled kernel quantises each GEMM of a
// batch on its own (its tensor amax, its blocks), as runThroughGemm and batched GEMM kernels do.
std::optional<GemmBound> batchEntry(const GemmBound& g, int64_t t) {
  const int64_t m = g.rows / g.batch, n = g.cols, k = g.k;
  if (m * g.batch != g.rows || int64_t(g.a.size()) != g.rows * k || int64_t(g.b.size()) != g.batch * k * n)
    return std::nullopt;
  GemmBound s;
  s.rows = m, s.cols = n, s.k = k, s.batch = 1;
  s.a.assign(g.a.begin() + t * m * k, g.a.begin() + (t + 1) * m * k);
  s.b.assign(g.b.begin() + t * k * n, g.b.begin() + (t + 1) * k * n);
  if (int64_t(g.bias.size()) == n) s.bias = g.bias;
  else if (int64_t(g.bias.size()) == g.batch * n) s.bias.assign(g.bias.begin() + t * n, g.bias.begin() + (t + 1) * n);
  return s;
}

}  // namespace

bool replaysBlockScheme(const float* c, const GemmBound& g, const BlockScheme& s) {
  if (g.a.empty() || g.rows <= 0 || g.cols <= 0 || g.k <= 0 || g.batch < 1) return false;
  if (g.batch == 1) return compareRows(c, g, s, quantiseOperands(g, s));
  for (int64_t t = 0; t < g.batch; ++t) {  // a batched GEMM: each of its GEMMs replayed on its own
    const std::optional<GemmBound> one = batchEntry(g, t);
    if (!one || !compareRows(c + t * one->rows * one->cols, *one, s, quantiseOperands(*one, s))) return false;
  }
  return true;
}

std::optional<BlockMatch> reproducingBlockScheme(const float* c, const GemmBound& g) {
  if (g.a.empty() || double(g.rows) * double(g.cols) * double(g.k) > 5e8) return std::nullopt;
  std::vector<BlockScheme> schemes;
  auto addFor = [&](bool output, fp::BlockBug bug, bool wrongDimension) {
    for (const int size : {0, 16, 32, 64, 128})
      for (const fp::BlockFormat& f : fp::blockFormats()) {
        if (size != 0 && size == f.blockSize) continue;  // tried at its own size
        schemes.push_back({f, size == 0 ? f.blockSize : size, output, bug, wrongDimension});
      }
  };
  addFor(false, fp::BlockBug::None, false);
  addFor(true, fp::BlockBug::None, false);
  addFor(false, fp::BlockBug::WrongBlock, false);
  addFor(false, fp::BlockBug::TruncatedScale, false);
  addFor(false, fp::BlockBug::None, true);
  for (std::size_t t = 0; t < schemes.size(); ++t) {
    if (!replaysBlockScheme(c, g, schemes[t])) continue;
    BlockMatch match{schemes[t], {}};
    for (std::size_t u = t + 1; u < schemes.size(); ++u) {
      const BlockScheme& o = schemes[u];
      if (o.block == schemes[t].block && o.output == schemes[t].output && o.bug == schemes[t].bug &&
          o.wrongDimension == schemes[t].wrongDimension && replaysBlockScheme(c, g, o))
        match.alsoReproducedBy.push_back(std::string(o.format.name));
    }
    return match;
  }
  return std::nullopt;
}

namespace {

// Every block of the rows of v lies on the grid of f's elements times one scale per block; counts
// the blocks with a nonzero value in `nonzero`.
bool onBlockGrid(const fp::BlockFormat& f, const float* v, uint64_t n, uint64_t cols, uint64_t block, uint64_t& nonzero) {
  const float elementMax = fp::decode(f.element, fp::maxFinite(f.element));
  const int emax = fp::largestExponent(f.element);
  nonzero = 0;
  for (uint64_t row = 0; row < n; row += cols)
    for (uint64_t first = row; first < std::min(n, row + cols); first += block) {
      const uint64_t last = std::min({n, row + cols, first + block});
      const float amax = finiteAmax(v + first, std::size_t(last - first));
      if (amax == 0) continue;
      ++nonzero;
      float scales[2];
      int tries = 0;
      if (f.scale == fp::ScaleKind::E8M0) {
        int e = 0;
        std::frexp(amax, &e);
        scales[tries++] = std::ldexp(1.0f, e - 1 - emax);
      } else {
        scales[tries++] = amax / elementMax;
        scales[tries++] = amax / (elementMax * 2 / 3);  // E2M1's 4
      }
      bool fits = false;
      for (int t = 0; t < tries && !fits; ++t) {
        fits = true;
        for (uint64_t i = first; i < last && fits; ++i) {
          if (!std::isfinite(v[i])) return false;
          const float e = v[i] / scales[t];
          const float r = fp::roundTo(f.element, e, fp::Overflow::Saturate);
          fits = std::fabs(e) <= elementMax * 1.000001f && std::fabs(e - r) <= 1e-5f * std::max(1.0f, std::fabs(e));
        }
      }
      if (!fits) return false;
    }
  return true;
}

}  // namespace

std::optional<OutputGrid> outputBlockGrid(const float* golden, const float* c, uint64_t n, uint64_t cols,
                                          bool wideElements) {
  if (n == 0 || cols == 0 || n % cols != 0) return std::nullopt;
  for (const fp::BlockFormat& f : fp::blockFormats()) {
    const bool fp4 = f.element.manBits == 1;
    if (fp4 == wideElements) continue;
    for (const uint64_t block : {uint64_t(128), uint64_t(64), uint64_t(32), uint64_t(16)}) {
      if (f.scale == fp::ScaleKind::E4M3 && block != uint64_t(f.blockSize)) continue;
      uint64_t nonzero = 0, goldenNonzero = 0;
      if (!onBlockGrid(f, c, n, cols, block, nonzero) || nonzero < 8) continue;
      if (onBlockGrid(f, golden, n, cols, block, goldenNonzero)) return std::nullopt;  // nothing changed the grid
      return OutputGrid{std::string(f.name), int(block)};
    }
  }
  return std::nullopt;
}

}  // namespace peat::detector
