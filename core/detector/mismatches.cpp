// SPDX-License-Identifier: MIT
// The facts about a pair's mismatched elements that the rules read beside the analyzer's report.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/detector/rules.h"
#include "core/util/parallel.h"

namespace peat::detector::rules {

namespace {

using fp::bitsOf;

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
    if (!(g[i] != 0.0f && std::fabs(g[i]) < std::numeric_limits<float>::min())) m.allSubnormalGolden = false;
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

// Folds `second`, the range after `a`'s, into `a` as one pass over both in order would have found them.
void merge(MismatchPart& a, const MismatchPart& second) {
  Mismatches& m = a.m;
  const Mismatches& b = second.m;
  m.count += b.count;
  m.highestBit = std::max(m.highestBit, b.highestBit);
  m.allContiguousBits = m.allContiguousBits && b.allContiguousBits;
  m.allSingleBit = m.allSingleBit && b.allSingleBit;
  m.allZeroCandidate = m.allZeroCandidate && b.allZeroCandidate;
  m.allSubnormalGolden = m.allSubnormalGolden && b.allSubnormalGolden;
  m.sameBit = m.sameBit && b.sameBit && (m.bit < 0 || b.bit < 0 || m.bit == b.bit);
  m.sameNewValue = m.sameNewValue && b.sameNewValue && (m.newValue < 0 || b.newValue < 0 || m.newValue == b.newValue);
  if (m.bit < 0) m.bit = b.bit;
  if (m.newValue < 0) m.newValue = b.newValue;
  for (double q : b.ratios) {
    if (m.ratios.size() >= 100000) break;
    m.ratios.push_back(q);
  }
  m.large += b.large;
  for (std::size_t k = 0; k < a.gaps.size(); ++k) a.gaps[k] += second.gaps[k];
  if (a.lastLarge >= 0 && second.firstLarge >= 0 && uint64_t(second.firstLarge - a.lastLarge) <= 4096)
    ++a.gaps[std::size_t(second.firstLarge - a.lastLarge)];
  if (a.firstLarge < 0) a.firstLarge = second.firstLarge;
  if (second.lastLarge >= 0) a.lastLarge = second.lastLarge;
  for (std::size_t k = 0; k < a.rowHit.size(); ++k) a.rowHit[k] |= second.rowHit[k];
  for (std::size_t k = 0; k < a.colHit.size(); ++k) a.colHit[k] |= second.colHit[k];
}

}  // namespace

Mismatches inspect(const float* g, const float* c, uint64_t n, const analyzer::Report& r) {
  const double threshold = r.goldenRms * std::ldexp(1.0, -10);
  // two ranges for large tensors: the caller may already run several detections at once
  const unsigned parts = n >= (uint64_t(1) << 20) ? 2 : 1;
  std::vector<MismatchPart> part(parts);
  util::parallelRanges(int64_t(n), parts, [&](int64_t lo, int64_t hi, unsigned p) {
    inspectRange(g, c, uint64_t(lo), uint64_t(hi), r, threshold, part[p]);
  });
  MismatchPart& first = part.front();
  for (std::size_t p = 1; p < part.size(); ++p) merge(first, part[p]);
  Mismatches m = first.m;
  const std::vector<uint64_t>& gaps = first.gaps;
  for (std::size_t b = 1; b < gaps.size(); ++b)
    if (gaps[b] > gaps[m.largeDominantGap]) m.largeDominantGap = b;
  if (m.large > 1) m.largeGapShare = double(gaps[m.largeDominantGap]) / double(m.large - 1);
  for (char h : first.rowHit) m.largeRowsHit += h ? 1 : 0;
  for (char h : first.colHit) m.largeColsHit += h ? 1 : 0;
  return m;
}

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

}  // namespace peat::detector::rules
