// SPDX-License-Identifier: MIT
#include "core/analysis/finding_evidence.h"

#include "core/fp/format.h"

namespace peat::analyzer {

FindingEvidence findingEvidence(const store::Finding& f) {
  FindingEvidence out;
  const auto field = [&](const char* name) -> std::optional<double> {
    const auto at = f.numbers.find(name);
    return at == f.numbers.end() ? std::nullopt : std::optional<double>(at->second);
  };
  if (const auto bit = field("bit") ? field("bit") : field("highest_bit")) {
    out.bit = int(*bit);
  } else if (f.model == "index_error") {
    if (const auto stride = field("stride")) out.stride = int(*stride);
    else out.confined = field("confined").has_value();
  } else if (f.model == "precision_loss") {
    const auto at = f.labels.find("format");
    const std::optional<fp::Format> format = at == f.labels.end() ? std::nullopt : fp::formatByName(at->second);
    if (format) {
      out.format = at->second;
      out.highestDroppedBit = fp::highestDroppedMantissaBit(*format);
    }
  }
  return out;
}

}  // namespace peat::analyzer
