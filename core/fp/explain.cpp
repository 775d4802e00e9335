// SPDX-License-Identifier: MIT
#include "core/fp/explain.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/fp/block.h"
#include "core/fp/ulp.h"

namespace peat::fp {

namespace {
// The encoding one step along the value line (+1 or -1), if there is one that is not NaN.
std::optional<uint32_t> step(const Format& f, uint32_t bits, int direction) {
  const int64_t line = ulpLine(f, bits) + direction;
  const int64_t top = int64_t(infinity(f).value_or(maxFinite(f)));
  if (line > top || line < -top) return std::nullopt;
  const uint32_t next = line < 0 ? (uint32_t(-line) | f.signMask()) : uint32_t(line);
  if (isNaN(f, next)) return std::nullopt;
  return next;
}
}  // namespace

Explained explain(const Format& f, uint32_t bits) {
  Explained e;
  e.bits = bits & f.allMask();
  e.value = decode(f, e.bits);
  e.fields = decompose(f, e.bits);
  if (isNaN(f, e.bits)) return e;
  if (const auto lo = step(f, e.bits, -1)) e.below = decode(f, *lo);
  if (const auto hi = step(f, e.bits, +1)) e.above = decode(f, *hi);
  if (std::isfinite(e.value)) {
    // one ULP at this value: the gap to the next encoding away from zero (or toward it at the top)
    const uint32_t magnitude = e.bits & (f.signMask() - 1);
    const auto up = step(f, magnitude, +1), down = step(f, magnitude, -1);
    const float m = decode(f, magnitude);
    if (up && std::isfinite(decode(f, *up))) e.ulp = double(decode(f, *up)) - double(m);
    else if (down) e.ulp = double(m) - double(decode(f, *down));
  }
  return e;
}

Toggle toggle(const Format& f, uint32_t bits, int bit) { return change(f, bits, flipBit(f, bits & f.allMask(), bit)); }

Toggle change(const Format& f, uint32_t from, uint32_t to) {
  Toggle t;
  const Explained before = explain(f, from);
  t.after = explain(f, to);
  const double a = before.value, b = t.after.value;
  t.absoluteChange = std::isfinite(a) && std::isfinite(b) ? std::fabs(b - a) : std::numeric_limits<double>::infinity();
  t.relativeChange = a != 0 ? t.absoluteChange / std::fabs(a) : std::numeric_limits<double>::infinity();
  t.ulpChange = ulpDistance(f, before.bits, t.after.bits);
  return t;
}

Overflow candidateOverflow(const Format& f) {
  return f.name == kE4M3.name || f.name == kE5M2.name ? Overflow::Saturate : Overflow::Standard;
}

Narrowed narrowAsCandidate(const Format& f, float x) {
  Narrowed n;
  n.overflow = candidateOverflow(f);
  n.code = encode(f, x, n.overflow);
  n.value = decode(f, n.code);
  const uint32_t magnitude = n.code & (f.signMask() - 1);
  const bool clampable = n.overflow == Overflow::Saturate || f.encoding == Encoding::FiniteOnly;
  n.saturated = clampable && !std::isnan(x) && magnitude == maxFinite(f) && std::fabs(double(x)) > double(decode(f, maxFinite(f)));
  return n;
}

std::vector<Format> narrowFormats() { return {kFp16, kBf16, kTf32, kE4M3, kE5M2, kE3M2, kE2M3, kE2M1}; }

std::string exactDecimal(double value) {
  if (!std::isfinite(value)) return {};
  char text[1200];  // a double's longest exact expansion has 767 significant digits
  std::snprintf(text, sizeof text, "%.1100g", value);
  return text;
}

Explained64 explain64(double value) {
  Explained64 e;
  e.value = value;
  std::memcpy(&e.bits, &value, sizeof value);
  e.sign = (e.bits >> 63) != 0;
  e.exponent = int((e.bits >> 52) & 0x7ff);
  e.mantissa = e.bits & ((uint64_t(1) << 52) - 1);
  e.unbiasedExponent = e.exponent == 0 ? -1022 : e.exponent - 1023;
  e.exact = exactDecimal(value);
  if (std::isfinite(value)) {
    char sig[64];
    std::snprintf(sig, sizeof sig, "%.17g", (e.exponent == 0 ? 0.0 : 1.0) + double(e.mantissa) / 4503599627370496.0);
    e.significand = sig;
  }
  return e;
}

std::vector<BlockPlace> blockPlaces(const float* row, uint64_t length, uint64_t column, float tensorAmax) {
  std::vector<BlockPlace> places;
  if (column >= length) return places;
  if (tensorAmax < 0) {
    tensorAmax = 0;
    for (uint64_t i = 0; i < length; ++i)
      if (std::isfinite(row[i])) tensorAmax = std::max(tensorAmax, std::fabs(row[i]));
  }
  for (const BlockFormat& f : blockFormats()) {
    BlockPlace p;
    p.format = std::string(f.name);
    p.blockSize = f.blockSize;
    p.block = column / uint64_t(f.blockSize);
    p.first = p.block * uint64_t(f.blockSize);
    p.last = std::min(length, p.first + uint64_t(f.blockSize));
    std::vector<float> block(row + p.first, row + p.last);
    for (float x : block)
      if (std::isfinite(x)) p.amax = std::max(p.amax, double(std::fabs(x)));
    const BlockQuantization q = quantizeBlocks(f, block.data(), uint64_t(block.size()), 0, BlockBug::None, tensorAmax);
    p.scale = q.blockScales.empty() ? 0.0 : double(q.blockScales.front());
    p.tensorScale = double(q.tensorScale);
    p.quantized = block[std::size_t(column - p.first)];
    const float original = row[column];
    p.flushed = original != 0 && p.quantized == 0;
    const double step = p.scale * p.tensorScale;
    p.saturated = std::isfinite(original) && step > 0 &&
                  std::fabs(double(original)) / step > double(decode(f.element, maxFinite(f.element)));
    places.push_back(p);
  }
  return places;
}

std::vector<BlockPlace> blockPlacesInTensor(const float* tensor, uint64_t n, uint64_t cols, uint64_t index) {
  if (cols == 0 || index >= n) return {};
  float amax = 0;
  for (uint64_t i = 0; i < n; ++i)
    if (std::isfinite(tensor[i])) amax = std::max(amax, std::fabs(tensor[i]));
  const uint64_t row = index / cols;
  return blockPlaces(tensor + row * cols, std::min(cols, n - row * cols), index % cols, amax);
}

}  // namespace peat::fp
