// SPDX-License-Identifier: MIT
// The commands that train or run models: peat train, profile, playback, runtime-fi, kernels, models.
// They live in libpeat_torch.so; the torch-free `peat` parses their options (app/peat/cmd_torch.cpp)
// and hands the parsed command over through peat_torch_run.
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>

#include <c10/util/Exception.h>

#include "core/cli/torch_commands.h"
#include "core/util/events.h"
#include "core/plugin/plugin_probe.h"
#include "core/plugin/dtypes.h"
#include "core/plugin/peat/kernel_abi.h"
#include "core/torch/kernels/kernel.h"
#include "core/torch/models/script_model.h"
#include "core/torch/models/zoo.h"
#include "core/torch/torch_entry.h"
#include "core/torch/train/detect_eval.h"
#include "core/torch/train/profiler.h"
#include "core/util/text.h"
#include "core/util/json_writer.h"

namespace peat::torchcli {
namespace {

std::atomic<bool> interrupted{false};

void onInterrupt(int) {
  interrupted.store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C stops at once
}

// A progress bar with ETA on stderr, drawn only when stderr is a terminal, at most 10 times a second;
// and the same progress, with the run's structured events, on the event stream (docs/events.md).
class ProgressBar {
 public:
  explicit ProgressBar(std::string what) : what_(std::move(what)), tty_(::isatty(STDERR_FILENO) == 1), events_(what_) {}
  ~ProgressBar() {
    if (drawn_) std::fputs("\n", stderr);
  }
  // The profiler's progress callbacks, drawn here; Ctrl-C cancels.
  train::Progress progress() {
    return {[this](int64_t d, int64_t t, const std::string& s) { (*this)(d, t, s); }, &interrupted,
            [this](const events::Event& e) { event(e); }};
  }
  // Losses arrive every step: they travel with the (throttled) progress events, the newest first.
  void event(const events::Event& e) {
    if (e.type == "loss") pendingLoss_ = e;
    else events::send(e);
  }
  void operator()(int64_t done, int64_t total, const std::string& status) {
    if (events_(done, total, status) && pendingLoss_) {
      events::send(*pendingLoss_);
      pendingLoss_.reset();
    }
    if (!tty_) return;
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double eta = done > 0 ? elapsed * double(total - done) / double(done) : 0;
    const int width = 28, filled = total > 0 ? int(width * done / total) : 0;
    std::fprintf(stderr, "\r%s [%s%s] %3d%% %lld/%lld  %s  ETA %d:%02d   ", what_.c_str(),
                 std::string(std::size_t(filled), '#').c_str(), std::string(std::size_t(width - filled), '.').c_str(),
                 total > 0 ? int(100 * done / total) : 0, static_cast<long long>(done), static_cast<long long>(total),
                 status.c_str(), int(eta) / 60, int(eta) % 60);
    std::fflush(stderr);
    drawn_ = true;
  }

 private:
  std::string what_;
  bool tty_;
  events::Progress events_;
  std::optional<events::Event> pendingLoss_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_{};
};

// Errors are one line; LibTorch's messages can carry more.
std::string firstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// Prints the error and ends the process at once. After a failed write (a full disk), HDF5 may hold a
// file it could not close, and its exit handler would crash on it: skip the exit handlers instead.
int failNow(const std::string& message) {
  std::cerr << "peat: error: " << message << std::endl;
  events::error(message, 1);
  std::fflush(stdout);
  std::_Exit(1);
}

// Calls a user kernel failed in its kernel host: a warning, or with --stop-on-kernel-failure the
// error (exit 1) once the run is stored.
void reportKernelFailures(const std::string& summary, const std::string& first, bool stopped, const std::string& run,
                          const std::string& session) {
  if (summary.empty()) return;
  const std::string where = run.empty() ? "the FI runs of " + session : "run " + run + " of " + session;
  if (stopped)
    throw std::runtime_error("stopped at the first call the kernel failed (--stop-on-kernel-failure): " + first +
                             "; " + where + " keeps the calls before it and is marked failed");
  std::cerr << "peat: warning: the kernel failed " << summary << " in its kernel host; first " << first
            << "; each call's outcome is in the table call_errors of " << where << " (docs/plugins.md)\n";
}

std::string megabytes(uint64_t bytes) {
  std::ostringstream s;
  s.precision(3);
  s << double(bytes) / (1 << 20) << " MiB";
  return s.str();
}

std::pair<int, int> parseShardSpec(const std::string& text) {
  if (const auto shard = util::parseShard(text)) return *shard;
  throw std::invalid_argument("--shard '" + text + "' is not INDEX/COUNT with 0 <= INDEX < COUNT, e.g. 0/4");
}

// "10,100,1000" -> {10, 100, 1000}; each a whole number >= 0, at least one.
std::vector<int64_t> parseCounts(const std::string& option, const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& item : util::splitText(text, ',')) {
    std::size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
    }
    if (used != item.size() || v < 0) throw std::invalid_argument(option + " '" + text + "' is not a list of whole numbers >= 0");
    out.push_back(v);
  }
  if (out.empty()) throw std::invalid_argument(option + " '" + text + "' is empty");
  return out;
}

