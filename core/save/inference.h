// SPDX-License-Identifier: MIT
#pragma once
// `peat save run`: inference of a model on the user's own inputs with SAVE's fp32 engine, plain or
// under a protection scheme with injected faults, and the comparison of its outputs with a
// reference (PyTorch's, or another runtime's). This is how a user checks that SAVE computes what
// their model computes before trusting its analysis, and how SAVE protects their inferences.
#include <cstdint>
#include <string>
#include <vector>

#include "core/io/tensor_source.h"
#include "core/save/runtime.h"

namespace peat::save {

// How the inputs split into samples of the graph's input (one sample's shape is the first node's):
// an input of exactly one sample's shape (with or without leading 1s) is one sample; one of shape
// [B, sample...] is B samples. Anything else throws SaveError naming both shapes.
int64_t samplesIn(const Graph& g, const std::vector<uint64_t>& inputShape);

// A model with several inputs: their tensors (in g.inputs' order, each one sample of its input's
// shape or [N, sample...], all with the same N) as node 0 takes them, each sample's inputs end to
// end ([N, total]). Throws SaveError naming the input that does not fit.
io::FloatTensor joinInputs(const Graph& g, const std::vector<const io::FloatTensor*>& parts);

struct InferenceOptions {
  Scheme scheme = Scheme::None;  // protection; None with no faults: the plain engine
  FaultModel faults;             // faults per inference of the whole input (flips 0: none)
  uint64_t seed = 1;             // draws the faults
};

struct InferenceResult {
  int64_t samples = 0;
  std::vector<int64_t> outputShape;  // one sample's output (the graph's output node)
  std::vector<float> outputs;        // samples x output size, in sample order
  std::vector<int> predictions;      // top-1 per sample (of the first of several outputs); -1: NaN or Inf
  RunStats stats;                    // faults, detections, recoveries (protected runs)
  int64_t unreliableWords = 0;       // the scheme's unreliable memory (protected runs)
  double seconds = 0;                // the first inference alone (no import, no analysis)
  double warmSeconds = 0;            // the median of the inferences after the first (0: one run)
  int runs = 1;                      // inferences timed
};

// The plain fp32 engine on `samples` inputs (already normalised: what the model takes), `runs`
// times (the outputs are the first run's; later runs only time the engine warm).
InferenceResult runPlain(const Graph& g, const float* inputs, int64_t samples, int runs = 1);

// One inference of all `samples` inputs as one batch under `runner`'s scheme and faults; the
// runner must have been built for that batch.
InferenceResult runProtected(const Graph& g, ProtectedRunner& runner, const float* inputs, int64_t samples,
                             const InferenceOptions& o, int runs = 1);

// The first input element outside the analysed input box, as a sentence, or "" when all lie in it:
// SAVE's range checks hold only inside the box its ranges were computed for.
std::string outsideInputBox(const Graph& g, const float* inputs, int64_t samples, double pixelLo, double pixelHi);

// The outputs against a reference of the same element count (samples x output size, any shape
// with that count): the largest absolute and relative differences, where, and top-1 agreement.
struct OutputComparison {
  double maxAbs = 0, maxRel = 0;  // relative to max(|reference|, 1e-30)
  int64_t worstSample = 0, worstElement = 0;
  double worstValue = 0, worstReference = 0;
  int64_t top1Agree = 0, samples = 0;
  int64_t nonFinite = 0;  // elements where exactly one side is NaN or infinite
};
// Throws SaveError when the reference's element count differs, naming both shapes. With `part`
// (one of a model's several outputs, Graph::outputs), that output alone against the reference.
OutputComparison compareOutputs(const InferenceResult& r, const io::FloatTensor& reference,
                                const OutputPart* part = nullptr);

// One of several outputs' values out of the output node's, [samples x part.size()] in sample order.
std::vector<float> outputValues(const InferenceResult& r, const OutputPart& part);

}  // namespace peat::save
