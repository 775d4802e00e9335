// SPDX-License-Identifier: MIT
#include "core/analyzer/report.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "core/analyzer/error_summary.h"
#include "core/fp/format.h"
#include "core/fp/ulp.h"

namespace peat::analyzer {

namespace {

constexpr uint64_t kMaxGap = 4096;      // gaps up to this are counted one by one for the periodicity
constexpr std::size_t kErrorBins = 1 << 15;  // top 16 bits of a non-negative fp32: percentile buckets

// spread[v] holds bit j of v in byte j: four lookups add one element's 32 bit flags into four
// 64-bit words of byte-wide counters, flushed before any byte can overflow.
struct ByteSpread {
  uint64_t table[256];
  ByteSpread() {
    for (unsigned v = 0; v < 256; ++v) {
      table[v] = 0;
      for (unsigned j = 0; j < 8; ++j) table[v] |= uint64_t((v >> j) & 1) << (8 * j);
    }
  }
};
const ByteSpread kSpread;
constexpr uint64_t kMaxTiles = 1 << 20;

using fp::bitsOf;

inline int floorLog2(double v) {  // v > 0, finite
  uint64_t u;
  std::memcpy(&u, &v, 8);
  const int e = int((u >> 52) & 0x7ff);
  if (e != 0) return e - 1023;
  return -1074 + (63 - __builtin_clzll(u & ((uint64_t(1) << 52) - 1)));  // subnormal double: never from fp32 diffs
}

struct Layout {
  uint64_t rows, cols, rowBin, colBin, rowBins, colBins, tileRows, tileCols, tilesDown, tilesAcross;
  bool tiles;
};

struct Partial {
  uint64_t identical = 0, mismatched = 0, gNaN = 0, gInf = 0, cNaN = 0, cInf = 0, newlyNonFinite = 0, nanPairs = 0;
  double sumAbs = 0, sumSq = 0, sumRel = 0, maxAbs = -1, maxRel = 0, sumG2 = 0;
  uint64_t gFinite = 0, maxAbsIndex = 0;
  std::vector<uint64_t> log2Abs = std::vector<uint64_t>(Report::kLog2AbsMax - Report::kLog2AbsMin + 1);
  std::array<uint64_t, 33> log2Ulp{};
  std::array<uint64_t, 32> bits{};
  uint64_t signOnly = 0, exponentInvolved = 0, mantissaOnly = 0;
  std::vector<uint64_t> rows, cols, tiles;
  // runs
  uint64_t leadingRun = 0, trailingRun = 0, runs = 0, longestRun = 0;
  bool allMismatched = false;
  std::array<uint64_t, 41> runLog2{};
  // gaps
  std::vector<uint64_t> gaps = std::vector<uint64_t>(kMaxGap + 1);
  int64_t firstMismatch = -1, lastMismatch = -1;
  std::vector<uint64_t> errorBins = std::vector<uint64_t>(kErrorBins);  // |c - g| as fp32, by its top 16 bits
  uint64_t errors = 0;
};

void addRun(Partial& p, uint64_t length) {
  if (length == 0) return;
  ++p.runs;
  p.longestRun = std::max(p.longestRun, length);
  ++p.runLog2[std::size_t(63 - __builtin_clzll(length))];
}

void scan(const float* g, const float* c, uint64_t lo, uint64_t hi, const Layout& L, Partial& p) {
  p.rows.assign(L.rowBins, 0);
  p.cols.assign(L.colBins, 0);
  if (L.tiles) p.tiles.assign(L.tilesDown * L.tilesAcross, 0);
  // Scalars and array bases live in locals: through `p` the compiler must assume every counter
  // store may alias them, and would keep all of them in memory.
  uint64_t* const rows = p.rows.data();
  uint64_t* const cols = p.cols.data();
  uint64_t* const tiles = p.tiles.data();
  uint64_t* const log2Abs = p.log2Abs.data();
  uint64_t* const log2Ulp = p.log2Ulp.data();
  uint64_t* const gaps = p.gaps.data();
  uint64_t* const errorBins = p.errorBins.data();
  uint64_t identical = 0, mismatched = 0, gNaN = 0, gInf = 0, cNaN = 0, cInf = 0, newlyNonFinite = 0, nanPairs = 0;
  uint64_t signOnly = 0, exponentInvolved = 0, mantissaOnly = 0, gFiniteCount = 0, errors = 0, maxAbsIndex = 0;
  double sumAbs = 0, sumSq = 0, sumRel = 0, sumG2 = 0, maxAbs = -1, maxRel = 0;
  int64_t firstMismatch = -1, lastMismatch = -1;
  uint64_t packed[4] = {0, 0, 0, 0};
  unsigned pending = 0;
  auto flushBits = [&] {
    for (unsigned k = 0; k < 4; ++k) {
      for (unsigned j = 0; j < 8; ++j) p.bits[8 * k + j] += (packed[k] >> (8 * j)) & 0xff;
      packed[k] = 0;
    }
    pending = 0;
  };
  const uint64_t* spread = kSpread.table;

  uint64_t r = lo / L.cols, col = lo % L.cols;
  // Per-row indices, recomputed only when the row changes: no division per element.
  uint64_t rowBin = r / L.rowBin, tileBase = (r / L.tileRows) * L.tilesAcross;
  uint64_t colBin = col / L.colBin, inColBin = col % L.colBin;
  uint64_t tileCol = col / L.tileCols, inTileCol = col % L.tileCols;
  uint64_t run = 0;
  bool leading = true;
  for (uint64_t i = lo; i < hi; ++i) {
    const float gv = g[i], cv = c[i];
    const uint32_t gb = bitsOf(gv), cb = bitsOf(cv);
    const bool gFinite = (gb & 0x7f800000u) != 0x7f800000u;
    if (gFinite) {
      sumG2 += double(gv) * double(gv);
      ++gFiniteCount;
    } else if (gb & 0x007fffffu) {
      ++gNaN;
    } else {
      ++gInf;
    }
    if (gb == cb) {
      ++identical;
      if (!gFinite) {  // the candidate holds the same NaN or Inf
        if (gb & 0x007fffffu)
          ++cNaN;
        else
          ++cInf;
      }
      if (leading) {
        p.leadingRun = run;
        leading = false;
      } else {
        addRun(p, run);
      }
      run = 0;
    } else {
      ++mismatched;
      ++run;
      const bool cFinite = (cb & 0x7f800000u) != 0x7f800000u;
      if (!cFinite) {
        if (cb & 0x007fffffu)
          ++cNaN;
        else
          ++cInf;
        if (gFinite) ++newlyNonFinite;
      }
      const uint32_t x = gb ^ cb;
      packed[0] += spread[x & 0xff];
      packed[1] += spread[(x >> 8) & 0xff];
      packed[2] += spread[(x >> 16) & 0xff];
      packed[3] += spread[x >> 24];
      if (++pending == 255) flushBits();
      if (x == 0x80000000u)
        ++signOnly;
      else if (x & 0x7f800000u)
        ++exponentInvolved;
      else
        ++mantissaOnly;
      const bool gIsNaN = !gFinite && (gb & 0x007fffffu), cIsNaN = !cFinite && (cb & 0x007fffffu);
      if (gIsNaN || cIsNaN) {
        ++nanPairs;
      } else {
        const int64_t lg = fp::ulpLine32(gb), lc = fp::ulpLine32(cb);
        const uint64_t ulp = uint64_t(lg > lc ? lg - lc : lc - lg);
        ++log2Ulp[63 - __builtin_clzll(ulp)];
      }
      if (gFinite && cFinite) {
        const double d = std::fabs(double(cv) - double(gv));
        const double rel = d / std::max(std::fabs(double(gv)), kRelFloor);
        sumAbs += d;
        sumSq += d * d;
        sumRel += rel;
        if (d > maxAbs) {
          maxAbs = d;
          maxAbsIndex = i;
        }
        maxRel = std::max(maxRel, rel);
        if (d > 0)
          ++log2Abs[std::clamp(floorLog2(d), Report::kLog2AbsMin, Report::kLog2AbsMax) - Report::kLog2AbsMin];
        ++errorBins[bitsOf(float(d)) >> 16];
        ++errors;
      }
      ++rows[rowBin];
      ++cols[colBin];
      if (L.tiles) ++tiles[tileBase + tileCol];
      if (lastMismatch >= 0) {
        const uint64_t gap = i - uint64_t(lastMismatch);
        if (gap <= kMaxGap) ++gaps[gap];
      } else {
        firstMismatch = int64_t(i);
      }
      lastMismatch = int64_t(i);
    }
    // advance the position counters without a division per element
    if (++col == L.cols) {
      col = 0;
      ++r;
      colBin = inColBin = tileCol = inTileCol = 0;
      rowBin = r / L.rowBin;
      tileBase = (r / L.tileRows) * L.tilesAcross;
    } else {
      if (++inColBin == L.colBin) {
        inColBin = 0;
        ++colBin;
      }
      if (++inTileCol == L.tileCols) {
        inTileCol = 0;
        ++tileCol;
      }
    }
  }
  flushBits();
  p.identical = identical;
  p.mismatched = mismatched;
  p.gNaN = gNaN;
  p.gInf = gInf;
  p.cNaN = cNaN;
  p.cInf = cInf;
  p.newlyNonFinite = newlyNonFinite;
  p.nanPairs = nanPairs;
  p.signOnly = signOnly;
  p.exponentInvolved = exponentInvolved;
  p.mantissaOnly = mantissaOnly;
  p.gFinite = gFiniteCount;
  p.errors = errors;
  p.sumAbs = sumAbs;
  p.sumSq = sumSq;
  p.sumRel = sumRel;
  p.sumG2 = sumG2;
  p.maxAbs = maxAbs;
  p.maxAbsIndex = maxAbsIndex;
  p.maxRel = maxRel;
  p.firstMismatch = firstMismatch;
  p.lastMismatch = lastMismatch;
  if (leading) {
    p.allMismatched = run == hi - lo;
    p.leadingRun = run;
    p.trailingRun = run;
  } else {
    p.trailingRun = run;
  }
}

// Nearest-rank order statistics of the fp32 abs errors: the histogram over their top 16 bits finds
// the bucket of each wanted rank, and a second pass gathers only those buckets' values.
void percentiles(const float* g, const float* c, const std::vector<uint64_t>& bounds,
                 const std::vector<uint64_t>& bins, uint64_t count, const std::vector<double>& qs,
                 std::vector<double>& out) {
  out.assign(qs.size(), 0);
  if (count == 0) return;
  std::vector<std::size_t> bucket(qs.size());
  std::vector<uint64_t> within(qs.size());
  for (std::size_t k = 0; k < qs.size(); ++k) {
    const uint64_t rank = std::min<uint64_t>(count - 1, uint64_t(std::ceil(qs[k] * double(count))) - 1);
    uint64_t below = 0;
    std::size_t b = 0;
    while (below + bins[b] <= rank) below += bins[b++];
    bucket[k] = b;
    within[k] = rank - below;
  }
  const unsigned threads = unsigned(bounds.size() - 1);
  std::vector<std::vector<std::vector<float>>> found(threads, std::vector<std::vector<float>>(qs.size()));
  auto gather = [&](unsigned t) {
    for (uint64_t i = bounds[t]; i < bounds[t + 1]; ++i) {
      const uint32_t gb = bitsOf(g[i]), cb = bitsOf(c[i]);
      if (gb == cb || (gb & 0x7f800000u) == 0x7f800000u || (cb & 0x7f800000u) == 0x7f800000u) continue;
      const float d = float(std::fabs(double(c[i]) - double(g[i])));
      const std::size_t key = bitsOf(d) >> 16;
      for (std::size_t k = 0; k < qs.size(); ++k)
        if (bucket[k] == key) found[t][k].push_back(d);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(gather, t);
  gather(0);
  for (std::thread& th : pool) th.join();
  for (std::size_t k = 0; k < qs.size(); ++k) {
    std::vector<float> v;
    for (unsigned t = 0; t < threads; ++t) v.insert(v.end(), found[t][k].begin(), found[t][k].end());
    std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(within[k]), v.end());
    out[k] = v[within[k]];
  }
}

}  // namespace

Report analyze(const float* golden, const float* candidate, const std::vector<uint64_t>& shape,
               const ReportOptions& options) {
  Report rep;
  rep.shape = shape;
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  if (shape.empty()) n = 1;
  if (n == 0) throw std::invalid_argument("the tensors are empty");
  if (options.tileRows == 0 || options.tileCols == 0) throw std::invalid_argument("tile sizes must be positive");
  rep.elements = n;
  rep.cols = shape.empty() ? 1 : shape.back();
  rep.rows = n / rep.cols;

  Layout L{};
  L.rows = rep.rows;
  L.cols = rep.cols;
  L.rowBin = (L.rows + kMaxAxisBins - 1) / kMaxAxisBins;
  L.colBin = (L.cols + kMaxAxisBins - 1) / kMaxAxisBins;
  L.rowBins = (L.rows + L.rowBin - 1) / L.rowBin;
  L.colBins = (L.cols + L.colBin - 1) / L.colBin;
  L.tileRows = options.tileRows;
  L.tileCols = options.tileCols;
  L.tilesDown = (L.rows + L.tileRows - 1) / L.tileRows;
  L.tilesAcross = (L.cols + L.tileCols - 1) / L.tileCols;
  L.tiles = L.tilesDown * L.tilesAcross <= kMaxTiles;

  // Split by rows, so each thread's position counters start cleanly; tiny inputs use one thread.
  unsigned threads = options.threads ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  if (n < (uint64_t(1) << 16)) threads = 1;
  threads = unsigned(std::min<uint64_t>(threads, L.rows));
  std::vector<Partial> parts(threads);
  std::vector<uint64_t> bounds(threads + 1);
  for (unsigned t = 0; t <= threads; ++t) bounds[t] = (L.rows * t / threads) * L.cols;
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t)
    pool.emplace_back(scan, golden, candidate, bounds[t], bounds[t + 1], std::cref(L), std::ref(parts[t]));
  scan(golden, candidate, bounds[0], bounds[1], L, parts[0]);
  for (std::thread& th : pool) th.join();

