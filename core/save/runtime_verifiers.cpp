// SPDX-License-Identifier: MIT
// SAVE's verifiers of one layer at run time: the weight compare, the range check, and the type-2
// elements' check by fp32 recomputation (whole, by channel slice or by element), ABFT column
// checksums, or the mixed-precision check; and the choice among them per op.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/save/engine_simd.h"
#include "core/save/runtime_parts.h"

namespace peat::save::protect {

Graph channelSlice(const Graph& g, const Node& n, const std::vector<int64_t>& channels) {
  Graph slice;
  slice.model = n.name + ".slice";
  Node in;  // only the input's shape: the op reads nothing else of it
  in.name = g.nodes[std::size_t(n.inputs[0])].name;
  in.shape = g.nodes[std::size_t(n.inputs[0])].shape;
  slice.nodes.push_back(std::move(in));
  Node part = n;
  part.inputs = {0};
  part.shape[n.op == Op::Conv2d ? 0 : n.shape.size() - 1] = int64_t(channels.size());
  const std::size_t taps = std::size_t(tapsOf(n));
  part.weight.clear();
  part.bias.clear();
  for (int64_t c : channels) {
    part.weight.insert(part.weight.end(), n.weight.begin() + std::ptrdiff_t(std::size_t(c) * taps),
                       n.weight.begin() + std::ptrdiff_t(std::size_t(c + 1) * taps));
    if (!n.bias.empty()) part.bias.push_back(n.bias[std::size_t(c)]);
  }
  slice.nodes.push_back(std::move(part));
  slice.output = 1;
  return slice;
}

namespace {

// ABFT's column sums of a linear or conv node, one checksum per group (a grouped conv's sums run
// over the output channels of one group): sum_o W[o][t], sum_o |W[o][t]|, sum_o b[o], sum_o |b[o]|.
struct ColumnSums {
  int64_t taps = 0, channels = 0, sums = 0, perSum = 0;
  std::vector<double> ws, wa, bs, ba;
};

ColumnSums columnSums(const Node& n) {
  ColumnSums c;
  c.taps = tapsOf(n);
  c.channels = n.op == Op::Linear ? n.features() : n.shape[0];
  c.sums = n.op == Op::Conv2d ? n.groups : 1;
  c.perSum = c.channels / c.sums;
  c.ws.assign(std::size_t(c.sums * c.taps), 0.0);
  c.wa.assign(c.ws.size(), 0.0);
  c.bs.assign(std::size_t(c.sums), 0.0);
  c.ba.assign(c.bs.size(), 0.0);
  for (int64_t o = 0; o < c.channels; ++o)
    for (int64_t t = 0; t < c.taps; ++t) {
      c.ws[std::size_t((o / c.perSum) * c.taps + t)] += n.weight[std::size_t(o * c.taps + t)];
      c.wa[std::size_t((o / c.perSum) * c.taps + t)] += std::fabs(n.weight[std::size_t(o * c.taps + t)]);
    }
  for (std::size_t o = 0; o < n.bias.size(); ++o) {
    c.bs[o / std::size_t(c.perSum)] += n.bias[o];
    c.ba[o / std::size_t(c.perSum)] += std::fabs(n.bias[o]);
  }
  return c;
}

// The largest sum_o |b[o]| + sum_t (sum_o |W[o][t]|) max |x_t| over the checksums, with the largest
// |x| a tap can hold from the input's analysed range.
double worstChecksum(const Graph& g, const Node& n, const ColumnSums& c, const NodeRange& in) {
  double worst = 0;
  if (n.op == Op::Linear) {
    worst = c.ba[0];
    for (int64_t t = 0; t < c.taps; ++t) {
      double m = 0;
      for (int64_t r = 0; r < n.rows(); ++r)
        m = std::max(m, std::max(std::fabs(in.lo[std::size_t(r * c.taps + t)]), std::fabs(in.hi[std::size_t(r * c.taps + t)])));
      worst += c.wa[std::size_t(t)] * m;
    }
    return worst;
  }
  const Node& src = g.nodes[std::size_t(n.inputs[0])];
  const int64_t plane = src.shape[1] * src.shape[2], k2 = n.kernel * n.kernel, cg = groupChannels(n, src);
  for (int64_t gr = 0; gr < c.sums; ++gr) {
    double group = c.ba[std::size_t(gr)];
    for (int64_t t = 0; t < c.taps; ++t) {
      double m = 0;
      const int64_t ch = gr * cg + t / k2;
      for (int64_t i = ch * plane; i < (ch + 1) * plane; ++i)
        m = std::max(m, std::max(std::fabs(in.lo[std::size_t(i)]), std::fabs(in.hi[std::size_t(i)])));
      group += c.wa[std::size_t(gr * c.taps + t)] * m;
    }
    worst = std::max(worst, group);
  }
  return worst;
}

// Why the choice fell as it did, as `peat save campaign` prints it.
std::string choiceReason(const VerifierChoice& c, VerifierPolicy policy, double tau, bool safe, bool mixedSafe) {
  char text[300];
  if (c.kind == VerifierKind::Abft)
    std::snprintf(text, sizeof text, "abft: %s (tolerance %.3g %s tau %.3g), %.1f%% of the recomputation's work",
                  policy == VerifierPolicy::Abft ? "forced" : "misses nothing a robust bit could not",
                  c.tolerance, safe ? "<=" : ">", tau, 100 * c.costRatio);
  else if (c.kind == VerifierKind::Mixed)
    std::snprintf(text, sizeof text, "mixed: %s (16-bit mantissa products, bound %.3g %s tau %.3g; abft tolerance %.3g)",
                  policy == VerifierPolicy::Mixed ? "forced" : "misses nothing a robust bit could not",
                  c.mixedTolerance, mixedSafe ? "<=" : ">", tau, c.tolerance);
  else
    std::snprintf(text, sizeof text, "recompute: %s (abft tolerance %.3g, mixed bound %.3g %s tau %.3g)",
                  policy == VerifierPolicy::Recompute ? "forced"
                  : safe ? "abft would cost more than recomputing (one output channel per group), the mixed check could miss a vulnerable change"
                         : "abft and the mixed check could miss a vulnerable change",
                  c.tolerance, c.mixedTolerance, mixedSafe ? "<=" : ">", tau);
  return text;
}

// One of the checksum's two one-channel ops, run by the engine: sum_o W[o][t] (which 0) or,
// rounded up, sum_o |W[o][t]| (which 1).
Graph checksumOp(const Graph& g, const Node& n, const ColumnSums& c, int which) {
  Graph mini;
  mini.model = n.name + (which == 0 ? ".abft" : ".abft-bound");
  mini.nodes.push_back(g.nodes[std::size_t(n.inputs[0])]);
  mini.nodes[0].op = Op::Input;
  mini.nodes[0].inputs.clear();
  mini.nodes[0].weight.clear();
  mini.nodes[0].bias.clear();
  Node one = n;  // one output channel per group (a grouped conv keeps its groups)
  one.inputs = {0};
  one.shape[one.op == Op::Conv2d ? 0 : one.shape.size() - 1] = c.sums;
  const std::vector<double>& wsum = which == 0 ? c.ws : c.wa;
  const std::vector<double>& bsum = which == 0 ? c.bs : c.ba;
  auto toFloat = [&](double w) {
    float f = float(w);
    if (which == 1 && double(f) < w) f = std::nextafter(f, std::numeric_limits<float>::infinity());
    return f;
  };
  one.weight.resize(wsum.size());
  for (std::size_t t = 0; t < wsum.size(); ++t) one.weight[t] = toFloat(wsum[t]);
  one.bias.clear();
  if (!n.bias.empty() || one.op == Op::Linear)
    for (double b : bsum) one.bias.push_back(toFloat(b));
  mini.nodes.push_back(std::move(one));
  mini.output = 1;
  return mini;
}

}  // namespace

Verifiers::Verifiers(const Graph& g, const Selection& selection, const FaultProcess& faults, const Graph& work,
                     int64_t batch, VerifierPolicy policy)
    : g_(g), sel_(selection), faults_(faults), work_(work), batch_(batch) {
  type2Unreliable_.resize(g.nodes.size());
  for (std::size_t v = 1; v < g.nodes.size(); ++v) {
    const LayerSelection& l = selection.layers[v - 1];
    for (int64_t i : faults.unreliable(v))
      if (~(l.robustMask[std::size_t(i)] | l.rangingMask[std::size_t(i)]) != 0) type2Unreliable_[v].push_back(i);
  }
  // What the recomputation compares: the non-robust bits of the type-2 elements in unreliable memory.
  compareMask_.resize(g.nodes.size());
  for (std::size_t v = 1; v < g.nodes.size(); ++v) {
    compareMask_[v].assign(std::size_t(g.nodes[v].size()), 0);
    for (int64_t i : type2Unreliable_[v]) compareMask_[v][std::size_t(i)] = ~selection.layers[v - 1].robustMask[std::size_t(i)];
  }
  placeSlices();
  boundRanges();
  kind_.assign(g.nodes.size(), VerifierKind::Recompute);
  mixed_.resize(g.nodes.size());
  abftSum_.resize(g.nodes.size());
  abftAbs_.resize(g.nodes.size());
  for (std::size_t v = 1; v < g.nodes.size(); ++v)
    if (g.nodes[v].op == Op::Linear || g.nodes[v].op == Op::Conv2d) chooseVerifier(v, policy);
}

Verifiers::~Verifiers() = default;

// The placement's saving, as the check's work: a linear or conv layer whose type-2 elements in
// unreliable memory lie in only some of its output channels recomputes just those channels. Every
// output still sums its bias, then its taps in order, so the slice is the whole op bit for bit.
void Verifiers::placeSlices() {
  slice_.resize(g_.nodes.size());
  weightFaultChannels_.resize(g_.nodes.size());
  failedElements_.resize(g_.nodes.size());
  for (std::size_t v = 1; v < g_.nodes.size(); ++v) {
    const Node& n = g_.nodes[v];
    if (type2Unreliable_[v].empty() || !(n.op == Op::Linear || (n.op == Op::Conv2d && n.groups == 1))) continue;
    const int64_t channels = channelCount(n);
    std::vector<uint8_t> needed(std::size_t(channels), 0);
    for (int64_t i : type2Unreliable_[v]) needed[std::size_t(channelOf(n, i))] = 1;
    Slice& slice = slice_[v];
    for (int64_t c = 0; c < channels; ++c)
      if (needed[std::size_t(c)]) slice.channels.push_back(c);
    if (int64_t(slice.channels.size()) == channels)
      slice.channels.clear();
    else
      slice.graph = channelSlice(g_, n, slice.channels);
  }
}

// The ranges as fp32 bounds that contain them (for the range check).
void Verifiers::boundRanges() {
  rangeLo_.resize(g_.nodes.size());
  rangeHi_.resize(g_.nodes.size());
  for (std::size_t v = 1; v < g_.nodes.size(); ++v) {
    const NodeRange& r = sel_.ranges.nodes[v];
    for (std::size_t i = 0; i < r.lo.size(); ++i) {
      float lo = float(r.lo[i]), hi = float(r.hi[i]);
      if (double(lo) > r.lo[i]) lo = std::nextafter(lo, -std::numeric_limits<float>::infinity());
      if (double(hi) < r.hi[i]) hi = std::nextafter(hi, std::numeric_limits<float>::infinity());
      rangeLo_[v].push_back(lo);
      rangeHi_[v].push_back(hi);
    }
  }
}

// ABFT's column sums and its largest tolerance on the analysed ranges, the mixed check's largest
// bound, and the choice between them and recomputation.
void Verifiers::chooseVerifier(std::size_t v, VerifierPolicy policy) {
  const Node& n = g_.nodes[v];
  const ColumnSums sums = columnSums(n);
  const double worst = worstChecksum(g_, n, sums, sel_.ranges.nodes[std::size_t(n.inputs[0])]);
  VerifierChoice c;
  c.node = int(v);
  c.name = n.name;
  c.tolerance = gamma32(sums.taps + 1) * worst * (1 + 1e-9);
  c.costRatio = 2.0 / double(sums.perSum);  // a checksum and its tolerance per position and group, against every output
  auto mixed = std::make_unique<MixedChecker>(g_, int(v), sel_.ranges.nodes[std::size_t(n.inputs[0])]);
  c.mixedTolerance = mixed->worstTolerance();
  const double tau = sel_.options.tau;
  const bool safe = c.tolerance <= tau, mixedSafe = c.mixedTolerance <= tau;
  // (auto takes abft only where it is cheaper than recomputing: not for a depthwise conv, whose
  // checksum per group is its one output channel again)
  if (policy == VerifierPolicy::Abft || (policy == VerifierPolicy::Auto && safe && c.costRatio < 1))
    c.kind = VerifierKind::Abft;
  else if (policy == VerifierPolicy::Mixed || (policy == VerifierPolicy::Auto && mixedSafe)) c.kind = VerifierKind::Mixed;
  c.reason = choiceReason(c, policy, tau, safe, mixedSafe);
  kind_[v] = c.kind;
  mixed_[v] = std::move(mixed);
  choices_.push_back(std::move(c));
  abftSum_[v] = checksumOp(g_, n, sums, 0);
  abftAbs_[v] = checksumOp(g_, n, sums, 1);
}

bool Verifiers::checksum(int v, const Activations& act, RunStats& stats) {
  // For each image and output position p: sum_o y[o][p] against the same op with one output
  // channel, weights sum_o W[o][t] and bias sum_o b[o], run by the engine. With B the same op on
  // |x| with weights sum_o |W[o][t]| (rounded up) and bias sum_o |b[o]|: the fp32 outputs' sum is
  // within gamma B of the exact one, the fp32 checksum within (u + gamma + u gamma) B of its exact
  // value, and B's own fp32 value is at least (1 - gamma) times the exact one (all terms >= 0).
  const Node& n = g_.nodes[std::size_t(v)];
  const int64_t size = n.size(), taps = tapsOf(n);
  const int64_t channels = n.op == Op::Linear ? n.features() : n.shape[0], positions = size / channels;
  const int64_t sums = n.op == Op::Conv2d ? n.groups : 1, perSum = channels / sums;  // one checksum per group
  const Graph& sumGraph = abftSum_[std::size_t(v)];
  const Graph& absGraph = abftAbs_[std::size_t(v)];
  const std::vector<float>& x = act[std::size_t(n.inputs[0])];
  abftExpect_.resize(std::size_t(batch_ * sums * positions));
  abftBound_.resize(std::size_t(batch_ * sums * positions));
  abftAbsInput_.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) abftAbsInput_[i] = std::fabs(x[i]);
  runNode(sumGraph, 1, {x.data()}, batch_, abftExpect_.data());
  runNode(absGraph, 1, {abftAbsInput_.data()}, batch_, abftBound_.data());
  const double gm = gamma32(taps + 1), u = kU32;
  const double factor = (2 * gm + u + gm * u) / (1 - gm) * (1 + 1e-9);
  const double tiny = double((perSum + 1) * (taps + 1)) * 0x1p-149;
  const int64_t checks = sums * positions;  // the mini op's output: [group][position] (linear: [position])
  std::vector<double> got(static_cast<std::size_t>(checks)), gotAbs(static_cast<std::size_t>(checks));
  for (int64_t s = 0; s < batch_; ++s) {
    const float* y = act[std::size_t(v)].data() + s * size;
    std::fill(got.begin(), got.end(), 0.0);
    std::fill(gotAbs.begin(), gotAbs.end(), 0.0);
    for (int64_t o = 0; o < channels; ++o)
      for (int64_t p = 0; p < positions; ++p) {
        const double yo = y[n.op == Op::Linear ? p * channels + o : o * positions + p];
        const std::size_t at = std::size_t((o / perSum) * positions + p);
        got[at] += yo;
        gotAbs[at] += std::fabs(yo);
      }
    for (int64_t p = 0; p < checks; ++p) {
      const double bound = abftBound_[std::size_t(s * checks + p)];
      const double tolerance = factor * bound + tiny + 1e-12 * gotAbs[std::size_t(p)];
      ++stats.checksums;
      if (!(std::fabs(got[std::size_t(p)] - double(abftExpect_[std::size_t(s * checks + p)])) <= tolerance)) {
        ++stats.checksumMismatches;  // NaN fails too
        return true;
      }
    }
  }
  return false;
}

