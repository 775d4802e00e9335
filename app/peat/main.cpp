// SPDX-License-Identifier: MIT
// peat: the command-line face of PEAT Workbench. Links only the torch-free core; commands that
// train or run models load libpeat_torch.so on demand.
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <exception>
#include <iostream>
#include <map>

#include "app/peat/commands.h"
#include "core/torch_module.h"
#include "core/util/events.h"
#include "core/version.h"
#include "core/util/text.h"

namespace {

// --session/--run/--call: analyze and detect also read a playback run stored in a session.
void addSessionOptions(CLI::App* cmd, std::string& session, std::string& run, std::string& call) {
  cmd->add_option("--session,-s", session, "Or: a session, with --run (a playback run with stored outputs)");
  cmd->add_option("--run", run, "Playback run made with --store-outputs");
  cmd->add_option("--call", call, "Only this call, e.g. iterations/000010/calls/000003");
}

// A sharded SAVE job's part (--shard), its MPI mode, where it stores and how it prints.
void addMpiOptions(CLI::App* cmd, peat::cli::MpiOptions& mpi);
void addShardOptions(CLI::App* cmd, std::string& shard, const std::string& shardHelp, peat::cli::MpiOptions& mpi,
                     std::string& session, const std::string& sessionHelp, bool& json) {
  cmd->add_option("--shard", shard, shardHelp)->capture_default_str();
  addMpiOptions(cmd, mpi);
  cmd->add_option("--session,-s", session, sessionHelp);
  cmd->add_flag("--json", json, "Print as JSON");
}

void addMpiOptions(CLI::App* cmd, peat::cli::MpiOptions& mpi) {
  cmd->add_flag("--mpi", mpi.enabled,
                "Spread the shards over the ranks of an MPI job (mpirun -n N peat ... --mpi -s SESSION): each writes "
                "SESSION.shards/I-of-M.h5, rank 0 merges them into SESSION; a rerun keeps the shards already done");
  cmd->add_option("--shards", mpi.shards, "With --mpi: shards in all (0: one per rank); more shards lose less to a rank that dies")
      ->capture_default_str();
}

// The model and its ranges, as SAVE's check-bits, campaign and verifiers take them.
void addModelOptions(CLI::App* cmd, peat::cli::SaveAnalyzeOptions& o) {
  cmd->add_option("--model,-m", o.model, "Zoo model: mlp, lenet, resnet or vit, or an ONNX file")->required();
  cmd->add_option("--weights,-w", o.weights, "Session or checkpoint file with the weights (not for an ONNX model)");
  cmd->add_option("--run", o.run, "Run holding the checkpoint")->capture_default_str();
  cmd->add_option("--iteration", o.iteration, "Checkpoint iteration (default: the last)");
  cmd->add_option("--input-range", o.inputRange, "Raw input range LO,HI; NAME=LO,HI for one input of several (repeat it)")
      ->multi_option_policy(CLI::MultiOptionPolicy::Join)
      ->capture_default_str();
  cmd->add_option("--input-mean", o.inputMean,
                  "An ONNX model's input mean: one value or one per channel (default 0.2860); NAME=V,... for one input "
                  "of several (repeat it)")
      ->multi_option_policy(CLI::MultiOptionPolicy::Join);
  cmd->add_option("--input-std", o.inputStd,
                  "An ONNX model's input deviation: one value or one per channel (default 0.3530); NAME=V,... for one "
                  "input of several (repeat it)")
      ->multi_option_policy(CLI::MultiOptionPolicy::Join);
  cmd->add_option("--tau", o.tau, "Value-robustness threshold")->capture_default_str();
  cmd->add_option("--rtol", o.rtol,
                  "The value criterion's relative tolerance: a flip moving a value v by less than tau + RTOL |v| is robust")
      ->capture_default_str();
  cmd->add_option("--criterion", o.criterion,
                  "Bit robustness: value (a flip moves the value by less than --tau) or output (a flip cannot move "
                  "any logit by more than --epsilon, for any input in the box)")->capture_default_str();
  cmd->add_option("--epsilon", o.epsilon, "The output criterion's bound on the logits' move");
  cmd->add_option("--mode", o.mode, "Ranges: symbolic or interval")->capture_default_str();
  cmd->add_option("--data", o.data,
                  "Labelled samples: an HDF5 file (test/x, test/y; train/x, train/y for Ranger's profile), a folder "
                  "of test_x.npy/test_y.npy, or fashion-mnist[:CxHxW] (default: Fashion-MNIST, resized to the "
                  "model's input); raw values inside --input-range");
}

// Tiles, the reliable-memory budget and the batch they are sized for.
void addTileOptions(CLI::App* cmd, peat::cli::SaveAnalyzeOptions& o, const std::string& batchHelp) {
  cmd->add_option("--tile", o.tile, "Tile size ROWSxCOLS")->capture_default_str();
  cmd->add_option("--budget-mib", o.budgetMiB, "Reliable memory in MiB")->capture_default_str();
  cmd->add_option("--budget", o.budget, "Instead: reliable memory as a share of the working set (5%) or in MiB (2.5MiB)");
  cmd->add_option("--placement", o.placement,
                  "How tiles fill the budget: ranked (SAVE's), random (a seeded random order) or none (no reliable memory)")
      ->capture_default_str();
  cmd->add_option("--batch", o.batch, batchHelp)->capture_default_str();
}

// A SAVE subcommand that loads a model with its ranges, tiles and reliable-memory budget (the
// defaults given here, before the options capture them for --help).
CLI::App* addSaveModelCommand(CLI::App* save, const std::string& name, const std::string& summary,
                              peat::cli::SaveAnalyzeOptions& o, const std::string& batchHelp, double budgetMiB,
                              int64_t batch) {
  o.budgetMiB = budgetMiB;
  o.batch = batch;
  CLI::App* cmd = save->add_subcommand(name, summary);
  addModelOptions(cmd, o);
  addTileOptions(cmd, o, batchHelp);
  return cmd;
}

// peat save run: the model on the user's inputs, plain or under a scheme with faults.
CLI::App* addSaveRunCommand(CLI::App* save, peat::cli::SaveRunOptions& o) {
  o.analysis.mode = "interval";  // a protected run's ranges: the quick sound ones unless asked
  o.analysis.placement = "ranked";
  CLI::App* cmd = addSaveModelCommand(save, "run",
                                      "Run a model on your inputs with SAVE's fp32 engine (plain, or protected with "
                                      "injected faults) and write its outputs; compare them with a reference",
                                      o.analysis, "(the batch is the input's samples)", 6, 1);
  cmd->add_option("--input,-i", o.input, "The model's input as it takes it (normalised): x.npy or x.h5:/dataset, one "
                                         "sample or [N, sample...]; a model with several inputs takes one per input "
                                         "in order, or NAME=FILE")
      ->required()
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--output,-o", o.output, "Write the outputs here as .npy ([N, output...]); a model with several "
                                           "outputs writes Y.NAME.npy for each");
  cmd->add_flag("--force", o.force, "Replace an existing --output file");
  cmd->add_option("--expect", o.expect, "A reference for the outputs (e.g. PyTorch's): .npy or .h5:/dataset; a model "
                                       "with several outputs takes one per output in order, or NAME=FILE")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--max-diff", o.maxDiff, "With --expect: fail (exit 1) when the largest |difference| exceeds this");
  cmd->add_option("--protect", o.protect, "none, save, tmr, ranger or ecc")->capture_default_str();
  cmd->add_option("--flips", o.flips, "Faults injected over the inference (all samples in one batch)")->capture_default_str();
  cmd->add_option("--pattern", o.pattern, "random, consecutive, region, adjacent or burst")->capture_default_str();
  cmd->add_option("--bits", o.bits, "Bits per fault")->capture_default_str();
  cmd->add_option("--target", o.target, "Where faults land: both, weights or activations")->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the faults")->capture_default_str();
  cmd->add_option("--verifier", o.verifier, "SAVE's check of linear/conv outputs: auto, recompute, abft or mixed")
      ->capture_default_str();
  cmd->add_option("--check-lag", o.checkLag, "SAVE: layers its checks may trail the inference")->capture_default_str();
  cmd->add_option("--max-recoveries", o.maxRecoveries, "SAVE: reruns of a failed layer")->capture_default_str();
  cmd->add_option("--top", o.top, "Classes printed per sample")->capture_default_str();
  cmd->add_option("--threads", o.threads, "The engine's threads (0: every core; the outputs are the same bits "
                                                  "for any count)")->capture_default_str();
  cmd->add_option("--repeat", o.repeat, "Run the inference this many times: the first run's time and the warm runs' "
                                        "median are reported apart")->capture_default_str();
  cmd->add_flag("--json", o.analysis.json, "Print as JSON");
  return cmd;
}

