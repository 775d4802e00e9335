// SPDX-License-Identifier: MIT
#pragma once
// SAVE at run time, on the CPU backend: inference of a batch through the engine with its weights
// and activations in emulated *unreliable memory* (host buffers that an injected fault process
// flips), beside the baselines it is compared with.
//
// Memory model. Unreliable memory is every weight and bias, and every activation tensor element
// that the scheme does not place in reliable memory (which never flips). One inference of a batch
// receives `flips` faults at 32-bit word addresses drawn over that unreliable space (or over its
// weights or its activations only: FaultModel::target): weight faults are present from the start
// and stay until the weights are rewritten; an activation fault lands on its tensor right after
// the op that writes it and before any op reads it. Faults arrive at a steady rate per layer step:
// a recovery that redoes k of the N layer steps (the failed layer and the next one, which read its
// output) meets Poisson(flips * k / N) new faults, on the weights and tensors of the failed layer
// and those after it (unless FaultModel::duringReruns is off).
//
// Schemes:
//  - none: the faults act;
//  - save: the weights each layer used are compared with the host's clean copy; each activation
//    tensor is range-checked against the sound ranges,
//    and its type-2 elements in unreliable memory are recomputed from the op's verified inputs and
//    compared outside their robust bits. The check of a tensor runs on a second core while the
//    next layer computes, and its verdict is in before the layer after that starts; on a detection
//    the layer's weights are rewritten from the host's copy and the inference restarts from the
//    interrupted layer: it is rerun and checked again before the inference goes on (at most
//    FaultModel::maxRecoveries reruns of one layer; then the inference counts as unrecovered and
//    goes on with what the last rerun computed). Tiles are placed in reliable memory by the selection;
//  - tmr: three runs, each with its own faults, and a majority vote on each image's prediction;
//  - ranger: every activation is clamped to profiled (empirical) bounds before it is read;
//  - ecc: SEC-DED per 32-bit word: a word with one flipped bit is corrected; two flipped bits are
//    detected but not correctable, and the inference fails (a machine-check: every prediction of
//    the batch counts as wrong); three or more may be miscorrected or missed: the word keeps its
//    corruption.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/save/mixed.h"
#include "core/save/selection.h"

namespace peat::save {

enum class Scheme { None, Save, Tmr, Ranger, Ecc };
const char* schemeName(Scheme s);
Scheme schemeFromName(const std::string& name);  // throws SaveError listing the names

// Random: words anywhere; Consecutive: neighbouring words; Region: one window of regionWords;
// Adjacent: two neighbouring bits of one word per fault (a multi-cell upset); Burst: every fault in
// one 256-word window (one 16x16 fp32 tile).
enum class FaultPattern { Random, Consecutive, Region, Adjacent, Burst };
FaultPattern patternFromName(const std::string& name);

enum class FaultTarget { Both, Weights, Activations };
FaultTarget targetFromName(const std::string& name);

struct FaultModel {
  int64_t flips = 0;          // faults per inference of a batch
  FaultPattern pattern = FaultPattern::Random;
  int bitsPerFault = 1;       // 1: single-bit; more: that many distinct bits of one word
  int64_t regionWords = 4096; // Region: all faults fall in one window this long
  FaultTarget target = FaultTarget::Both;
  bool duringReruns = true;   // a rerun meets new faults at the same rate per layer step
  int maxRecoveries = 10;     // SAVE: reruns of one layer before the inference counts as unrecovered
  // SAVE: how many layers its checks may trail the inference (the inference waits when they fall
  // further behind). 1: layer v's verdict is in before layer v + 2 starts, and a detection redoes
  // two layers; more overlaps a costly layer's check with later costly layers, and a detection
  // redoes every layer run since the one that failed.
  int checkLag = 1;
};

// How SAVE checks the type-2 elements of a linear or conv output: by recomputing them in fp32
// (compared outside their robust bits), by mixed-precision integer recomputation (core/save/mixed.h:
// 16-bit mantissa products, compared within a sound bound), or by ABFT column checksums (sum over
// output channels of each position against (1^T W) x + sum b, with a sound fp32 tolerance). A
// checksum costs 1/channels of the op; the two approximate checks miss changes below their
// bounds. `auto` takes ABFT, else the mixed check, only for ops whose largest bound is below tau,
// where every change it can miss is one a value-robust bit could make anyway.
enum class VerifierKind { Recompute, Abft, Mixed };
enum class VerifierPolicy { Auto, Recompute, Abft, Mixed };
VerifierPolicy verifierPolicyFromName(const std::string& name);

struct VerifierChoice {
  int node = 0;
  std::string name;
  VerifierKind kind = VerifierKind::Recompute;
  double tolerance = 0;   // ABFT's largest detection threshold on this op's ranges
  double mixedTolerance = 0;  // the mixed-precision check's largest bound on this op's ranges
  double costRatio = 0;   // ABFT's multiply-adds over recomputation's
  std::string reason;
};

struct RunStats {
  uint64_t faults = 0;          // words hit
  uint64_t detections = 0;      // SAVE: weight mismatches, range violations, recomputation mismatches
  uint64_t weightQuietRepairs = 0;  // SAVE: weight changes the bit classes call robust, rewritten without a rerun
  uint64_t weightRepairs = 0, rangeViolations = 0, recomputeMismatches = 0, recoveries = 0;
  uint64_t recomputed = 0;      // SAVE: type-2 elements recomputed
  uint64_t checksumMismatches = 0, checksums = 0;  // SAVE with ABFT: failed and performed column checks
  uint64_t eccCorrected = 0, eccUncorrectable = 0;  // ECC: single-bit words corrected, double-bit words detected
  uint64_t eccFailures = 0, eccMissed = 0;  // ECC: inferences failed by a detected double error; words of 3+ bits kept
  uint64_t rerunSteps = 0, rerunFaults = 0, unrecovered = 0;  // SAVE: layer steps rerun, faults they met, given up
  // SAVE: reruns of only the output channels whose weights a fault changed (counted in rerunSteps
  // too), and the share of their layers' channels they recomputed, summed
  uint64_t channelReruns = 0;
  double channelRerunShare = 0;
  // SAVE: repairs that recomputed only the values that failed their range check or recomputation
  // (counted in rerunSteps too), and the share of their layers' values (over the batch), summed
  uint64_t elementRepairs = 0;
  double elementRepairShare = 0;
  RunStats& operator+=(const RunStats& o);
};

// ProtectedRunner's parts, private to core/save/runtime*.cpp (core/save/runtime_parts.h).
namespace protect {
struct Fault;
class FaultProcess;
class Verifiers;
class CheckThread;
}  // namespace protect

// The schemes on one graph and batch: the fault process over unreliable memory
// (runtime_faults.cpp), SAVE's verifiers (runtime_verifiers.cpp), SAVE's layer schedule with its
// checks behind the inference and its recovery (runtime_schedule.cpp), and the baselines beside it
// (runtime_baselines.cpp).
class ProtectedRunner {
 public:
  // `selection` places SAVE's tiles (for `batch` images) and gives its ranges and bit masks;
  // `profiled` are Ranger's bounds (empirical, unsound by design).
  ProtectedRunner(const Graph& g, const Selection& selection, std::vector<NodeRange> profiled, int64_t batch,
                  VerifierPolicy policy = VerifierPolicy::Auto);
  ~ProtectedRunner();
  ProtectedRunner(const ProtectedRunner&) = delete;
  ProtectedRunner& operator=(const ProtectedRunner&) = delete;

