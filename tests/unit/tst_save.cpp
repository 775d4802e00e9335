// SPDX-License-Identifier: MIT
// SAVE's selection: the engine against LibTorch, soundness of the ranges on 10,000 inputs per zoo
// model, the bit-class rules, the exactness of the flip oracle against brute force, and bad input.
#include <ATen/ATen.h>  // before Qt: LibTorch uses `slots` as a name
#include <torch/torch.h>
#include <QtTest>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <hwy/targets.h>

#include "core/data/datasets.h"
#include "core/save/analysis_record.h"
#include "core/save/campaign.h"
#include "core/save/check_bits.h"
#include "core/save/dataset.h"
#include "core/save/flip_in_model.h"
#include "core/save/mixed.h"
#include "core/save/selection.h"
#include "core/torch/models/zoo.h"
#include "core/torch/ops/dispatcher.h"
#include "core/torch/train/trainer.h"

using namespace peat;

namespace {

const char* kLenetWeights = PEAT_SOURCE_DIR "/data/lenet-fashion-mnist.h5";
const char* kVitWeights = PEAT_SOURCE_DIR "/data/vit-fashion-mnist.h5";

// A session holding one SAVE analysis of the shipped LeNet, as "lenet-interval".
void writeLenetAnalysis(const std::string& path, const save::Selection& s) {
  store::SessionWriter w(path, store::Provenance{});
  save::ModelSource source;
  source.model = "lenet";
  source.weights = kLenetWeights;
  save::writeAnalysis(w, "lenet-interval", s, source);
  w.flush();
}

// A zoo model in LibTorch and its parameters (and buffers) by name: the shipped LeNet or ViT, or a seeded
// initialisation with batch-norm statistics moved away from identity so the folding is exercised.
struct Twin {
  std::shared_ptr<models::Model> model;
  std::map<std::string, store::Tensor> parameters;
};

Twin twin(const std::string& name) {
  Twin t;
  at::manual_seed(7);
  t.model = models::makeModel(name, {});
  at::NoGradGuard noGrad;
  if (name == "lenet" || name == "vit") {
    const auto stored = save::loadCheckpoint(name == "vit" ? kVitWeights : kLenetWeights);
    for (auto& [n, p] : t.model->parameters()) p.copy_(train::toTorch(stored.at(n)));
  }
  for (auto& [n, b] : t.model->buffers()) {
    if (n.find("running_mean") != std::string::npos) b.copy_(at::randn(b.sizes()) * 0.2);
    if (n.find("running_var") != std::string::npos) b.copy_(at::rand(b.sizes()) + 0.5);
  }
  for (auto& [n, p] : t.model->parameters())
    if (n.find("bn") != std::string::npos && n.find("weight") != std::string::npos) p.copy_(at::rand(p.sizes()) + 0.5);
  for (const auto& [n, p] : t.model->parameters()) t.parameters[n] = train::fromTorch(p);
  for (const auto& [n, b] : t.model->buffers()) t.parameters[n] = train::fromTorch(b);
  return t;
}

const data::ImageSet& testSet() {
  static const data::ImageSet set = data::loadFashionMnist("t10k");
  return set;
}

// 10,000 inputs in the pixel box [0, 1]: all black, all white, 3,000 random black-and-white
// patterns (corners of the box), 4,998 uniform random images and 2,000 test images.
// The test set's labels as the campaign takes them (classes as int32).
const std::vector<int32_t>& labels32() {
  static const std::vector<int32_t> l(testSet().labels.begin(), testSet().labels.end());
  return l;
}

std::vector<float> boxInputs(const save::Graph& g, uint64_t seed) {
  std::vector<uint8_t> unused;
  const int64_t n = 784;
  std::vector<float> pixels;
  pixels.reserve(10000 * n);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  for (int64_t i = 0; i < n; ++i) pixels.push_back(0);
  for (int64_t i = 0; i < n; ++i) pixels.push_back(1);
  for (int k = 0; k < 3000; ++k)
    for (int64_t i = 0; i < n; ++i) pixels.push_back(float(rng() & 1));
  for (int k = 0; k < 4998; ++k)
    for (int64_t i = 0; i < n; ++i) pixels.push_back(u(rng));
  for (std::size_t i = 0; i < std::size_t(2000 * n); ++i) pixels.push_back(float(testSet().pixels[i]) / 255.0f);
  std::vector<float> x(pixels.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = (pixels[i] - g.inputMean) / g.inputDeviation;
  return x;
}

float flipped(float v, int bit) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  b ^= uint32_t(1) << bit;
  std::memcpy(&v, &b, 4);
  return v;
}

}  // namespace

class TestSave : public QObject {
  Q_OBJECT
 private slots:
  void engineMatchesTorch_data();
  void engineMatchesTorch();
  void partialRecomputationIsExact();
  void rangesAreSound_data();
  void rangesAreSound();
  void transformerOpsAreSoundOnNarrowBoxes();
  void symbolicIsTighterThanIntervals();
  void bitClassRules();
  void rangingAndRobustBitsHoldForEveryValue();
  void relativeToleranceHoldsForEveryValue();
  void tilesGoToReliableMemoryByWorkPerByte();
  void flipInModelAgreesWithTheOracleAndTheRuntime();
  void flipOracleMatchesBruteForce_data();
  void flipOracleMatchesBruteForce();
  void checkBitsHasNoFalseRobust();
  void outputCriterionBoundsTheLogits();
  void saveHasNoFalsePositives();
  void recomputationSkipsReliableChannels();
  void weightFaultsRerunOnlyTheirChannels();
  void activationFaultsRepairOnlyTheirValues();
  void saveKeepsPredictionsUnderFaults();
  void eccCorrectsSingleBitFaultsOnly();
  void abftChecksNeverFailWithoutFaults();
  void mixedPrecisionCheckIsSoundAndCatchesChanges();
  void faultPatterns();
  void campaignShardsMatchOneProcess();
  void refusals();
};

namespace {

// LeNet with a reliable-memory budget of a quarter of its activations, and its test images.
struct RuntimeFixture {
  save::Graph g = save::zooGraph("lenet", save::loadCheckpoint(kLenetWeights));
  save::Selection sel;
  std::vector<float> images;
  int64_t batch = 20;
  RuntimeFixture() {
    save::SelectionOptions o;
    o.batch = batch;
    o.budgetBytes = 15002 * 4 * batch / 4;
    sel = save::selectBits(g, o);
    std::vector<uint8_t> pixels(testSet().pixels.begin(), testSet().pixels.begin() + 200 * 784);
    images = save::normalisedImages(g, pixels);
  }
  std::vector<save::NodeRange> profiled() const { return save::profiledRanges(g, images.data(), 200); }
};

// SAVE under `m` on the fixture's first ten batches: every prediction equals the fault-free one
// (a failed comparison ends the calling test: check QTest::currentTestFailed()).
// `flips` faults per inference on `target`, none during reruns: every batch's predictions stay clean.
void expectCleanPredictions(const RuntimeFixture& f, save::ProtectedRunner& runner, int64_t flips,
                            save::FaultTarget target, save::RunStats& stats) {
  save::FaultModel m;
  m.flips = flips;
  m.target = target;
  m.duringReruns = false;
  save::RunStats none;
  for (int64_t b = 0; b < 10; ++b) {
    const float* x = f.images.data() + b * f.batch * 784;
    const std::vector<int> clean = runner.infer(x, save::Scheme::None, {}, 0, none);
    QCOMPARE(runner.infer(x, save::Scheme::Save, m, uint64_t(b) + 1, stats), clean);
  }
}

}  // namespace

void TestSave::saveHasNoFalsePositives() {
  RuntimeFixture f;
  save::ProtectedRunner runner(f.g, f.sel, f.profiled(), f.batch);
  QVERIFY(runner.unreliableWords(save::Scheme::Save) < runner.unreliableWords(save::Scheme::None));
  for (int64_t b = 0; b < 10; ++b) {
    save::RunStats plain, protectedStats;
    const float* x = f.images.data() + b * f.batch * 784;
    const std::vector<int> clean = runner.infer(x, save::Scheme::None, {}, 0, plain);
    QCOMPARE(runner.infer(x, save::Scheme::Save, {}, 0, protectedStats), clean);
    QCOMPARE(protectedStats.detections, uint64_t(0));
    QVERIFY(protectedStats.recomputed > 0);
  }
}

