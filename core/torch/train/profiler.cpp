// SPDX-License-Identifier: MIT
#include "core/torch/train/profiler.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <sys/stat.h>
#include <torch/version.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <map>
#include <memory>

#include "core/store/async_writer.h"
#include "core/torch/kernels/kernel.h"
#include "core/torch/ops/dispatcher.h"

namespace peat::train {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

uint64_t tensorBytes(const at::Tensor& t) { return t.defined() ? uint64_t(t.numel()) * t.element_size() : 0; }

uint64_t fileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? uint64_t(st.st_size) : 0;
}

std::string libtorchVersion() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

// A table built row by row: named numeric and text columns of equal length.
class Table {
 public:
  Table(std::initializer_list<std::string> text, std::initializer_list<std::string> numbers) {
    for (const std::string& n : text) columns_.push_back({n, true, {}, {}});
    for (const std::string& n : numbers) columns_.push_back({n, false, {}, {}});
  }
  void addNumberColumns(const std::vector<std::string>& names) {
    for (const std::string& n : names) columns_.push_back({n, false, {}, {}});
  }
  void row(const std::vector<std::string>& text, const std::vector<double>& numbers) {
    std::size_t t = 0, n = 0;
    for (h5::Column& c : columns_) {
      if (c.isText)
        c.text.push_back(text.at(t++));
      else
        c.numbers.push_back(numbers.at(n++));
    }
  }
  std::size_t rows() const { return columns_.empty() ? 0 : columns_.front().size(); }
  const std::vector<h5::Column>& columns() const { return columns_; }

 private:
  std::vector<h5::Column> columns_;
};

Table callErrorTable() {
  Table t({"layer", "op", "phase", "variant"}, {"iteration", "call_index"});
  t.addNumberColumns(analyzer::errorSummaryColumns());
  return t;
}

void addCallError(Table& t, const store::CallId& id, ops::Variant v, const analyzer::ErrorSummary& e) {
  std::vector<double> numbers{double(id.iteration), double(id.callIndex)};
  for (double x : analyzer::errorSummaryValues(e)) numbers.push_back(x);
  t.row({id.layer, id.op, store::phaseName(id.phase), ops::variantName(v)}, numbers);
}

Table injectionTable() {
  return Table({"call", "target"}, {"index", "bit", "old_value", "new_value"});
}

void addInjections(Table& t, const std::vector<kernels::Injection>& log) {
  for (const kernels::Injection& i : log)
    t.row({i.call, i.target}, {double(i.index), double(i.bit), double(i.oldValue), double(i.newValue)});
}

void keepWorst(analyzer::ErrorSummary& worst, const analyzer::ErrorSummary& e) {
  worst.elements = std::max(worst.elements, e.elements);
  worst.mismatched = std::max(worst.mismatched, e.mismatched);
  worst.newlyNonFinite = std::max(worst.newlyNonFinite, e.newlyNonFinite);
  worst.maxAbs = std::max(worst.maxAbs, e.maxAbs);
  worst.meanAbs = std::max(worst.meanAbs, e.meanAbs);
  worst.maxRel = std::max(worst.maxRel, e.maxRel);
  worst.meanRel = std::max(worst.meanRel, e.meanRel);
  worst.maxUlp = std::max(worst.maxUlp, e.maxUlp);
}

std::vector<store::NamedTensor> views(const std::vector<std::pair<std::string, store::Tensor>>& tensors) {
  std::vector<store::NamedTensor> out;
  for (const auto& [name, t] : tensors) out.push_back({name, t.view()});
  return out;
}

std::vector<std::pair<std::string, store::Tensor>> owned(const NamedTensors& tensors, uint64_t& bytes) {
  std::vector<std::pair<std::string, store::Tensor>> out;
  for (const auto& [name, t] : tensors) {
    out.emplace_back(name, fromTorch(t));
    bytes += out.back().second.bytes.size();
  }
  return out;
}

void setTrainAttributes(store::SessionWriter& w, const TrainOptions& o, const std::string& dataset,
                        const std::string& init) {
  w.setRunAttribute("model", o.model);
  w.setRunAttribute("dataset", dataset);
  w.setRunAttribute("batch", std::to_string(o.batch));
  w.setRunAttribute("seed", std::to_string(o.seed));
  w.setRunAttribute("learning_rate", std::to_string(o.learningRate));
  w.setRunAttribute("threads", std::to_string(o.threads));
  w.setRunAttribute("context", std::to_string(o.context));
  w.setRunAttribute("eval_batches", std::to_string(o.evalBatches));
  w.setRunAttribute("init", init);
}