std::optional<ops::OpKind> parseOp(const std::string& name, bool allowAll) {
  if (allowAll && (name == "all" || name.empty())) return std::nullopt;
  const auto op = ops::opByName(name);
  if (!op) throw std::invalid_argument("unknown op '" + name + "'; valid ops: " + ops::opList() + (allowAll ? ", all" : ""));
  return op;
}

train::TrainOptions trainOptions(const cli::TorchCommand& c) {
  train::TrainOptions t;
  t.model = c.model;
  t.iterations = c.iterations;
  t.batch = c.batch;
  t.learningRate = c.learningRate;
  t.seed = c.seed;
  t.threads = c.threads;
  t.evalEvery = c.evalEvery;
  t.evalBatches = c.evalBatches;
  t.context = c.context;
  t.attention = c.attention;
  t.init = c.init;
  t.data = c.data;
  t.task = c.task;
  t.inputMean = c.inputMean;
  t.inputStd = c.inputStd;
  return t;
}

void printErrorSummary(JsonWriter& j, const analyzer::ErrorSummary& e) {
  j.beginObject().field("mismatched", e.mismatched).field("max_abs", e.maxAbs).field("mean_abs", e.meanAbs);
  j.field("max_rel", e.maxRel).field("mean_rel", e.meanRel).field("max_ulp", e.maxUlp);
  j.field("newly_non_finite", e.newlyNonFinite).endObject();
}

int runProfileCommand(train::ProfileOptions& o, bool force, bool json, bool isTrain, const std::string& recordOps,
                      const std::string& commandLine) {
  if (!isTrain) {
    o.recordOps.clear();
    std::stringstream s(recordOps);
    for (std::string item; std::getline(s, item, ',');) {
      if (item.empty()) continue;
      if (const auto op = parseOp(item, true))
        o.recordOps.push_back(*op);
      else  // "all": every op the slot has
        o.recordOps.insert(o.recordOps.end(), ops::allOps().begin(), ops::allOps().end());
    }
  }
  o.mode = force ? store::WriteMode::Overwrite : store::WriteMode::Create;
  o.commandLine = commandLine;
  const train::ProfileResult r = train::runProfile(o, ProgressBar(isTrain ? "train" : "profile").progress());
  events::stored(r.session, "run", r.run);
  if (json) {
    JsonWriter j(std::cout);
    j.beginObject().field("session", r.session).field("run", r.run).field("model", o.train.model);
    j.field("iterations", r.iterations).field("cancelled", r.cancelled).field("parameters", r.parameters);
    j.field("recorded_iterations", r.recordedIterations).field("recorded_calls", r.recordedCalls);
    j.field("checkpoints", r.checkpoints).field("recorded_bytes", r.recordedBytes).field("stored_bytes", r.storedBytes);
    j.field("full_dump_bytes", r.fullDumpBytes).field("file_bytes", r.fileBytes);
    j.field("storage_ratio", r.fullDumpBytes ? double(r.recordedBytes) / double(r.fullDumpBytes) : 0.0);
    j.field("final_loss", r.finalLoss).field("test_loss", r.testLoss).field("test_accuracy", r.testAccuracy);
    j.field("seconds", r.seconds).endObject();
    std::cout << '\n';
  } else {
    std::cout << (isTrain ? "trained " : "profiled ") << o.train.model << " (" << r.parameters << " parameters) for "
              << r.iterations << " iterations in " << r.seconds << " s" << (r.cancelled ? " (stopped early)" : "")
              << "\n  final batch loss " << r.finalLoss << ", test loss " << r.testLoss << ", test accuracy "
              << 100 * r.testAccuracy << "%\n";
    if (!isTrain)
      std::cout << "  recorded " << r.recordedCalls << " calls in " << r.recordedIterations << " iterations and "
                << r.checkpoints << " checkpoints: " << megabytes(r.recordedBytes) << " against "
                << megabytes(r.fullDumpBytes) << " for a full dump ("
                << (r.fullDumpBytes ? 100.0 * double(r.recordedBytes) / double(r.fullDumpBytes) : 0.0)
                << "%); shared tensors stored once: " << megabytes(r.storedBytes) << ", file " << megabytes(r.fileBytes)
                << '\n';
    std::cout << "  session " << r.session << ", run " << r.run << '\n';
  }
  return r.cancelled ? 130 : 0;
}

}  // namespace