bool Verifiers::withinRange(int node, int64_t element, float value) const {
  return value >= rangeLo_[std::size_t(node)][std::size_t(element)] && value <= rangeHi_[std::size_t(node)][std::size_t(element)];
}

// The weights this layer used, against the host's clean copy (a DMA copy back on a GPU). A change
// that the bit classes call robust (the selection's criterion: below tau, or unable to move the
// logits by more than epsilon) is rewritten from the host's copy without a rerun; any other one
// makes the layer rerun (true).
bool Verifiers::weightsChanged(int v, RunStats& stats) {
  const Node& n = g_.nodes[std::size_t(v)];
  if (!hasWeights(n) || (work_.nodes[std::size_t(v)].weight == n.weight && work_.nodes[std::size_t(v)].bias == n.bias))
    return false;
  const Node& used = work_.nodes[std::size_t(v)];
  std::vector<float> clean = n.weight, now = used.weight;
  clean.insert(clean.end(), n.bias.begin(), n.bias.end());
  now.insert(now.end(), used.bias.begin(), used.bias.end());
  if (weightChangesRobust(sel_, v, clean, now)) {
    ++stats.weightQuietRepairs;
    return false;
  }
  ++stats.weightRepairs;
  // the output channels whose weights (rows) or bias changed: the recovery may rerun only those
  std::vector<int64_t>& channels = weightFaultChannels_[std::size_t(v)];
  channels.clear();
  if (n.op == Op::Linear || (n.op == Op::Conv2d && n.groups == 1)) {
    const std::size_t taps = std::size_t(tapsOf(n)), count = n.weight.size() / taps;
    for (std::size_t c = 0; c < count; ++c) {
      bool changed = !n.bias.empty() && std::memcmp(&n.bias[c], &used.bias[c], 4) != 0;
      changed = changed || std::memcmp(&n.weight[c * taps], &used.weight[c * taps], taps * 4) != 0;
      if (changed) channels.push_back(int64_t(c));
    }
  }
  return true;
}

