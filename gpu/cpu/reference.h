// SPDX-License-Identifier: MIT
#pragma once
// The reference kernels on host memory: what the CPU backend runs and what every device backend is
// tested against. The per-element math is gpu/device/math.h, compiled here by g++ and in the device
// kernels by nvcc or hipcc.
#include <cstdint>
#include <vector>

#include "gpu/backend.h"

namespace peat::gpu::reference {

void injectBitFlips(uint32_t* words, const std::vector<BitFlip>& flips);
void stuckAt(uint32_t* words, const StuckAt& region);
// lo and hi: per-element bounds, or null for [low, high] everywhere.
RangeCheckResult rangeCheck(const float* values, uint64_t n, const float* lo, const float* hi, float low, float high);
ErrorHistograms histograms(const float* golden, const float* candidate, uint64_t n);
void gemm(GemmKind kind, const GemmShape& shape, const float* a, const float* b, float* c);

// For error bounds: the exact product (double sums of exact products; exact for the sizes tested)
// and sum_k |a_ik| |b_kj| per element.
void gemmExact(const GemmShape& shape, const float* a, const float* b, std::vector<double>& exact,
               std::vector<double>& magnitude);
// The documented worst-case bound of a kind: |c_ij - exact_ij| <= factor * magnitude_ij. TileEdge
// has none (it is a bug); the caller expects it to fail.
double gemmBoundFactor(GemmKind kind, uint64_t k);

}  // namespace peat::gpu::reference
