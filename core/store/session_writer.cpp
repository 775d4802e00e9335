// SPDX-License-Identifier: MIT
// SessionWriter: makes a session file (staged under a hidden name, then linked into place) and adds
// runs, iterations, calls, checkpoints, reports, verdicts and tables to it.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/store/journal.h"
#include "core/store/probe.h"
#include "core/store/session.h"
#include "core/store/session_common.h"
#include "core/version.h"

namespace peat::store {

using detail::hostName;
using detail::isSafeName;
using detail::Lock;
using detail::requireSafeName;
using detail::utcNow;
using detail::writeRecord;
using detail::writeTensors;

struct SessionWriter::Impl {
  uint64_t written = 0;  // the registration that lets this process read the file without a probe
  h5::File file;
  std::optional<h5::Group> run;
  std::optional<h5::Group> iteration;
  std::optional<h5::Group> calls;
  int64_t iterationIndex = -1;
  int64_t completeIterations = 0;
  h5::DatasetLayout layout;

  Impl(const Lock& held, const std::string& path, WriteMode mode)
      : file(held, path, mode == WriteMode::Append      ? h5::File::Mode::ReadWrite
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
  Lock lock;
  h5::silenceLibraryDiagnostics();
  if (mode == WriteMode::Append) {
    // the same clear errors as peat info for a bad or too-new file, read in a helper process
    probeSession(path);
  }
  struct stat st {};
  if (mode != WriteMode::Append && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    throw SessionError("'" + path + "' is a symbolic link; peat does not write a new session through links: remove it "
                       "or choose another name");
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
  if (mode != WriteMode::Append && ::lstat(staging.c_str(), &st) == 0) {
    // a plain file at the hidden name is the leftover of a killed writer with this pid (common in
    // containers, where pids repeat): removed; anything else there (a link) is refused below
    if (S_ISREG(st.st_mode)) ::unlink(staging.c_str());
  }
  try {
    // the staging file is made anew (O_EXCL|O_NOFOLLOW): a link planted at its name is refused
    d = std::make_unique<Impl>(lock, staging, mode == WriteMode::Append ? mode : WriteMode::Create);
  } catch (const h5::Error& e) {
    const std::string why = e.detail().empty() ? e.what() : e.detail();
    if (mode != WriteMode::Append && ::lstat(staging.c_str(), &st) == 0 && S_ISREG(st.st_mode))
      ::unlink(staging.c_str());  // made by this attempt (a full disk, say): nothing of it is kept
    else if (mode != WriteMode::Append && ::lstat(staging.c_str(), &st) == 0)
      throw SessionError("cannot create session '" + path + "': its temporary name '" + staging +
                         "' is taken (peat never writes through a file or link there): remove it");
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
  prov.setAttribute("seed", p.seed);
  for (const auto& [name, value] : detail::provenanceText(p)) prov.setAttribute(name, *value);
  root.createGroup("runs");
  root.createGroup("save");
  d->file.flush();
}

bool SessionWriter::hasRun(const std::string& name) const {
  Lock lock;
  return isSafeName(name) && d->file.root().openGroup("runs").has(name);
}

SessionWriter::~SessionWriter() {
  if (!d || !d->run) return;
  const std::string runName = d->run->path().substr(d->run->path().rfind('/') + 1);
  try {
    // A run still open here was abandoned (an exception unwound past it): say so in the file.
    endRun(RunStatus::Failed);
    return;
  } catch (...) {
  }
  // The file refused that commit too: a write failed (a full disk), and the journal keeps the file
  // at its last commit. Closed there and opened again, the run is marked failed in a small commit
  // of its own when the disk takes it; else it stays "running", as a killed writer's would.
  try {
    Lock lock;
    const std::string path = d->file.path();
    d.reset();
    h5::File file(lock, path, h5::File::Mode::ReadWrite);
    h5::Group run = file.root().openGroup("runs").openGroup(runName);
    if (run.hasAttribute("status") && run.stringAttribute("status") == runStatusName(RunStatus::Running)) {
      run.setAttribute("status", runStatusName(RunStatus::Failed));
      run.setAttribute("finished", utcNow());
      file.flush();
    }
  } catch (...) {
  }
}

void SessionWriter::beginRun(const RunSpec& spec) {
  Lock lock;
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
  Lock lock;
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
                                      const std::map<std::string, int64_t>& params,
                                      const std::map<std::string, std::string>& labels) {
  Lock lock;
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
  for (const auto& [key, value] : labels) call.setAttribute("label." + key, value);
  writeTensors(call, tensors, d->layout);
  return call.path();
}

void SessionWriter::setCallCompression(int level) {
  if (level < 0 || level > 9) throw SessionError("compression level " + std::to_string(level) + " is not in 0-9");
  d->layout.chunked = level > 0;
  d->layout.deflateLevel = level;
}

void SessionWriter::endIteration() {
  Lock lock;
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
  Lock lock;
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
  Lock lock;
  requireSafeName("report", id);
  h5::Group reports = d->requireRun("writeReport").openGroup("reports");
  if (reports.has(id)) throw SessionError("report '" + id + "' already exists");
  h5::Group g = reports.createGroup(id);
  writeRecord(g, record);
}

namespace {
// A run's verdicts as its two tables: "verdicts" (one row per call) and "findings" (one row per
// evidence field of each finding; a finding without fields has one row with an empty field), so
// that h5py reads each as a plain long-format table.
struct VerdictTables {
  std::vector<h5::Column> verdicts, findings;
};
VerdictTables verdictTables(const std::vector<Verdict>& list) {
  h5::Column call{"call", true, {}, {}}, model{"model", true, {}, {}}, confidence{"confidence", false, {}, {}},
      evidence{"evidence", true, {}, {}};
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
  for (const Verdict& v : list) {
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
  return {{call, model, confidence, evidence}, {fCall, fRank, fModel, fConfidence, fField, fNumber, fText}};
}
}  // namespace

void SessionWriter::writeVerdicts(const std::vector<Verdict>& verdicts) {
  Lock lock;
  h5::Group& run = d->requireRun("writeVerdicts");
  const VerdictTables t = verdictTables(verdicts);
  if (run.has("verdicts")) run.remove("verdicts");
  run.writeTable("verdicts", t.verdicts);
  if (run.has("findings")) run.remove("findings");
  if (t.findings.front().size() > 0) run.writeTable("findings", t.findings);
}

void SessionWriter::appendVerdicts(const std::vector<Verdict>& verdicts) {
  Lock lock;
  h5::Group& run = d->requireRun("appendVerdicts");
  const VerdictTables t = verdictTables(verdicts);
  run.appendTable("verdicts", t.verdicts);
  if (t.findings.front().size() > 0) run.appendTable("findings", t.findings);
}

void SessionWriter::appendTable(const std::string& name, const std::vector<h5::Column>& rows) {
  Lock lock;
  requireSafeName("table", name);
  h5::Group& run = d->requireRun("appendTable");
  h5::Group tables = run.hasGroup("tables") ? run.openGroup("tables") : run.createGroup("tables");
  tables.appendTable(name, rows);
}

void SessionWriter::writeTable(const std::string& name, const std::vector<h5::Column>& columns) {
  Lock lock;
  requireSafeName("table", name);
  h5::Group& run = d->requireRun("writeTable");
  h5::Group tables = run.hasGroup("tables") ? run.openGroup("tables") : run.createGroup("tables");
  if (tables.has(name)) tables.remove(name);
  tables.writeTable(name, columns);
  d->file.flush();  // a table is a result a killed writer must keep
}

void SessionWriter::setRunAttribute(const std::string& key, const std::string& value) {
  Lock lock;
  requireSafeName("run attribute", key);
  d->requireRun("setRunAttribute").setAttribute(key, value);
}

void SessionWriter::endRun(RunStatus status) {
  Lock lock;
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
  Lock lock;
  requireSafeName("SAVE result", id);
  h5::Group save = d->file.root().openGroup("save");
  if (save.has(id)) throw SessionError("SAVE result '" + id + "' already exists");
  h5::Group g = save.createGroup(id);
  writeRecord(g, record);
  d->file.flush();
}

void SessionWriter::writeSaveResults(const std::vector<std::pair<std::string, const ResultRecord*>>& records) {
  Lock lock;
  h5::Group save = d->file.root().openGroup("save");
  std::set<std::string> ids;
  for (const auto& [id, record] : records) {
    requireSafeName("SAVE result", id);
    if (save.has(id)) throw SessionError("SAVE result '" + id + "' already exists");
    if (!ids.insert(id).second) throw SessionError("SAVE result '" + id + "' is named twice in one result");
  }
  std::vector<std::string> written;
  try {
    for (const auto& [id, record] : records) {
      h5::Group g = save.createGroup(id);
      written.push_back(id);
      writeRecord(g, *record);
    }
  } catch (...) {
    for (const std::string& id : written) {
      try {
        save.remove(id);
      } catch (...) {  // the first error is the one to report
      }
    }
    throw;
  }
  d->file.flush();
}

void SessionWriter::flush() {
  Lock lock;
  d->file.flush();
}

}  // namespace peat::store