// Every element is checked, in one vectorisable pass per image: elements in reliable memory
// cannot flip, and the ranges are sound, so they never fail.
bool Verifiers::rangeViolated(int v, const std::vector<float>& x, RunStats& stats) {
  const int64_t size = g_.nodes[std::size_t(v)].size();
  const float* lo = rangeLo_[std::size_t(v)].data();
  const float* hi = rangeHi_[std::size_t(v)].data();
  if (faults_.unreliable(std::size_t(v)).empty()) return false;
  for (int64_t s = 0; s < batch_; ++s) {
    if (detail::anyOutside(x.data() + s * size, lo, hi, size)) {  // NaN fails
      ++stats.rangeViolations;
      std::vector<int64_t>& failed = failedElements_[std::size_t(v)];  // every value outside, for the repair
      for (int64_t t = s; t < batch_; ++t)
        for (int64_t i = 0; i < size; ++i)
          if (!(x[std::size_t(t * size + i)] >= lo[i]) || !(x[std::size_t(t * size + i)] <= hi[i])) failed.push_back(t * size + i);
      return true;
    }
  }
  return false;
}

bool Verifiers::verify(int v, const Activations& act, RunStats& stats) {
  // The weights, the range check of the unreliable elements, and the check of the type-2 ones
  // (by default recomputed from the op's verified inputs and compared outside their robust bits).
  weightFaultChannels_[std::size_t(v)].clear();
  failedElements_[std::size_t(v)].clear();
  if (weightsChanged(v, stats)) return true;
  if (rangeViolated(v, act[std::size_t(v)], stats)) return true;
  return checkType2With(kind_[std::size_t(v)], v, act, stats);
}

