// SPDX-License-Identifier: MIT
#pragma once
// The vector half of the analyzer's scan (Google Highway, chosen per CPU at run time): per-element
// classification, counts, error sums and bit-position counts over one chunk, plus the chunk's
// mismatch bitmask. Everything that scatters into histograms or walks positions stays scalar in
// report.cpp and works from that bitmask.
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace peat::analyzer::detail {

// Elements per chunk: a multiple of 64 (whole mask words) and of every vector width.
inline constexpr std::size_t kChunk = 3840;

struct ChunkSums {
  uint64_t identical = 0, goldenFinite = 0, goldenNaN = 0, goldenInf = 0, candidateNaN = 0, candidateInf = 0;
  uint64_t newlyNonFinite = 0, nanPairs = 0, signOnly = 0, exponentInvolved = 0;
  double sumAbs = 0, sumSq = 0, sumRel = 0, sumGolden2 = 0, maxRel = 0;
  std::array<uint64_t, 32> bits{};  // mismatched elements whose bit b differs
};

// Each element's histogram bins, for the scalar code to count. Elements that have no such bin
// (identical pairs; NaN pairs for ULPs; pairs not both finite for errors) hold the "none" value.
struct ChunkBins {
  static constexpr uint32_t kUlpNone = 33;    // else floor(log2 ULP distance), 0..32
  static constexpr uint32_t kAbsNone = 291;   // else floor(log2 |c - g|) + 160 (|c - g| as double, > 0)
  static constexpr uint32_t kKeyNone = 0x8000;  // else the top 16 bits of |c - g| as fp32
  uint32_t ulp[kChunk], abs[kChunk], key[kChunk];
  uint64_t errors = 0;  // pairs that differ and are both finite
  double maxAbs = 0;    // the largest |c - g| among them (0 when none)
};

// Adds n <= kChunk elements into `sums`, fills `bins` and writes ceil(n / 64) words of `mask` (bit i
// set: element i differs). Errors are |c - g| in double over pairs that differ and are both
// finite; relative errors divide by max(|g|, relFloor).
void scanChunk(const float* golden, const float* candidate, std::size_t n, double relFloor, ChunkSums& sums,
               ChunkBins& bins, uint64_t* mask);

// Appends to found[q] the |c - g| (fp32) of every finite, differing pair whose error key equals
// keys[q], for q < 3: the percentiles' second pass.
void gatherKeys(const float* golden, const float* candidate, std::size_t n, const uint32_t (&keys)[3],
                std::array<std::vector<float>, 3>& found);

// The SIMD target chosen on this CPU, e.g. "AVX3" (for `peat env` and benchmarks).
const char* simdTarget();

}  // namespace peat::analyzer::detail
