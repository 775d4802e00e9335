// SPDX-License-Identifier: MIT
#include "core/store/playback_merge.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <tuple>

#include "core/util/text.h"

namespace peat::store {

namespace {

struct Shard {
  std::string file, run;
  RunSpec spec;
  int index = 0, count = 1;
  std::map<std::string, std::string> attributes;
  std::vector<h5::Column> errors, injections;
};

const h5::Column& column(const std::vector<h5::Column>& table, const std::string& name, const std::string& where) {
  if (const h5::Column* c = h5::findColumn(table, name)) return *c;
  throw SessionError(where + ": the table has no column '" + name + "'");
}

// The recorded order of a call: (iteration, call index).
using Key = std::pair<int64_t, int64_t>;

Key injectionKey(const std::string& call) {  // "it 3 call 12 fc1 linear forward"
  long long it = -1, index = -1;
  if (std::sscanf(call.c_str(), "it %lld call %lld", &it, &index) != 2) return {-1, -1};
  return {it, index};
}

// Rows of same-shaped tables appended, then put in `order` (indices into the appended rows).
std::vector<h5::Column> concatenate(const std::vector<const std::vector<h5::Column>*>& parts, const std::string& where) {
  std::vector<h5::Column> out = *parts.front();
  for (h5::Column& c : out) c.text.clear(), c.numbers.clear();
  for (const auto* part : parts) {
    if (part->size() != out.size()) throw SessionError(where + ": the shards' tables have other columns");
    for (std::size_t c = 0; c < out.size(); ++c) {
      const h5::Column& from = (*part)[c];
      if (from.name != out[c].name || from.isText != out[c].isText)
        throw SessionError(where + ": the shards' tables have other columns");
      out[c].text.insert(out[c].text.end(), from.text.begin(), from.text.end());
      out[c].numbers.insert(out[c].numbers.end(), from.numbers.begin(), from.numbers.end());
    }
  }
  return out;
}

void reorder(std::vector<h5::Column>& table, const std::vector<std::size_t>& order) {
  for (h5::Column& c : table) {
    if (c.isText) {
      std::vector<std::string> t;
      for (std::size_t i : order) t.push_back(c.text[i]);
      c.text.swap(t);
    } else {
      std::vector<double> n;
      for (std::size_t i : order) n.push_back(c.numbers[i]);
      c.numbers.swap(n);
    }
  }
}

std::vector<const RunInfo*> playbackShardRuns(const SessionSummary& s) {
  std::vector<const RunInfo*> out;
  for (const RunInfo& r : s.runs)
    if (r.spec.kind == "playback" && r.attributes.count("shard") && r.attributes.at("shard").rfind("merged", 0) != 0)
      out.push_back(&r);
  return out;
}

Shard readShard(const std::string& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) throw SessionError(file + ": no such file");
  const SessionReader reader(file);
  const SessionSummary summary = reader.summaryWithoutTensors();
  const std::vector<const RunInfo*> runs = playbackShardRuns(summary);
  if (runs.empty()) throw SessionError(file + ": holds no playback shard");
  if (runs.size() > 1)
    throw SessionError(file + ": holds " + std::to_string(runs.size()) + " playback shards; give each shard its own session");
  const RunInfo& run = *runs.front();
  Shard s;
  s.file = file;
  s.run = run.name;
  s.spec = run.spec;
  s.attributes = run.attributes;
  const std::string& shard = run.attributes.at("shard");
  const auto parsed = util::parseShard(shard);
  if (!parsed) throw SessionError(file + ": run '" + run.name + "' has the shard '" + shard + "', which is not INDEX/COUNT");
  std::tie(s.index, s.count) = *parsed;
  if (run.status != "complete")
    throw SessionError(file + ": shard " + shard + " did not finish (status " + run.status + "); run it again");
  if (!run.attributes.count("campaign")) throw SessionError(file + ": run '" + run.name + "' names no campaign");
  s.errors = reader.table(run.name, "call_errors");
  if (std::find(run.tables.begin(), run.tables.end(), "injections") != run.tables.end())
    s.injections = reader.table(run.name, "injections");
  return s;
}

}  // namespace

bool holdsPlaybackShard(const std::string& file) {
  return !playbackShardRuns(SessionReader(file).summaryWithoutTensors()).empty();
}

