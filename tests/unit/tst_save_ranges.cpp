// SPDX-License-Identifier: MIT
// SAVE's engine and ranges: the engine against LibTorch, partial recomputation bit for bit, and
// soundness of the ranges on 10,000 inputs per zoo model.
#include "tests/unit/tst_save_support.h"

#include "core/catalog/catalog.h"
#include "core/save/engine_simd.h"
#include "core/save/graph_builder.h"

using namespace peat;
using namespace savetest;

class TestSaveRanges : public QObject {
  Q_OBJECT
 private slots:
  void catalogSaysWhatExists();
  void engineMatchesTorch_data();
  void engineMatchesTorch();
  void partialRecomputationIsExact();
  void engineThreadsGiveTheSameBits();
  void engineKernelsKeepTheScalarBits();
  void rangesAreSound_data();
  void rangesAreSound();
  void transformerOpsAreSoundOnNarrowBoxes();
  void importedCompositionsAreSound();
  void affineGemmBoundsHoldTheEndpointForm();
  void symbolicIsTighterThanIntervals();
};

namespace {

// The random boxes of the soundness checks: n elements around centres of a random scale (10^-3 to
// 10^3), each of a random width (down to 10^-8 of the scale); every third box spreads its centres
// over the whole scale, the others over a hundredth of it or less.
save::NodeRange randomBox(std::mt19937_64& rng, std::uniform_real_distribution<double>& unit, int box, int n) {
  save::NodeRange r;
  const double scale = std::pow(10.0, unit(rng) * 6 - 3), width = std::pow(10.0, -unit(rng) * 8);
  for (int i = 0; i < n; ++i) {
    const double c = (unit(rng) - 0.5) * scale * (box % 3 == 0 ? 1 : 0.01 * (i % 8 + 1)), w = width * scale * unit(rng);
    r.lo.push_back(double(float(c - w)));
    r.hi.push_back(double(float(c + w)));
  }
  return r;
}

// The ranges of g over box r: symbolic for odd boxes, intervals for even ones.
save::RangeResult rangesOfBox(const save::Graph& g, const save::NodeRange& r, int box) {
  save::RangeOptions o;
  o.mode = box % 2 ? save::RangeMode::Symbolic : save::RangeMode::Interval;
  return save::analyzeRanges(g, r, o);
}

// 40 inputs inside box r: 20 random corners, then 20 random points inside.
std::vector<float> pointsInBox(std::mt19937_64& rng, std::uniform_real_distribution<double>& unit, const save::NodeRange& r) {
  const int n = int(r.lo.size());
  std::vector<float> x(std::size_t(n) * 40);
  for (int s = 0; s < 40; ++s)
    for (int i = 0; i < n; ++i) {
      const double t = s < 20 ? double((rng() >> 7) & 1) : unit(rng);  // corners, then inside
      x[std::size_t(s * n + i)] = std::clamp(float(r.lo[std::size_t(i)] + t * (r.hi[std::size_t(i)] - r.lo[std::size_t(i)])),
                                             float(r.lo[std::size_t(i)]), float(r.hi[std::size_t(i)]));
    }
  return x;
}

}  // namespace

