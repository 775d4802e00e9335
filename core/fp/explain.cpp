// SPDX-License-Identifier: MIT
#include "core/fp/explain.h"

#include <cmath>
#include <limits>

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

}  // namespace peat::fp
