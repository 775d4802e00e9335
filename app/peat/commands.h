// SPDX-License-Identifier: MIT
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/cli/torch_commands.h"

namespace CLI {
class App;
}

namespace peat {
class JsonWriter;
namespace detector {
struct Verdict;
}
}  // namespace peat

namespace peat::cli {

struct InfoOptions {
  std::string path;
  bool json = false;
  bool calls = false;  // list every recorded call
  bool verify = false; // read every complete dataset back and check its CRC-32
};
int runInfo(const InfoOptions& o);

struct EnvOptions {
  bool json = false;
  bool skipTorch = false;
};
int runEnv(const EnvOptions& o);

struct AnalyzeOptions {
  std::string golden, candidate;
  std::string session, run, call;  // session mode: a playback run made with --store-outputs
  std::string tile = "16x16";
  unsigned threads = 0;
  std::string device;  // also compute the histograms there and check them against the CPU's
  bool numerics = false;  // also each tensor's narrow-format statistics (core/analyzer/numerics.h)
  bool json = false;
};
int runAnalyze(const AnalyzeOptions& o);

struct DetectOptions {
  std::string golden;
  std::string session, run, call;
  std::vector<std::string> candidates;  // two or more replays of one input reveal races
  bool json = false;
};
int runDetect(const DetectOptions& o);
// A verdict as JSON: its model ("verdict" at the top level), confidence, explanation, parameters and
// evidence; and its parameters as text, " (format=mxfp4, block=32)", empty when it has none.
void writeVerdict(JsonWriter& j, const detector::Verdict& v, bool top);
std::string parameters(const detector::Verdict& v);

// analyze and detect over a session's playback run; `verdictsOnly` prints just the detector's side.
int runSessionAnalysis(const std::string& session, const std::string& run, const std::string& call,
                       const std::string& tile, bool json, bool verdictsOnly);

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
  int64_t batch = 1;
  bool tightness = false;
  int ascentSteps = 60, ascentStarts = 3;  // the gradient-ascent reference of --tightness
  std::string session;
  bool json = false;
  std::string commandLine;
};
int runSaveAnalyze(const SaveAnalyzeOptions& o);
int runSaveInspect(const SaveAnalyzeOptions& o);  // the graph of a model, op by op

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
int runSaveCheckBits(const SaveCheckBitsOptions& o);

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
int runSaveCampaign(const SaveCampaignOptions& o);
std::string campaignSettings(const SaveCampaignOptions& o);  // the run's "campaign" attribute

struct SaveVerifiersOptions {
  SaveAnalyzeOptions analysis;  // model, weights, ranges, tiles, budget, batch
  int64_t flips = 500;          // per op
  uint64_t seed = 1;
};
int runSaveVerifiers(const SaveVerifiersOptions& o);

struct SaveMergeOptions {
  std::vector<std::string> shards;
  std::string session, commandLine;
  bool json = false;
};
// Merges the shard files of one campaign (a SAVE campaign or check-bits), whichever kind they are.
int runSaveMerge(const SaveMergeOptions& o);

// The MPI mode of check-bits and campaign (mpi.cpp); one clear error when built without MPI.
int runSaveCheckBitsMpi(const SaveCheckBitsOptions& o);
int runSaveCampaignMpi(const SaveCampaignOptions& o);
int runTorchCampaignMpi(const TorchCommand& c);  // peat playback|runtime-fi ... --mpi
bool builtWithMpi();

// The commands that run in the LibTorch module (cmd_torch.cpp): their options, declared once, each
// command bound to its own element of `commands`; and their run (--mpi, or the module).
std::vector<CLI::App*> addTorchCommands(CLI::App& app, std::map<std::string, TorchCommand>& commands);
int runTorch(TorchCommand command, const std::string& commandLine);

}  // namespace peat::cli