PlaybackMergeSummary mergePlaybackShards(const std::vector<std::string>& files, const std::string& output) {
  if (files.empty()) throw SessionError("no shard files to merge");
  if (output.empty()) throw SessionError("a playback's shards merge into a session: give --session (the recorded one)");
  std::vector<Shard> shards;
  for (const std::string& f : files) shards.push_back(readShard(f));
  const Shard& first = shards.front();
  std::map<int, const Shard*> byIndex;
  for (const Shard& s : shards) {
    if (s.attributes.at("campaign") != first.attributes.at("campaign")) {
      std::map<std::string, std::string> a;
      for (const std::string& kv : util::splitText(first.attributes.at("campaign"), ';')) a[kv.substr(0, kv.find('='))] = kv;
      std::string what;
      for (const std::string& kv : util::splitText(s.attributes.at("campaign"), ';'))
        if (a[kv.substr(0, kv.find('='))] != kv) what += (what.empty() ? "" : ", ") + kv + " vs " + a[kv.substr(0, kv.find('='))];
      throw SessionError(s.file + ": replays another campaign than " + first.file + " (" + what + ")");
    }
    if (s.count != first.count)
      throw SessionError(s.file + ": is a shard of " + std::to_string(s.count) + ", " + first.file + " one of " +
                         std::to_string(first.count));
    auto [it, fresh] = byIndex.emplace(s.index, &s);
    if (!fresh)
      throw SessionError("shard " + std::to_string(s.index) + "/" + std::to_string(s.count) + " appears twice: " +
                         it->second->file + " and " + s.file);
  }
  for (int i = 0; i < first.count; ++i)
    if (!byIndex.count(i))
      throw SessionError("shard " + std::to_string(i) + "/" + std::to_string(first.count) +
                         " is missing (run it with --shard " + std::to_string(i) + "/" + std::to_string(first.count) + ")");

  // The rows in recorded call order, as one process writes them.
  std::vector<const std::vector<h5::Column>*> errorParts, injectionParts;
  for (int i = 0; i < first.count; ++i) {
    errorParts.push_back(&byIndex.at(i)->errors);
    if (!byIndex.at(i)->injections.empty()) injectionParts.push_back(&byIndex.at(i)->injections);
  }
  std::vector<h5::Column> errors = concatenate(errorParts, first.file);
  {
    const h5::Column& it = column(errors, "iteration", first.file);
    const h5::Column& call = column(errors, "call_index", first.file);
    std::vector<std::size_t> order(it.numbers.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return Key(int64_t(it.numbers[a]), int64_t(call.numbers[a])) < Key(int64_t(it.numbers[b]), int64_t(call.numbers[b]));
    });
    reorder(errors, order);
  }
  std::vector<h5::Column> injections;
  if (!injectionParts.empty()) {
    injections = concatenate(injectionParts, first.file);
    const h5::Column& call = column(injections, "call", first.file);
    std::vector<std::size_t> order(call.text.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return injectionKey(call.text[a]) < injectionKey(call.text[b]); });
    reorder(injections, order);
  }

  // Every check passed: write.
  struct stat st {};
  SessionWriter w(output, {}, ::stat(output.c_str(), &st) == 0 ? WriteMode::Append : WriteMode::Create);
  std::string name = first.run;
  for (int n = 2; w.hasRun(name); ++n) name = first.run + "-" + std::to_string(n);
  RunSpec spec = first.spec;
  spec.name = name;
  w.beginRun(spec);
  const char* own[] = {"shard", "kind", "kernel", "description", "status", "started", "finished", "command_line",
                       "iterations_complete"};
  for (const auto& [key, value] : first.attributes)
    if (std::find(std::begin(own), std::end(own), key) == std::end(own)) w.setRunAttribute(key, value);
  w.setRunAttribute("shard", "merged " + std::to_string(first.count));
  std::string from;
  for (int i = 0; i < first.count; ++i) from += (i ? "," : "") + byIndex.at(i)->file;
  w.setRunAttribute("merged_from", from);
  w.writeTable("call_errors", errors);
  if (!injections.empty()) w.writeTable("injections", injections);
  w.endRun(RunStatus::Complete);
  PlaybackMergeSummary out;
  out.run = name;
  out.shards = first.count;
  out.calls = int64_t(errors.front().size());
  out.injections = injections.empty() ? 0 : int64_t(injections.front().size());
  return out;
}

}  // namespace peat::store
