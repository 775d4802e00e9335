// SPDX-License-Identifier: MIT
#include "core/store/run_records.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <set>
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

// What every merge of shards checks first: there are files, and a session to merge into (else
// `giveSession`, the error that says which).
void requireMergeArguments(const std::vector<std::string>& files, const std::string& output, const char* giveSession) {
  if (files.empty()) throw SessionError("no shard files to merge");
  if (output.empty()) throw SessionError(giveSession);
}

}  // namespace

TableBuilder callErrorTable() {
  TableBuilder t({"layer", "op", "phase", "variant", "outcome"}, {"iteration", "call_index"});
  t.addNumberColumns(analyzer::errorSummaryColumns());
  return t;
}

void addCallError(TableBuilder& t, const CallId& id, const std::string& variant, const analyzer::ErrorSummary& e) {
  std::vector<double> numbers{double(id.iteration), double(id.callIndex)};
  for (double x : analyzer::errorSummaryValues(e)) numbers.push_back(x);
  t.row({id.layer, id.op, phaseName(id.phase), variant, "ok"}, numbers);
}

void addFailedCall(TableBuilder& t, const CallId& id, const std::string& variant, const std::string& outcome) {
  std::vector<double> numbers{double(id.iteration), double(id.callIndex)};
  numbers.resize(2 + analyzer::errorSummaryColumns().size(), std::nan(""));  // no output: no error numbers
  t.row({id.layer, id.op, phaseName(id.phase), variant, outcome}, numbers);
}

TableBuilder injectionTable() { return TableBuilder({"call", "target"}, {"index", "bit", "old_value", "new_value"}); }

void addInjection(TableBuilder& t, const InjectionRow& r) {
  t.row({r.call, r.target}, {double(r.index), double(r.bit), r.oldValue, r.newValue});
}


bool holdsPlaybackShard(const std::string& file) {
  return !playbackShardRuns(SessionReader(file).summaryWithoutTensors()).empty();
}

PlaybackMergeSummary mergePlaybackShards(const std::vector<std::string>& files, const std::string& output) {
  requireMergeArguments(files, output, "a playback's shards merge into a session: give --session (the recorded one)");
  std::vector<Shard> shards;
  std::vector<ShardTag> tags;
  for (const std::string& f : files) {
    shards.push_back(readShard(f));
    tags.push_back({f, shards.back().index, shards.back().count, shards.back().attributes.at("campaign")});
  }
  const Shard& first = shards.front();
  std::map<int, const Shard*> byIndex;
  for (std::size_t i : checkShardSet(tags, "replays")) byIndex[shards[i].index] = &shards[i];

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

namespace {

struct StoredRun {
  RunInfo info;
  std::map<std::string, std::vector<h5::Column>> tables;
  std::string file;
};

std::vector<const RunInfo*> sweepRuns(const SessionSummary& s) {
  std::vector<const RunInfo*> out;
  for (const RunInfo& r : s.runs)
    if ((r.spec.kind == "runtime_fi" || r.spec.kind == "runtime_fi_golden") && r.attributes.count("shard") &&
        r.attributes.at("shard").rfind("merged", 0) != 0)
      out.push_back(&r);
  return out;
}

bool sameTables(const StoredRun& a, const StoredRun& b) {
  if (a.tables.size() != b.tables.size()) return false;
  for (const auto& [name, columns] : a.tables) {
    const auto other = b.tables.find(name);
    if (other == b.tables.end() || other->second.size() != columns.size()) return false;
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const h5::Column &x = columns[c], &y = other->second[c];
      if (x.name != y.name || x.text != y.text || x.numbers.size() != y.numbers.size()) return false;
      for (std::size_t i = 0; i < x.numbers.size(); ++i)  // NaN equals NaN here: the same bits were written
        if (!(x.numbers[i] == y.numbers[i] || (x.numbers[i] != x.numbers[i] && y.numbers[i] != y.numbers[i]))) return false;
    }
  }
  return true;
}

std::size_t listLength(const std::string& campaign, const std::string& key) {
  for (const std::string& kv : util::splitText(campaign, ';'))
    if (kv.rfind(key + "=", 0) == 0) return util::splitText(kv.substr(key.size() + 1), ',').size();
  return 0;
}

void copyRun(SessionWriter& w, const StoredRun& r, const std::string& shardText) {
  w.beginRun(r.info.spec);
  const char* own[] = {"shard", "kind", "kernel", "description", "status", "started", "finished", "iterations_complete"};
  for (const auto& [key, value] : r.info.attributes)
    if (std::find(std::begin(own), std::end(own), key) == std::end(own)) w.setRunAttribute(key, value);
  w.setRunAttribute("shard", shardText);
  w.setRunAttribute("merged_from", r.file);
  for (const auto& [name, columns] : r.tables) w.writeTable(name, columns);
  w.endRun(RunStatus::Complete);
}

}  // namespace

bool holdsRuntimeFiShard(const std::string& file) {
  return !sweepRuns(SessionReader(file).summaryWithoutTensors()).empty();
}

