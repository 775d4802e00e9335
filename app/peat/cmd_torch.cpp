// SPDX-License-Identifier: MIT
// The options of the commands that run in the LibTorch module (train, profile, playback,
// runtime-fi, detect-eval, kernels, models), declared here once beside the other commands'. They are
// parsed into a cli::TorchCommand, which `--mpi` shares (mpi.cpp) and the module runs
// (core/torch/cli/torch_cli.cpp); `peat --help` and `peat profile --help` never load LibTorch.
#include <CLI/CLI.hpp>

#include <map>

#include <iostream>

#include "core/catalog/catalog.h"
#include "core/util/json_writer.h"
#include "app/peat/commands.h"
#include "core/cli/torch_commands.h"
#include "core/torch_module.h"

namespace peat::cli {

namespace {

const char* kDeviceHelp = "Device of the gpu-* kernels: cpu, cuda:N or hip:N (see peat env)";

void addTrainOptions(CLI::App* app, TorchCommand& t) {
  app->add_option("--model", t.model, "Model: " + zooModelList() + ", or a TorchScript file (see docs/models.md)")
      ->capture_default_str();
  app->add_option("--data", t.data,
                  "A model file's data: FILE.h5 (train/x, train/y, test/x, test/y), a folder of train_x.npy ... "
                  "test_y.npy, or fashion-mnist[:CxHxW]");
  app->add_option("--task", t.task, "A model file's task (default: from the data's types)")
      ->check(CLI::IsMember({"classification", "regression", "lm"}));
  app->add_option("--input-mean", t.inputMean, "Per-channel input mean of a model file's data, e.g. 0.5,0.5,0.5");
  app->add_option("--input-std", t.inputStd, "Per-channel input deviation of a model file's data");
  app->add_option("--iterations,-n", t.iterations, "Training iterations")->capture_default_str()->check(CLI::PositiveNumber);
  app->add_option("--batch", t.batch, "Batch size")->capture_default_str()->check(CLI::PositiveNumber);
  app->add_option("--lr", t.learningRate, "Learning rate (0: the model's default)");
  app->add_option("--seed", t.seed, "Seed of initialisation and data order")->capture_default_str();
  app->add_option("--threads", t.threads, "Intra-op threads (results are bit-identical for a fixed count)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app->add_option("--eval-every", t.evalEvery, "Evaluate on the test split every N iterations (0: at the end)");
  app->add_option("--eval-batches", t.evalBatches, "Test batches per evaluation")->capture_default_str();
  app->add_option("--context", t.context, "chargpt context length")->capture_default_str();
  app->add_option("--attention", t.attention,
                  "Attention in the kernel slot: parts (scores, softmax and values, each a call) or fused (one "
                  "attention call, where the graph allows; for attention kernels)")
      ->capture_default_str()
      ->check(CLI::IsMember({"parts", "fused"}));
  app->add_option("--init", t.init, "Finetune from a checkpoint: FILE[:RUN[:ITERATION]]");
}

void addProfileOptions(CLI::App* app, TorchCommand& c, bool isTrain) {
  addTrainOptions(app, c);
  app->add_option("--out,-o", c.out, "Session file to write")->required();
  app->add_flag("--force", c.force, "Replace an existing output file");
  app->add_option("--checkpoint-every", c.checkpointEvery, "Checkpoint every N iterations (0: start and end)");
  app->add_option("--compression", c.compression,
                  "Deflate level of recorded call tensors, 0-9 (0 keeps up with training; checkpoints use 4)")
      ->capture_default_str()
      ->check(CLI::Range(0, 9));
  if (isTrain) return;
  app->add_option("--record-every", c.recordEvery, "Record every Nth iteration")->capture_default_str()->check(
      CLI::NonNegativeNumber);
  app->add_option("--record-ops", c.recordOps, "Ops to record, comma-separated: " + recordableOpList() + ", or all")
      ->capture_default_str();
  app->add_flag("--no-backward", c.noBackward, "Do not record the backward GEMMs");
  app->add_flag("--numerics", c.numerics,
                "Also store each recorded call's numerics (amax, dynamic range, underflow and saturation in fp16 to "
                "fp4, plain, tensor- and block-scaled) as the run's table 'numerics'");
}

// Where a user kernel runs (docs/plugins.md): playback and runtime FI take the same two flags.
void addKernelHostOptions(CLI::App* app, TorchCommand& c) {
  app->add_flag("--in-process", c.inProcess,
                "Run a user kernel (plugin:path=...) inside peat instead of a kernel host process: faster, but a "
                "crash or hang of the kernel is one of peat (for trusted kernels)");
  app->add_flag("--stop-on-kernel-failure", c.stopOnKernelFailure,
                "Stop at the first call a user kernel crashes, hangs or writes out of bounds in (exit 1, the run "
                "marked failed) instead of recording it and going on");
}

void addPlaybackOptions(CLI::App* app, TorchCommand& c) {
  app->add_option("--session,-s", c.session, "Session recorded by peat profile")->required();
  app->add_option("--kernel,-k", c.kernel, "Candidate kernel or fault model (see peat kernels)")->required();
  app->add_option("--run", c.run, "Recorded run (default: the first with recorded calls)");
  app->add_option("--model", c.expectModel, "Refuse the session unless it was recorded from this model");
  app->add_option("--op", c.op, "Replay only this op (" + recordableOpList() + ", all)")->capture_default_str();
  app->add_option("--max-calls", c.maxCalls, "Replay at most N calls (0: all)");
  app->add_option("--call", c.call,
                  "Replay only this call, by its path in the session (iterations/000000/calls/000003): to "
                  "reproduce one a kernel failed or a verdict names");
  app->add_option("--seed", c.seed, "Seed of fault models")->capture_default_str();
  app->add_option("--device", c.device, kDeviceHelp);
  app->add_option("--resume", c.resumeIterations, "Also resume training from a checkpoint for N iterations");
  app->add_option("--resume-from", c.resumeFrom, "Checkpoint iteration to resume from (default: the first)");
  app->add_option("--name", c.runName, "Name of the run to add (default: playback-KERNEL)");
  app->add_flag("--store-outputs", c.storeOutputs,
                "Keep the candidate's outputs in the session, for peat analyze/detect --session");
  app->add_option("--shard", c.shard, "Replay only this part of the calls, INDEX/COUNT (merge with 'peat merge')")
      ->capture_default_str();
  addKernelHostOptions(app, c);
  app->add_option("--out,-o", c.out, "Write the run into this session instead (created if missing)");
  app->add_flag("--mpi", c.mpi,
                "Spread the calls over the ranks of an MPI job (mpirun -n N peat playback ... --mpi): each rank "
                "replays its shards into SESSION.shards/playback-KERNEL/, rank 0 merges them into SESSION");
  app->add_option("--shards", c.shards, "With --mpi: shards in all (0: one per rank)")->check(CLI::NonNegativeNumber);
}

void addRuntimeFiOptions(CLI::App* app, TorchCommand& c) {
  addTrainOptions(app, c);
  app->add_option("--kernel,-k", c.kernel, "Candidate kernel or fault model (see peat kernels)")->required();
  app->add_option("--op", c.op, "Target op (" + recordableOpList() + ", all)")->capture_default_str();
  app->add_option("--layer", c.layer, "Only calls of this layer (e.g. fc1)");
  app->add_option("--every", c.every, "Substitute every k-th matching call; a list (10,100,1000) sweeps it")
      ->capture_default_str();
  app->add_option("--seeds", c.seeds, "Sweep these training seeds, a list (1,2,3), instead of --seed");
  app->add_option("--shard", c.shard, "Run only this part of the sweep's points, INDEX/COUNT (merge with 'peat merge')")
      ->capture_default_str();
  app->add_option("--prob", c.probability, "Substitute each matching call with probability p (seeded)")
      ->check(CLI::Range(0.0, 1.0));
  addKernelHostOptions(app, c);
  app->add_option("--phase", c.phase, "forward, backward or both")->capture_default_str()->check(
      CLI::IsMember({"forward", "backward", "both"}));
  app->add_option("--out,-o", c.out, "Session file to write")->required();
  app->add_flag("--force", c.force, "Replace an existing output file");
  app->add_option("--device", c.device, kDeviceHelp);
  app->add_flag("--mpi", c.mpi,
                "Spread the sweep's points over the ranks of an MPI job (mpirun -n N peat runtime-fi ... --mpi): "
                "each rank runs its shards into OUT.shards/, rank 0 merges them into OUT");
  app->add_option("--shards", c.shards, "With --mpi: shards in all (0: one per rank)")->check(CLI::NonNegativeNumber);
}

// The longer description of each command, shown at the end of its --help.
const char* longDescription(const std::string& name) {
  if (name == "train")
    return "Train a zoo model or a TorchScript file (--model FILE.pt --data ...) with golden kernels and save "
           "checkpoints (no call recording).";
  if (name == "profile")
    return "Golden profiling: train with golden kernels, recording the inputs and outputs of selected ops every Nth "
           "iteration, and checkpoints.";
  if (name == "playback")
    return "Playback fault injection: replay recorded calls through a candidate kernel and store per-call error "
           "numbers in the session.";
  if (name == "runtime-fi")
    return "Frequency-based runtime fault injection: train twice with the same seed and data order, the second time "
           "with the candidate kernel substituted every k-th call of the target op.";
  if (name == "detect-eval")
    return "Run the detector over a labelled corpus made with the project's own candidates and fault models (GEMM, "
           "conv, softmax, layernorm; several seeds) and print the confusion matrix; with --external DIR, also over "
           "pairs made elsewhere (tests/cli/external_corpus.py writes one), reported beside it.";
  return "";
}

}  // namespace

std::vector<CLI::App*> addTorchCommands(CLI::App& app, std::map<std::string, TorchCommand>& commands) {
  std::vector<CLI::App*> out;
  for (const TorchCommandInfo& info : torchCommands()) {
    const std::string name = info.name;
    TorchCommand& c = commands[name];  // each command its own options (a map's elements stay put)
    c.name = name;
    CLI::App* sub = app.add_subcommand(name, info.summary);
    if (const char* more = longDescription(name); *more) sub->footer(more);
    if (name == "train" || name == "profile") addProfileOptions(sub, c, name == "train");
    if (name == "playback") addPlaybackOptions(sub, c);
    if (name == "runtime-fi") {
      c.op = "linear";  // its default target; playback's is all
      addRuntimeFiOptions(sub, c);
    }
    if (name == "models") {
      sub->add_option("--inspect", c.inspect, "List a TorchScript file's GEMM sites and whether each is routed");
      sub->add_option("--attention", c.attention, "With --inspect: parts or fused (see peat profile --help)")
          ->capture_default_str()
          ->check(CLI::IsMember({"parts", "fused"}));
      sub->add_option("--input-shape", c.inputShape, "With --inspect: run one forward of this input shape, e.g. 1,3,64,64")
          ->needs("--inspect");
      sub->add_option("--task", c.task, "With --inspect and --input-shape: lm feeds token ids")
          ->check(CLI::IsMember({"classification", "regression", "lm"}));
    }
    if (name == "kernels")
      sub->add_option("--probe", c.probe,
                      "Probe a user kernel (a shared library, peat/kernel_abi.h) in a child process and list its op "
                      "kinds, dtypes, probe results and the slot ops it runs");
    if (name == "detect-eval") {
      sub->add_option("--seeds", c.evalSeeds, "Seeds per case (0: only the --external corpus)")
          ->capture_default_str()
          ->check(CLI::Range(0, 100));
      sub->add_option("--external", c.evalExternal,
                      "Also judge a labelled corpus made elsewhere: DIR/labels.tsv, one pair a line (part, name, "
                      "expected, format, golden, candidates; docs/analyzer-detector.md)");
    }
    sub->add_flag("--json", c.json, "Print a JSON summary");
    out.push_back(sub);
  }
  return out;
}

int runTorch(TorchCommand c, const std::string& commandLine) {
  c.commandLine = commandLine;
  // the zoo's list is the catalog's (core/catalog): no LibTorch to load for it (the shell completion
  // asks for it on every Tab)
  if (c.name == "models" && c.inspect.empty()) {
    if (c.json) {
      JsonWriter j(std::cout);
      j.beginArray();
      for (const catalog::ZooModel& m : catalog::zooModels())
        j.beginObject()
            .field("name", m.name)
            .field("task", m.task == catalog::Task::Text ? "text" : "images")
            .field("data", m.data)
            .field("save", m.saveGraph)
            .field("summary", m.summary)
            .endObject();
      j.endArray();
      std::cout << '\n';
    } else {
      for (const catalog::ZooModel& m : catalog::zooModels()) std::cout << m.name << '\n';
    }
    return 0;
  }
  if (c.mpi) return runTorchCampaignMpi(c);
  return peat::runTorchCommand(encode(c));
}

}  // namespace peat::cli
