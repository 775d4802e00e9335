// SPDX-License-Identifier: MIT
#pragma once
// The probe of an ABI v2 plugin (plugin_probe.cpp): small cases for every op kind and variant, and
// their outputs recomputed in double from the inputs as the kernel was given them (rounded to its
// declared dtype), so that a tolerance for the declared formats is all that separates a right
// kernel from a wrong one. Plain C++: the probe helper loads neither LibTorch nor Qt.
#include <cstdint>
#include <string>
#include <vector>

#include "core/plugin/peat/kernel_abi.h"

namespace peat::plugin {

// One input of a probe case, in fp32 before the conversion to the op's input dtype.
struct ProbeInput {
  std::vector<int64_t> shape;
  std::vector<float> values;  // NaN in a GEMM row's padding: a kernel that reads it gets NaN
  bool keepF32 = false;       // the attention mask: f32 whatever the op declares
  bool outputDtype = false;   // GEMM's C0: in the op's output dtype, as C is
};

struct ProbeCase {
  uint32_t opKind = 0, variant = 0;
  std::string label;  // what the case tries ("causal 5x18"), for the probe's warning
  peat_params params{};
  std::vector<ProbeInput> inputs;
  std::vector<std::vector<int64_t>> outputShapes;
};

// The cases of one op kind for each variant in `variants` (bits PEAT_VARIANT_BIT), a few per
// variant and each small: the probe runs all of them under a 30 s limit, and the kernel may be slow.
// The same cases on every machine.
std::vector<ProbeCase> probeCases(uint32_t opKind, uint32_t variants, uint32_t features = 0);

// The outputs of one call in double, from its inputs (the values the kernel got) and the shapes of
// its inputs and outputs, by the formulas of peat/kernel_abi.h. NaN marks an element no kernel is
// asked to write (C's columns past n in rows of ldc). std::invalid_argument for a call the ABI does
// not describe or whose shapes do not fit its parameters.
std::vector<std::vector<double>> referenceOutputs(uint32_t opKind, uint32_t variant, const peat_params& p,
                                                  const std::vector<std::vector<int64_t>>& inputShapes,
                                                  const std::vector<std::vector<double>>& inputs,
                                                  const std::vector<std::vector<int64_t>>& outputShapes);

}  // namespace peat::plugin
