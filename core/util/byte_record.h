// SPDX-License-Identifier: MIT
#pragma once
// A plain byte form for records a command keeps in a SpoolFile (spool_file.h) while it runs:
// trivially copyable values as their bytes, texts and lists with their length first. Written and
// read in one order by the same build, so it carries no version; a record read back damaged or cut
// short is refused with std::runtime_error naming what the record was.
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace peat::util {

class ByteWriter {
 public:
  std::vector<unsigned char> bytes;
  template <typename T>
  void raw(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const unsigned char*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof v);
  }
  void text(const std::string& t) {
    raw(uint64_t(t.size()));
    bytes.insert(bytes.end(), t.begin(), t.end());
  }
  template <typename T>
  void list(const std::vector<T>& v) {
    raw(uint64_t(v.size()));
    for (const T& x : v) raw(x);
  }
  template <typename T>
  void textMap(const std::map<std::string, T>& m) {  // T trivially copyable
    raw(uint64_t(m.size()));
    for (const auto& [k, x] : m) text(k), raw(x);
  }
};

class ByteReader {
 public:
  // `what` names the record in errors: "a kept call analysis".
  ByteReader(const std::vector<unsigned char>& b, std::string what) : bytes_(b), what_(std::move(what)) {}
  template <typename T>
  void raw(T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    take(&v, sizeof v);
  }
  uint64_t count() {
    uint64_t n = 0;
    raw(n);
    if (n > bytes_.size()) throw std::runtime_error(what_ + " is damaged");
    return n;
  }
  std::string text() {
    std::string t(std::size_t(count()), '\0');
    take(t.data(), t.size());
    return t;
  }
  template <typename T>
  void list(std::vector<T>& v) {
    v.resize(std::size_t(count()));
    for (T& x : v) raw(x);
  }
  template <typename T>
  void textMap(std::map<std::string, T>& m) {
    for (uint64_t i = count(); i > 0; --i) {
      std::string k = text();
      raw(m[k]);
    }
  }
  bool done() const { return pos_ == bytes_.size(); }
  // Throws unless every byte was read.
  void finish() const {
    if (!done()) throw std::runtime_error(what_ + " is longer than its fields");
  }

 private:
  void take(void* p, std::size_t n) {
    if (n > bytes_.size() - pos_) throw std::runtime_error(what_ + " is cut short");
    std::memcpy(p, bytes_.data() + pos_, n);
    pos_ += n;
  }
  const std::vector<unsigned char>& bytes_;
  std::string what_;
  std::size_t pos_ = 0;
};

}  // namespace peat::util
