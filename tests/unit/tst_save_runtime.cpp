// SPDX-License-Identifier: MIT
// SAVE at run time (core/save/runtime.h): no false positives, recovery of weight and activation
// faults by channel and by value, the baselines (ECC), the verifiers (ABFT, mixed precision), fault
// patterns, and campaign shards.
#include "tests/unit/tst_save_support.h"

using namespace peat;
using namespace savetest;

class TestSaveRuntime : public QObject {
  Q_OBJECT
 private slots:
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

void TestSaveRuntime::saveHasNoFalsePositives() {
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
void TestSaveRuntime::recomputationSkipsReliableChannels() {
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
void TestSaveRuntime::weightFaultsRerunOnlyTheirChannels() {
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
void TestSaveRuntime::activationFaultsRepairOnlyTheirValues() {
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

void TestSaveRuntime::saveKeepsPredictionsUnderFaults() {
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

void TestSaveRuntime::eccCorrectsSingleBitFaultsOnly() {
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
void TestSaveRuntime::abftChecksNeverFailWithoutFaults() {
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
void TestSaveRuntime::mixedPrecisionCheckIsSoundAndCatchesChanges() {
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

void TestSaveRuntime::faultPatterns() {
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
void TestSaveRuntime::campaignShardsMatchOneProcess() {
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

QTEST_GUILESS_MAIN(TestSaveRuntime)
#include "tst_save_runtime.moc"
