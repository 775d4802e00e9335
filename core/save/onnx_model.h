// SPDX-License-Identifier: MIT
#pragma once
// A user's ONNX model as a SAVE graph. The file is read by libpeat_onnx.so (Debian's libonnx and
// protobuf, core/save/onnx_import.cpp), first in the probe helper (peat-probe onnx FILE), so that a
// crash or a hang in the protobuf parser or the checker refuses the file instead of taking peat
// down; then in this process. Operators SAVE has no sound transfer function for are refused with
// one message that lists every such node and why (docs/save.md, "ONNX models").
#include <map>
#include <string>

#include "core/save/graph.h"
#include "core/store/tensor.h"

namespace peat::save {

bool isOnnxModel(const std::string& spec);  // a path ending in .onnx

// The graph with the model's initializers as weights and Fashion-MNIST's normalisation
// (inputMean 0.2860, inputDeviation 0.3530) unless the caller changes it. `replacements` (a
// checkpoint's parameters) replace initializers of the same name and shape (a model fine-tuned
// with PEAT); at least one must match. Throws SaveError.
Graph onnxGraph(const std::string& path, const std::map<std::string, store::Tensor>* replacements = nullptr);

// In this process, without the probe: for the probe helper itself.
struct InsideProbe {};
Graph onnxGraph(const std::string& path, InsideProbe, const std::map<std::string, store::Tensor>* replacements = nullptr);

}  // namespace peat::save
