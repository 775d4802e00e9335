// SPDX-License-Identifier: MIT
#pragma once
// LibTorch's own conversions, behind a torch-free header so Qt Test files never include torch.
#include <cstdint>
#include <vector>

namespace peat::testsupport {

enum class TorchHalfKind { Half, BFloat16 };

// Widens 16-bit patterns to fp32 through at::Tensor::to(kFloat).
std::vector<float> torchWiden(TorchHalfKind kind, const std::vector<uint16_t>& bits);
// Narrows fp32 values to 16-bit patterns through at::Tensor::to(kHalf / kBFloat16).
std::vector<uint16_t> torchNarrow(TorchHalfKind kind, const std::vector<float>& values);

}  // namespace peat::testsupport
