// SPDX-License-Identifier: MIT
#pragma once
// The commands that run in the LibTorch module (train, profile, playback, runtime-fi, detect-eval,
// kernels, models), as the command line gives them: plain text and numbers. `peat` declares their
// options once, with the other commands (app/peat/cmd_torch.cpp), parses argv into a TorchCommand,
// and hands it to the module encoded as text across its C entry point (core/torch/torch_entry.h);
// the module turns it into the profiler's options (core/torch/cli/torch_cli.cpp). `--mpi` uses
// the same parsed command. Torch-free, so `peat --help` never loads LibTorch.
#include <cstdint>
#include <string>
#include <vector>

namespace peat::cli {

struct TorchCommand {
  std::string name;         // the command
  std::string commandLine;  // as typed, recorded in the session's provenance
  bool json = false, force = false;
  // training (train, profile, runtime-fi); the defaults are the profiler's (train::TrainOptions)
  std::string model = "lenet";
  int64_t iterations = 200, batch = 64;
  double learningRate = 0;
  uint64_t seed = 1;
  int threads = 1;
  int64_t evalEvery = 0, evalBatches = 8, context = 64;
  std::string attention = "parts";  // "fused": attention as one call (train::TrainOptions::attention)
  std::string init;
  // a model file's data (train::TrainOptions)
  std::string data, task, inputMean, inputStd;
  // models --inspect FILE [--input-shape 1,3,64,64]; insideProbe: the probe helper's own run (it
  // loads in place; a user's inspect loads the file in the helper first)
  std::string inspect, inputShape;
  std::string probe;  // peat kernels --probe: a plugin to describe
  bool insideProbe = false;
  // train, profile
  std::string out;
  int64_t checkpointEvery = 0;
  int compression = 0;
  bool numerics = false;  // profile: each recorded call's narrow-format statistics (table "numerics")
  int64_t recordEvery = 50;
  std::string recordOps = "linear,conv2d,matmul";
  bool noBackward = false;
  // playback
  std::string session, run, kernel, expectModel, op = "all";
  int64_t maxCalls = 0, resumeIterations = 0, resumeFrom = -1;
  std::string runName, shard = "0/1", device;
  std::string call;  // playback: replay only this call ("iterations/000000/calls/000003")
  bool storeOutputs = false;
  // playback, runtime-fi: a user kernel in peat, not in a kernel host; stop at a call it fails there
  bool inProcess = false, stopOnKernelFailure = false;
  bool mpi = false;
  int shards = 0;  // with --mpi: shards in all (0: one per rank)
  // runtime-fi
  std::string layer, every = "10", seeds, phase = "both";
  double probability = 0;
  // detect-eval
  int evalSeeds = 3;
  std::string evalExternal;  // --external DIR: a labelled corpus made elsewhere (DIR/labels.tsv)
};

// The commands, in the order `peat --help` lists them, with their one-line summaries.
struct TorchCommandInfo {
  const char* name;
  const char* summary;
};
const std::vector<TorchCommandInfo>& torchCommands();

// The zoo's models and the recordable ops, for help texts and checks without loading LibTorch;
// tst_profiler checks them against the module's own lists.
const std::vector<std::string>& zooModelNames();
std::string zooModelList();  // "mlp, lenet, ..."
std::string recordableOpList();

// One field per line, "name=value" with '\\', '\n' and '\r' escaped: every field, so that a
// decoded command equals the encoded one. decode throws std::invalid_argument on a malformed text.
std::string encode(const TorchCommand& command);
TorchCommand decode(const std::string& text);

}  // namespace peat::cli