int runPlaybackCommand(const cli::TorchCommand& c) {
  const bool json = c.json;
  train::PlaybackOptions playback;
  playback.session = c.session;
  playback.kernel = kernels::withDevice(c.kernel, c.device);
  playback.run = c.run;
  playback.model = c.expectModel;
  playback.maxCalls = c.maxCalls;
  playback.call = c.call;
  playback.seed = c.seed;
  playback.resumeIterations = c.resumeIterations;
  playback.resumeFrom = c.resumeFrom;
  playback.runName = c.runName;
  playback.storeOutputs = c.storeOutputs;
  playback.kernelInProcess = c.inProcess;
  playback.stopOnKernelFailure = c.stopOnKernelFailure;
  playback.out = c.out;
  playback.op = parseOp(c.op, true);
  std::tie(playback.shardIndex, playback.shardCount) = parseShardSpec(c.shard);
  playback.commandLine = c.commandLine;
  // the bar lives as long as the run: to the end of this statement
  const train::PlaybackResult r = train::runPlayback(playback, ProgressBar("playback").progress());
  events::stored(r.session, "run", r.run);
  if (json) {
    JsonWriter j(std::cout);
    j.beginObject().field("session", r.session).field("run", r.run).field("kernel", playback.kernel);
    j.field("replayed_calls", r.replayed).field("skipped_calls", r.skipped).field("cancelled", r.cancelled);
    j.field("injections", r.injections).field("seconds", r.seconds);
    j.field("failed_calls", r.failedCalls).field("kernel_failures", r.kernelFailures);
    j.field("calls_per_second", r.seconds > 0 ? double(r.replayed) / r.seconds : 0.0);
    j.key("worst");
    printErrorSummary(j, r.worst);
    if (r.resumedIterations > 0) {
      j.key("resume").beginObject().field("from", r.resumedFrom).field("iterations", r.resumedIterations);
      j.field("golden_loss", r.goldenLoss).field("candidate_loss", r.candidateLoss);
      j.field("golden_test_accuracy", r.goldenTestAccuracy);
      j.field("candidate_test_accuracy", r.candidateTestAccuracy).endObject();
    }
    j.endObject();
    std::cout << '\n';
  } else {
    std::cout << "replayed " << r.replayed << " calls through " << playback.kernel << " in " << r.seconds << " s ("
              << (r.seconds > 0 ? double(r.replayed) / r.seconds : 0.0) << " calls/s), skipped " << r.skipped
              << (r.cancelled ? " (stopped early)" : "") << "\n  worst call: max abs error " << r.worst.maxAbs
              << ", max rel error " << r.worst.maxRel << ", max ULP " << r.worst.maxUlp << ", mismatches "
              << r.worst.mismatched << " of " << r.worst.elements << '\n';
    if (r.injections) std::cout << "  " << r.injections << " injections logged\n";
    if (r.resumedIterations > 0)
      std::cout << "  resumed " << r.resumedIterations << " iterations from checkpoint " << r.resumedFrom
                << ": loss golden " << r.goldenLoss << " vs candidate " << r.candidateLoss
                << "; test accuracy golden " << 100 * r.goldenTestAccuracy << "% vs candidate "
                << 100 * r.candidateTestAccuracy << "%\n";
    if (r.failedCalls) std::cout << "  failed in the kernel host: " << r.kernelFailures << '\n';
    std::cout << "  stored as run " << r.run << " in " << r.session << '\n';
  }
  reportKernelFailures(r.kernelFailures, r.firstKernelFailure, r.stoppedOnKernelFailure, r.run, r.session);
  return r.cancelled ? 130 : 0;
}