// A layer whose type-2 values in unreliable memory lie in some output channels only recomputes
// those: the slice agrees with the clean layer bit for bit (no false alarm on any image), and a
// flipped bit that the classes call non-robust, in any element it must check, is caught.
void TestSave::recomputationSkipsReliableChannels() {
  RuntimeFixture f;
  int slicedConv = 0, slicedLinear = 0;
  std::mt19937_64 rng(5);
  // Tiles of 2 channels x 100 positions with a budget of three of conv2's, then 4x4 tiles with a
  // budget of one: conv2 keeps 6 of its 16 channels in reliable memory, then fc1 4 of its 30 tiles.
  for (const auto& [rows, cols, tiles] : {std::array<int64_t, 3>{2, 100, 3}, std::array<int64_t, 3>{4, 4, 1}}) {
    save::SelectionOptions o;
    o.batch = f.batch;
    o.tileRows = rows;
    o.tileCols = cols;
    o.budgetBytes = tiles * rows * cols * 4 * f.batch;
    f.sel = save::selectBits(f.g, o);
    const save::ProtectedRunner runner(f.g, f.sel, {}, f.batch);
    save::ProtectedRunner checker(f.g, f.sel, {}, f.batch);
    for (int64_t b = 0; b < 5; ++b) {
      const std::vector<std::vector<float>> clean = save::runAll(f.g, f.images.data() + b * f.batch * 784, f.batch);
      for (std::size_t v = 1; v < f.g.nodes.size(); ++v) {
        const std::vector<int64_t>& channels = runner.recomputedChannels(int(v));
        if (channels.empty()) continue;
        const save::Node& n = f.g.nodes[v];
        QVERIFY(int64_t(channels.size()) < (n.op == save::Op::Linear ? n.features() : n.shape[0]));
        if (b == 0) ++(n.op == save::Op::Linear ? slicedLinear : slicedConv);
        save::RunStats stats;
        QVERIFY2(!checker.checkType2With(save::VerifierKind::Recompute, int(v), clean, stats), n.name.c_str());
        const std::vector<int64_t>& check = runner.type2Unreliable(int(v));
        const save::LayerSelection& l = f.sel.layers[v - 1];
        for (int k = 0; k < 20; ++k) {
          const int64_t i = check[std::uniform_int_distribution<std::size_t>(0, check.size() - 1)(rng)];
          const int64_t image = std::uniform_int_distribution<int64_t>(0, f.batch - 1)(rng);
          const uint32_t vulnerable = ~l.robustMask[std::size_t(i)];
          QVERIFY(vulnerable != 0);
          std::vector<std::vector<float>> act = clean;
          float& value = act[v][std::size_t(image * n.size() + i)];
          uint32_t bits;
          std::memcpy(&bits, &value, 4);
          bits ^= uint32_t(1) << (31 - __builtin_clz(vulnerable));
          std::memcpy(&value, &bits, 4);
          QVERIFY2(checker.checkType2With(save::VerifierKind::Recompute, int(v), act, stats), n.name.c_str());
        }
      }
    }
  }
  QVERIFY2(slicedConv > 0 && slicedLinear > 0,
           qPrintable(QStringLiteral("%1 conv and %2 linear layers recompute some channels").arg(slicedConv).arg(slicedLinear)));
}

// A weight fault that the compare finds makes SAVE rerun only the output channels whose weights
// changed: each such rerun recomputes a small share of its layer, its values are the clean layer's
// (no recomputation or range check fails afterwards, and no prediction changes).
void TestSave::weightFaultsRerunOnlyTheirChannels() {
  RuntimeFixture f;
  save::ProtectedRunner runner(f.g, f.sel, f.profiled(), f.batch);
  save::RunStats stats;
  expectCleanPredictions(f, runner, 8, save::FaultTarget::Weights, stats);
  if (QTest::currentTestFailed()) return;
  QVERIFY(stats.weightRepairs > 0);
  QCOMPARE(stats.recomputeMismatches + stats.rangeViolations, uint64_t(0));
  QCOMPARE(stats.recoveries, stats.detections);  // every rerun passed its check at once
  QVERIFY2(stats.channelReruns > 0 && stats.channelRerunShare < 0.2 * double(stats.channelReruns),
           qPrintable(QStringLiteral("%1 channel reruns, %2 layers' worth").arg(stats.channelReruns).arg(stats.channelRerunShare)));
}

// An activation fault that the range check or the recomputation finds makes SAVE recompute only the
// values that failed (a tiny share of the layer), from the checked inputs: the repaired values are
// the clean ones, so every inference recovers and no prediction changes. A repair that wrote anything
// else would fail its check again on every attempt and give up.
void TestSave::activationFaultsRepairOnlyTheirValues() {
  RuntimeFixture f;
  save::SelectionOptions o;
  o.batch = f.batch;
  o.placement = "none";  // every value in unreliable memory
  f.sel = save::selectBits(f.g, o);
  save::ProtectedRunner runner(f.g, f.sel, {}, f.batch);
  save::RunStats stats;
  expectCleanPredictions(f, runner, 200, save::FaultTarget::Activations, stats);
  if (QTest::currentTestFailed()) return;
  QVERIFY(stats.rangeViolations > 0 && stats.recomputeMismatches > 0);
  QCOMPARE(stats.unrecovered, uint64_t(0));
  QCOMPARE(stats.channelReruns, uint64_t(0));
  QVERIFY2(stats.elementRepairs > 0 && stats.elementRepairShare < 0.01 * double(stats.elementRepairs),
           qPrintable(QStringLiteral("%1 repairs, %2 layers' worth").arg(stats.elementRepairs).arg(stats.elementRepairShare)));
}

void TestSave::saveKeepsPredictionsUnderFaults() {
  RuntimeFixture f;
  save::ProtectedRunner runner(f.g, f.sel, f.profiled(), f.batch);
  save::FaultModel m;
  m.flips = 4096;
  m.duringReruns = false;  // first: faults only before the first detection
  int64_t same = 0, sameUnprotected = 0, sameRerun = 0, total = 0;
  save::RunStats stats, unprotected, none, rerun;
  save::FaultModel steady = m;
  steady.duringReruns = true;  // then: reruns meet new faults at the same rate per layer step
  for (int64_t b = 0; b < 10; ++b) {
    const float* x = f.images.data() + b * f.batch * 784;
    const std::vector<int> clean = runner.infer(x, save::Scheme::None, {}, 0, none);
    const std::vector<int> p = runner.infer(x, save::Scheme::Save, m, uint64_t(b) + 1, stats);
    const std::vector<int> q = runner.infer(x, save::Scheme::None, m, uint64_t(b) + 1, unprotected);
    const std::vector<int> r = runner.infer(x, save::Scheme::Save, steady, uint64_t(b) + 1, rerun);
    for (std::size_t i = 0; i < clean.size(); ++i) {
      same += p[i] == clean[i];
      sameUnprotected += q[i] == clean[i];
      sameRerun += r[i] == clean[i];
      ++total;
    }
  }
  QCOMPARE(same, total);  // every fault was caught or harmless
  QVERIFY2(sameUnprotected < total * 8 / 10, qPrintable(QString::number(sameUnprotected)));
  QVERIFY(stats.detections > 0 && stats.recoveries > 0 && stats.weightRepairs > 0);
  QVERIFY(stats.rangeViolations + stats.recomputeMismatches > 0);
  QCOMPARE(stats.rerunFaults, uint64_t(0));
  // a recovery reruns the interrupted layer and redoes the one after it (the checks trail the
  // inference by one layer), not the rest of the network
  QVERIFY2(stats.rerunSteps <= 2 * stats.recoveries,
           qPrintable(QStringLiteral("%1 steps for %2 recoveries").arg(stats.rerunSteps).arg(stats.recoveries)));
  // every rerun is checked again: what it meets is caught too, or the inference gives up (counted)
  QVERIFY(rerun.rerunFaults > 0 && rerun.recoveries > stats.recoveries);
  QVERIFY2(sameRerun + int64_t(rerun.unrecovered) * f.batch >= total,
           qPrintable(QStringLiteral("%1 of %2 kept, %3 unrecovered").arg(sameRerun).arg(total).arg(rerun.unrecovered)));
  qInfo("4096 faults per inference of 20 images: SAVE keeps %lld of %lld predictions with faults during reruns "
        "(%llu rerun steps met %llu faults, %llu inferences unrecovered)", (long long)sameRerun, (long long)total,
        (unsigned long long)rerun.rerunSteps, (unsigned long long)rerun.rerunFaults, (unsigned long long)rerun.unrecovered);
}

void TestSave::eccCorrectsSingleBitFaultsOnly() {
  RuntimeFixture f;
  save::ProtectedRunner runner(f.g, f.sel, f.profiled(), f.batch);
  save::FaultModel m;
  m.flips = 2000;
  save::RunStats none, single, dbl;
  const std::vector<int> clean = runner.infer(f.images.data(), save::Scheme::None, {}, 0, none);
  const std::vector<int> p = runner.infer(f.images.data(), save::Scheme::Ecc, m, 9, single);
  QVERIFY(single.eccCorrected > 1900);  // two faults may share a word, which ECC cannot correct
  QCOMPARE(single.eccCorrected + single.eccUncorrectable + single.eccMissed, single.faults);
  if (single.eccUncorrectable == 0) QCOMPARE(p, clean);
  // SEC-DED detects a double error but cannot correct it: the inference fails, every prediction wrong
  m.bitsPerFault = 2;
  const std::vector<int> d = runner.infer(f.images.data(), save::Scheme::Ecc, m, 9, dbl);
  QCOMPARE(dbl.eccCorrected, uint64_t(0));
  QCOMPARE(dbl.eccUncorrectable + dbl.eccMissed, dbl.faults);
  QCOMPARE(dbl.eccFailures, uint64_t(1));
  QCOMPARE(d, std::vector<int>(std::size_t(f.batch), -1));
  // two adjacent bits of a word (a multi-cell upset): the same for ECC; weights only or activations only
  save::FaultModel adjacent;
  adjacent.flips = 50;
  adjacent.pattern = save::FaultPattern::Adjacent;
  save::RunStats adj;
  runner.infer(f.images.data(), save::Scheme::Ecc, adjacent, 3, adj);
  QVERIFY(adj.eccFailures == 1 && adj.eccCorrected == 0);
  save::FaultModel weightsOnly;
  weightsOnly.flips = 500;
  weightsOnly.target = save::FaultTarget::Weights;
  weightsOnly.duringReruns = false;
  save::RunStats w, a;
  runner.infer(f.images.data(), save::Scheme::Save, weightsOnly, 4, w);
  QVERIFY(w.weightRepairs > 0);
  save::FaultModel activationsOnly = weightsOnly;
  activationsOnly.target = save::FaultTarget::Activations;
  runner.infer(f.images.data(), save::Scheme::Save, activationsOnly, 4, a);
  QVERIFY(a.faults > 0 && a.weightRepairs == 0 && a.rangeViolations + a.recomputeMismatches > 0);
}

