// SPDX-License-Identifier: MIT
// The op layer and the profiler on real data at small sizes: call identity, backward GEMMs through
// the slot, substitution policies, determinism, golden profiling, playback and runtime FI.
#include <ATen/ATen.h>  // before Qt: LibTorch uses `slots` as a name
#include <torch/autograd.h>
#include <QtTest>

#include "core/cli/torch_commands.h"
#include "core/data/datasets.h"
#include "core/store/session.h"
#include "core/torch/kernels/kernel.h"
#include "core/torch/models/zoo.h"
#include "core/torch/ops/dispatcher.h"
#include "core/torch/train/profiler.h"

using namespace peat;

namespace {
class Log final : public ops::CallObserver {
 public:
  std::vector<store::CallId> ids;
  std::vector<ops::Variant> variants;
  std::vector<ops::OpCall> calls;     // detached copies, for replays
  std::vector<at::Tensor> outputs;
  void onCall(const store::CallId& id, const ops::OpCall& call, const at::Tensor& output) override {
    ids.push_back(id);
    variants.push_back(call.variant);
    ops::OpCall copy = call;
    for (at::Tensor& t : copy.inputs) t = t.detach().clone();
    calls.push_back(copy);
    outputs.push_back(output.detach().clone());
  }
};

train::TrainOptions small(const std::string& model, int64_t iterations) {
  train::TrainOptions t;
  t.model = model;
  t.iterations = iterations;
  t.batch = 16;
  t.evalBatches = 2;
  t.context = 16;
  t.seed = 5;
  return t;
}

std::vector<double> column(const std::vector<h5::Column>& table, const std::string& name) {
  for (const h5::Column& c : table)
    if (c.name == name) return c.numbers;
  return {};
}
}  // namespace

class TestProfiler : public QObject {
  Q_OBJECT
 private slots:
  void commandLineListsMatchTheModule();
  void init() { QVERIFY(dir_.isValid()); }
  void datasetsComeFromDebian();
  void missingDatasetNamesThePackage();
  void linearRunsThreeGemmsThroughTheSlot();
  void slotGradientsMatchPlainAutograd();
  void opWiseGradientsMatchAten();
  void optimiserUpdatesAreSlotCalls();
  void everyKthCallIsSubstituted();
  void probabilityIsSeeded();
  void everyModelTrains_data();
  void everyModelTrains();
  void goldenTrainingIsDeterministic();
  void profileThenPlayback();
  void playbackRefusesAnotherModel();
  void playbackResumesFromACheckpoint();
  void runtimeFiStoresBothCurves();
  void cancelLeavesAReadableSession();
  void finetuneStartsFromTheCheckpoint();

 private:
  std::string path(const char* name) { return dir_.filePath(QString::fromLatin1(name)).toStdString(); }
  train::PlaybackOptions replayOptions(const std::string& session, const std::string& kernel) {
    train::PlaybackOptions p;
    p.session = session;
    p.kernel = kernel;
    return p;
  }
  // A small profile of `model` into the test's file `name`, recording every `recordEvery`th iteration.
  train::ProfileOptions profileOptions(const std::string& model, int64_t iterations, int64_t recordEvery, const char* name) {
    train::ProfileOptions o;
    o.train = small(model, iterations);
    o.recordEvery = recordEvery;
    o.out = path(name);
    return o;
  }
  QTemporaryDir dir_;
};

// `peat` names the models and ops in its help without loading LibTorch: every model it names is
// one the zoo builds, and its op list is the dispatcher's.
void TestProfiler::commandLineListsMatchTheModule() {
  for (const std::string& name : cli::zooModelNames()) {
    models::ModelOptions options;
    options.vocabulary = 32;
    QVERIFY2(models::makeModel(name, options) != nullptr, name.c_str());
  }
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, models::makeModel("resnet50", {}));
  QCOMPARE(cli::recordableOpList(), ops::opList());
}

