// SPDX-License-Identifier: MIT
// SessionReader: opens a session (probed first, see probe.h), lists its runs and reads its tensors,
// tables, checkpoints, reports, SAVE results and verdicts. verify() is in session_verify.cpp.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/store/packed_records.h"
#include "core/store/probe.h"
#include "core/store/session.h"
#include "core/store/session_common.h"
#include "core/util/text.h"

namespace peat::store {

using detail::damaged;
using detail::Lock;
using detail::readRecord;
using detail::readWholeTensor;

namespace {

std::string optionalString(const h5::Group& g, const char* name) {
  return g.hasAttribute(name) ? g.stringAttribute(name) : std::string();
}

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A child of a run's reports/ that packs several (packed_records.h): named "<first id>.pack", kind
// label packed_records. Its ids, from that label alone.
std::optional<std::vector<std::string>> packIds(const h5::Group& reports, const std::string& child) {
  if (!endsWith(child, kPackSuffix) || !reports.hasGroup(child)) return std::nullopt;
  const h5::Group g = reports.openGroup(child);
  if (optionalString(g, "kind") != kPackedRecordsKind) return std::nullopt;
  return packedIds(optionalString(g, "ids"));
}

// The report ids under reports/: a record of its own by its name, a pack by the ids it holds.
std::vector<std::string> reportIds(const h5::Group& reports) {
  std::vector<std::string> out;
  for (const std::string& child : reports.children()) {
    if (std::optional<std::vector<std::string>> ids = packIds(reports, child))
      out.insert(out.end(), ids->begin(), ids->end());
    else
      out.push_back(child);
  }
  return out;
}

Provenance readProvenance(const h5::Group& p) {
  Provenance v;
  v.seed = p.hasAttribute("seed") ? p.intAttribute("seed") : 0;
  for (const auto& [name, value] : detail::provenanceText(v)) *value = optionalString(p, name);
  return v;
}

// One call group of iteration `it`; `path` is its place inside the run.
CallInfo readCall(const h5::Group& cg, const std::string& path, const IterationInfo& it, bool withTensors) {
  CallInfo call;
  call.path = path;
  call.id.layer = optionalString(cg, "layer");
  call.id.op = optionalString(cg, "op");
  call.id.phase = optionalString(cg, "phase") == "backward" ? Phase::Backward : Phase::Forward;
  call.id.iteration = it.iteration;
  call.id.callIndex = cg.intAttribute("call_index");
  for (const std::string& attr : cg.attributeNames())
    if (attr.rfind("param.", 0) == 0)
      call.params[attr.substr(6)] = cg.intAttribute(attr);
    else if (attr.rfind("label.", 0) == 0)
      call.labels[attr.substr(6)] = cg.stringAttribute(attr);
  if (withTensors)
    for (const std::string& tensorName : cg.children()) {
      h5::Dataset ds = cg.openDataset(tensorName);
      ds.checkedElementCount();  // callers allocate for this shape before they read
      call.tensors.push_back({tensorName, h5::typeName(ds.storedType()), ds.shape()});
    }
  return call;
}

// Iteration group `ig` (named `itName` in its run) with its calls.
IterationInfo readIteration(const h5::Group& ig, const std::string& itName, bool withTensors) {
  IterationInfo it;
  it.iteration = ig.intAttribute("iteration");
  it.complete = ig.hasAttribute("complete") && ig.intAttribute("complete") == 1;
  if (ig.hasGroup("calls")) {
    h5::Group calls = ig.openGroup("calls");
    for (const std::string& callName : calls.children()) {
      h5::Group cg = calls.openGroup(callName);
      it.calls.push_back(readCall(cg, "iterations/" + itName + "/calls/" + callName, it, withTensors));
    }
  }
  return it;
}

// Hands each iteration of run group `rg` to `sink` in order (with its calls, their tensor lists
// too with `withTensors`); `status` is the run's. Only a run whose writer died may hold an
// iteration that cannot be opened (the one in flight): it is handed on as an incomplete one
// without calls, and the complete ones are counted against the run's own count.
void walkIterations(const h5::Group& rg, const std::string& status, bool withTensors,
                    const std::function<void(IterationInfo&&)>& sink) {
  h5::Group its = rg.openGroup("iterations");
  const bool writerDied = status == "running";
  int64_t unreadable = 0, complete = 0;
  for (const std::string& itName : its.children()) {
    std::optional<h5::Group> maybe;
    try {
      maybe.emplace(its.openGroup(itName));
    } catch (const h5::Error&) {
      // A writer killed in the middle of a flush can leave the group of the iteration in
      // flight pointing past the end of the file.
      if (!writerDied) throw;
      ++unreadable;
      IterationInfo lost;
      lost.iteration = std::strtoll(itName.c_str(), nullptr, 10);
      sink(std::move(lost));
      continue;
    }
    IterationInfo it = readIteration(*maybe, itName, withTensors);
    complete += it.complete;
    sink(std::move(it));
  }
  if (unreadable && rg.hasAttribute("iterations_complete") && complete < rg.intAttribute("iterations_complete"))
    throw h5::Error("H5Gopen2", rg.path() + "/iterations", "a complete iteration cannot be read");
}

// Fills run.iterations from the run group `rg`; run.status must already be read.
void readIterations(const h5::Group& rg, RunInfo& run, bool withTensors) {
  walkIterations(rg, run.status, withTensors, [&run](IterationInfo&& it) { run.iterations.push_back(std::move(it)); });
}

// Whether a live process writes PATH: HDF5 (our journal driver's jLock) holds an exclusive flock()
// on a file open for writing, so a shared one cannot be had while it lives.
bool writerHoldsLock(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return held;
}

// What of a run's calls readRun reads: none (the run's header only), their ids, or their tensors too.
enum class Calls { None, Ids, WithTensors };

RunInfo readRun(const h5::Group& runs, const std::string& runName, Calls calls) {
  h5::Group rg = runs.openGroup(runName);
  RunInfo run;
  run.name = runName;
  run.spec = {runName, optionalString(rg, "kind"), optionalString(rg, "kernel"), optionalString(rg, "description")};
  run.status = optionalString(rg, "status");
  run.started = optionalString(rg, "started");
  run.finished = optionalString(rg, "finished");
  if (calls != Calls::None && rg.hasGroup("iterations")) readIterations(rg, run, calls == Calls::WithTensors);
  if (rg.hasGroup("checkpoints")) {
    h5::Group cps = rg.openGroup("checkpoints");
    for (const std::string& name : cps.children()) {
      try {
        h5::Group cp = cps.openGroup(name);
        if (cp.hasAttribute("complete") && cp.intAttribute("complete") == 1)
          run.checkpoints.push_back(cp.intAttribute("iteration"));
      } catch (const h5::Error&) {
        if (run.status != "running") throw;  // the checkpoint in flight when its writer died
      }
    }
  }
  if (rg.hasGroup("reports")) run.reports = reportIds(rg.openGroup("reports"));
  if (rg.hasGroup("tables")) run.tables = rg.openGroup("tables").children();
  for (const std::string& attr : rg.attributeNames())
    if (rg.attributeIsText(attr)) run.attributes[attr] = rg.stringAttribute(attr);
  if (rg.has("verdicts")) run.verdictCount = int64_t(rg.openDataset("verdicts").elementCount());
  return run;
}

// `callPath` is relative to the run ("iterations/000000/calls/000003"), opened one group at a time.
h5::Group openCall(const h5::File& file, const std::string& run, const std::string& callPath) {
  h5::Group g = file.root().openGroup("runs").openGroup(run);
  std::string rest = callPath;
  for (std::size_t pos; !rest.empty();) {
    pos = rest.find('/');
    g = g.openGroup(rest.substr(0, pos));
    rest = pos == std::string::npos ? "" : rest.substr(pos + 1);
  }
  return g;
}

h5::Dataset openCallTensor(const h5::File& file, const std::string& run, const std::string& callPath,
                           const std::string& name) {
  h5::Group g = openCall(file, run, callPath);
  if (!g.has(name)) throw SessionError("no tensor '" + name + "' in " + run + "/" + callPath);
  return g.openDataset(name);
}

}  // namespace

SessionReader::SessionReader(const std::string& path) : SessionReader((probeSession(path), path), InsideProbe{}) {}

SessionReader::SessionReader(const std::string& path, InsideProbe) : d(std::make_unique<Impl>()) {
  Lock lock;
  h5::silenceLibraryDiagnostics();
  d->path = path;
  checkSessionPath(path);
  try {
    d->file.emplace(lock, path, h5::File::Mode::ReadOnly);
  } catch (const h5::Error& e) {
    if (e.detail().find("unable to lock file") != std::string::npos)
      throw SessionError("cannot open '" + path +
                         "': another process has it open for writing (a run in progress?); try again when it ends");
    throw SessionError("cannot open '" + path + "': the HDF5 file is truncated or damaged (" +
                       (e.detail().empty() ? std::string("unreadable") : e.detail()) + ")");
  }
  try {
    h5::Group root = d->file->root();
    if (!root.hasAttribute("format") || root.stringAttribute("format") != kFormatTag)
      throw SessionError("'" + path + "' is an HDF5 file but not a PEAT session (no format=\"" + kFormatTag +
                         "\" attribute)");
    const int64_t version = root.hasAttribute("schema_version") ? root.intAttribute("schema_version") : 0;
    if (version > kSchemaVersion)
      throw SessionError("'" + path + "' uses session schema version " + std::to_string(version) +
                         ", newer than the version " + std::to_string(kSchemaVersion) +
                         " this peat reads; upgrade PEAT Workbench");
    if (version < 1) throw SessionError("'" + path + "' has no valid schema_version attribute");
  } catch (const h5::Error& e) {
    damaged(path, e);
  }
}

SessionReader::~SessionReader() = default;

SessionSummary SessionReader::summary() const { return readSummary(int(Calls::WithTensors)); }
SessionSummary SessionReader::summaryWithoutTensors() const { return readSummary(int(Calls::Ids)); }
SessionSummary SessionReader::summaryWithoutCalls() const { return readSummary(int(Calls::None)); }

RunInfo SessionReader::run(const std::string& name) const {
  Lock lock;
  try {
    h5::Group root = d->file->root();
    const std::optional<h5::Group> runs = root.hasGroup("runs") ? std::optional<h5::Group>(root.openGroup("runs")) : std::nullopt;
    if (!runs || !runs->hasGroup(name))
      throw SessionError("'" + d->path + "' has no run '" + util::printable(name) + "'");
    RunInfo run = readRun(*runs, name, Calls::WithTensors);
    if (run.status == "running" && !writerHoldsLock(d->path)) run.status = "interrupted";  // as readSummary says
    return run;
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
}

SessionSummary SessionReader::readSummary(int calls) const {
  Lock lock;
  SessionSummary s;
  s.path = d->path;
  try {
    h5::Group root = d->file->root();
    s.schemaVersion = root.intAttribute("schema_version");
    s.created = optionalString(root, "created");
    if (root.hasGroup("provenance")) s.provenance = readProvenance(root.openGroup("provenance"));
    if (root.hasGroup("runs")) {
      h5::Group runs = root.openGroup("runs");
      for (const std::string& runName : runs.children()) s.runs.push_back(readRun(runs, runName, Calls(calls)));
    }
    if (root.hasGroup("save")) {
      h5::Group save = root.openGroup("save");
      s.saveResults = save.children();
      for (const std::string& id : s.saveResults) {
        if (id.find(".packed-layers") == std::string::npos || !save.hasGroup(id)) continue;  // only these are read
        const h5::Group g = save.openGroup(id);
        if (!g.hasAttribute("kind") || !g.attributeIsText("kind") || g.stringAttribute("kind") != "save_layers" ||
            !g.hasAttribute("nodes") || !g.attributeIsText("nodes"))
          continue;
        s.packedSaveLayers[id] = util::splitText(g.stringAttribute("nodes"), '\n');
      }
    }
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
  // A run still "running" whose writer is gone (killed, or stopped by a full disk before it could
  // mark the run failed) is shown as interrupted: no live process holds the file's write lock.
  const bool anyRunning = std::any_of(s.runs.begin(), s.runs.end(), [](const RunInfo& r) { return r.status == "running"; });
  if (anyRunning && !writerHoldsLock(d->path))
    for (RunInfo& r : s.runs)
      if (r.status == "running") r.status = "interrupted";
  return s;
}

namespace {
// The group of run `run`; throws SessionError when there is none.
h5::Group runGroup(const h5::File& file, const std::string& path, const std::string& run) {
  h5::Group root = file.root();
  if (!root.hasGroup("runs") || !root.openGroup("runs").hasGroup(run))
    throw SessionError("'" + path + "' has no run '" + util::printable(run) + "'");
  return root.openGroup("runs").openGroup(run);
}

// The group of run `run`, holding iterations; throws SessionError otherwise.
h5::Group runWithIterations(const h5::File& file, const std::string& path, const std::string& run) {
  h5::Group rg = runGroup(file, path, run);
  if (!rg.hasGroup("iterations")) throw SessionError("run '" + util::printable(run) + "' of '" + path + "' has no iterations");
  return rg;
}
}  // namespace

std::vector<SessionReader::IterationEntry> SessionReader::iterationIndex(const std::string& run) const {
  Lock lock;
  std::vector<IterationEntry> out;
  try {
    const h5::Group rg = runGroup(*d->file, d->path, run);
    if (!rg.hasGroup("iterations")) return out;  // a run of no calls (a SAVE campaign, a sweep's summary)
    const h5::Group its = rg.openGroup("iterations");
    // as readIterations: only a run whose writer died may hold an iteration that cannot be opened
    // (the one in flight), left out here
    const bool writerDied = optionalString(rg, "status") == "running";
    for (const std::string& name : its.children()) {
      std::optional<h5::Group> ig;
      try {
        ig.emplace(its.openGroup(name));
      } catch (const h5::Error&) {
        if (!writerDied) throw;
        continue;
      }
      out.push_back({name, ig->hasGroup("calls") ? int64_t(ig->openGroup("calls").children().size()) : 0,
                     ig->hasAttribute("complete") && ig->intAttribute("complete") == 1});
    }
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
  return out;
}

IterationInfo SessionReader::iteration(const std::string& run, const std::string& name, bool tensors) const {
  Lock lock;
  try {
    const h5::Group its = runWithIterations(*d->file, d->path, run).openGroup("iterations");
    if (!its.hasGroup(name))
      throw SessionError("run '" + util::printable(run) + "' of '" + d->path + "' has no iteration '" + util::printable(name) + "'");
    return readIteration(its.openGroup(name), name, tensors);
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
}

void SessionReader::forEachIteration(const std::string& run, bool tensors,
                                     const std::function<void(const IterationInfo&)>& each) const {
  Lock lock;
  try {
    const h5::Group rg = runGroup(*d->file, d->path, run);
    if (!rg.hasGroup("iterations")) return;
    walkIterations(rg, optionalString(rg, "status"), tensors, [&each](IterationInfo&& it) { each(it); });
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
}

std::vector<TensorInfo> SessionReader::callTensors(const std::string& run, const std::string& callPath) const {
  Lock lock;
  std::vector<TensorInfo> out;
  try {
    h5::Group cg = openCall(*d->file, run, callPath);
    for (const std::string& name : cg.children()) {
      h5::Dataset ds = cg.openDataset(name);
      ds.checkedElementCount();  // callers allocate for this shape before they read
      out.push_back({name, h5::typeName(ds.storedType()), ds.shape()});
    }
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
  return out;
}

void SessionReader::readTensorInto(const std::string& run, const std::string& callPath, const std::string& name,
                                   DType as, void* out, uint64_t elements) const {
  Lock lock;
  try {
    h5::Dataset ds = openCallTensor(*d->file, run, callPath, name);
    if (ds.checkedElementCount() != elements)
      throw SessionError("tensor " + run + "/" + callPath + "/" + name + " holds " + std::to_string(ds.elementCount()) +
                         " elements, not " + std::to_string(elements));
    ds.read(as, out);
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
}

Tensor SessionReader::readTensor(const std::string& run, const std::string& callPath, const std::string& name) const {
  Lock lock;
  try {
    return readWholeTensor(openCallTensor(*d->file, run, callPath, name));
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
}

std::vector<Verdict> SessionReader::verdicts(const std::string& run) const {
  Lock lock;
  try {
    h5::Group rg = d->file->root().openGroup("runs").openGroup(run);
    std::vector<Verdict> out;
    if (!rg.has("verdicts")) return out;
    const std::vector<h5::Column> cols = rg.readTable("verdicts");
    auto column = [&](const std::vector<h5::Column>& table, const char* name, bool text) -> const h5::Column& {
      const h5::Column* c = h5::findColumn(table, name);
      if (!c || c->isText != text) throw SessionError("verdict table of run '" + run + "' lacks column '" + name + "'");
      return *c;
    };
    const h5::Column &call = column(cols, "call", true), &model = column(cols, "model", true),
                     &conf = column(cols, "confidence", false), &evidence = column(cols, "evidence", true);
    std::map<std::string, std::size_t> byCall;
    for (std::size_t i = 0; i < call.size(); ++i) {
      byCall[call.text.at(i)] = out.size();
      out.push_back({call.text.at(i), model.text.at(i), conf.numbers.at(i), evidence.text.at(i), {}});
    }
    if (!rg.has("findings")) return out;  // written before findings were stored
    const std::vector<h5::Column> f = rg.readTable("findings");
    const h5::Column &fCall = column(f, "call", true), &fRank = column(f, "rank", false),
                     &fModel = column(f, "model", true), &fConf = column(f, "confidence", false),
                     &fField = column(f, "field", true), &fNumber = column(f, "number", false),
                     &fText = column(f, "text", true);
    for (std::size_t i = 0; i < fCall.size(); ++i) {
      const auto it = byCall.find(fCall.text.at(i));
      const double rank = fRank.numbers.at(i);
      if (it == byCall.end() || !(rank >= 0 && rank < 4096) || rank != std::floor(rank))
        throw SessionError("findings of run '" + run + "' name an unknown call or rank at row " + std::to_string(i));
      std::vector<Finding>& list = out[it->second].findings;
      if (list.size() <= std::size_t(rank)) list.resize(std::size_t(rank) + 1);
      Finding& finding = list[std::size_t(rank)];
      finding.model = fModel.text.at(i);
      finding.confidence = fConf.numbers.at(i);
      const std::string& field = fField.text.at(i);
      if (field.empty()) continue;
      if (!fText.text.at(i).empty()) finding.labels[field] = fText.text.at(i);
      else finding.numbers[field] = fNumber.numbers.at(i);
    }
    return out;
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
}

std::vector<h5::Column> SessionReader::table(const std::string& run, const std::string& name) const {
  Lock lock;
  try {
    h5::Group rg = d->file->root().openGroup("runs").openGroup(run);
    if (!rg.hasGroup("tables") || !rg.openGroup("tables").has(name))
      throw SessionError("run '" + run + "' has no table '" + name + "'");
    return rg.openGroup("tables").readTable(name);
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
}

SessionReader::Checkpoint SessionReader::checkpoint(const std::string& run, int64_t iteration) const {
  Lock lock;
  try {
    h5::Group runs = d->file->root().openGroup("runs");
    if (!runs.hasGroup(run)) throw SessionError("no run '" + run + "' in " + d->path);
    h5::Group cps = runs.openGroup(run).openGroup("checkpoints");
    if (!cps.hasGroup(indexName(iteration)))
      throw SessionError("run '" + run + "' has no checkpoint at iteration " + std::to_string(iteration));
    h5::Group cp = cps.openGroup(indexName(iteration));
    Checkpoint out;
    out.parameters = readRecord(cp.openGroup("parameters")).arrays;
    out.optimizer = readRecord(cp.openGroup("optimizer")).arrays;
    return out;
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
}

StoredRecord SessionReader::report(const std::string& run, const std::string& id) const {
  Lock lock;
  try {
    const h5::Group reports = d->file->root().openGroup("runs").openGroup(run).openGroup("reports");
    if (reports.hasGroup(id) && !endsWith(id, kPackSuffix)) return readRecord(reports.openGroup(id));
    // a row of a pack: packs are named after their first id and ids sort in call order, so the
    // last pack named at or before `id` holds it; the others are asked only when that one does not
    const std::vector<std::string> children = reports.children();
    std::vector<std::string> packs;
    for (const std::string& child : children)
      if (endsWith(child, kPackSuffix)) packs.push_back(child);
    const auto after = std::upper_bound(packs.begin(), packs.end(), id + kPackSuffix);
    if (after != packs.begin()) std::rotate(packs.begin(), std::prev(after), packs.end());
    for (const std::string& pack : packs) {
      const std::optional<std::vector<std::string>> ids = packIds(reports, pack);
      if (!ids || std::find(ids->begin(), ids->end(), id) == ids->end()) continue;
      for (auto& [rowId, record] : unpackRecords(readRecord(reports.openGroup(pack)), "'" + run + "/" + pack + "'"))
        if (rowId == id) return std::move(record);
    }
    throw SessionError("run '" + run + "' of " + d->path + " has no report '" + id + "'");
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
}

std::vector<std::pair<std::string, StoredRecord>> SessionReader::reports(const std::string& run) const {
  Lock lock;
  try {
    std::vector<std::pair<std::string, StoredRecord>> out;
    const h5::Group rg = d->file->root().openGroup("runs").openGroup(run);
    if (!rg.hasGroup("reports")) return out;
    const h5::Group reports = rg.openGroup("reports");
    for (const std::string& child : reports.children()) {
      StoredRecord record = readRecord(reports.openGroup(child));
      if (!packIds(reports, child)) {
        out.emplace_back(child, std::move(record));
        continue;
      }
      for (auto& row : unpackRecords(record, "'" + run + "/" + child + "'")) out.push_back(std::move(row));
    }
    return out;
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
}

StoredRecord SessionReader::saveResult(const std::string& id) const {
  Lock lock;
  try {
    return readRecord(d->file->root().openGroup("save").openGroup(id));
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
}

}  // namespace peat::store