// ABFT's tolerance is sound: forced on every linear/conv op it never fires on clean runs, and it
// still catches faults; `auto` keeps recomputation where the tolerance exceeds tau, saying why.
void TestSave::abftChecksNeverFailWithoutFaults() {
  RuntimeFixture f;
  save::ProtectedRunner automatic(f.g, f.sel, f.profiled(), f.batch);
  QCOMPARE(automatic.verifierChoices().size(), std::size_t(5));
  for (const save::VerifierChoice& c : automatic.verifierChoices()) {
    QCOMPARE(c.kind == save::VerifierKind::Abft, c.tolerance <= f.sel.options.tau);
    QVERIFY(!c.reason.empty());
    QVERIFY(c.costRatio > 0 && c.costRatio < 1);
  }
  save::ProtectedRunner abft(f.g, f.sel, f.profiled(), f.batch, save::VerifierPolicy::Abft);
  save::RunStats clean, faulty, none;
  for (int64_t b = 0; b < 10; ++b) {
    const float* x = f.images.data() + b * f.batch * 784;
    QCOMPARE(abft.infer(x, save::Scheme::Save, {}, 0, clean), abft.infer(x, save::Scheme::None, {}, 0, none));
  }
  QVERIFY(clean.checksums > 1000);
  QCOMPARE(clean.checksumMismatches, uint64_t(0));
  QCOMPARE(clean.detections, uint64_t(0));
  save::FaultModel m;
  m.flips = 4;  // few faults, so that a range violation elsewhere does not end the check first
  for (int64_t k = 0; k < 60; ++k)
    abft.infer(f.images.data() + (k % 10) * f.batch * 784, save::Scheme::Save, m, uint64_t(k) + 3, faulty);
  QVERIFY(faulty.checksumMismatches > 0);  // in-range corruptions the range check let through
  QVERIFY_THROWS_EXCEPTION(save::SaveError, save::verifierPolicyFromName("dmr"));

  // grouped and depthwise convolutions: one checksum per group, never failing on clean outputs
  const save::Graph grouped = save::randomGraph("grouped", 7);
  save::SelectionOptions o;
  o.batch = f.batch;
  o.budgetShare = 0.05;  // most tiles unreliable, so that the checks run
  const save::Selection sel = save::selectBits(grouped, o);
  save::ProtectedRunner forced(grouped, sel, {}, f.batch, save::VerifierPolicy::Abft);
  save::ProtectedRunner chosen(grouped, sel, {}, f.batch);
  for (const save::VerifierChoice& c : chosen.verifierChoices())
    if (c.name == "depthwise") QVERIFY2(c.kind != save::VerifierKind::Abft, c.reason.c_str());  // it would cost 2x
  const std::vector<float> images = save::normalisedImages(grouped, std::vector<uint8_t>(testSet().pixels.begin(),
                                                                                          testSet().pixels.begin() + 200 * 784));
  save::RunStats groupedClean, groupedNone, groupedFaulty;
  for (int64_t b = 0; b < 10; ++b) {
    const float* x = images.data() + b * f.batch * 784;
    QCOMPARE(forced.infer(x, save::Scheme::Save, {}, 0, groupedClean), forced.infer(x, save::Scheme::None, {}, 0, groupedNone));
  }
  QVERIFY(groupedClean.checksums > 1000);
  QCOMPARE(groupedClean.checksumMismatches, uint64_t(0));
  for (int64_t k = 0; k < 60; ++k)
    forced.infer(images.data() + (k % 10) * f.batch * 784, save::Scheme::Save, m, uint64_t(k) + 3, groupedFaulty);
  QVERIFY(groupedFaulty.detections > 0);
}

// The mixed-precision integer recomputation: never fires on clean outputs (whole layers and single
// elements, every SIMD target), and always fires when a flipped bit moves an output by more than
// twice its largest bound on the analysed ranges.
void TestSave::mixedPrecisionCheckIsSoundAndCatchesChanges() {
  const int64_t batch = 6;
  std::mt19937_64 rng(17);
  int caught = 0, large = 0, small = 0, smallCaught = 0;
  for (const char* name : {"lenet", "vit", "grouped"}) {
    const save::Graph g = std::string(name) == "grouped" ? save::randomGraph(name, 7)
                          : save::zooGraph(name, save::loadCheckpoint(std::string(name) == "vit" ? kVitWeights : kLenetWeights));
    const save::RangeResult ranges = save::analyzeRanges(g, save::inputBox(g, 0, 1));
    std::vector<uint8_t> pixels(testSet().pixels.begin() + 100 * 784, testSet().pixels.begin() + (100 + batch) * 784);
    const std::vector<float> x = save::normalisedImages(g, pixels);
    const auto act = save::runAll(g, x.data(), batch);
    for (std::size_t v = 1; v < g.nodes.size(); ++v) {
      const save::Node& n = g.nodes[v];
      if (n.op != save::Op::Linear && n.op != save::Op::Conv2d) continue;
      save::MixedChecker check(g, int(v), ranges.nodes[std::size_t(n.inputs[0])]);
      const float* in = act[std::size_t(n.inputs[0])].data();
      const std::vector<uint32_t> all(std::size_t(n.size()), ~0u);
      std::vector<int64_t> every(std::size_t(n.size()));
      for (int64_t e = 0; e < n.size(); ++e) every[std::size_t(e)] = e;
      for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
        QVERIFY2(!check.mismatch(in, act[v].data(), batch, all),
                 qPrintable(QStringLiteral("%1 %2 on %3").arg(QLatin1String(name), QString::fromStdString(n.name), QLatin1String(hwy::TargetName(target)))));
      }
      hwy::SetSupportedTargetsForTest(0);
      QVERIFY(!check.mismatchAt(in, act[v].data(), batch, every));
      for (int k = 0; k < 40; ++k) {
        std::vector<float> y = act[v];
        const std::size_t at = std::size_t(rng() % y.size());
        const float clean = y[at];
        y[at] = flipped(clean, int(rng() % 32));
        const double moved = std::fabs(double(y[at]) - double(clean));
        const bool whole = check.mismatch(in, y.data(), batch, all);
        QCOMPARE(check.mismatchAt(in, y.data(), batch, {int64_t(at % std::size_t(n.size()))}), whole);
        if (!(moved <= 2 * check.worstTolerance())) {  // NaN and Inf included
          ++large;
          QVERIFY2(whole, qPrintable(QStringLiteral("%1 %2: a change of %3 (bound %4) missed").arg(QLatin1String(name), QString::fromStdString(n.name)).arg(moved).arg(check.worstTolerance())));
          caught += whole;
        } else {
          ++small;
          smallCaught += whole;
        }
      }
    }
  }
  QVERIFY(large > 100 && caught == large);
  qInfo("mixed check: %d of %d large changes caught, %d of %d below twice the worst bound", caught, large, smallCaught, small);
}

void TestSave::faultPatterns() {
  RuntimeFixture f;
  save::ProtectedRunner runner(f.g, f.sel, f.profiled(), f.batch);
  save::FaultModel m;
  m.flips = 100;
  m.pattern = save::FaultPattern::Consecutive;
  save::RunStats consecutive, region;
  runner.infer(f.images.data(), save::Scheme::None, m, 4, consecutive);
  QCOMPARE(consecutive.faults, uint64_t(100));  // 100 distinct words
  m.pattern = save::FaultPattern::Region;
  m.regionWords = 10;
  runner.infer(f.images.data(), save::Scheme::None, m, 4, region);
  QVERIFY(region.faults >= 1 && region.faults <= 10);  // they all fall in a 10-word window
  QVERIFY_THROWS_EXCEPTION(save::SaveError, save::patternFromName("rowhammer"));
  QVERIFY_THROWS_EXCEPTION(save::SaveError, save::schemeFromName("dmr"));
}

// Shards run disjoint points whose seeds depend only on the point: together they are one run.
void TestSave::campaignShardsMatchOneProcess() {
  RuntimeFixture f;
  save::ProtectedRunner runner(f.g, f.sel, f.profiled(), f.batch);
  save::CampaignOptions o;
  o.flips = {16, 1024};
  o.schemes = {save::Scheme::None, save::Scheme::Save, save::Scheme::Ecc};
  o.images = 100;
  o.batch = f.batch;
  o.latencyRepeats = 1;
  const save::CampaignResult whole = save::runCampaign(runner, f.images.data(), labels32().data(), o, 784);
  QCOMPARE(whole.points.size(), std::size_t(6));
  std::vector<save::CampaignPoint> parts;
  for (int i = 0; i < 2; ++i) {
    o.shardIndex = i;
    o.shardCount = 2;
    const save::CampaignResult r = save::runCampaign(runner, f.images.data(), labels32().data(), o, 784);
    parts.insert(parts.end(), r.points.begin(), r.points.end());
  }
  QCOMPARE(parts.size(), whole.points.size());
  for (const save::CampaignPoint& w : whole.points) {
    bool found = false;
    for (const save::CampaignPoint& p : parts)
      if (p.scheme == w.scheme && p.flips == w.flips) {
        found = true;
        QCOMPARE(p.accuracy, w.accuracy);
        QCOMPARE(p.errorRate, w.errorRate);
        QCOMPARE(p.stats.detections, w.stats.detections);
      }
    QVERIFY(found);
  }
  for (const save::SchemeLatency& l : whole.latency) QCOMPARE(l.falsePositives, uint64_t(0));
  o.shardIndex = 2;
  QVERIFY_THROWS_EXCEPTION(save::SaveError, save::runCampaign(runner, f.images.data(), labels32().data(), o, 784));
}