int runRuntimeFiCommand(const cli::TorchCommand& c) {
  const bool json = c.json;
  train::RuntimeFiOptions fi;
  fi.train = trainOptions(c);
  fi.kernel = kernels::withDevice(c.kernel, c.device);
  fi.layer = c.layer;
  fi.probability = c.probability;
  fi.out = c.out;
  fi.op = parseOp(c.op, true);
  const std::vector<int64_t> everys = parseCounts("--every", c.every);
  if (everys.size() == 1)
    fi.every = everys.front();
  else
    fi.everySweep = everys;
  if (!c.seeds.empty())
    for (int64_t seed : parseCounts("--seeds", c.seeds)) fi.seedSweep.push_back(uint64_t(seed));
  std::tie(fi.shardIndex, fi.shardCount) = parseShardSpec(c.shard);
  if (fi.seedSweep.empty() && fi.shardCount > 1 && fi.everySweep.empty())
    throw std::invalid_argument("--shard splits a sweep: give a list to --every or --seeds");
  fi.forward = c.phase != "backward";
  fi.backward = c.phase != "forward";
  fi.mode = c.force ? store::WriteMode::Overwrite : store::WriteMode::Create;
  fi.commandLine = c.commandLine;
  fi.kernelInProcess = c.inProcess;
  fi.stopOnKernelFailure = c.stopOnKernelFailure;
  const train::RuntimeFiResult r = train::runRuntimeFi(fi, ProgressBar("runtime-fi").progress());
  events::stored(r.session, "session", r.session);
  if (json) {
    JsonWriter j(std::cout);
    j.beginObject().field("session", r.session).field("kernel", fi.kernel).field("iterations", r.iterations);
    j.field("points", r.points);
    j.field("cancelled", r.cancelled).field("substituted_calls", r.substitutions).field("injections", r.injections);
    j.field("failed_calls", r.failedCalls).field("failed_steps", r.failedSteps);
    j.field("kernel_failures", r.kernelFailures);
    j.field("golden_loss", r.goldenLoss).field("fi_loss", r.fiLoss);
    j.field("golden_test_accuracy", r.goldenTestAccuracy).field("fi_test_accuracy", r.fiTestAccuracy);
    j.field("seconds", r.seconds).key("worst");
    printErrorSummary(j, r.worst);
    j.endObject();
    std::cout << '\n';
  } else {
    std::cout << "runtime FI of " << fi.kernel << " on " << c.op << " over " << r.iterations << " iterations in "
              << r.seconds << " s" << (r.cancelled ? " (stopped early)" : "") << "\n  " << r.substitutions
              << " substituted calls; worst max abs error " << r.worst.maxAbs << ", max ULP " << r.worst.maxUlp
              << "\n  final batch loss golden " << r.goldenLoss << " vs FI " << r.fiLoss
              << "; test accuracy golden " << 100 * r.goldenTestAccuracy << "% vs FI " << 100 * r.fiTestAccuracy
              << "%\n  session " << r.session;
    if (r.points > 1 || fi.shardCount > 1 || !fi.everySweep.empty() || !fi.seedSweep.empty())
      std::cout << " (" << r.points << " sweep points, shard " << fi.shardIndex << "/" << fi.shardCount
                << "; the last point's losses above)\n";
    else
      std::cout << " (runs golden and runtime-fi-" << kernels::parseKernelSpec(fi.kernel).name << ")\n";
    if (r.failedCalls)
      std::cout << "  failed in the kernel host: " << r.kernelFailures << ", in " << r.failedSteps
                << " steps (they kept golden's output)\n";
  }
  reportKernelFailures(r.kernelFailures, r.firstKernelFailure, r.stoppedOnKernelFailure, "", r.session);
  return r.cancelled ? 130 : 0;
}

