// SPDX-License-Identifier: MIT
#pragma once
// The `peat save` commands as the command line gives them: plain text and numbers. `peat` declares
// their options (app/peat/main.cpp) and prints their results; core/save/command_settings.h turns
// them into the analysis's, check-bits' and campaign's settings and identity keys. Like
// core/cli/torch_commands.h, these live in core so that the domain logic on them is testable
// without the CLI.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace peat::cli {

// "16x16" -> {16, 16}; throws std::invalid_argument naming --tile for anything else.
inline std::pair<uint64_t, uint64_t> parseTile(const std::string& text) {
  const auto x = text.find('x');
  try {
    if (x != std::string::npos) {
      const long long r = std::stoll(text.substr(0, x)), c = std::stoll(text.substr(x + 1));
      if (r > 0 && c > 0) return {uint64_t(r), uint64_t(c)};
    }
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("--tile '" + text + "' is not ROWSxCOLS with positive numbers, e.g. 16x16");
}

// `--mpi`: the campaign's shards are spread over the ranks of an MPI job; each writes its own
// shard file under SESSION.shards/, and rank 0 merges them into the session (app/peat/mpi.h).
struct MpiOptions {
  bool enabled = false;
  int shards = 0;  // 0: one per rank
};

struct SaveAnalyzeOptions {
  std::string model, weights, run = "train";
  uint64_t randomWeights = 0;  // instead of --weights: seeded random weights (timing, exploring)
  int64_t iteration = -1;
  std::string inputRange = "0,1";
  std::string inputMean, inputStd;  // an ONNX model's normalisation, one value or one per channel
  std::string data;                 // labelled samples (see save::loadDataSet); empty: Fashion-MNIST
  double tau = 1e-5;
  double rtol = 0;  // the value criterion's relative tolerance: a flip moving v by less than tau + rtol |v| is robust
  std::string criterion = "value";  // or "output" with epsilon (core/save/sensitivity.h)
  double epsilon = 0;
  std::string mode = "symbolic";
  int depth = 0, splits = 0;
  std::string tile = "16x16";
  double budgetMiB = 6;
  std::string budget;  // instead: "5%" (of the working set's peak) or "2.5MiB"
  std::string placement = "ranked";  // ranked (SAVE's), random, none: how tiles fill the budget
  std::string placementProblem;      // a CSV of the placement problem, for an exact solver
  bool force = false;                // --placement-problem may replace an existing file
  int64_t batch = 1;
  bool tightness = false;
  int ascentSteps = 60, ascentStarts = 3;  // the gradient-ascent reference of --tightness
  std::string session;
  bool json = false;
  std::string commandLine;
};

struct SaveCheckBitsOptions {
  SaveAnalyzeOptions analysis;  // model, weights, ranges (for the activations' predicted classes)
  int64_t batch = 64;
  int64_t weightFlips = 0;  // 0: all
  int64_t weightsPerStratum = 0;  // > 0: a stratified weight sample instead (per layer and bit position)
  int64_t activationFlips = 20000;
  int64_t activationImages = 0;  // images activation flips are drawn from (0: the whole test split)
  uint64_t seed = 1;
  unsigned threads = 0;
  std::string shard = "0/1";  // INDEX/COUNT: this process's part of the campaign
  bool quiet = false;         // print nothing (a rank of an MPI run)
  MpiOptions mpi;
};

struct SaveCampaignOptions {
  SaveAnalyzeOptions analysis;  // model, weights, ranges, tiles, budget, batch (images per inference)
  int64_t images = 1000;
  std::string flips = "1,2,4,8,16,32,64,128,256,512,1024,2048,4096";
  std::string schemes = "none,save,tmr,ranger,ecc";
  std::string pattern = "random";
  int bits = 1;
  uint64_t seed = 1;
  std::string shard = "0/1";
  std::string verifier = "auto";
  bool agreement = false;  // score against the fault-free prediction instead of the labels (untrained models)
  std::string target = "both";  // faults on weights, activations or both
  std::string basis = "inference";  // "inference": the same flips per inference; "memory": the same rate per byte
  bool noRerunFaults = false;    // reruns meet no new faults (the first round's model)
  int maxRecoveries = 10;
  int checkLag = 1;
  bool quiet = false;
  MpiOptions mpi;
};

struct SaveVerifiersOptions {
  SaveAnalyzeOptions analysis;  // model, weights, ranges, tiles, budget, batch
  int64_t flips = 500;          // per op
  uint64_t seed = 1;
};

// `peat save run`: the model on the user's inputs (what the model takes: normalised), plain or
// protected, with optional faults; the outputs to a file and against a reference.
struct SaveRunOptions {
  SaveAnalyzeOptions analysis;  // model, weights, the input box and tiles (for a protected run)
  // the model's inputs: FILE (in the model's input order) or NAME=FILE (a named input)
  std::vector<std::string> input;
  std::string output;
  // references for the outputs: FILE (in the model's output order) or NAME=FILE (a named output)
  std::vector<std::string> expect;
  std::string protect = "none";  // none, save, tmr, ranger, ecc
  int64_t flips = 0;             // faults over the whole inference (every sample in one batch)
  std::string pattern = "random", target = "both";
  int bits = 1;
  uint64_t seed = 1;
  std::string verifier = "auto";
  int checkLag = 1, maxRecoveries = 10;
  double maxDiff = -1;  // with --expect: exit 1 when the largest |difference| exceeds it (< 0: never)
  int top = 3;          // classes printed per sample
  int repeat = 1;       // inferences timed (the first reported apart from the warm ones)
  unsigned threads = 0;  // the engine's workers (0: every core)
  bool force = false;    // --output may replace an existing file
};

struct SaveMergeOptions {
  std::vector<std::string> shards;
  std::string session, commandLine;
  bool json = false;
};

}  // namespace peat::cli
