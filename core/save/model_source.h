// SPDX-License-Identifier: MIT
#pragma once
// Where an analysed network comes from: a zoo model with a checkpoint's (or seeded random) weights,
// or an ONNX file with its own (or a checkpoint's replacing them by name), and an ONNX model's input
// normalisation. The CLI builds one from its options; an analysis stores it (paths made absolute),
// so that the workbench can rebuild the very network later ("Flip in the model").
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/save/graph.h"

namespace peat::save {

struct ModelSource {
  std::string model;    // a zoo name, or an ONNX file's path
  std::string weights;  // a session holding a checkpoint; empty: the ONNX file's own, or randomSeed
  std::string run = "train";
  int64_t iteration = -1;  // -1: the run's last checkpoint
  uint64_t randomSeed = 0;  // > 0: seeded random weights of a zoo model
  // An ONNX model's input normalisation, one value or one per channel; empty: the graph's own
  std::vector<float> inputMean, inputStd;
  // Raw ranges of an ONNX model's inputs by name, "NAME=LO,HI" (`--input-range NAME=LO,HI`), each
  // in place of the range requested for all inputs
  std::vector<std::string> inputRanges;
  // One input's own normalisation by name, "NAME=V" or "NAME=V,V,..." (`--input-mean NAME=...`,
  // `--input-std NAME=...`), in place of the one for all inputs
  std::vector<std::string> inputMeans, inputStds;
};

// "LO,HI" or "LO:HI" -> {LO, HI}; std::invalid_argument naming `option` otherwise.
std::pair<double, double> rangeText(const std::string& text, const std::string& option);

// The network. Throws std::invalid_argument for a source that names no network (both or neither of
// weights and seed for a zoo model, a seed for an ONNX file, normalisation for a zoo model, a
// deviation <= 0, a number of values that is not 1 or the input's channels) and SaveError (or the
// readers' errors) for files that cannot be read.
Graph buildGraph(const ModelSource& source);

// The source with its file paths made absolute (as an analysis stores it).
ModelSource absoluteSource(ModelSource source);

// {1, 2.5} -> "1,2.5" (each float exactly: util::parseNumberList reads it back)
std::string numberListText(const std::vector<float>& values);

}  // namespace peat::save
