// SPDX-License-Identifier: MIT
#pragma once
// Small text helpers shared by the CLI's printers.
#include <cstdint>
#include <string>
#include <vector>

namespace peat::cli {

// "[64x128]"
inline std::string shapeText(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace peat::cli