  // Predictions of `batch` images under the scheme and fault model; `seed` draws the faults.
  std::vector<int> infer(const float* images, Scheme scheme, const FaultModel& faults, uint64_t seed, RunStats& stats);

  // The output tensor of the last infer() for the whole batch ([batch * output size]): for TMR, each
  // sample's from a run that gave the voted prediction; NaN for an inference ECC failed.
  const std::vector<float>& outputs() const { return output_; }

  int64_t unreliableWords(Scheme scheme) const;
  int64_t unreliableWords(Scheme scheme, FaultTarget target) const;  // of the part a fault model targets
  // For comparing verifiers on the same faults: SAVE's check of node `node`'s type-2 elements in
  // unreliable memory (those listed by type2Unreliable) with a given verifier, on activations
  // `act` of a whole batch (true on a detection), and whether a value passes the range check.
  bool checkType2With(VerifierKind kind, int node, const std::vector<std::vector<float>>& act, RunStats& stats);
  const std::vector<int64_t>& type2Unreliable(int node) const;
  // The output channels (features) of a linear or conv node that its recomputation computes when
  // only those hold type-2 values in unreliable memory; empty: the whole layer.
  const std::vector<int64_t>& recomputedChannels(int node) const;
  bool withinRange(int node, int64_t element, float value) const;
  const std::vector<VerifierChoice>& verifierChoices() const;

 private:
  // One inference of the batch under `scheme` with `faults` landed (the baselines, or SAVE's schedule).
  std::vector<int> run(const float* images, Scheme scheme, const std::vector<protect::Fault>& faults,
                       const FaultModel& model, uint64_t seed, RunStats& stats);
  // SAVE's layer loop with its checks behind the inference and the recovery of a failed layer;
  // `step(v)` runs layer v and lands its activation faults, `place` lands a rerun's fault on the
  // weights or tensors of layers >= its third argument.
  void runSave(const std::function<void(std::size_t)>& step,
               std::vector<std::vector<std::pair<int64_t, uint32_t>>>& activationFaults,
               const std::function<bool(uint64_t, uint32_t, std::size_t)>& place, const FaultModel& model, uint64_t seed,
               RunStats& stats);

  const Graph& g_;                       // the host's clean copy of the weights
  std::vector<NodeRange> profiled_;      // Ranger's bounds
  int64_t batch_;
  Graph work_;                           // the weights as unreliable memory holds them
  std::unique_ptr<protect::FaultProcess> faults_;   // where unreliable memory lies, and its faults
  std::unique_ptr<protect::Verifiers> verifiers_;   // SAVE's checks of one layer
  std::unique_ptr<protect::CheckThread> checkThread_;  // SAVE's second core, started by its first run
  std::vector<std::vector<float>> act_;  // activations, reused between runs
  std::vector<std::size_t> faultedWeights_;  // nodes whose weights the last run flipped
  std::vector<float> output_;            // the last inference's output tensor
};

}  // namespace peat::save
