// SPDX-License-Identifier: MIT
// Finite golden values that became NaN or Inf (R2).
#include <algorithm>
#include <limits>

#include "core/detector/rules.h"

namespace peat::detector::rules {

// R2 nan_inf. No rounding or reordering of finite values makes a NaN, and overflow to Inf from a
// finite golden needs a format with a smaller range or a fault: either way the non-finite values
// are the finding, and where they lie (a few rows of massive activations, a row whose variance went
// negative) is its evidence, not another model. So it outranks the confinement, outlier and
// two-error rules (0.9). When the few mismatches each differ from golden in one bit, or in one
// block of adjacent high bits, a flip made the NaN or Inf: R4's bit_flip (R5's multi_bit_flip)
// names the cause and outranks this symptom.
void nanInf(RuleContext& x) {
  const analyzer::Report& r = x.r;
  if (r.newlyNonFinite == 0) return;
  const bool flipped = x.sparse && (x.m.allSingleBit || (x.m.allContiguousBits && x.m.highestBit >= 12));
  // where they are: rows and columns hit, Inf against NaN, and whether an Inf stands for a value
  // beyond fp16's range (65504): overflow of a 16-bit intermediate
  uint64_t inf = 0, nan = 0, beyondHalf = 0;
  const uint64_t cols = std::max<uint64_t>(1, r.cols);
  std::vector<char> rowHit(std::size_t(std::min<uint64_t>(x.n / cols, 1 << 20)), 0);
  std::vector<char> colHit(std::size_t(std::min<uint64_t>(cols, 1 << 20)), 0);
  for (uint64_t i = 0; i < x.n; ++i) {
    if (!finite(x.golden[i]) || finite(x.c[i])) continue;
    (std::isnan(x.c[i]) ? nan : inf) += 1;
    if (std::fabs(x.golden[i]) > 65504.0f) ++beyondHalf;
    if (!rowHit.empty()) rowHit[std::min<std::size_t>(std::size_t(i / cols), rowHit.size() - 1)] = 1;
    colHit[std::min<std::size_t>(std::size_t(i % cols), colHit.size() - 1)] = 1;
  }
  const double rowsHit = double(std::count(rowHit.begin(), rowHit.end(), 1));
  const double colsHit = double(std::count(colHit.begin(), colHit.end(), 1));
  std::string where = " (Inf " + std::to_string(inf) + ", NaN " + std::to_string(nan) + "; in " +
                      std::to_string(uint64_t(rowsHit)) + " of " + std::to_string(rowHit.size()) + " rows)";
  Verdict v = make("nan_inf", flipped ? 0.7 : std::max(0.9, 0.6 + 0.35 * double(r.newlyNonFinite) / double(x.mis)),
                   std::to_string(r.newlyNonFinite) + " finite golden values became NaN or Inf" +
                       (flipped ? " by one flipped bit (or one block of bits) each" : where));
  v.parameters["kind"] = inf && nan ? "inf+nan" : inf ? "inf" : "nan";
  if (beyondHalf > 0) v.parameters["cause"] = "overflow";
  v.evidence["newly_non_finite"] = double(r.newlyNonFinite);
  v.evidence["rows_hit"] = rowsHit;
  v.evidence["columns_hit"] = colsHit;
  v.evidence["golden_beyond_fp16_range"] = double(beyondHalf);
  x.add(v);
}

}  // namespace peat::detector::rules
