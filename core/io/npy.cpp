// SPDX-License-Identifier: MIT
// The .npy format (NumPy's NEP 1): header parsing and validation, free of HDF5 and LibTorch so the
// fuzzer can build it alone.
#include <cctype>
#include <cstring>

#include "core/io/tensor_source.h"

namespace peat::io {

namespace {

// A tiny reader for the Python-literal dict of a .npy header: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
 public:
  HeaderParser(std::string text, std::string what) : s_(std::move(text)), what_(std::move(what)) {}

  NpyHeader parse() {
    NpyHeader h;
    bool haveDescr = false, haveOrder = false, haveShape = false;
    skip();
    expect('{');
    for (;;) {
      skip();
      if (peek() == '}') break;
      const std::string key = string();
      skip();
      expect(':');
      skip();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"') fail("descr is not a plain type string (structured dtypes are not supported)");
        h.descr = string();
        haveDescr = true;
      } else if (key == "fortran_order") {
        h.fortranOrder = word() == "True";
        haveOrder = true;
      } else if (key == "shape") {
        h.shape = tuple();
        haveShape = true;
      } else {
        fail("unknown header key '" + key + "'");
      }
      skip();
      if (peek() == ',') ++i_;
    }
    if (!haveDescr || !haveOrder || !haveShape) fail("header lacks descr, fortran_order or shape");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const { throw SourceError(what_ + ": bad .npy header: " + why); }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string string() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    const auto end = s_.find(quote, i_ + 1);
    if (end == std::string::npos) fail("unterminated string");
    std::string out = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return out;
  }
  std::string word() {
    const std::size_t start = i_;
    while (i_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[i_]))) ++i_;
    return s_.substr(start, i_ - start);
  }
  std::vector<uint64_t> tuple() {
    std::vector<uint64_t> dims;
    expect('(');
    for (;;) {
      skip();
      if (peek() == ')') {
        ++i_;
        break;
      }
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("shape holds something other than integers");
      uint64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        if (v > (uint64_t(1) << 50)) fail("shape dimension is implausibly large");
        v = v * 10 + uint64_t(peek() - '0');
        ++i_;
      }
      dims.push_back(v);
      if (dims.size() > 32) fail("more than 32 dimensions");
      skip();
      if (peek() == ',') ++i_;
    }
    return dims;
  }

  std::string s_, what_;
  std::size_t i_ = 0;
};

}  // namespace

ElementType elementType(const std::string& descr, const std::string& what) {
  if (descr.find('O') != std::string::npos)
    throw SourceError(what + ": object arrays are not supported (save a float array)");
  if (descr.size() < 3) throw SourceError(what + ": unsupported dtype '" + descr + "'");
  const char order = descr[0];
  const std::string kind = descr.substr(1);
  if (order == '>' && kind != "f1")
    throw SourceError(what + ": big-endian data ('" + descr + "') is not supported; save with dtype '<" + kind + "'");
  if (order != '<' && order != '|' && order != '=')
    throw SourceError(what + ": unsupported byte order in dtype '" + descr + "'");
  if (kind == "f4") return {4, "float32"};
  if (kind == "f2") return {2, "float16"};
  // Integers (labels, token ids) are read as fp32 when every value is exact there (|v| <= 2^24).
  static const std::pair<const char*, ElementType> integers[] = {
      {"i1", {1, "int8"}},  {"u1", {1, "uint8"}},  {"i2", {2, "int16"}}, {"u2", {2, "uint16"}},
      {"i4", {4, "int32"}}, {"u4", {4, "uint32"}}, {"i8", {8, "int64"}}, {"u8", {8, "uint64"}}};
  for (const auto& [code, type] : integers)
    if (kind == code) return type;
  throw SourceError(what + ": dtype '" + descr + "' is not supported (float32, float16 or an integer type expected)");
}

NpyHeader parseNpyHeader(const unsigned char* b, std::size_t length, const std::string& what) {
  static const unsigned char magic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (length < 10 || std::memcmp(b, magic, 6) != 0) throw SourceError(what + " is not a .npy file");
  const int major = b[6];
  std::size_t headerLength = 0, prefix = 0;
  if (major == 1) {
    headerLength = std::size_t(b[8]) | (std::size_t(b[9]) << 8);
    prefix = 10;
  } else if (major == 2 || major == 3) {
    if (length < 12) throw SourceError(what + ": truncated .npy header");
    headerLength = std::size_t(b[8]) | (std::size_t(b[9]) << 8) | (std::size_t(b[10]) << 16) | (std::size_t(b[11]) << 24);
    prefix = 12;
  } else {
    throw SourceError(what + ": unsupported .npy format version " + std::to_string(major));
  }
  if (headerLength > (1u << 20) || prefix + headerLength > length) throw SourceError(what + ": truncated .npy header");
  NpyHeader h = HeaderParser(std::string(reinterpret_cast<const char*>(b + prefix), headerLength), what).parse();
  h.dataOffset = prefix + headerLength;
  return h;
}


NpyLayout validateNpy(const unsigned char* bytes, std::size_t length, const std::string& what) {
  NpyLayout l;
  l.header = parseNpyHeader(bytes, length, what);
  if (l.header.fortranOrder) throw SourceError(what + " is in Fortran order; save it in C order (np.ascontiguousarray)");
  l.element = elementType(l.header.descr, what);
  uint64_t count = 1;
  for (uint64_t d : l.header.shape) {
    if (d != 0 && count > (uint64_t(1) << 40) / d) throw SourceError(what + ": shape is implausibly large");
    count *= d;
  }
  if (l.header.dataOffset > length || count * uint64_t(l.element.bytes) > length - l.header.dataOffset)
    throw SourceError(what + " is truncated: its header promises " + std::to_string(count) + " elements");
  l.count = count;
  return l;
}

}  // namespace peat::io
