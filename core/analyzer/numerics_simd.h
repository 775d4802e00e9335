// SPDX-License-Identifier: MIT
#pragma once
// The counting loops of tensorNumerics (core/analyzer/numerics.cpp), vectorised with Highway (the
// target chosen per CPU at run time). Exact counts, the same on every target.
#include <cstddef>
#include <cstdint>

namespace peat::analyzer::detail {

// counts[j] = the finite nonzero values whose |x| <= the float with bit pattern limits[j] (>= 1).
void countMagnitudesAtMost(const float* values, uint64_t n, const uint32_t* limits, std::size_t thresholds,
                           uint64_t* counts);

// Over blocks [begins[b], ends[b]) with steps[b] > 0: r = |x| / steps[b] (for `powerOfTwo` steps,
// |x| times the exact reciprocal, which is the same); under += nonzero x with r <= half, over += r > largest.
void blockUnderOver(const float* values, const uint64_t* begins, const uint64_t* ends, const float* steps,
                    std::size_t blocks, bool powerOfTwo, float half, float largest, uint64_t* under, uint64_t* over);

}  // namespace peat::analyzer::detail
