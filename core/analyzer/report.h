// SPDX-License-Identifier: MIT
#pragma once
// The analyzer's standard report of a golden/candidate pair: counts, error magnitudes, exact
// percentiles, histograms (log2 |error|, log2 ULP, bit positions, field classes) and spatial
// structure (worst position, rows, columns, tiles, runs, periodicity). One pass with SIMD on
// every core, plus a vector pass over the data for the exact percentiles.
#include <array>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

namespace peat::analyzer {

struct ReportOptions {
  uint64_t tileRows = 16, tileCols = 16;
  unsigned threads = 0;  // 0: every core
};

// Counters over an axis longer than kMaxAxisBins are grouped: bin i covers `binWidth` indices.
inline constexpr uint64_t kMaxAxisBins = 65536;

struct AxisCounts {
  uint64_t binWidth = 1;
  std::vector<uint64_t> counts;
};

struct Report {
  std::vector<uint64_t> shape;
  uint64_t rows = 0, cols = 0;  // the tensor seen as [prod(shape[:-1]), shape[-1]]

  // counts
  uint64_t elements = 0, identical = 0, mismatched = 0;
  uint64_t goldenNaN = 0, goldenInf = 0, candidateNaN = 0, candidateInf = 0, newlyNonFinite = 0;

  // error magnitudes over mismatched pairs where both are finite (identical pairs count as 0 in means)
  double maxAbs = 0, meanAbs = 0, rmsAbs = 0;
  double maxRel = 0, meanRel = 0;  // |c - g| / max(|g|, 2^-126)
  double goldenRms = 0;            // the tensor's scale
  double maxAbsOverScale = 0, meanAbsOverScale = 0;
  double p50 = 0, p99 = 0, p999 = 0;  // exact order statistics of |c - g| (as fp32) over mismatched finite pairs
  uint64_t maxAbsIndex = 0;
  std::vector<uint64_t> maxAbsPosition;
  float maxAbsGolden = 0, maxAbsCandidate = 0;

  // histograms
  static constexpr int kLog2AbsMin = -160, kLog2AbsMax = 130;  // bin i: floor(log2 |err|) = kLog2AbsMin + i
  std::vector<uint64_t> log2Abs = std::vector<uint64_t>(kLog2AbsMax - kLog2AbsMin + 1);
  // bin b: floor(log2 ULP distance) = b; NaN pairs and +0/-0 (0 ULPs apart) are in no bin
  std::array<uint64_t, 33> log2Ulp{};
  uint64_t nanPairs = 0;               // mismatched pairs involving a NaN (no ULP distance)
  std::array<uint64_t, 32> bitMismatch{};  // elements whose bit b differs
  uint64_t signOnly = 0, exponentInvolved = 0, mantissaOnly = 0;  // field class of each mismatch

  // spatial
  AxisCounts rowMismatch, colMismatch;
  uint64_t tileRows = 0, tileCols = 0, tilesDown = 0, tilesAcross = 0;
  std::vector<uint64_t> tileMismatch;  // row-major over tiles; empty when there would be more than 2^20
  uint64_t runs = 0, longestRun = 0;   // maximal runs of consecutive mismatched elements (flat order)
  std::array<uint64_t, 41> runLengthLog2{};  // bin b: floor(log2 run length) = b
  uint64_t dominantGap = 0;            // most common distance between consecutive mismatches
  double dominantGapShare = 0;         // its share of all gaps
};

// The SIMD instruction set the scan runs with on this CPU (Highway's name, e.g. "AVX3", "AVX2").
const char* simdTarget();

// Throws std::invalid_argument when the shapes differ or the tensors are empty.
Report analyze(const float* golden, const float* candidate, const std::vector<uint64_t>& shape,
               const ReportOptions& options = {});

// The element of tile (tileRow, tileCol) of a pair seen as [rows, cols] in tiles of tileRows x
// tileCols (as Report's tiles) whose |candidate - golden| is largest, a pair that differs in NaN or
// Inf first; -1 when every element of the tile is bit-identical.
int64_t worstInTile(const float* golden, const float* candidate, uint64_t rows, uint64_t cols, uint64_t tileRows,
                    uint64_t tileCols, uint64_t tileRow, uint64_t tileCol);

// The report of one tile's elements (tile (tileRow, tileCol) of [rows, cols] in tiles of tileRows x
// tileCols), as a [h, w] tensor of its own: the histograms restricted to that tile.
Report analyzeTile(const float* golden, const float* candidate, uint64_t rows, uint64_t cols, uint64_t tileRows,
                   uint64_t tileCols, uint64_t tileRow, uint64_t tileCol);

// Per tile, the elements whose error |candidate - golden| (both finite, as double) lies in
// [2^bin, 2^(lastBin + 1)): where one bar of the error histogram sits (lastBin < bin: that bar
// alone), or a range of bars.
std::vector<uint64_t> errorBinTileCounts(const float* golden, const float* candidate, uint64_t rows, uint64_t cols,
                                         uint64_t tileRows, uint64_t tileCols, int bin, int lastBin = INT_MIN);
// The same elements' differing bits: [b] counts those whose bit b differs (the Bits plot of a
// histogram selection).
std::vector<uint64_t> errorBinBitCounts(const float* golden, const float* candidate, uint64_t n, int bin,
                                        int lastBin = INT_MIN);

// Per tile (row-major, as Report's tiles), the elements whose bit `bit` (0-31) differs between
// golden and candidate: where the mismatches of one bit position sit.
std::vector<uint64_t> bitTileCounts(const float* golden, const float* candidate, uint64_t rows, uint64_t cols,
                                    uint64_t tileRows, uint64_t tileCols, int bit);

}  // namespace peat::analyzer
