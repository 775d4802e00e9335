// SPDX-License-Identifier: MIT
#pragma once
// The machine-readable event stream of long commands (docs/events.md): with `peat --events jsonl`
// (or PEAT_EVENTS=jsonl), every long command writes one JSON object per line on stderr, flushed,
// beside its human output. Programs that drive `peat` (the workbench's run panel) read these and
// never the human text. Core code produces Event values; only the process's EventStream prints them.
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace peat::events {

// Version of the schema in docs/events.md. Adding an event type or a field to an event keeps the
// version (readers ignore what they do not know); renaming or removing one, or changing a field's
// meaning or type, raises it.
constexpr int kSchemaVersion = 1;

// One event: a type ("progress", "loss", "point", "stored", "error", ...) and flat fields.
struct Event {
  using Value = std::variant<double, int64_t, std::string, bool>;
  std::string type;
  std::vector<std::pair<std::string, Value>> fields;

  explicit Event(std::string t) : type(std::move(t)) {}
  Event& add(const std::string& key, double v) { return put(key, Value(v)); }
  Event& add(const std::string& key, int64_t v) { return put(key, Value(v)); }
  Event& add(const std::string& key, int v) { return put(key, Value(int64_t(v))); }
  Event& add(const std::string& key, uint64_t v) { return put(key, Value(int64_t(v))); }
  Event& add(const std::string& key, bool v) { return put(key, Value(v)); }
  Event& add(const std::string& key, const std::string& v) { return put(key, Value(v)); }
  Event& add(const std::string& key, const char* v) { return put(key, Value(std::string(v))); }

 private:
  Event& put(const std::string& key, Value v) {
    fields.emplace_back(key, std::move(v));
    return *this;
  }
};

// {"v":1,"event":"<type>",<fields...>} on one line, without the newline. Non-finite numbers
// become null, as in every JSON the CLI writes.
std::string toJsonLine(const Event& e);

// This process's stream: on when PEAT_EVENTS=jsonl (read once). Thread-safe; each event is one
// write of one line.
bool enabled();
void send(const Event& e);

// The usual events, for brevity at call sites.
void error(const std::string& message, int exitCode);  // also when the human line is printed
void stored(const std::string& session, const std::string& kind, const std::string& name);

// Progress of one long step, at most ten events a second, but always the first, the last and
// those marked `always` (a step that carries a result, such as a campaign point). Returns whether
// it wrote the event, so that a caller can send other throttled events (losses) along with it.
class Progress {
 public:
  explicit Progress(std::string stage) : stage_(std::move(stage)) {}
  bool operator()(int64_t done, int64_t total, const std::string& status = {}, bool always = false);

 private:
  std::string stage_;
  bool first_ = true;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace peat::events
