// SPDX-License-Identifier: MIT
// The kernel registry: every candidate against golden, with the error each is known to make, the
// fault models against their injection logs, and user plugins through the child-process probe.
#include <ATen/ATen.h>  // before Qt: LibTorch uses `slots` as a name
#include <QtTest>

#include <cmath>

#include "core/fp/format.h"
#include "core/plugin/plugin_probe.h"
#include "core/torch/kernels/kernel.h"

using namespace peat;
using kernels::makeKernel;
using ops::OpCall;
using ops::OpKind;
using ops::Variant;

namespace {
OpCall linearCall(int64_t m, int64_t k, int64_t n, uint64_t seed) {
  at::manual_seed(int64_t(seed));
  return {OpKind::Linear, Variant::Forward, {at::randn({m, k}), at::randn({n, k}), at::randn({n})}, {}};
}
at::Tensor run(const std::string& spec, const OpCall& c) { return makeKernel(spec, 7)->run(c, {"test", 0, 0}); }
double maxAbs(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }
// |x| |w|^T: the scale that bounds a GEMM's rounding error.
at::Tensor absProduct(const OpCall& c) { return at::mm(c.inputs[0].abs(), c.inputs[1].abs().t()); }
}  // namespace

class TestKernels : public QObject {
  Q_OBJECT
 private slots:
  void decompositionMatchesGolden_data();
  void decompositionMatchesGolden();
  void precisionCandidatesAreBounded_data();
  void precisionCandidatesAreBounded();
  void summationOrderIsTinyButNotZero_data();
  void summationOrderIsTinyButNotZero();
  void tileEdgeBugHitsOnlyTileEdges();
  void missingKTileAndZeroedTail();
  void staleRaceDiffersBetweenReplays();
  void bitFlipMatchesItsLog();
  void stuckAtForcesOneBitOverARegion();
  void weightFaultIsTransient();
  void nanAndZeroFaults();
  void unknownNamesListValidOnes();
  void examplePluginRunsAfterProbe();
  void brokenPluginsAreRefused_data();
  void brokenPluginsAreRefused();
  void wrongPluginLoadsWithItsProbeError();
  void lateFailuresAreOutcomes_data();
  void lateFailuresAreOutcomes();
  void constructorCrashAfterProbeIsRefused();
};

void TestKernels::decompositionMatchesGolden_data() {
  QTest::addColumn<int>("kind");
  QTest::addColumn<int>("variant");
  for (int k : {int(OpKind::Linear), int(OpKind::Conv2d), int(OpKind::Matmul)})
    for (int v : {0, 1, 2}) QTest::newRow(qPrintable(QStringLiteral("%1/%2").arg(k).arg(v))) << k << v;
}

void TestKernels::decompositionMatchesGolden() {
  // runThroughGemm with a plain mm must reproduce every GEMM variant: candidates then differ only by their engine.
  QFETCH(int, kind);
  QFETCH(int, variant);
  at::manual_seed(3);
  OpCall c{OpKind(kind), Variant(variant), {}, {}};
  if (c.kind == OpKind::Linear) {
    const at::Tensor x = at::randn({4, 5, 12}), w = at::randn({7, 12}), dy = at::randn({4, 5, 7});
    c.inputs = c.variant == Variant::Forward ? std::vector<at::Tensor>{x, w, at::randn({7})}
               : c.variant == Variant::GradInput ? std::vector<at::Tensor>{dy, w}
                                                 : std::vector<at::Tensor>{dy, x};
  } else if (c.kind == OpKind::Conv2d) {
    const at::Tensor x = at::randn({3, 2, 11, 9}), w = at::randn({4, 2, 3, 3});
    c.params = {{"stride", 2}, {"padding", 1}, {"in_h", 11}, {"in_w", 9}, {"k_h", 3}, {"k_w", 3}};
    const at::Tensor dy = at::randn({3, 4, 6, 5});
    c.inputs = c.variant == Variant::Forward ? std::vector<at::Tensor>{x, w, at::randn({4})}
               : c.variant == Variant::GradInput ? std::vector<at::Tensor>{dy, w}
                                                 : std::vector<at::Tensor>{dy, x};
  } else {
    const at::Tensor a = at::randn({2, 3, 6, 5}), b = at::randn({2, 3, 5, 4}), dc = at::randn({2, 3, 6, 4});
    c.inputs = c.variant == Variant::Forward ? std::vector<at::Tensor>{a, b}
               : c.variant == Variant::GradInput ? std::vector<at::Tensor>{dc, b}
                                                 : std::vector<at::Tensor>{a, dc};
  }
  const at::Tensor golden = kernels::runGolden(c);
  const at::Tensor viaGemm = kernels::runThroughGemm(c, [](const at::Tensor& a, const at::Tensor& b) { return at::mm(a, b); });
  QCOMPARE(viaGemm.sizes().vec(), golden.sizes().vec());
  QVERIFY2(maxAbs(viaGemm, golden) < 1e-4, qPrintable(QString::number(maxAbs(viaGemm, golden))));
}