// Exactly one of the two ways to name the tensors.
bool pairOrSession(bool pair, const std::string& session, const std::string& run) {
  if (pair) return session.empty() && run.empty();
  return !session.empty() && !run.empty();
}

// As the session records it: "peat COMMAND ARGS..." (without a leading --events).
std::string commandLineOf(int argc, char** argv) {
  std::string s = "peat";
  for (int i = 1; i < argc; ++i) s += std::string(" ") + argv[i];
  return s;
}

int fail(const std::string& message, int code) {
  std::cerr << "peat: error: " << peat::util::printable(message) << '\n';  // names from files may hold escapes
  peat::events::error(message, code);
  return code;
}

// `peat --events jsonl COMMAND ...` (or --events=jsonl): the event stream of docs/events.md. It is
// passed on as PEAT_EVENTS, so that the torch commands in their module and MPI ranks see it too.
// Returns false on a bad value.
bool takeEventsOption(int& argc, char**& argv) {
  if (argc < 2) return true;
  const std::string first = argv[1];
  std::string value;
  int used = 0;
  if (first == "--events" && argc >= 3) {
    value = argv[2];
    used = 2;
  } else if (first.rfind("--events=", 0) == 0) {
    value = first.substr(9);
    used = 1;
  } else {
    return first != "--events";
  }
  if (value != "jsonl") return false;
  ::setenv("PEAT_EVENTS", "jsonl", 1);
  // argv[0] stays; the option's words are dropped
  for (int i = 1; i + used < argc; ++i) argv[i] = argv[i + used];
  argc -= used;
  return true;
}

}  // namespace

