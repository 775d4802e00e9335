// SPDX-License-Identifier: MIT
// The facts about a pair's mismatched elements that the rules read beside the analyzer's report.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

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

// The first single-bit mismatch in [lo, hi): its bit and the value the candidate holds there.
void firstSingleBit(const float* g, const float* c, uint64_t lo, uint64_t hi, Mismatches& m) {
  for (uint64_t i = lo; i < hi; ++i) {
    const uint32_t x = bitsOf(g[i]) ^ bitsOf(c[i]);
    if (x == 0 || (x & (x - 1)) != 0) continue;
    m.bit = __builtin_ctz(x);
    m.newValue = (bitsOf(c[i]) & x) != 0 ? 1 : 0;
    return;
  }
}

// The large mismatches of one word (bit k: element base + k), in order: the gaps between them, their
// rows and columns. row and rowStart: the row of the last one walked and its first element.
inline void walkLarge(MismatchPart& p, uint64_t base, uint64_t largeBits, uint64_t cols, uint64_t lastRow,
                      uint64_t lastCol, uint64_t& row, uint64_t& rowStart, uint64_t& large, int64_t& firstLarge,
                      int64_t& lastLarge) {
  for (; largeBits; largeBits &= largeBits - 1) {
    const uint64_t i = base + uint64_t(__builtin_ctzll(largeBits));
    ++large;
    if (lastLarge >= 0 && i - uint64_t(lastLarge) <= 4096) ++p.gaps[i - uint64_t(lastLarge)];
    if (firstLarge < 0) firstLarge = int64_t(i);
    lastLarge = int64_t(i);
    while (i >= rowStart + cols) rowStart += cols, ++row;
    p.rowHit[std::min(row, lastRow)] = 1;
    p.colHit[std::min(i - rowStart, lastCol)] = 1;
  }
}

// Without branches on the elements: on a dense pair about half the mismatches are "large" at random,
// and branches on that mispredicted on most elements (half of peat detect's time on a 16 M-element
// pair). Each 64 elements leave a word of large-mismatch bits, whose set bits are then walked for
// the gaps, rows and columns.
void inspectRange(const float* g, const float* c, uint64_t lo, uint64_t hi, const analyzer::Report& r, double threshold,
                  MismatchPart& p) {
  Mismatches& m = p.m;
  p.rowHit.assign(std::clamp<uint64_t>(r.rows, 1, 1 << 20), 0);
  p.colHit.assign(std::clamp<uint64_t>(r.cols, 1, 1 << 20), 0);
  const uint64_t lastRow = p.rowHit.size() - 1, lastCol = p.colHit.size() - 1;
  const uint64_t cols = std::max<uint64_t>(r.cols, 1);
  uint64_t row = lo / cols, rowStart = row * cols;  // the row of the last large mismatch walked
  uint64_t count = 0, large = 0;
  uint32_t anyBits = 0, singleBits = 0;  // every differing bit; the bits of the single-bit mismatches
  bool contiguous = true, single = true, zero = true, subnormal = true, singleOne = false, singleZero = false;
  int64_t firstLarge = -1, lastLarge = -1;
  uint64_t ratiosLeft = 100000 - std::min<uint64_t>(m.ratios.size(), 100000);
  for (uint64_t base = lo; base < hi; base += 64) {
    const uint64_t end = std::min(base + 64, hi);
    uint64_t largeBits = 0;
    // every "all" fact already false and the ratios taken: only the differing bits and the large
    // mismatches are left to find (most of a dense pair)
    if (!contiguous && !single && !zero && !subnormal && ratiosLeft == 0) {
      for (uint64_t i = base; i < end; ++i) {
        const float gi = g[i], ci = c[i];
        const uint32_t gb = bitsOf(gi), cb = bitsOf(ci), x = gb ^ cb;
        count += x != 0;
        anyBits |= x;
        const bool bothFinite = ((gb & 0x7F800000u) != 0x7F800000u) & ((cb & 0x7F800000u) != 0x7F800000u);
        largeBits |= uint64_t(bothFinite & (std::fabs(double(ci) - double(gi)) > threshold)) << (i - base);
      }
      walkLarge(p, base, largeBits, cols, lastRow, lastCol, row, rowStart, large, firstLarge, lastLarge);
      continue;
    }
    for (uint64_t i = base; i < end; ++i) {
      const float gi = g[i], ci = c[i];
      const uint32_t gb = bitsOf(gi), cb = bitsOf(ci), x = gb ^ cb;
      const bool mis = x != 0;
      count += mis;
      anyBits |= x;
      contiguous &= !mis | ((((x | (x - 1)) + 1) & x) == 0);  // the set bits form one block
      const bool one = mis & ((x & (x - 1)) == 0);
      single &= !mis | one;
      singleBits |= x & (0u - uint32_t(one));
      const bool value = (cb & x) != 0;
      singleOne |= one & value;
      singleZero |= one & !value;
      zero &= !mis | ((cb << 1) == 0);
      subnormal &= !mis | ((gb & 0x7FFFFFFFu) - 1u < 0x7FFFFFu);  // nonzero, below 2^-126
      const bool bothFinite = ((gb & 0x7F800000u) != 0x7F800000u) & ((cb & 0x7F800000u) != 0x7F800000u);
      if (ratiosLeft && mis && bothFinite && std::fabs(gi) > 1e-30f) {
        m.ratios.push_back(double(ci) / double(gi));
        --ratiosLeft;
      }
      const bool isLarge = mis & bothFinite & (std::fabs(double(ci) - double(gi)) > threshold);
      largeBits |= uint64_t(isLarge) << (i - base);
    }
    walkLarge(p, base, largeBits, cols, lastRow, lastCol, row, rowStart, large, firstLarge, lastLarge);
  }
  m.count = count;
  m.large = large;
  m.highestBit = anyBits ? 31 - __builtin_clz(anyBits) : 0;
  m.allContiguousBits = contiguous;
  m.allSingleBit = single;
  m.allZeroCandidate = zero;
  m.allSubnormalGolden = subnormal;
  m.sameBit = (singleBits & (singleBits - 1)) == 0;
  m.sameNewValue = !(singleOne && singleZero);
  if (singleBits != 0 && m.sameBit && m.sameNewValue) {
    m.bit = __builtin_ctz(singleBits);
    m.newValue = singleOne ? 1 : 0;
  } else if (singleBits != 0 && single) {
    firstSingleBit(g, c, lo, hi, m);  // which of several bits or values came first
  }
  p.firstLarge = firstLarge;
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
  m.largeRowHit = std::move(first.rowHit);  // the ranges are written only for a confinement found
  m.largeColHit = std::move(first.colHit);
  return m;
}

