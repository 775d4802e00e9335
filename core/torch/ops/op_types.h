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

enum class OpKind {
  Linear, Conv2d, Matmul, Softmax, LayerNorm, Gelu, Relu, Add, Embedding, BatchNorm, MaxPool2d, AvgPool2d,
  // added with op-wise routing of user models (issue 31); appended, so that stored kinds keep their names
  LogSoftmax, Silu, Tanh, Sigmoid, Dropout, CrossEntropy, Sgd, Adam,
  // scaled dot-product attention as one call (plugin ABI v2's attention kernels)
  Attention
};

// Forward, or one of the gradients of an op's backward pass, or an optimiser's update.
//   Linear:  GradInput dX = dY W,          GradWeight dW = dY^T X
//   Conv2d:  GradInput (transposed conv),  GradWeight (correlation of dY with X)
//   Matmul:  GradInput dA = dC B^T,        GradWeight dB = A^T dC
//   LayerNorm: GradInput dX, GradWeight dGamma, GradBias dBeta; Embedding: GradWeight (a scatter-add)
//   element-wise ops, softmax, dropout, cross-entropy: GradInput
//   Sgd, Adam: Update (the new parameter and moments, stacked)
//   Attention: GradInput with "wrt" 0, 1, 2: dQ, dK or dV
// docs/models.md lists each op's inputs per variant.
enum class Variant { Forward = 0, GradInput = 1, GradWeight = 2, GradBias = 3, Update = 4 };

const char* opName(OpKind k);
std::optional<OpKind> opByName(const std::string& name);
const std::vector<OpKind>& allOps();
std::string opList();  // "linear, conv2d, ..." for error messages
bool isGemmOp(OpKind k);
// Ops whose forward maps each element on its own (a candidate's errors stay where they are made).
bool isElementwiseOp(OpKind k);
const char* variantName(Variant v);
std::optional<Variant> variantByName(const std::string& name);

// Everything needed to execute, record and later replay one call.
struct OpCall {
  OpKind kind = OpKind::Linear;
  Variant variant = Variant::Forward;
  std::vector<at::Tensor> inputs;         // see kernels/golden.cpp for each op's inputs
  std::map<std::string, int64_t> params;  // stride, padding, sizes: integers only, stored with the call
  int64_t param(const std::string& name) const;  // throws when missing
  int64_t paramOr(const std::string& name, int64_t fallback) const;
  // Real parameters (eps, a dropout probability, a learning rate) travel as the bits of a double
  // under "NAME_f64", so that the session's integer parameters hold them exactly.
  void setReal(const std::string& name, double value);
  double real(const std::string& name) const;  // throws when missing
  double realOr(const std::string& name, double fallback) const;
};
// The value of a "NAME_f64" parameter as stored (for displays); false when `key` is not one.
bool realParameter(const std::string& key, int64_t stored, std::string& name, double& value);

// A 2-D convolution's geometry. Stored in a call's params as "stride" and "padding" (height, and
// width too when equal, as the zoo's calls always were), plus "stride_w", "padding_w", "dilation_h",
// "dilation_w" and "groups" only where they differ from that: sessions recorded before these keys
// existed read back unchanged.
struct ConvGeometry {
  int64_t strideH = 1, strideW = 1, padH = 0, padW = 0, dilationH = 1, dilationW = 1, groups = 1;
  std::vector<int64_t> stride() const { return {strideH, strideW}; }
  std::vector<int64_t> padding() const { return {padH, padW}; }
  std::vector<int64_t> dilation() const { return {dilationH, dilationW}; }
  // Output extent of an input extent along height or width, for kernel extent k.
  int64_t outH(int64_t in, int64_t k) const { return (in + 2 * padH - dilationH * (k - 1) - 1) / strideH + 1; }
  int64_t outW(int64_t in, int64_t k) const { return (in + 2 * padW - dilationW * (k - 1) - 1) / strideW + 1; }
  std::string text() const;  // "stride 2x2, padding 1x1, dilation 1x1, groups 32"
};
ConvGeometry convGeometry(const OpCall& call);
void setConvGeometry(OpCall& call, const ConvGeometry& g);

}  // namespace peat::ops