void TestProfiler::datasetsComeFromDebian() {
  const data::ImageSet test = data::loadFashionMnist("t10k");
  QCOMPARE(test.count, int64_t(10000));
  QCOMPARE(test.rows, int64_t(28));
  QCOMPARE(int(*std::max_element(test.labels.begin(), test.labels.end())), 9);
  const data::TextCorpus text = data::loadFortunes();
  QVERIFY(text.tokens.size() > 100000);
  QVERIFY(text.vocabulary.size() > 60 && text.vocabulary.size() < 256);
  const auto p1 = data::seededPermutation(1000, 9), p2 = data::seededPermutation(1000, 9);
  QVERIFY(p1 == p2);
  QVERIFY(p1 != data::seededPermutation(1000, 10));
}

void TestProfiler::missingDatasetNamesThePackage() {
  try {
    data::loadFashionMnist("train", "/nonexistent");
    QFAIL("a missing data set was accepted");
  } catch (const data::DatasetError& e) {
    QVERIFY(QString::fromLatin1(e.what()).contains(QStringLiteral("apt-get install dataset-fashion-mnist")));
  }
  QVERIFY_THROWS_EXCEPTION(data::DatasetError, data::loadFortunes("/nonexistent"));
}

void TestProfiler::linearRunsThreeGemmsThroughTheSlot() {
  ops::Dispatcher d;
  Log log;
  d.addObserver(&log);
  d.beginIteration(4);
  const at::Tensor x = at::randn({3, 5}).set_requires_grad(true);
  const at::Tensor w = at::randn({2, 5}).set_requires_grad(true), b = at::randn({2}).set_requires_grad(true);
  d.relu("act", d.linear("fc", x, w, b)).sum().backward();
  // linear, relu, then relu's backward and linear's two backward GEMMs
  QCOMPARE(log.ids.size(), std::size_t(5));
  QCOMPARE(log.ids[0].op, std::string("linear"));
  QCOMPARE(log.ids[1].op, std::string("relu"));
  QCOMPARE(log.ids[2].op, std::string("relu"));
  QCOMPARE(int(log.variants[2]), int(ops::Variant::GradInput));
  QCOMPARE(int(log.variants[3]), int(ops::Variant::GradInput));
  QCOMPARE(int(log.variants[4]), int(ops::Variant::GradWeight));
  for (std::size_t i = 0; i < log.ids.size(); ++i) {
    QCOMPARE(log.ids[i].iteration, int64_t(4));
    QCOMPARE(log.ids[i].callIndex, int64_t(i));
    QCOMPARE(log.ids[i].phase, i < 2 ? store::Phase::Forward : store::Phase::Backward);
  }
  d.beginIteration(5);
  const at::Tensor input = at::randn({3, 5});  // needs no gradient: only dW is computed, as in ATen
  d.linear("fc", input, w, b).sum().backward();
  QCOMPARE(log.ids.size(), std::size_t(7));
  QCOMPARE(log.ids.back().callIndex, int64_t(1));  // numbering restarts per iteration
  QCOMPARE(int(log.variants.back()), int(ops::Variant::GradWeight));
}

void TestProfiler::slotGradientsMatchPlainAutograd() {
  at::manual_seed(1);
  const at::Tensor x = at::randn({2, 3, 9, 9}).set_requires_grad(true);
  const at::Tensor w = at::randn({4, 3, 3, 3}).set_requires_grad(true), b = at::randn({4}).set_requires_grad(true);
  const at::Tensor lw = at::randn({5, 4 * 5 * 5}).set_requires_grad(true);  // 9x9, stride 2, pad 1: 5x5
  auto net = [&](bool slot) {
    ops::Dispatcher d;
    at::Tensor h = slot ? d.conv2d("c", x, w, b, 2, 1) : at::conv2d(x, w, b, {2, 2}, {1, 1});
    h = h.reshape({2, -1});
    h = slot ? d.linear("l", h, lw, at::Tensor()) : at::linear(h, lw);
    at::Tensor q = h.reshape({2, 5, 1});
    h = slot ? d.matmul("m", q, q.transpose(1, 2)) : at::matmul(q, q.transpose(1, 2));
    return torch::autograd::grad({h.square().sum()}, {x, w, b, lw});
  };
  const auto viaSlot = net(true), plain = net(false);
  for (std::size_t i = 0; i < plain.size(); ++i)
    QVERIFY2(at::allclose(viaSlot[i], plain[i], 1e-4, 1e-5), qPrintable(QString::number(i)));
}

