// SPDX-License-Identifier: MIT
#include "core/store/session.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "core/store/journal.h"
#include "core/store/probe.h"
#include "core/version.h"

namespace peat::store {

namespace {

// HDF5 is usually built without thread safety: every store entry point takes this lock.
std::recursive_mutex& hdf5Mutex() {
  static std::recursive_mutex m;
  return m;
}
std::atomic<void (*)()> accessObserver{nullptr};
struct Lock {
  explicit Lock(std::recursive_mutex& m) : guard((notifyAccess(), m)) {}
  static void notifyAccess() {
    if (void (*observer)() = accessObserver.load()) observer();
  }
  std::lock_guard<std::recursive_mutex> guard;
};

std::string utcNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

bool isSafeName(const std::string& name) {
  if (name.empty() || name.size() > 200 || name == "." || name == "..") return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

void requireSafeName(const std::string& what, const std::string& name) {
  if (!isSafeName(name))
    throw SessionError(what + " name '" + name + "' is not allowed: use letters, digits, '-', '_' and '.'");
}

void writeTensors(h5::Group& group, const std::vector<NamedTensor>& tensors, const h5::DatasetLayout& layout = {}) {
  for (const NamedTensor& t : tensors) {
    requireSafeName("tensor", t.name);
    if (!t.linkTo.empty())
      group.linkTo(t.name, t.linkTo);
    else
      group.createDataset(t.name, t.view.dtype, t.view.shape, t.view.data, layout);
  }
}

void writeRecord(h5::Group& g, const ResultRecord& record) {
  for (const auto& [key, value] : record.scalars) g.setAttribute(key, value);
  for (const auto& [key, value] : record.labels) g.setAttribute(key, value);
  writeTensors(g, record.arrays);
}

}  // namespace

void setSessionAccessObserver(void (*observer)()) { accessObserver.store(observer); }
void notifySessionAccess() { Lock::notifyAccess(); }

std::string indexName(int64_t index) {
  char text[32];
  std::snprintf(text, sizeof text, "%06lld", static_cast<long long>(index));
  return text;
}

const char* phaseName(Phase p) { return p == Phase::Forward ? "forward" : "backward"; }

const char* runStatusName(RunStatus s) {
  switch (s) {
    case RunStatus::Running: return "running";
    case RunStatus::Complete: return "complete";
    case RunStatus::Cancelled: return "cancelled";
    case RunStatus::Failed: return "failed";
  }
  return "?";
}

uint64_t TensorView::elementCount() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

uint64_t Tensor::elementCount() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

int64_t RunInfo::completeIterations() const {
  int64_t n = 0;
  for (const IterationInfo& it : iterations) n += it.complete ? 1 : 0;
  return n;
}

int64_t RunInfo::callCount() const {
  int64_t n = 0;
  for (const IterationInfo& it : iterations) n += int64_t(it.calls.size());
  return n;
}

// ============================================================================ writer

struct SessionWriter::Impl {
  uint64_t written = 0;  // the registration that lets this process read the file without a probe
  h5::File file;
  std::optional<h5::Group> run;
  std::optional<h5::Group> iteration;
  std::optional<h5::Group> calls;
  int64_t iterationIndex = -1;
  int64_t completeIterations = 0;
  h5::DatasetLayout layout;

  Impl(const std::string& path, WriteMode mode)
      : file(path, mode == WriteMode::Append      ? h5::File::Mode::ReadWrite
                   : mode == WriteMode::Overwrite ? h5::File::Mode::Truncate
                                                  : h5::File::Mode::CreateExclusive) {}

