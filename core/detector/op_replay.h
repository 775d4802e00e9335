// SPDX-License-Identifier: MIT
#pragma once
// Verdicts grounded by replay for the op-wise kernels (issue 31), as GEMM calls have theirs: when a
// call's inputs were recorded, the op is recomputed in double precision from them, together with
// the formulas that legitimate ports and known bugs use instead (layer norm with Bessel's
// correction, epsilon outside the root or no mean; GELU by tanh; Adam with epsilon inside the root
// or bf16 moments; dropout with another mask), and the candidate is named by the formula it
// follows. docs/error-models.md, "Op replays", has the rule.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/detector/detector.h"

namespace peat::detector {

// One recorded op call: its op name and variant as stored ("layernorm", 0 = forward), its integer
// parameters (real ones as the bits of a double under "NAME_f64") and its float inputs in order.
struct OpOperands {
  std::string op;
  int64_t variant = 0;
  std::map<std::string, int64_t> params;
  std::vector<std::vector<float>> inputs;
  std::vector<std::vector<uint64_t>> shapes;
};

// Whether op replay covers this op and variant (its inputs are worth reading).
bool opReplayCovers(const std::string& op, int64_t variant);

// The verdict of the formula the candidate follows, when one fits it clearly better than the op's
// exact formula (a planted bug's, or a legitimate port's); none when the replay does not decide
// (then the detector's verdict from the outputs stands) or when golden itself is not the exact op
// to fp32 precision (the call's semantics are not what the replay assumes).
// What a replay computed, for the reference rule of core/analyzer/criteria.h: the op recomputed in
// double from the recorded inputs (empty where the replay did not run or golden is not that op), and
// the values of the format hypothesis that named the call (a bf16 port's formula: the stand-in for
// PyTorch's kernel in that format), with that format ("" when none).
struct ReplayValues {
  std::vector<double> reference, matched;
  std::string matchedFormat;
};
std::optional<Verdict> replayOp(const float* golden, const float* candidate, uint64_t count, const OpOperands& call,
                                ReplayValues* values = nullptr);

}  // namespace peat::detector
