// SPDX-License-Identifier: MIT
#include "core/analyzer/report.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "core/analyzer/error_summary.h"
#include "core/analyzer/report_simd.h"
#include "core/fp/format.h"
#include "core/fp/ulp.h"
#include "core/util/parallel.h"

namespace peat::analyzer {

namespace {

constexpr uint64_t kMaxGap = 4096;      // gaps up to this are counted one by one for the periodicity
constexpr std::size_t kErrorBins = 1 << 15;  // top 16 bits of a non-negative fp32: percentile buckets

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
  // |c - g| as fp32, by its top 16 bits; the last bin takes the elements with no error
  std::vector<uint64_t> errorBins = std::vector<uint64_t>(kErrorBins + 1);
  uint64_t errors = 0;
};

void addRun(Partial& p, uint64_t length) {
  if (length == 0) return;
  ++p.runs;
  p.longestRun = std::max(p.longestRun, length);
  ++p.runLog2[std::size_t(63 - __builtin_clzll(length))];
}

// Bits [from, to) of a bitmask.
inline uint64_t wordBits(const uint64_t* words, uint64_t w, uint64_t from, uint64_t to) {
  uint64_t bits = words[w];
  if (w == from / 64) bits &= ~uint64_t(0) << (from % 64);
  if (w == (to - 1) / 64 && to % 64) bits &= (uint64_t(1) << (to % 64)) - 1;
  return bits;
}

inline uint64_t countBits(const uint64_t* words, uint64_t from, uint64_t to) {
  uint64_t count = 0;
  for (uint64_t w = from / 64; w * 64 < to; ++w) count += uint64_t(__builtin_popcountll(wordBits(words, w, from, to)));
  return count;
}

template <class F>
inline void forEachSetBit(const uint64_t* words, uint64_t from, uint64_t to, F&& f) {
  for (uint64_t w = from / 64; w * 64 < to; ++w) {
    for (uint64_t bits = wordBits(words, w, from, to); bits; bits &= bits - 1)
      f(w * 64 + uint64_t(__builtin_ctzll(bits)));
  }
}

// Adds the mismatches of [from, to) (chunk-relative, all on one row starting at column `col`) into
// counters that each cover `width` columns: one popcount per counter touched.
inline void addByColumnGroups(const uint64_t* words, uint64_t from, uint64_t to, uint64_t col, uint64_t width,
                              uint64_t* counters) {
  if (width == 1) {
    forEachSetBit(words, from, to, [&](uint64_t k) { ++counters[col + (k - from)]; });
    return;
  }
  while (from < to) {
    const uint64_t end = std::min(to, from + (width - col % width));
    counters[col / width] += countBits(words, from, end);
    col += end - from;
    from = end;
  }
}

// The scan of [lo, hi), chunk by chunk. The vector kernel classifies every element, sums the
// errors and writes the chunk's mismatch bitmask; what remains walks only the mismatches (the
// histograms) or the bitmask a word or a run at a time (positions, runs, gaps). Long (about 140
// lines) because it is the analyzer's one hot loop: its state stays in registers across stages.
void scan(const float* g, const float* c, uint64_t lo, uint64_t hi, const Layout& L, Partial& p) {
  p.rows.assign(L.rowBins, 0);
  p.cols.assign(L.colBins, 0);
  if (L.tiles) p.tiles.assign(L.tilesDown * L.tilesAcross, 0);
  // Scalars and array bases live in locals: through `p` the compiler must assume every counter
  // store may alias them, and would keep all of them in memory.
  uint64_t* const rows = p.rows.data();
  uint64_t* const cols = p.cols.data();
  uint64_t* const tiles = p.tiles.data();
  uint64_t* const gaps = p.gaps.data();
  uint64_t* const errorBins = p.errorBins.data();
  detail::ChunkSums sums;
  std::unique_ptr<detail::ChunkBins> binsStore(new detail::ChunkBins);
  uint64_t words[detail::kChunk / 64];
  detail::ChunkBins& bins = *binsStore;
  constexpr std::size_t kUlpStride = detail::ChunkBins::kUlpNone + 1, kAbsStride = detail::ChunkBins::kAbsNone + 1;
  std::vector<uint64_t> ulpCopies(4 * kUlpStride), absCopies(4 * kAbsStride);
  uint64_t errors = 0, maxAbsIndex = 0;
  double maxAbs = -1;
  int64_t firstMismatch = -1, lastMismatch = -1;
  bool open = false;  // a run of mismatches that may continue into the next word
  uint64_t runStart = 0, runLength = 0;
  auto closeRun = [&] {
    if (runStart == lo)
      p.leadingRun = runLength;
    else
      addRun(p, runLength);
  };

  uint64_t r = lo / L.cols, col = lo % L.cols;
  uint64_t rowBin = r / L.rowBin, tileBase = (r / L.tileRows) * L.tilesAcross;
  for (uint64_t at = lo; at < hi; at += detail::kChunk) {
    const uint64_t n = std::min<uint64_t>(detail::kChunk, hi - at);
    detail::scanChunk(g + at, c + at, n, kRelFloor, sums, bins, words);

    // the largest error: the first element that holds the chunk's maximum, if it beats the one so far
    if (bins.errors && bins.maxAbs > maxAbs) {
      forEachSetBit(words, 0, n, [&](uint64_t k) {
        if (bins.key[k] != detail::ChunkBins::kKeyNone && maxAbs < bins.maxAbs &&
            std::fabs(double(c[at + k]) - double(g[at + k])) == bins.maxAbs) {
          maxAbs = bins.maxAbs;
          maxAbsIndex = at + k;
        }
      });
    }
    // histograms: the bins come from the vector kernel; counting them scatters. Four copies of
    // the small histograms keep a run of equal bins from serialising on one counter.
    errors += bins.errors;
    forEachSetBit(words, 0, n, [&](uint64_t k) {
      const std::size_t copy = k & 3;
      ++ulpCopies[copy * kUlpStride + bins.ulp[k]];
      ++absCopies[copy * kAbsStride + bins.abs[k]];
      ++errorBins[bins.key[k]];
    });

    // runs and the gaps between consecutive mismatches, a run (or the part of it in one word) at a time
    for (uint64_t w = 0; w * 64 < n; ++w) {
      uint64_t bits = words[w];
      while (bits) {
        const unsigned s = unsigned(__builtin_ctzll(bits));
        const uint64_t rest = ~(bits >> s);
        const unsigned length = rest ? unsigned(__builtin_ctzll(rest)) : 64 - s;
        const uint64_t start = at + 64 * w + s;
        if (open && runStart + runLength == start) {
          runLength += length;
          gaps[1] += length - 1;
        } else {
          if (open) closeRun();
          if (lastMismatch >= 0) {
            const uint64_t gap = start - uint64_t(lastMismatch);
            if (gap <= kMaxGap) ++gaps[gap];
          } else {
            firstMismatch = int64_t(start);
          }
          gaps[1] += length - 1;
          open = true;
          runStart = start;
          runLength = length;
        }
        lastMismatch = int64_t(start + length - 1);
        bits = s + length >= 64 ? 0 : bits & (~uint64_t(0) << (s + length));
      }
    }

    // rows, columns and tiles, one row segment at a time
    for (uint64_t from = 0; from < n;) {
      const uint64_t to = std::min(n, from + (L.cols - col));
      const uint64_t count = countBits(words, from, to);
      if (count) {
        rows[rowBin] += count;
        addByColumnGroups(words, from, to, col, L.colBin, cols);
        if (L.tiles) addByColumnGroups(words, from, to, col, L.tileCols, tiles + tileBase);
      }
      col += to - from;
      from = to;
      if (col == L.cols) {
        col = 0;
        ++r;
        rowBin = r / L.rowBin;
        tileBase = (r / L.tileRows) * L.tilesAcross;
      }
    }
  }
  if (open) {
    if (runStart == lo && runStart + runLength == hi) {
      p.allMismatched = true;
      p.leadingRun = p.trailingRun = runLength;
    } else if (runStart + runLength == hi) {
      p.trailingRun = runLength;
    } else {
      closeRun();
    }
  }
  for (std::size_t copy = 0; copy < 4; ++copy) {
    for (std::size_t b = 0; b < p.log2Ulp.size(); ++b) p.log2Ulp[b] += ulpCopies[copy * kUlpStride + b];
    for (std::size_t b = 0; b < p.log2Abs.size(); ++b) p.log2Abs[b] += absCopies[copy * kAbsStride + b];
  }
  p.identical = sums.identical;
  p.mismatched = (hi - lo) - sums.identical;
  p.gNaN = sums.goldenNaN;
  p.gInf = sums.goldenInf;
  p.cNaN = sums.candidateNaN;
  p.cInf = sums.candidateInf;
  p.newlyNonFinite = sums.newlyNonFinite;
  p.nanPairs = sums.nanPairs;
  p.bits = sums.bits;
  p.signOnly = sums.signOnly;
  p.exponentInvolved = sums.exponentInvolved;
  p.mantissaOnly = p.mismatched - sums.signOnly - sums.exponentInvolved;
  p.gFinite = sums.goldenFinite;
  p.errors = errors;
  p.sumAbs = sums.sumAbs;
  p.sumSq = sums.sumSq;
  p.sumRel = sums.sumRel;
  p.sumG2 = sums.sumGolden2;
  p.maxAbs = maxAbs;
  p.maxAbsIndex = maxAbsIndex;
  p.maxRel = sums.maxRel;
  p.firstMismatch = firstMismatch;
  p.lastMismatch = lastMismatch;
}

// Nearest-rank order statistics of the fp32 abs errors: the histogram over their top 16 bits finds
// the bucket of each wanted rank, and a second (vector) pass gathers only those buckets' values.
void percentiles(const float* g, const float* c, const std::vector<uint64_t>& bounds,
                 const std::vector<uint64_t>& bins, uint64_t count, const double (&qs)[3], double (&out)[3]) {
  for (double& v : out) v = 0;
  if (count == 0) return;
  uint32_t bucket[3];
  uint64_t within[3];
  for (std::size_t k = 0; k < 3; ++k) {
    const uint64_t rank = std::min<uint64_t>(count - 1, uint64_t(std::ceil(qs[k] * double(count))) - 1);
    uint64_t below = 0;
    std::size_t b = 0;
    while (below + bins[b] <= rank) below += bins[b++];
    bucket[k] = uint32_t(b);
    within[k] = rank - below;
  }
  const unsigned threads = unsigned(bounds.size() - 1);
  std::vector<std::array<std::vector<float>, 3>> found(threads);
  auto gather = [&](unsigned t) {
    detail::gatherKeys(g + bounds[t], c + bounds[t], bounds[t + 1] - bounds[t], bucket, found[t]);
  };
  util::parallelFor(threads, gather);
  for (std::size_t k = 0; k < 3; ++k) {
    std::vector<float> v;
    for (unsigned t = 0; t < threads; ++t) v.insert(v.end(), found[t][k].begin(), found[t][k].end());
    std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(within[k]), v.end());
    out[k] = v[within[k]];
  }
}

}  // namespace