void TestKernels::precisionCandidatesAreBounded_data() {
  QTest::addColumn<QString>("kernel");
  QTest::addColumn<double>("unitRoundoff");
  QTest::newRow("bf16") << "bf16" << std::ldexp(1.0, -8);
  QTest::newRow("fp16") << "fp16" << std::ldexp(1.0, -11);
  QTest::newRow("tf32") << "tf32" << std::ldexp(1.0, -11);
  QTest::newRow("fp8-e4m3") << "fp8-e4m3" << std::ldexp(1.0, -4);
  QTest::newRow("fp8-e5m2") << "fp8-e5m2" << std::ldexp(1.0, -3);
  QTest::newRow("fp16acc") << "fp16acc" << std::ldexp(1.0, -11);
}

void TestKernels::precisionCandidatesAreBounded() {
  // Rounding both operands costs at most 2u + u^2 of |x||w| per product; fp16 accumulation adds
  // about K u more. Each bound holds element-wise, and the error is not zero.
  QFETCH(QString, kernel);
  QFETCH(double, unitRoundoff);
  const OpCall c = linearCall(16, 64, 24, 1);
  const at::Tensor golden = kernels::runGolden(c), cand = run(kernel.toStdString(), c);
  const double u = unitRoundoff;
  const double factor = kernel == QLatin1String("fp16acc") ? (2 * u + 64 * u) * 1.1 : (2 * u + u * u) * 1.01;
  const at::Tensor bound = absProduct(c) * factor + 1e-6;
  QVERIFY((golden - cand).abs().le(bound).all().item<bool>());
  QVERIFY(maxAbs(golden, cand) > 0);
}

void TestKernels::summationOrderIsTinyButNotZero_data() {
  QTest::addColumn<QString>("kernel");
  for (const char* k : {"splitk:parts=4", "pairwise", "reversed"}) QTest::newRow(k) << k;
}

void TestKernels::summationOrderIsTinyButNotZero() {
  QFETCH(QString, kernel);
  const OpCall c = linearCall(32, 512, 32, 2);
  const at::Tensor golden = kernels::runGolden(c), cand = run(kernel.toStdString(), c);
  const at::Tensor bound = absProduct(c) * (512 * std::ldexp(1.0, -24) * 2) + 1e-6;  // ~K u |x||w|
  QVERIFY((golden - cand).abs().le(bound).all().item<bool>());
  QVERIFY2(golden.ne(cand).sum().item<int64_t>() > 0, "another order must change some bits");
}