void TestSave::engineMatchesTorch_data() {
  QTest::addColumn<QString>("model");
  QTest::newRow("mlp") << QStringLiteral("mlp");
  QTest::newRow("lenet") << QStringLiteral("lenet");
  QTest::newRow("resnet") << QStringLiteral("resnet");
  QTest::newRow("vit") << QStringLiteral("vit");
}

void TestSave::engineMatchesTorch() {
  QFETCH(QString, model);
  const Twin t = twin(model.toStdString());
  const save::Graph g = save::zooGraph(model.toStdString(), t.parameters);
  const int64_t batch = 16;
  std::vector<uint8_t> pixels(testSet().pixels.begin(), testSet().pixels.begin() + batch * 784);
  const std::vector<float> x = save::normalisedImages(g, pixels);
  const auto act = save::runAll(g, x.data(), batch);
  ops::Dispatcher d;
  d.setTraining(false);
  at::NoGradGuard noGrad;
  const at::Tensor logits = t.model->forward(d, at::from_blob(const_cast<float*>(x.data()), {batch, 1, 28, 28}).clone());
  const at::Tensor ours = at::from_blob(const_cast<float*>(act[std::size_t(g.output)].data()), {batch, 10});
  const double scale = 1 + logits.abs().max().item<double>();
  const double diff = (logits - ours).abs().max().item<double>();
  QVERIFY2(diff <= 1e-4 * scale, qPrintable(QStringLiteral("max difference %1 (scale %2)").arg(diff).arg(scale)));
}

// The flip oracle and SAVE's verifier recompute single elements (affineElement, elementOf): they
// must equal the full (vectorised) run, for every op, on every SIMD target this CPU runs.
void TestSave::partialRecomputationIsExact() {
  for (const int64_t target : hwy::SupportedAndGeneratedTargets())
  for (const char* name : {"lenet", "resnet", "vit", "grouped"}) {
    hwy::SetSupportedTargetsForTest(target);
    const save::Graph g = std::string(name) == "grouped" ? save::randomGraph(name, 7) : save::zooGraph(name, twin(name).parameters);
    std::vector<uint8_t> pixels(testSet().pixels.begin(), testSet().pixels.begin() + 5 * 784);
    const std::vector<float> x = save::normalisedImages(g, pixels);
    const auto act = save::runAll(g, x.data(), 5);
    int checked = 0;
    for (std::size_t v = 1; v < g.nodes.size(); ++v) {
      const save::Node& n = g.nodes[v];
      const bool affine = n.op == save::Op::Linear || n.op == save::Op::Conv2d;
      const save::Node& src = g.nodes[std::size_t(n.inputs[0])];
      for (int64_t s = 0; s < 5; ++s)
        for (int64_t e = 0; e < n.size(); ++e) {
          const float full = act[v][std::size_t(s * n.size() + e)];
          std::vector<const float*> in;
          for (int i : n.inputs) in.push_back(act[std::size_t(i)].data() + s * g.nodes[std::size_t(i)].size());
          const float one = affine ? save::affineElement(n, src, in[0], e) : save::elementOf(g, int(v), in, e);
          if (std::memcmp(&full, &one, 4) != 0)
            QFAIL(qPrintable(QStringLiteral("%1 %2 element %3 on %4: %5 vs %6")
                                 .arg(QLatin1String(name), QString::fromStdString(n.name))
                                 .arg(e)
                                 .arg(QLatin1String(hwy::TargetName(target)))
                                 .arg(full)
                                 .arg(one)));
        }
      ++checked;
    }
    QVERIFY(checked >= 9);
  }
  hwy::SetSupportedTargetsForTest(0);
}

void TestSave::rangesAreSound_data() {
  QTest::addColumn<QString>("model");
  QTest::addColumn<bool>("symbolic");
  QTest::newRow("mlp interval") << QStringLiteral("mlp") << false;
  QTest::newRow("mlp symbolic") << QStringLiteral("mlp") << true;
  QTest::newRow("lenet interval") << QStringLiteral("lenet") << false;
  QTest::newRow("lenet symbolic") << QStringLiteral("lenet") << true;
  QTest::newRow("resnet interval") << QStringLiteral("resnet") << false;
  QTest::newRow("vit interval") << QStringLiteral("vit") << false;
  QTest::newRow("vit symbolic") << QStringLiteral("vit") << true;
  QTest::newRow("grouped interval") << QStringLiteral("grouped") << false;
  QTest::newRow("grouped symbolic") << QStringLiteral("grouped") << true;
}

// Every value of every tensor, on 10,000 inputs inside the box, lies inside its interval.
void TestSave::rangesAreSound() {
  QFETCH(QString, model);
  QFETCH(bool, symbolic);
  const save::Graph g = model == QLatin1String("grouped") ? save::randomGraph("grouped", 7)
                                                           : save::zooGraph(model.toStdString(), twin(model.toStdString()).parameters);
  save::RangeOptions o;
  o.mode = symbolic ? save::RangeMode::Symbolic : save::RangeMode::Interval;
  const save::RangeResult r = save::analyzeRanges(g, save::inputBox(g, 0, 1), o);
  const std::vector<float> x = boxInputs(g, 11);
  const int64_t total = int64_t(x.size()) / 784, batch = 50;
  QCOMPARE(total, int64_t(10000));
  uint64_t checked = 0;
  for (int64_t first = 0; first < total; first += batch) {
    const auto act = save::runAll(g, x.data() + first * 784, batch);
    for (std::size_t v = 0; v < g.nodes.size(); ++v) {
      const std::size_t size = std::size_t(g.nodes[v].size());
      const save::NodeRange& nr = r.nodes[v];
      for (int64_t s = 0; s < batch; ++s)
        for (std::size_t i = 0; i < size; ++i) {
          const double val = act[v][std::size_t(s) * size + i];
          if (!(val >= nr.lo[i] && val <= nr.hi[i]))
            QFAIL(qPrintable(QStringLiteral("%1 element %2 of input %3: %4 outside [%5, %6]")
                                 .arg(QString::fromStdString(g.nodes[v].name))
                                 .arg(i)
                                 .arg(first + s)
                                 .arg(val, 0, 'g', 9)
                                 .arg(nr.lo[i], 0, 'g', 9)
                                 .arg(nr.hi[i], 0, 'g', 9)));
          ++checked;
        }
    }
  }
  QVERIFY(checked > uint64_t(10000) * 1000);
}

// Layer norm, softmax, GELU, the activation products, a constant's addition, sigmoid and tanh on their own, over
// many small random boxes (narrow ones, where the bounds are tight and rounding decides, and wide
// ones): every engine value of points drawn inside (corners included) lies inside its interval.
void TestSave::transformerOpsAreSoundOnNarrowBoxes() {
  std::mt19937_64 rng(21);
  std::uniform_real_distribution<double> unit(0, 1);
  uint64_t checked = 0;
  for (save::Op op : {save::Op::LayerNorm, save::Op::Softmax, save::Op::Gelu, save::Op::MatMul, save::Op::AddConst,
                      save::Op::Sigmoid, save::Op::Tanh, save::Op::Mul}) {
    save::Graph g;
    g.model = "ops";
    save::Node in;
    in.name = "input";
    in.shape = {2, 4, 8};
    g.nodes.push_back(in);
    auto select = [&](int part) {  // the two halves of the input as [1, 4, 8] tensors
      save::Node n;
      n.op = save::Op::Select;
      n.name = "half" + std::to_string(part);
      n.inputs = {0};
      n.shape = {1, 4, 8};
      for (int64_t i = 0; i < 32; ++i) n.gather.push_back(part * 32 + i);
      g.nodes.push_back(n);
      return int(g.nodes.size()) - 1;
    };
    save::Node n;
    n.op = op;
    n.name = save::opName(op);
    if (op == save::Op::MatMul || op == save::Op::Mul) {
      n.inputs = {select(0), select(1)};
      n.shape = {1, 4, op == save::Op::Mul ? 8 : 4};
    } else {
      n.inputs = {0};
      n.shape = {2, 4, 8};
    }
    if (op == save::Op::LayerNorm)
      for (int i = 0; i < 8; ++i) {
        n.weight.push_back(float(unit(rng) * 2 - 0.5));
        n.bias.push_back(float(unit(rng) - 0.5));
      }
    if (op == save::Op::AddConst)
      for (int i = 0; i < 64; ++i) n.bias.push_back(float((unit(rng) - 0.5) * 10));
    g.nodes.push_back(n);
    g.output = int(g.nodes.size()) - 1;
    for (int box = 0; box < 300; ++box) {
      save::NodeRange r;
      const double scale = std::pow(10.0, unit(rng) * 6 - 3), width = std::pow(10.0, -unit(rng) * 8);
      for (int i = 0; i < 64; ++i) {
        const double c = (unit(rng) - 0.5) * scale * (box % 3 == 0 ? 1 : 0.01 * (i % 8 + 1)), w = width * scale * unit(rng);
        r.lo.push_back(double(float(c - w)));
        r.hi.push_back(double(float(c + w)));
      }
      save::RangeOptions o;
      o.mode = box % 2 ? save::RangeMode::Symbolic : save::RangeMode::Interval;
      const save::RangeResult res = save::analyzeRanges(g, r, o);
      const save::NodeRange& out = res.nodes[std::size_t(g.output)];
      std::vector<float> x(64 * 40);
      for (int s = 0; s < 40; ++s)
        for (int i = 0; i < 64; ++i) {
          const double t = s < 20 ? double((rng() >> 7) & 1) : unit(rng);  // corners, then inside
          x[std::size_t(s * 64 + i)] = std::clamp(float(r.lo[std::size_t(i)] + t * (r.hi[std::size_t(i)] - r.lo[std::size_t(i)])),
                                                  float(r.lo[std::size_t(i)]), float(r.hi[std::size_t(i)]));
        }
      const auto act = save::runAll(g, x.data(), 40);
      const std::size_t size = out.lo.size();
      for (int s = 0; s < 40; ++s)
        for (std::size_t i = 0; i < size; ++i) {
          const double v = act[std::size_t(g.output)][s * size + i];
          if (!(v >= out.lo[i] && v <= out.hi[i]))
            QFAIL(qPrintable(QStringLiteral("%1 box %2 element %3: %4 outside [%5, %6]")
                                 .arg(QLatin1String(save::opName(op)))
                                 .arg(box)
                                 .arg(i)
                                 .arg(v, 0, 'g', 10)
                                 .arg(out.lo[i], 0, 'g', 10)
                                 .arg(out.hi[i], 0, 'g', 10)));
          ++checked;
        }
    }
  }
  QVERIFY(checked > 1000000);
}

