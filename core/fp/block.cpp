// SPDX-License-Identifier: MIT
#include "core/fp/block.h"
#include "core/fp/block_simd.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace peat::fp {

const std::vector<BlockFormat>& blockFormats() {
  static const std::vector<BlockFormat> formats{kMxfp8E4m3, kMxfp8E5m2, kMxfp6E3m2, kMxfp6E2m3, kMxfp4, kNvfp4};
  return formats;
}

std::optional<BlockFormat> blockFormatByName(std::string_view name) {
  for (const BlockFormat& f : blockFormats())
    if (f.name == name) return f;
  return std::nullopt;
}

float decodeE8M0(uint8_t code) {
  if (code == kE8M0NaN) return std::numeric_limits<float>::quiet_NaN();
  if (code == 0) return std::ldexp(1.0f, -127);  // subnormal in fp32, still exact
  return floatOf(uint32_t(code) << 23);          // 2^(code - 127): the code is fp32's biased exponent
}

uint8_t e8m0OfExponent(int exponent) { return uint8_t(std::clamp(exponent, -127, 127) + 127); }

int largestExponent(const Format& element) { return decompose(element, maxFinite(element)).unbiasedExponent; }

namespace {

// floor(log2 x) for a finite x > 0 (subnormal fp32 included), exactly.
int floorLog2(float x) {
  const uint32_t field = (bitsOf(x) >> 23) & 0xffu;
  if (field != 0) return int(field) - 127;  // normal: the exponent field
  int e = 0;
  std::frexp(x, &e);  // subnormal: x = m 2^e, m in [0.5, 1)
  return e - 1;
}

// The scale of one block with maximum magnitude `amax` (finite, >= 0); NaN for a NaN scale.
// elementMax, emax: the element format's largest magnitude and its exponent.
float blockScale(const BlockFormat& f, float amax, float tensorScale, BlockBug bug, float elementMax, int emax) {
  if (f.scale == ScaleKind::E8M0) {
    if (amax == 0) return decodeE8M0(0);  // any scale: every element is zero
    const int exponent = bug == BlockBug::TruncatedScale ? floorLog2(amax / elementMax) : floorLog2(amax) - emax;
    return decodeE8M0(e8m0OfExponent(exponent));
  }
  // NVFP4: E4M3 of amax / (6 s), nearest even or (the bug) toward zero
  const float wanted = amax / (elementMax * tensorScale);
  if (bug != BlockBug::TruncatedScale) {
    static const ElementRounder e4m3(kE4M3);  // the codec's rounding, nearest even and saturating
    return std::isfinite(wanted) ? e4m3(wanted) : roundTo(kE4M3, wanted, Overflow::Saturate);
  }
  uint32_t code = encode(kE4M3, wanted, Overflow::Saturate);  // positive codes are ordered like their values
  if (decode(kE4M3, code) > wanted && code > 0) --code;        // rounded up: one step down
  return decode(kE4M3, code);
}

}  // namespace

ElementRounder::ElementRounder(const Format& f) {
  const float largest = decode(f, maxFinite(f));
  p_ = {uint32_t(23 - f.manBits), std::ldexp(1.0f, f.minNormalExponent()),
        std::ldexp(1.0f, f.minNormalExponent() - f.manBits + 23), bitsOf(largest), largest};
}

BlockQuantization quantizeBlocks(const BlockFormat& f, float* values, uint64_t count, int blockSize, BlockBug bug,
                                 float wholeTensorAmax) {
  if (blockSize < 0) throw std::invalid_argument("block size must be positive");
  const uint64_t block = uint64_t(blockSize > 0 ? blockSize : f.blockSize);
  BlockQuantization q;
  const uint64_t blocks = (count + block - 1) / block;
  const float elementMax = decode(f.element, maxFinite(f.element));
  // amax per block (NaN when a block holds NaN or Inf)
  std::vector<float> amax(blocks, 0.0f);
  float tensorAmax = 0;
  {
    // |x|'s bit patterns order like |x|, and NaN and Inf have the largest: an integer max finds the
    // amax and whether the block holds a non-finite value
    std::vector<uint32_t> largest(blocks);
    detail::blockMaxMagnitudeBits(values, count, block, largest.data());
    for (uint64_t b = 0; b < blocks; ++b) {
      amax[b] = largest[b] >= 0x7f800000u ? std::numeric_limits<float>::quiet_NaN() : floatOf(largest[b]);
      if (std::isfinite(amax[b])) tensorAmax = std::max(tensorAmax, amax[b]);
    }
  }
  if (wholeTensorAmax >= 0) tensorAmax = wholeTensorAmax;
  if (f.scale == ScaleKind::E4M3) {
    const float e4m3Max = decode(kE4M3, maxFinite(kE4M3));
    q.tensorScale = tensorAmax > 0 ? tensorAmax / (elementMax * e4m3Max) : 1.0f;
  }
  const ElementRounder round(f.element);
  const int emax = largestExponent(f.element);
  std::vector<float> scales(blocks);
  for (uint64_t b = 0; b < blocks; ++b)
    scales[b] = std::isfinite(amax[b]) ? blockScale(f, amax[b], q.tensorScale, bug, elementMax, emax)
                                       : std::numeric_limits<float>::quiet_NaN();
  q.blockScales.resize(blocks);
  // blocks of finite values with a usable step go through the vectorised loop in one call (steps[b]
  // > 0); the others (NaN or Inf inside, a NaN scale, a scale that underflowed) element by element
  std::vector<float> steps(blocks, -1.0f);
  for (uint64_t b = 0; b < blocks; ++b) {
    const float scale = bug == BlockBug::WrongBlock ? scales[(b + 1) % blocks] : scales[b];
    q.blockScales[b] = scale;
    const float step = scale * q.tensorScale;
    if (std::isfinite(amax[b]) && std::isfinite(scale) && step != 0) {
      steps[b] = step;
      continue;
    }
    for (uint64_t i = b * block; i < std::min(count, (b + 1) * block); ++i) {
      if (std::isnan(scale) || !std::isfinite(values[i])) {
        values[i] = std::numeric_limits<float>::quiet_NaN();
        continue;
      }
      if (step == 0) {  // an NVFP4 block scale that underflowed E4M3: the block reads zero
        q.flushedToZero += values[i] != 0;
        values[i] = 0;
        continue;
      }
      const float v = values[i] / step;
      q.saturated += std::fabs(v) > elementMax;
      const float out = round(v) * step;
      q.flushedToZero += out == 0 && values[i] != 0;
      values[i] = out;
    }
  }
  // MX steps are powers of two, so multiplying by the reciprocal is the division exactly; NVFP4's
  // are not, and divide
  const detail::RoundingCounts counts =
      detail::scaleRoundBlocks(values, count, block, steps.data(), f.scale == ScaleKind::E8M0, round.parameters());
  q.saturated += counts.saturated;
  q.flushedToZero += counts.flushed;
  return q;
}

}  // namespace peat::fp
