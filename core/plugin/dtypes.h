// SPDX-License-Identifier: MIT
#pragma once
// Conversions between fp32 and the dtypes of plugin ABI v2 (peat/kernel_abi.h): what the slot gives
// a kernel declared in f16, bf16 or fp8, and how its outputs come back. Round to nearest even; fp8
// with one scale per tensor, the largest magnitude mapped to the format's largest finite value
// (saturating, as a port's cast does), a scale of 1 for an all-zero or non-finite tensor.
#include <cstddef>
#include <cstdint>
#include <string>

namespace peat::plugin {

// Bytes of one element; 0 for an unknown dtype.
uint64_t dtypeSize(uint32_t dtype);
// "f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2"; "dtype N" for another number.
std::string dtypeName(uint32_t dtype);
bool knownDtype(uint32_t dtype);
bool isFp8(uint32_t dtype);

// The per-tensor scale PEAT chooses for `n` values in an fp8 dtype (1 for the other dtypes).
float chooseScale(const float* values, std::size_t n, uint32_t dtype);
// Writes n values in `dtype` at dst (values / scale for fp8).
void encodeValues(const float* values, std::size_t n, uint32_t dtype, float scale, void* dst);
// Reads n values of `dtype` from src into fp32 (times scale for fp8).
void decodeValues(const void* src, std::size_t n, uint32_t dtype, float scale, float* out);

// "gemm", "batched_gemm", "conv2d", "softmax", "layer_norm", "attention", "activation", "optimizer"
std::string abiOpName(uint32_t opKind);
// "forward", "grad_input", ... for a variant number
std::string abiVariantName(uint32_t variant);

}  // namespace peat::plugin