  // merge
  rep.rowMismatch = {L.rowBin, std::vector<uint64_t>(L.rowBins)};
  rep.colMismatch = {L.colBin, std::vector<uint64_t>(L.colBins)};
  rep.tileRows = L.tileRows;
  rep.tileCols = L.tileCols;
  rep.tilesDown = L.tilesDown;
  rep.tilesAcross = L.tilesAcross;
  if (L.tiles) rep.tileMismatch.assign(L.tilesDown * L.tilesAcross, 0);
  double sumAbs = 0, sumSq = 0, sumRel = 0, sumG2 = 0;
  uint64_t gFinite = 0, errorCount = 0, carryRun = 0;
  std::vector<uint64_t> gaps(kMaxGap + 1), errorBins(kErrorBins);
  int64_t lastMismatch = -1;
  rep.maxAbs = -1;
  for (unsigned t = 0; t < threads; ++t) {
    Partial& p = parts[t];
    rep.identical += p.identical;
    rep.mismatched += p.mismatched;
    rep.goldenNaN += p.gNaN;
    rep.goldenInf += p.gInf;
    rep.candidateNaN += p.cNaN;
    rep.candidateInf += p.cInf;
    rep.newlyNonFinite += p.newlyNonFinite;
    rep.nanPairs += p.nanPairs;
    sumAbs += p.sumAbs;
    sumSq += p.sumSq;
    sumRel += p.sumRel;
    sumG2 += p.sumG2;
    gFinite += p.gFinite;
    if (p.maxAbs > rep.maxAbs) {
      rep.maxAbs = p.maxAbs;
      rep.maxAbsIndex = p.maxAbsIndex;
    }
    rep.maxRel = std::max(rep.maxRel, p.maxRel);
    for (std::size_t b = 0; b < rep.log2Abs.size(); ++b) rep.log2Abs[b] += p.log2Abs[b];
    for (std::size_t b = 0; b < rep.log2Ulp.size(); ++b) rep.log2Ulp[b] += p.log2Ulp[b];
    for (std::size_t b = 0; b < 32; ++b) rep.bitMismatch[b] += p.bits[b];
    rep.signOnly += p.signOnly;
    rep.exponentInvolved += p.exponentInvolved;
    rep.mantissaOnly += p.mantissaOnly;
    for (std::size_t b = 0; b < p.rows.size(); ++b) rep.rowMismatch.counts[b] += p.rows[b];
    for (std::size_t b = 0; b < p.cols.size(); ++b) rep.colMismatch.counts[b] += p.cols[b];
    for (std::size_t b = 0; b < p.tiles.size(); ++b) rep.tileMismatch[b] += p.tiles[b];
    // runs: a run may cross from one thread's range into the next
    for (std::size_t b = 0; b < p.runLog2.size(); ++b) rep.runLengthLog2[b] += p.runLog2[b];
    rep.runs += p.runs;
    rep.longestRun = std::max(rep.longestRun, p.longestRun);
    if (p.allMismatched) {
      carryRun += p.leadingRun;
    } else {
      const uint64_t joined = carryRun + p.leadingRun;
      if (joined) {
        ++rep.runs;
        rep.longestRun = std::max(rep.longestRun, joined);
        ++rep.runLengthLog2[std::size_t(63 - __builtin_clzll(joined))];
      }
      carryRun = p.trailingRun;
    }
    // gaps, including the one across the boundary
    for (std::size_t b = 0; b <= kMaxGap; ++b) gaps[b] += p.gaps[b];
    if (p.firstMismatch >= 0) {
      if (lastMismatch >= 0 && uint64_t(p.firstMismatch - lastMismatch) <= kMaxGap)
        ++gaps[std::size_t(p.firstMismatch - lastMismatch)];
      lastMismatch = p.lastMismatch;
    }
    for (std::size_t b = 0; b < kErrorBins; ++b) errorBins[b] += p.errorBins[b];
    errorCount += p.errors;
  }
  if (carryRun) {
    ++rep.runs;
    rep.longestRun = std::max(rep.longestRun, carryRun);
    ++rep.runLengthLog2[std::size_t(63 - __builtin_clzll(carryRun))];
  }
  if (rep.maxAbs < 0) rep.maxAbs = 0;
  rep.meanAbs = sumAbs / double(n);
  rep.rmsAbs = std::sqrt(sumSq / double(n));
  rep.meanRel = sumRel / double(n);
  rep.goldenRms = gFinite ? std::sqrt(sumG2 / double(gFinite)) : 0;
  if (rep.goldenRms > 0) {
    rep.maxAbsOverScale = rep.maxAbs / rep.goldenRms;
    rep.meanAbsOverScale = rep.meanAbs / rep.goldenRms;
  }
  std::vector<double> ps;
  percentiles(golden, candidate, bounds, errorBins, errorCount, {0.5, 0.99, 0.999}, ps);
  rep.p50 = ps[0];
  rep.p99 = ps[1];
  rep.p999 = ps[2];
  if (rep.mismatched) {
    uint64_t rest = rep.maxAbsIndex;
    rep.maxAbsPosition.assign(shape.size(), 0);
    for (std::size_t d = shape.size(); d-- > 0;) {
      rep.maxAbsPosition[d] = rest % shape[d];
      rest /= shape[d];
    }
    rep.maxAbsGolden = golden[rep.maxAbsIndex];
    rep.maxAbsCandidate = candidate[rep.maxAbsIndex];
  }
  for (std::size_t b = 1; b <= kMaxGap; ++b) {
    if (gaps[b] > gaps[rep.dominantGap]) rep.dominantGap = b;
  }
  if (rep.mismatched > 1) {
    // Share among all gaps, the long ones (> kMaxGap) included.
    rep.dominantGapShare = double(gaps[rep.dominantGap]) / double(rep.mismatched - 1);
  }
  return rep;
}

}  // namespace peat::analyzer