// Every op-wise op's backward through the slot gives ATen's own gradients: the slot's golden
// backward calls are ATen's backward kernels, so they agree bit for bit (dBeta is a plain sum
// here, where ATen's fused kernel sums in its own order: equal within rounding).
void TestProfiler::opWiseGradientsMatchAten() {
  at::manual_seed(2);
  const at::Tensor x = at::randn({3, 4, 6}).set_requires_grad(true);
  const at::Tensor gamma = at::randn({6}).set_requires_grad(true), beta = at::randn({6}).set_requires_grad(true);
  const at::Tensor table = at::randn({10, 6}).set_requires_grad(true);
  const at::Tensor ids = at::randint(0, 10, {3, 4}, at::kLong);
  const at::Tensor target = at::randint(0, 6, {12}, at::kLong);
  auto net = [&](bool slot, ops::Dispatcher& d) {
    at::Tensor h = slot ? d.embedding("e", ids, table, 1) : at::embedding(table, ids, 1);
    h = h + x;
    h = slot ? d.layerNorm("ln", h, gamma, beta) : at::layer_norm(h, {6}, gamma, beta, 1e-5);
    h = slot ? d.gelu("g", h) : at::gelu(h);
    h = slot ? d.gelu("gt", h, true) : at::gelu(h, "tanh");
    h = slot ? d.silu("s", h) : at::silu(h);
    h = slot ? d.tanh("t", h) : at::tanh(h);
    h = slot ? d.sigmoid("sg", h) : at::sigmoid(h);
    h = slot ? d.softmax("sm", h, 1) : at::softmax(h, 1);
    h = slot ? d.logSoftmax("ls", h) : at::log_softmax(h, -1);
    at::manual_seed(7);  // the same mask both ways: the slot draws ATen's
    h = slot ? d.dropout("dr", h, 0.25) : at::dropout(h, 0.25, true);
    h = h.reshape({12, 6});
    const at::Tensor loss = slot ? d.crossEntropy("loss", h, target) : at::cross_entropy_loss(h, target);
    return torch::autograd::grad({loss}, {x, gamma, beta, table});
  };
  ops::Dispatcher plainSlot, d;
  Log log;
  d.addObserver(&log);
  const auto viaSlot = net(true, d), plain = net(false, plainSlot);
  for (std::size_t i = 0; i < plain.size(); ++i)
    QVERIFY2(at::allclose(viaSlot[i], plain[i], 1e-5, 1e-7), qPrintable(QString::number(i)));
  QVERIFY(at::equal(viaSlot[0], plain[0]));  // dX: ATen's backward kernels, the same bits
  QVERIFY(at::equal(viaSlot[3], plain[3]));  // the embedding's scatter-add
  std::map<std::string, int> backward;
  for (std::size_t i = 0; i < log.ids.size(); ++i)
    if (log.ids[i].phase == store::Phase::Backward) ++backward[log.ids[i].op + ":" + ops::variantName(log.variants[i])];
  for (const char* key : {"cross_entropy:grad_input", "dropout:grad_input", "log_softmax:grad_input", "softmax:grad_input",
                          "sigmoid:grad_input", "tanh:grad_input", "silu:grad_input", "gelu:grad_input",
                          "layernorm:grad_input", "layernorm:grad_weight", "layernorm:grad_bias", "embedding:grad_weight"})
    QVERIFY2(backward[key] >= 1, key);
  QCOMPARE(backward["gelu:grad_input"], 2);

  // Replaying each recorded call through golden gives its recorded output bit for bit.
  for (std::size_t i = 0; i < log.calls.size(); ++i) {
    const at::Tensor again = kernels::runGolden(log.calls[i]);
    QVERIFY2(at::equal(again, log.outputs[i]), qPrintable(QString::fromStdString(log.ids[i].op)));
  }
}