bool Verifiers::sliceMismatch(int v, const float* input, const std::vector<float>& x, RunStats& stats) {
  const Node& n = g_.nodes[std::size_t(v)];
  const Slice& slice = slice_[std::size_t(v)];
  const int64_t size = n.size(), channels = channelCount(n), k = int64_t(slice.channels.size());
  const auto [outer, inner] = channelLayout(n);
  std::vector<float>& again = again_;
  again.resize(std::size_t(batch_ * k * outer * inner));
  runNode(slice.graph, 1, {input}, batch_, again.data());
  const uint32_t* mask = compareMask_[std::size_t(v)].data();
  // Sample s's compared bits that differ, OR-ed; when `collect` (a compile-time flag, so the
  // fault-free pass stays branch-free), every such element is added to the failures too (ascending).
  auto compare = [&](int64_t s, auto collect) {
    uint32_t differ = 0;
    const float* mine = again.data() + s * k * outer * inner;
    const float* theirs = x.data() + s * size;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < k; ++j) {
        const int64_t full = (o * channels + slice.channels[std::size_t(j)]) * inner, part = (o * k + j) * inner;
        for (int64_t q = 0; q < inner; ++q) {
          const uint32_t d = (fp::bitsOf(mine[part + q]) ^ fp::bitsOf(theirs[full + q])) & mask[full + q];
          differ |= d;
          if constexpr (decltype(collect)::value)
            if (d) failedElements_[std::size_t(v)].push_back(s * size + full + q);
        }
      }
    return differ;
  };
  for (int64_t s = 0; s < batch_; ++s)
    if (compare(s, std::false_type{})) {
      ++stats.recomputeMismatches;
      for (int64_t t = s; t < batch_; ++t) compare(t, std::true_type{});  // for the repair
      return true;
    }
  return false;
}

