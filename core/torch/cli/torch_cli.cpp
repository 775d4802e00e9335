// SPDX-License-Identifier: MIT
// The commands that train or run models: peat train, profile, playback, runtime-fi, kernels, models.
// They live in libpeat_torch.so; the torch-free `peat` hands them argv through peat_torch_main.
#include <CLI/CLI.hpp>
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

#include "core/util/events.h"
#include "core/torch/kernels/kernel.h"
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

std::string joinArgs(int argc, char** argv) {
  std::string s = "peat";
  for (int i = 0; i < argc; ++i) s += std::string(" ") + argv[i];
  return s;
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

void addTrainOptions(CLI::App& app, train::TrainOptions& t) {
  app.add_option("--model", t.model, "Model: " + models::modelList())->capture_default_str();
  app.add_option("--iterations,-n", t.iterations, "Training iterations")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--batch", t.batch, "Batch size")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--lr", t.learningRate, "Learning rate (0: the model's default)");
  app.add_option("--seed", t.seed, "Seed of initialisation and data order")->capture_default_str();
  app.add_option("--threads", t.threads, "Intra-op threads (results are bit-identical for a fixed count)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--eval-every", t.evalEvery, "Evaluate on the test split every N iterations (0: at the end)");
  app.add_option("--eval-batches", t.evalBatches, "Test batches per evaluation")->capture_default_str();
  app.add_option("--context", t.context, "chargpt context length")->capture_default_str();
  app.add_option("--init", t.init, "Finetune from a checkpoint: FILE[:RUN[:ITERATION]]");
}

void printErrorSummary(JsonWriter& j, const analyzer::ErrorSummary& e) {
  j.beginObject().field("mismatched", e.mismatched).field("max_abs", e.maxAbs).field("mean_abs", e.meanAbs);
  j.field("max_rel", e.maxRel).field("mean_rel", e.meanRel).field("max_ulp", e.maxUlp);
  j.field("newly_non_finite", e.newlyNonFinite).endObject();
}

