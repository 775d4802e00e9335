// SPDX-License-Identifier: MIT
#pragma once
// What of a finding the plots can draw (docs/session-format.md, findings): a bit position, where an
// indexing bug strikes (a stride, or the rows and columns it is confined to), or the fp32 mantissa
// bits a rounding format does not keep. No Qt: the views only draw what this names.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/store/session.h"

namespace peat::analyzer {

struct FindingEvidence {
  std::optional<int> bit;     // the bit to frame ("bit", else "highest_bit")
  std::optional<int> stride;  // index_error: the elements a whole number of strides apart
  bool confined = false;      // index_error without a stride: rows and columns it is confined to
  // ... which: inclusive ranges of the columns and rows the large errors hit (empty: not confined
  // along that axis, or a session written before the detector named them); `truncated` when the
  // detector listed only the first 64 ranges
  std::vector<std::pair<uint64_t, uint64_t>> columns, rows;
  bool truncated = false;
  std::string format;         // precision_loss: the format named ("" when none or unknown)
  int highestDroppedBit = -1; // ... and the highest fp32 mantissa bit it drops (-1: none)
};

FindingEvidence findingEvidence(const store::Finding& finding);

}  // namespace peat::analyzer
