// SPDX-License-Identifier: MIT
#pragma once
#include "core/torch/kernels/kernel.h"

namespace peat::kernels {

enum class FaultModel { BitFlip, MultiBitFlip, StuckAt0, StuckAt1, RandomValue, Zero, NaN, Inf };

struct FaultSpec {
  FaultModel model = FaultModel::BitFlip;
  std::string target = "output";  // "output", "input" (first input) or "weight" (second input)
  int bit = -1;                    // -1: a random bit per injection
  int bits = 2;                    // adjacent bits flipped by MultiBitFlip
  int64_t count = 1;               // elements hit per call (all but stuck-at)
  double region = 0.01;            // stuck-at: fraction of the tensor, a contiguous run at a random start
};

// The golden kernel with a fault applied to its output, or to a copy of an input it reads.
// Every changed element is logged as an Injection (stuck-at logs up to 4096 per call).
std::unique_ptr<Kernel> makeFaultKernel(const std::string& name, const FaultSpec& spec, uint64_t seed);

}  // namespace peat::kernels