void TestSave::symbolicIsTighterThanIntervals() {
  const save::Graph g = save::zooGraph("lenet", save::loadCheckpoint(kLenetWeights));
  save::RangeOptions o;
  o.mode = save::RangeMode::Interval;
  const save::Tightness plain = save::tightnessOf(save::analyzeRanges(g, save::inputBox(g, 0, 1), o).nodes[std::size_t(g.output)]);
  o.mode = save::RangeMode::Symbolic;
  const save::Tightness sym = save::tightnessOf(save::analyzeRanges(g, save::inputBox(g, 0, 1), o).nodes[std::size_t(g.output)]);
  QVERIFY2(sym.meanWidth < 0.8 * plain.meanWidth, qPrintable(QStringLiteral("%1 vs %2").arg(sym.meanWidth).arg(plain.meanWidth)));
  QVERIFY(sym.unionLo > plain.unionLo && sym.unionHi < plain.unionHi);
}

void TestSave::bitClassRules() {
  const save::BitContext plain{1e-5, false};
  // [1, 2): sign and the exponent bits shared by 1.0 (0x3f800000) and 2.0 (0x40000000) are ranging.
  save::BitProperties p = save::classifyBits(1.0, 1.999, plain);
  QVERIFY(p.ranging & 0x80000000u);
  QCOMPARE(p.classOf(31), save::BitClass::Ranging);
  // Mantissa bit j of a value below 2 moves it by at most 2^(j-23): robust while < 1e-5, i.e. j <= 6.
  for (int j = 0; j <= 6; ++j) QCOMPARE(p.classOf(j), save::BitClass::Robust);
  QCOMPARE(p.classOf(7), save::BitClass::Vulnerable);
  QVERIFY(p.type2());
  // A ReLU input that is never positive: every bit but the sign is robust.
  p = save::classifyBits(-5.0, -0.5, {1e-5, true});
  QCOMPARE(p.robust, 0x7fffffffu);
  QCOMPARE(p.classOf(31), save::BitClass::Ranging);
  QVERIFY(!p.type2());
  // Mixed signs: the sign is not ranging; bits above the largest magnitude's top bit are.
  p = save::classifyBits(-0.5, 0.25, plain);
  QCOMPARE(p.classOf(31), save::BitClass::Vulnerable);
  QCOMPARE(p.classOf(30), save::BitClass::Ranging);
  // Weights: only value-robust bits are predicted robust.
  const save::BitProperties w = save::classifyWeightBits(0.75f, 1e-5);
  QCOMPARE(w.robust, 0xffu);  // 0.75 = 1.5 * 2^-1: bit j moves it by 2^(j-24), below 1e-5 for j <= 7
}

// Property test: for random ranges and values inside them, a flipped ranging bit always leaves the
// range (or makes a NaN), and a flipped value-robust bit moves the value by less than tau.
void TestSave::rangingAndRobustBitsHoldForEveryValue() {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> mag(-20, 20), unit(0, 1);
  const double tau = 1e-5;
  int ranging = 0, robust = 0;
  for (int k = 0; k < 20000; ++k) {
    double lo = std::ldexp(unit(rng), int(mag(rng))) * (unit(rng) < 0.3 ? -1 : 1);
    double hi = lo + std::ldexp(unit(rng), int(mag(rng)));
    const save::BitProperties p = save::classifyBits(lo, hi, {tau, false});
    const float v = float(lo + unit(rng) * (hi - lo));
    if (!(v >= lo && v <= hi)) continue;
    for (int b = 0; b < 32; ++b) {
      const float f = flipped(v, b);
      if (p.classOf(b) == save::BitClass::Ranging && v != 0) {
        ++ranging;
        QVERIFY2(std::isnan(f) || f < lo || f > hi,
                 qPrintable(QStringLiteral("bit %1 of %2 in [%3, %4]").arg(b).arg(v).arg(lo).arg(hi)));
      }
      if (p.classOf(b) == save::BitClass::Robust) {
        ++robust;
        QVERIFY(std::fabs(double(f) - double(v)) < tau);
      }
    }
  }
  QVERIFY(ranging > 10000 && robust > 10000);
}

// The value criterion with a relative tolerance (--rtol): a robust bit's flip moves every value v of
// the range by less than tau + rtol |v|, zero and subnormals included; mantissa bits whose unit is
// at most rtol are robust in every range, the next one in no range reaching past 1.
void TestSave::relativeToleranceHoldsForEveryValue() {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> mag(-30, 30), unit(0, 1);
  const double tau = 1e-5;
  const double rtols[] = {1.0 / 64, 1.0 / 32, 1.0 / 16, 0.1, 0.3};
  int robust = 0, beyondTau = 0;
  for (int k = 0; k < 20000; ++k) {
    const double rtol = rtols[k % 5];
    double lo = std::ldexp(unit(rng), int(mag(rng))) * (unit(rng) < 0.3 ? -1 : 1);
    if (k % 7 == 0) lo = unit(rng) < 0.5 ? 0.0 : -std::ldexp(unit(rng), -130);  // zero and subnormals
    const double hi = lo + std::ldexp(unit(rng), int(mag(rng)));
    save::BitContext c{tau, false};
    c.rtol = rtol;
    const save::BitProperties p = save::classifyBits(lo, hi, c);
    const int always = 23 + int(std::floor(std::log2(rtol)));  // bits j with 2^(j - 23) <= rtol
    for (int j = 0; j <= always; ++j) QVERIFY2(p.classOf(j) == save::BitClass::Robust, qPrintable(QString::number(j)));
    if (std::max(std::fabs(lo), std::fabs(hi)) > 1) QVERIFY(p.classOf(always + 1) != save::BitClass::Robust);
    // the bounds, a value inside, and where the bound is reached: the power of two at the top, -0,
    // the smallest subnormal
    const double top = std::ldexp(1.0, int(std::floor(std::log2(std::max(std::fabs(lo), std::fabs(hi))))));
    for (float v : {float(lo), float(hi), float(lo + unit(rng) * (hi - lo)), float(top), float(-top), -0.0f,
                    std::numeric_limits<float>::denorm_min()}) {
      if (!(v >= lo && v <= hi)) continue;
      for (int b = 0; b < 32; ++b) {
        if (p.classOf(b) != save::BitClass::Robust) continue;
        ++robust;
        const double move = std::fabs(double(flipped(v, b)) - double(v));
        beyondTau += move >= tau;
        QVERIFY2(move < tau + rtol * std::fabs(double(v)),
                 qPrintable(QStringLiteral("bit %1 of %2 in [%3, %4], rtol %5").arg(b).arg(v).arg(lo).arg(hi).arg(rtol)));
      }
    }
  }
  QVERIFY(robust > 100000 && beyondTau > 10000);  // most robust flips are robust only by rtol
  // An unbounded range may hold infinities, whose mantissa flips make NaNs: no bit is robust by rtol.
  save::BitContext wide{tau, false};
  wide.rtol = 1.0 / 32;
  QCOMPARE(save::classifyBits(0, std::numeric_limits<double>::infinity(), wide).robust, 0u);
  // A known value (a weight): 0.5 = 2^-1, bit j moves it by 2^(j - 24); with rtol 1/32 bit 18 moves
  // it by 2^-6 = 0.015625 < 1e-5 + 0.5 / 32, bit 19 by twice that.
  QCOMPARE(save::classifyWeightBits(0.5f, tau, 1.0 / 32).robust, 0x7ffffu);
  QCOMPARE(save::classifyWeightBits(-0.75f, tau, 1.0 / 32).robust, 0x7ffffu);
  QCOMPARE(save::classifyWeightBits(0.5f, tau, 0).robust, 0xffu);  // absolute tau: 2^(j - 24) < 1e-5 for j <= 7
}