namespace {

void writeDetectEval(JsonWriter& j, const train::DetectEvalResult& r) {
  const int total = int(r.cases.size());
  j.field("cases", total).field("correct", r.correct);
  j.field("top1_accuracy", total ? double(r.correct) / total : 0.0);
  j.field("format_checked", r.formatChecked).field("format_correct", r.formatCorrect);
  j.field("format_tied", r.formatTied);
  j.key("format_confusion").beginObject();
  for (const auto& [expected, row] : r.formatConfusion) {
    j.key(expected).beginObject();
    for (const auto& [got, count] : row) j.field(got, count);
    j.endObject();
  }
  j.endObject();
  // both errors: a bug called legitimate, a legitimate difference called a fault (unknown apart)
  j.field("fault_pairs", r.faults).field("legitimate_verdicts_on_faults", r.faultLegitimateVerdicts);
  j.field("legitimate_pairs", r.legitimate).field("fault_verdicts_on_legitimate", r.legitimateFaultVerdicts);
  j.field("unknown_on_legitimate", r.legitimateUnknown);
  j.key("confusion").beginObject();
  for (const auto& [expected, row] : r.confusion) {
    j.key(expected).beginObject();
    for (const auto& [got, count] : row) j.field(got, count);
    j.endObject();
  }
  j.endObject().key("misses").beginArray();
  for (const auto& miss : r.cases)
    if (!miss.correct)
      j.beginObject().field("op", miss.op).field("kernel", miss.kernel).field("expected", miss.expected).field("got", miss.got)
          .endObject();
  j.endArray();
}

void printDetectEval(const train::DetectEvalResult& r) {
  const int total = int(r.cases.size());
  std::printf("%-20s %s\n", "expected", "detected (count)");
  for (const auto& [expected, row] : r.confusion) {
    std::printf("%-20s", expected.c_str());
    for (const auto& [got, count] : row) std::printf(" %s:%d", got.c_str(), count);
    std::printf("\n");
  }
  std::printf("top-1 accuracy %d/%d = %.1f%%; precision format right %d/%d\n", r.correct, total,
              total ? 100.0 * r.correct / total : 0.0, r.formatCorrect, r.formatChecked);
  std::printf("legitimate verdicts on faults %d/%d; fault verdicts on legitimate differences %d/%d (unknown on "
              "them: %d, nothing reproduced them)\n",
              r.faultLegitimateVerdicts, r.faults, r.legitimateFaultVerdicts, r.legitimate, r.legitimateUnknown);
  std::printf("precision format (expected: named):");
  for (const auto& [expected, row] : r.formatConfusion) {
    std::printf(" %s ->", expected.c_str());
    for (const auto& [got, count] : row) std::printf(" %s:%d", got.c_str(), count);
    std::printf(";");
  }
  std::printf("\n");
  if (r.formatTied)
    std::printf("  %d of the %d wrong formats are tied: the expected format reproduces the candidate as well "
                "(also_reproduced_by), identical rounding on these inputs\n",
                r.formatTied, r.formatChecked - r.formatCorrect);
  for (const auto& miss : r.cases)
    if (!miss.correct)
      std::printf("  miss: %s %s expected %s, got %s\n", miss.op.c_str(), miss.kernel.c_str(), miss.expected.c_str(),
                  miss.got.c_str());
}

}  // namespace

