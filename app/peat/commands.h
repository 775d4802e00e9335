// SPDX-License-Identifier: MIT
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/analyzer/criteria.h"
#include "core/cli/torch_commands.h"
#include "core/save/save_commands.h"

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

// `peat graph`: a session's run (--run) or SAVE analysis (--save), or a model alone (--model)
struct GraphOptions {
  std::string session, run, save, model;
  bool json = false, dot = false;
};
int runGraph(const GraphOptions& o);

// `peat record ...` and `peat playback` of a Python recording or with a python: kernel run in the
// user's Python (the package peat); returns -1 for every other command line, else never returns
// unless the interpreter cannot be started.
int maybeRunPython(int argc, char** argv);

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
  // session mode: a stored analysis of the run with the same settings is read back unless `force`;
  // `name` stores a new one under that name
  bool force = false;
  std::string name;
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
// "criteria": msProbe's metrics and, where evaluated, FlashAttention's reference rule (issue 41).
void writeCriteria(JsonWriter& j, const analyzer::Criteria& c);
// The same in one line for people: "cos 0.99999, max rel 3e-3, rel>1e-2/1e-3/1e-4 0%/2%/40%, 12 ULP; 2x rule pass".
std::string criteriaLine(const analyzer::Criteria& c);
std::string parameters(const detector::Verdict& v);

// analyze and detect over a session's playback run; `verdictsOnly` prints just the detector's side.
int runSessionAnalysis(const std::string& session, const std::string& run, const std::string& call,
                       const std::string& tile, bool json, bool verdictsOnly, bool force = false,
                       const std::string& name = "");

int runSaveAnalyze(const SaveAnalyzeOptions& o);
int runSaveInspect(const SaveAnalyzeOptions& o);  // the graph of a model, op by op
int runSaveCheckBits(const SaveCheckBitsOptions& o);
int runSaveCampaign(const SaveCampaignOptions& o);
int runSaveVerifiers(const SaveVerifiersOptions& o);
int runSaveRun(const SaveRunOptions& o);  // the model on the user's inputs, plain or protected

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
