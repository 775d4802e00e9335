// SPDX-License-Identifier: MIT
#include "core/analysis/finding_evidence.h"

#include <cstdlib>

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
    // "0-3,7,60-63": the detector's ranges of confined columns and rows
    const auto ranges = [&](const char* name, std::vector<std::pair<uint64_t, uint64_t>>& into) {
      const auto at = f.labels.find(name);
      if (at == f.labels.end()) return;
      std::size_t from = 0;
      const std::string& text = at->second;
      while (from < text.size()) {
        std::size_t end = text.find(',', from);
        if (end == std::string::npos) end = text.size();
        const std::string part = text.substr(from, end - from);
        from = end + 1;
        if (part == "...") {
          out.truncated = true;
          continue;
        }
        // digits only ("-5" and " 5" are garbage from someone else's file, which strtoull would take)
        if (part.empty() || part[0] < '0' || part[0] > '9') continue;
        char* rest = nullptr;
        const unsigned long long lo = std::strtoull(part.c_str(), &rest, 10);
        unsigned long long hi = lo;
        if (*rest == '-' && rest[1] >= '0' && rest[1] <= '9') hi = std::strtoull(rest + 1, &rest, 10);
        if (*rest != '\0' || hi < lo) continue;
        into.emplace_back(uint64_t(lo), uint64_t(hi));
      }
    };
    ranges("columns", out.columns);
    ranges("rows", out.rows);
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