int runDetectEvalCommand(const cli::TorchCommand& c) {
  if (c.evalSeeds == 0 && c.evalExternal.empty()) throw std::invalid_argument("--seeds 0 judges no corpus: add --external DIR");
  const train::DetectEvalRun run = train::runDetectEval(c.evalSeeds);
  // the external corpus, read before anything is printed so that a bad labels file is one error line
  std::optional<train::ExternalEvalRun> external;
  if (!c.evalExternal.empty()) external = train::runExternalEval(c.evalExternal);
  if (c.json) {
    JsonWriter j(std::cout);
    j.beginObject();
    writeDetectEval(j, run.outputsOnly);  // the whole corpus from outputs alone (the keys it always had)
    j.key("with_operands").beginObject();  // the linear and conv2d pairs again, with their operands
    writeDetectEval(j, run.withOperands);
    j.endObject();
    if (external) {  // beside it, never mixed in: the pairs made elsewhere, every part and each
      j.key("external").beginObject().field("labels", external->labels);
      writeDetectEval(j, external->all);
      j.key("parts").beginObject();
      for (const auto& [part, r] : external->parts) {
        j.key(part).beginObject();
        writeDetectEval(j, r);
        j.endObject();
      }
      j.endObject().key("pairs").beginArray();
      for (const auto& p : external->all.cases) {
        j.beginObject().field("part", p.op).field("name", p.kernel).field("expected", p.expected).field("got", p.got);
        j.field("format", p.gotFormat).field("expected_format", p.expectedFormat).field("confidence", p.confidence);
        j.field("correct", p.correct).key("alternatives").beginArray();
        for (const std::string& a : p.alternatives) j.value(a);
        j.endArray().endObject();
      }
      j.endArray().endObject();
    }
    j.endObject();
    std::cout << '\n';
  } else {
    if (c.evalSeeds > 0) {
      std::printf("Self-made corpus, from the outputs alone (every op):\n");
      printDetectEval(run.outputsOnly);
      std::printf("\nSelf-made corpus, with the operands (linear and conv2d, as a session's recorded calls give them "
                  "to the detector):\n");
      printDetectEval(run.withOperands);
    }
    if (external) {
      std::printf("%sExternal corpus (%s), from the outputs alone:\n", c.evalSeeds > 0 ? "\n" : "",
                  external->labels.c_str());
      printDetectEval(external->all);
      for (const auto& [part, r] : external->parts)
        std::printf("  %-20s top-1 %d/%zu; legitimate verdicts on faults %d/%d; fault verdicts on legitimate pairs "
                    "%d/%d (unknown %d)\n",
                    part.c_str(), r.correct, r.cases.size(), r.faultLegitimateVerdicts, r.faults,
                    r.legitimateFaultVerdicts, r.legitimate, r.legitimateUnknown);
    }
  }
  return 0;
}

