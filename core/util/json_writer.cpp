// SPDX-License-Identifier: MIT
#include "core/util/json_writer.h"

#include <cmath>
#include <cstdio>

#include "core/util/text.h"

namespace peat {

std::string JsonWriter::escape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = util::utf8Length(s, i);
    if (n == 0) {  // not UTF-8 (a string from someone else's file): the replacement character, so the JSON stays valid
      out += "\\ufffd";
      continue;
    }
    if (n > 1) {  // a C1 control (U+0080-U+009F) escaped as the C0 ones, anything else as it is
      const bool c1 = c == 0xc2 && static_cast<unsigned char>(s[i + 1]) <= 0x9f;
      if (c1) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(s[i + 1]));
        out += buf;
      } else {
        out.append(s, i, n);
      }
      i += n - 1;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
  return out;
}

void JsonWriter::separate() {
  if (afterKey_) {
    afterKey_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ << ',';
    first_.back() = false;
  }
}

JsonWriter& JsonWriter::open(char bracket) {
  separate();
  out_ << bracket;
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::close(char bracket) {
  out_ << bracket;
  first_.pop_back();
  return *this;
}
JsonWriter& JsonWriter::beginObject() { return open('{'); }
JsonWriter& JsonWriter::endObject() { return close('}'); }
JsonWriter& JsonWriter::beginArray() { return open('['); }
JsonWriter& JsonWriter::endArray() { return close(']'); }
JsonWriter& JsonWriter::key(const std::string& k) {
  separate();
  out_ << escape(k) << ':';
  afterKey_ = true;
  return *this;
}
JsonWriter& JsonWriter::value(const std::string& v) {
  separate();
  out_ << escape(v);
  return *this;
}
JsonWriter& JsonWriter::value(int64_t v) {
  separate();
  out_ << v;
  return *this;
}
JsonWriter& JsonWriter::value(uint64_t v) {
  separate();
  out_ << v;
  return *this;
}
JsonWriter& JsonWriter::value(double v) {
  separate();
  if (!std::isfinite(v)) {
    out_ << "null";
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    out_ << buf;
  }
  return *this;
}
JsonWriter& JsonWriter::value(bool v) {
  separate();
  out_ << (v ? "true" : "false");
  return *this;
}

}  // namespace peat
