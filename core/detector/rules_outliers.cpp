// SPDX-License-Identifier: MIT
// R13, two errors at once: dense small errors (rounding, reordering) with a few elements far beyond
// them. The bulk is what 99% of the mismatches stay within (to a power of two); an outlier is more
// than 64 times that and beyond 2^-6 of the tensor's scale (its rms), and there are at most
// max(8, n/1000) of them. When every outlier is one flipped bit away from the bulk
// (flipping that bit back brings its error within 4x the bulk), the fault is bit_flip; otherwise
// random_value. The rest of the pair, with the outliers repaired, is detected on its own and, when
// legitimate, becomes the secondary finding: a bf16 kernel with a bug is named as the bug, with the
// precision loss beside it, not as a third model.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/detector/rules.h"
#include "core/fp/block.h"
#include "core/util/parallel.h"

namespace peat::detector::rules {

namespace {

using fp::bitsOf;
using fp::floatOf;


// The elements far beyond a dense bulk of errors; none where there is no such bulk.
struct Outliers {
  std::vector<uint64_t> at;  // their indices, in order
  double bulk = 0;           // the bulk's p99 error, to a power of two
  uint64_t mismatched = 0;   // finite mismatches (the analyzer's log2 |c - g| histogram)
};

Outliers findOutliers(const float* golden, const float* c, uint64_t n, const analyzer::Report& report) {
  Outliers o;
  // the analyzer's report (which the rules used) holds what this needs: the tensor's scale (its rms,
  // here over all n elements), and the histogram of floor(log2 |c - g|) over the finite mismatches
  const uint64_t goldenFinite = n - report.goldenNaN - report.goldenInf;
  const double scale = report.goldenRms * std::sqrt(double(goldenFinite) / double(std::max<uint64_t>(n, 1)));
  for (uint64_t count : report.log2Abs) o.mismatched += count;
  if (o.mismatched < std::max<uint64_t>(100, n / 5)) return o;  // not a dense bulk
  // the bulk: the top of the histogram bin holding the 99th percentile (within a factor of 2)
  std::size_t bin = 0;
  for (uint64_t seen = 0; bin < report.log2Abs.size(); ++bin)
    if ((seen += report.log2Abs[bin]) >= o.mismatched * 99 / 100) break;
  o.bulk = std::ldexp(1.0, int(bin) + analyzer::Report::kLog2AbsMin + 1);
  const double threshold = std::max(o.bulk * 64.0, scale * std::ldexp(1.0, -6));
  // no element beyond it (the largest finite error is not, and no finite golden became NaN or Inf)
  if (report.maxAbs <= threshold && report.newlyNonFinite == 0) return o;
  for (uint64_t i = 0; i < n && o.at.size() <= std::max<uint64_t>(8, n / 1000); ++i)
    if (finite(golden[i]) && (!finite(c[i]) || std::fabs(double(c[i]) - double(golden[i])) > threshold)) o.at.push_back(i);
  if (o.at.size() > std::max<uint64_t>(8, n / 1000)) o.at.clear();
  return o;
}

// The candidate with each outlier's flipped bit flipped back, or (no single bit explains it) golden's value.
struct Repair {
  std::vector<float> values;
  int bitsExplained = 0, firstBit = -1;
  bool sameBit = true;  // every explained outlier at firstBit
};

Repair repair(const float* golden, const float* c, uint64_t n, const Outliers& o) {
  Repair out{std::vector<float>(c, c + n)};
  for (uint64_t i : o.at) {
    int explained = -1;
    for (int b = 31; b >= 0 && explained < 0; --b) {
      const float back = floatOf(bitsOf(c[i]) ^ (uint32_t(1) << b));
      if (finite(back) && std::fabs(double(back) - double(golden[i])) <= 4 * o.bulk) explained = b;
    }
    if (explained >= 0) {
      ++out.bitsExplained;
      out.values[i] = floatOf(bitsOf(c[i]) ^ (uint32_t(1) << explained));
      if (out.firstBit < 0) out.firstBit = explained;
      out.sameBit = out.sameBit && explained == out.firstBit;
    } else {
      out.values[i] = golden[i];
    }
  }
  return out;
}

}  // namespace

Detection outliersOnBulk(const Detection& d, const float* golden, const float* c, const std::vector<uint64_t>& shape,
                         const analyzer::ReportOptions& options, const GemmBound* bound, const analyzer::Report& report) {
  uint64_t n = 1;
  for (uint64_t e : shape) n *= e;
  const Outliers outliers = findOutliers(golden, c, n, report);
  if (outliers.at.empty()) return d;
  const Repair fixed = repair(golden, c, n, outliers);
  const Detection rest = detectOne(golden, {fixed.values.data()}, shape, options, bound);
  if (!roundingSized(rest)) return d;
  const bool flips = fixed.bitsExplained == int(outliers.at.size());
  // NaN or Inf that no single flipped bit explains (an overflow, a NaN generated): R2's verdict
  // stands, and the rounding of the rest is its finding
  if (d.verdict.model == "nan_inf" && !flips) {
    Detection out = d;
    out.findings.push_back(rest.verdict);
    return out;
  }
  const bool sameBit = fixed.sameBit;
  const int firstBit = fixed.firstBit;
  const std::string secondary = restReading(rest);
  Verdict v = make(flips ? "bit_flip" : "random_value", flips ? 0.9 : 0.8,
                   std::to_string(outliers.at.size()) + " element(s) " +
                       (flips ? "one flipped bit" + std::string(sameBit ? " (bit " + std::to_string(firstBit) + ")" : "") +
                                    " away from the rest"
                              : "far beyond the rest") +
                       ", on top of " + secondary + " everywhere else");
  if (flips && sameBit) {
    v.parameters["bit"] = std::to_string(firstBit);
    v.evidence["bit"] = firstBit;
  }
  v.parameters["secondary"] = secondary;
  v.evidence["outliers"] = double(outliers.at.size());
  v.evidence["first_outlier"] = double(outliers.at.front());
  v.evidence["bulk_error_p99"] = outliers.bulk;
  v.evidence["elements"] = double(n);
  v.evidence["mismatched"] = double(outliers.mismatched);
  return supersede(v, rest.verdict, d);
}

namespace {

const std::pair<const char*, const fp::Format*> kGridFormats[] = {
    {"fp8_e4m3", &fp::kE4M3}, {"fp8_e5m2", &fp::kE5M2}, {"bf16", &fp::kBf16}, {"fp16", &fp::kFp16}, {"tf32", &fp::kTf32}};

// Golden rounded to `f` against the candidate: the elements off by more than one step of f, or
// nothing when more than `budget` are, or when some element is rounded another way (no exact replay).
// Two ranges in parallel for large tensors, merged in order.
std::vector<uint64_t> offTheReplay(const fp::Format& f, const float* golden, const float* c, uint64_t n, uint64_t budget,
                                   uint64_t& rounded) {
  struct Part {
    std::vector<uint64_t> off;
    uint64_t rounded = 0;  // elements where rounding golden changed it: the bulk of the replay
    bool fails = false;
  };
  const unsigned parts = n >= (uint64_t(1) << 20) ? 2 : 1;
  std::vector<Part> part(parts);
  const fp::ElementRounder round(f);  // the codec's rounding of finite values in range
  util::parallelRanges(int64_t(n), parts, [&](int64_t lo, int64_t hi, unsigned k) {
    Part& p = part[k];
    std::vector<float> r(kRoundChunk);
    for (uint64_t at = uint64_t(lo); at < uint64_t(hi); at += kRoundChunk) {
      const uint64_t m = std::min(kRoundChunk, uint64_t(hi) - at);
      const float* g = golden + at;
      roundChunk(round, g, r.data(), m);  // golden rounded, in the vectorised loop
      uint64_t changed = 0;  // finite golden values the rounding changed (for finite g, r != g as floats as in bits)
      for (uint64_t j = 0; j < m; ++j) changed += (std::fabs(g[j]) <= std::numeric_limits<float>::max()) & (r[j] != g[j]);
      p.rounded += changed;
      if (std::memcmp(r.data(), c + at, m * sizeof(float)) == 0) continue;  // the replay holds on every element
      for (uint64_t j = 0; j < m; ++j) {
        const uint64_t i = at + j;
        if (!finite(golden[i]) || fp::bitsOf(r[j]) == fp::bitsOf(c[i])) continue;
        if (withinOneStep(f, golden[i], c[i]) || p.off.size() >= budget) {
          p.fails = true;
          return;
        }
        p.off.push_back(i);
      }
    }
  });
  std::vector<uint64_t> off;
  rounded = 0;
  for (const Part& p : part) {
    if (p.fails) return {};
    off.insert(off.end(), p.off.begin(), p.off.end());
    rounded += p.rounded;
  }
  if (off.size() > budget) return {};
  return off;
}

}  // namespace

// R13b: R13 measures outliers against the bulk's p99 error, which an element of small magnitude
// can stay under (a value divided by 16 by an upset of two exponent bits is still a bf16 number).
// When the candidate lies on a format's grid and golden rounded to that format reproduces every
// element bit for bit but a few (at most max(8, n/1000)), and each of those few is off by more than
// one step of the format, the replay of rounding is exact and the few did not come from it, however
// representable their values are. Named by their bits against the replay: one bit each bit_flip,
// one block of adjacent bits each multi_bit_flip, else random_value; the rounding is the finding.
Detection outliersOnGridReplay(const Detection& d, const float* golden, const float* c, uint64_t n, double maxRel) {
  const Verdict& top = d.verdict;
  // precision loss in a format, or R10's output on a format's grid that golden rounded to it does not
  // reproduce everywhere (unknown, its closest that format): a few elements off may be the fault
  const bool gridUnreproduced = top.model == "unknown" && top.parameters.count("format") &&
                                top.parameters.count("closest") && top.evidence.count("off_one_step");
  if ((top.model != "precision_loss" && !gridUnreproduced) || top.parameters.count("block") || n < 100) return d;
  // golden rounded to the named format errs by at most half its step, relative: then nothing is off
  for (const auto& [name, format] : kGridFormats)
    if (top.parameters.count("format") && top.parameters.at("format") == name &&
        maxRel <= std::ldexp(1.0, -format->manBits - 1) * 1.001)
      return d;
  const uint64_t budget = std::max<uint64_t>(8, n / 1000);
  // the format named first, then the others: an outlier off the grid (a flipped exponent bit that
  // leaves fp16's range) makes the output-format rule name a wider one
  const std::string named = top.parameters.count("format") ? top.parameters.at("format") : "";
  std::vector<std::pair<const char*, const fp::Format*>> order;
  for (const auto& f : kGridFormats)
    if (named == f.first) order.push_back(f);
  for (const auto& f : kGridFormats)
    if (named != f.first) order.push_back(f);
  std::vector<uint64_t> off;
  uint64_t rounded = 0;
  const fp::Format* f = nullptr;
  std::string id;
  for (const auto& [name, format] : order) {
    off = offTheReplay(*format, golden, c, n, budget, rounded);
    if (!off.empty() && rounded >= std::max<uint64_t>(100, n / 5)) {
      f = format;
      id = name;
      break;
    }
  }
  if (!f) return d;
  bool single = true, block = true, sameBit = true;
  int firstBit = -1, highest = 0;
  for (uint64_t i : off) {
    const uint32_t x = fp::bitsOf(c[i]) ^ fp::bitsOf(fp::roundTo(*f, golden[i]));
    const int low = __builtin_ctz(x), high = 31 - __builtin_clz(x);
    highest = std::max(highest, high);
    if (x & (x - 1)) single = false;
    if ((x >> low) & ((x >> low) + 1)) block = false;
    if (firstBit < 0) firstBit = low;
    sameBit = sameBit && low == firstBit;
  }
  const std::string model = single ? "bit_flip" : block ? "multi_bit_flip" : "random_value";
  const std::string secondary = "precision_loss (" + id + ")";
  Verdict v = make(model, 0.9,
                   std::to_string(off.size()) + " element(s) more than one " + id +
                       " step off golden rounded to it, which reproduces the other " + std::to_string(n - off.size()) +
                       " bit for bit" +
                       (single ? ": one flipped bit each" : block ? ": one block of adjacent bits each" : "") +
                       "; on top of " + secondary);
  if (single && sameBit) {
    v.parameters["bit"] = std::to_string(firstBit);
    v.evidence["bit"] = firstBit;
  }
  if (block && !single) v.evidence["highest_bit"] = highest;
  v.parameters["secondary"] = secondary;
  v.evidence["outliers"] = double(off.size());
  v.evidence["first_outlier"] = double(off.front());
  v.evidence["elements"] = double(n);
  v.evidence["rounded_by_the_replay"] = double(rounded);
  Verdict rest = make("precision_loss", 0.96, "golden rounded to " + id + " reproduces every other element bit for bit");
  rest.parameters["format"] = id;
  return supersede(v, rest, d);
}

}  // namespace peat::detector::rules