// Training curve of one run: loss and batch accuracy per iteration, test numbers where evaluated.
struct Curve {
  Table table{{}, {"iteration", "loss", "accuracy", "test_loss", "test_accuracy"}};
  void add(int64_t it, const StepStats& s, const EvalStats* e) {
    table.row({}, {double(it), s.loss, s.accuracy, e ? e->loss : std::nan(""), e ? e->accuracy : std::nan("")});
  }
};

bool evaluateNow(const TrainOptions& o, int64_t it) {
  return it + 1 == o.iterations || (o.evalEvery > 0 && (it + 1) % o.evalEvery == 0);
}

// Records the calls of recorded iterations, and counts what a full dump would take. A tensor that
// several calls read (a weight, an activation, an output gradient) is written once per iteration;
// the later calls hold HDF5 hard links to it.
class Recorder final : public ops::CallObserver {
 public:
  Recorder(store::AsyncSessionWriter& writer, const ProfileOptions& o) : writer_(writer), options_(o) {}
  void setActive(bool active) {
    active_ = active;
    written_.clear();
  }
  uint64_t fullDumpBytes = 0, recordedBytes = 0, storedBytes = 0;
  int64_t recordedCalls = 0;

  void onCall(const store::CallId& id, const ops::OpCall& call, const at::Tensor& golden) override {
    uint64_t callBytes = tensorBytes(golden);
    for (const at::Tensor& t : call.inputs) callBytes += tensorBytes(t);
    fullDumpBytes += callBytes;
    if (!active_ || !selected(call.kind, id.phase)) return;
    const std::string callPath = "/runs/" + options_.runName + "/iterations/" + store::indexName(id.iteration) +
                                 "/calls/" + store::indexName(id.callIndex) + "/";
    auto tensors = std::make_shared<std::vector<std::pair<std::string, store::Tensor>>>();
    auto links = std::make_shared<std::vector<std::pair<std::string, std::string>>>();
    uint64_t newBytes = 0;
    auto add = [&](const std::string& name, const at::Tensor& t) {
      const std::string key = identity(t);
      auto seen = written_.find(key);
      if (seen != written_.end()) {
        links->emplace_back(name, seen->second.first);
        return;
      }
      written_.emplace(key, std::make_pair(callPath + name, t));
      tensors->emplace_back(name, fromTorch(t));
      newBytes += tensors->back().second.bytes.size();
    };
    for (std::size_t i = 0; i < call.inputs.size(); ++i)
      if (call.inputs[i].defined()) add("input_" + std::to_string(i), call.inputs[i]);
    add("output", golden);
    std::map<std::string, int64_t> params = call.params;
    params["variant"] = int64_t(call.variant);
    recordedBytes += callBytes;
    storedBytes += newBytes;
    ++recordedCalls;
    writer_.post(
        [id, tensors, links, params](store::SessionWriter& w) {
          std::vector<store::NamedTensor> named = views(*tensors);
          for (const auto& [name, target] : *links) named.push_back({name, {}, target});
          w.recordCall(id, named, params);
        },
        newBytes);
  }

 private:
  bool selected(ops::OpKind kind, store::Phase phase) const {
    if (phase == store::Phase::Backward && !options_.recordBackward) return false;
    return std::find(options_.recordOps.begin(), options_.recordOps.end(), kind) != options_.recordOps.end();
  }
  // Same memory, shape, strides, type and version: the same values, within one iteration.
  static std::string identity(const at::Tensor& t) {
    std::string key = std::to_string(reinterpret_cast<uintptr_t>(t.data_ptr())) + ":" +
                      std::to_string(int(t.scalar_type())) + ":" + std::to_string(t._version());
    for (int64_t d : t.sizes()) key += "," + std::to_string(d);
    key += ";";
    for (int64_t d : t.strides()) key += "," + std::to_string(d);
    return key;
  }
  store::AsyncSessionWriter& writer_;
  const ProfileOptions& options_;
  bool active_ = false;
  // Path of each tensor written this iteration, and the tensor itself: holding it keeps its memory
  // from being reused by another tensor that would then look identical.
  std::map<std::string, std::pair<std::string, at::Tensor>> written_;
};

}  // namespace

store::Provenance makeProvenance(const TrainOptions& train, const std::string& dataset, const std::string& commandLine) {
  store::Provenance p;
  p.seed = int64_t(train.seed);
  p.model = train.model;
  p.dataset = dataset;
  p.backend = "cpu";
  p.device = "host CPU (" + std::to_string(train.threads) + " thread" + (train.threads == 1 ? ")" : "s)");
  p.libtorchVersion = libtorchVersion();
  p.commandLine = commandLine;
  return p;
}