// The catalog (core/catalog) tells the truth about the zoo: every model it lists is built by the
// LibTorch zoo with the task it names, and SAVE has a graph of exactly those it marks so (the one
// the LibTorch model's parameters load into), the others refused by name.
void TestSaveRanges::catalogSaysWhatExists() {
  QVERIFY(!catalog::zooModels().empty());
  QCOMPARE(models::modelNames().size(), catalog::zooModels().size());
  for (const catalog::ZooModel& m : catalog::zooModels()) {
    QCOMPARE(models::taskOf(m.name) == models::Task::Text, m.task == catalog::Task::Text);
    if (m.task == catalog::Task::Text) continue;  // a text model needs its vocabulary: built in tst_profiler
    const Twin t = twin(m.name);
    QVERIFY(t.model->parameterCount() > 0);
    // the layer specification typed once: each of its convolutions and linear layers is a parameter
    // of the LibTorch model of that shape, and a node of SAVE's graph of that output size
    const catalog::ZooSpec& spec = catalog::zooSpec(m.name);
    std::map<std::string, std::vector<uint64_t>> shapes;
    for (const auto& [name, p] : t.model->parameters())
      for (int64_t d : p.sizes()) shapes[name].push_back(uint64_t(d));
    for (const catalog::ZooConv& c : spec.convs) {
      const std::vector<uint64_t> want{uint64_t(c.out), uint64_t(c.in), uint64_t(c.kernel), uint64_t(c.kernel)};
      QCOMPARE(shapes[c.name + ".weight"], want);
      QCOMPARE(shapes.count(c.name + ".bias"), std::size_t(c.bias));
    }
    for (const catalog::ZooLinear& l : spec.linears)
      QCOMPARE(shapes[l.name + ".weight"], (std::vector<uint64_t>{uint64_t(l.out), uint64_t(l.in)}));
    if (m.saveGraph) {
      const save::Graph g = save::zooGraph(m.name, t.parameters);
      QVERIFY2(g.nodes.size() > 2, m.name.c_str());
      for (const catalog::ZooLinear& l : spec.linears) {
        int found = 0;
        for (const save::Node& n : g.nodes) found += n.name == l.name && n.op == save::Op::Linear && n.features() == l.out;
        QVERIFY2(found == 1, l.name.c_str());
      }
    } else {
      QVERIFY_THROWS_EXCEPTION(save::SaveError, save::zooGraph(m.name, t.parameters));
    }
  }
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, catalog::zooSpec("no-such-model"));
  QCOMPARE(catalog::zooSpec("chargpt").heads, int64_t(4));
  // a text model SAVE cannot bound is refused by name
  QVERIFY(!catalog::zooModel("chargpt")->saveGraph);
  QVERIFY_THROWS_EXCEPTION(save::SaveError, save::zooGraph("chargpt", {}));
}

void TestSaveRanges::engineMatchesTorch_data() {
  modelRows({{"mlp", "mlp"}, {"lenet", "lenet"}, {"resnet", "resnet"}, {"vit", "vit"}});
}