// Tiles go by the recomputation they save per byte. The budget bounds the reliable memory in use at
// every step: tensors live from their op to their last reader, and a ReLU that is its input's only
// reader writes over it. Every tile left out would have overflowed the budget somewhere in its
// lifetime, given the tiles placed before it.
void TestSave::tilesGoToReliableMemoryByWorkPerByte() {
  const save::Graph g = save::zooGraph("lenet", save::loadCheckpoint(kLenetWeights));
  save::SelectionOptions o;
  o.ranges.mode = save::RangeMode::Interval;
  o.budgetBytes = 10 * 16 * 16 * 4;  // ten tiles at a time
  const save::Selection s = save::selectBits(g, o);
  QCOMPARE(s.layers.size(), g.nodes.size() - 1);
  QCOMPARE(s.layers[0].robustMask.size(), std::size_t(6 * 28 * 28));
  QVERIFY(s.reliableBytes <= o.budgetBytes);
  QVERIFY(s.reliableTiles > 10);  // more than ten in all: not all of them live at once
  // conv1.relu (node 2) is conv1's only reader: it is computed in place and shares conv1's tiles.
  QVERIFY(s.layers[1].inPlace && !s.layers[0].inPlace);
  QCOMPARE(s.layers[1].tileReliable, s.layers[0].tileReliable);
  // Recompute the memory in use per step from the placement.
  const std::size_t steps = g.nodes.size();
  std::vector<std::size_t> last(steps), end(steps);
  for (std::size_t v = 0; v < steps; ++v) last[v] = v;
  for (std::size_t v = 1; v < steps; ++v)
    for (int i : g.nodes[v].inputs) last[std::size_t(i)] = std::max(last[std::size_t(i)], v);
  end = last;
  for (std::size_t v = steps; v-- > 1;)
    if (s.layers[v - 1].inPlace) end[std::size_t(g.nodes[v].inputs[0])] = std::max(end[std::size_t(g.nodes[v].inputs[0])], end[v]);
  // a tile takes the bytes of its own elements: fewer at a tensor's right and bottom edges
  auto bytesOf = [&](const save::LayerSelection& l, std::size_t t) {
    const int64_t down = int64_t(t) / l.tilesAcross, across = int64_t(t) % l.tilesAcross;
    return std::min<int64_t>(16, l.rows - 16 * down) * std::min<int64_t>(16, l.cols - 16 * across) * 4;
  };
  std::vector<int64_t> used(steps, 0);
  for (std::size_t v = 1; v < steps; ++v) {
    const save::LayerSelection& l = s.layers[v - 1];
    if (l.inPlace) continue;
    for (std::size_t t = 0; t < l.tileReliable.size(); ++t)
      for (std::size_t k = v; k <= end[v] && l.tileReliable[t]; ++k) used[k] += bytesOf(l, t);
  }
  QCOMPARE(*std::max_element(used.begin(), used.end()), s.reliableBytes);
  // the recomputation work left, counted again from the bit masks and the placement
  double left = 0, all = 0;
  for (const save::LayerSelection& l : s.layers) {
    const save::Node& n = g.nodes[std::size_t(l.node)];
    const double cost = n.op == save::Op::Linear   ? double(n.weight.size()) / double(n.features()) + 1
                        : n.op == save::Op::Conv2d ? double(n.weight.size()) / double(n.shape[0]) + 1
                                                   : 1.0;
    for (int64_t i = 0; i < l.elements; ++i) {
      if ((l.robustMask[std::size_t(i)] | l.rangingMask[std::size_t(i)]) == ~0u) continue;  // type 1
      const std::size_t tile = std::size_t((i / l.cols / 16) * l.tilesAcross + (i % l.cols) / 16);
      all += cost;
      if (!l.tileReliable[tile]) left += cost;
    }
  }
  QCOMPARE(s.recomputeAllWork, all);
  QCOMPARE(s.recomputeWork, left);
  QVERIFY(s.recomputeWork < s.recomputeAllWork && s.randomPlacementWork <= s.recomputeAllWork);
  for (std::size_t v = 1; v < steps; ++v) {
    const save::LayerSelection& l = s.layers[v - 1];
    if (l.inPlace) continue;
    for (std::size_t t = 0; t < l.tileShare.size(); ++t) {
      if (l.tileReliable[t] || l.tileShare[t] == 0) continue;
      const int64_t peak = *std::max_element(used.begin() + std::ptrdiff_t(v), used.begin() + std::ptrdiff_t(end[v]) + 1);
      QVERIFY2(peak + bytesOf(l, t) > o.budgetBytes, qPrintable(QString::fromStdString(l.name)));
    }
  }
  // The map's view of a stored layer (what the workbench draws) agrees with the selection: shape,
  // per-element masks and ranges, the tile of every element (the formula above), the tile shares.
  QTemporaryDir dir;
  const std::string path = dir.filePath(QStringLiteral("map.h5")).toStdString();
  writeLenetAnalysis(path, s);
  const store::SessionReader reader(path);
  for (const char* name : {"conv1", "conv2.relu", "fc1"}) {
    const auto it = std::find_if(s.layers.begin(), s.layers.end(), [&](const save::LayerSelection& l) { return l.name == name; });
    QVERIFY(it != s.layers.end());
    const save::LayerSelection& l = *it;
    const save::LayerMap m = save::loadLayerMap(reader, "lenet-interval", name);
    QCOMPARE(m.shape, g.nodes[std::size_t(l.node)].shape);
    QCOMPARE(m.elements(), l.elements);
    QCOMPARE(m.channels * m.height * m.width, l.elements);
    QCOMPARE(m.lo, s.ranges.nodes[std::size_t(l.node)].lo);
    std::vector<double> share(l.tileShare.size(), 0.0), count(l.tileShare.size(), 0.0);
    const std::vector<float> type = m.values(save::MapQuantity::Type);
    for (int64_t i = 0; i < l.elements; ++i) {
      const int64_t tile = (i / l.cols / 16) * l.tilesAcross + (i % l.cols) / 16;
      QCOMPARE(m.tileOf(i), tile);
      share[std::size_t(tile)] += type[std::size_t(i)] == 2.0f;
      count[std::size_t(tile)] += 1;
      const save::MapElement e = m.element(i);
      QCOMPARE(e.reliable, l.tileReliable[std::size_t(tile)] != 0);
      for (int b = 0; b < 32; ++b) {
        const uint32_t bit = uint32_t(1) << b;
        const save::BitClass want = (l.rangingMask[std::size_t(i)] & bit) ? save::BitClass::Ranging
                                    : (l.robustMask[std::size_t(i)] & bit) ? save::BitClass::Robust
                                                                            : save::BitClass::Vulnerable;
        QCOMPARE(e.bits[std::size_t(b)], want);
      }
      QCOMPARE(m.indexAt(e.channel, e.y, e.x), i);
    }
    for (std::size_t t = 0; t < share.size(); ++t) QCOMPARE(float(share[t] / count[t]), l.tileShare[t]);
    QCOMPARE(m.counts().type2, l.type2);
  }
  QVERIFY_THROWS_EXCEPTION(save::SaveError, save::loadLayerMap(reader, "lenet-interval", "no-such-layer"));
  QVERIFY_THROWS_EXCEPTION(save::SaveError, save::loadLayerMap(reader, "lenet-interval", "conv1").element(6 * 28 * 28));
}

// "Flip in the model" (the workbench's button) from a stored analysis: the network rebuilt from the
// stored source, the prediction change equal to the flip oracle's (its own rerun and bounds), the
// range check equal to the protected runtime's, the recomputation's verdict from the selection's
// masks and placement.
void TestSave::flipInModelAgreesWithTheOracleAndTheRuntime() {
  const save::Graph g = save::zooGraph("lenet", save::loadCheckpoint(kLenetWeights));
  save::SelectionOptions o;
  o.ranges.mode = save::RangeMode::Interval;
  o.criterion = "output";
  o.epsilon = 60;  // robust bits that vary across values
  o.budgetBytes = 10 * 16 * 16 * 4;
  const save::Selection s = save::selectBits(g, o);
  QTemporaryDir dir;
  const std::string path = dir.filePath(QStringLiteral("flip.h5")).toStdString();
  writeLenetAnalysis(path, s);
  const store::SessionReader reader(path);
  const save::DataSet d = save::loadDataSet(g, "", "test", 3, 0, 1);
  const save::ProtectedRunner runner(g, s, {}, 1);
  int changed = 0, caughtByRange = 0, caughtByRecompute = 0, passed = 0;
  std::mt19937 rng(5);
  for (int trial = 0; trial < 60; ++trial) {
    const int node = 1 + int(rng() % (g.nodes.size() - 1));
    const save::LayerSelection& l = s.layers[std::size_t(node - 1)];
    const int64_t element = int64_t(rng() % uint64_t(l.elements));
    const int bit = trial % 3 == 0 ? 30 : int(rng() % 32);
    const int image = trial % 3;
    const save::ModelFlip f =
        save::flipInModel(reader, "lenet-interval", l.name, element, uint32_t(1) << bit, image);
    save::FlipOracle oracle(g, d.normalised.data() + image * g.nodes[0].size(), 1);
    QCOMPARE(f.classBefore, oracle.prediction(0));
    QCOMPARE(f.before, oracle.value(0, node, uint32_t(element)));
    QCOMPARE(f.classAfter != f.classBefore, oracle.activationFlip(0, node, uint32_t(element), bit));
    QCOMPARE(f.label, d.labels[std::size_t(image)]);
    QCOMPARE(f.image, int64_t(image));
    QCOMPARE(f.outOfRange, !runner.withinRange(node, element, f.after));
    const uint32_t robust = l.robustMask[std::size_t(element)];
    const bool type2 = (robust | l.rangingMask[std::size_t(element)]) != ~0u;
    const bool reliable = l.tileReliable[std::size_t((element / l.cols / 16) * l.tilesAcross + (element % l.cols) / 16)] != 0;
    QCOMPARE(f.recomputeCatches, type2 && !reliable && !(robust >> bit & 1u));
    QCOMPARE(f.reliable, reliable);
    // the logits after the flip, recomputed element by element with the verifier's own path
    // (elementOf), bit for bit
    if (trial % 6 == 0) {
      const float* x = d.normalised.data() + image * g.nodes[0].size();
      std::vector<std::vector<float>> act = save::runAll(g, x, 1);
      uint32_t word;
      std::memcpy(&word, &act[std::size_t(node)][std::size_t(element)], 4);
      word ^= uint32_t(1) << bit;
      std::memcpy(&act[std::size_t(node)][std::size_t(element)], &word, 4);
      for (std::size_t v = std::size_t(node) + 1; v < g.nodes.size(); ++v) {
        std::vector<const float*> in;
        for (int j : g.nodes[v].inputs) in.push_back(act[std::size_t(j)].data());
        for (int64_t e = 0; e < g.nodes[v].size(); ++e) act[v][std::size_t(e)] = save::elementOf(g, int(v), in, e);
      }
      const std::vector<float>& logits = act[std::size_t(g.output)];
      QCOMPARE(f.logitsAfter.size(), logits.size());
      for (std::size_t i = 0; i < logits.size(); ++i)
        QVERIFY(std::memcmp(&f.logitsAfter[i], &logits[i], 4) == 0 || (std::isnan(f.logitsAfter[i]) && std::isnan(logits[i])));
      QVERIFY(f.violations > 0 || !f.outOfRange);  // the flipped tensor's own check counts
    }
    changed += f.classAfter != f.classBefore;
    caughtByRange += f.outOfRange;
    caughtByRecompute += f.recomputeCatches;
    passed += !f.caught();
  }
  // the draws cover each outcome
  QVERIFY(changed > 0 && caughtByRange > 0 && caughtByRecompute > 0 && passed > 0);
  QVERIFY_THROWS_EXCEPTION(save::SaveError, save::flipInModel(reader, "lenet-interval", "conv1", 0, 0, 0));
  QVERIFY_THROWS_EXCEPTION(save::SaveError, save::flipInModel(reader, "lenet-interval", "conv1", 6 * 28 * 28, 1, 0));
  QVERIFY_THROWS_EXCEPTION(save::SaveError, save::flipInModel(reader, "lenet-interval", "no-such-layer", 0, 1, 0));
}

