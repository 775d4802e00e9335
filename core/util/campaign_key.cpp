// SPDX-License-Identifier: MIT
#include "core/util/campaign_key.h"

#include <zlib.h>

#include <cstdio>
#include <stdexcept>

#include "core/util/text.h"

namespace peat::util {

CampaignKey& CampaignKey::add(const std::string& key, const std::string& value) {
  if (key.empty() || key.find_first_of("=;") != std::string::npos)
    throw std::invalid_argument("campaign key '" + key + "' is empty or holds '=' or ';'");
  std::string v;
  for (char c : value) v += c == ';' ? std::string("%3B") : c == '%' ? std::string("%25") : std::string(1, c);
  fields_.emplace_back(key, v);
  return *this;
}

CampaignKey& CampaignKey::add(const std::string& key, double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return add(key, std::string(text));
}

std::string CampaignKey::text() const {
  std::string out;
  for (const auto& [k, v] : fields_) out += (out.empty() ? "" : ";") + k + "=" + v;
  return out;
}

std::string CampaignKey::id() const {
  const std::string t = text();
  const uLong crc = crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(t.data()), z_size_t(t.size()));
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08lx", static_cast<unsigned long>(crc & 0xffffffffUL));
  return hex;
}

CampaignKey CampaignKey::parse(const std::string& text) {
  CampaignKey k;
  for (const std::string& item : splitText(text, ';')) {
    const auto eq = item.find('=');
    if (eq != std::string::npos && eq > 0) k.fields_.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  return k;
}

std::string CampaignKey::value(const std::string& key) const {
  for (const auto& [k, v] : fields_)
    if (k == key) return v;
  return "";
}

std::string CampaignKey::differenceFrom(const CampaignKey& other) const {
  std::string out;
  auto find = [](const CampaignKey& in, const std::string& key) -> const std::string* {
    for (const auto& [k, v] : in.fields_)
      if (k == key) return &v;
    return nullptr;
  };
  auto note = [&](const std::string& key, const std::string* theirs, const std::string* ours) {
    out += (out.empty() ? "" : ", ") + (theirs ? key + "=" + *theirs : key + " (none)") + " vs " +
           (ours ? key + "=" + *ours : "(none)");
  };
  for (const auto& [k, v] : other.fields_) {
    const std::string* ours = find(*this, k);
    if (!ours || *ours != v) note(k, &v, ours);
  }
  for (const auto& [k, v] : fields_)
    if (!find(other, k)) note(k, nullptr, &v);
  return out;
}

}  // namespace peat::util