// ================================================================================ golden profiling

namespace {

// Runs `work`, which creates the session `path` (setting `created`). If it fails after creating it,
// the session is kept when it still reads back, and removed when it does not, so no corrupt file is
// left behind (a full disk, say). The error says which.
template <typename Work>
auto withSessionCleanup(const std::string& path, Work work) -> decltype(work(std::declval<bool&>())) {
  bool created = false;
  try {
    return work(created);
  } catch (const std::exception& e) {
    if (!created) throw;
    bool readable = false;
    try {
      store::SessionReader(path).summary();
      readable = true;
    } catch (const std::exception&) {
    }
    if (!readable) {
      std::remove(path.c_str());
      throw std::runtime_error(std::string(e.what()) + " (the incomplete session " + path + " was removed)");
    }
    throw std::runtime_error(std::string(e.what()) + " (what was complete is kept in " + path + ")");
  }
}

ProfileResult profileInto(const ProfileOptions& o, const Progress& progress, bool& created);
RuntimeFiResult runtimeFiInto(const RuntimeFiOptions& o, const Progress& progress, bool& created);

}  // namespace

ProfileResult runProfile(const ProfileOptions& o, const Progress& progress) {
  return withSessionCleanup(o.out, [&](bool& created) { return profileInto(o, progress, created); });
}