void TestSaveRanges::engineMatchesTorch() {
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

namespace {

// Every element of every node of `g` run on `batch` samples `x`, recomputed alone (affineElement,
// elementOf: the scalar definitions): the first element whose bits differ, described, or "".
std::string firstElementRecomputedOtherwise(const save::Graph& g, const std::vector<float>& x, int64_t batch,
                                            int& nodesChecked) {
  const auto act = save::runAll(g, x.data(), batch);
  for (std::size_t v = 1; v < g.nodes.size(); ++v) {
    const save::Node& n = g.nodes[v];
    const bool affine = n.op == save::Op::Linear || n.op == save::Op::Conv2d;
    const save::Node& src = g.nodes[std::size_t(n.inputs[0])];
    for (int64_t s = 0; s < batch; ++s)
      for (int64_t e = 0; e < n.size(); ++e) {
        const float full = act[v][std::size_t(s * n.size() + e)];
        std::vector<const float*> in;
        for (int i : n.inputs) in.push_back(act[std::size_t(i)].data() + s * g.nodes[std::size_t(i)].size());
        const float one = affine ? save::affineElement(n, src, in[0], e) : save::elementOf(g, int(v), in, e);
        if (std::memcmp(&full, &one, 4) != 0)
          return n.name + " sample " + std::to_string(s) + " element " + std::to_string(e) + ": " + std::to_string(full) +
                 " vs " + std::to_string(one);
      }
    ++nodesChecked;
  }
  return "";
}

}  // namespace

// The flip oracle and SAVE's verifier recompute single elements (affineElement, elementOf): they
// must equal the full (vectorised) run, for every op, on every SIMD target this CPU runs.
void TestSaveRanges::partialRecomputationIsExact() {
  for (const int64_t target : hwy::SupportedAndGeneratedTargets())
  for (const char* name : {"lenet", "resnet", "vit", "grouped"}) {
    hwy::SetSupportedTargetsForTest(target);
    const save::Graph g = std::string(name) == "grouped" ? save::randomGraph(name, 7) : save::zooGraph(name, twin(name).parameters);
    std::vector<uint8_t> pixels(testSet().pixels.begin(), testSet().pixels.begin() + 5 * 784);
    const std::vector<float> x = save::normalisedImages(g, pixels);
    int checked = 0;
    const std::string differs = firstElementRecomputedOtherwise(g, x, 5, checked);
    QVERIFY2(differs.empty(), qPrintable(QStringLiteral("%1 on %2: %3").arg(QLatin1String(name),
                                         QLatin1String(hwy::TargetName(target)), QString::fromStdString(differs))));
    QVERIFY(checked >= 9);
  }
  hwy::SetSupportedTargetsForTest(0);
}

// The engine's vectorised kernels (depthwise convolutions over padded, phase-split inputs; the
// element-wise passes) against the scalar definitions, bit for bit, on every SIMD target: depthwise
// convolutions with odd sizes (rows that end inside a vector), strides 1 to 3, dilation, padding
// wider than the kernel's reach, with and without bias; a GEMM whose rows are not a whole number of
// register blocks on any target; ReLU, Clip (to [-0, 0.5]), batch norm, add,
// product and max, on inputs that hold NaN, infinities, signed zeros and subnormals.
void TestSaveRanges::engineKernelsKeepTheScalarBits() {
  save::Graph g;
  g.model = "kernels";
  const std::map<std::string, store::Tensor> none;
  save::detail::Builder b(g, none);
  b.randomFill(5);
  const int x = b.input({6, 13, 11});
  b.conv("dw.s1", x, 6, 3, 1, 1, true, 6);
  b.conv("dw.s2", x, 6, 3, 2, 0, false, 6);
  b.conv("dw.dilated", x, 6, 3, 1, 2, true, 6, 2);
  b.conv("dw.s3k5", x, 6, 5, 3, 2, true, 6);
  b.conv("dw.wide", x, 6, 2, 2, 3, true, 6);
  b.conv("dw.k7", x, 12, 7, 1, 3, true, 6);  // two output channels per input channel: the GEMM
  b.conv("gemm.rows", x, 43, 3, 1, 1, true);   // whole register blocks of rows and a block of the rest
  b.conv("gemm.rows2", x, 46, 1, 1, 0, false);  // (7 or 1 left, 10 or 4: 12 rows on AVX-512, 6 on AVX2)
  const int relu = b.relu("relu", x), clip = b.clip("clip", x, -0.0f, 0.5f), bn = b.batchNorm("bn", x);
  b.addNodes("add", x, clip);
  b.mul("mul", x, bn);
  const int max = b.mul("max", relu, bn);
  g.nodes[std::size_t(max)].op = save::Op::Max2;
  g.output = max;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), 0.0f, -0.0f, 1e-40f, -1e-40f, 0.5f, 6.0f};
  const int64_t batch = 3;
  std::vector<float> in(std::size_t(batch * g.nodes[0].size()));
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = i % 7 == 0 ? specials[(i / 7) % 9] : normal(rng);
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (const unsigned workers : {1u, 2u}) {
      save::setEngineThreads(workers, 0);
      int checked = 0;
      const std::string differs = firstElementRecomputedOtherwise(g, in, batch, checked);
      QVERIFY2(differs.empty(), qPrintable(QStringLiteral("on %1, %2 workers: %3").arg(QLatin1String(hwy::TargetName(target)))
                                               .arg(workers).arg(QString::fromStdString(differs))));
      QCOMPARE(checked, int(g.nodes.size()) - 1);
    }
    // the verifiers' vectorised checks: one element outside its range (or NaN), or one bit that
    // differs under the mask, found at every place of rows of every length up to 70
    for (int64_t len = 1; len <= 70; ++len)
      for (int64_t at = 0; at < len; ++at)
        for (const float bad : {2.0f, -2.0f, std::numeric_limits<float>::quiet_NaN()}) {
          std::vector<float> v(std::size_t(len), 0.5f), lo(std::size_t(len), -1.0f), hi(std::size_t(len), 1.0f);
          QVERIFY(!save::detail::anyOutside(v.data(), lo.data(), hi.data(), len));
          v[std::size_t(at)] = bad;
          QVERIFY2(save::detail::anyOutside(v.data(), lo.data(), hi.data(), len), qPrintable(QString::number(at)));
          std::vector<float> y(std::size_t(len), 0.5f), z = y;
          std::vector<uint32_t> mask(std::size_t(len), 0xFFFFFFFEu);  // the lowest bit not compared
          uint32_t bits;
          std::memcpy(&bits, &z[std::size_t(at)], 4);
          bits ^= 1u;
          std::memcpy(&z[std::size_t(at)], &bits, 4);
          QVERIFY(!save::detail::anyMaskedDifference(y.data(), z.data(), mask.data(), len));
          bits ^= 1u << 30;
          std::memcpy(&z[std::size_t(at)], &bits, 4);
          QVERIFY(save::detail::anyMaskedDifference(y.data(), z.data(), mask.data(), len));
        }
  }
  save::setEngineThreads(1);
  hwy::SetSupportedTargetsForTest(0);
}