const char* simdTarget() { return detail::simdTarget(); }

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
  unsigned threads = util::threadsOr(options.threads);
  if (n < (uint64_t(1) << 16)) threads = 1;
  threads = unsigned(std::min<uint64_t>(threads, L.rows));
  std::vector<Partial> parts(threads);
  std::vector<uint64_t> bounds(threads + 1);
  for (unsigned t = 0; t <= threads; ++t) bounds[t] = (L.rows * t / threads) * L.cols;
  util::parallelFor(threads, [&](unsigned t) { scan(golden, candidate, bounds[t], bounds[t + 1], L, parts[t]); });

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
  double ps[3];
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

int64_t worstInTile(const float* golden, const float* candidate, uint64_t rows, uint64_t cols, uint64_t tileRows,
                    uint64_t tileCols, uint64_t tileRow, uint64_t tileCol) {
  if (tileRows == 0 || tileCols == 0) return -1;
  int64_t worst = -1;
  double largest = -1;
  for (uint64_t r = tileRow * tileRows; r < std::min(rows, (tileRow + 1) * tileRows); ++r)
    for (uint64_t c = tileCol * tileCols; c < std::min(cols, (tileCol + 1) * tileCols); ++c) {
      const uint64_t i = r * cols + c;
      uint32_t a, b;
      std::memcpy(&a, golden + i, 4);
      std::memcpy(&b, candidate + i, 4);
      if (a == b) continue;
      const double err = std::fabs(double(candidate[i]) - double(golden[i]));
      const double size = std::isfinite(err) ? err : HUGE_VAL;  // NaN or Inf: the worst there is
      if (size > largest) largest = size, worst = int64_t(i);
    }
  return worst;
}