// peat kernels --probe FILE: what a user kernel declares and how its probe went.
int describePlugin(const cli::TorchCommand& c) {
  plugin::PluginInfo info;
  try {
    info = plugin::probePlugin(c.probe);
  } catch (const plugin::PluginError& e) {
    throw std::invalid_argument(e.what());
  }
  const std::vector<std::string> slot = plugin::slotOpsOf(info);
  const std::string warning = plugin::probeWarning(info);
  auto variants = [](uint32_t mask) {
    std::vector<std::string> out;
    for (uint32_t v = 0; v < 5; ++v)
      if (mask & (1u << v)) out.push_back(plugin::abiVariantName(v));
    return out;
  };
  if (c.json) {
    JsonWriter j(std::cout);
    j.beginObject().field("name", info.name).field("path", info.path).field("abi", int64_t(info.abiVersion));
    j.field("memory", info.memory == PEAT_MEMORY_HOST ? "host" : "device").key("ops").beginArray();
    if (info.abiVersion < 2) {
      j.beginObject().field("kind", "gemm").key("variants").beginArray().value("forward").endArray();
      j.field("input_dtype", "f32").field("output_dtype", "f32").field("cases", int64_t(1));
      j.field("failed_cases", int64_t(info.probeMismatches ? 1 : 0)).endObject();
    }
    for (const plugin::PluginOp& o : info.ops) {
      j.beginObject().field("kind", plugin::abiOpName(o.kind)).key("variants").beginArray();
      for (const std::string& v : variants(o.variants)) j.value(v);
      j.endArray().field("input_dtype", plugin::dtypeName(o.inputDtype)).field("output_dtype", plugin::dtypeName(o.outputDtype));
      j.key("features").beginArray();
      if (o.features & PEAT_FEATURE_ATTENTION_DROPOUT) j.value("attention_dropout");
      j.endArray().field("cases", int64_t(o.cases)).field("failed_cases", int64_t(o.failedCases));
      if (!o.firstFailure.empty()) j.field("first_failure", o.firstFailure);
      j.endObject();
    }
    j.endArray().key("slot_ops").beginArray();
    for (const std::string& s : slot) j.value(s);
    j.endArray().field("warning", warning).endObject();
    std::cout << '\n';
    return 0;
  }
  std::cout << info.name << " (" << info.path << "): ABI v" << info.abiVersion << ", "
            << (info.memory == PEAT_MEMORY_HOST ? "host" : "device") << " memory\n";
  if (info.abiVersion < 2)
    std::cout << "  gemm        forward                     f32 -> f32   probe "
              << (info.probeMismatches ? "wrong" : "right") << "\n";
  for (const plugin::PluginOp& o : info.ops) {
    std::string vs;
    for (const std::string& v : variants(o.variants)) vs += (vs.empty() ? "" : ",") + v;
    if (o.features & PEAT_FEATURE_ATTENTION_DROPOUT) vs += " (+dropout)";
    std::printf("  %-12s %-40s %s -> %s   probe %u of %u cases right\n", plugin::abiOpName(o.kind).c_str(), vs.c_str(),
                plugin::dtypeName(o.inputDtype).c_str(), plugin::dtypeName(o.outputDtype).c_str(), o.cases - o.failedCases,
                o.cases);
    if (!o.firstFailure.empty()) std::printf("  %-12s first wrong case: %s\n", "", o.firstFailure.c_str());
  }
  std::string ops;
  for (const std::string& s : slot) ops += (ops.empty() ? "" : ", ") + s;
  std::cout << "  runs the slot's " << ops << " calls (peat playback / runtime-fi --op)\n";
  if (!warning.empty()) std::cout << "  warning: " << warning << '\n';
  return 0;
}

int runKernelsCommand(const cli::TorchCommand& c) {
  if (!c.probe.empty()) return describePlugin(c);
  const bool json = c.json;
  if (json) {
    JsonWriter j(std::cout);
    j.beginArray();
    for (const auto& k : kernels::kernelCatalog())
      j.beginObject().field("name", k.name).field("family", k.family).field("ops", k.ops).field("options", k.options)
          .field("summary", k.summary).endObject();
    j.endArray();
    std::cout << '\n';
  } else {
    for (const auto& k : kernels::kernelCatalog())
      std::printf("%-14s %-10s %-5s %-38s %s\n", k.name.c_str(), k.family.c_str(), k.ops.c_str(),
                  k.options.empty() ? "-" : k.options.c_str(), k.summary.c_str());
  }
  return 0;
}