// The lines hit, as ranges of consecutive indices: "0-3,7,60-63"; at most 64 ranges, then ",...".
std::string hitRanges(const std::vector<char>& hit) {
  std::string out;
  int ranges = 0;
  for (std::size_t k = 0; k < hit.size(); ++k) {
    if (!hit[k] || (k > 0 && hit[k - 1])) continue;
    std::size_t end = k;
    while (end + 1 < hit.size() && hit[end + 1]) ++end;
    if (++ranges > 64) return out + ",...";
    out += (out.empty() ? "" : ",") + std::to_string(k) + (end > k ? "-" + std::to_string(end) : "");
  }
  return out;
}


ChannelSums channelSums(const float* g, const float* c, uint64_t rows, uint64_t cols) {
  ChannelSums s;
  const bool byRow = rows >= 2 && rows <= (uint64_t(1) << 20), byCol = cols >= 2 && cols <= (uint64_t(1) << 20);
  auto size = [](ChannelSums::Axis& a, uint64_t lines, uint64_t samples) {
    for (std::vector<double>* v : {&a.g, &a.gg, &a.cg, &a.cc, &a.ee}) v->assign(lines, 0.0);
    a.samples = samples;
  };
  if (byRow) size(s.rows, rows, cols);
  if (byCol) size(s.cols, cols, rows);
  for (uint64_t i = 0; i < rows; ++i) {
    double rg = 0, rgg = 0, rcg = 0, rcc = 0, ree = 0;
    for (uint64_t j = 0; j < cols; ++j) {
      const float gf = g[i * cols + j], cf = c[i * cols + j];
      if (!finite(gf) || !finite(cf)) continue;
      const double gv = gf, cv = cf, e = cv - gv;
      rg += gv, rgg += gv * gv, rcg += cv * gv, rcc += cv * cv, ree += e * e;
      if (byCol) {
        s.cols.g[j] += gv, s.cols.gg[j] += gv * gv, s.cols.cg[j] += cv * gv;
        s.cols.cc[j] += cv * cv, s.cols.ee[j] += e * e;
      }
    }
    if (byRow) s.rows.g[i] = rg, s.rows.gg[i] = rgg, s.rows.cg[i] = rcg, s.rows.cc[i] = rcc, s.rows.ee[i] = ree;
  }
  return s;
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
