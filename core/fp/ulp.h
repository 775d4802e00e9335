// SPDX-License-Identifier: MIT
#pragma once
// ULP distance on a monotone integer line: adjacent representable values are one apart,
// +0 and -0 both sit at 0, subnormals need no special case, Inf is one past the largest finite.
// NaN has no place on the line; callers get std::nullopt (or kNanUlp on the fp32 fast path).
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>

#include "core/fp/format.h"

namespace peat::fp {

inline int64_t ulpLine(const Format& f, uint32_t bits) {
  const int64_t magnitude = bits & (f.signMask() - 1);
  return (bits & f.signMask()) ? -magnitude : magnitude;
}

inline std::optional<uint64_t> ulpDistance(const Format& f, uint32_t a, uint32_t b) {
  if (isNaN(f, a) || isNaN(f, b)) return std::nullopt;
  const int64_t d = ulpLine(f, a) - ulpLine(f, b);
  return static_cast<uint64_t>(d < 0 ? -d : d);
}

// binary32 fast path for hot loops (analyzer): no Format lookup, NaN reported as kNanUlp.
inline constexpr uint64_t kNanUlp = std::numeric_limits<uint64_t>::max();

inline int64_t ulpLine32(uint32_t bits) {
  const int64_t magnitude = bits & 0x7fffffffu;
  return (bits >> 31) ? -magnitude : magnitude;
}

inline uint64_t ulpDistance32(uint32_t a, uint32_t b) {
  if ((a & 0x7fffffffu) > 0x7f800000u || (b & 0x7fffffffu) > 0x7f800000u) return kNanUlp;
  const int64_t d = ulpLine32(a) - ulpLine32(b);
  return static_cast<uint64_t>(d < 0 ? -d : d);
}

}  // namespace peat::fp
