// SPDX-License-Identifier: MIT
#pragma once
// Small text helpers shared by the core, the CLI and the workbench.
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <stdexcept>
#include <optional>
#include <utility>
#include <string>
#include <vector>

namespace peat::util {

// The length of the well-formed UTF-8 sequence at text[i] (1 for ASCII, 2 to 4), or 0 where the
// bytes there are not one (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF,
// a sequence cut short).
inline std::size_t utf8Length(const std::string& text, std::size_t i) {
  const auto at = [&](std::size_t k) { return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0u; };
  const unsigned c = at(0);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned lo = 0x80, hi = 0xbf;  // the second byte's range (narrower after E0, ED, F0, F4)
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
  else return 0;
  if (at(1) < lo || at(1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (at(k) < 0x80 || at(k) > 0xbf) return 0;
  return n;
}

// `text` safe to print on a terminal: control characters (C0, DEL and UTF-8-encoded C1, which
// can move the cursor, retitle or clear the terminal) written as \xNN or \u00NN escapes, every
// byte that is not part of well-formed UTF-8 as \xNN (a raw 0x9b is CSI to a terminal that takes
// 8-bit controls), and a backslash as two. Strings from files (run names, attributes, HDF5 names)
// go through this.
inline std::string printable(const std::string& text) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t n = utf8Length(text, i);
    if (c < 0x20 || c == 0x7f || n == 0) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      const auto d = static_cast<unsigned char>(text[++i]);
      out += "\\u00";
      out += hex[d >> 4];
      out += hex[d & 15];
    } else if (c == '\\') {
      out += "\\\\";
    } else {
      out.append(text, i, n);
      i += n - 1;
    }
  }
  return out;
}

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

// "INDEX/COUNT" with 0 <= INDEX < COUNT, e.g. "2/8"; nothing for anything else.
inline std::optional<std::pair<int, int>> parseShard(const std::string& text) {
  const std::size_t slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size() || slash > 9 || text.size() - slash > 10)
    return std::nullopt;
  long long v[2] = {0, 0};
  for (int part = 0; part < 2; ++part) {
    const std::size_t from = part ? slash + 1 : 0, to = part ? text.size() : slash;
    for (std::size_t i = from; i < to; ++i) {
      if (text[i] < '0' || text[i] > '9') return std::nullopt;
      v[part] = v[part] * 10 + (text[i] - '0');
    }
  }
  if (v[1] <= 0 || v[0] >= v[1]) return std::nullopt;
  return std::make_pair(int(v[0]), int(v[1]));
}

// "0.485,0.456,0.406" -> its finite numbers; std::invalid_argument naming `option` otherwise.
inline std::vector<double> parseNumberList(const std::string& text, const std::string& option) {
  std::vector<double> out;
  for (const std::string& item : splitText(text, ',')) {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || !std::isfinite(v))
      throw std::invalid_argument(option + " '" + text + "' is not a list of numbers");
    out.push_back(v);
  }
  if (out.empty()) throw std::invalid_argument(option + " is empty");
  return out;
}

// A tensor shape as people write it: {8, 16} -> "[8x16]".
// TEXT, the whole of it, as a decimal integer in [LO, HI]; nullopt for anything else (no partial
// parse, no overflow, no exception): for numbers read from files someone else made.
inline std::optional<int64_t> boundedInteger(const std::string& text, int64_t lo, int64_t hi) {
  if (text.empty() || text.size() > 20 || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-'))
    return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size() || v < lo || v > hi) return std::nullopt;
  return int64_t(v);
}

// TEXT, the whole of it, as a decimal unsigned 64-bit integer; nullopt for anything else.
inline std::optional<uint64_t> wholeUnsigned(const std::string& text) {
  if (text.empty() || text.size() > 20 || !std::isdigit(static_cast<unsigned char>(text[0]))) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return std::nullopt;
  return uint64_t(v);
}

// TEXT, the whole of it, as a finite number in [LO, HI]; nullopt for anything else.
inline std::optional<double> boundedReal(const std::string& text, double lo, double hi) {
  if (text.empty() || text.size() > 64 || std::isspace(static_cast<unsigned char>(text[0]))) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(v) || v < lo || v > hi) return std::nullopt;
  return v;
}

inline std::string shapeText(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace peat::util
