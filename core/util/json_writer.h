// SPDX-License-Identifier: MIT
#pragma once
// A small streaming JSON writer for machine-readable CLI output (`--json`).
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace peat {

class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& out) : out_(out) {}
  JsonWriter& beginObject();
  JsonWriter& endObject();
  JsonWriter& beginArray();
  JsonWriter& endArray();
  JsonWriter& key(const std::string& k);
  JsonWriter& value(const std::string& v);
  JsonWriter& value(const char* v) { return value(std::string(v)); }
  JsonWriter& value(int64_t v);
  JsonWriter& value(uint64_t v);
  JsonWriter& value(int v) { return value(int64_t(v)); }
  JsonWriter& value(double v);  // non-finite values become null: JSON has no NaN
  JsonWriter& value(bool v);
  template <typename T>
  JsonWriter& field(const std::string& k, const T& v) {
    key(k);
    return value(v);
  }

  static std::string escape(const std::string& s);

 private:
  void separate();
  JsonWriter& open(char bracket);   // '{' or '[' after a separator; a new container
  JsonWriter& close(char bracket);  // '}' or ']'; the container ends
  std::ostream& out_;
  std::vector<bool> first_;  // per open container: nothing written yet
  bool afterKey_ = false;
};

}  // namespace peat
