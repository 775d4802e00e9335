// SPDX-License-Identifier: MIT
#include "core/plugin/dtypes.h"

#include <cmath>
#include <cstring>

#include "core/fp/format.h"
#include "core/plugin/peat/kernel_abi.h"

namespace peat::plugin {

namespace {

const fp::Format& formatOf(uint32_t dtype) {
  switch (dtype) {
    case PEAT_DTYPE_F16: return fp::kFp16;
    case PEAT_DTYPE_BF16: return fp::kBf16;
    case PEAT_DTYPE_FP8_E4M3: return fp::kE4M3;
    default: return fp::kE5M2;
  }
}

}  // namespace

uint64_t dtypeSize(uint32_t dtype) {
  switch (dtype) {
    case PEAT_DTYPE_F32: return 4;
    case PEAT_DTYPE_F16:
    case PEAT_DTYPE_BF16: return 2;
    case PEAT_DTYPE_FP8_E4M3:
    case PEAT_DTYPE_FP8_E5M2: return 1;
    default: return 0;
  }
}

bool knownDtype(uint32_t dtype) { return dtypeSize(dtype) != 0; }
bool isFp8(uint32_t dtype) { return dtype == PEAT_DTYPE_FP8_E4M3 || dtype == PEAT_DTYPE_FP8_E5M2; }

std::string dtypeName(uint32_t dtype) {
  switch (dtype) {
    case PEAT_DTYPE_F32: return "f32";
    case PEAT_DTYPE_F16: return "f16";
    case PEAT_DTYPE_BF16: return "bf16";
    case PEAT_DTYPE_FP8_E4M3: return "fp8_e4m3";
    case PEAT_DTYPE_FP8_E5M2: return "fp8_e5m2";
    default: return "dtype " + std::to_string(dtype);
  }
}

float chooseScale(const float* values, std::size_t n, uint32_t dtype) {
  if (!isFp8(dtype)) return 1.0f;
  float amax = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (std::isfinite(values[i])) amax = std::max(amax, std::fabs(values[i]));
  if (!(amax > 0)) return 1.0f;
  const fp::Format& f = formatOf(dtype);
  const float largest = fp::decode(f, fp::maxFinite(f));
  const float scale = amax / largest;
  return std::isfinite(scale) && scale > 0 ? scale : 1.0f;
}

void encodeValues(const float* values, std::size_t n, uint32_t dtype, float scale, void* dst) {
  if (dtype == PEAT_DTYPE_F32) {
    std::memcpy(dst, values, n * 4);
    return;
  }
  const fp::Format& f = formatOf(dtype);
  if (isFp8(dtype)) {
    auto* out = static_cast<uint8_t*>(dst);
    // finite values saturate, as a port's cast does; an infinity (a mask's -inf) stays one in E5M2 and
    // becomes NaN in E4M3, which has none, rather than a finite value
    for (std::size_t i = 0; i < n; ++i)
      out[i] = uint8_t(fp::encode(f, values[i] / scale,
                                  std::isfinite(values[i]) ? fp::Overflow::Saturate : fp::Overflow::Standard));
    return;
  }
  auto* out = static_cast<uint16_t*>(dst);
  for (std::size_t i = 0; i < n; ++i) out[i] = uint16_t(fp::encode(f, values[i]));
}

void decodeValues(const void* src, std::size_t n, uint32_t dtype, float scale, float* out) {
  if (dtype == PEAT_DTYPE_F32) {
    std::memcpy(out, src, n * 4);
    return;
  }
  const fp::Format& f = formatOf(dtype);
  if (isFp8(dtype)) {
    const auto* in = static_cast<const uint8_t*>(src);
    for (std::size_t i = 0; i < n; ++i) out[i] = fp::decode(f, in[i]) * scale;
    return;
  }
  const auto* in = static_cast<const uint16_t*>(src);
  for (std::size_t i = 0; i < n; ++i) out[i] = fp::decode(f, in[i]);
}

std::string abiOpName(uint32_t opKind) {
  switch (opKind) {
    case PEAT_OP_GEMM: return "gemm";
    case PEAT_OP_BATCHED_GEMM: return "batched_gemm";
    case PEAT_OP_CONV2D: return "conv2d";
    case PEAT_OP_SOFTMAX: return "softmax";
    case PEAT_OP_LAYER_NORM: return "layer_norm";
    case PEAT_OP_ATTENTION: return "attention";
    case PEAT_OP_ACTIVATION: return "activation";
    case PEAT_OP_OPTIMIZER: return "optimizer";
    default: return "op kind " + std::to_string(opKind);
  }
}

std::string abiVariantName(uint32_t variant) {
  switch (variant) {
    case PEAT_VARIANT_FORWARD: return "forward";
    case PEAT_VARIANT_GRAD_INPUT: return "grad_input";
    case PEAT_VARIANT_GRAD_WEIGHT: return "grad_weight";
    case PEAT_VARIANT_GRAD_BIAS: return "grad_bias";
    case PEAT_VARIANT_UPDATE: return "update";
    default: return "variant " + std::to_string(variant);
  }
}

}  // namespace peat::plugin
