// SPDX-License-Identifier: MIT
#pragma once
// The fp32 value a sound range [lo, hi] is best shown by: its bound of largest magnitude, rounded
// toward zero when float rounding would take it outside the range.

namespace peat::analyzer {

float largestFloatInRange(double lo, double hi);

}  // namespace peat::analyzer
