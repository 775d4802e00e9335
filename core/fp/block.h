// SPDX-License-Identifier: MIT
#pragma once
// Block-scaled formats: elements of a narrow format sharing one scale per block of consecutive
// values (issue 21).
//  - OCP Microscaling (MX v1.0): blocks of 32, an E8M0 scale X = 2^(floor(log2 amax) - emax_elem)
//    (emax_elem: the exponent of the element format's largest normal; the shared exponent clamped to
//    [-127, 127]); each element is V / X rounded to nearest even and saturated to the element's
//    largest magnitude. A block holding NaN or Inf gets the NaN scale (0xFF): every value NaN.
//    MXFP8 (E4M3, E5M2), MXFP6 (E3M2, E2M3), MXFP4 (E2M1).
//  - NVFP4: blocks of 16 E2M1 elements, an E4M3 block scale and an fp32 tensor scale
//    s = amax(tensor) / (6 * 448); the block scale is E4M3(amax(block) / (6 s)) rounded to nearest
//    even (saturating), each element E2M1(V / (block scale * s)), nearest even, saturating.
// Quantising returns the values the format represents (element x scale), in fp32: what a kernel
// that takes block-scaled inputs multiplies.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/fp/block_simd.h"
#include "core/fp/format.h"

namespace peat::fp {

enum class ScaleKind { E8M0, E4M3 };

struct BlockFormat {
  std::string_view name;  // "mxfp8-e4m3", "mxfp8-e5m2", "mxfp6-e3m2", "mxfp6-e2m3", "mxfp4", "nvfp4"
  Format element;
  int blockSize;  // the specification's: 32 (MX) or 16 (NVFP4)
  ScaleKind scale;
};

inline constexpr BlockFormat kMxfp8E4m3{"mxfp8-e4m3", kE4M3, 32, ScaleKind::E8M0};
inline constexpr BlockFormat kMxfp8E5m2{"mxfp8-e5m2", kE5M2, 32, ScaleKind::E8M0};
inline constexpr BlockFormat kMxfp6E3m2{"mxfp6-e3m2", kE3M2, 32, ScaleKind::E8M0};
inline constexpr BlockFormat kMxfp6E2m3{"mxfp6-e2m3", kE2M3, 32, ScaleKind::E8M0};
inline constexpr BlockFormat kMxfp4{"mxfp4", kE2M1, 32, ScaleKind::E8M0};
inline constexpr BlockFormat kNvfp4{"nvfp4", kE2M1, 16, ScaleKind::E4M3};

const std::vector<BlockFormat>& blockFormats();
std::optional<BlockFormat> blockFormatByName(std::string_view name);

// E8M0: an unsigned power of two, 2^(code - 127); code 255 is NaN.
inline constexpr uint8_t kE8M0NaN = 0xff;
float decodeE8M0(uint8_t code);
// The code of 2^exponent, the exponent clamped to [-127, 127].
uint8_t e8m0OfExponent(int exponent);
// emax_elem: the unbiased exponent of the element format's largest finite value.
int largestExponent(const Format& element);

// Rounding of a finite fp32 value to an element format, nearest even, saturating at its largest
// magnitude: decode(encode(x, Overflow::Saturate)) in a few integer operations (tst_fp checks the two
// agree on every fp32 value of a sweep). NaN and Inf are the caller's.
class ElementRounder {
 public:
  explicit ElementRounder(const Format& element);
  float operator()(float x) const { return detail::roundElement(x, p_); }
  const detail::RoundingParameters& parameters() const { return p_; }  // for the vectorised loop

 private:
  detail::RoundingParameters p_;
};

// Mistakes real ports make, for planted-bug candidates:
enum class BlockBug {
  None,
  WrongBlock,      // block b is scaled with block b + 1's scale (the last with block 0's): off by one block
  TruncatedScale,  // the scale is amax / element max truncated (toward zero) to the scale format, not
                   // the specification's rule: MX 2^floor(log2(amax / max)), NVFP4 E4M3 rounded down
};

struct BlockQuantization {
  std::vector<float> blockScales;  // per block, decoded (NaN for a NaN scale)
  float tensorScale = 1;           // NVFP4's fp32 tensor scale; 1 for MX
  uint64_t saturated = 0;          // elements clamped to the element format's largest magnitude
  uint64_t flushedToZero = 0;      // nonzero inputs that became zero
};

// Quantises `count` values in place, in consecutive blocks of `blockSize` (0: the format's; the last
// block may be shorter), and returns the scales. NVFP4's tensor scale comes from `tensorAmax`, the
// largest finite magnitude of the whole tensor these values belong to (negative: these values').
BlockQuantization quantizeBlocks(const BlockFormat& f, float* values, uint64_t count, int blockSize = 0,
                                 BlockBug bug = BlockBug::None, float tensorAmax = -1);

}  // namespace peat::fp
