// SPDX-License-Identifier: MIT
#pragma once
// The identity of a campaign: the settings its results depend on, as canonical text stored on every
// shard ("key=value;key=value", in the order added), so that a merge can check that shards belong
// together and say, field by field, why one does not. One builder for every sharded kind
// (check-bits, SAVE campaigns, playback, runtime-FI sweeps).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace peat::util {

class CampaignKey {
 public:
  CampaignKey& add(const std::string& key, const std::string& value);
  CampaignKey& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  CampaignKey& add(const std::string& key, int64_t value) { return add(key, std::to_string(value)); }
  CampaignKey& add(const std::string& key, int value) { return add(key, int64_t(value)); }
  CampaignKey& add(const std::string& key, uint64_t value) { return add(key, std::to_string(value)); }
  CampaignKey& add(const std::string& key, bool value) { return add(key, std::string(value ? "1" : "0")); }
  // Shortest text that reads back to the same double (%.17g): equal settings give equal text.
  CampaignKey& add(const std::string& key, double value);

  // "k1=v1;k2=v2"; a ';' inside a value is written as "%3B" (and '%' as "%25") so that the text
  // splits cleanly and distinct values stay distinct.
  std::string text() const;
  // Eight hex digits of the text's CRC-32: short enough for names and messages.
  std::string id() const;
  // Reads text() back (items without '=' are ignored).
  static CampaignKey parse(const std::string& text);
  // The fields of `other` that differ from this key's, as "k=other vs k=this, ..." ("(none)" for
  // a field one side lacks); empty when the keys are equal.
  std::string differenceFrom(const CampaignKey& other) const;

  const std::vector<std::pair<std::string, std::string>>& fields() const { return fields_; }
  // The value of `key`, or "" when there is none.
  std::string value(const std::string& key) const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

}  // namespace peat::util