void TestKernels::tileEdgeBugHitsOnlyTileEdges() {
  const OpCall c = linearCall(8, 32, 48, 3);
  const at::Tensor diff = (kernels::runGolden(c) - run("tile-edge:tile=16", c)).abs().gt(1e-4);
  for (int64_t j = 0; j < 48; ++j) {
    const bool wrong = diff.select(1, j).any().item<bool>();
    QCOMPARE(wrong, j % 16 == 15);
  }
}

void TestKernels::missingKTileAndZeroedTail() {
  const OpCall c = linearCall(8, 40, 16, 4);  // K = 40: the last tile holds 8
  const at::Tensor truncated = at::linear(c.inputs[0].slice(1, 0, 32), c.inputs[1].slice(1, 0, 32), c.inputs[2]);
  QVERIFY(maxAbs(run("missing-ktile:tile=16", c), truncated) < 1e-4);
  const at::Tensor tail = run("zeroed-tail:fraction=0.25", c);
  const at::Tensor golden = kernels::runGolden(c);
  QCOMPARE(tail.slice(0, 6, 8).abs().max().item<float>(), 0.0f);  // the last quarter was never written
  QVERIFY(tail.slice(0, 0, 6).equal(golden.slice(0, 0, 6)));
}

void TestKernels::staleRaceDiffersBetweenReplays() {
  const OpCall c = linearCall(32, 64, 32, 5);
  auto k = makeKernel("stale-race", 7);
  const at::Tensor first = k->run(c, {});
  QVERIFY(maxAbs(first, kernels::runGolden(c)) > 1e-3);
  // Two replays may hit the same tiles by chance (about 3% here); eight all alike would mean no race.
  bool differs = false;
  for (int i = 0; i < 7 && !differs; ++i) differs = !first.equal(k->run(c, {}));
  QVERIFY2(differs, "a race differs from call to call");
}

void TestKernels::bitFlipMatchesItsLog() {
  const OpCall c = linearCall(8, 16, 8, 6);
  auto k = makeKernel("bitflip:bit=27,count=3", 11);
  const at::Tensor golden = kernels::runGolden(c), faulty = k->run(c, {"call-x", 0, 0});
  const auto log = k->takeInjections();
  QCOMPARE(log.size(), std::size_t(3));
  at::Tensor expected = golden.clone();
  float* e = expected.data_ptr<float>();
  for (const kernels::Injection& i : log) {
    QCOMPARE(i.bit, 27);
    QCOMPARE(i.target, std::string("output"));
    QCOMPARE(i.call, std::string("call-x"));
    QCOMPARE(fp::bitsOf(i.newValue), fp::bitsOf(i.oldValue) ^ (1u << 27));
    e[i.index] = fp::floatOf(fp::bitsOf(e[i.index]) ^ (1u << 27));
  }
  QVERIFY(faulty.equal(expected));  // exactly the logged flips, nothing else
  QVERIFY(k->takeInjections().empty());
}

void TestKernels::stuckAtForcesOneBitOverARegion() {
  const OpCall c = linearCall(32, 16, 32, 7);
  auto k = makeKernel("stuckat1:bit=30,region=0.25", 3);
  const at::Tensor golden = kernels::runGolden(c), faulty = k->run(c, {});
  const auto log = k->takeInjections();
  QVERIFY(!log.empty());
  QVERIFY(log.size() <= 256);  // a quarter of 1024 elements
  const at::Tensor changed = golden.ne(faulty).view({-1});
  QCOMPARE(changed.sum().item<int64_t>(), int64_t(log.size()));
  for (const kernels::Injection& i : log) QVERIFY(fp::bitsOf(i.newValue) & (1u << 30));
  QVERIFY(int64_t(log.back().index - log.front().index) < 256);  // contiguous region
}

void TestKernels::weightFaultIsTransient() {
  const OpCall c = linearCall(8, 16, 8, 8);
  const at::Tensor weightBefore = c.inputs[1].clone();
  auto k = makeKernel("bitflip:bit=30,target=weight", 5);
  const at::Tensor faulty = k->run(c, {});
  QVERIFY(c.inputs[1].equal(weightBefore));  // the parameter itself is untouched
  QVERIFY(!faulty.equal(kernels::runGolden(c)));
  QCOMPARE(k->takeInjections().front().target, std::string("weight"));
}

