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


// One channel of a depthwise convolution over its input zero-padded and laid out by the caller:
// out[y][x] (oh rows of ow) = bias, then for each tap t in order one fused multiply-add of w[t] and
// padded[y * rowStep + x + tapOffset[t]] (the padding's zeros included, as the scalar loop). Reads
// up to floatLanes() - 1 elements past a row's last output column.
void depthwisePlane(const float* w, int64_t taps, const int64_t* tapOffset, float bias, const float* padded,
                    int64_t rowStep, int64_t oh, int64_t ow, float* out);

// Element-wise passes with the scalar ops' exact results (engine.cpp's runNode): ReLU (x > 0 ? x : 0),
// Clip to [p, q] (x > p ? (x < q ? x : q) : p), a + b, a * b, max (a < b ? b : a) and a * p + q
// (two roundings: batch norm).
enum class Elementwise { Relu, Clip, Add, Mul, Max2, Affine };
void elementwise(Elementwise op, const float* a, const float* b, float p, float q, float* out, int64_t n);

// Whether any x[i] (i < n) lies outside [lo[i], hi[i]]; NaN lies outside (SAVE's range check).
bool anyOutside(const float* x, const float* lo, const float* hi, int64_t n);

// Whether the bits of a[i] and b[i] (i < n) differ anywhere mask[i] is set (SAVE's recomputation check).
bool anyMaskedDifference(const float* a, const float* b, const uint32_t* mask, int64_t n);

// The float lanes of the vectors the kernels above use on this CPU.
int64_t floatLanes();

// The range analysis's GEMM in double on packed panels: c[o][p] = sum over t of A(o, t) B(t, p) for
// o < 4 rowBlocks, p < 16 colBlocks, where A(o, t) = a[((o / 4) taps + t) 4 + o % 4] and
// B(t, p) = b[((p / 16) taps + t) 16 + p % 16]; c has leading dimension ldc. Each sum runs over t
// in order, with one rounding per step (fused multiply-add) or two (where the CPU has no FMA):
// either way within gamma_taps sum |A||B| of the exact sum, plus underflow.
void packedGemmF64(const double* a, int64_t rowBlocks, int64_t taps, const double* b, int64_t colBlocks, double* c,
                   int64_t ldc);

}  // namespace peat::save::detail