SweepMergeSummary mergeRuntimeFiShards(const std::vector<std::string>& files, const std::string& output) {
  requireMergeArguments(files, output, "a runtime-FI sweep's shards merge into a session: give --session");
  std::vector<ShardTag> tags;
  std::vector<std::vector<StoredRun>> runs(files.size());
  Provenance provenance;  // a new output session describes the campaign as the first shard does
  for (std::size_t f = 0; f < files.size(); ++f) {
    struct stat st {};
    if (::stat(files[f].c_str(), &st) != 0) throw SessionError(files[f] + ": no such file");
    const SessionReader reader(files[f]);
    const SessionSummary summary = reader.summaryWithoutTensors();
    const std::vector<const RunInfo*> found = sweepRuns(summary);
    if (found.empty()) throw SessionError(files[f] + ": holds no runtime-FI sweep shard");
    if (f == 0) {
      provenance = summary.provenance;
      provenance.date = provenance.hostname = provenance.toolVersion = provenance.gitCommit = "";  // this merge's own
      provenance.commandLine = "peat merge (runtime-FI sweep shards)";
    }
    ShardTag tag;
    tag.file = files[f];
    for (const RunInfo* r : found) {
      if (r->status != "complete")
        throw SessionError(files[f] + ": run '" + r->name + "' did not finish (status " + r->status + "); run the shard again");
      const auto parsed = util::parseShard(r->attributes.at("shard"));
      if (!parsed || !r->attributes.count("campaign"))
        throw SessionError(files[f] + ": run '" + r->name + "' has no valid shard or campaign");
      if (r != found.front() && (parsed->first != tag.index || parsed->second != tag.count || r->attributes.at("campaign") != tag.campaign))
        throw SessionError(files[f] + ": its runs belong to different shards or campaigns");
      std::tie(tag.index, tag.count) = *parsed;
      tag.campaign = r->attributes.at("campaign");
      StoredRun stored;
      stored.info = *r;
      stored.file = files[f];
      for (const std::string& t : r->tables) stored.tables[t] = reader.table(r->name, t);
      runs[f].push_back(std::move(stored));
    }
    tags.push_back(tag);
  }
  const std::vector<std::size_t> order = checkShardSet(tags, "belongs to");
  const std::string& campaign = tags.front().campaign;
  const std::size_t pointCount = listLength(campaign, "every") * listLength(campaign, "seeds");

  // Every point once, and each golden run the same wherever it was computed.
  std::map<int64_t, const StoredRun*> points;
  std::map<std::string, const StoredRun*> goldens;
  for (std::size_t f : order)
    for (const StoredRun& r : runs[f]) {
      if (r.info.spec.kind == "runtime_fi_golden") {
        auto [it, fresh] = goldens.emplace(r.info.name, &r);
        if (!fresh && !sameTables(*it->second, r))
          throw SessionError("golden run '" + r.info.name + "' differs between " + it->second->file + " and " + r.file +
                             ": training was not bit-identical (another build, or thread count?)");
        continue;
      }
      int64_t p = -1;
      try {
        p = std::stoll(r.info.attributes.count("sweep_point") ? r.info.attributes.at("sweep_point") : "-1");
      } catch (const std::exception&) {
      }
      if (p < 0 || std::size_t(p) >= pointCount || int64_t(p % tags.front().count) != tags[f].index)
        throw SessionError(r.file + ": run '" + r.info.name + "' is no point of this shard of the sweep");
      if (!points.emplace(p, &r).second) throw SessionError(r.file + ": sweep point " + std::to_string(p) + " appears twice");
    }
  for (std::size_t p = 0; p < pointCount; ++p) {
    if (!points.count(int64_t(p))) throw SessionError("sweep point " + std::to_string(p) + " is in no shard");
    const auto& attrs = points.at(int64_t(p))->info.attributes;
    if (!attrs.count("golden_run") || !goldens.count(attrs.at("golden_run")))
      throw SessionError(points.at(int64_t(p))->file + ": the golden run of sweep point " + std::to_string(p) + " is missing");
  }

  // Nothing is written if a name is taken.
  struct stat st {};
  const bool exists = ::stat(output.c_str(), &st) == 0;
  if (exists) {
    const SessionSummary out = SessionReader(output).summaryWithoutTensors();
    for (const RunInfo& r : out.runs)
      if (goldens.count(r.name) || std::any_of(points.begin(), points.end(), [&](const auto& p) { return p.second->info.name == r.name; }))
        throw SessionError(output + ": already has a run '" + r.name + "'; merge into another session");
  }
  SessionWriter w(output, provenance, exists ? WriteMode::Append : WriteMode::Create);
  const std::string merged = "merged " + std::to_string(tags.front().count);
  std::set<std::string> written;
  for (const auto& [p, run] : points) {
    const std::string& golden = run->info.attributes.at("golden_run");
    if (written.insert(golden).second) copyRun(w, *goldens.at(golden), merged);
    copyRun(w, *run, merged);
  }
  SweepMergeSummary out;
  out.shards = tags.front().count;
  out.points = int64_t(points.size());
  out.goldenRuns = int64_t(written.size());
  return out;
}

}  // namespace peat::store