// Every outcome of the oracle (bound first, exact rerun otherwise) equals a full rerun of the
// network with the flipped value, on flips chosen to include vulnerable ones.
void TestSave::flipOracleMatchesBruteForce_data() {
  QTest::addColumn<QString>("model");
  QTest::newRow("lenet") << QStringLiteral("lenet");
  QTest::newRow("resnet (batch norm, residual adds, pooling)") << QStringLiteral("resnet");
  QTest::newRow("vit (layer norm, attention, gelu)") << QStringLiteral("vit");
  QTest::newRow("grouped (dilated, depthwise and grouped convs, clips, average pool)") << QStringLiteral("grouped");
}

void TestSave::flipOracleMatchesBruteForce() {
  QFETCH(QString, model);
  const save::Graph g = model == QLatin1String("lenet") ? save::zooGraph("lenet", save::loadCheckpoint(kLenetWeights))
                        : model == QLatin1String("vit")     ? save::zooGraph("vit", save::loadCheckpoint(kVitWeights))
                        : model == QLatin1String("grouped") ? save::randomGraph("grouped", 7)
                                                            : save::randomGraph("resnet", 5);
  const int64_t batch = 8;
  std::vector<uint8_t> pixels(testSet().pixels.begin(), testSet().pixels.begin() + batch * 784);
  const std::vector<float> x = save::normalisedImages(g, pixels);
  save::FlipOracle oracle(g, x.data(), batch);
  auto predictions = [&](const save::Graph& net) {
    const auto act = save::runAll(net, x.data(), batch);
    std::vector<int> p;
    for (int64_t s = 0; s < batch; ++s) {
      const float* l = act[std::size_t(net.output)].data() + s * 10;
      int best = 0;
      bool finite = true;
      for (int i = 0; i < 10; ++i) {
        finite = finite && std::isfinite(l[i]);
        if (l[i] > l[best]) best = i;
      }
      p.push_back(finite ? best : -1);
    }
    return p;
  };
  const std::vector<int> clean = predictions(g);
  std::mt19937_64 rng(3);
  int vulnerable = 0, robust = 0, movedAbove = 0, movedBelow = 0;
  const bool small = model == QLatin1String("lenet");  // full reruns of the ResNet cost more
  for (int k = 0; k < (small ? 400 : 120); ++k) {
    save::Graph faulty = g;
    std::vector<int> affine;
    for (std::size_t v = 0; v < g.nodes.size(); ++v)
      if (g.nodes[v].op == save::Op::Linear || g.nodes[v].op == save::Op::Conv2d) affine.push_back(int(v));
    const int node = affine[rng() % affine.size()];
    save::Node& n = faulty.nodes[std::size_t(node)];
    const bool bias = !n.bias.empty() && rng() % 8 == 0;
    const uint32_t index = uint32_t(rng() % (bias ? n.bias.size() : n.weight.size()));
    const int bit = k % 2 ? 30 - int(rng() % 4) : int(rng() % 32);  // half of them high exponent bits
    float& param = bias ? n.bias[index] : n.weight[index];
    param = flipped(param, bit);
    const bool want = predictions(faulty) != clean;
    QCOMPARE(oracle.weightFlip(node, bias, index, bit), want);
    (want ? vulnerable : robust)++;
    if (k % 4 == 0) {  // the logits' move (the largest |change| over the batch), asked at half and twice its size
      const auto before = save::runAll(g, x.data(), batch), after = save::runAll(faulty, x.data(), batch);
      const std::vector<float>&l0 = before[std::size_t(g.output)], &l1 = after[std::size_t(g.output)];
      double move = 0;
      for (std::size_t i = 0; i < l0.size(); ++i)
        move = std::isfinite(l1[i]) ? std::max(move, std::fabs(double(l1[i]) - double(l0[i]))) : HUGE_VAL;
      for (const double epsilon : std::isfinite(move) ? std::vector<double>{move / 2, move * 2} : std::vector<double>{1.0}) {
        const save::FlipOracle::Outcome out = oracle.weightFlip(node, bias, index, bit, epsilon);
        QCOMPARE(out.top1, want);
        QCOMPARE(out.moved, move > epsilon);
        (out.moved ? movedAbove : movedBelow)++;
      }
    }
  }
  QVERIFY2(movedAbove > 0 && movedBelow > 0, qPrintable(QStringLiteral("%1 above, %2 below").arg(movedAbove).arg(movedBelow)));
  QVERIFY2(vulnerable > (small ? 10 : 2) && robust > 20, qPrintable(QStringLiteral("%1 vulnerable, %2 robust").arg(vulnerable).arg(robust)));
  qInfo("%s: %d vulnerable and %d robust weight flips agree with full reruns", qPrintable(model), vulnerable, robust);
  QVERIFY(oracle.settledByBound() > 0 && oracle.reruns() > 0);
  // activations: flip one value and rerun everything after it
  for (int k = 0; k < (small ? 200 : 80); ++k) {
    const int node = 1 + int(rng() % (g.nodes.size() - 1));
    const int sample = int(rng() % uint64_t(batch));
    const uint32_t element = uint32_t(rng() % uint64_t(g.nodes[std::size_t(node)].size()));
    const int bit = k % 2 ? 30 : int(rng() % 32);
    auto act = save::runAll(g, x.data() + sample * 784, 1);
    act[std::size_t(node)][element] = flipped(act[std::size_t(node)][element], bit);
    for (std::size_t u = std::size_t(node) + 1; u < g.nodes.size(); ++u) {
      std::vector<const float*> in;
      for (int i : g.nodes[u].inputs) in.push_back(act[std::size_t(i)].data());
      save::runNode(g, int(u), in, 1, act[u].data());
    }
    const float* l = act[std::size_t(g.output)].data();
    int best = 0;
    bool finite = true;
    for (int i = 0; i < 10; ++i) {
      finite = finite && std::isfinite(l[i]);
      if (l[i] > l[best]) best = i;
    }
    const bool want = !finite || best != clean[std::size_t(sample)];
    QCOMPARE(oracle.activationFlip(sample, node, element, bit), want);
    const auto before = save::runAll(g, x.data() + sample * 784, 1);
    double move = 0;
    for (int i = 0; i < 10; ++i)
      move = std::isfinite(l[i]) ? std::max(move, std::fabs(double(l[i]) - double(before[std::size_t(g.output)][std::size_t(i)])))
                                 : HUGE_VAL;
    for (const double epsilon : std::isfinite(move) ? std::vector<double>{move / 2, move * 2} : std::vector<double>{1.0}) {
      const save::FlipOracle::Outcome out = oracle.activationFlip(sample, node, element, bit, epsilon);
      QCOMPARE(out.top1, want);
      QCOMPARE(out.moved, move > epsilon);
    }
  }
}

