// SPDX-License-Identifier: MIT
#pragma once
// `--tightness`: an analysis's ranges against estimates from elsewhere, on Fashion-MNIST's test
// images (the ranges seen, per node), gradient ascent inside the input box and plain intervals
// (at the output).
#include "core/save/analysis_record.h"
#include "core/save/selection.h"

namespace peat::save {

struct TightnessReferences : TightnessReference {
  bool present = false;         // computed (--tightness)
  double intervalSeconds = 0;   // the plain interval analysis's time
};

// Throws std::invalid_argument for steps or starts below 1.
TightnessReferences tightnessReferences(const Graph& g, const SelectionOptions& so, int steps, int starts);

}  // namespace peat::save
