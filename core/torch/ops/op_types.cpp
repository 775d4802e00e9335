// SPDX-License-Identifier: MIT
#include "core/torch/ops/op_types.h"

#include <cstring>
#include <stdexcept>

namespace peat::ops {

const std::vector<OpKind>& allOps() {
  static const std::vector<OpKind> ops{OpKind::Linear,    OpKind::Conv2d, OpKind::Matmul, OpKind::Softmax,
                                       OpKind::LayerNorm, OpKind::Gelu,   OpKind::Relu,   OpKind::Add,
                                       OpKind::Embedding, OpKind::BatchNorm, OpKind::MaxPool2d, OpKind::AvgPool2d,
                                       OpKind::LogSoftmax, OpKind::Silu, OpKind::Tanh, OpKind::Sigmoid,
                                       OpKind::Dropout, OpKind::CrossEntropy, OpKind::Sgd,
                                       OpKind::Adam, OpKind::Attention};
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
    case OpKind::LogSoftmax: return "log_softmax";
    case OpKind::Silu: return "silu";
    case OpKind::Tanh: return "tanh";
    case OpKind::Sigmoid: return "sigmoid";
    case OpKind::Dropout: return "dropout";
    case OpKind::CrossEntropy: return "cross_entropy";
    case OpKind::Sgd: return "sgd";
    case OpKind::Adam: return "adam";
    case OpKind::Attention: return "attention";
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

bool isElementwiseOp(OpKind k) {
  return k == OpKind::Gelu || k == OpKind::Relu || k == OpKind::Silu || k == OpKind::Tanh || k == OpKind::Sigmoid ||
         k == OpKind::Add || k == OpKind::Dropout;
}

const char* variantName(Variant v) {
  switch (v) {
    case Variant::Forward: return "forward";
    case Variant::GradInput: return "grad_input";
    case Variant::GradWeight: return "grad_weight";
    case Variant::GradBias: return "grad_bias";
    case Variant::Update: return "update";
  }
  return "?";
}

std::optional<Variant> variantByName(const std::string& name) {
  for (Variant v : {Variant::Forward, Variant::GradInput, Variant::GradWeight, Variant::GradBias, Variant::Update})
    if (name == variantName(v)) return v;
  return std::nullopt;
}

void OpCall::setReal(const std::string& name, double value) {
  int64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  params[name + "_f64"] = bits;
}

double OpCall::real(const std::string& name) const {
  auto it = params.find(name + "_f64");
  if (it == params.end()) throw std::invalid_argument(std::string(opName(kind)) + " call lacks parameter '" + name + "'");
  double value = 0;
  std::memcpy(&value, &it->second, sizeof value);
  return value;
}

double OpCall::realOr(const std::string& name, double fallback) const {
  return params.count(name + "_f64") ? real(name) : fallback;
}

bool realParameter(const std::string& key, int64_t stored, std::string& name, double& value) {
  const std::string suffix = "_f64";
  if (key.size() <= suffix.size() || key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
  name = key.substr(0, key.size() - suffix.size());
  std::memcpy(&value, &stored, sizeof value);
  return true;
}

int64_t OpCall::param(const std::string& name) const {
  auto it = params.find(name);
  if (it == params.end()) throw std::invalid_argument(std::string(opName(kind)) + " call lacks parameter '" + name + "'");
  return it->second;
}

int64_t OpCall::paramOr(const std::string& name, int64_t fallback) const {
  auto it = params.find(name);
  return it == params.end() ? fallback : it->second;
}

std::string ConvGeometry::text() const {
  auto pair = [](int64_t a, int64_t b) { return std::to_string(a) + "x" + std::to_string(b); };
  return "stride " + pair(strideH, strideW) + ", padding " + pair(padH, padW) + ", dilation " +
         pair(dilationH, dilationW) + ", groups " + std::to_string(groups);
}

ConvGeometry convGeometry(const OpCall& call) {
  ConvGeometry g;
  g.strideH = call.param("stride");
  g.padH = call.param("padding");
  g.strideW = call.paramOr("stride_w", g.strideH);
  g.padW = call.paramOr("padding_w", g.padH);
  g.dilationH = call.paramOr("dilation_h", 1);
  g.dilationW = call.paramOr("dilation_w", g.dilationH);
  g.groups = call.paramOr("groups", 1);
  if (g.strideH <= 0 || g.strideW <= 0 || g.padH < 0 || g.padW < 0 || g.dilationH <= 0 || g.dilationW <= 0 ||
      g.groups <= 0)
    throw std::invalid_argument("conv2d call has an impossible geometry (" + g.text() + ")");
  return g;
}

void setConvGeometry(OpCall& call, const ConvGeometry& g) {
  call.params["stride"] = g.strideH;
  call.params["padding"] = g.padH;
  if (g.strideW != g.strideH) call.params["stride_w"] = g.strideW;
  if (g.padW != g.padH) call.params["padding_w"] = g.padW;
  if (g.dilationH != 1 || g.dilationW != 1) call.params["dilation_h"] = g.dilationH;
  if (g.dilationW != g.dilationH) call.params["dilation_w"] = g.dilationW;
  if (g.groups != 1) call.params["groups"] = g.groups;
}

}  // namespace peat::ops
