// SPDX-License-Identifier: MIT
#pragma once
// Replays of a GEMM's recorded operands (GemmBound) rounded to each elementwise format, private to
// core/detector: which formats reproduce a candidate, how close each replay lies, and whether the
// kernel accumulated in fp16. The rules in rules_replay.cpp judge by them; block_replay.h does the same
// for the block-scaled formats.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/detector/detector.h"
#include "core/fp/format.h"

namespace peat::detector {
// The largest |v[i]| over the finite values (NaN and Inf count as 0), in vector lanes.
float finiteAmax(const float* v, std::size_t n);
// The same over a bound's whole operand a or b, made once per bound (GemmBound::aAmax, bAmax).
float operandAmaxA(const GemmBound& g);
float operandAmaxB(const GemmBound& g);
}  // namespace peat::detector

namespace peat::detector::rules {

// The suffix of an fp8 hypothesis with one scale per tensor ("fp8_e4m3/tensor-scale").
constexpr std::string_view kPerTensorScale = "/tensor-scale";
inline bool perTensorScaled(const std::string& id) {
  return id.size() > kPerTensorScale.size() && std::string_view(id).substr(id.size() - kPerTensorScale.size()) == kPerTensorScale;
}
// The format of a hypothesis' id, without the scale's suffix.
inline std::string formatOfHypothesis(const std::string& id) {
  return perTensorScaled(id) ? id.substr(0, id.size() - kPerTensorScale.size()) : id;
}

// The elementwise formats ("tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", then the two fp8 formats
// with one scale per tensor, "fp8_e4m3/tensor-scale" and "fp8_e5m2/tensor-scale", in that order)
// whose rounding of the recorded inputs reproduces the candidate, up to fp32 reordering. None when the GEMM
// is too costly to replay here (m n k > 5e8) or its operands were not recorded.
std::vector<std::string> reproducingFormats(const float* c, const GemmBound& b);

// The sum of squared differences between the candidate and the GEMM replayed on the recorded inputs
// rounded as hypothesis `id` (reproducingFormats' ids; "": as they are, in fp32), in this replay's own summation order, over at
// most 64 rows spread evenly over the output (the same rows for every format: a comparison between
// replays, not a bound); it stops (returning what it has summed) as soon as the sum passes `limit`.
double replaySse(const float* c, const GemmBound& b, const std::string& id,
                 double limit = std::numeric_limits<double>::infinity());

// The 16-bit grid every finite candidate value lies on, bf16 first (a bf16 value inside fp16's range
// is on fp16's grid too, and a value stored in bf16 errs by bf16's step), else null: the output's
// format, whose step the replays allow on top of their slack (a kernel that stores bf16).
const fp::Format* outputGrid(const float* c, uint64_t n);

// A candidate stored in 16 bits (outputGrid) that the operands as recorded reproduce within the fp32
// reordering bound plus one step of that format (and its bias given in it): an fp32 GEMM that stores
// 16 bits, which no other scheme's replay (weight-only groups, block scales) need explain.
bool recordedWithinOutputStep(const float* c, const GemmBound& b);

// Several formats can reproduce a candidate within the replay's slack (the fp32 reordering bound,
// which is worst-case and linear in K): at K = 4096 a bf16 GEMM's typical error sits inside it, so
// tf32's and fp16's replays "reproduce" a bf16 candidate too. Of those, the format whose replay lies
// closest to the candidate (least squared difference over the same rows) is the one it was made
// with; formats whose replays are as close as the best (within 1%: identical rounding, as tf32 and
// fp16 on inputs inside fp16's range) keep their order, the others follow by distance.
std::vector<std::string> rankedByReplay(const float* c, const GemmBound& b, const std::vector<std::string>& formats);

// A kernel that accumulates in fp16 (an HGEMM with an fp16 accumulator, or fp16 inputs summed in
// fp16 blocks) errs by the rounding of its running sums, not only of its inputs, so no replay that
// sums in fp32 reproduces it, and its error, about that of bf16 inputs, once made it look like bf16.
// Two signs of it, both needed: (1) its values before the bias lie on fp16's grid (the accumulator
// is fp16; a value that is not fp16 lands on the grid by chance with probability about 2^-12), and
// (2) it sits no farther from the replay of fp16-rounded inputs summed in fp32 than one fp16
// accumulation (this replay's own, in reverse order) does: at most 4x in RMS. A missing K tile or
// a misindexed operand in such a kernel is on the grid too, but tens of times farther away.
struct Fp16Accumulation {
  bool onGrid = false;
  double candidateRms = 0, accumulationRms = 0;  // from the fp16-input replay summed in fp32
  bool holds() const { return onGrid && candidateRms <= 4 * accumulationRms && accumulationRms > 0; }
};
Fp16Accumulation fp16Accumulation(const float* c, const GemmBound& b);

// Another fp32 summation order lies near the fp32 replay of the recorded operands (errors of order
// sqrt(K) roundings that mostly cancel); a sum with a few of its K terms missing lies as far as those
// terms, however small against the worst-case reordering bound (2K roundings of sum |a||b|, which a
// missing K tile of 16 at K = 9216 stays inside). Distances in RMS over at most 64 rows: the candidate's
// from the replay, and the larger of golden's and the replay's own reversed order's. A reordering
// holds when the candidate is at most 8 times as far as those orders (or within one fp32 rounding of
// the sums' scale).
struct OrderDistance {
  bool measured = false;  // false: too costly to replay here (64 k n > 5e8), or no operands
  double candidate = 0, orders = 0, floor = 0;
  bool holds() const { return !measured || candidate <= 8 * orders || candidate <= floor; }
};
OrderDistance orderDistance(const float* golden, const float* c, const GemmBound& b);

// Weight-only group quantisation, as LLM inference kernels do it (weight_replay.cpp): b (the weights,
// [K, N]) quantised to int4 or int8 in groups of G consecutive values along K of each column, one
// scale per group (symmetric: amax / qmax; asymmetric: (max - min) / (2^bits - 1) with an integer
// zero point), the scales kept in fp32 or fp16, the activations a as recorded or rounded to fp16 or
// bf16; dequantised and multiplied in fp32. The scheme whose replay gives the candidate within the
// fp32 reordering bound (plus one step of the output's format when the candidate lies on fp16's or
// bf16's grid), or none. Not for batched bounds, nor where m n k > 5e8.
struct WeightQuantScheme {
  int bits = 0;             // 4 or 8
  bool asymmetric = false;  // a zero point per group
  int group = 0;            // 32, 64 or 128 along K
  std::string scaleFormat;  // "fp32" or "fp16"
  std::string activations;  // "fp32", "fp16" or "bf16"
  std::string output;       // the candidate's grid: "fp32", "fp16" or "bf16"
};
std::optional<WeightQuantScheme> reproducingWeightQuant(const float* c, const GemmBound& b);

}  // namespace peat::detector::rules
