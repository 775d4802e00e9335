// SPDX-License-Identifier: MIT
#pragma once
// The session file: one HDF5 file per session. Layout and guarantees: docs/session-format.md.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/store/tensor.h"

namespace peat::store {

inline constexpr const char* kFormatTag = "peat-session";  // root attribute "format"
inline constexpr int64_t kSchemaVersion = 1;               // root attribute "schema_version"

// Thrown for anything wrong with a session file; what() is one line meant for the user.
class SessionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Provenance {
  std::string toolVersion;     // filled by SessionWriter when empty
  std::string gitCommit;       // filled by SessionWriter when empty
  int64_t seed = 0;
  std::string model;           // e.g. "lenet"
  std::string dataset;         // e.g. "fashion-mnist"
  std::string backend;         // "cpu", "cuda", "hip"
  std::string device;          // e.g. "cpu", "NVIDIA H200"
  std::string libtorchVersion; // empty when the writer did not use LibTorch
  std::string hdf5Version;     // filled by SessionWriter when empty
  std::string date;            // ISO-8601 UTC; filled by SessionWriter when empty
  std::string commandLine;
  std::string hostname;        // filled by SessionWriter when empty
};

enum class Phase { Forward, Backward };
const char* phaseName(Phase p);

// The stable identity of one op call inside a run.
struct CallId {
  std::string layer;   // "conv1", "blocks.0.attn"
  std::string op;      // "linear", "conv2d", ...
  Phase phase = Phase::Forward;
  int64_t iteration = 0;
  int64_t callIndex = 0;  // position of the call within its iteration
};

struct RunSpec {
  std::string name;         // group name under /runs; letters, digits, '-', '_' and '.'
  std::string kind;         // "profile", "playback", "runtime_fi", "save_campaign", ...
  std::string kernel;       // "golden" or the candidate's name
  std::string description;  // free text
};

enum class RunStatus { Running, Complete, Cancelled, Failed };
const char* runStatusName(RunStatus s);

// Scalars, labels and arrays of one result: an error report, a SAVE layer analysis, ...
struct ResultRecord {
  std::map<std::string, double> scalars;
  std::map<std::string, std::string> labels;
  std::vector<NamedTensor> arrays;
};

// A ResultRecord as read back, owning its arrays.
struct StoredRecord {
  std::map<std::string, double> scalars;
  std::map<std::string, std::string> labels;
  std::map<std::string, Tensor> arrays;
};

// One finding of the detector about a call: an error model, how sure, and the evidence as fields
// (docs/session-format.md). An open list: new rules add models and fields, not columns.
struct Finding {
  std::string model;  // error model, e.g. "index_error"
  double confidence = 0;
  std::map<std::string, double> numbers;      // evidence: bit, stride, rows_hit, columns_hit, k, ...
  std::map<std::string, std::string> labels;  // parameters: format, ...
};

struct Verdict {
  std::string call;     // call path inside the run, e.g. "iterations/000003/calls/000012"
  std::string model;    // error model, e.g. "precision_loss"
  double confidence = 0;
  std::string evidence;  // one line a person can read
  // The verdict itself first, then the alternatives by confidence; empty in sessions written
  // before findings were stored.
  std::vector<Finding> findings;
};

enum class WriteMode {
  Create,     // a new file; an existing one is refused
  Overwrite,  // a new file, replacing an existing one
  Append,     // add runs to an existing session (its provenance stays)
};

// Writes a session. Not thread-safe; one writer per file.
class SessionWriter {
 public:
  SessionWriter(const std::string& path, Provenance provenance, WriteMode mode = WriteMode::Create);
  bool hasRun(const std::string& name) const;
  ~SessionWriter();
  SessionWriter(const SessionWriter&) = delete;
  SessionWriter& operator=(const SessionWriter&) = delete;

