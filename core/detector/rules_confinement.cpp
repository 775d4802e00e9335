// SPDX-License-Identifier: MIT
// Where the large mismatches lie: scattered at random (R8 random_value) or at structured places,
// periodic or confined to some rows or columns (R9 index_error).
#include <algorithm>

#include "core/detector/rules.h"

namespace peat::detector::rules {

namespace {

// Structure of the large mismatches (R8, R9). Confinement is judged against chance: L large
// errors scattered at random over R rows hit R (1 - (1 - 1/R)^L) distinct rows on average, so a
// few dozen large rounding errors in a 512 x 512 output hit "only" 60 of its columns without
// any structure. Confined means at most a quarter of the rows (or columns) chance would hit.
struct LargeStructure {
  bool periodic = false, confined = false;
  bool colsConfined = false, rowsConfined = false;  // which lines are (confined: either)
  double colsByChance = 0, rowsByChance = 0;  // the distinct columns and rows chance would hit
};

LargeStructure largeStructure(const RuleContext& x) {
  const Mismatches& m = x.m;
  const analyzer::Report& r = x.r;
  LargeStructure s;
  s.periodic = m.largeDominantGap > 1 && m.largeGapShare >= 0.5;
  auto chanceHits = [&](uint64_t lines) {
    return lines > 1 ? double(lines) * -std::expm1(double(m.large) * std::log1p(-1.0 / double(lines))) : 1.0;
  };
  const uint64_t cols = std::min<uint64_t>(r.cols, 1 << 20), rows = std::min<uint64_t>(r.rows, 1 << 20);
  s.colsByChance = chanceHits(cols);
  s.rowsByChance = chanceHits(rows);
  s.colsConfined = r.cols > 1 && cols > 1 && double(m.largeColsHit) * 4 <= s.colsByChance;
  s.rowsConfined = r.cols > 1 && rows > 1 && double(m.largeRowsHit) * 4 <= s.rowsByChance;
  s.confined = s.colsConfined || s.rowsConfined;
  return s;
}

}  // namespace

// R8 random_value: large errors in single elements, a few of them (sparse), or up to a fifth of
// the tensor scattered without structure (nearly every mismatch large, none periodic or confined).
void randomValue(RuleContext& x) {
  const Mismatches& m = x.m;
  const analyzer::Report& r = x.r;
  const LargeStructure s = largeStructure(x);
  const bool scattered =
      !x.sparse && x.fraction <= 0.2 && double(m.large) >= 0.9 * double(x.mis) && !s.periodic && !s.confined;
  if ((x.sparse || scattered) && !m.allSingleBit && !m.allZeroCandidate && r.newlyNonFinite == 0 && r.maxRel > 1e-2 &&
      !(m.allContiguousBits && m.highestBit >= 12)) {
    Verdict v = make("random_value", 0.7, std::to_string(x.mis) + " element(s) replaced by unrelated values");
    v.evidence["max_rel"] = r.maxRel;
    x.add(v);
  }
}

// R9 index_error: large errors at structured places (periodic, or confined to some rows or
// columns), judged on the large mismatches only, so reordering noise elsewhere does not hide them.
void confinedIndexError(RuleContext& x) {
  const Mismatches& m = x.m;
  const LargeStructure s = largeStructure(x);
  const double largeFraction = double(m.large) / double(x.n);
  if (m.large > std::max<uint64_t>(8, x.n / 1000) && largeFraction <= 0.5 && (s.periodic || s.confined) &&
      !m.allZeroCandidate && !(m.allSingleBit && m.sameBit)) {
    Verdict v = make("index_error", s.periodic ? 0.85 : 0.75,
                     s.periodic ? "large errors repeat every " + std::to_string(m.largeDominantGap) + " elements"
                                : "large errors confined to " + std::to_string(m.largeColsHit) + " columns and " +
                                      std::to_string(m.largeRowsHit) + " rows");
    v.evidence["large_mismatches"] = double(m.large);
    v.evidence["dominant_gap"] = double(m.largeDominantGap);
    v.evidence["dominant_gap_share"] = m.largeGapShare;
    v.evidence["columns_hit"] = double(m.largeColsHit);
    v.evidence["rows_hit"] = double(m.largeRowsHit);
    v.evidence["columns_hit_by_chance"] = s.colsByChance;
    v.evidence["rows_hit_by_chance"] = s.rowsByChance;
    // what the views draw: the period of a periodic pattern, or that it is confined to rows/columns
    if (s.periodic) v.evidence["stride"] = double(m.largeDominantGap);
    else v.evidence["confined"] = 1;
    // ... and where: the confined columns or rows themselves, as ranges (the Where map frames them)
    if (!s.periodic && s.colsConfined) v.parameters["columns"] = hitRanges(m.largeColHit);
    if (!s.periodic && s.rowsConfined) v.parameters["rows"] = hitRanges(m.largeRowHit);
    x.add(v);
  }
}

}  // namespace peat::detector::rules

namespace peat::detector::rules {

// R9c index_error: whole rows bit-identical to golden while the other rows err densely and far beyond
// rounding. Rounding to any format, of the inputs or of the output, touches every row that holds
// values it cannot represent; rows computed exactly beside rows far off were computed differently,
// as a mask or a window off by one makes (a causal mask that lets each query see one key too many
// leaves only the last query of each sequence untouched). Rows whose golden values are all zero do
// not count (any rounding keeps them), and the other rows must be mostly mismatched (a few scattered
// faults leave most rows exact too: R4-R8 judge those).
void exactRowsAmidLarge(RuleContext& x) {
  const analyzer::Report& r = x.r;
  const uint64_t cols = r.cols, rows = cols > 0 ? x.n / cols : 0;
  if (cols < 8 || rows < 2 || r.newlyNonFinite > 0 || x.m.allZeroCandidate || x.sparse) return;
  if (!(r.maxAbsOverScale >= 0.25 && r.maxRel >= 0.25)) return;
  uint64_t exactRows = 0, mismatchedRows = 0;
  for (uint64_t row = 0; row < rows; ++row) {
    const float* g = x.golden + row * cols;
    const float* c = x.c + row * cols;
    bool same = true, nonzero = false;
    for (uint64_t j = 0; j < cols && same; ++j) {
      if (fp::bitsOf(g[j]) != fp::bitsOf(c[j])) same = false;
      if (g[j] != 0.0f) nonzero = true;
    }
    if (!same) ++mismatchedRows;
    else if (nonzero) ++exactRows;
  }
  if (exactRows == 0 || mismatchedRows < 2 || double(x.mis) < 0.5 * double(mismatchedRows * cols)) return;
  Verdict v = make("index_error", 0.78,
                   std::to_string(exactRows) + " row(s) bit-identical to golden while " + std::to_string(mismatchedRows) +
                       " others err by up to " + number(r.maxAbsOverScale) +
                       " of the scale: rows computed differently (a mask or window off by one)");
  v.evidence["exact_rows"] = double(exactRows);
  v.evidence["mismatched_rows"] = double(mismatchedRows);
  v.evidence["max_abs_over_scale"] = r.maxAbsOverScale;
  x.add(v);
}

}  // namespace peat::detector::rules
