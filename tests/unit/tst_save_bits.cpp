// SPDX-License-Identifier: MIT
// SAVE's bit classes and tiles: the bit-class rules, brute-force checks of the ranging and robust
// bits, the tiles' placement in reliable memory, and bad input.
#include "tests/unit/tst_save_support.h"

using namespace peat;
using namespace savetest;

class TestSaveBits : public QObject {
  Q_OBJECT
 private slots:
  void bitClassRules();
  void rangingAndRobustBitsHoldForEveryValue();
  void relativeToleranceHoldsForEveryValue();
  void tilesGoToReliableMemoryByWorkPerByte();
  void packedLayersReadAsTheirOwnRecords();
  void analysisKeepsItsModelSource();
  void refusals();
};

namespace {
// The shipped LeNet's bits selected over interval ranges, as the stored analyses below hold them.
save::Selection lenetIntervalSelection() {
  const save::Graph g = save::zooGraph("lenet", save::loadCheckpoint(kLenetWeights));
  save::SelectionOptions o;
  o.ranges.mode = save::RangeMode::Interval;
  return save::selectBits(g, o);
}
}  // namespace

void TestSaveBits::bitClassRules() {
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
void TestSaveBits::rangingAndRobustBitsHoldForEveryValue() {
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
void TestSaveBits::relativeToleranceHoldsForEveryValue() {
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
void TestSaveBits::tilesGoToReliableMemoryByWorkPerByte() {
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
    std::vector<double> share(l.tileShare.size(), 0.0), count(l.tileShare.size(), 0.0), vulnerable(l.tileShare.size(), 0.0);
    const std::vector<float> type = m.values(save::MapQuantity::Type);
    for (int64_t i = 0; i < l.elements; ++i) {
      const int64_t tile = (i / l.cols / 16) * l.tilesAcross + (i % l.cols) / 16;
      QCOMPARE(m.tileOf(i), tile);
      share[std::size_t(tile)] += type[std::size_t(i)] == 2.0f;
      vulnerable[std::size_t(tile)] +=
          __builtin_popcount(~(l.robustMask[std::size_t(i)] | l.rangingMask[std::size_t(i)]));
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
    // each tile's mean vulnerable bits per value, from the masks, as selected and as stored
    const save::StoredAnalysis stored = save::loadAnalysis(reader, "lenet-interval");
    const auto at = std::find_if(stored.layers.begin(), stored.layers.end(), [&](const save::StoredLayer& x) { return x.name == name; });
    QVERIFY(at != stored.layers.end());
    QCOMPARE(at->tileVulnerableBits.size(), share.size());
    for (std::size_t t = 0; t < share.size(); ++t) {
      QCOMPARE(float(vulnerable[t] / count[t]), l.tileVulnerableBits[t]);
      QCOMPARE(at->tileVulnerableBits[t], l.tileVulnerableBits[t]);
    }
    QCOMPARE(m.counts().type2, l.type2);
  }
  QVERIFY_THROWS_EXCEPTION(save::SaveError, save::loadLayerMap(reader, "lenet-interval", "no-such-layer"));
  QVERIFY_THROWS_EXCEPTION(save::SaveError, save::loadLayerMap(reader, "lenet-interval", "conv1").element(6 * 28 * 28));
}

// Small layers are stored as rows of one record (HDF5 takes about 1 ms per record): every layer
// reads back the same whether packed or in a record of its own, the session lists the packed
// layers by name, and a packed record with offsets outside its arrays is refused in one line.
void TestSaveBits::packedLayersReadAsTheirOwnRecords() {
  const save::Selection s = lenetIntervalSelection();
  QTemporaryDir dir;
  const std::string own = dir.filePath(QStringLiteral("own.h5")).toStdString();
  const std::string mixed = dir.filePath(QStringLiteral("mixed.h5")).toStdString();
  const std::string all = dir.filePath(QStringLiteral("all.h5")).toStdString();
  writeLenetAnalysis(own, s, 0);         // every layer a record of its own
  writeLenetAnalysis(mixed, s);          // conv1 (4,704 values) and its ReLU their own, the rest packed
  writeLenetAnalysis(all, s, 1 << 30);   // every layer packed
  const store::SessionReader ownReader(own), mixedReader(mixed), allReader(all);
  QCOMPARE(ownReader.summaryWithoutTensors().saveResults.size(), s.layers.size() + 1);
  const store::SessionSummary mixedSummary = mixedReader.summaryWithoutTensors();
  const auto large = std::size_t(std::count_if(s.layers.begin(), s.layers.end(),
                                                [](const save::LayerSelection& l) { return l.elements > save::kPackUpTo; }));
  QVERIFY(large >= 1 && large < s.layers.size());  // conv1's 6 x 28 x 28 values and more
  QCOMPARE(mixedSummary.saveResults.size(), large + 2);  // the summary, the large layers, the packed record
  QCOMPARE(mixedSummary.packedSaveLayers.size(), std::size_t(1));
  QCOMPARE(mixedSummary.packedSaveLayers.begin()->first, std::string("lenet-interval.packed-layers"));
  QCOMPARE(mixedSummary.packedSaveLayers.begin()->second.size(), s.layers.size() - large);
  QCOMPARE(allReader.summaryWithoutTensors().saveResults.size(), std::size_t(2));
  const save::StoredAnalysis a = save::loadAnalysis(ownReader, "lenet-interval");
  QCOMPARE(a.layers.size(), s.layers.size());
  for (const store::SessionReader* reader : {&mixedReader, &allReader}) {
    const save::StoredAnalysis b = save::loadAnalysis(*reader, "lenet-interval");
    QCOMPARE(b.layers.size(), a.layers.size());
    for (std::size_t i = 0; i < a.layers.size(); ++i) {
      const save::StoredLayer &x = a.layers[i], &y = b.layers[i];
      QCOMPARE(y.name, x.name);
      QCOMPARE(y.op, x.op);
      QCOMPARE(y.elements, x.elements);
      QCOMPARE(y.type2, x.type2);
      QVERIFY(y.robustBits == x.robustBits && y.rangingBits == x.rangingBits && y.vulnerableBits == x.vulnerableBits);
      QVERIFY(y.meanWidth == x.meanWidth);
      QCOMPARE(y.tilesDown, x.tilesDown);
      QCOMPARE(y.tilesAcross, x.tilesAcross);
      QCOMPARE(y.tileRows, x.tileRows);
      QVERIFY(y.tileShare == x.tileShare && y.tileVulnerableBits == x.tileVulnerableBits);
      QCOMPARE(y.tileReliable, x.tileReliable);
      const save::LayerMap m = save::loadLayerMap(ownReader, "lenet-interval", x.name);
      const save::LayerMap n = save::loadLayerMap(*reader, "lenet-interval", x.name);
      QCOMPARE(n.shape, m.shape);
      QVERIFY(n.lo == m.lo && n.hi == m.hi);
      QCOMPARE(n.robustMask, m.robustMask);
      QCOMPARE(n.rangingMask, m.rangingMask);
      // and both as selected
      const save::LayerSelection& l = s.layers[i];
      QCOMPARE(n.robustMask, l.robustMask);
      QVERIFY(n.lo == s.ranges.nodes[std::size_t(l.node)].lo);
    }
  }
  // A crafted packed record: offsets past its arrays' ends.
  const std::string crafted = dir.filePath(QStringLiteral("crafted.h5")).toStdString();
  {
    store::SessionWriter w(crafted, store::Provenance{});
    const std::vector<double> scalars(2, 1.0);
    const std::vector<int64_t> offsets{0, 6, 4};  // [3, 1]: two layers, one array of 4 values; 6 lies past it
    const std::vector<double> lo(4, 0.0);
    store::ResultRecord packed, sum;
    packed.labels = {{"kind", "save_layers"}, {"analysis", "x"}, {"nodes", "a\nb"}, {"ops", "relu\nrelu"},
                     {"scalar_names", "elements"}, {"array_names", "lo"}};
    packed.arrays = {{"scalars", {store::DType::F64, {2, 1}, scalars.data()}},
                     {"offsets", {store::DType::I64, {3, 1}, offsets.data()}},
                     {"lo", {store::DType::F64, {4}, lo.data()}}};
    sum.labels = {{"kind", "save_analysis"}, {"layers", "a,b"}, {"packed_layers", "x.packed-layers"}};
    w.writeSaveResults({{"x.packed-layers", &packed}, {"x", &sum}});
    w.flush();
  }
  const store::SessionReader craftedReader(crafted);
  try {
    (void)save::loadAnalysis(craftedReader, "x");
    QFAIL("a packed record with offsets outside its arrays was read");
  } catch (const save::SaveError& e) {
    QVERIFY2(std::string(e.what()).find("offsets") != std::string::npos, e.what());
  }
}

// An analysis stores where its network came from, each input's own range and normalisation
// included, so that the workbench rebuilds the very network (Flip in the model): read back whole.
void TestSaveBits::analysisKeepsItsModelSource() {
  const save::Selection s = lenetIntervalSelection();
  QTemporaryDir dir;
  const std::string path = dir.filePath(QStringLiteral("source.h5")).toStdString();
  save::ModelSource source;
  source.model = "/models/two.onnx";
  source.inputMean = {0.5f};
  source.inputStd = {0.25f, 0.5f, 0.125f};
  source.inputRanges = {"meta=-2,2"};
  source.inputMeans = {"image=0.485,0.456,0.406", "meta=0"};
  source.inputStds = {"image=0.229,0.224,0.225"};
  {
    store::SessionWriter w(path, store::Provenance{});
    save::writeAnalysis(w, "two", s, source);
    w.flush();
  }
  const save::StoredAnalysis a = save::loadAnalysis(store::SessionReader(path), "two");
  QCOMPARE(a.source.model, source.model);
  QCOMPARE(a.source.inputMean, source.inputMean);
  QCOMPARE(a.source.inputStd, source.inputStd);
  QCOMPARE(a.source.inputRanges, source.inputRanges);
  QCOMPARE(a.source.inputMeans, source.inputMeans);
  QCOMPARE(a.source.inputStds, source.inputStds);
}

void TestSaveBits::refusals() {
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

QTEST_GUILESS_MAIN(TestSaveBits)
#include "tst_save_bits.moc"
