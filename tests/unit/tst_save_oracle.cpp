// SPDX-License-Identifier: MIT
// SAVE's flip oracle and check-bits: "Flip in the model", the oracle against brute force, the
// output criterion's bound on the logits, and check-bits without false robust bits.
#include "tests/unit/tst_save_support.h"

using namespace peat;
using namespace savetest;

class TestSaveOracle : public QObject {
  Q_OBJECT
 private slots:
  void flipInModelAgreesWithTheOracleAndTheRuntime();
  void flipOracleMatchesBruteForce_data();
  void flipOracleMatchesBruteForce();
  void outputCriterionBoundsTheLogits();
  void checkBitsHasNoFalseRobust();
};

// "Flip in the model" (the workbench's button) from a stored analysis: the network rebuilt from the
// stored source, the prediction change equal to the flip oracle's (its own rerun and bounds), the
// range check equal to the protected runtime's, the recomputation's verdict from the selection's
// masks and placement.
void TestSaveOracle::flipInModelAgreesWithTheOracleAndTheRuntime() {
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
void TestSaveOracle::flipOracleMatchesBruteForce_data() {
  modelRows({{"lenet", "lenet"},
             {"resnet (batch norm, residual adds, pooling)", "resnet"},
             {"vit (layer norm, attention, gelu)", "vit"},
             {"grouped (dilated, depthwise and grouped convs, clips, average pool)", "grouped"}});
}

void TestSaveOracle::flipOracleMatchesBruteForce() {
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
void TestSaveOracle::outputCriterionBoundsTheLogits() {
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

void TestSaveOracle::checkBitsHasNoFalseRobust() {
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

QTEST_GUILESS_MAIN(TestSaveOracle)
#include "tst_save_oracle.moc"