// The option declarations of every torch-free command (the torch ones: cmd_torch.cpp), then the
// dispatch: long (about 200 lines) because CLI11 declares options in code, one block per command.
int main(int argc, char** argv) {
  using namespace peat::cli;
  if (!takeEventsOption(argc, argv)) return fail("--events takes 'jsonl' (see 'peat --help')", 2);
  if (const int code = maybeRunPython(argc, argv); code >= 0) return code;  // peat record, Python playbacks
  CLI::App app{"PEAT Workbench command line: validate GPU kernels in DNN training (PEAT) and protect inference "
               "against memory bit flips (SAVE).",
               "peat"};
  app.set_version_flag("-V,--version", std::string("peat ") + peat::toolVersion() + " (commit " + peat::gitCommit() +
                                           ", HDF5 " + peat::hdf5Version() + ")");
  app.require_subcommand(1);
  app.footer("Run 'peat COMMAND --help' for a command's options. Errors print 'peat: error: ...' and exit 1;\n"
             "usage errors exit 2. 'peat --events jsonl COMMAND ...' adds machine-readable events on stderr\n"
             "(docs/events.md).\n");

  InfoOptions info;
  CLI::App* infoCmd = app.add_subcommand("info", "Summarise a session file: provenance, runs, iterations, calls");
  infoCmd->add_option("session", info.path, "Session file (.h5)")->required();
  infoCmd->add_flag("--json", info.json, "Print the summary as JSON");
  infoCmd->add_flag("--calls", info.calls, "List every recorded call");
  infoCmd->add_flag("--verify", info.verify,
                    "Read every dataset of complete iterations and checkpoints back and check its CRC-32");

  GraphOptions graph;
  CLI::App* graphCmd = app.add_subcommand(
      "graph", "The model as a graph: a run's ops coloured by their verdicts, a SAVE analysis's by bit classes (docs/workbench.md)");
  graphCmd->add_option("session", graph.session, "Session file (.h5)");
  graphCmd->add_option("--run", graph.run, "A run of the session: its calls on their ops, with its newest analysis's verdicts");
  graphCmd->add_option("--save", graph.save, "A SAVE analysis of the session: its layers' bit classes and reliable tiles");
  graphCmd->add_option("--model,-m", graph.model, "Instead of a session: a zoo model or an ONNX file");
  auto* graphJson = graphCmd->add_flag("--json", graph.json, "Print as JSON");
  graphCmd->add_flag("--dot", graph.dot, "Print as Graphviz dot")->excludes(graphJson);

  AnalyzeOptions analyze;
  CLI::App* analyzeCmd = app.add_subcommand("analyze", "Error report of a candidate tensor against the golden one");
  analyzeCmd->add_option("--golden,-g", analyze.golden, "Golden tensor: file.npy or file.h5:/dataset");
  analyzeCmd->add_option("--candidate,-c", analyze.candidate, "Candidate tensor: file.npy or file.h5:/dataset");
  addSessionOptions(analyzeCmd, analyze.session, analyze.run, analyze.call);
  analyzeCmd->add_option("--tile", analyze.tile, "Tile size for the per-tile counts, ROWSxCOLS")->capture_default_str();
  analyzeCmd->add_option("--threads", analyze.threads, "Threads (0: every core)");
  analyzeCmd->add_option("--device", analyze.device,
                         "Also compute the histograms on cpu, cuda:N or hip:N and check them against the CPU's");
  analyzeCmd->add_flag("--numerics", analyze.numerics,
                       "Also each tensor's numerics: amax, dynamic range, and the share of values that underflow or "
                       "saturate in fp16, bf16, fp8, fp6, fp4, plain, with one scale per tensor, and block-scaled (MX, NVFP4)");
  analyzeCmd->add_flag("--json", analyze.json, "Print the report as JSON");
  analyzeCmd->add_flag("--force", analyze.force,
                       "With --session: analyse again even if the run was analysed with the same settings");
  analyzeCmd->add_option("--name", analyze.name, "With --session: store the analysis as this run (a new name)");

  DetectOptions detect;
  CLI::App* detectCmd = app.add_subcommand("detect", "Which error model a candidate's difference from golden matches");
  detectCmd->add_option("--golden,-g", detect.golden, "Golden tensor: file.npy or file.h5:/dataset");
  detectCmd->add_option("--candidate,-c", detect.candidates, "Candidate tensor(s); give replays of one input to test for races");
  addSessionOptions(detectCmd, detect.session, detect.run, detect.call);
  detectCmd->add_flag("--json", detect.json, "Print the verdict as JSON");

  EnvOptions env;
  CLI::App* envCmd = app.add_subcommand("env", "Show versions, compute backends and devices, and LibTorch");
  envCmd->add_flag("--json", env.json, "Print as JSON");
  envCmd->add_flag("--no-torch", env.skipTorch, "Do not load LibTorch (faster)");

  SaveAnalyzeOptions saveAnalyze;
  CLI::App* saveCmd = app.add_subcommand("save", "SAVE: protect inference against memory bit flips");
  saveCmd->require_subcommand(1);
  CLI::App* saveAnalyzeCmd =
      saveCmd->add_subcommand("analyze", "Range analysis, bit properties and reliable-memory tiles of a model");
  saveAnalyzeCmd->add_option("--model,-m", saveAnalyze.model, "Zoo model: mlp, lenet, resnet, vit (or resnet18, random weights only), or an ONNX file (docs/save.md)")
      ->required();
  CLI::Option* weightsOption =
      saveAnalyzeCmd->add_option("--weights,-w", saveAnalyze.weights, "Session or checkpoint file with the model's weights");
  saveAnalyzeCmd->add_option("--random-weights", saveAnalyze.randomWeights, "Instead: seeded random weights (SEED > 0)")
      ->excludes(weightsOption);
  saveAnalyzeCmd->add_option("--run", saveAnalyze.run, "Run holding the checkpoint")->capture_default_str();
  saveAnalyzeCmd->add_option("--iteration", saveAnalyze.iteration, "Checkpoint iteration (default: the last)");
  saveAnalyzeCmd->add_option("--input-range", saveAnalyze.inputRange, "Raw input range LO,HI (before normalisation); "
                                                                       "NAME=LO,HI for one input of several (repeat it)")
      ->multi_option_policy(CLI::MultiOptionPolicy::Join)
      ->capture_default_str();
  saveAnalyzeCmd->add_option("--input-mean", saveAnalyze.inputMean,
                             "An ONNX model's input mean: one value or one per channel, e.g. 0.485,0.456,0.406 "
                             "(default Fashion-MNIST's 0.2860); NAME=V,... for one input of several (repeat it)")
      ->multi_option_policy(CLI::MultiOptionPolicy::Join);
  saveAnalyzeCmd->add_option("--input-std", saveAnalyze.inputStd,
                             "An ONNX model's input deviation: one value or one per channel (default 0.3530); "
                             "NAME=V,... for one input of several (repeat it)")
      ->multi_option_policy(CLI::MultiOptionPolicy::Join);
  saveAnalyzeCmd->add_option("--tau", saveAnalyze.tau, "A mantissa bit is robust if its flip moves a value by less")
      ->capture_default_str();
  saveAnalyzeCmd->add_option("--rtol", saveAnalyze.rtol,
                             "The value criterion's relative tolerance: a flip moving a value v by less than tau + RTOL |v| is robust")
      ->capture_default_str();
  saveAnalyzeCmd->add_option("--criterion", saveAnalyze.criterion,
                             "Bit robustness: value (a flip moves the value by less than --tau) or output (a flip "
                             "cannot move any logit by more than --epsilon, for any input in the box)")
      ->capture_default_str();
  saveAnalyzeCmd->add_option("--epsilon", saveAnalyze.epsilon, "The output criterion's bound on the logits' move");
  saveAnalyzeCmd->add_option("--mode", saveAnalyze.mode,
                             "symbolic (DeepPoly-style) or interval; or profiled (empirical, UNSOUND, for comparison)")
      ->capture_default_str();
  saveAnalyzeCmd->add_option("--data", saveAnalyze.data,
                             "With --mode profiled: the samples profiled (train split; HDF5 file, .npy folder or "
                             "fashion-mnist[:CxHxW]; default Fashion-MNIST)");
  saveAnalyzeCmd->add_option("--depth", saveAnalyze.depth, "Affine ops to substitute back through (0: all)")
      ->capture_default_str();
  saveAnalyzeCmd->add_option("--splits", saveAnalyze.splits, "Input bisections (up to 2^N parts)")->capture_default_str();
  saveAnalyzeCmd->add_option("--tile", saveAnalyze.tile, "Tile size ROWSxCOLS")->capture_default_str();
  saveAnalyzeCmd->add_option("--budget-mib", saveAnalyze.budgetMiB, "Reliable memory in MiB")->capture_default_str();
  saveAnalyzeCmd->add_option("--budget", saveAnalyze.budget,
                             "Instead: reliable memory as a share of the working set's peak (5%) or in MiB (2.5MiB)");
  saveAnalyzeCmd->add_option("--placement", saveAnalyze.placement,
                             "How tiles fill the budget: ranked (SAVE's), random (a seeded random order) or none")
      ->capture_default_str();
  saveAnalyzeCmd->add_option("--placement-problem", saveAnalyze.placementProblem,
                             "Write the placement problem (tiles, lifetimes, bytes, work) as CSV for an exact solver");
  saveAnalyzeCmd->add_option("--batch", saveAnalyze.batch, "Samples per inference (tile bytes scale with it)")
      ->capture_default_str();
  saveAnalyzeCmd->add_flag("--tightness", saveAnalyze.tightness,
                           "Compare with plain intervals, gradient ascent and the test set (slower)");
  saveAnalyzeCmd->add_option("--ascent-steps", saveAnalyze.ascentSteps, "Gradient-ascent steps per start (--tightness)")
      ->capture_default_str();
  saveAnalyzeCmd->add_option("--ascent-starts", saveAnalyze.ascentStarts, "Gradient-ascent starts per logit and direction")
      ->capture_default_str();
  saveAnalyzeCmd->add_option("--session,-s", saveAnalyze.session, "Store the result in this session (created if missing)");
  saveAnalyzeCmd->add_flag("--json", saveAnalyze.json, "Print as JSON");
  saveAnalyzeCmd->add_flag("--force", saveAnalyze.force, "Replace an existing --placement-problem file");

  SaveCheckBitsOptions checkBits;
  CLI::App* checkBitsCmd = saveCmd->add_subcommand(
      "check-bits", "Ground truth for the bit classes: single-bit fault injection on weights and activations");
  addModelOptions(checkBitsCmd, checkBits.analysis);
  checkBitsCmd->add_option("--batch", checkBits.batch, "Evaluation images (the first of the test set)")->capture_default_str();
  checkBitsCmd->add_option("--weight-flips", checkBits.weightFlips, "Sampled weight bits (0: every bit of every weight)")
      ->capture_default_str();
  checkBitsCmd->add_option("--weights-per-stratum", checkBits.weightsPerStratum,
                           "Stratified weight sample: this many parameters per layer and bit position (instead of --weight-flips)");
  checkBitsCmd->add_option("--activation-flips", checkBits.activationFlips, "Sampled activation bits")->capture_default_str();
  checkBitsCmd->add_option("--activation-images", checkBits.activationImages,
                           "Test images the activation flips are drawn from (0: the whole test split, at most 10,000 and 1 GiB)")
      ->capture_default_str();
  checkBitsCmd->add_option("--seed", checkBits.seed, "Seed of the samples")->capture_default_str();
  checkBitsCmd->add_option("--threads", checkBits.threads, "Threads (0: every core)");
  addShardOptions(checkBitsCmd, checkBits.shard, "This process's part of the campaign, INDEX/COUNT (merge with 'peat merge')",
                  checkBits.mpi, checkBits.analysis.session, "Store the result in this session", checkBits.analysis.json);

  SaveCampaignOptions campaign;  // 6 MiB: as on an Orin safety island (the default)
  CLI::App* campaignCmd = addSaveModelCommand(
      saveCmd, "campaign", "Accuracy against bit flips for no protection, SAVE, TMR, Ranger and ECC, and their latency",
      campaign.analysis, "Images per inference", 6, 100);
  campaignCmd->add_option("--images", campaign.images, "Test images per point")->capture_default_str();
  campaignCmd->add_option("--flips", campaign.flips, "Faults per inference, comma-separated")->capture_default_str();
  campaignCmd->add_option("--schemes", campaign.schemes, "Schemes, comma-separated")->capture_default_str();
  campaignCmd->add_option("--pattern", campaign.pattern, "random, consecutive, region, adjacent (two neighbouring bits of a word) or burst (one 256-word tile)")->capture_default_str();
  campaignCmd->add_option("--bits", campaign.bits, "Bits per fault (1: single-bit)")->capture_default_str();
  campaignCmd->add_option("--seed", campaign.seed, "Seed of the faults")->capture_default_str();
  campaignCmd->add_option("--target", campaign.target, "Where faults land: both, weights or activations")
      ->capture_default_str();
  campaignCmd->add_option("--basis", campaign.basis,
                          "inference: every scheme gets --flips faults per inference; memory: --flips is the unprotected "
                          "run's count and each scheme gets the same rate per byte of its own unreliable memory")
      ->capture_default_str();
  campaignCmd->add_flag("--no-rerun-faults", campaign.noRerunFaults,
                        "Reruns meet no new faults (by default faults arrive at the same rate per layer step during "
                        "a recovery's rerun)");
  campaignCmd->add_option("--check-lag", campaign.checkLag,
                          "SAVE: layers its checks may trail the inference (1: a layer's verdict is in before the layer "
                          "after next starts; more overlaps costly checks better, and a detection redoes more layers)")
      ->capture_default_str();
  campaignCmd->add_option("--max-recoveries", campaign.maxRecoveries,
                          "SAVE: reruns of one failed layer before the inference counts as unrecovered")->capture_default_str();
  campaignCmd->add_flag("--agreement", campaign.agreement,
                        "Score top-1 agreement with the fault-free prediction instead of accuracy on the labels "
                        "(for a model with random or untrained weights)");
  campaignCmd->add_option("--verifier", campaign.verifier, "SAVE's check of linear/conv outputs: auto, recompute, abft or mixed")
      ->capture_default_str();
  addShardOptions(campaignCmd, campaign.shard, "This process's part, INDEX/COUNT", campaign.mpi, campaign.analysis.session,
                  "Store the points in this session as they finish", campaign.analysis.json);
  SaveVerifiersOptions verifiers;  // no reliable memory by default: every value is checked
  verifiers.analysis.placement = "none";
  CLI::App* verifiersCmd = addSaveModelCommand(
      saveCmd, "verifiers", "SAVE's verifiers (fp32 recomputation, ABFT, mixed-precision) on the same single-bit faults, per op",
      verifiers.analysis, "Test images checked together", 1.0 / 64, 16);
  verifiersCmd->add_option("--flips", verifiers.flips, "Single-bit flips per op")->capture_default_str();
  verifiersCmd->add_option("--seed", verifiers.seed, "Seed of the flips")->capture_default_str();
  verifiersCmd->add_flag("--json", verifiers.analysis.json, "Print as JSON");
  SaveRunOptions saveRun;
  CLI::App* saveRunCmd = addSaveRunCommand(saveCmd, saveRun);
  SaveMergeOptions merge;
  CLI::App* mergeCmd = app.add_subcommand(
      "merge", "Merge the shards (--shard i/N) of a check-bits, SAVE campaign, playback or runtime-FI sweep");
  SaveAnalyzeOptions inspect;
  CLI::App* inspectCmd =
      saveCmd->add_subcommand("inspect", "The graph SAVE analyses for a model: each op, its shape and parameters "
                                         "(for an ONNX file: how its nodes map; unsupported ones are listed)");
  inspectCmd->add_option("--model,-m", inspect.model, "Zoo model or an ONNX file")->required();
  inspectCmd->add_option("--weights,-w", inspect.weights, "Session or checkpoint file with the weights");
  inspectCmd->add_option("--random-weights", inspect.randomWeights, "Instead: seeded random weights (SEED > 0)");
  inspectCmd->add_flag("--json", inspect.json, "Print as JSON");
  CLI::App* saveMergeCmd = saveCmd->add_subcommand("merge", "The same as 'peat merge'");
  for (CLI::App* cmd : {mergeCmd, saveMergeCmd}) {
    cmd->add_option("shards", merge.shards, "The shards' session files, one per shard")->required();
    cmd->add_option("--session,-s", merge.session, "Write the merged result into this session (created if missing)");
    cmd->add_flag("--json", merge.json, "Print a merged check-bits result as JSON");
  }

  // Declared for --help: maybeRunPython has run it before parsing (python/peat/_cli.py has its options).
  app.add_subcommand("record", "Record the op calls of your own PyTorch script: peat record -o S.h5 [--ops gemm] "
                               "[--every N] [--swap OP=KERNEL --swap-every K] -- python3 SCRIPT ARGS (docs/record.md)")
      ->allow_extras();

  // The commands that train or run models: declared here like the others, run in libpeat_torch.so.
  std::map<std::string, TorchCommand> torch;
  const std::vector<CLI::App*> torchCmds = addTorchCommands(app, torch);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(std::string(e.what()) + " (see 'peat --help')", 2);
  }

  try {
    for (CLI::App* sub : torchCmds)
      if (*sub) return runTorch(torch.at(sub->get_name()), commandLineOf(argc, argv));
    if (*infoCmd) return runInfo(info);
    if (*graphCmd) return runGraph(graph);
    if (*envCmd) return runEnv(env);
    if (*saveAnalyzeCmd) {
      for (int i = 0; i < argc; ++i) saveAnalyze.commandLine += (i ? " " : "") + std::string(argv[i]);
      return runSaveAnalyze(saveAnalyze);
    }
    if (*checkBitsCmd) {
      for (int i = 0; i < argc; ++i) checkBits.analysis.commandLine += (i ? " " : "") + std::string(argv[i]);
      return checkBits.mpi.enabled ? runSaveCheckBitsMpi(checkBits) : runSaveCheckBits(checkBits);
    }
    if (*verifiersCmd) return runSaveVerifiers(verifiers);
    if (*saveRunCmd) return runSaveRun(saveRun);
    if (*inspectCmd) return runSaveInspect(inspect);
    if (*mergeCmd || *saveMergeCmd) {
      for (int i = 0; i < argc; ++i) merge.commandLine += (i ? " " : "") + std::string(argv[i]);
      return runSaveMerge(merge);
    }
    if (*campaignCmd) {
      for (int i = 0; i < argc; ++i) campaign.analysis.commandLine += (i ? " " : "") + std::string(argv[i]);
      return campaign.mpi.enabled ? runSaveCampaignMpi(campaign) : runSaveCampaign(campaign);
    }
    if ((*analyzeCmd && !pairOrSession(!analyze.golden.empty() && !analyze.candidate.empty(), analyze.session, analyze.run)) ||
        (*detectCmd && !pairOrSession(!detect.golden.empty() && !detect.candidates.empty(), detect.session, detect.run)))
      return fail("give --golden and --candidate, or --session and --run (see 'peat --help')", 2);
    if (*analyzeCmd && !analyze.session.empty())
      return runSessionAnalysis(analyze.session, analyze.run, analyze.call, analyze.tile, analyze.json, false,
                                analyze.force, analyze.name);
    if (*detectCmd && !detect.session.empty())
      return runSessionAnalysis(detect.session, detect.run, detect.call, "16x16", detect.json, true);
    if (*analyzeCmd) return runAnalyze(analyze);
    if (*detectCmd) return runDetect(detect);
  } catch (const std::bad_alloc&) {  // never "std::bad_alloc" as the whole message
    return fail("out of memory: the input or model is larger than this machine can hold (see docs/bad-input.md)", 1);
  } catch (const std::length_error& e) {  // a library's size check ("vector::_M_default_append")
    return fail(std::string("a size is out of range (") + e.what() + "): the input or model declares more than can be held", 1);
  } catch (const std::exception& e) {
    return fail(e.what(), 1);
  }
  return fail("no command given (see 'peat --help')", 2);
}
