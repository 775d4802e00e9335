// SPDX-License-Identifier: MIT
#include "core/analysis/value_bound.h"

#include <cmath>

namespace peat::analyzer {

float largestFloatInRange(double lo, double hi) {
  const double bound = std::fabs(hi) >= std::fabs(lo) ? hi : lo;
  float value = float(bound);
  if (std::fabs(double(value)) > std::fabs(bound)) value = std::nextafter(value, 0.0f);
  return value;
}

}  // namespace peat::analyzer
