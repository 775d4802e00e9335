// SPDX-License-Identifier: MIT
#pragma once
// What a person reads of a model's outputs (`peat save run`'s, or any samples x output tensor):
// per sample the classes with the largest outputs when one sample's output is a vector of scores,
// else the range of its values and its first values; the whole tensor's statistics beside them.
// The workbench's run panel shows it; the numbers are made here, never in a widget.
#include <cstdint>
#include <vector>

#include "core/analyzer/numerics.h"

namespace peat::save {

// The `k` largest of `size` outputs, largest first (ties: the lower index first); NaN sorts last.
std::vector<int64_t> topClasses(const float* outputs, int64_t size, int k);

struct SampleOutputs {
  int64_t sample = 0;
  std::vector<int64_t> classes;  // the top classes (a score vector with finite values only), else empty
  std::vector<float> scores;     // their outputs, in the same order
  analyzer::ValueStats stats;    // this sample's output values
  std::vector<float> first;      // its first values, in C order
};

struct OutputSummary {
  int64_t samples = 0;
  std::vector<int64_t> sampleShape;  // one sample's output
  // One sample's output is a vector of at least 2 scores (every other dimension 1): top-k applies.
  bool scoreVector = false;
  analyzer::ValueStats stats;          // over every sample
  std::vector<SampleOutputs> shown;    // the first samples, at most `maxSamples`
};

// `outputs` holds `samples` x prod(sampleShape) values in sample order. Throws std::invalid_argument
// when a dimension is negative.
OutputSummary summariseOutputs(const float* outputs, int64_t samples, const std::vector<int64_t>& sampleShape, int top,
                               int64_t maxSamples, int firstValues);

}  // namespace peat::save