// The output criterion's promise, checked by brute force: a bit it calls robust (activation or
// weight) moves no logit by more than epsilon, on test images and on corners of the input box.
void TestSave::outputCriterionBoundsTheLogits() {
  const save::Graph g = save::zooGraph("lenet", save::loadCheckpoint(kLenetWeights));
  int exponentBitsAll = 0;
  // above LeNet's rounding floor over the [0, 1] box, so that some bits are robust; the larger one
  // makes low exponent bits robust too
  for (const double epsilon : {60.0, 3000.0}) {
  save::SelectionOptions o;
  o.criterion = "output";
  o.epsilon = epsilon;
  const save::Selection sel = save::selectBits(g, o);
  QVERIFY(sel.sensitivity && sel.sensitivity->rounding > 0);
  QVERIFY_THROWS_EXCEPTION(save::SaveError, save::sensitivityOf(save::randomGraph("vit", 3), save::analyzeRanges(save::randomGraph("vit", 3), save::inputBox(save::randomGraph("vit", 3), 0, 1)).nodes));
  // inputs: 40 test images, black, white and 8 random black-and-white patterns
  std::vector<float> pixels;
  for (int i = 0; i < 40 * 784; ++i) pixels.push_back(float(testSet().pixels[std::size_t(i)]) / 255.0f);
  std::mt19937_64 rng(5);
  for (int k = 0; k < 10; ++k)
    for (int i = 0; i < 784; ++i) pixels.push_back(k == 0 ? 0.0f : k == 1 ? 1.0f : float(rng() & 1));
  const int64_t batch = int64_t(pixels.size()) / 784;
  std::vector<float> x(pixels.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = (pixels[i] - g.inputMean) / g.inputDeviation;
  const auto clean = save::runAll(g, x.data(), batch);
  const std::vector<float>& logits = clean[std::size_t(g.output)];
  auto worst = [&](const std::vector<std::vector<float>>& act) {
    double m = 0;
    for (std::size_t i = 0; i < logits.size(); ++i) {
      const double d = std::fabs(double(act[std::size_t(g.output)][i]) - double(logits[i]));
      m = std::max(m, std::isnan(d) ? std::numeric_limits<double>::infinity() : d);
    }
    return m;
  };
  int activations = 0, exponentBits = 0;
  double largest = 0;
  for (int tries = 0; tries < 200000 && activations < 300; ++tries) {
    const save::LayerSelection& l = sel.layers[rng() % sel.layers.size()];
    const std::size_t e = std::size_t(rng() % uint64_t(l.elements));
    const int bit = int(rng() % 32);
    if (!((l.robustMask[e] >> bit) & 1) || l.feedsRelu) continue;  // the ReLU rule is the value criterion's
    auto act = clean;
    for (int64_t s = 0; s < batch; ++s) {
      float& v = act[std::size_t(l.node)][std::size_t(s * l.elements) + e];
      v = flipped(v, bit);
    }
    for (std::size_t u = std::size_t(l.node) + 1; u < g.nodes.size(); ++u) {
      std::vector<const float*> in;
      for (int i : g.nodes[u].inputs) in.push_back(act[std::size_t(i)].data());
      save::runNode(g, int(u), in, batch, act[u].data());
    }
    const double moved = worst(act);
    largest = std::max(largest, moved);
    QVERIFY2(moved <= o.epsilon, qPrintable(QStringLiteral("%1[%2] bit %3 moved a logit by %4").arg(QString::fromStdString(l.name)).arg(e).arg(bit).arg(moved)));
    ++activations;
    exponentBits += bit >= 23;
  }
  QVERIFY(activations == 300);
  exponentBitsAll += exponentBits;
  int weights = 0;
  for (int tries = 0; tries < 200000 && weights < 150; ++tries) {
    const int node = 1 + int(rng() % (g.nodes.size() - 1));
    const save::Node& n = g.nodes[std::size_t(node)];
    if (n.op != save::Op::Linear && n.op != save::Op::Conv2d) continue;
    const std::size_t index = std::size_t(rng() % n.weight.size());
    const int bit = int(rng() % 32);
    if (!save::weightBitRobust(sel, node, index, n.weight[index], bit)) continue;
    save::Graph faulty = g;
    faulty.nodes[std::size_t(node)].weight[index] = flipped(n.weight[index], bit);
    const double moved = worst(save::runAll(faulty, x.data(), batch));
    largest = std::max(largest, moved);
    QVERIFY2(moved <= o.epsilon, qPrintable(QStringLiteral("%1 weight %2 bit %3 moved a logit by %4").arg(QString::fromStdString(n.name)).arg(index).arg(bit).arg(moved)));
    ++weights;
  }
  QVERIFY(weights == 150);
  // changes of several weights of one layer act together: each within the allowance, both not
  {
    const int node = 4;  // conv2
    const save::Node& n = g.nodes[std::size_t(node)];
    QCOMPARE(n.name, std::string("conv2"));
    const std::vector<double>& sens = sel.sensitivity->weight[std::size_t(node)];
    const double room = save::allowedChange(*sel.sensitivity, sel.sensitivity->roundingFrom[std::size_t(node)], 1.0, o.epsilon);
    std::vector<float> params = n.weight;
    params.insert(params.end(), n.bias.begin(), n.bias.end());
    std::vector<float> one = params, two = params;
    one[3] = float(double(params[3]) + 0.6 * room / sens[3]);
    two[3] = one[3];
    two[7] = float(double(params[7]) + 0.6 * room / sens[7]);
    QVERIFY(save::weightChangesRobust(sel, node, params, one));
    QVERIFY(!save::weightChangesRobust(sel, node, params, two));
  }
  qInfo("output criterion (epsilon %g, rounding floor %.3g): %d activation flips (%d in exponent or sign bits) and %d weight "
        "flips called robust moved the logits by at most %.3g", o.epsilon, 2 * sel.sensitivity->rounding, activations,
        exponentBits, weights, largest);
  }
  QVERIFY(exponentBitsAll > 0);
}

void TestSave::checkBitsHasNoFalseRobust() {
  const save::Graph g = save::zooGraph("lenet", save::loadCheckpoint(kLenetWeights));
  save::SelectionOptions so;
  const save::Selection sel = save::selectBits(g, so);
  const int64_t batch = 16;
  std::vector<uint8_t> pixels(testSet().pixels.begin(), testSet().pixels.begin() + batch * 784);
  const std::vector<float> x = save::normalisedImages(g, pixels);
  // activation flips drawn from 1,000 test images; a stratified weight sample of 20 parameters
  // per layer and bit position
  const int64_t images = 1000;
  std::vector<uint8_t> many(testSet().pixels.begin(), testSet().pixels.begin() + images * 784);
  const std::vector<float> all = save::normalisedImages(g, many);
  save::CheckBitsOptions o;
  o.batch = batch;
  o.weightsPerStratum = 20;
  o.activationFlips = 3000;
  o.activationImages = images;
  const save::CheckBitsResult r = save::checkBits(g, sel, all.data(), labels32().data(), o);
  QCOMPARE(r.criterion, std::string("value"));
  QCOMPARE(r.weights.total(), uint64_t(5 * 32 * 20));  // LeNet: 5 linear/conv layers
  QCOMPARE(r.activations.total(), uint64_t(3000));
  QCOMPARE(r.weightsPromise.total(), r.weights.total());
  QCOMPARE(r.weights.robustVulnerable, uint64_t(0));
  QCOMPARE(r.activations.robustVulnerable, uint64_t(0));
  QCOMPARE(r.weightsPromise.robustVulnerable, uint64_t(0));
  QCOMPARE(r.activationsPromise.robustVulnerable, uint64_t(0));
  QVERIFY(r.weights.protectedVulnerable > 0 && r.weights.robustRobust > 0);
  QVERIFY(r.cleanAccuracy > 0.6);
  // every stratum got its 20 flips; the layers and bit positions add up to the totals
  QCOMPARE(r.weightLayers.size(), std::size_t(5));
  save::Confusion layers, bits, activationLayers, activationBits;
  for (const auto& [name, j] : r.weightLayers) {
    QCOMPARE(j.top1.total(), uint64_t(32 * 20));
    layers.merge(j.top1);
  }
  for (const auto& [name, j] : r.activationLayers) activationLayers.merge(j.top1);
  for (int b = 0; b < 32; ++b) {
    QCOMPARE(r.weightBits[std::size_t(b)].top1.total(), uint64_t(5 * 20));
    bits.merge(r.weightBits[std::size_t(b)].top1);
    activationBits.merge(r.activationBits[std::size_t(b)].top1);
  }
  for (const save::Confusion* c : {&layers, &bits}) QCOMPARE(c->protectedRobust, r.weights.protectedRobust);
  for (const save::Confusion* c : {&activationLayers, &activationBits}) QCOMPARE(c->protectedVulnerable, r.activations.protectedVulnerable);
  QCOMPARE(r.activationLayers.size(), g.nodes.size() - 1);
  // the sign and top exponent bit matter far more often than the low mantissa bits
  const save::Confusion& top = r.weightBits[30].top1;
  QVERIFY(top.robustVulnerable + top.protectedVulnerable > 10);
  QCOMPARE(r.weightBits[0].top1.protectedVulnerable, uint64_t(0));
  // the value criterion's promise: only bits that move a value by less than tau (or that a ReLU
  // hides) are robust under it, so anything it calls robust keeps the promise and low mantissa
  // flips keep it whatever they were predicted
  QCOMPARE(r.weightBits[0].promise.protectedVulnerable, uint64_t(0));
}

void TestSave::refusals() {
  const auto params = save::loadCheckpoint(kLenetWeights);
  const save::Graph g = save::zooGraph("lenet", params);
  QVERIFY_THROWS_EXCEPTION(save::SaveError, save::inputBox(g, 1, 0));
  QVERIFY_THROWS_EXCEPTION(save::SaveError, save::inputBox(g, std::nan(""), 1));
  save::SelectionOptions o;
  o.budgetBytes = 100;  // less than one 16x16 fp32 tile
  QVERIFY_THROWS_EXCEPTION(save::SaveError, save::checkOptions(o));
  try {
    save::zooGraph("chargpt", params);
    QFAIL("chargpt was accepted");
  } catch (const save::SaveError& e) {
    QVERIFY(QString::fromLatin1(e.what()).contains(QStringLiteral("embedding")));
  }
  QVERIFY_THROWS_EXCEPTION(save::SaveError, save::zooGraph("mlp", params));  // LeNet's weights
  auto broken = params;
  broken.erase("fc2.bias");
  QVERIFY_THROWS_EXCEPTION(save::SaveError, save::zooGraph("lenet", broken));
}

QTEST_GUILESS_MAIN(TestSave)
#include "tst_save.moc"
