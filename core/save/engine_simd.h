// SPDX-License-Identifier: MIT
#pragma once
// The engine's convolution GEMM, vectorised with Highway over output positions (chosen per CPU at
// run time). Each output is bias[o] + sum over taps t in order of w[o][t] * cols[t][p], with one
// rounding per product and per sum (no fused multiply-add), so every target gives the same bits as
// the scalar loop.
#include <cstdint>

namespace peat::save::detail {

void convGemm(const float* weight, int64_t channels, int64_t taps, const float* cols, int64_t positions,
              const float* bias, float* out);

}  // namespace peat::save::detail