void TestProfiler::optimiserUpdatesAreSlotCalls() {
  at::manual_seed(3);
  const at::Tensor p = at::randn({4, 3}), g = at::randn({4, 3}), m = at::randn({4, 3}), v = at::rand({4, 3});
  ops::Dispatcher d;
  ops::OpCall adam{ops::OpKind::Adam, ops::Variant::Update, {p, g, m, v}, {{"step", 3}}};
  adam.setReal("lr", 1e-3);
  adam.setReal("beta1", 0.9);
  adam.setReal("beta2", 0.999);
  adam.setReal("eps", 1e-8);
  const at::Tensor out = d.update("w", adam);
  QCOMPARE(out.sizes().vec(), (std::vector<int64_t>{3, 4, 3}));
  // The textbook Adam step, in double: the golden update agrees to fp32 rounding.
  const at::Tensor gd = g.to(at::kDouble), m2 = 0.9 * m.to(at::kDouble) + 0.1 * gd;
  const at::Tensor v2 = 0.999 * v.to(at::kDouble) + 0.001 * gd * gd;
  const double c1 = 1 - std::pow(0.9, 3), c2 = 1 - std::pow(0.999, 3);
  const at::Tensor p2 = p.to(at::kDouble) - 1e-3 * (m2 / c1) / ((v2 / c2).sqrt() + 1e-8);
  QVERIFY(at::allclose(out[0].to(at::kDouble), p2, 1e-6, 1e-7));
  QVERIFY(at::allclose(out[1].to(at::kDouble), m2, 1e-6, 1e-7));
  QVERIFY(at::allclose(out[2].to(at::kDouble), v2, 1e-6, 1e-7));
  ops::OpCall sgd{ops::OpKind::Sgd, ops::Variant::Update, {p, g, m}, {}};
  sgd.setReal("lr", 0.1);
  sgd.setReal("momentum", 0.9);
  const at::Tensor s = d.update("w", sgd);
  QVERIFY(at::allclose(s[1], m * 0.9 + g));
  QVERIFY(at::allclose(s[0], p - 0.1 * (m * 0.9 + g)));
  QCOMPARE(sgd.real("lr"), 0.1);  // real parameters travel exactly
}

void TestProfiler::everyKthCallIsSubstituted() {
  ops::Dispatcher d;
  ops::SubstitutionPolicy p;
  p.candidate = kernels::makeKernel("bf16", 1);
  p.op = ops::OpKind::Linear;
  p.every = 3;
  d.setSubstitution(p);
  const at::Tensor x = at::randn({4, 8}), w = at::randn({8, 8});
  for (int i = 0; i < 9; ++i) {
    d.relu("r", x);  // another op: never counted
    d.linear("fc", x, w, at::Tensor());
  }
  const auto subs = d.takeSubstitutions();
  QCOMPARE(subs.size(), std::size_t(3));
  QCOMPARE(d.matchingCalls(), int64_t(9));
  QCOMPARE(subs[0].id.callIndex, int64_t(5));  // the 3rd linear is call 5 (relu, linear, ...)
  for (const ops::Substitution& s : subs) QVERIFY(s.error.mismatched > 0 && s.error.maxAbs > 0);
}

void TestProfiler::probabilityIsSeeded() {
  auto count = [](uint64_t seed) {
    ops::Dispatcher d;
    ops::SubstitutionPolicy p;
    p.candidate = kernels::makeKernel("bf16", 1);
    p.probability = 0.3;
    p.seed = seed;
    d.setSubstitution(p);
    const at::Tensor x = at::randn({2, 2});
    std::vector<int64_t> which;
    for (int i = 0; i < 200; ++i) d.relu("r", x);
    for (const auto& s : d.takeSubstitutions()) which.push_back(s.id.callIndex);
    return which;
  };
  const auto a = count(3), b = count(3), c = count(4);
  QVERIFY(a == b);
  QVERIFY(a != c);
  QVERIFY(a.size() > 30 && a.size() < 90);
}

void TestProfiler::everyModelTrains_data() {
  QTest::addColumn<QString>("model");
  for (const char* m : {"mlp", "lenet", "resnet", "vit", "chargpt"}) QTest::newRow(m) << m;
}