  ~Impl() { unregisterWrittenFile(written); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  h5::Group& requireRun(const char* what) {
    if (!run) throw SessionError(std::string(what) + " needs a run: call beginRun first");
    return *run;
  }
};

SessionWriter::SessionWriter(const std::string& path, Provenance p, WriteMode mode) {
  Lock lock(hdf5Mutex());
  h5::silenceLibraryDiagnostics();
  if (mode == WriteMode::Append) {
    // the same clear errors as peat info for a bad or too-new file, read in a helper process
    probeSession(path);
  }
  struct stat st {};
  if (mode == WriteMode::Create && ::stat(path.c_str(), &st) == 0)
    throw SessionError("'" + path + "' already exists; choose another name or allow overwriting");
  if (mode == WriteMode::Overwrite) {
    // HDF5 locks open files with flock(): a session another process has open is not replaced
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      const bool busy = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
      ::close(fd);
      if (busy) throw SessionError("cannot write '" + path + "': another process has it open");
    }
  }
  // A new session is made under a hidden name beside its place and appears there, with one atomic
  // link or rename, only once its header is flushed: a process killed at any moment leaves either
  // no file (or the old one, when overwriting) or a session that opens.
  const std::string::size_type slash = path.rfind('/');
  const std::string staging = mode == WriteMode::Append ? path
                              : path.substr(0, slash == std::string::npos ? 0 : slash + 1) + "." +
                                    path.substr(slash == std::string::npos ? 0 : slash + 1) + ".partial-" +
                                    std::to_string(::getpid());
  try {
    d = std::make_unique<Impl>(staging, mode == WriteMode::Append ? mode : WriteMode::Overwrite);
  } catch (const h5::Error& e) {
    const std::string why = e.detail().empty() ? e.what() : e.detail();
    if (why.find("unable to lock file") != std::string::npos)
      throw SessionError("cannot write '" + path + "': another process has it open");
    throw SessionError("cannot " + std::string(mode == WriteMode::Append ? "open" : "create") + " session '" + path +
                       "': " + why);
  }
  d->written = registerWrittenFile(staging);
  if (mode == WriteMode::Append) return;
  try {
    writeHeader(p);
  } catch (...) {
    d.reset();
    ::unlink(staging.c_str());
    throw;
  }
  // A journal left there by an older file of that name must never be replayed into this one.
  ::unlink(h5::journalPath(path).c_str());
  // Create: link() fails if the name was taken meanwhile; Overwrite: rename() replaces atomically.
  const int rc = mode == WriteMode::Create ? ::link(staging.c_str(), path.c_str()) : ::rename(staging.c_str(), path.c_str());
  const int err = errno;
  if (rc != 0 || mode == WriteMode::Create) ::unlink(staging.c_str());
  if (rc != 0) {
    d.reset();
    throw SessionError(err == EEXIST ? "'" + path + "' already exists; choose another name or allow overwriting"
                                     : "cannot create session '" + path + "': " + std::strerror(err));
  }
  d->file.renamed(path);
}

void SessionWriter::writeHeader(Provenance p) {
  if (p.toolVersion.empty()) p.toolVersion = toolVersion();
  if (p.gitCommit.empty()) p.gitCommit = gitCommit();
  if (p.hdf5Version.empty()) p.hdf5Version = hdf5Version();
  if (p.date.empty()) p.date = utcNow();
  if (p.hostname.empty()) p.hostname = hostName();

  h5::Group root = d->file.root();
  root.setAttribute("format", kFormatTag);
  root.setAttribute("schema_version", kSchemaVersion);
  root.setAttribute("created", p.date);
  h5::Group prov = root.createGroup("provenance");
  prov.setAttribute("tool_version", p.toolVersion);
  prov.setAttribute("git_commit", p.gitCommit);
  prov.setAttribute("seed", p.seed);
  prov.setAttribute("model", p.model);
  prov.setAttribute("dataset", p.dataset);
  prov.setAttribute("backend", p.backend);
  prov.setAttribute("device", p.device);
  prov.setAttribute("libtorch_version", p.libtorchVersion);
  prov.setAttribute("hdf5_version", p.hdf5Version);
  prov.setAttribute("date", p.date);
  prov.setAttribute("command_line", p.commandLine);
  prov.setAttribute("hostname", p.hostname);
  root.createGroup("runs");
  root.createGroup("save");
  d->file.flush();
}

bool SessionWriter::hasRun(const std::string& name) const {
  Lock lock(hdf5Mutex());
  return isSafeName(name) && d->file.root().openGroup("runs").has(name);
}

SessionWriter::~SessionWriter() {
  if (!d) return;
  try {
    // A run still open here was abandoned (an exception unwound past it): say so in the file.
    if (d->run) endRun(RunStatus::Failed);
  } catch (...) {
  }
}

void SessionWriter::beginRun(const RunSpec& spec) {
  Lock lock(hdf5Mutex());
  requireSafeName("run", spec.name);
  if (d->run) throw SessionError("run '" + d->run->path() + "' is still open: end it before beginning another");
  h5::Group runs = d->file.root().openGroup("runs");
  if (runs.has(spec.name)) throw SessionError("run '" + spec.name + "' already exists in this session");
  h5::Group run = runs.createGroup(spec.name);
  run.setAttribute("kind", spec.kind);
  run.setAttribute("kernel", spec.kernel);
  run.setAttribute("description", spec.description);
  run.setAttribute("status", runStatusName(RunStatus::Running));
  run.setAttribute("started", utcNow());
  run.setAttribute("iterations_complete", int64_t(0));
  run.createGroup("iterations");
  run.createGroup("checkpoints");
  run.createGroup("reports");
  d->run = std::move(run);
  d->completeIterations = 0;
  d->file.flush();
}

void SessionWriter::beginIteration(int64_t iteration) {
  Lock lock(hdf5Mutex());
  h5::Group& run = d->requireRun("beginIteration");
  if (d->iteration) throw SessionError("iteration " + std::to_string(d->iterationIndex) + " is still open");
  if (iteration < 0) throw SessionError("iteration numbers start at 0");
  h5::Group iterations = run.openGroup("iterations");
  const std::string name = indexName(iteration);
  if (iterations.has(name)) throw SessionError("iteration " + std::to_string(iteration) + " was already recorded");
  h5::Group it = iterations.createGroup(name);
  it.setAttribute("iteration", iteration);
  it.setAttribute("complete", int64_t(0));
  d->calls = it.createGroup("calls");
  d->iteration = std::move(it);
  d->iterationIndex = iteration;
}

std::string SessionWriter::recordCall(const CallId& id, const std::vector<NamedTensor>& tensors,
                                      const std::map<std::string, int64_t>& params) {
  Lock lock(hdf5Mutex());
  if (!d->calls) throw SessionError("recordCall needs an open iteration: call beginIteration first");
  if (id.iteration != d->iterationIndex)
    throw SessionError("call of iteration " + std::to_string(id.iteration) + " recorded inside iteration " +
                       std::to_string(d->iterationIndex));
  const std::string name = indexName(id.callIndex);
  if (id.callIndex < 0 || d->calls->has(name))
    throw SessionError("call index " + std::to_string(id.callIndex) + " is negative or already recorded");
  h5::Group call = d->calls->createGroup(name);
  call.setAttribute("layer", id.layer);
  call.setAttribute("op", id.op);
  call.setAttribute("phase", phaseName(id.phase));
  call.setAttribute("iteration", id.iteration);
  call.setAttribute("call_index", id.callIndex);
  for (const auto& [key, value] : params) call.setAttribute("param." + key, value);
  writeTensors(call, tensors, d->layout);
  return call.path();
}

void SessionWriter::setCallCompression(int level) {
  if (level < 0 || level > 9) throw SessionError("compression level " + std::to_string(level) + " is not in 0-9");
  d->layout.chunked = level > 0;
  d->layout.deflateLevel = level;
}

void SessionWriter::endIteration() {
  Lock lock(hdf5Mutex());
  if (!d->iteration) throw SessionError("endIteration without an open iteration");
  d->iteration->setAttribute("call_count", int64_t(d->calls->children().size()));
  d->iteration->setAttribute("complete", int64_t(1));  // written last: readers trust only complete iterations
  d->run->setAttribute("iterations_complete", ++d->completeIterations);
  d->calls.reset();
  d->iteration.reset();
  d->file.flush();
}

void SessionWriter::writeCheckpoint(int64_t iteration, const std::vector<NamedTensor>& parameters,
                                    const std::vector<NamedTensor>& optimizerState) {
  Lock lock(hdf5Mutex());
  h5::Group checkpoints = d->requireRun("writeCheckpoint").openGroup("checkpoints");
  const std::string name = indexName(iteration);
  if (checkpoints.has(name)) throw SessionError("checkpoint " + std::to_string(iteration) + " already exists");
  h5::Group cp = checkpoints.createGroup(name);
  cp.setAttribute("iteration", iteration);
  h5::Group params = cp.createGroup("parameters");
  writeTensors(params, parameters);
  h5::Group optim = cp.createGroup("optimizer");
  writeTensors(optim, optimizerState);
  cp.setAttribute("complete", int64_t(1));
  d->file.flush();
}

void SessionWriter::writeReport(const std::string& id, const ResultRecord& record) {
  Lock lock(hdf5Mutex());
  requireSafeName("report", id);
  h5::Group reports = d->requireRun("writeReport").openGroup("reports");
  if (reports.has(id)) throw SessionError("report '" + id + "' already exists");
  h5::Group g = reports.createGroup(id);
  writeRecord(g, record);
}

void SessionWriter::writeVerdicts(const std::vector<Verdict>& verdicts) {
  Lock lock(hdf5Mutex());
  h5::Group& run = d->requireRun("writeVerdicts");
  h5::Column call{"call", true, {}, {}}, model{"model", true, {}, {}}, confidence{"confidence", false, {}, {}},
      evidence{"evidence", true, {}, {}};
  // findings: one row per evidence field of each finding (a finding without fields has one row
  // with an empty field), so that h5py reads it as a plain long-format table
  h5::Column fCall{"call", true, {}, {}}, fRank{"rank", false, {}, {}}, fModel{"model", true, {}, {}},
      fConfidence{"confidence", false, {}, {}}, fField{"field", true, {}, {}}, fNumber{"number", false, {}, {}},
      fText{"text", true, {}, {}};
  auto row = [&](const Verdict& v, std::size_t rank, const Finding& f, const std::string& field, double number,
                 const std::string& text) {
    fCall.text.push_back(v.call);
    fRank.numbers.push_back(double(rank));
    fModel.text.push_back(f.model);
    fConfidence.numbers.push_back(f.confidence);
    fField.text.push_back(field);
    fNumber.numbers.push_back(number);
    fText.text.push_back(text);
  };
  for (const Verdict& v : verdicts) {
    call.text.push_back(v.call);
    model.text.push_back(v.model);
    confidence.numbers.push_back(v.confidence);
    evidence.text.push_back(v.evidence);
    for (std::size_t rank = 0; rank < v.findings.size(); ++rank) {
      const Finding& f = v.findings[rank];
      if (f.numbers.empty() && f.labels.empty()) row(v, rank, f, "", std::nan(""), "");
      for (const auto& [field, number] : f.numbers) row(v, rank, f, field, number, "");
      for (const auto& [field, text] : f.labels) row(v, rank, f, field, std::nan(""), text);
    }
  }
  if (run.has("verdicts")) run.remove("verdicts");
  run.writeTable("verdicts", {call, model, confidence, evidence});
  if (run.has("findings")) run.remove("findings");
  if (!fCall.text.empty()) run.writeTable("findings", {fCall, fRank, fModel, fConfidence, fField, fNumber, fText});
}

void SessionWriter::writeTable(const std::string& name, const std::vector<h5::Column>& columns) {
  Lock lock(hdf5Mutex());
  requireSafeName("table", name);
  h5::Group& run = d->requireRun("writeTable");
  h5::Group tables = run.hasGroup("tables") ? run.openGroup("tables") : run.createGroup("tables");
  if (tables.has(name)) tables.remove(name);
  tables.writeTable(name, columns);
  d->file.flush();  // a table is a result a killed writer must keep
}

void SessionWriter::setRunAttribute(const std::string& key, const std::string& value) {
  Lock lock(hdf5Mutex());
  requireSafeName("run attribute", key);
  d->requireRun("setRunAttribute").setAttribute(key, value);
}

void SessionWriter::endRun(RunStatus status) {
  Lock lock(hdf5Mutex());
  h5::Group& run = d->requireRun("endRun");
  if (d->iteration) {  // the iteration in flight is left incomplete on purpose
    d->calls.reset();
    d->iteration.reset();
  }
  run.setAttribute("status", runStatusName(status));
  run.setAttribute("finished", utcNow());
  d->run.reset();
  d->file.flush();
}

void SessionWriter::writeSaveResult(const std::string& id, const ResultRecord& record) {
  Lock lock(hdf5Mutex());
  requireSafeName("SAVE result", id);
  h5::Group save = d->file.root().openGroup("save");
  if (save.has(id)) throw SessionError("SAVE result '" + id + "' already exists");
  h5::Group g = save.createGroup(id);
  writeRecord(g, record);
  d->file.flush();
}

void SessionWriter::flush() {
  Lock lock(hdf5Mutex());
  d->file.flush();
}

// ============================================================================ reader

struct SessionReader::Impl {
  std::string path;
  std::optional<h5::File> file;
};

namespace {

[[noreturn]] void damaged(const std::string& path, const h5::Error& e) {
  throw SessionError("session '" + path + "' is damaged: " + e.what());
}

std::string optionalString(const h5::Group& g, const char* name) {
  return g.hasAttribute(name) ? g.stringAttribute(name) : std::string();
}

StoredRecord readRecord(const h5::Group& g) {
  StoredRecord r;
  for (const std::string& name : g.attributeNames()) {
    if (g.attributeIsText(name))
      r.labels[name] = g.stringAttribute(name);
    else
      r.scalars[name] = g.doubleAttribute(name);
  }
  for (const std::string& name : g.children()) {
    h5::Dataset ds = g.openDataset(name);
    Tensor t;
    t.dtype = ds.storedType();
    t.shape = ds.shape();
    ds.checkedElementCount();  // the file holds the bytes it claims, before allocating for them
    t.bytes.resize(t.elementCount() * h5::typeSize(t.dtype));
    ds.read(t.dtype, t.bytes.data());
    r.arrays.emplace(name, std::move(t));
  }
  return r;
}

}  // namespace

SessionReader::SessionReader(const std::string& path) : SessionReader((probeSession(path), path), InsideProbe{}) {}

SessionReader::SessionReader(const std::string& path, InsideProbe) : d(std::make_unique<Impl>()) {
  Lock lock(hdf5Mutex());
  h5::silenceLibraryDiagnostics();
  d->path = path;
  checkSessionPath(path);
  try {
    d->file.emplace(path, h5::File::Mode::ReadOnly);
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

SessionSummary SessionReader::summary() const { return readSummary(true); }
SessionSummary SessionReader::summaryWithoutTensors() const { return readSummary(false); }

SessionSummary SessionReader::readSummary(bool withTensors) const {
  Lock lock(hdf5Mutex());
  SessionSummary s;
  s.path = d->path;
  try {
    h5::Group root = d->file->root();
    s.schemaVersion = root.intAttribute("schema_version");
    s.created = optionalString(root, "created");
    if (root.hasGroup("provenance")) {
      h5::Group p = root.openGroup("provenance");
      Provenance& v = s.provenance;
      v.toolVersion = optionalString(p, "tool_version");
      v.gitCommit = optionalString(p, "git_commit");
      v.seed = p.hasAttribute("seed") ? p.intAttribute("seed") : 0;
      v.model = optionalString(p, "model");
      v.dataset = optionalString(p, "dataset");
      v.backend = optionalString(p, "backend");
      v.device = optionalString(p, "device");
      v.libtorchVersion = optionalString(p, "libtorch_version");
      v.hdf5Version = optionalString(p, "hdf5_version");
      v.date = optionalString(p, "date");
      v.commandLine = optionalString(p, "command_line");
      v.hostname = optionalString(p, "hostname");
    }
    if (root.hasGroup("runs")) {
      h5::Group runs = root.openGroup("runs");
      for (const std::string& runName : runs.children()) {
        h5::Group rg = runs.openGroup(runName);
        RunInfo run;
        run.name = runName;
        run.spec = {runName, optionalString(rg, "kind"), optionalString(rg, "kernel"), optionalString(rg, "description")};
        run.status = optionalString(rg, "status");
        run.started = optionalString(rg, "started");
        run.finished = optionalString(rg, "finished");
        if (rg.hasGroup("iterations")) {
          h5::Group its = rg.openGroup("iterations");
          const bool writerDied = run.status == "running";
          int64_t unreadable = 0;
          for (const std::string& itName : its.children()) {
            std::optional<h5::Group> maybe;
            try {
              maybe.emplace(its.openGroup(itName));
            } catch (const h5::Error&) {
              // A writer killed in the middle of a flush can leave the group of the iteration in
              // flight pointing past the end of the file. Only that one may be unreadable: the
              // complete ones are counted below against the run's own count.
              if (!writerDied) throw;
              ++unreadable;
              IterationInfo lost;
              lost.iteration = std::strtoll(itName.c_str(), nullptr, 10);
              run.iterations.push_back(std::move(lost));
              continue;
            }
            h5::Group& ig = *maybe;
            IterationInfo it;
            it.iteration = ig.intAttribute("iteration");
            it.complete = ig.hasAttribute("complete") && ig.intAttribute("complete") == 1;
            if (ig.hasGroup("calls")) {
              h5::Group calls = ig.openGroup("calls");
              for (const std::string& callName : calls.children()) {
                h5::Group cg = calls.openGroup(callName);
                CallInfo call;
                call.path = "iterations/" + itName + "/calls/" + callName;
                call.id.layer = optionalString(cg, "layer");
                call.id.op = optionalString(cg, "op");
                call.id.phase = optionalString(cg, "phase") == "backward" ? Phase::Backward : Phase::Forward;
                call.id.iteration = it.iteration;
                call.id.callIndex = cg.intAttribute("call_index");
                for (const std::string& attr : cg.attributeNames())
                  if (attr.rfind("param.", 0) == 0) call.params[attr.substr(6)] = cg.intAttribute(attr);
                if (withTensors)
                  for (const std::string& tensorName : cg.children()) {
                    h5::Dataset ds = cg.openDataset(tensorName);
                    call.tensors.push_back({tensorName, h5::typeName(ds.storedType()), ds.shape()});
                  }
                it.calls.push_back(std::move(call));
              }
            }
            run.iterations.push_back(std::move(it));
          }
          if (unreadable && rg.hasAttribute("iterations_complete") &&
              run.completeIterations() < rg.intAttribute("iterations_complete"))
            throw h5::Error("H5Gopen2", rg.path() + "/iterations", "a complete iteration cannot be read");
        }
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
        if (rg.hasGroup("reports")) run.reports = rg.openGroup("reports").children();
        if (rg.hasGroup("tables")) run.tables = rg.openGroup("tables").children();
        for (const std::string& attr : rg.attributeNames())
          if (rg.attributeIsText(attr)) run.attributes[attr] = rg.stringAttribute(attr);
        if (rg.has("verdicts")) run.verdictCount = int64_t(rg.openDataset("verdicts").elementCount());
        s.runs.push_back(std::move(run));
      }
    }
    if (root.hasGroup("save")) s.saveResults = root.openGroup("save").children();
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
  return s;
}

namespace {
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

std::vector<TensorInfo> SessionReader::callTensors(const std::string& run, const std::string& callPath) const {
  Lock lock(hdf5Mutex());
  std::vector<TensorInfo> out;
  try {
    h5::Group cg = openCall(*d->file, run, callPath);
    for (const std::string& name : cg.children()) {
      h5::Dataset ds = cg.openDataset(name);
      out.push_back({name, h5::typeName(ds.storedType()), ds.shape()});
    }
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
  return out;
}

void SessionReader::readTensorInto(const std::string& run, const std::string& callPath, const std::string& name,
                                   DType as, void* out, uint64_t elements) const {
  Lock lock(hdf5Mutex());
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
  Lock lock(hdf5Mutex());
  try {
    h5::Dataset ds = openCallTensor(*d->file, run, callPath, name);
    Tensor t;
    t.dtype = ds.storedType();
    t.shape = ds.shape();
    ds.checkedElementCount();  // the file holds the bytes it claims, before allocating for them
    t.bytes.resize(t.elementCount() * h5::typeSize(t.dtype));
    ds.read(t.dtype, t.bytes.data());
    return t;
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
}

namespace {

// Visits the datasets under `g`, skipping iteration and checkpoint groups that are not complete.
void verifyGroup(const h5::Group& g, bool inIterationsOrCheckpoints, bool writerDied,
                 std::set<std::pair<unsigned long, haddr_t>>& seen, SessionReader::Verification& v) {
  for (const std::string& name : g.children()) {
    bool isGroup = false;
    try {
      isGroup = g.hasGroup(name);
      if (!isGroup && inIterationsOrCheckpoints) throw h5::Error("H5Gopen2", g.path() + "/" + name, "not a group");
    } catch (const h5::Error&) {
      if (!(inIterationsOrCheckpoints && writerDied)) throw;
      ++v.incompleteGroups;  // in flight when its writer was killed mid-flush
      continue;
    }
    if (isGroup) {
      std::optional<h5::Group> child;
      try {
        child.emplace(g.openGroup(name));
      } catch (const h5::Error&) {
        // the iteration or checkpoint in flight when its writer was killed mid-flush (readSummary
        // has checked that every complete one is readable)
        if (!(inIterationsOrCheckpoints && writerDied)) throw;
        ++v.incompleteGroups;
        continue;
      }
      if (inIterationsOrCheckpoints && (!child->hasAttribute("complete") || child->intAttribute("complete") != 1)) {
        ++v.incompleteGroups;
        continue;
      }
      // a run's status says whether its writer may have died mid-flush
      const bool died = writerDied || (g.path().size() >= 5 && g.path().compare(g.path().size() - 5, 5, "/runs") == 0 &&
                                       child->hasAttribute("status") && child->stringAttribute("status") == "running");
      verifyGroup(*child, name == "iterations" || name == "checkpoints", died, seen, v);
      continue;
    }
    h5::Dataset ds = g.openDataset(name);
    H5O_info_t info{};
#if H5_VERSION_GE(1, 12, 0)
    if (H5Oget_info3(ds.id(), &info, H5O_INFO_BASIC) >= 0) {
      haddr_t addr = 0;
      std::memcpy(&addr, &info.token, std::min(sizeof addr, sizeof info.token));
      if (!seen.insert({info.fileno, addr}).second) continue;  // a hard link to a dataset already checked
    }
#else
    if (H5Oget_info2(ds.id(), &info, H5O_INFO_BASIC) >= 0 && !seen.insert({info.fileno, info.addr}).second) continue;
#endif
    // tables (compound rows, strings) are checked by their readers when they parse them
    const hid_t type = H5Dget_type(ds.id());
    const H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    if (type >= 0) H5Tclose(type);
    if (cls != H5T_FLOAT && cls != H5T_INTEGER) continue;
    if (!ds.checksum()) ++v.withoutChecksum;
    ds.verify();
    ++v.datasets;
    v.bytes += uint64_t(H5Dget_storage_size(ds.id()));
  }
}

}  // namespace

SessionReader::Verification SessionReader::verify() const {
  Lock lock(hdf5Mutex());
  Verification v;
  std::set<std::pair<unsigned long, haddr_t>> seen;
  try {
    (void)readSummary(false);  // every complete iteration must be readable
    verifyGroup(d->file->root(), false, false, seen, v);
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
  return v;
}

std::vector<Verdict> SessionReader::verdicts(const std::string& run) const {
  Lock lock(hdf5Mutex());
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
  Lock lock(hdf5Mutex());
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
  Lock lock(hdf5Mutex());
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
  Lock lock(hdf5Mutex());
  try {
    return readRecord(d->file->root().openGroup("runs").openGroup(run).openGroup("reports").openGroup(id));
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
}

StoredRecord SessionReader::saveResult(const std::string& id) const {
  Lock lock(hdf5Mutex());
  try {
    return readRecord(d->file->root().openGroup("save").openGroup(id));
  } catch (const h5::Error& e) {
    damaged(d->path, e);
  }
}

}  // namespace peat::store