std::string runtimeFiCampaign(const RuntimeFiOptions& o) {
  auto list = [](const auto& values, auto single) {
    std::string out;
    if (values.empty()) return std::to_string(single);
    for (const auto& v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
    return out;
  };
  const TrainOptions& t = o.train;
  char numbers[96];
  std::snprintf(numbers, sizeof numbers, "prob=%.17g;lr=%.17g", o.probability, t.learningRate);
  return "kernel=" + o.kernel + ";every=" + list(o.everySweep, o.every) + ";seeds=" + list(o.seedSweep, t.seed) +
         ";op=" + (o.op ? ops::opName(*o.op) : "all") + ";layer=" + o.layer + ";forward=" + (o.forward ? "1" : "0") +
         ";backward=" + (o.backward ? "1" : "0") + ";" + numbers + ";model=" + t.model +
         ";iterations=" + std::to_string(t.iterations) + ";batch=" + std::to_string(t.batch) +
         ";threads=" + std::to_string(t.threads) + ";eval_every=" + std::to_string(t.evalEvery) +
         ";eval_batches=" + std::to_string(t.evalBatches) + ";context=" + std::to_string(t.context) + ";init=" + t.init;
}

RuntimeFiResult runRuntimeFi(const RuntimeFiOptions& o, const Progress& progress) {
  if (o.everySweep.empty() && o.seedSweep.empty() && o.shardCount == 1)
    return withSessionCleanup(o.out, [&](bool& created) { return runtimeFiInto(o, progress, created); });
  // A sweep: this shard's (every, seed) points, one after another, into one session.
  if (o.shardCount < 1 || o.shardIndex < 0 || o.shardIndex >= o.shardCount)
    throw std::invalid_argument("shard " + std::to_string(o.shardIndex) + "/" + std::to_string(o.shardCount) +
                                " does not exist");
  const std::vector<int64_t> everys = o.everySweep.empty() ? std::vector<int64_t>{o.every} : o.everySweep;
  const std::vector<uint64_t> seeds = o.seedSweep.empty() ? std::vector<uint64_t>{o.train.seed} : o.seedSweep;
  if (o.probability > 0 && everys.size() > 1)
    throw std::invalid_argument("--prob substitutes at random: sweep the seeds, not --every");
  std::vector<std::pair<int64_t, uint64_t>> points;
  for (int64_t k : everys)
    for (uint64_t seed : seeds) points.emplace_back(k, seed);
  std::vector<std::size_t> mine;
  for (std::size_t p = std::size_t(o.shardIndex); p < points.size(); p += std::size_t(o.shardCount)) mine.push_back(p);
  if (mine.empty())
    throw std::invalid_argument("shard " + std::to_string(o.shardIndex) + "/" + std::to_string(o.shardCount) +
                                " has no point: the sweep has only " + std::to_string(points.size()));
  const std::string kernelName = kernels::parseKernelSpec(o.kernel).name;
  const auto start = Clock::now();
  return withSessionCleanup(o.out, [&](bool& created) {
    std::map<uint64_t, RuntimeFiOptions::KnownGolden> trained;  // per seed
    RuntimeFiResult total;
    total.session = o.out;
    total.points = 0;
    for (std::size_t p : mine) {
      const auto [every, seed] = points[p];
      RuntimeFiOptions q = o;
      q.every = every;
      q.train.seed = seed;
      q.sweepPoint = int64_t(p);
      q.goldenRun = "golden-seed-" + std::to_string(seed);
      q.fiRun = "runtime-fi-" + kernelName + (o.probability > 0 ? "" : "-every-" + std::to_string(every)) + "-seed-" +
                std::to_string(seed);
      q.mode = total.points == 0 ? o.mode : store::WriteMode::Append;
      const auto known = trained.find(seed);
      q.knownGolden = known == trained.end() ? nullptr : &known->second;
      bool made = false;
      const RuntimeFiResult r = runtimeFiInto(q, progress, made);
      if (!q.knownGolden && !r.cancelled) trained[seed] = r.golden;
      if (total.points == 0) created = made;
      ++total.points;
      total.iterations += r.iterations;
      total.substitutions += r.substitutions;
      total.injections += r.injections;
      keepWorst(total.worst, r.worst);
      total.goldenLoss = r.goldenLoss, total.fiLoss = r.fiLoss;
      total.goldenTestAccuracy = r.goldenTestAccuracy, total.fiTestAccuracy = r.fiTestAccuracy;
      if (r.cancelled) {
        total.cancelled = true;
        break;
      }
    }
    total.seconds = since(start);
    return total;
  });
}

namespace {

ProfileResult profileInto(const ProfileOptions& o, const Progress& progress, bool& created) {
  const auto start = Clock::now();
  ops::Dispatcher ops;
  Trainer trainer(o.train, ops);
  ProfileResult r;
  r.session = o.out;
  r.run = o.runName;
  r.parameters = trainer.model().parameterCount();

  auto writerOwned = std::make_unique<store::SessionWriter>(
      o.out, makeProvenance(trainer.options(), trainer.datasetName(), o.commandLine), o.mode);
  created = o.mode != store::WriteMode::Append;
  writerOwned->beginRun({o.runName, o.runKind, "golden",
                         "golden training of " + o.train.model + " on " + trainer.datasetName()});
  setTrainAttributes(*writerOwned, trainer.options(), trainer.datasetName(), trainer.initDescription());
  std::string recordOps;
  for (ops::OpKind k : o.recordOps) recordOps += (recordOps.empty() ? "" : ",") + std::string(ops::opName(k));
  writerOwned->setRunAttribute("record_every", std::to_string(o.recordEvery));
  writerOwned->setRunAttribute("record_ops", recordOps);
  writerOwned->setRunAttribute("record_backward", o.recordBackward ? "1" : "0");
  writerOwned->setCallCompression(o.compression);
  store::AsyncSessionWriter writer(std::move(writerOwned));

  Recorder recorder(writer, o);
  ops.addObserver(&recorder);
  Curve curve;
  auto checkpoint = [&](int64_t it) {
    uint64_t bytes = 0;
    auto params = std::make_shared<std::vector<std::pair<std::string, store::Tensor>>>(owned(trainer.parameterState(), bytes));
    auto optim = std::make_shared<std::vector<std::pair<std::string, store::Tensor>>>(owned(trainer.optimizerState(), bytes));
    writer.post([it, params, optim](store::SessionWriter& w) { w.writeCheckpoint(it, views(*params), views(*optim)); },
                bytes);
    r.recordedBytes += bytes;
    ++r.checkpoints;
  };

  int64_t lastCheckpoint = -1;
  if (o.checkpointAtStart) {
    checkpoint(0);
    lastCheckpoint = 0;
  }
  StepStats last;
  // Recorded iterations the writer has completed and flushed, reported with the progress: what a
  // crash can no longer take away (tests/cli/crash_kill.sh holds the session to it).
  auto saved = std::make_shared<std::atomic<int64_t>>(0);
  for (int64_t it = 0; it < o.train.iterations; ++it) {
    if (progress.cancelled()) {
      r.cancelled = true;
      break;
    }
    const bool recording = o.recordEvery > 0 && it % o.recordEvery == 0;
    if (recording) writer.post([it](store::SessionWriter& w) { w.beginIteration(it); });
    recorder.setActive(recording);
    last = trainer.step(it);
    recorder.setActive(false);
    if (recording) {
      writer.post([saved](store::SessionWriter& w) {
        w.endIteration();
        saved->fetch_add(1);  // flushed: a kill from now on keeps it
      });
      ++r.recordedIterations;
    }
    std::optional<EvalStats> eval;
    if (evaluateNow(o.train, it)) {
      ops.removeObserver(&recorder);  // evaluation is not training: not part of the dump
      eval = trainer.evaluate();
      ops.addObserver(&recorder);
      r.testLoss = eval->loss;
      r.testAccuracy = eval->accuracy;
    }
    curve.add(it, last, eval ? &*eval : nullptr);
    r.iterations = it + 1;
    if (o.checkpointEvery > 0 && (it + 1) % o.checkpointEvery == 0) {
      checkpoint(it + 1);
      lastCheckpoint = it + 1;
    }
    progress.send(events::Event("loss").add("iteration", int64_t(it)).add("loss", double(last.loss))
                      .add("saved", int64_t(saved->load())));
    progress(it + 1, o.train.iterations,
             "loss " + std::to_string(last.loss).substr(0, 6) + " saved " + std::to_string(saved->load()));
  }
  if (r.iterations > lastCheckpoint) checkpoint(r.iterations);
  ops.removeObserver(&recorder);
  r.finalLoss = last.loss;
  r.recordedCalls = recorder.recordedCalls;
  r.recordedBytes += recorder.recordedBytes;
  r.storedBytes = r.recordedBytes - recorder.recordedBytes + recorder.storedBytes;
  r.fullDumpBytes = recorder.fullDumpBytes;
  const auto columns = curve.table.columns();
  const bool cancelled = r.cancelled;
  writer.post([columns, cancelled](store::SessionWriter& w) {
    w.writeTable("curve", columns);
    w.endRun(cancelled ? store::RunStatus::Cancelled : store::RunStatus::Complete);
  });
  writer.drain();  // endRun flushed the file
  r.fileBytes = fileSize(o.out);
  r.seconds = since(start);
  return r;
}

}  // namespace

// ======================================================================================= playback

std::string playbackCampaign(const PlaybackOptions& o, const std::string& sourceRun, const std::string& sessionCreated) {
  return "kernel=" + o.kernel + ";seed=" + std::to_string(o.seed) + ";op=" + (o.op ? ops::opName(*o.op) : "all") +
         ";max_calls=" + std::to_string(o.maxCalls) + ";source_run=" + sourceRun + ";session_created=" + sessionCreated;
}

PlaybackResult runPlayback(const PlaybackOptions& o, const Progress& progress) {
  const auto start = Clock::now();
  PlaybackResult r;
  r.session = o.session;
  std::unique_ptr<kernels::Kernel> kernel = kernels::makeKernel(o.kernel, o.seed);
  Table errors = callErrorTable();
  Table injections = injectionTable();
  Curve goldenCurve, candidateCurve;
  store::RunInfo source;
  struct KeptOutput {
    store::CallId id;
    std::map<std::string, int64_t> params;
    store::Tensor output;
  };
  std::vector<KeptOutput> kept;
  std::string campaign;
  if (o.shardCount < 1 || o.shardIndex < 0 || o.shardIndex >= o.shardCount)
    throw std::invalid_argument("shard " + std::to_string(o.shardIndex) + "/" + std::to_string(o.shardCount) +
                                " does not exist");
  if (o.shardCount > 1 && (o.storeOutputs || o.resumeIterations > 0))
    throw std::invalid_argument("--store-outputs and --resume replay in one process: drop --shard");
  if (o.shardCount > 1 && o.out.empty())
    throw std::invalid_argument("a shard of a replay goes to its own session: give --out");

  {
    store::probeSession(o.session);  // first in a helper process: a crafted file may crash HDF5
    store::SessionReader reader(o.session);
    const store::SessionSummary s = reader.summary();
    // Only a profile run holds the recorded inputs a replay needs (a playback run with stored
    // outputs has calls too, but only their outputs).
    for (const store::RunInfo& run : s.runs)
      if (o.run.empty() ? run.callCount() > 0 && run.spec.kind == "profile" : run.name == o.run) {
        source = run;
        break;
      }
    if (source.name.empty())
      throw std::invalid_argument(o.run.empty() ? "session '" + o.session + "' has no recorded calls to replay"
                                                : "session '" + o.session + "' has no run '" + o.run + "'");
    if (source.spec.kind != "profile")
      throw std::invalid_argument("run '" + source.name + "' of '" + o.session + "' is a " + source.spec.kind +
                                  " run, not a recording: replay a profile run (peat info lists them)");
    r.run = source.name;
    const std::string recordedModel = source.attributes.count("model") ? source.attributes.at("model") : "";
    if (!o.model.empty() && o.model != recordedModel)
      throw std::invalid_argument("session '" + o.session + "' was recorded from model '" + recordedModel +
                                  "', not '" + o.model + "'");

    // Replays run with the recorded intra-op thread count: BLAS may block its sums by thread.
    if (source.attributes.count("threads")) at::set_num_threads(std::max(1, std::stoi(source.attributes.at("threads"))));

    std::vector<const store::CallInfo*> calls;
    for (const store::IterationInfo& it : source.iterations)
      if (it.complete)
        for (const store::CallInfo& c : it.calls) {
          const auto kind = ops::opByName(c.id.op);
          if (!kind) throw std::invalid_argument("session holds a call of unknown op '" + c.id.op + "'");
          if ((o.op && *o.op != *kind) || !kernel->supports(*kind)) {
            ++r.skipped;
            continue;
          }
          calls.push_back(&c);
        }
    if (o.maxCalls > 0 && int64_t(calls.size()) > o.maxCalls) {
      r.skipped += int64_t(calls.size()) - o.maxCalls;
      calls.resize(std::size_t(o.maxCalls));
    }
    if (o.shardCount > 1) {
      std::vector<const store::CallInfo*> mine;
      for (std::size_t p = std::size_t(o.shardIndex); p < calls.size(); p += std::size_t(o.shardCount)) mine.push_back(calls[p]);
      if (mine.empty())
        throw std::invalid_argument("shard " + std::to_string(o.shardIndex) + "/" + std::to_string(o.shardCount) +
                                    " has no call to replay: the replay has only " + std::to_string(calls.size()));
      calls.swap(mine);
    }
    campaign = playbackCampaign(o, source.name, s.created);
    if (calls.empty())
      throw std::invalid_argument("no recorded call of run '" + source.name + "' can be replayed by kernel '" +
                                  kernel->name() + "'");

    for (const store::CallInfo* c : calls) {
      if (progress.cancelled()) {
        r.cancelled = true;
        break;
      }
      ops::OpCall call;
      call.kind = *ops::opByName(c->id.op);
      call.params = c->params;
      call.variant = ops::Variant(call.params.count("variant") ? call.params.at("variant") : 0);
      call.params.erase("variant");
      // Straight from HDF5 into tensor memory: no intermediate copies.
      auto load = [&](const store::TensorInfo& t) {
        const bool integer = t.dtype == "int64";
        at::Tensor out = at::empty(std::vector<int64_t>(t.shape.begin(), t.shape.end()), integer ? at::kLong : at::kFloat);
        reader.readTensorInto(source.name, c->path, t.name, integer ? store::DType::I64 : store::DType::F32,
                              out.data_ptr(), uint64_t(out.numel()));
        return out;
      };
      at::Tensor recorded;
      for (const store::TensorInfo& t : c->tensors) {  // input_0, input_1, ... and output, in name order
        if (t.name == "output")
          recorded = load(t);
        else
          call.inputs.push_back(load(t));
      }
      if (!recorded.defined()) throw std::runtime_error("recorded call " + c->path + " has no output");
      const std::string callText = "it " + std::to_string(c->id.iteration) + " call " + std::to_string(c->id.callIndex) +
                                   " " + c->id.layer + " " + c->id.op + " " + ops::variantName(call.variant);
      at::Tensor candidate = kernel->run(call, {callText, c->id.iteration, c->id.callIndex}).contiguous();
      if (candidate.sizes() != recorded.sizes())
        throw std::runtime_error("kernel '" + kernel->name() + "' returned a wrong shape for " + callText);
      const analyzer::ErrorSummary e =
          analyzer::summarize(recorded.data_ptr<float>(), candidate.data_ptr<float>(), uint64_t(recorded.numel()));
      keepWorst(r.worst, e);
      addCallError(errors, c->id, call.variant, e);
      if (o.storeOutputs) kept.push_back({c->id, c->params, fromTorch(candidate)});
      const auto log = kernel->takeInjections();
      r.injections += int64_t(log.size());
      addInjections(injections, log);
      ++r.replayed;
      progress(r.replayed, int64_t(calls.size()), c->id.layer + " " + c->id.op);
    }

    if (o.resumeIterations > 0 && !r.cancelled) {
      if (source.checkpoints.empty()) throw std::invalid_argument("run '" + source.name + "' has no checkpoint to resume from");
      r.resumedFrom = o.resumeFrom >= 0 ? o.resumeFrom : source.checkpoints.front();
      const store::SessionReader::Checkpoint cp = reader.checkpoint(source.name, r.resumedFrom);
      TrainOptions t;
      const auto& a = source.attributes;
      t.model = a.at("model");
      t.batch = std::stoll(a.at("batch"));
      t.seed = std::stoull(a.at("seed"));
      t.learningRate = std::stod(a.at("learning_rate"));
      t.threads = std::stoi(a.at("threads"));
      t.context = std::stoll(a.at("context"));
      t.evalBatches = a.count("eval_batches") ? std::stoll(a.at("eval_batches")) : 8;
      ops::Dispatcher goldenOps, candidateOps;
      Trainer golden(t, goldenOps), candidate(t, candidateOps);
      golden.loadState(cp.parameters, &cp.optimizer);
      candidate.loadState(cp.parameters, &cp.optimizer);
      ops::SubstitutionPolicy policy;
      policy.candidate = kernels::makeKernel(o.kernel, o.seed);
      policy.op = o.op;
      policy.every = 1;
      candidateOps.setSubstitution(policy);
      StepStats g, c;
      for (int64_t i = 0; i < o.resumeIterations; ++i) {
        if (progress.cancelled()) {
          r.cancelled = true;
          break;
        }
        const int64_t it = r.resumedFrom + i;
        g = golden.step(it);
        c = candidate.step(it);
        goldenCurve.add(it, g, nullptr);
        candidateCurve.add(it, c, nullptr);
        addInjections(injections, candidateOps.takeInjections());
        candidateOps.takeSubstitutions();
        r.resumedIterations = i + 1;
        progress(i + 1, o.resumeIterations, "resuming");
      }
      r.goldenLoss = g.loss;
      r.candidateLoss = c.loss;
      r.goldenTestAccuracy = golden.evaluate().accuracy;
      r.candidateTestAccuracy = candidate.evaluate().accuracy;
    }
  }  // the reader closes before the session is opened for writing

  const std::string target = o.out.empty() ? o.session : o.out;
  struct stat existing {};
  store::SessionWriter w(target, {}, ::stat(target.c_str(), &existing) == 0 ? store::WriteMode::Append : store::WriteMode::Create);
  r.session = target;
  std::string name = o.runName.empty() ? "playback-" + kernels::parseKernelSpec(o.kernel).name : o.runName;
  for (int n = 2; w.hasRun(name); ++n)
    name = (o.runName.empty() ? "playback-" + kernels::parseKernelSpec(o.kernel).name : o.runName) + "-" + std::to_string(n);
  w.beginRun({name, "playback", o.kernel, "replay of run " + source.name + " through " + kernel->name()});
  w.setRunAttribute("source_run", source.name);
  w.setRunAttribute("model", source.attributes.count("model") ? source.attributes.at("model") : "");
  w.setRunAttribute("command_line", o.commandLine);
  w.setRunAttribute("campaign", campaign);
  w.setRunAttribute("shard", std::to_string(o.shardIndex) + "/" + std::to_string(o.shardCount));
  if (!o.out.empty()) w.setRunAttribute("source_session", o.session);
  w.writeTable("call_errors", errors.columns());
  if (injections.rows() > 0) w.writeTable("injections", injections.columns());
  if (!kept.empty()) {  // the candidate's outputs, at the same iteration and call paths as the source run
    w.setCallCompression(4);
    int64_t open = -1;
    for (const KeptOutput& k : kept) {
      if (k.id.iteration != open) {
        if (open >= 0) w.endIteration();
        w.beginIteration(k.id.iteration);
        open = k.id.iteration;
      }
      w.recordCall(k.id, {{"output", k.output.view()}}, k.params);
    }
    w.endIteration();
    w.setRunAttribute("stored_outputs", "1");
  }
  if (r.resumedIterations > 0) {
    w.setRunAttribute("resumed_from", std::to_string(r.resumedFrom));
    w.writeTable("resume_golden_curve", goldenCurve.table.columns());
    w.writeTable("resume_candidate_curve", candidateCurve.table.columns());
  }
  w.endRun(r.cancelled ? store::RunStatus::Cancelled : store::RunStatus::Complete);
  r.run = name;
  r.seconds = since(start);
  return r;
}

// ===================================================================================== runtime FI

namespace {

RuntimeFiResult runtimeFiInto(const RuntimeFiOptions& o, const Progress& progress, bool& created) {
  const auto start = Clock::now();
  RuntimeFiResult r;
  r.session = o.out;
  std::shared_ptr<kernels::Kernel> candidate = kernels::makeKernel(o.kernel, o.train.seed);
  if (o.op && !candidate->supports(*o.op))
    throw std::invalid_argument("kernel '" + candidate->name() + "' does not apply to op " + ops::opName(*o.op));
  if (o.every <= 0 && o.probability <= 0) throw std::invalid_argument("give --every K > 0 or --prob P in (0, 1]");

  ops::Dispatcher goldenOps, fiOps;
  Trainer golden(o.train, goldenOps), fi(o.train, fiOps);
  ops::SubstitutionPolicy policy;
  policy.candidate = candidate;
  policy.op = o.op;
  policy.layer = o.layer;
  policy.forward = o.forward;
  policy.backward = o.backward;
  policy.every = o.every;
  policy.probability = o.probability;
  policy.seed = o.train.seed;
  fiOps.setSubstitution(policy);

  store::SessionWriter w(o.out, makeProvenance(golden.options(), golden.datasetName(), o.commandLine), o.mode);
  created = o.mode != store::WriteMode::Append;
  Curve goldenCurve, fiCurve;
  Table errors = callErrorTable();
  Table injections = injectionTable();
  const std::string fiRun = o.fiRun.empty() ? "runtime-fi-" + kernels::parseKernelSpec(o.kernel).name : o.fiRun;
  const std::string goldenRun = o.goldenRun.empty() ? "golden" : o.goldenRun;
  // In a sweep, the golden run of a seed is trained and written once.
  const bool writeGolden = o.knownGolden == nullptr;
  auto sweepAttributes = [&] {
    if (o.sweepPoint < 0) return;
    w.setRunAttribute("campaign", runtimeFiCampaign(o));
    w.setRunAttribute("shard", std::to_string(o.shardIndex) + "/" + std::to_string(o.shardCount));
    w.setRunAttribute("sweep_point", std::to_string(o.sweepPoint));
  };
  if (writeGolden) {
    w.beginRun({goldenRun, "runtime_fi_golden", "golden", "golden run with the same seed and data order"});
    setTrainAttributes(w, golden.options(), golden.datasetName(), golden.initDescription());
    sweepAttributes();
  }

  // Golden and FI runs step in lockstep so that a stop leaves both curves equally long.
  StepStats g, f;
  for (int64_t it = 0; it < o.train.iterations; ++it) {
    if (progress.cancelled()) {
      r.cancelled = true;
      break;
    }
    if (writeGolden)
      g = golden.step(it);
    else
      g.loss = o.knownGolden->loss.at(std::size_t(it));
    f = fi.step(it);
    std::optional<EvalStats> ge, fe;
    if (evaluateNow(o.train, it)) {
      if (writeGolden) {
        ge = golden.evaluate();
        r.goldenTestAccuracy = ge->accuracy;
      }
      fe = fi.evaluate();
      r.fiTestAccuracy = fe->accuracy;
    }
    if (writeGolden) {
      goldenCurve.add(it, g, ge ? &*ge : nullptr);
      r.golden.loss.push_back(g.loss);
    }
    fiCurve.add(it, f, fe ? &*fe : nullptr);
    for (const ops::Substitution& s : fiOps.takeSubstitutions()) {
      addCallError(errors, s.id, s.variant, s.error);
      keepWorst(r.worst, s.error);
      ++r.substitutions;
    }
    const auto log = fiOps.takeInjections();
    r.injections += int64_t(log.size());
    addInjections(injections, log);
    r.iterations = it + 1;
    progress.send(events::Event("loss").add("iteration", int64_t(it)).add("loss", double(g.loss))
                      .add("candidate_loss", double(f.loss)));
    progress(it + 1, o.train.iterations,
             "loss " + std::to_string(g.loss).substr(0, 6) + " vs " + std::to_string(f.loss).substr(0, 6));
  }
  const store::RunStatus status = r.cancelled ? store::RunStatus::Cancelled : store::RunStatus::Complete;
  if (writeGolden) {
    w.writeTable("curve", goldenCurve.table.columns());
    w.endRun(status);
  }
  w.beginRun({fiRun, "runtime_fi", o.kernel,
              "runtime FI: " + candidate->name() + " replaces " + (o.op ? ops::opName(*o.op) : "every op") +
                  (o.probability > 0 ? " with probability " + std::to_string(o.probability)
                                     : " every " + std::to_string(o.every) + " calls")});
  setTrainAttributes(w, fi.options(), fi.datasetName(), fi.initDescription());
  w.setRunAttribute("every", std::to_string(o.every));
  w.setRunAttribute("probability", std::to_string(o.probability));
  w.setRunAttribute("target_op", o.op ? ops::opName(*o.op) : "");
  w.setRunAttribute("target_layer", o.layer);
  w.setRunAttribute("golden_run", goldenRun);
  sweepAttributes();
  w.writeTable("curve", fiCurve.table.columns());
  w.writeTable("call_errors", errors.columns());
  if (injections.rows() > 0) w.writeTable("injections", injections.columns());
  w.endRun(status);
  if (!writeGolden) r.goldenTestAccuracy = o.knownGolden->testAccuracy;
  r.golden.testAccuracy = r.goldenTestAccuracy;
  r.goldenLoss = g.loss;
  r.fiLoss = f.loss;
  r.seconds = since(start);
  return r;
}

}  // namespace

}  // namespace peat::train
