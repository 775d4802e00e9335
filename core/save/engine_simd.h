// SPDX-License-Identifier: MIT
#pragma once
// SAVE's SIMD kernels, compiled per target by Highway and chosen per CPU at run time.
// The engine's convolution GEMM, vectorised over output positions. Each output is bias[o] + sum
// over taps t in order of w[o][t] * cols[t][p], each step a fused multiply-add (one rounding; per
// lane std::fma on a target without FMA instructions), so every target gives the same bits as the
// scalar loop (engine.cpp's fmaDot). The range analysis bounds either rounding by gamma_{taps+1}.
#include <cstdint>

namespace peat::save::detail {

// cols and out hold rows `ld` apart (positions <= ld: a range of a wider GEMM's positions).
void convGemm(const float* weight, int64_t channels, int64_t taps, const float* cols, int64_t positions, int64_t ld,
              const float* bias, float* out);

// The range analysis's GEMM in double on packed panels: c[o][p] = sum over t of A(o, t) B(t, p) for
// o < 4 rowBlocks, p < 16 colBlocks, where A(o, t) = a[((o / 4) taps + t) 4 + o % 4] and
// B(t, p) = b[((p / 16) taps + t) 16 + p % 16]; c has leading dimension ldc. Each sum runs over t
// in order, with one rounding per step (fused multiply-add) or two (where the CPU has no FMA):
// either way within gamma_taps sum |A||B| of the exact sum, plus underflow.
void packedGemmF64(const double* a, int64_t rowBlocks, int64_t taps, const double* b, int64_t colBlocks, double* c,
                   int64_t ldc);

}  // namespace peat::save::detail