  void beginRun(const RunSpec& spec);
  void beginIteration(int64_t iteration);
  // `params` are the op's settings a replay needs (stride, padding, ...), stored as "param.<name>".
  // Returns the absolute path of the call's group, for links from later calls.
  // `labels` are string facts of the call stored as "label.<name>" (the aten op and its arguments
  // of a call recorded by the Python package, which its golden replay re-runs).
  std::string recordCall(const CallId& id, const std::vector<NamedTensor>& tensors,
                         const std::map<std::string, int64_t>& params = {},
                         const std::map<std::string, std::string>& labels = {});
  // Marks the iteration complete and flushes the file: a process killed later keeps this iteration.
  void endIteration();
  void writeCheckpoint(int64_t iteration, const std::vector<NamedTensor>& parameters,
                       const std::vector<NamedTensor>& optimizerState);
  void writeReport(const std::string& id, const ResultRecord& record);
  void writeVerdicts(const std::vector<Verdict>& verdicts);
  // A named table of the open run (loss curves, per-call errors, injections): runs/<run>/tables/<name>.
  // Writing a name again replaces the table, so curves can be refreshed as a run goes on.
  void writeTable(const std::string& name, const std::vector<h5::Column>& columns);
  // The same, a block of rows at a time, for results too long to hold in memory: appendVerdicts adds
  // to the run's verdicts (and findings), appendTable to table `name` (made at the first block; the
  // blocks' columns must agree). Neither flushes: the run's end does.
  void appendVerdicts(const std::vector<Verdict>& verdicts);
  void appendTable(const std::string& name, const std::vector<h5::Column>& rows);
  // A string attribute of the open run (model settings a later playback checks against).
  void setRunAttribute(const std::string& key, const std::string& value);
  // Deflate level of recorded call tensors from now on: 0 (stored plain) to 9; 4 by default.
  // Checkpoints and results keep level 4: they are small and written rarely.
  void setCallCompression(int level);
  void endRun(RunStatus status);
  // SAVE results live beside the runs, under /save/<id>.
  void writeSaveResult(const std::string& id, const ResultRecord& record);
  // The records of one result written as a whole: `records` (id, record) in order, none written
  // when an id is taken or repeated, and those written removed again when a later one fails.
  void writeSaveResults(const std::vector<std::pair<std::string, const ResultRecord*>>& records);
  void flush();

 private:
  void writeHeader(Provenance p);
  struct Impl;
  std::unique_ptr<Impl> d;
};

// ----- reading -----------------------------------------------------------------

struct TensorInfo {
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
};

struct CallInfo {
  std::string path;  // inside the run, e.g. "iterations/000000/calls/000003"
  CallId id;
  std::vector<TensorInfo> tensors;
  std::map<std::string, int64_t> params;
  std::map<std::string, std::string> labels;  // "label.<name>" attributes (Python recordings)
};

struct IterationInfo {
  int64_t iteration = 0;
  bool complete = false;  // false for the iteration in flight when a writer died
  std::vector<CallInfo> calls;
};

struct RunInfo {
  std::string name;
  RunSpec spec;
  std::string status;
  std::string started, finished;
  std::vector<IterationInfo> iterations;
  std::vector<int64_t> checkpoints;
  std::vector<std::string> reports;  // report ids, those of packs (packed_records.h) included
  std::vector<std::string> tables;
  std::map<std::string, std::string> attributes;  // every string attribute of the run
  int64_t verdictCount = 0;
  int64_t completeIterations() const;
  int64_t callCount() const;
};

struct SessionSummary {
  std::string path;
  int64_t schemaVersion = 0;
  std::string created;
  Provenance provenance;
  std::vector<RunInfo> runs;
  std::vector<std::string> saveResults;
  // The SAVE results that hold several layers of one analysis as rows (kind "save_layers", named
  // "<analysis>.packed-layers[-N]"): each one's id to the names of the layers it holds.
  std::map<std::string, std::vector<std::string>> packedSaveLayers;
  // The layers stored under SAVE result `id`, sorted: the names of its "<id>.<layer>" records and
  // of the layers its packed records hold.
  std::vector<std::string> saveLayersOf(const std::string& id) const;
};

// Opens a session read-only and checks it is one this build understands.
// Throws SessionError with a one-line reason for a missing, foreign, damaged or too-new file.
class SessionReader {
 public:
  // Opens a session from anywhere: it is probed first (probeSession), unless core/store/probe.h's
  // rule says it need not be. This is the only way a session from a user is opened.
  explicit SessionReader(const std::string& path);
  // Opens without a probe: only for the probe helper itself and the fuzzer, which are the
  // throw-away processes that probing relies on.
  struct InsideProbe {};
  SessionReader(const std::string& path, InsideProbe);
  ~SessionReader();
  SessionReader(const SessionReader&) = delete;
  SessionReader& operator=(const SessionReader&) = delete;