void TestKernels::nanAndZeroFaults() {
  const OpCall c = linearCall(8, 16, 8, 9);
  QCOMPARE(run("nan:count=2", c).isnan().sum().item<int64_t>(), int64_t(2));
  const at::Tensor z = run("zero", c);
  QCOMPARE(z.ne(kernels::runGolden(c)).sum().item<int64_t>(), int64_t(1));
  QVERIFY(run("inf", c).isinf().any().item<bool>());
}

void TestKernels::unknownNamesListValidOnes() {
  try {
    makeKernel("fp17", 1);
    QFAIL("unknown kernel accepted");
  } catch (const kernels::KernelError& e) {
    QVERIFY(QString::fromLatin1(e.what()).contains(QStringLiteral("valid kernels: golden, fp16, bf16")));
  }
  QVERIFY_THROWS_EXCEPTION(kernels::KernelError, makeKernel("splitk:parts=zero", 1));
  QVERIFY_THROWS_EXCEPTION(kernels::KernelError, makeKernel("splitk:bogus=1", 1));
  QVERIFY_THROWS_EXCEPTION(kernels::KernelError, makeKernel("bitflip:target=elsewhere", 1));
  QVERIFY_THROWS_EXCEPTION(kernels::KernelError, makeKernel("plugin", 1));
}

void TestKernels::examplePluginRunsAfterProbe() {
  auto k = makeKernel("plugin:path=" PEAT_EXAMPLE_PLUGIN, 1);
  QCOMPARE(QString::fromStdString(k->name()), QStringLiteral("plugin:example-blocked-gemm"));
  const OpCall c = linearCall(16, 100, 12, 10);
  const at::Tensor golden = kernels::runGolden(c), cand = k->run(c, {});
  const at::Tensor bound = absProduct(c) * (100 * std::ldexp(1.0, -24) * 2) + 1e-6;
  QVERIFY((golden - cand).abs().le(bound).all().item<bool>());
}

void TestKernels::brokenPluginsAreRefused_data() {
  QTest::addColumn<QString>("path");
  QTest::addColumn<QString>("reason");
  QTest::newRow("crash") << PEAT_BAD_PLUGIN_DIR "/libpeat_bad_crash.so" << "crashed during its probe (signal 11";
  QTest::newRow("abi") << PEAT_BAD_PLUGIN_DIR "/libpeat_bad_abi.so" << "declares ABI version 99";
  QTest::newRow("missing symbol") << PEAT_BAD_PLUGIN_DIR "/libpeat_bad_missing.so" << "lacks the entry point 'peat_kernel_gemm_v1'";
  QTest::newRow("no file") << "/nonexistent/libx.so" << "does not exist";
  QTest::newRow("not a library") << PEAT_SOURCE_DIR "/README.md" << "cannot load";
}

void TestKernels::brokenPluginsAreRefused() {
  QFETCH(QString, path);
  QFETCH(QString, reason);
  try {
    makeKernel("plugin:path=" + path.toStdString(), 1);
    QFAIL("a broken plugin was accepted");
  } catch (const kernels::KernelError& e) {
    QVERIFY2(QString::fromLatin1(e.what()).contains(reason), e.what());
  }
}