Report analyzeTile(const float* golden, const float* candidate, uint64_t rows, uint64_t cols, uint64_t tileRows,
                   uint64_t tileCols, uint64_t tileRow, uint64_t tileCol) {
  const uint64_t r0 = tileRow * tileRows, c0 = tileCol * tileCols;
  if (tileRows == 0 || tileCols == 0 || r0 >= rows || c0 >= cols) throw std::invalid_argument("no such tile");
  const uint64_t h = std::min(tileRows, rows - r0), w = std::min(tileCols, cols - c0);
  std::vector<float> g(std::size_t(h * w)), c(std::size_t(h * w));
  for (uint64_t r = 0; r < h; ++r)
    for (uint64_t k = 0; k < w; ++k) {
      g[std::size_t(r * w + k)] = golden[(r0 + r) * cols + c0 + k];
      c[std::size_t(r * w + k)] = candidate[(r0 + r) * cols + c0 + k];
    }
  return analyze(g.data(), c.data(), {h, w});
}

namespace {
// Per tile of [rows, cols] in tiles of tileRows x tileCols (as Report's), the elements i for which
// `counts(i)` holds.
template <typename Predicate>
std::vector<uint64_t> countPerTile(uint64_t rows, uint64_t cols, uint64_t tileRows, uint64_t tileCols, Predicate counts) {
  if (tileRows == 0 || tileCols == 0) return {};
  const uint64_t across = (cols + tileCols - 1) / tileCols, down = (rows + tileRows - 1) / tileRows;
  std::vector<uint64_t> out(std::size_t(across * down), 0);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c)
      if (counts(r * cols + c)) ++out[std::size_t((r / tileRows) * across + c / tileCols)];
  return out;
}
}  // namespace