int runProfileCommand(CLI::App& app, train::ProfileOptions& o, bool force, bool json, bool isTrain,
                      const std::string& recordOps, const std::string& commandLine) {
  (void)app;
  if (!isTrain) {
    o.recordOps.clear();
    std::stringstream s(recordOps);
    for (std::string item; std::getline(s, item, ',');) o.recordOps.push_back(*parseOp(item, false));
  }
  o.mode = force ? store::WriteMode::Overwrite : store::WriteMode::Create;
  o.commandLine = commandLine;
  ProgressBar bar(isTrain ? "train" : "profile");
  train::Progress progress{[&](int64_t d, int64_t t, const std::string& s) { bar(d, t, s); }, &interrupted,
                               [&](const events::Event& e) { bar.event(e); }};
  const train::ProfileResult r = train::runProfile(o, progress);
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

// The torch commands' options and their runs, one block per command (about 270 lines). They are
// declared here, in the module, rather than once in app/peat with the others: issue 15's "one CLI"
// is still open (docs/architecture.md).
int main(int argc, char** argv) {
  if (argc < 1) return 2;
  const std::string command = argv[0];
  const std::string commandLine = joinArgs(argc, argv);
  CLI::App app{"", "peat " + command};
  bool json = false, force = false;

  train::ProfileOptions profile;
  std::string recordOps = "linear,conv2d,matmul";
  bool noBackward = false;
  train::PlaybackOptions playback;
  std::string playbackOp = "all", playbackShard = "0/1";
  std::string fiEvery = "10", fiSeeds, fiShard = "0/1";
  train::RuntimeFiOptions fi;
  std::string fiOp = "linear", phase = "both";
  int evalSeeds = 3;
  std::string device;  // --device: where the gpu-* kernels run
  const std::string deviceHelp = "Device of the gpu-* kernels: cpu, cuda:N or hip:N (see peat env)";

  if (command == "train" || command == "profile") {
    const bool isTrain = command == "train";
    app.description(isTrain ? "Train a zoo model with golden kernels and save checkpoints (no call recording)."
                            : "Golden profiling: train with golden kernels, recording the inputs and outputs of selected "
                              "ops every Nth iteration, and checkpoints.");
    addTrainOptions(app, profile.train);
    app.add_option("--out,-o", profile.out, "Session file to write")->required();
    app.add_flag("--force", force, "Replace an existing output file");
    app.add_option("--checkpoint-every", profile.checkpointEvery, "Checkpoint every N iterations (0: start and end)");
    app.add_option("--compression", profile.compression,
                   "Deflate level of recorded call tensors, 0-9 (0 keeps up with training; checkpoints use 4)")
        ->capture_default_str()
        ->check(CLI::Range(0, 9));
    if (!isTrain) {
      app.add_option("--record-every", profile.recordEvery, "Record every Nth iteration")->capture_default_str()->check(
          CLI::NonNegativeNumber);
      app.add_option("--record-ops", recordOps, "Ops to record, comma-separated: " + ops::opList())->capture_default_str();
      app.add_flag("--no-backward", noBackward, "Do not record the backward GEMMs");
    } else {
      profile.recordEvery = 0;
      profile.checkpointAtStart = false;
      profile.runName = "train";
      profile.runKind = "train";
    }
  } else if (command == "playback") {
    app.description("Playback fault injection: replay recorded calls through a candidate kernel and store per-call "
                    "error numbers in the session.");
    app.add_option("--session,-s", playback.session, "Session recorded by peat profile")->required();
    app.add_option("--kernel,-k", playback.kernel, "Candidate kernel or fault model (see peat kernels)")->required();
    app.add_option("--run", playback.run, "Recorded run (default: the first with recorded calls)");
    app.add_option("--model", playback.model, "Refuse the session unless it was recorded from this model");
    app.add_option("--op", playbackOp, "Replay only this op (" + ops::opList() + ", all)")->capture_default_str();
    app.add_option("--max-calls", playback.maxCalls, "Replay at most N calls (0: all)");
    app.add_option("--seed", playback.seed, "Seed of fault models")->capture_default_str();
    app.add_option("--device", device, deviceHelp);
    app.add_option("--resume", playback.resumeIterations, "Also resume training from a checkpoint for N iterations");
    app.add_option("--resume-from", playback.resumeFrom, "Checkpoint iteration to resume from (default: the first)");
    app.add_option("--name", playback.runName, "Name of the run to add (default: playback-KERNEL)");
    app.add_flag("--store-outputs", playback.storeOutputs,
                 "Keep the candidate's outputs in the session, for peat analyze/detect --session");
    app.add_option("--shard", playbackShard, "Replay only this part of the calls, INDEX/COUNT (merge with 'peat merge')")
        ->capture_default_str();
    app.add_option("--out,-o", playback.out, "Write the run into this session instead (created if missing)");
    bool mpiHelpOnly = false;  // `peat` itself runs --mpi replays (app/peat/mpi.cpp); listed here for --help
    int shardsHelpOnly = 0;
    app.add_flag("--mpi", mpiHelpOnly,
                 "Spread the calls over the ranks of an MPI job (mpirun -n N peat playback ... --mpi): each rank "
                 "replays its shards into SESSION.shards/playback-KERNEL/, rank 0 merges them into SESSION");
    app.add_option("--shards", shardsHelpOnly, "With --mpi: shards in all (0: one per rank)");
  } else if (command == "runtime-fi") {
    app.description("Frequency-based runtime fault injection: train twice with the same seed and data order, the "
                    "second time with the candidate kernel substituted every k-th call of the target op.");
    addTrainOptions(app, fi.train);
    app.add_option("--kernel,-k", fi.kernel, "Candidate kernel or fault model (see peat kernels)")->required();
    app.add_option("--op", fiOp, "Target op (" + ops::opList() + ", all)")->capture_default_str();
    app.add_option("--layer", fi.layer, "Only calls of this layer (e.g. fc1)");
    app.add_option("--every", fiEvery, "Substitute every k-th matching call; a list (10,100,1000) sweeps it")
        ->capture_default_str();
    app.add_option("--seeds", fiSeeds, "Sweep these training seeds, a list (1,2,3), instead of --seed");
    app.add_option("--shard", fiShard, "Run only this part of the sweep's points, INDEX/COUNT (merge with 'peat merge')")
        ->capture_default_str();
    app.add_option("--prob", fi.probability, "Substitute each matching call with probability p (seeded)")
        ->check(CLI::Range(0.0, 1.0));
    app.add_option("--phase", phase, "forward, backward or both")->capture_default_str()->check(
        CLI::IsMember({"forward", "backward", "both"}));
    app.add_option("--out,-o", fi.out, "Session file to write")->required();
    app.add_flag("--force", force, "Replace an existing output file");
    app.add_option("--device", device, deviceHelp);
  } else if (command == "detect-eval") {
    app.description("Run the detector over a labelled corpus made with the project's own candidates and fault "
                    "models (GEMM, conv, softmax, layernorm; several seeds) and print the confusion matrix.");
    app.add_option("--seeds", evalSeeds, "Seeds per case")->capture_default_str()->check(CLI::Range(1, 100));
  } else if (command == "kernels" || command == "models") {
    app.description(command == "kernels" ? "List candidate kernels and fault models." : "List the model zoo.");
  } else {
    std::cerr << "peat: error: unknown command '" << command << "'\n";
    events::error("unknown command '" + command + "'", 2);
    return 2;
  }
  app.add_flag("--json", json, "Print a JSON summary");

  try {
    app.parse(argc, argv);  // argv[0], the command name, stands in for the program name
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "peat: error: " << e.what() << " (see 'peat " << command << " --help')\n";
    events::error(e.what(), 2);
    return 2;
  }

  std::signal(SIGINT, onInterrupt);
  // Tensors of a few MiB come and go every call. glibc would map and unmap each one (page faults on
  // every use); keeping freed memory in the heap makes replays and training steps markedly faster.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  try {
    if (command == "train" || command == "profile") {
      profile.recordBackward = !noBackward;
      return runProfileCommand(app, profile, force, json, command == "train", recordOps, commandLine);
    }
    if (command == "playback") {
      playback.op = parseOp(playbackOp, true);
      std::tie(playback.shardIndex, playback.shardCount) = parseShardSpec(playbackShard);
      playback.kernel = kernels::withDevice(playback.kernel, device);
      playback.commandLine = commandLine;
      ProgressBar bar("playback");
      train::Progress progress{[&](int64_t d, int64_t t, const std::string& s) { bar(d, t, s); }, &interrupted,
                               [&](const events::Event& e) { bar.event(e); }};
      const train::PlaybackResult r = train::runPlayback(playback, progress);
      events::stored(r.session, "run", r.run);
      if (json) {
        JsonWriter j(std::cout);
        j.beginObject().field("session", r.session).field("run", r.run).field("kernel", playback.kernel);
        j.field("replayed_calls", r.replayed).field("skipped_calls", r.skipped).field("cancelled", r.cancelled);
        j.field("injections", r.injections).field("seconds", r.seconds);
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
        std::cout << "  stored as run " << r.run << " in " << r.session << '\n';
      }
      return r.cancelled ? 130 : 0;
    }
    if (command == "runtime-fi") {
      fi.op = parseOp(fiOp, true);
      const std::vector<int64_t> everys = parseCounts("--every", fiEvery);
      if (everys.size() == 1)
        fi.every = everys.front();
      else
        fi.everySweep = everys;
      if (!fiSeeds.empty())
        for (int64_t seed : parseCounts("--seeds", fiSeeds)) fi.seedSweep.push_back(uint64_t(seed));
      std::tie(fi.shardIndex, fi.shardCount) = parseShardSpec(fiShard);
      if (fi.seedSweep.empty() && fi.shardCount > 1 && fi.everySweep.empty())
        throw std::invalid_argument("--shard splits a sweep: give a list to --every or --seeds");
      fi.kernel = kernels::withDevice(fi.kernel, device);
      fi.forward = phase != "backward";
      fi.backward = phase != "forward";
      fi.mode = force ? store::WriteMode::Overwrite : store::WriteMode::Create;
      fi.commandLine = commandLine;
      ProgressBar bar("runtime-fi");
      train::Progress progress{[&](int64_t d, int64_t t, const std::string& s) { bar(d, t, s); }, &interrupted,
                               [&](const events::Event& e) { bar.event(e); }};
      const train::RuntimeFiResult r = train::runRuntimeFi(fi, progress);
      events::stored(r.session, "session", r.session);
      if (json) {
        JsonWriter j(std::cout);
        j.beginObject().field("session", r.session).field("kernel", fi.kernel).field("iterations", r.iterations);
        j.field("points", r.points);
        j.field("cancelled", r.cancelled).field("substituted_calls", r.substitutions).field("injections", r.injections);
        j.field("golden_loss", r.goldenLoss).field("fi_loss", r.fiLoss);
        j.field("golden_test_accuracy", r.goldenTestAccuracy).field("fi_test_accuracy", r.fiTestAccuracy);
        j.field("seconds", r.seconds).key("worst");
        printErrorSummary(j, r.worst);
        j.endObject();
        std::cout << '\n';
      } else {
        std::cout << "runtime FI of " << fi.kernel << " on " << fiOp << " over " << r.iterations << " iterations in "
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
      }
      return r.cancelled ? 130 : 0;
    }
    if (command == "detect-eval") {
      const train::DetectEvalResult r = train::runDetectEval(evalSeeds);
      const int total = int(r.cases.size());
      if (json) {
        JsonWriter j(std::cout);
        j.beginObject().field("cases", total).field("correct", r.correct);
        j.field("top1_accuracy", total ? double(r.correct) / total : 0.0);
        j.field("format_checked", r.formatChecked).field("format_correct", r.formatCorrect);
        j.field("legitimate_pairs", r.legitimate).field("fault_verdicts_on_legitimate", r.legitimateFaultVerdicts);
        j.key("confusion").beginObject();
        for (const auto& [expected, row] : r.confusion) {
          j.key(expected).beginObject();
          for (const auto& [got, count] : row) j.field(got, count);
          j.endObject();
        }
        j.endObject().key("misses").beginArray();
        for (const auto& c : r.cases)
          if (c.got != c.expected)
            j.beginObject().field("op", c.op).field("kernel", c.kernel).field("expected", c.expected).field("got", c.got)
                .endObject();
        j.endArray().endObject();
        std::cout << '\n';
      } else {
        std::printf("%-20s %s\n", "expected", "detected (count)");
        for (const auto& [expected, row] : r.confusion) {
          std::printf("%-20s", expected.c_str());
          for (const auto& [got, count] : row) std::printf(" %s:%d", got.c_str(), count);
          std::printf("\n");
        }
        std::printf("top-1 accuracy %d/%d = %.1f%%; precision format right %d/%d; fault verdicts on legitimate "
                    "differences %d/%d\n",
                    r.correct, total, total ? 100.0 * r.correct / total : 0.0, r.formatCorrect, r.formatChecked,
                    r.legitimateFaultVerdicts, r.legitimate);
        for (const auto& c : r.cases)
          if (c.got != c.expected)
            std::printf("  miss: %s %s expected %s, got %s\n", c.op.c_str(), c.kernel.c_str(), c.expected.c_str(),
                        c.got.c_str());
      }
      return 0;
    }
    if (command == "kernels") {
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
    for (const std::string& m : models::modelNames()) std::cout << m << '\n';
    return 0;
  } catch (const c10::Error& e) {
    return failNow("LibTorch: " + firstLine(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return failNow(firstLine(e.what()));
  }
}

}  // namespace peat::torchcli

extern "C" int peat_torch_main(int argc, char** argv) { return peat::torchcli::main(argc, argv); }