// The engine's workers split convolutions, linear layers and products of activations by output
// channels, samples or heads: every element keeps its sum's order, so any worker count gives the
// same bits (1, 2 and an uneven 3, each splitting even the smallest layer).
void TestSaveRanges::engineThreadsGiveTheSameBits() {
  for (const char* name : {"lenet", "resnet", "vit", "grouped", "resnet18"}) {
    const std::string model = name;
    const save::Graph g = model == "grouped" || model == "resnet18" ? save::randomGraph(name, 7)
                                                                    : save::zooGraph(name, twin(name).parameters);
    for (const int64_t batch : {int64_t(1), int64_t(3)}) {
      std::mt19937 rng{uint32_t(batch)};
      std::normal_distribution<float> normal;
      std::vector<float> x(std::size_t(batch * g.nodes[0].size()));
      for (float& v : x) v = normal(rng);
      save::setEngineThreads(1);
      const auto one = save::runAll(g, x.data(), batch);
      for (const unsigned workers : {2u, 3u}) {
        save::setEngineThreads(workers, 0);
        const auto many = save::runAll(g, x.data(), batch);
        for (std::size_t v = 1; v < g.nodes.size(); ++v)
          QVERIFY2(std::memcmp(one[v].data(), many[v].data(), one[v].size() * sizeof(float)) == 0,
                   qPrintable(QStringLiteral("%1 %2 (batch %3) on %4 workers").arg(QLatin1String(name))
                                  .arg(QString::fromStdString(g.nodes[v].name)).arg(batch).arg(workers)));
      }
    }
  }
  save::setEngineThreads(1);
}