// A wrong kernel is what the tool is for: the probe reports how wrong, the plugin still loads, and
// its calls differ from golden by what it computes (every element 42).
void TestKernels::wrongPluginLoadsWithItsProbeError() {
  const plugin::PluginInfo info = plugin::probePlugin(PEAT_BAD_PLUGIN_DIR "/libpeat_bad_wrong.so");
  QCOMPARE(info.probeMismatches, plugin::kProbeElements);
  QCOMPARE(info.probeFirstMismatch, 0);
  QVERIFY(info.probeMaxAbsError > 20);
  const std::string warning = plugin::probeWarning(info);
  QVERIFY2(warning.find("42 of 42 elements wrong") != std::string::npos, warning.c_str());
  auto k = makeKernel("plugin:path=" PEAT_BAD_PLUGIN_DIR "/libpeat_bad_wrong.so", 1);
  const OpCall c = linearCall(4, 8, 3, 10);
  const at::Tensor out = k->run(c, {});
  QVERIFY(out.eq(42.0f + c.inputs[2].reshape({1, -1})).all().item<bool>());
  const plugin::PluginInfo good = plugin::probePlugin(PEAT_EXAMPLE_PLUGIN);
  QCOMPARE(good.probeMismatches, 0u);
  QVERIFY(plugin::probeWarning(good).empty());
}

// Plugins that pass the probe and fail a later call (tests/plugins/late_plugins.c: every GEMM with
// 10 output columns) in the kernel host: that call throws KernelCallFailed with its outcome, the
// calls before and after it (in a new host) are right.
void TestKernels::lateFailuresAreOutcomes_data() {
  QTest::addColumn<QString>("plugin");
  QTest::addColumn<QString>("outcome");
  QTest::addColumn<QString>("message");
  QTest::newRow("segv") << "segv" << "crash:SIGSEGV" << "crashed in the kernel host (signal 11, Segmentation fault)";
  QTest::newRow("abort") << "abort" << "crash:SIGABRT" << "crashed in the kernel host (signal 6, Aborted)";
  QTest::newRow("hang") << "hang" << "hang" << "did not return within 0.5 s (PEAT_KERNEL_TIMEOUT)";
  QTest::newRow("overflow") << "overflow" << "out_of_bounds"
                            << "wrote past the end of output 2 [4x10] (160 bytes) at byte 192 of it (a guard page)";
  QTest::newRow("tail") << "tail" << "out_of_bounds" << "wrote past the end of output 2 [4x10] (160 bytes) at byte 160 of it";
}

void TestKernels::lateFailuresAreOutcomes() {
  QFETCH(QString, plugin);
  QFETCH(QString, outcome);
  QFETCH(QString, message);
  qputenv("PEAT_KERNEL_TIMEOUT", "0.5");
  auto k = makeKernel("plugin:path=" PEAT_BAD_PLUGIN_DIR "/libpeat_late_" + plugin.toStdString() + ".so", 1);
  qunsetenv("PEAT_KERNEL_TIMEOUT");
  const OpCall good = linearCall(4, 8, 12, 3), bad = linearCall(4, 8, 10, 4);
  auto check = [&] {
    const at::Tensor golden = kernels::runGolden(good), cand = k->run(good, {});
    QVERIFY((golden - cand).abs().le(absProduct(good) * 1e-5 + 1e-6).all().item<bool>());
  };
  check();
  try {
    k->run(bad, {});
    QFAIL("the failing call returned");
  } catch (const kernels::KernelCallFailed& e) {
    QCOMPARE(QString::fromStdString(e.outcome()), outcome);
    QVERIFY2(QString::fromLatin1(e.what()).contains(message), e.what());
  }
  check();  // the next call, in a new host where the last one died
}

void TestKernels::constructorCrashAfterProbeIsRefused() {
  try {
    makeKernel("plugin:path=" PEAT_BAD_PLUGIN_DIR "/libpeat_late_ctor.so", 1);
    QFAIL("a plugin whose constructor crashes was accepted");
  } catch (const kernels::KernelError& e) {
    QVERIFY2(QString::fromLatin1(e.what()).contains(QLatin1String(
                 "passed its probe but crashed while loading in the kernel host (signal 11, Segmentation fault)")),
             e.what());
  }
}

QTEST_GUILESS_MAIN(TestKernels)
#include "tst_kernels.moc"
