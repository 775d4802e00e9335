// SPDX-License-Identifier: MIT
#pragma once
// Small text helpers shared by the core, the CLI and the workbench.
#include <cstdint>
#include <string>
#include <vector>

namespace peat::util {

// The non-empty parts of `text` between separators: "a,b,,c" -> {"a", "b", "c"}.
inline std::vector<std::string> splitText(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(sep, start), text.size());
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// A tensor shape as people write it: {8, 16} -> "[8x16]".
inline std::string shapeText(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace peat::util
