// SPDX-License-Identifier: MIT
#pragma once
// The op vocabulary of the kernel slot: what a call is, independent of which kernel runs it.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace peat::ops {

enum class OpKind { Linear, Conv2d, Matmul, Softmax, LayerNorm, Gelu, Relu, Add, Embedding, BatchNorm, MaxPool2d, AvgPool2d };

// Forward, or one of the two GEMMs of a GEMM-based op's backward pass.
//   Linear:  GradInput dX = dY W,          GradWeight dW = dY^T X
//   Conv2d:  GradInput (transposed conv),  GradWeight (correlation of dY with X)
//   Matmul:  GradInput dA = dC B^T,        GradWeight dB = A^T dC
enum class Variant { Forward = 0, GradInput = 1, GradWeight = 2 };

const char* opName(OpKind k);
std::optional<OpKind> opByName(const std::string& name);
const std::vector<OpKind>& allOps();
std::string opList();  // "linear, conv2d, ..." for error messages
bool isGemmOp(OpKind k);
const char* variantName(Variant v);

// Everything needed to execute, record and later replay one call.
struct OpCall {
  OpKind kind = OpKind::Linear;
  Variant variant = Variant::Forward;
  std::vector<at::Tensor> inputs;         // see kernels/golden.cpp for each op's inputs
  std::map<std::string, int64_t> params;  // stride, padding, sizes: integers only, stored with the call
  int64_t param(const std::string& name) const;  // throws when missing
};

}  // namespace peat::ops