// fp32 recomputation of the type-2 elements in unreliable memory from the op's inputs `in`:
// the whole layer in one vectorisable pass when that is cheaper, else element by element.
bool Verifiers::recomputeMismatch(int v, const std::vector<const float*>& in, const std::vector<float>& x,
                                  RunStats& stats) {
  const Node& n = g_.nodes[std::size_t(v)];
  const int64_t size = n.size();
  const std::vector<int64_t>& check = type2Unreliable_[std::size_t(v)];
  std::vector<float>& again = again_;  // only the checking thread uses it
  if (int64_t(check.size()) * 16 > size) {  // one contiguous, vectorisable pass: the mask is zero where nothing is to be compared
    again.resize(x.size());
    runNode(g_, v, in, batch_, again.data());
    const uint32_t* mask = compareMask_[std::size_t(v)].data();
    for (int64_t s = 0; s < batch_; ++s) {
      if (detail::anyMaskedDifference(again.data() + s * size, x.data() + s * size, mask, size)) {
        ++stats.recomputeMismatches;
        std::vector<int64_t>& failed = failedElements_[std::size_t(v)];  // every changed value, for the repair
        for (int64_t t = s; t < batch_; ++t)
          for (int64_t i = 0; i < size; ++i)
            if ((fp::bitsOf(again[std::size_t(t * size + i)]) ^ fp::bitsOf(x[std::size_t(t * size + i)])) & mask[i])
              failed.push_back(t * size + i);
        return true;
      }
    }
    return false;
  }
  const LayerSelection& l = sel_.layers[std::size_t(v - 1)];
  std::vector<const float*> sampleIn(in.size());
  for (int64_t s = 0; s < batch_; ++s) {
    for (std::size_t k = 0; k < in.size(); ++k) sampleIn[k] = in[k] + s * g_.nodes[std::size_t(n.inputs[k])].size();
    for (int64_t i : check) {
      const float value = elementOf(g_, v, sampleIn, i);
      if ((fp::bitsOf(value) ^ fp::bitsOf(x[std::size_t(s * size + i)])) & ~l.robustMask[std::size_t(i)])
        failedElements_[std::size_t(v)].push_back(s * size + i);  // every changed value, for the repair
    }
  }
  if (failedElements_[std::size_t(v)].empty()) return false;
  ++stats.recomputeMismatches;
  return true;
}

