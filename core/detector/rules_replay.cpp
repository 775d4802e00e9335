// SPDX-License-Identifier: MIT
// R12: with the GEMM's operands (playback), the smallest worst-case rounding bound that holds, and the
// replays of each format on the recorded inputs (gemm_replay.h, block_replay.h), decide between
// reordering, rounding to a format, fp16 accumulation and a planted block-scaling mistake.
#include <algorithm>
#include <iterator>
#include <optional>

#include "core/detector/gemm_replay.h"
#include "core/detector/rules.h"

namespace peat::detector::rules {

namespace {

// The smallest error model whose worst-case bound holds at every element: fp32 reordering
// (gamma_K of 2^-24 on both sides), else inputs rounded to a format with unit roundoff u
// ((2u + u^2) |a||b| on top). Returns the index into `models`, or -1 when even fp8 e5m2's bound fails.
// u: unit roundoff; eta: half the smallest subnormal, the absolute error of rounding a tiny value
// (underflow), which a relative bound alone does not cover.
struct BoundModel {
  const char* model;
  const char* format;
  double u, eta;
};
const BoundModel kBoundModels[] = {
    {"accumulation_order", "", 0, 0},
    {"precision_loss", "tf32", std::ldexp(1.0, -11), std::ldexp(1.0, -137)},
    {"precision_loss", "fp16", std::ldexp(1.0, -11), std::ldexp(1.0, -25)},
    {"precision_loss", "bf16", std::ldexp(1.0, -8), std::ldexp(1.0, -134)},
    {"precision_loss", "fp8_e4m3", std::ldexp(1.0, -4), std::ldexp(1.0, -10)},
    {"precision_loss", "fp8_e5m2", std::ldexp(1.0, -3), std::ldexp(1.0, -17)}};

int smallestBound(const float* g, const float* c, uint64_t n, const GemmBound& b, double& worstRatio) {
  const double u32 = std::ldexp(1.0, -24);
  const double kk = double(b.k);
  const double gamma = reorderGamma(b.k);
  for (int idx = 0; idx < int(std::size(kBoundModels)); ++idx) {
    const double u = kBoundModels[idx].u;
    worstRatio = 0;
    bool holds = true;
    for (uint64_t i = 0; i < n; ++i) {
      if (!finite(g[i]) || !finite(c[i])) return -1;
      const double err = std::fabs(double(c[i]) - double(g[i]));
      if (err == 0) continue;
      // (a + da)(b + db) - ab with |da| <= u|a| + eta: (2u + u^2)|a||b| + eta(1 + u)(|a| + |b|) + eta^2, summed over k.
      const double eta = kBoundModels[idx].eta;
      const uint64_t row = i / uint64_t(b.cols), col = i % uint64_t(b.cols);
      const uint64_t batchOf = row / uint64_t(b.rows / std::max<int64_t>(1, b.batch));  // colAbsSum is per batch
      const double under =
          eta * (1 + u) * (double(b.rowAbsSum[row]) + double(b.colAbsSum[batchOf * uint64_t(b.cols) + col])) + kk * eta * eta;
      const double bound =
          (2 * u + u * u + gamma) * double(b.absProduct[i]) + under + 2 * u32 * std::fabs(double(g[i]));
      worstRatio = std::max(worstRatio, err / std::max(bound, 1e-300));
      if (err > bound) {
        holds = false;
        break;
      }
    }
    if (holds) return idx;
  }
  return -1;
}

// What the elementwise bounds and replays say about the candidate.
struct BoundFit {
  int idx = -1;                          // the smallest bound that holds, into kBoundModels; -1: none
  double ratio = 0;                      // the worst error over that bound
  std::vector<std::string> reproduced;   // formats whose replay reproduces it, the likeliest first
  double closer = 0;                     // squared-error ratio, fp32 replay over the named format's
};

// Within the fp32 reordering bound (a worst case, linear in K), a 10-bit format's rounding can
// hide too: at K = 1024 a tf32 GEMM's typical error is below that bound. The candidate then
// says which it is by which replay it sits closer to: a reordered fp32 sum is near the fp32
// replay and far from any format's (their rounding dominates), a format's GEMM the reverse.
// Closer by 16x in squared error (4x in RMS), and reproduced within the replay's bound, names
// the format.
void preferCloserFormat(const float* c, const GemmBound& bound, BoundFit& fit) {
  if (!(fit.idx == 0 && !bound.a.empty() && double(bound.rows) * double(bound.cols) * double(bound.k) <= 5e8)) return;
  const double fp32 = replaySse(c, bound, "");
  // fp8 with one scale per tensor too: at K = 50176 (a conv's weight gradient) its errors, 1.5% of
  // the output's scale, sit inside the fp32 reordering bound
  std::optional<std::vector<std::string>> reproducing;  // the replays within their bound, made once when needed
  for (const char* id : {"tf32", "fp16", "bf16", "fp8_e4m3/tensor-scale", "fp8_e5m2/tensor-scale"}) {
    if (!(fp32 > 0)) break;
    const double sse = replaySse(c, bound, id, fp32 / 16);  // a reordered sum stops within a few rows
    if (!(sse * 16 < fp32)) continue;
    const std::string f(id);
    if (!reproducing) reproducing = reproducingFormats(c, bound);
    const std::vector<std::string>& formats = *reproducing;  // and within the replay's bound
    if (std::find(formats.begin(), formats.end(), f) == formats.end()) continue;
    for (int t = 1; t < int(std::size(kBoundModels)); ++t)
      if (formatOfHypothesis(f) == kBoundModels[t].format) fit.idx = t;
    fit.reproduced = {f};  // first, then the others that also reproduce it
    for (const std::string& other : formats)
      if (other != f) fit.reproduced.push_back(other);
    fit.closer = fp32 / std::max(sse, 1e-300);
    break;
  }
}

BoundFit fitBound(const RuleContext& x) {
  BoundFit fit;
  fit.idx = smallestBound(x.golden, x.c, x.n, *x.bound, fit.ratio);
  if (fit.idx > 0) fit.reproduced = rankedByReplay(x.c, *x.bound, reproducingFormats(x.c, *x.bound));
  preferCloserFormat(x.c, *x.bound, fit);
  return fit;
}

// Adds `v`, a replay on the operands that reproduced the candidate, with its evidence: K, then its
// group or block size under `sizeKey`; the errors count as bounded.
void addReproduced(RuleContext& x, Verdict v, const char* sizeKey, double size) {
  v.evidence["k"] = double(x.bound->k);
  v.evidence[sizeKey] = size;
  v.evidence["reproduced"] = 1.0;
  x.bounded = x.reproduced = true;
  x.add(v);
}

void addFp16Accumulation(RuleContext& x, const Fp16Accumulation& halfAcc) {
  Verdict v = make("precision_loss", 0.95,
                   "the candidate lies on fp16's grid (before the bias) and as close to the replay of fp16 inputs "
                   "as one fp16 accumulation: fp16 inputs summed in fp16 (K = " + std::to_string(x.bound->k) + ")");
  v.parameters["format"] = "fp16";
  v.parameters["accumulation"] = "fp16";
  v.evidence["k"] = double(x.bound->k);
  v.evidence["rms_from_fp16_replay"] = halfAcc.candidateRms;
  v.evidence["rms_of_one_fp16_accumulation"] = halfAcc.accumulationRms;
  x.bounded = x.reproduced = true;
  x.add(v);
}

void addWeightQuant(RuleContext& x, const WeightQuantScheme& s) {
  const std::string format = "int" + std::to_string(s.bits);
  Verdict v = make("precision_loss", 0.98,
                   "quantising the recorded weights to " + format + (s.asymmetric ? " (asymmetric)" : " (symmetric)") +
                       " in groups of " + std::to_string(s.group) + " along K = " + std::to_string(x.bound->k) +
                       ", scales in " + s.scaleFormat + ", activations in " + s.activations +
                       ", reproduces the candidate: weight-only quantisation");
  v.parameters["format"] = format;
  v.parameters["weights"] = format + (s.asymmetric ? "-asym" : "-sym");
  v.parameters["group"] = std::to_string(s.group);
  v.parameters["scale_format"] = s.scaleFormat;
  v.parameters["activations"] = s.activations;
  addReproduced(x, v, "group", double(s.group));
}

void addBlockScheme(RuleContext& x, const BlockMatch& match) {
  const BlockScheme& s = match.scheme;
  const std::string name(s.format.name), size = std::to_string(s.block);
  const std::string how = "quantising the recorded inputs" + std::string(s.output ? " and the output" : "") +
                          " to " + name + " in blocks of " + size;
  Verdict v;
  if (s.legitimate()) {
    v = make("precision_loss", 0.98, how + " along K = " + std::to_string(x.bound->k) + " reproduces the candidate");
  } else if (s.bug == fp::BlockBug::TruncatedScale) {
    v = make("scaling", 0.97, how + " with each block's scale truncated instead of rounded as the format "
                             "specifies reproduces the candidate: values scaled up to twice too far, blocks saturate");
  } else if (s.wrongDimension) {
    v = make("index_error", 0.97, how + " along M and N instead of along the reduction (K = " +
                                  std::to_string(x.bound->k) + ") reproduces the candidate");
  } else {
    v = make("index_error", 0.97, how + " along K, each block scaled with the next block's scale (off by one "
                                  "block), reproduces the candidate");
  }
  v.parameters["format"] = name;
  v.parameters["block"] = size;
  if (s.output) v.parameters["output"] = "quantised";
  if (!s.legitimate()) v.parameters["bug"] = s.bugName();
  if (!match.alsoReproducedBy.empty()) {
    std::string also;
    for (const std::string& f : match.alsoReproducedBy) also += (also.empty() ? "" : ",") + f;
    v.parameters["also_reproduced_by"] = also;
  }
  addReproduced(x, v, "block", double(s.block));
}

// Worst-case bounds are loose (rounding errors mostly cancel), so the smallest bound that holds
// settles reordering against rounding; replaying each format on the recorded inputs, or else
// the typical error size, names the format.
void addBoundVerdict(RuleContext& x, const BoundFit& fit) {
  x.bounded = true;
  const BoundModel& b = kBoundModels[fit.idx];
  std::string format = b.format;
  double confidence = 0.9;
  const bool scaled = !fit.reproduced.empty() && perTensorScaled(fit.reproduced.front());
  if (!fit.reproduced.empty()) {
    format = formatOfHypothesis(fit.reproduced.front());
    confidence = 0.98;
  } else if (fit.idx > 0) {
    const char* typical = x.ulpMedian <= 12 ? "" : x.ulpMedian <= 16 ? "bf16" : x.ulpMedian <= 18 ? "fp8_e4m3" : "fp8_e5m2";
    for (int t = fit.idx; t < int(std::size(kBoundModels)); ++t)
      if (*typical && std::string(kBoundModels[t].format) == typical) format = typical;
    // Without a replay that reproduces it, only fp8's loose bound says "rounding": too weak alone.
    confidence = b.u >= std::ldexp(1.0, -4) ? 0.45 : 0.75;
  }
  const std::string how = scaled ? format + " with one scale per tensor (its amax over " + format + "'s largest value)"
                                 : format;
  Verdict v = make(b.model, confidence,
                   !fit.reproduced.empty()
                       ? "rounding the recorded inputs to " + how + " reproduces the candidate (K = " +
                             std::to_string(x.bound->k) + ")"
                       : std::string("every error is within the bound of ") +
                             (*b.format ? std::string("inputs rounded to ") + b.format
                                        : std::string("an fp32 reordering")) +
                             " for K = " + std::to_string(x.bound->k));
  if (!format.empty()) v.parameters["format"] = format;
  if (scaled) v.parameters["scale"] = "per-tensor";
  if (fit.reproduced.size() > 1) {
    std::string also;
    for (std::size_t t = 1; t < fit.reproduced.size(); ++t) also += (also.empty() ? "" : ",") + fit.reproduced[t];
    v.parameters["also_reproduced_by"] = also;
  }
  v.evidence["k"] = double(x.bound->k);
  v.evidence["worst_error_over_bound"] = fit.ratio;
  v.evidence["reproduced"] = fit.reproduced.empty() ? 0.0 : 1.0;
  if (fit.closer > 0) v.evidence["closer_than_fp32"] = fit.closer;  // squared-error ratio, fp32 replay over the format's
  // A format's bound held but its replay on the operands (which ran) reproduces nothing: a bound that
  // loose also holds a sum with some of its K terms missing. The format is the closest reading only.
  const bool replaysRan = !x.bound->a.empty() &&
                          double(x.bound->rows) * double(x.bound->cols) * double(x.bound->k) <= 5e8;
  if (fit.idx > 0 && fit.reproduced.empty() && replaysRan && confidence >= 0.5) {
    const std::string closest = "precision_loss" + (format.empty() ? std::string() : " (" + format + ")");
    Verdict u = make("unknown", confidence,
                     "every error is within the bound of inputs rounded to " + std::string(b.format) + " (K = " +
                         std::to_string(x.bound->k) + "), but no format's replay of the recorded operands "
                         "reproduces the candidate (tried: tf32, fp16, bf16, fp8 e4m3 and e5m2 unscaled and with one "
                         "scale per tensor, the block-scaled formats, fp16 accumulation, weight-only groups)");
    u.parameters["closest"] = closest;
    u.evidence["k"] = double(x.bound->k);
    u.evidence["worst_error_over_bound"] = fit.ratio;
    v.confidence = confidence / 2;
    v.parameters["reproduced"] = "no";
    x.add(v);
    x.add(u);
    return;
  }
  x.add(v);
  x.reproduced = confidence >= 0.5;
  if (confidence < 0.5) {
    Verdict u = make("unknown", 0.5,
                     "errors fit only fp8's loose bound, and no format's rounding of the recorded inputs "
                     "reproduces them (tried: tf32, fp16, bf16, fp8 e4m3 and e5m2 unscaled and with one scale per "
                     "tensor, the block-scaled formats)");
    x.add(u);
  }
}

}  // namespace

// R12: with the GEMM's operands, the smallest worst-case rounding bound that holds decides.
void gemmReplay(RuleContext& x) {
  const GemmBound* bound = x.bound;
  if (!(bound && bound->absProduct.size() == x.n && x.r.newlyNonFinite == 0 && !x.sparse) || x.zeroedOutput) return;
  const BoundFit fit = fitBound(x);
  // block-scaled formats (core/detector/block_replay.h): where no element format reproduces it,
  // or no bound holds at all (MXFP4's and NVFP4's errors exceed even fp8's elementwise bound)
  // an fp32 GEMM that stores 16 bits: the output's grid is the reading (R10), no other scheme's
  const bool storedNarrow = fit.idx != 0 && fit.reproduced.empty() && recordedWithinOutputStep(x.c, *bound);
  std::optional<BlockMatch> blockMatch;
  if (fit.idx != 0 && fit.reproduced.empty() && !storedNarrow) {
    blockMatch = reproducingBlockScheme(x.c, *bound);
    x.blocksReplayed =
        double(bound->rows) * double(bound->cols) * double(bound->k) <= 5e8 && !bound->a.empty() && bound->batch == 1;
  }
  // fp16 inputs accumulated in fp16: no fp32-summing replay reproduces it (gemm_replay.h)
  std::optional<Fp16Accumulation> halfAcc;
  if (fit.idx != 0 && fit.reproduced.empty() && !blockMatch && !storedNarrow) {
    halfAcc = fp16Accumulation(x.c, *bound);
    if (!halfAcc->holds()) halfAcc.reset();
  }
  // weight-only group quantisation (int4 / int8 weights, the activations as they are or in 16 bits)
  std::optional<WeightQuantScheme> weights;
  if (fit.idx != 0 && fit.reproduced.empty() && !blockMatch && !halfAcc && !storedNarrow) weights = reproducingWeightQuant(x.c, *bound);
  if (weights) addWeightQuant(x, *weights);
  if (halfAcc) addFp16Accumulation(x, *halfAcc);
  if (blockMatch) addBlockScheme(x, *blockMatch);
  if (fit.idx == 0 && fit.reproduced.empty()) {  // the fp32 reordering bound alone: is it a reordering?
    const OrderDistance order = orderDistance(x.golden, x.c, *bound);
    if (!order.holds()) {
      const std::string times = number(order.candidate / std::max(order.orders, 1e-300));
      Verdict v = make("accumulation_order", 0.4,
                       "within the worst-case fp32 reordering bound for K = " + std::to_string(bound->k) +
                           ", but " + times + " times farther from the fp32 replay than other summation orders lie");
      v.parameters["reproduced"] = "no";
      v.evidence["distance_over_orders"] = order.candidate / std::max(order.orders, 1e-300);
      x.add(v);
      Verdict u = make("unknown", 0.7,
                       "every error is within the worst-case fp32 reordering bound (K = " + std::to_string(bound->k) +
                           "), but the candidate lies " + times +
                           " times farther from the fp32 replay of the recorded operands than golden's and a reversed "
                           "order do: not another summation order (part of the sum missing?)");
      u.parameters["closest"] = "accumulation_order";
      u.evidence["distance_over_orders"] = order.candidate / std::max(order.orders, 1e-300);
      u.evidence["k"] = double(bound->k);
      x.add(u);
      return;
    }
  }
  if (fit.idx >= 0 && !blockMatch && !halfAcc && !weights) addBoundVerdict(x, fit);
}

}  // namespace peat::detector::rules