void TestSaveRanges::rangesAreSound_data() {
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
void TestSaveRanges::rangesAreSound() {
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
void TestSaveRanges::transformerOpsAreSoundOnNarrowBoxes() {
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
      const save::NodeRange r = randomBox(rng, unit, box, 64);
      const save::RangeResult res = rangesOfBox(g, r, box);
      const save::NodeRange& out = res.nodes[std::size_t(g.output)];
      const std::vector<float> x = pointsInBox(rng, unit, r);
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

// The ONNX importer's compositions for the torchvision families, as it builds them from existing
// ops: a concatenation of two computed tensors (a Select over both, with zeros), a product with a
// constant tensor (one factor per element), HardSigmoid (affine, then clip), HardSwish (x times
// its HardSigmoid), Sub (the addition of the negation), a ceil-mode max-pool and ReduceMean (a
// global average over a [kept, reduced] view). Over 300 random boxes, narrow and wide, corners
// included, every engine value of every node lies inside its interval in both modes, and each
// element recomputed alone equals the full run bit for bit.
void TestSaveRanges::importedCompositionsAreSound() {
  std::mt19937_64 rng(30);
  std::uniform_real_distribution<double> unit(0, 1);
  save::Graph g;
  g.model = "compositions";
  const std::map<std::string, store::Tensor> none;
  save::detail::Builder b(g, none);
  const int x = b.input({2, 5, 5});
  const int relu = b.relu("relu", x);
  std::vector<float> factors;
  for (int i = 0; i < 50; ++i) factors.push_back(float((unit(rng) - 0.5) * 4));
  const int scaled = b.view("scaled.shape", b.affine("scaled", b.view("scaled.flat", x, {50, 1}), factors,
                                                    std::vector<float>(50, 0.0f)), {2, 5, 5});
  std::vector<int64_t> gather;  // [relu; scaled reversed], a few zeros
  for (int64_t i = 0; i < 100; ++i) gather.push_back(i % 17 == 5 ? -1 : i < 50 ? i : 50 + (99 - i));
  const int cat = b.select("concat", std::vector<int>{relu, scaled}, {4, 5, 5}, gather);
  const int affine = b.view("hardsigmoid.shape", b.affine("hardsigmoid.affine", b.view("hardsigmoid.flat", cat, {1, 100}),
                                                          {1.0f / 6}, {0.5f}), {4, 5, 5});
  const int hardSwish = b.mul("hardswish", cat, b.clip("hardsigmoid", affine, 0.0f, 1.0f));
  const int negated = b.view("neg.shape", b.affine("neg", b.view("neg.flat", hardSwish, {1, 100}), {-1.0f}, {0.0f}), {4, 5, 5});
  const int sub = b.addNodes("sub", cat, negated);
  const int pool = b.maxPool("pool", sub, 2, 2, 0, true);  // 5 -> 3 windows, the last one partial
  QCOMPARE(g.nodes[std::size_t(pool)].shape, (std::vector<int64_t>{4, 3, 3}));
  g.output = b.globalAvgPool("mean", b.view("mean.view", pool, {4, 9}));
  uint64_t checked = 0;
  for (int box = 0; box < 300; ++box) {
    const save::NodeRange r = randomBox(rng, unit, box, 50);
    const save::RangeResult res = rangesOfBox(g, r, box);
    const std::vector<float> in = pointsInBox(rng, unit, r);
    const auto act = save::runAll(g, in.data(), 40);
    for (std::size_t v = 1; v < g.nodes.size(); ++v) {
      const save::Node& n = g.nodes[v];
      const std::size_t size = std::size_t(n.size());
      for (int s = 0; s < 40; ++s) {
        std::vector<const float*> ins;
        for (int i : n.inputs) ins.push_back(act[std::size_t(i)].data() + s * g.nodes[std::size_t(i)].size());
        for (std::size_t i = 0; i < size; ++i) {
          const float value = act[v][s * size + i];
          const double lo = res.nodes[v].lo[i], hi = res.nodes[v].hi[i];
          if (!(double(value) >= lo && double(value) <= hi))
            QFAIL(qPrintable(QStringLiteral("%1 box %2 element %3: %4 outside [%5, %6]")
                                 .arg(QString::fromStdString(n.name))
                                 .arg(box)
                                 .arg(i)
                                 .arg(double(value), 0, 'g', 10)
                                 .arg(lo, 0, 'g', 10)
                                 .arg(hi, 0, 'g', 10)));
          const float one = save::elementOf(g, int(v), ins, int64_t(i));
          if (std::memcmp(&one, &value, 4) != 0)
            QFAIL(qPrintable(QStringLiteral("%1 element %2 recomputed alone: %3 vs %4")
                                 .arg(QString::fromStdString(n.name))
                                 .arg(i)
                                 .arg(double(one))
                                 .arg(double(value))));
          ++checked;
        }
      }
    }
  }
  QVERIFY(checked > 1000000);
}

// Convolutions (dense, strided, padded, dilated, grouped, depthwise, 1x1) and linear layers (on 36
// token rows, and on one row) with random weights, over 300 random boxes, narrow and wide. The
// interval step runs them as centre-radius GEMMs in double (ranges_interval.cpp); against the
// endpoint form computed here in long double (each weight takes the end of its input's interval
// that moves the sum its way, then gamma_{n+1} (|bias| + sum |w| max|x|) for fp32), on every SIMD
// target this CPU runs: the bounds hold the endpoint form's and are no more than 10^-8 (of the
// magnitudes) looser, the rounding radius is the endpoint form's, and every engine value of the
// box's corners and inner points lies inside (symbolic boxes too).
void TestSaveRanges::affineGemmBoundsHoldTheEndpointForm() {
  std::mt19937_64 rng(31);
  std::uniform_real_distribution<double> unit(0, 1);
  save::Graph g;
  g.model = "affine";
  const std::map<std::string, store::Tensor> none;
  save::detail::Builder b(g, none);
  b.randomFill(31);
  const int x = b.input({4, 9, 9});
  const std::vector<int> affine = {
      b.conv("dense", x, 8, 3, 1, 1, true),          b.conv("dilated", x, 6, 3, 2, 2, false, 2, 2),
      b.conv("depthwise", x, 4, 3, 1, 1, true, 4),  b.conv("pointwise", x, 5, 1, 1, 0, true),
      b.linear("tokens", b.view("rows", x, {36, 9}), 7), b.linear("head", b.flatten("flat", x), 3)};
  g.output = affine.back();
  uint64_t checked = 0, compared = 0;
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int box = 0; box < 300; ++box) {
      const save::NodeRange r = randomBox(rng, unit, box, 324);
      const save::RangeResult res = rangesOfBox(g, r, box);
      for (int v : affine) {
        const save::Node& n = g.nodes[std::size_t(v)];
        const save::Node& src = g.nodes[std::size_t(n.inputs[0])];
        const save::NodeRange& in = res.nodes[std::size_t(n.inputs[0])];
        const save::NodeRange& out = res.nodes[std::size_t(v)];
        const std::vector<double> radius = save::roundingRadius(g, v, res.nodes);
        const int64_t outs = n.op == save::Op::Linear ? n.features() : n.shape[0];
        const int64_t taps = int64_t(n.weight.size()) / outs;
        for (int64_t j = 0; j < n.size(); ++j) {
          long double lo = 0, hi = 0, mag = 0;
          int64_t o = 0;
          auto tap = [&](float wf, std::size_t i) {
            const long double w = wf;
            lo += w * (w >= 0 ? in.lo[i] : in.hi[i]);
            hi += w * (w >= 0 ? in.hi[i] : in.lo[i]);
            mag += std::fabs(w) * std::max(std::fabs(in.lo[i]), std::fabs(in.hi[i]));
          };
          if (n.op == save::Op::Linear) {
            o = j % outs;
            for (int64_t t = 0; t < taps; ++t)
              tap(n.weight[std::size_t(o * taps + t)], std::size_t(j / outs * taps + t));
          } else {
            const int64_t oh = n.shape[1], ow = n.shape[2], h = src.shape[1], w = src.shape[2];
            const int64_t cg = src.shape[0] / n.groups, k = n.kernel;
            o = j / (oh * ow);
            const int64_t y = j / ow % oh, xx = j % ow, c0 = o / (outs / n.groups) * cg;
            for (int64_t c = 0; c < cg; ++c)
              for (int64_t ky = 0; ky < k; ++ky)
                for (int64_t kx = 0; kx < k; ++kx) {
                  const int64_t iy = y * n.stride + ky * n.dilation - n.padding;
                  const int64_t ix = xx * n.stride + kx * n.dilation - n.padding;
                  if (iy >= 0 && iy < h && ix >= 0 && ix < w)
                    tap(n.weight[std::size_t(((o * cg + c) * k + ky) * k + kx)], std::size_t(((c0 + c) * h + iy) * w + ix));
                }
          }
          const long double bias = n.bias.empty() ? 0 : n.bias[std::size_t(o)];
          const long double e = save::gamma32(taps + 1) * (std::fabs(bias) + mag) + (taps + 1) * 0x1p-149L;
          const long double wantLo = bias + lo - e, wantHi = bias + hi + e;
          const long double scale = std::fabs(wantLo) + std::fabs(wantHi) + e;
          const double gotLo = out.lo[std::size_t(j)], gotHi = out.hi[std::size_t(j)];
          const double got = radius[std::size_t(j)];
          // (symbolic boxes, odd ones, may be tighter: their linear bounds are intersected)
          const bool holds = box % 2 || (gotLo <= wantLo + 1e-15L * scale && gotHi >= wantHi - 1e-15L * scale);
          const bool tight = box % 2 || (gotLo >= wantLo - 1e-8L * scale && gotHi <= wantHi + 1e-8L * scale);
          if (!holds || !tight || !(got >= e * (1 - 1e-12L) && got <= e * (1 + 1e-12L)))
            QFAIL(qPrintable(QStringLiteral("%1 box %2 element %3 on %4: [%5, %6] radius %7 against [%8, %9] radius %10")
                                 .arg(QString::fromStdString(n.name))
                                 .arg(box)
                                 .arg(j)
                                 .arg(QLatin1String(hwy::TargetName(target)))
                                 .arg(gotLo, 0, 'g', 17)
                                 .arg(gotHi, 0, 'g', 17)
                                 .arg(got, 0, 'g', 17)
                                 .arg(double(wantLo), 0, 'g', 17)
                                 .arg(double(wantHi), 0, 'g', 17)
                                 .arg(double(e), 0, 'g', 17)));
          ++compared;
        }
      }
      const std::vector<float> points = pointsInBox(rng, unit, r);
      const auto act = save::runAll(g, points.data(), 40);
      for (int v : affine) {
        const std::size_t size = std::size_t(g.nodes[std::size_t(v)].size());
        for (std::size_t s = 0; s < 40; ++s)
          for (std::size_t i = 0; i < size; ++i) {
            const double value = act[std::size_t(v)][s * size + i];
            if (!(value >= res.nodes[std::size_t(v)].lo[i] && value <= res.nodes[std::size_t(v)].hi[i]))
              QFAIL(qPrintable(QStringLiteral("%1 box %2 element %3: %4 outside [%5, %6]")
                                   .arg(QString::fromStdString(g.nodes[std::size_t(v)].name))
                                   .arg(box)
                                   .arg(i)
                                   .arg(value, 0, 'g', 10)
                                   .arg(res.nodes[std::size_t(v)].lo[i], 0, 'g', 10)
                                   .arg(res.nodes[std::size_t(v)].hi[i], 0, 'g', 10)));
            ++checked;
          }
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
  QVERIFY(compared > 300 * 1000 && checked > 300 * 40 * 1000);
}

void TestSaveRanges::symbolicIsTighterThanIntervals() {
  const save::Graph g = save::zooGraph("lenet", save::loadCheckpoint(kLenetWeights));
  save::RangeOptions o;
  o.mode = save::RangeMode::Interval;
  const save::Tightness plain = save::tightnessOf(save::analyzeRanges(g, save::inputBox(g, 0, 1), o).nodes[std::size_t(g.output)]);
  o.mode = save::RangeMode::Symbolic;
  const save::Tightness sym = save::tightnessOf(save::analyzeRanges(g, save::inputBox(g, 0, 1), o).nodes[std::size_t(g.output)]);
  QVERIFY2(sym.meanWidth < 0.8 * plain.meanWidth, qPrintable(QStringLiteral("%1 vs %2").arg(sym.meanWidth).arg(plain.meanWidth)));
  QVERIFY(sym.unionLo > plain.unionLo && sym.unionHi < plain.unionHi);
}

QTEST_GUILESS_MAIN(TestSaveRanges)
#include "tst_save_ranges.moc"
