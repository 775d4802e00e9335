// SPDX-License-Identifier: MIT
#pragma once
// What the bit explorer shows of one encoding (issue 18): its fields, value, class, the size of one
// ULP there and its neighbours one ULP away, and what toggling one bit does. All of it from
// core/fp, so that the workbench draws and computes nothing itself.
#include <cstdint>
#include <optional>
#include <string>

#include "core/fp/format.h"

namespace peat::fp {

struct Explained {  // one encoding of a format, explained
  uint32_t bits = 0;
  float value = 0;
  Fields fields{};
  double ulp = 0;                    // the distance to the next larger magnitude (NaN/Inf: 0)
  std::optional<float> below, above;  // the neighbours one ULP away on the value line (none past the ends)
};


Explained explain(const Format& f, uint32_t bits);

// Toggling one bit: the new encoding and the change it makes.
struct Toggle {
  Explained after;
  double absoluteChange = 0;         // |after - before| (Inf when one side is not finite)
  double relativeChange = 0;         // absoluteChange / |before| (Inf for before = 0)
  std::optional<uint64_t> ulpChange;  // none when either side is NaN
};
Toggle toggle(const Format& f, uint32_t bits, int bit);
// The same numbers between any two encodings (a reference and what toggles made of it).
Toggle change(const Format& f, uint32_t from, uint32_t to);

}  // namespace peat::fp
