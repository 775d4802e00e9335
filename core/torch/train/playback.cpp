// SPDX-License-Identifier: MIT
// Playback fault injection: replays the recorded calls of a profile run through a candidate kernel,
// optionally resumes training from a checkpoint with it, and writes the replay as a run.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <sys/stat.h>

#include <algorithm>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

#include "core/torch/ops/dispatcher.h"
#include "core/torch/train/profiler.h"
#include "core/torch/train/run_common.h"
#include "core/util/byte_record.h"
#include "core/util/campaign_key.h"
#include "core/util/spool_file.h"
#include "core/util/text.h"

namespace peat::train {

using namespace detail;

namespace {

// The candidate's outputs, as --store-outputs keeps them until the run is written: spooled to an
// anonymous file beside the session (util::SpoolFile), not held in memory, so a replay's memory
// stays flat however many calls it keeps. Each output lies there with what the run needs to store
// it (the call's id and parameters, the tensor's type and shape) in front of its bytes; only where
// each lies stays in memory (24 bytes a call). Read back one output at a time when the run is written.
class OutputSpool {
 public:
  struct Kept {
    store::CallId id;
    std::map<std::string, int64_t> params;
    store::Tensor output;
  };
  explicit OutputSpool(const std::string& besideSession) : file_(besideSession) {}
  void add(const store::CallId& id, const std::map<std::string, int64_t>& params, const store::Tensor& t) {
    util::ByteWriter head;
    head.text(id.layer);
    head.text(id.op);
    head.raw(id.phase);
    head.raw(id.iteration);
    head.raw(id.callIndex);
    head.textMap(params);
    head.raw(t.dtype);
    head.list(t.shape);
    Place at{file_.append(head.bytes.data(), head.bytes.size()), head.bytes.size(), t.bytes.size()};
    file_.append(t.bytes.data(), at.dataSize);
    at_.push_back(at);
  }
  std::size_t size() const { return at_.size(); }
  bool empty() const { return at_.empty(); }
  Kept read(std::size_t index) const {
    const Place& at = at_.at(index);
    std::vector<unsigned char> bytes(std::size_t(at.headSize));
    file_.read(at.offset, bytes.data(), at.headSize);
    util::ByteReader head(bytes, "a kept candidate output");
    Kept k;
    k.id.layer = head.text();
    k.id.op = head.text();
    head.raw(k.id.phase);
    head.raw(k.id.iteration);
    head.raw(k.id.callIndex);
    head.textMap(k.params);
    head.raw(k.output.dtype);
    head.list(k.output.shape);
    head.finish();
    k.output.bytes.resize(std::size_t(at.dataSize));
    file_.read(at.offset + at.headSize, k.output.bytes.data(), at.dataSize);
    return k;
  }

