// SPDX-License-Identifier: MIT
#include "core/fp/block.h"

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
  return std::ldexp(1.0f, int(code) - 127);  // 2^-127 is subnormal in fp32, still exact
}

uint8_t e8m0OfExponent(int exponent) { return uint8_t(std::clamp(exponent, -127, 127) + 127); }

int largestExponent(const Format& element) { return decompose(element, maxFinite(element)).unbiasedExponent; }

namespace {

// floor(log2 x) for a finite x > 0 (subnormal fp32 included), exactly.
int floorLog2(float x) {
  int e = 0;
  std::frexp(x, &e);  // x = m 2^e, m in [0.5, 1)
  return e - 1;
}

// The scale of one block with maximum magnitude `amax` (finite, >= 0); NaN for a NaN scale.
float blockScale(const BlockFormat& f, float amax, float tensorScale, BlockBug bug) {
  const float elementMax = decode(f.element, maxFinite(f.element));
  if (f.scale == ScaleKind::E8M0) {
    if (amax == 0) return decodeE8M0(0);  // any scale: every element is zero
    const int exponent =
        bug == BlockBug::TruncatedScale ? floorLog2(amax / elementMax) : floorLog2(amax) - largestExponent(f.element);
    return decodeE8M0(e8m0OfExponent(exponent));
  }
  // NVFP4: E4M3 of amax / (6 s), nearest even or (the bug) toward zero
  const float wanted = amax / (elementMax * tensorScale);
  if (bug != BlockBug::TruncatedScale) return roundTo(kE4M3, wanted, Overflow::Saturate);
  uint32_t code = encode(kE4M3, wanted, Overflow::Saturate);  // positive codes are ordered like their values
  if (decode(kE4M3, code) > wanted && code > 0) --code;        // rounded up: one step down
  return decode(kE4M3, code);
}

}  // namespace

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
  for (uint64_t b = 0; b < blocks; ++b) {
    for (uint64_t i = b * block; i < std::min(count, (b + 1) * block); ++i) {
      if (!std::isfinite(values[i])) {
        amax[b] = std::numeric_limits<float>::quiet_NaN();
        break;
      }
      amax[b] = std::max(amax[b], std::fabs(values[i]));
    }
    if (std::isfinite(amax[b])) tensorAmax = std::max(tensorAmax, amax[b]);
  }
  if (wholeTensorAmax >= 0) tensorAmax = wholeTensorAmax;
  if (f.scale == ScaleKind::E4M3) {
    const float e4m3Max = decode(kE4M3, maxFinite(kE4M3));
    q.tensorScale = tensorAmax > 0 ? tensorAmax / (elementMax * e4m3Max) : 1.0f;
  }
  std::vector<float> scales(blocks);
  for (uint64_t b = 0; b < blocks; ++b)
    scales[b] = std::isfinite(amax[b]) ? blockScale(f, amax[b], q.tensorScale, bug) : std::numeric_limits<float>::quiet_NaN();
  q.blockScales.resize(blocks);
  for (uint64_t b = 0; b < blocks; ++b) {
    const float scale = bug == BlockBug::WrongBlock ? scales[(b + 1) % blocks] : scales[b];
    q.blockScales[b] = scale;
    const float step = scale * q.tensorScale;
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
      const uint32_t code = encode(f.element, v, Overflow::Saturate);
      q.saturated += std::fabs(v) > elementMax;
      const float out = decode(f.element, code) * step;
      q.flushedToZero += out == 0 && values[i] != 0;
      values[i] = out;
    }
  }
  return q;
}

}  // namespace peat::fp