bool Verifiers::checkType2With(VerifierKind kind, int v, const Activations& act, RunStats& stats) {
  const Node& n = g_.nodes[std::size_t(v)];
  const int64_t size = n.size();
  const std::vector<float>& x = act[std::size_t(v)];
  const std::vector<int64_t>& check = type2Unreliable_[std::size_t(v)];
  failedElements_[std::size_t(v)].clear();  // what this check finds, for the repair
  if (check.empty()) return false;
  if (kind != VerifierKind::Recompute && !mixed_[std::size_t(v)])
    throw SaveError("node '" + n.name + "' has only fp32 recomputation (abft and mixed checks need a linear or conv op)");
  if (kind == VerifierKind::Abft) return checksum(v, act, stats);
  stats.recomputed += uint64_t(batch_) * check.size();
  const bool whole = int64_t(check.size()) * 16 > size;  // the vectorised layer is cheaper
  if (kind == VerifierKind::Mixed) {
    MixedChecker* mixed = mixed_[std::size_t(v)].get();
    const float* input = act[std::size_t(n.inputs[0])].data();
    const bool bad = whole ? mixed->mismatch(input, x.data(), batch_, compareMask_[std::size_t(v)])
                           : mixed->mismatchAt(input, x.data(), batch_, check);
    stats.recomputeMismatches += bad;
    return bad;
  }
  std::vector<const float*> in;
  for (int i : n.inputs) in.push_back(act[std::size_t(i)].data());
  // Only some channels hold type-2 values in unreliable memory, and enough of them for the
  // vectorised op: recompute those channels.
  if (!slice_[std::size_t(v)].channels.empty() &&
      int64_t(check.size()) * 16 > int64_t(slice_[std::size_t(v)].channels.size()) * (size / channelCount(n)))
    return sliceMismatch(v, in[0], x, stats);
  return recomputeMismatch(v, in, x, stats);
}

}  // namespace peat::save::protect