// peat models: the zoo, or a TorchScript file's GEMM sites (--inspect) and their shapes (--input-shape).
int runModelsCommand(const cli::TorchCommand& c) {
  if (c.inspect.empty()) {
    for (const std::string& m : models::modelNames()) std::cout << m << '\n';
    return 0;
  }
  const models::Task task = c.task == "lm" ? models::Task::Text : c.task == "regression" ? models::Task::Regression
                                                                                        : models::Task::Images;
  auto model = models::loadScriptedModel(c.inspect, task, c.insideProbe ? models::Probe::Inside : models::Probe::First,
                                         c.attention == "fused");
  std::vector<models::SiteCall> calls;
  if (!c.inputShape.empty()) {
    const std::vector<int64_t> shape = parseCounts("--input-shape", c.inputShape);
    for (int64_t d : shape)
      if (d <= 0) throw std::invalid_argument("--input-shape '" + c.inputShape + "' has a dimension that is not positive");
    if (!c.insideProbe) models::probeModelForward(c.inspect, shape, task);  // its code, where it cannot hurt
    calls = models::forwardCalls(*model, shape);
  }
  auto callOf = [&](const std::string& layer) -> const models::SiteCall* {
    for (const auto& call : calls)
      if (call.layer == layer) return &call;
    return nullptr;
  };
  if (c.json) {
    JsonWriter j(std::cout);
    j.beginObject().field("model", c.inspect).field("parameters", model->parameterCount());
    j.field("summary", model->routingSummary()).key("sites").beginArray();
    for (const auto& site : model->sites()) {
      j.beginObject().field("layer", site.layer).field("aten", site.aten).field("routed", site.routed);
      j.field("detail", site.detail);
      if (site.routed) j.field("slot_op", site.op);
      if (const auto* call = callOf(site.layer))
        j.field("shapes", call->shapes).field("reduction", call->reduction).field("forward_calls", call->calls);
      j.endObject();
    }
    j.endArray().endObject();
    std::cout << '\n';
    return 0;
  }
  std::cout << c.inspect << ": " << model->parameterCount() << " parameters; " << model->routingSummary() << '\n';
  for (const auto& site : model->sites()) {
    std::printf("  %-44s %-20s %-6s %s\n", site.layer.c_str(), site.aten.c_str(), site.routed ? "routed" : "ATen",
                site.detail.c_str());
    if (const auto* call = callOf(site.layer)) {
      const std::string reduction = call->reduction > 0 ? ", K = " + std::to_string(call->reduction) : "";
      std::printf("  %-44s %s%s, %lld forward call%s\n", "", call->shapes.c_str(), reduction.c_str(),
                  (long long)call->calls, call->calls == 1 ? "" : "s");
    }
  }
  for (const std::string& b : model->skippedBuffers())
    std::cout << "  buffer " << b << " is neither float32 nor int64: not checkpointed (constant during training?)\n";
  return 0;
}

// Runs a torch command; its options are declared with the other commands' in app/peat/cmd_torch.cpp.
int run(const cli::TorchCommand& c) {
  const std::string& command = c.name;
  const std::string& commandLine = c.commandLine;
  const bool json = c.json;
  train::ProfileOptions profile;
  if (command == "train" || command == "profile") {
    profile.train = trainOptions(c);
    profile.out = c.out;
    profile.checkpointEvery = c.checkpointEvery;
    profile.compression = c.compression;
    profile.numerics = c.numerics;
    profile.recordEvery = c.recordEvery;
    if (command == "train") {
      profile.recordEvery = 0;
      profile.checkpointAtStart = false;
      profile.runName = "train";
      profile.runKind = "train";
    }
  } else if (command != "playback" && command != "runtime-fi" && command != "detect-eval" && command != "kernels" &&
             command != "models") {
    std::cerr << "peat: error: unknown command '" << command << "'\n";
    events::error("unknown command '" + command + "'", 2);
    return 2;
  }

  std::signal(SIGINT, onInterrupt);
  // Tensors of a few MiB come and go every call. glibc would map and unmap each one (page faults on
  // every use); keeping freed memory in the heap makes replays and training steps markedly faster.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  try {
    if (command == "train" || command == "profile") {
      profile.recordBackward = !c.noBackward;
      return runProfileCommand(profile, c.force, json, command == "train", c.recordOps, commandLine);
    }
    if (command == "playback") return runPlaybackCommand(c);
    if (command == "runtime-fi") return runRuntimeFiCommand(c);
    if (command == "detect-eval") return runDetectEvalCommand(c);
    if (command == "kernels") return runKernelsCommand(c);
    return runModelsCommand(c);
  } catch (const c10::Error& e) {
    return failNow("LibTorch: " + firstLine(e.what_without_backtrace()));
  } catch (const std::exception& e) {  // TorchScript's interpreter puts its reason last
    return failNow(firstLine(models::interpreterMessage(e.what())));
  }
}

}  // namespace peat::torchcli

extern "C" int peat_torch_run(const char* encodedCommand) {
  peat::cli::TorchCommand command;
  try {
    command = peat::cli::decode(encodedCommand ? encodedCommand : "");
  } catch (const std::exception& e) {
    std::cerr << "peat: error: " << e.what() << " (peat and its LibTorch module are of other versions?)\n";
    return 2;
  }
  return peat::torchcli::run(command);
}