 private:
  struct Place {
    uint64_t offset = 0, headSize = 0, dataSize = 0;
  };
  util::SpoolFile file_;
  std::vector<Place> at_;
};

// What a replay gathers while the recorded session is open, for the run it writes after.
struct Replay {
  PlaybackResult r;
  Table errors = callErrorTable();
  Table injections = injectionTable();
  Curve goldenCurve, candidateCurve;
  store::RunInfo source;
  explicit Replay(const PlaybackOptions& o) : kept(o.out.empty() ? o.session : o.out) {}
  OutputSpool kept;
  std::string campaign;
  KernelFailures failures;
};

kernels::PluginPlacement placement(const PlaybackOptions& o) {
  return o.kernelInProcess ? kernels::PluginPlacement::InProcess : kernels::PluginPlacement::KernelHost;
}

void checkShard(const PlaybackOptions& o) {
  if (o.shardCount < 1 || o.shardIndex < 0 || o.shardIndex >= o.shardCount)
    throw std::invalid_argument("shard " + std::to_string(o.shardIndex) + "/" + std::to_string(o.shardCount) +
                                " does not exist");
  if (o.shardCount > 1 && (o.storeOutputs || o.resumeIterations > 0))
    throw std::invalid_argument("--store-outputs and --resume replay in one process: drop --shard");
  if (o.shardCount > 1 && o.out.empty())
    throw std::invalid_argument("a shard of a replay goes to its own session: give --out");
}

int64_t recordedCalls(const store::SessionReader& reader, const std::string& run) {
  int64_t n = 0;
  for (const store::SessionReader::IterationEntry& e : reader.iterationIndex(run)) n += e.calls;
  return n;
}

// The recorded run to replay (its header: its calls are read an iteration at a time, chooseCalls):
// the one asked for, or the first profile run with calls. A replay's memory grows neither with the
// calls of that run nor with the runs the session holds beside it.
store::RunInfo findSourceRun(const PlaybackOptions& o, const store::SessionReader& reader, const store::SessionSummary& s) {
  // Only a profile run holds the recorded inputs a replay needs (a playback run with stored
  // outputs has calls too, but only their outputs).
  for (const store::RunInfo& run : s.runs) {
    if (o.run.empty() ? run.spec.kind != "profile" : run.name != o.run) continue;
    if (run.spec.kind != "profile")
      throw std::invalid_argument("run '" + run.name + "' of '" + o.session + "' is a " + run.spec.kind +
                                  " run, not a recording: replay a profile run (peat info lists them)");
    if (o.run.empty() && recordedCalls(reader, run.name) == 0) continue;
    return run;
  }
  throw std::invalid_argument(o.run.empty() ? "session '" + o.session + "' has no recorded calls to replay"
                                            : "session '" + o.session + "' has no run '" + o.run + "'");
}

// The calls a process replays, as places in the source run: its iterations' names, and each chosen
// call's iteration (an index into them) and position in that iteration, in recorded order. Eight
// bytes a call where a call's whole description (about 1.5 KB: path, tensor list, parameters) was
// kept before, and the 70,000 calls of a 5,000-iteration LeNet recording made replay grow by them.
struct Chosen {
  uint32_t iteration = 0, call = 0;
};
struct ChosenCalls {
  std::vector<store::SessionReader::IterationEntry> iterations;
  std::vector<Chosen> calls;
};

// The calls this process replays, read an iteration at a time without their tensor lists; those of
// other ops, beyond --max-calls or that the kernel does not run are counted in `skipped`.
ChosenCalls chooseCalls(const PlaybackOptions& o, const store::SessionReader& reader, const std::string& run,
                        const kernels::Kernel& kernel, int64_t& skipped) {
  ChosenCalls chosen;
  chosen.iterations = reader.iterationIndex(run);
  if (chosen.iterations.size() > UINT32_MAX) throw std::invalid_argument("run '" + run + "' has too many iterations");
  std::vector<Chosen>& calls = chosen.calls;
  for (std::size_t i = 0; i < chosen.iterations.size(); ++i) {
    if (!chosen.iterations[i].complete) continue;  // the one in flight when its writer died: not read
    const store::IterationInfo it = reader.iteration(run, chosen.iterations[i].name, false);
    for (std::size_t k = 0; k < it.calls.size() && k < UINT32_MAX; ++k) {
      const store::CallInfo& c = it.calls[k];
      // A call of an op the slot has no kernel for (conv3d, an aten op recorded by the Python
      // package) is another recorder's: counted as skipped, replayed by `python3 -m peat playback`.
      const auto kind = ops::opByName(c.id.op);
      if (!kind) {
        ++skipped;
        continue;
      }
      const auto variant = c.params.find("variant");
      const auto v = ops::Variant(variant == c.params.end() ? 0 : variant->second);
      if ((o.op && *o.op != *kind) || !kernel.supports(*kind, v, c.params) || (!o.call.empty() && c.path != o.call)) {
        ++skipped;
        continue;
      }
      calls.push_back({uint32_t(i), uint32_t(k)});
    }
  }
  if (!o.call.empty() && calls.empty())
    throw std::invalid_argument("run '" + run + "' has no call '" + o.call + "' that kernel '" + kernel.name() +
                                "' runs (peat info --calls lists them)");
  if (o.maxCalls > 0 && int64_t(calls.size()) > o.maxCalls) {
    skipped += int64_t(calls.size()) - o.maxCalls;
    calls.resize(std::size_t(o.maxCalls));
  }
  if (o.shardCount > 1) {
    std::vector<Chosen> mine;
    for (std::size_t p = std::size_t(o.shardIndex); p < calls.size(); p += std::size_t(o.shardCount)) mine.push_back(calls[p]);
    if (mine.empty())
      throw std::invalid_argument("shard " + std::to_string(o.shardIndex) + "/" + std::to_string(o.shardCount) +
                                  " has no call to replay: the replay has only " + std::to_string(calls.size()));
    calls.swap(mine);
  }
  calls.shrink_to_fit();
  return chosen;
}

// A recorded conv2d call's shapes against its geometry (a session from elsewhere: a padding of 700
// recorded beside a 28 x 28 input made the kernels compute a 1424 x 1424 output, 6 GB, before its
// shape was found wrong). The image's H x W (x; for grad_input its in_h, in_w), the kernel's
// (w; for grad_weight its k_h, k_w) and the output's (out; dy for the gradients) must agree.
void checkConvShapes(const std::string& path, const ops::OpCall& call, const at::Tensor& recorded) {
  if (call.kind != ops::OpKind::Conv2d || call.inputs.size() < 2) return;
  const ops::ConvGeometry g = ops::convGeometry(call);
  const at::Tensor& first = call.inputs[0];
  const at::Tensor& second = call.inputs[1];
  const bool forward = call.variant == ops::Variant::Forward, gradInput = call.variant == ops::Variant::GradInput;
  const at::Tensor& out = forward ? recorded : first;  // [N, Co, oh, ow]
  const at::Tensor* image = forward ? &first : gradInput ? nullptr : &second;
  const at::Tensor* weight = forward || gradInput ? &second : nullptr;
  if (out.dim() != 4 || (image && image->dim() != 4) || (weight && weight->dim() != 4)) return;  // the op checks ranks
  const int64_t h = image ? image->size(2) : call.paramOr("in_h", -1), w = image ? image->size(3) : call.paramOr("in_w", -1);
  const int64_t kh = weight ? weight->size(2) : call.paramOr("k_h", -1), kw = weight ? weight->size(3) : call.paramOr("k_w", -1);
  const auto extent = [](int64_t size, int64_t pad, int64_t dilation, int64_t kernel, int64_t stride) {
    const int64_t room = size + 2 * pad - dilation * (kernel - 1) - 1;
    return size < 1 || kernel < 1 || room < 0 ? int64_t(-1) : room / stride + 1;
  };
  const int64_t oh = extent(h, g.padH, g.dilationH, kh, g.strideH), ow = extent(w, g.padW, g.dilationW, kw, g.strideW);
  if (oh != out.size(2) || ow != out.size(3))
    throw std::runtime_error("recorded call " + path + " is inconsistent: a conv2d of a " + std::to_string(h) + "x" +
                             std::to_string(w) + " image with a " + std::to_string(kh) + "x" + std::to_string(kw) +
                             " kernel (" + g.text() + ") gives " + std::to_string(oh) + "x" + std::to_string(ow) +
                             ", but its output is " + std::to_string(out.size(2)) + "x" + std::to_string(out.size(3)));
}

// Replays one recorded call through the kernel and records its error and injections; false when
// the kernel failed the call in its host (its outcome is recorded, no output kept).
bool replayCall(const PlaybackOptions& o, store::SessionReader& reader, kernels::Kernel& kernel,
                const store::CallInfo& c, Replay& p) {
  ops::OpCall call;
  call.kind = *ops::opByName(c.id.op);
  call.params = c.params;
  const int64_t variant = call.params.count("variant") ? call.params.at("variant") : 0;
  if (variant < 0 || variant > int64_t(ops::Variant::Update))
    throw std::runtime_error("recorded call " + c.path + " has variant " + std::to_string(variant) + ", which no op has");
  call.variant = ops::Variant(variant);
  call.params.erase("variant");
  // Straight from HDF5 into tensor memory: no intermediate copies.
  auto load = [&](const store::TensorInfo& t) {
    const bool integer = t.dtype == "int64";
    at::Tensor out = at::empty(std::vector<int64_t>(t.shape.begin(), t.shape.end()), integer ? at::kLong : at::kFloat);
    reader.readTensorInto(p.source.name, c.path, t.name, integer ? store::DType::I64 : store::DType::F32,
                          out.data_ptr(), uint64_t(out.numel()));
    return out;
  };
  at::Tensor recorded;
  for (const store::TensorInfo& t : c.tensors) {  // input_0, input_1, ... and output, in name order
    if (t.name == "output")
      recorded = load(t);
    else if (t.name.rfind("input_", 0) == 0)  // not the aux_ tensors a Python golden replay needs
      call.inputs.push_back(load(t));
  }
  if (!recorded.defined()) throw std::runtime_error("recorded call " + c.path + " has no output");
  checkConvShapes(c.path, call, recorded);
  const std::string callText = "it " + std::to_string(c.id.iteration) + " call " + std::to_string(c.id.callIndex) +
                               " " + c.id.layer + " " + c.id.op + " " + ops::variantName(call.variant);
  at::Tensor candidate;
  try {
    candidate = kernel.run(call, {callText, c.id.iteration, c.id.callIndex}).contiguous();
  } catch (const kernels::KernelCallFailed& e) {
    addFailedCall(p.errors, c.id, call.variant, e.outcome());
    p.failures.add(e.outcome(), callText, e.what());
    kernel.takeInjections();
    ++p.r.replayed;
    return false;
  }
  if (candidate.sizes() != recorded.sizes())
    throw std::runtime_error("kernel '" + kernel.name() + "' returned a wrong shape for " + callText);
  const analyzer::ErrorSummary e =
      analyzer::summarize(recorded.data_ptr<float>(), candidate.data_ptr<float>(), uint64_t(recorded.numel()));
  keepWorst(p.r.worst, e);
  addCallError(p.errors, c.id, call.variant, e);
  if (o.storeOutputs) p.kept.add(c.id, c.params, fromTorch(candidate));
  const auto log = kernel.takeInjections();
  p.r.injections += int64_t(log.size());
  addInjections(p.injections, log);
  ++p.r.replayed;
  return true;
}

// A number the source run recorded, checked: a session from someone else may say anything
// ("threads=999999" would start that many threads; "batch=lots" is no number; a batch of millions
// would allocate gigabytes before any check). One sentence naming the run and the attribute.
int64_t recordedInteger(const std::map<std::string, std::string>& a, const std::string& run, const std::string& key,
                        int64_t lo, int64_t hi, std::optional<int64_t> fallback = std::nullopt) {
  const auto it = a.find(key);
  if (it == a.end()) {
    if (fallback) return *fallback;
    throw std::invalid_argument("run '" + util::printable(run) + "' does not record '" + key + "'");
  }
  const std::optional<int64_t> v = util::boundedInteger(it->second, lo, hi);
  if (!v)
    throw std::invalid_argument("run '" + util::printable(run) + "' records " + key + "=\"" +
                                util::printable(it->second.substr(0, 40)) + "\", not a whole number from " +
                                std::to_string(lo) + " to " + std::to_string(hi));
  return *v;
}

// The recorded intra-op thread count, capped at this machine's cores (a replay on fewer cores may
// round differently; the cap only spares the machine thousands of threads).
int recordedThreads(const std::map<std::string, std::string>& a, const std::string& run) {
  const int64_t t = recordedInteger(a, run, "threads", 1, 4096, 1);
  return int(std::min<int64_t>(t, std::max(1u, std::thread::hardware_concurrency())));
}

// The training options the source run was recorded with, each checked (recordedInteger).
TrainOptions recordedTrainOptions(const std::map<std::string, std::string>& a, const std::string& run) {
  TrainOptions t;
  if (!a.count("model")) throw std::invalid_argument("run '" + util::printable(run) + "' does not record 'model'");
  t.model = a.at("model");
  t.batch = recordedInteger(a, run, "batch", 1, 1 << 16);
  const std::optional<uint64_t> seed = a.count("seed") ? util::wholeUnsigned(a.at("seed")) : std::nullopt;
  if (!seed) throw std::invalid_argument("run '" + util::printable(run) + "' records no seed that is a whole number");
  t.seed = *seed;
  const std::optional<double> rate =
      a.count("learning_rate") ? util::boundedReal(a.at("learning_rate"), 0, 1e6) : std::nullopt;
  if (!rate) throw std::invalid_argument("run '" + util::printable(run) + "' records no learning_rate from 0 to 1e6");
  t.learningRate = *rate;
  t.threads = recordedThreads(a, run);
  t.context = recordedInteger(a, run, "context", 1, 1 << 16);
  t.attention = a.count("attention") ? a.at("attention") : "parts";  // sessions before --attention: parts
  t.evalBatches = recordedInteger(a, run, "eval_batches", 0, 1 << 20, 8);
  auto text = [&](const char* key) { return a.count(key) ? a.at(key) : std::string(); };
  t.data = text("data");
  t.task = text("task");
  t.inputMean = text("input_mean");
  t.inputStd = text("input_std");
  t.modelSha256 = text("model_sha256");  // the trainer refuses a model or data file that changed
  t.dataSha256 = text("data_sha256");
  return t;
}

// Resumes training from a checkpoint of the source run twice, golden and with the candidate.
void resumeFromCheckpoint(const PlaybackOptions& o, store::SessionReader& reader, const Progress& progress,
                          Replay& p) {
  PlaybackResult& r = p.r;
  const store::RunInfo& source = p.source;
  if (source.checkpoints.empty()) throw std::invalid_argument("run '" + source.name + "' has no checkpoint to resume from");
  r.resumedFrom = o.resumeFrom >= 0 ? o.resumeFrom : source.checkpoints.front();
  const store::SessionReader::Checkpoint cp = reader.checkpoint(source.name, r.resumedFrom);
  const TrainOptions t = recordedTrainOptions(source.attributes, source.name);
  ops::Dispatcher goldenOps, candidateOps;
  Trainer golden(t, goldenOps), candidate(t, candidateOps);
  golden.loadState(cp.parameters, &cp.optimizer);
  candidate.loadState(cp.parameters, &cp.optimizer);
  ops::SubstitutionPolicy policy;
  policy.candidate = kernels::makeKernel(o.kernel, o.seed, placement(o));
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
    p.goldenCurve.add(it, g, nullptr);
    p.candidateCurve.add(it, c, nullptr);
    addInjections(p.injections, candidateOps.takeInjections());
    candidateOps.takeSubstitutions();
    r.resumedIterations = i + 1;
    progress(i + 1, o.resumeIterations, "resuming");
  }
  r.goldenLoss = g.loss;
  r.candidateLoss = c.loss;
  r.goldenTestAccuracy = golden.evaluate().accuracy;
  r.candidateTestAccuracy = candidate.evaluate().accuracy;
}

// Everything that reads the recorded session: the source run, the replayed calls and the resumed
// training. The reader closes on return, before the session is opened for writing.
void replayFromSession(const PlaybackOptions& o, kernels::Kernel& kernel, const Progress& progress, Replay& p) {
  store::SessionReader reader(o.session);  // probed first in a helper process (core/store/probe.h)
  const store::SessionSummary s = reader.summaryWithoutCalls();
  p.source = findSourceRun(o, reader, s);
  const store::RunInfo& source = p.source;
  p.r.run = source.name;
  const std::string recordedModel = source.attributes.count("model") ? source.attributes.at("model") : "";
  if (!o.model.empty() && o.model != recordedModel)
    throw std::invalid_argument("session '" + o.session + "' was recorded from model '" + recordedModel +
                                "', not '" + o.model + "'");

  // Replays run with the recorded intra-op thread count: BLAS may block its sums by thread.
  if (source.attributes.count("threads")) at::set_num_threads(recordedThreads(source.attributes, source.name));

  const ChosenCalls chosen = chooseCalls(o, reader, source.name, kernel, p.r.skipped);
  p.campaign = playbackCampaign(o, source.name, s.created);
  if (chosen.calls.empty())
    throw std::invalid_argument("no recorded call of run '" + source.name + "' can be replayed by kernel '" +
                                kernel.name() + "'");

  // An iteration's calls read once (with their tensor lists), its chosen calls replayed, then the next.
  const std::vector<Chosen>& calls = chosen.calls;
  bool stop = false;
  for (std::size_t next = 0; next < calls.size() && !stop;) {
    const uint32_t at = calls[next].iteration;
    const store::IterationInfo it = reader.iteration(source.name, chosen.iterations[at].name);
    for (; next < calls.size() && calls[next].iteration == at; ++next) {
      if (progress.cancelled()) {
        p.r.cancelled = stop = true;
        break;
      }
      if (calls[next].call >= it.calls.size())
        throw std::runtime_error("iteration " + chosen.iterations[at].name + " of run '" + source.name +
                                 "' changed while it was replayed");
      const store::CallInfo& c = it.calls[calls[next].call];
      const bool ok = replayCall(o, reader, kernel, c, p);
      progress(p.r.replayed, int64_t(calls.size()), c.id.layer + " " + c.id.op);
#ifdef __GLIBC__
      // The freed tensors of the calls replayed so far go back to the system now and then: the heap
      // otherwise keeps them (the torch commands raise the trim threshold for speed) and fragments,
      // and the peak grew with the session's size (1.38 GB at 70,000 LeNet calls).
      if (p.r.replayed % 256 == 0) malloc_trim(0);
#endif
      if (!ok && o.stopOnKernelFailure) {
        p.r.stoppedOnKernelFailure = stop = true;
        break;
      }
    }
  }
  p.r.failedCalls = p.failures.calls;
  p.r.kernelFailures = p.failures.summary(p.r.replayed);
  p.r.firstKernelFailure = p.failures.first;

  if (o.resumeIterations > 0 && !p.r.cancelled && !p.r.stoppedOnKernelFailure) resumeFromCheckpoint(o, reader, progress, p);
}

// Writes the replay as a run of --out (or of the recorded session), under a name not yet taken.
void writePlaybackRun(const PlaybackOptions& o, const kernels::Kernel& kernel, Replay& p) {
  PlaybackResult& r = p.r;
  const std::string target = o.out.empty() ? o.session : o.out;
  struct stat existing {};
  store::SessionWriter w(target, {}, ::stat(target.c_str(), &existing) == 0 ? store::WriteMode::Append : store::WriteMode::Create);
  r.session = target;
  std::string name = o.runName.empty() ? "playback-" + kernels::parseKernelSpec(o.kernel).name : o.runName;
  for (int n = 2; w.hasRun(name); ++n)
    name = (o.runName.empty() ? "playback-" + kernels::parseKernelSpec(o.kernel).name : o.runName) + "-" + std::to_string(n);
  w.beginRun({name, "playback", o.kernel, "replay of run " + p.source.name + " through " + kernel.name()});
  w.setRunAttribute("source_run", p.source.name);
  w.setRunAttribute("model", p.source.attributes.count("model") ? p.source.attributes.at("model") : "");
  w.setRunAttribute("command_line", o.commandLine);
  w.setRunAttribute("campaign", p.campaign);
  w.setRunAttribute("shard", std::to_string(o.shardIndex) + "/" + std::to_string(o.shardCount));
  if (!o.out.empty()) w.setRunAttribute("source_session", o.session);
  if (const std::string declared = kernel.declaredFormats(); !declared.empty()) w.setRunAttribute("declared_formats", declared);
  w.writeTable("call_errors", p.errors.columns());
  p.failures.setAttributes(w, r.replayed);
  if (p.injections.rows() > 0) w.writeTable("injections", p.injections.columns());
  if (!p.kept.empty()) {  // the candidate's outputs, at the same iteration and call paths as the source run
    w.setCallCompression(4);
    // said first: a run killed while its outputs are written keeps those of its complete
    // iterations, and analyze reads them (it refused the run as holding none)
    w.setRunAttribute("stored_outputs", "1");
    int64_t open = -1;
    [[maybe_unused]] int64_t stored = 0;
    for (std::size_t i = 0; i < p.kept.size(); ++i) {
      const OutputSpool::Kept k = p.kept.read(i);
      if (k.id.iteration != open) {
        if (open >= 0) w.endIteration();
        w.beginIteration(k.id.iteration);
        open = k.id.iteration;
      }
      w.recordCall(k.id, {{"output", k.output.view()}}, k.params);
#ifdef __GLIBC__
      if (++stored % 256 == 0) malloc_trim(0);  // as in the replay loop
#endif
    }
    w.endIteration();
  }
  if (r.resumedIterations > 0) {
    w.setRunAttribute("resumed_from", std::to_string(r.resumedFrom));
    w.writeTable("resume_golden_curve", p.goldenCurve.table.columns());
    w.writeTable("resume_candidate_curve", p.candidateCurve.table.columns());
  }
  w.endRun(r.cancelled                  ? store::RunStatus::Cancelled
           : r.stoppedOnKernelFailure ? store::RunStatus::Failed
                                      : store::RunStatus::Complete);
  r.run = name;
}

}  // namespace

std::string playbackCampaign(const PlaybackOptions& o, const std::string& sourceRun, const std::string& sessionCreated) {
  return util::CampaignKey()
      .add("kernel", o.kernel)
      .add("seed", o.seed)
      .add("op", o.op ? ops::opName(*o.op) : "all")
      .add("max_calls", o.maxCalls)
      .add("source_run", sourceRun)
      .add("session_created", sessionCreated)
      .text();
}

PlaybackResult runPlayback(const PlaybackOptions& o, const Progress& progress) {
  const auto start = Clock::now();
  Replay p(o);
  p.r.session = o.session;
  std::unique_ptr<kernels::Kernel> kernel = kernels::makeKernel(o.kernel, o.seed, placement(o));
  checkShard(o);
  replayFromSession(o, *kernel, progress, p);
  writePlaybackRun(o, *kernel, p);
  p.r.seconds = since(start);
  return p.r;
}

}  // namespace peat::train
