// SPDX-License-Identifier: MIT
#include "core/util/events.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "core/util/json_writer.h"

namespace peat::events {

std::string toJsonLine(const Event& e) {
  std::ostringstream out;
  JsonWriter j(out);
  j.beginObject().field("v", kSchemaVersion).field("event", e.type);
  for (const auto& [key, value] : e.fields) {
    j.key(key);
    std::visit([&](const auto& v) { j.value(v); }, value);
  }
  j.endObject();
  return out.str();
}

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("PEAT_EVENTS");
    return v && std::strcmp(v, "jsonl") == 0;
  }();
  return on;
}

void send(const Event& e) {
  if (!enabled()) return;
  static std::mutex mutex;
  const std::string line = toJsonLine(e) + "\n";
  std::lock_guard<std::mutex> lock(mutex);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

void error(const std::string& message, int exitCode) {
  send(Event("error").add("message", message).add("exit_code", exitCode)
           .add("code", std::string(exitCode == 2 ? "usage" : "failed")));
}

void stored(const std::string& session, const std::string& kind, const std::string& name) {
  send(Event("stored").add("session", session).add("kind", kind).add("name", name));
}

bool Progress::operator()(int64_t done, int64_t total, const std::string& status, bool always) {
  if (!enabled()) return false;
  const auto now = std::chrono::steady_clock::now();
  if (!first_ && !always && done < total && now - last_ < std::chrono::milliseconds(100)) return false;
  first_ = false;
  last_ = now;
  Event e("progress");
  e.add("done", done).add("total", total).add("stage", stage_);
  if (!status.empty()) e.add("status", status);
  send(e);
  return true;
}

}  // namespace peat::events
