// SPDX-License-Identifier: MIT
#pragma once
// PEAT's profiler: golden profiling (recording), playback fault injection and frequency-based
// runtime fault injection. Long work reports progress and stops cleanly when asked, leaving a
// readable session.
#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/analyzer/error_summary.h"
#include "core/store/session.h"
#include "core/torch/ops/op_types.h"
#include "core/torch/train/trainer.h"
#include "core/util/events.h"

namespace peat::train {

struct Progress {
  std::function<void(int64_t done, int64_t total, const std::string& status)> report;
  const std::atomic<bool>* cancel = nullptr;
  // Structured results as they happen (a training step's loss, ...): docs/events.md.
  std::function<void(const events::Event&)> event;
  bool cancelled() const { return cancel && cancel->load(); }
  void operator()(int64_t done, int64_t total, const std::string& status) const {
    if (report) report(done, total, status);
  }
  void send(const events::Event& e) const {
    if (event) event(e);
  }
};

// ------------------------------------------------------------------------------ golden profiling

struct ProfileOptions {
  TrainOptions train;
  int64_t recordEvery = 50;  // record every Nth iteration (0: record no calls: plain training)
  std::vector<ops::OpKind> recordOps{ops::OpKind::Linear, ops::OpKind::Conv2d, ops::OpKind::Matmul};
  bool recordBackward = true;   // the backward GEMMs of recorded ops too
  int64_t checkpointEvery = 0;  // 0: at the start (if checkpointAtStart) and at the end
  bool checkpointAtStart = true;  // playback resumes from it; plain training does not need it
  // Deflate level of recorded call tensors (0-9). 0 by default: on two cores even level 1 made
  // recording every 10th LeNet iteration 1.85x slower than plain training, level 0 1.13x.
  int compression = 0;
  // Each recorded call's output and first input: narrow-format statistics (core/analyzer/numerics.h)
  // in the run's table "numerics" (core/analysis/numerics_record.h).
  bool numerics = false;
  std::string out;
  store::WriteMode mode = store::WriteMode::Create;
  std::string runName = "golden";
  std::string runKind = "profile";
  std::string commandLine;
};

struct ProfileResult {
  std::string session, run;
  int64_t iterations = 0;  // completed
  bool cancelled = false;
  int64_t recordedIterations = 0, recordedCalls = 0, checkpoints = 0;
  uint64_t recordedBytes = 0;    // raw bytes of the recorded calls' tensors and checkpoints
  uint64_t storedBytes = 0;      // the same after storing each shared tensor once (links for the rest)
  uint64_t fullDumpBytes = 0;    // raw bytes a dump of every op's inputs and outputs in every iteration would take
  uint64_t fileBytes = 0;        // the session file on disk (compressed)
  double finalLoss = 0, testLoss = 0, testAccuracy = 0;
  double seconds = 0;
  int64_t parameters = 0;
};

ProfileResult runProfile(const ProfileOptions& options, const Progress& progress);

// ----------------------------------------------------------------------------------- playback

struct PlaybackOptions {
  std::string session;
  std::string run;     // the recorded run; empty: the first run that recorded calls
  std::string kernel;  // candidate spec, e.g. "bf16"
  std::string model;   // optional: refuse the session if it was recorded from another model
  std::optional<ops::OpKind> op;  // replay only calls of this op
  int64_t maxCalls = 0;           // 0: all
  std::string call;               // replay only this call (its path); empty: all
  uint64_t seed = 1;              // for fault kernels
  int64_t resumeIterations = 0;   // > 0: also resume training from a checkpoint with the candidate
  int64_t resumeFrom = -1;        // checkpoint iteration; -1: the first one
  std::string runName;            // empty: "playback-<kernel>"
  bool storeOutputs = false;      // keep every candidate output in the session (for peat analyze --session)
  std::string commandLine;
  // A shard of the replay: the calls at positions p (in recorded order, after --op and --max-calls)
  // with p mod shardCount == shardIndex. Fault kernels draw per call, so the shards' rows together
  // are exactly the one-process replay's; `peat merge` joins them.
  int shardIndex = 0, shardCount = 1;
  std::string out;  // the session that gets the run; empty: the recorded session
  // A user kernel runs in a kernel host process (core/plugin/kernel_host.h) unless kernelInProcess;
  // a call it fails there is recorded with its outcome and the replay goes on, or stops with the
  // run marked failed when stopOnKernelFailure.
  bool kernelInProcess = false, stopOnKernelFailure = false;
};

// The canonical settings of a replay, shared by its shards (the run's "campaign" attribute).
std::string playbackCampaign(const PlaybackOptions& o, const std::string& sourceRun, const std::string& sessionCreated);

struct PlaybackResult {
  std::string session, run;
  int64_t replayed = 0, skipped = 0;
  bool cancelled = false;
  analyzer::ErrorSummary worst;  // the largest of each number over all replayed calls
  int64_t injections = 0;
  double seconds = 0;
  // Calls the kernel failed in its host: "2 of 16 calls (crash:SIGSEGV 1, hang 1)" (empty: none)
  // and the first one's line; stoppedOnKernelFailure: the replay stopped there.
  int64_t failedCalls = 0;
  std::string kernelFailures, firstKernelFailure;
  bool stoppedOnKernelFailure = false;
  // When resumed:
  int64_t resumedFrom = -1, resumedIterations = 0;
  double goldenLoss = 0, candidateLoss = 0, goldenTestAccuracy = 0, candidateTestAccuracy = 0;
};

PlaybackResult runPlayback(const PlaybackOptions& options, const Progress& progress);

// ---------------------------------------------------------------------------------- runtime FI

struct RuntimeFiOptions {
  TrainOptions train;
  std::string kernel;
  std::optional<ops::OpKind> op = ops::OpKind::Linear;
  std::string layer;
  int64_t every = 10;
  double probability = 0;
  bool forward = true, backward = true;
  std::string out;
  store::WriteMode mode = store::WriteMode::Create;
  std::string commandLine;
  // A sweep: one runtime-FI run per (every, seed) point, every-major, into `out`; the golden run
  // of each seed once ("golden-seed-S"), each FI run as "runtime-fi-KERNEL-every-K-seed-S". Empty
  // lists: the single point (every, train.seed) with runs "golden" and "runtime-fi-KERNEL".
  std::vector<int64_t> everySweep;
  std::vector<uint64_t> seedSweep;
  // This process's points of the sweep: those at positions p with p mod shardCount == shardIndex.
  int shardIndex = 0, shardCount = 1;
  std::string goldenRun, fiRun;  // set by the sweep
  int64_t sweepPoint = -1;       // set by the sweep: this run's position in it
  // Set by the sweep once a seed's golden run is trained and stored: the FI run does not train it
  // again (the FI training does not depend on it) and takes its numbers from here.
  struct KnownGolden {
    std::vector<double> loss;  // per iteration
    double testAccuracy = 0;
  };
  const KnownGolden* knownGolden = nullptr;
  // As for playback. A substituted call the kernel fails keeps golden's output and counts its
  // step as failed; stopOnKernelFailure ends the training there, the runs marked failed.
  bool kernelInProcess = false, stopOnKernelFailure = false;
};

struct RuntimeFiResult {
  std::string session;
  int64_t iterations = 0;
  bool cancelled = false;
  int64_t substitutions = 0, injections = 0;
  analyzer::ErrorSummary worst;
  double goldenLoss = 0, fiLoss = 0, goldenTestAccuracy = 0, fiTestAccuracy = 0;
  double seconds = 0;
  int64_t points = 1;  // sweep points run (the last one's losses and accuracies above)
  int64_t failedCalls = 0, failedSteps = 0;  // substituted calls the kernel failed, and their steps
  std::string kernelFailures, firstKernelFailure;
  bool stoppedOnKernelFailure = false;
  RuntimeFiOptions::KnownGolden golden;  // the golden run's numbers, when this run trained it
};

RuntimeFiResult runRuntimeFi(const RuntimeFiOptions& options, const Progress& progress);
// The sweep's canonical settings (the runs' "campaign" attribute), shared by its shards.
std::string runtimeFiCampaign(const RuntimeFiOptions& o);

// Shared with tests: the provenance of a session written by these commands.
store::Provenance makeProvenance(const TrainOptions& train, const std::string& dataset, const std::string& commandLine);

}  // namespace peat::train