std::vector<uint64_t> bitTileCounts(const float* golden, const float* candidate, uint64_t rows, uint64_t cols,
                                    uint64_t tileRows, uint64_t tileCols, int bit) {
  if (bit < 0 || bit > 31) return {};
  const uint32_t mask = uint32_t(1) << bit;
  return countPerTile(rows, cols, tileRows, tileCols, [&](uint64_t i) {
    uint32_t a, b;
    std::memcpy(&a, golden + i, 4);
    std::memcpy(&b, candidate + i, 4);
    return ((a ^ b) & mask) != 0;
  });
}

std::vector<uint64_t> errorBinTileCounts(const float* golden, const float* candidate, uint64_t rows, uint64_t cols,
                                         uint64_t tileRows, uint64_t tileCols, int bin, int lastBin) {
  const double lo = std::ldexp(1.0, bin), hi = std::ldexp(1.0, std::max(bin, lastBin) + 1);
  return countPerTile(rows, cols, tileRows, tileCols, [&](uint64_t i) {
    if (!std::isfinite(golden[i]) || !std::isfinite(candidate[i])) return false;
    const double err = std::fabs(double(candidate[i]) - double(golden[i]));
    return err >= lo && err < hi;
  });
}

std::vector<uint64_t> errorBinBitCounts(const float* golden, const float* candidate, uint64_t n, int bin, int lastBin) {
  const double lo = std::ldexp(1.0, bin), hi = std::ldexp(1.0, std::max(bin, lastBin) + 1);
  std::vector<uint64_t> counts(32, 0);
  for (uint64_t i = 0; i < n; ++i) {
    if (!std::isfinite(golden[i]) || !std::isfinite(candidate[i])) continue;
    const double err = std::fabs(double(candidate[i]) - double(golden[i]));
    if (err < lo || err >= hi) continue;
    uint32_t a, b;
    std::memcpy(&a, &golden[i], 4);
    std::memcpy(&b, &candidate[i], 4);
    for (uint32_t d = a ^ b; d; d &= d - 1) ++counts[std::size_t(__builtin_ctz(d))];
  }
  return counts;
}

}  // namespace peat::analyzer
