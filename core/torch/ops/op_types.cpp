// SPDX-License-Identifier: MIT
#include "core/torch/ops/op_types.h"

#include <stdexcept>

namespace peat::ops {

const std::vector<OpKind>& allOps() {
  static const std::vector<OpKind> ops{OpKind::Linear,    OpKind::Conv2d, OpKind::Matmul, OpKind::Softmax,
                                       OpKind::LayerNorm, OpKind::Gelu,   OpKind::Relu,   OpKind::Add,
                                       OpKind::Embedding, OpKind::BatchNorm, OpKind::MaxPool2d, OpKind::AvgPool2d};
  return ops;
}

const char* opName(OpKind k) {
  switch (k) {
    case OpKind::Linear: return "linear";
    case OpKind::Conv2d: return "conv2d";
    case OpKind::Matmul: return "matmul";
    case OpKind::Softmax: return "softmax";
    case OpKind::LayerNorm: return "layernorm";
    case OpKind::Gelu: return "gelu";
    case OpKind::Relu: return "relu";
    case OpKind::Add: return "add";
    case OpKind::Embedding: return "embedding";
    case OpKind::BatchNorm: return "batchnorm";
    case OpKind::MaxPool2d: return "maxpool2d";
    case OpKind::AvgPool2d: return "avgpool2d";
  }
  return "?";
}

std::optional<OpKind> opByName(const std::string& name) {
  for (OpKind k : allOps())
    if (name == opName(k)) return k;
  return std::nullopt;
}

std::string opList() {
  std::string out;
  for (OpKind k : allOps()) out += (out.empty() ? "" : ", ") + std::string(opName(k));
  return out;
}

bool isGemmOp(OpKind k) { return k == OpKind::Linear || k == OpKind::Conv2d || k == OpKind::Matmul; }

const char* variantName(Variant v) {
  switch (v) {
    case Variant::Forward: return "forward";
    case Variant::GradInput: return "grad_input";
    case Variant::GradWeight: return "grad_weight";
  }
  return "?";
}

int64_t OpCall::param(const std::string& name) const {
  auto it = params.find(name);
  if (it == params.end()) throw std::invalid_argument(std::string(opName(kind)) + " call lacks parameter '" + name + "'");
  return it->second;
}

}  // namespace peat::ops