void TestProfiler::everyModelTrains() {
  QFETCH(QString, model);
  train::ProfileOptions o;
  o.train = small(model.toStdString(), 30);
  o.train.learningRate = model == QLatin1String("chargpt") ? 1e-2 : 0.05;
  o.recordEvery = 10;
  o.out = path("m.h5");
  o.mode = store::WriteMode::Overwrite;
  const train::ProfileResult r = train::runProfile(o, {});
  QCOMPARE(r.iterations, int64_t(30));
  QCOMPARE(r.recordedIterations, int64_t(3));
  QVERIFY(r.recordedCalls > 0);
  QVERIFY(r.recordedBytes < r.fullDumpBytes);
  QVERIFY2(r.storedBytes < r.recordedBytes, "tensors shared by calls are stored once");
  const auto curve = store::SessionReader(o.out).table("golden", "curve");
  const std::vector<double> loss = column(curve, "loss");
  QCOMPARE(loss.size(), std::size_t(30));
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) {
    first += loss[std::size_t(i)];
    last += loss[loss.size() - 1 - std::size_t(i)];
  }
  QVERIFY2(last < first, qPrintable(QStringLiteral("loss did not fall: %1 -> %2").arg(first / 5).arg(last / 5)));
}

void TestProfiler::goldenTrainingIsDeterministic() {
  train::ProfileOptions o;
  o.train = small("lenet", 12);
  o.recordEvery = 5;
  o.mode = store::WriteMode::Overwrite;
  o.out = path("a.h5");
  train::runProfile(o, {});
  o.out = path("b.h5");
  train::runProfile(o, {});
  store::SessionReader a(path("a.h5")), b(path("b.h5"));
  QVERIFY(column(a.table("golden", "curve"), "loss") == column(b.table("golden", "curve"), "loss"));
  const store::SessionSummary s = a.summary();
  int compared = 0;
  for (const store::IterationInfo& it : s.runs[0].iterations)
    for (const store::CallInfo& c : it.calls)
      for (const store::TensorInfo& t : c.tensors) {
        QVERIFY(a.readTensor("golden", c.path, t.name).bytes == b.readTensor("golden", c.path, t.name).bytes);
        ++compared;
      }
  QVERIFY(compared > 100);
  const auto ca = a.checkpoint("golden", 12), cb = b.checkpoint("golden", 12);
  for (const auto& [name, t] : ca.parameters) QVERIFY(t.bytes == cb.parameters.at(name).bytes);
}

void TestProfiler::profileThenPlayback() {
  train::ProfileOptions o = profileOptions("lenet", 10, 5, "p.h5");
  const train::ProfileResult pr = train::runProfile(o, {});
  train::PlaybackOptions p = replayOptions(o.out, "golden");
  const train::PlaybackResult golden = train::runPlayback(p, {});
  QCOMPARE(golden.replayed, pr.recordedCalls);
  QCOMPARE(golden.worst.mismatched, uint64_t(0));  // golden replays bit for bit
  p.kernel = "bf16";
  const train::PlaybackResult bf = train::runPlayback(p, {});
  QCOMPARE(bf.run, std::string("playback-bf16"));
  QVERIFY(bf.worst.maxAbs > 0 && bf.worst.mismatched > 0);
  store::SessionReader r(o.out);
  const auto errors = r.table("playback-bf16", "call_errors");
  QCOMPARE(column(errors, "max_abs").size(), std::size_t(pr.recordedCalls));
  QVERIFY(!column(errors, "max_ulp").empty());
  QCOMPARE(r.summary().runs.size(), std::size_t(3));  // golden, playback-golden, playback-bf16
}

void TestProfiler::playbackRefusesAnotherModel() {
  train::ProfileOptions o = profileOptions("mlp", 2, 1, "mlp.h5");
  train::runProfile(o, {});
  train::PlaybackOptions p = replayOptions(o.out, "bf16");
  p.model = "lenet";
  try {
    train::runPlayback(p, {});
    QFAIL("playback of another model's session was accepted");
  } catch (const std::invalid_argument& e) {
    QVERIFY(QString::fromLatin1(e.what()).contains(QStringLiteral("recorded from model 'mlp', not 'lenet'")));
  }
}

