// SPDX-License-Identifier: MIT
// Golden profiling: trains the model, recording the calls of every Nth iteration and checkpoints.
#include <ATen/ATen.h>

#include <algorithm>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <atomic>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include "core/analysis/numerics_record.h"
#include "core/store/async_writer.h"
#include "core/torch/ops/dispatcher.h"
#include "core/torch/train/profiler.h"
#include "core/torch/train/run_common.h"

namespace peat::train {

using namespace detail;

namespace {

uint64_t tensorBytes(const at::Tensor& t) { return t.defined() ? uint64_t(t.numel()) * t.element_size() : 0; }

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
  // rows added on the writer's thread, written by its last task
  std::shared_ptr<store::TableBuilder> numerics_ = std::make_shared<store::TableBuilder>(analyzer::numericsTable());

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
    std::shared_ptr<store::TableBuilder> numerics = options_.numerics ? numerics_ : nullptr;
    writer_.post(
        [id, tensors, links, params, numerics](store::SessionWriter& w) {
          // on the writer's thread, off training's: the output's and the first input's numerics
          // (activations forward, a gradient backward), from the copies about to be written
          for (const auto& [name, t] : *tensors)
            if (numerics && (name == "output" || name == "input_0") && t.dtype == store::DType::F32) {
              const uint64_t last = t.shape.empty() ? 0 : t.shape.back();
              analyzer::addNumericsRow(*numerics, id, name == "output" ? "output" : "input",
                                       analyzer::tensorNumerics(reinterpret_cast<const float*>(t.bytes.data()),
                                                                t.elementCount(), last));
            }
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

// Creates the session (setting `created`) and begins the golden run with its attributes.
std::unique_ptr<store::SessionWriter> beginProfileRun(const ProfileOptions& o, Trainer& trainer, bool& created) {
  auto writer = std::make_unique<store::SessionWriter>(
      o.out, makeProvenance(trainer.options(), trainer.datasetName(), o.commandLine), o.mode);
  created = o.mode != store::WriteMode::Append;
  writer->beginRun({o.runName, o.runKind, "golden",
                    "golden training of " + o.train.model + " on " + trainer.datasetName()});
  setTrainAttributes(*writer, trainer.options(), trainer.datasetName(), trainer.initDescription());
  if (!trainer.routingSummary().empty()) writer->setRunAttribute("routing", trainer.routingSummary());
  std::string recordOps;
  for (ops::OpKind k : o.recordOps) recordOps += (recordOps.empty() ? "" : ",") + std::string(ops::opName(k));
  writer->setRunAttribute("record_every", std::to_string(o.recordEvery));
  writer->setRunAttribute("record_ops", recordOps);
  writer->setRunAttribute("record_backward", o.recordBackward ? "1" : "0");
  writer->setCallCompression(o.compression);
  return writer;
}

ProfileResult profileInto(const ProfileOptions& o, const Progress& progress, bool& created) {
  const auto start = Clock::now();
  ops::Dispatcher ops;
  Trainer trainer(o.train, ops);
  if (!trainer.routingSummary().empty()) std::cerr << "peat: " << o.train.model << ": " << trainer.routingSummary() << "\n";
  ProfileResult r;
  r.session = o.out;
  r.run = o.runName;
  r.parameters = trainer.model().parameterCount();

  store::AsyncSessionWriter writer(beginProfileRun(o, trainer, created));

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
#ifdef __GLIBC__
    // freed tensors back to the system now and then (the torch commands raise glibc's trim
    // threshold for speed; kept, the peak grew with the iterations: 522 / 861 / 912 MB at 200 /
    // 800 / 5,000 LeNet iterations)
    if (it % 16 == 15) malloc_trim(0);
#endif
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
  const std::shared_ptr<store::TableBuilder> numerics = o.numerics ? recorder.numerics_ : nullptr;
  writer.post([columns, cancelled, numerics](store::SessionWriter& w) {
    w.writeTable("curve", columns);
    if (numerics) w.writeTable("numerics", numerics->columns());
    w.endRun(cancelled ? store::RunStatus::Cancelled : store::RunStatus::Complete);
  });
  writer.drain();  // endRun flushed the file
  r.fileBytes = fileSize(o.out);
  r.seconds = since(start);
  return r;
}

}  // namespace

ProfileResult runProfile(const ProfileOptions& o, const Progress& progress) {
  return withSessionCleanup(o.out, [&](bool& created) { return profileInto(o, progress, created); });
}

}  // namespace peat::train
