// SPDX-License-Identifier: MIT
#pragma once
// Small text helpers shared by the CLI's printers.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/util/text.h"

namespace peat::cli {

// "[64x128]"
using util::shapeText;

// "16x16" -> {16, 16}; throws std::invalid_argument naming --tile for anything else.
inline std::pair<uint64_t, uint64_t> parseTile(const std::string& text) {
  const auto x = text.find('x');
  try {
    if (x != std::string::npos) {
      const long long r = std::stoll(text.substr(0, x)), c = std::stoll(text.substr(x + 1));
      if (r > 0 && c > 0) return {uint64_t(r), uint64_t(c)};
    }
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("--tile '" + text + "' is not ROWSxCOLS with positive numbers, e.g. 16x16");
}

}  // namespace peat::cli