void TestProfiler::playbackResumesFromACheckpoint() {
  train::ProfileOptions o = profileOptions("lenet", 6, 3, "r.h5");
  train::runProfile(o, {});
  train::PlaybackOptions p = replayOptions(o.out, "fp8-e4m3");
  p.resumeIterations = 4;
  const train::PlaybackResult r = train::runPlayback(p, {});
  QCOMPARE(r.resumedFrom, int64_t(0));
  QCOMPARE(r.resumedIterations, int64_t(4));
  QVERIFY(r.goldenLoss != r.candidateLoss);
  store::SessionReader s(o.out);
  const auto g = column(s.table(r.run, "resume_golden_curve"), "loss");
  QCOMPARE(g.size(), std::size_t(4));
  // Resuming with golden kernels from checkpoint 0 retraces the recorded run exactly.
  const auto recorded = column(s.table("golden", "curve"), "loss");
  for (std::size_t i = 0; i < g.size(); ++i) QCOMPARE(g[i], recorded[i]);
}

void TestProfiler::runtimeFiStoresBothCurves() {
  train::RuntimeFiOptions o;
  o.train = small("lenet", 10);
  o.kernel = "fp16acc";
  o.every = 10;
  o.out = path("fi.h5");
  const train::RuntimeFiResult r = train::runRuntimeFi(o, {});
  // LeNet has 3 linear layers: 9 linear GEMMs per step, 90 in 10 steps, every 10th substituted.
  QCOMPARE(r.substitutions, int64_t(9));
  store::SessionReader s(o.out);
  const auto golden = column(s.table("golden", "curve"), "loss");
  const auto fi = column(s.table("runtime-fi-fp16acc", "curve"), "loss");
  QCOMPARE(golden.size(), std::size_t(10));
  QCOMPARE(fi.size(), std::size_t(10));
  QCOMPARE(golden[0], fi[0]);  // the first substitution (call 10) comes in the second step
  QVERIFY(golden.back() != fi.back());
  QCOMPARE(column(s.table("runtime-fi-fp16acc", "call_errors"), "max_abs").size(), std::size_t(9));
}

void TestProfiler::cancelLeavesAReadableSession() {
  std::atomic<bool> stop{false};
  train::Progress progress{[&](int64_t done, int64_t, const std::string&) {
                             if (done == 4) stop = true;
                           },
                           &stop, {}};
  train::ProfileOptions o = profileOptions("lenet", 50, 2, "c.h5");
  const train::ProfileResult r = train::runProfile(o, progress);
  QVERIFY(r.cancelled);
  QCOMPARE(r.iterations, int64_t(4));
  const store::SessionSummary s = store::SessionReader(o.out).summary();
  QCOMPARE(s.runs[0].status, std::string("cancelled"));
  QCOMPARE(s.runs[0].completeIterations(), int64_t(2));  // iterations 0 and 2
  QCOMPARE(s.runs[0].checkpoints, (std::vector<int64_t>{0, 4}));
}

void TestProfiler::finetuneStartsFromTheCheckpoint() {
  train::ProfileOptions o = profileOptions("lenet", 5, 0, "pre.h5");
  train::runProfile(o, {});
  train::TrainOptions t = small("lenet", 1);
  t.init = o.out;
  t.seed = 99;  // another seed: the weights must come from the file, not the initialiser
  ops::Dispatcher d;
  train::Trainer trainer(t, d);
  const auto cp = store::SessionReader(o.out).checkpoint("golden", 5);
  for (const auto& [name, value] : trainer.parameterState())
    QVERIFY2(train::fromTorch(value).bytes == cp.parameters.at(name).bytes, name.c_str());
  QVERIFY(QString::fromStdString(trainer.initDescription()).endsWith(QStringLiteral(":golden:5")));
  t.model = "mlp";
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, train::Trainer(t, d));
}

QTEST_GUILESS_MAIN(TestProfiler)
#include "tst_profiler.moc"