  SessionSummary summary() const;
  // Without each call's tensor list (CallInfo::tensors stays empty): a session of thousands of
  // calls opens several times faster. callTensors() reads one call's list when it is wanted.
  SessionSummary summaryWithoutTensors() const;
  // Every run's header (spec, status, attributes, tables, reports) without its iterations: what a
  // reader that works on one run reads first, so its memory does not grow with the other runs.
  SessionSummary summaryWithoutCalls() const;
  // One run whole, its calls' tensor lists included; throws SessionError when there is none of that name.
  RunInfo run(const std::string& name) const;
  std::vector<TensorInfo> callTensors(const std::string& run, const std::string& callPath) const;
  // A run read an iteration at a time, for readers whose memory must not grow with the run (its
  // header comes from summaryWithoutCalls): the iterations' names ("000010") in order with the
  // number of calls each holds (none for a run without iterations), then any one of them whole, its
  // calls' tensor lists included unless `tensors` is false. Both throw SessionError for a run or an
  // iteration that is not there.
  struct IterationEntry {
    std::string name;
    int64_t calls = 0;
    bool complete = false;  // false for the iteration in flight when a writer died
  };
  std::vector<IterationEntry> iterationIndex(const std::string& run) const;
  IterationInfo iteration(const std::string& run, const std::string& name, bool tensors = true) const;
  // Every iteration of `run` in order, each handed to `each` and then dropped: what run() reads,
  // with the same checks (the probe's structure walk), in memory that does not grow with the run.
  // An iteration a killed writer left unreadable comes as an incomplete one without calls.
  void forEachIteration(const std::string& run, bool tensors, const std::function<void(const IterationInfo&)>& each) const;
  Tensor readTensor(const std::string& run, const std::string& callPath, const std::string& name) const;
  // Reads a tensor converted to `as` straight into `out`, which holds `elements` values of that type;
  // throws SessionError when the stored tensor has another element count.
  void readTensorInto(const std::string& run, const std::string& callPath, const std::string& name, DType as,
                      void* out, uint64_t elements) const;
  std::vector<Verdict> verdicts(const std::string& run) const;
  std::vector<h5::Column> table(const std::string& run, const std::string& name) const;
  struct Checkpoint {
    std::map<std::string, Tensor> parameters, optimizer;
  };
  Checkpoint checkpoint(const std::string& run, int64_t iteration) const;
  // A report by its id, stored as its own record or as a row of a pack (packed_records.h); throws
  // SessionError when the run has none of that id.
  StoredRecord report(const std::string& run, const std::string& id) const;
  // Every report of a run with its id, in the order the run lists them (each pack read once).
  std::vector<std::pair<std::string, StoredRecord>> reports(const std::string& run) const;
  StoredRecord saveResult(const std::string& id) const;

  // Reads every dataset of the session except those of iterations and checkpoints not marked
  // complete (the one in flight when a writer died) and checks each against the CRC-32 written
  // with it. Throws SessionError naming the first damaged dataset.
  struct Verification {
    uint64_t datasets = 0, bytes = 0;  // checked (a dataset linked from several calls counts once)
    uint64_t withoutChecksum = 0;      // read fine, but written before checksums existed
    uint64_t incompleteGroups = 0;     // iterations and checkpoints in flight, not checked
    uint64_t readWhole = 0;            // tables and text (no checksum): every chunk decoded
    // the paths of those without a checksum (withoutChecksum, then readWhole), the first kNamed,
    // terminal-safe (util::printable)
    std::vector<std::string> withoutChecksumPaths, readWholePaths;
    static constexpr std::size_t kNamed = 100;
  };
  Verification verify() const;

 private:
  SessionSummary readSummary(int calls) const;  // a Calls of session_reader.cpp
  struct Impl;
  std::unique_ptr<Impl> d;
};

// A session file may come from someone else, and the HDF5 library can crash or hang on a crafted
// one. probeSession reads it first in the peat-probe helper process (its structure; all its data
// with `verify`) and throws SessionError with one line when that process fails, crashes or hangs.
// A missing, unreadable or non-HDF5 path is refused without starting anything. With `verify`,
// returns what SessionReader::verify() found there. The timeout: 20 s for the structure, 600 s with
// `verify`; PEAT_PROBE_TIMEOUT (seconds) overrides. When a probe may be skipped: core/store/probe.h.
SessionReader::Verification probeSession(const std::string& path, bool verify = false);

// Called on the calling thread at every entry into the session layer, which serialises all HDF5
// access (nullptr: none). For tests that prove a thread (the GUI's) never reads or writes a file.
void setSessionAccessObserver(void (*observer)());

// "000042": fixed-width names keep HDF5's name order equal to numeric order.
std::string indexName(int64_t index);

}  // namespace peat::store
