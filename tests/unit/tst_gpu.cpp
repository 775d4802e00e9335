// SPDX-License-Identifier: MIT
// gpu/: module discovery and device names, and the CPU reference's definitions against the core
// they mirror: its histograms are the analyzer's, its fp16 rounding is core/fp's. The kernels
// themselves, on every device, are tested by tests/gpu/gpu_tests.cpp (no Qt, so it also runs on a
// GPU machine).
#include <QtTest>

#include <cmath>
#include <limits>
#include <random>

#include "core/analyzer/report.h"
#include "core/fp/format.h"
#include "gpu/backend.h"
#include "gpu/cpu/reference.h"
#include "gpu/device/math.h"
#include "base/sys.h"

using namespace peat::gpu;

class TestGpu : public QObject {
  Q_OBJECT
 private slots:
  void referenceHistogramsAreTheAnalyzers();
  void halfRoundingIsCoreFp16();
  void deviceSpecs();
  void probeListsAllBackends();
  void modulesWereBuilt();
  void unknownBackendIsRefused();
};

// Same definitions: the histograms the GPU kernels must reproduce are the analyzer's.
void TestGpu::referenceHistogramsAreTheAnalyzers() {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0, 2);
  const std::size_t n = 200003;
  std::vector<float> g(n), c(n);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t i = 0; i < n; ++i) {
    g[i] = normal(rng);
    switch (i % 6) {
      case 0: c[i] = g[i]; break;
      case 1: c[i] = peat::fp::roundTo(peat::fp::kFp16, g[i]); break;
      case 2: c[i] = peat::fp::floatOf(peat::fp::bitsOf(g[i]) ^ (1u << (rng() % 32))); break;
      case 3: c[i] = -g[i]; break;
      default: c[i] = g[i] + normal(rng) * 1e-3f; break;
    }
  }
  const float specials[][2] = {{0.f, -0.f}, {nan, 1.f}, {inf, 1.f}, {inf, -inf}, {1e-45f, -1e-45f}, {3e38f, -3e38f}};
  for (std::size_t k = 0; k < std::size(specials); ++k) {
    g[k] = specials[k][0];
    c[k] = specials[k][1];
  }
  const ErrorHistograms ref = reference::histograms(g.data(), c.data(), n);
  const peat::analyzer::Report report = peat::analyzer::analyze(g.data(), c.data(), {n});
  QCOMPARE(ref.mismatched, report.mismatched);
  for (int b = 0; b < 32; ++b) QCOMPARE(ref.bits[std::size_t(b)], report.bitMismatch[std::size_t(b)]);
  for (int b = 0; b < 33; ++b) QCOMPARE(ref.log2Ulp[std::size_t(b)], report.log2Ulp[std::size_t(b)]);
  QCOMPARE(std::size_t(ErrorHistograms::kAbsBins), report.log2Abs.size());
  QCOMPARE(ErrorHistograms::kLog2AbsMin, peat::analyzer::Report::kLog2AbsMin);
  for (int b = 0; b < ErrorHistograms::kAbsBins; ++b) QCOMPARE(ref.log2Abs[std::size_t(b)], report.log2Abs[std::size_t(b)]);
}

// The kernels' fp16 rounding (integer code, shared with the devices) is core/fp's, on every
// binade from overflow to below the smallest subnormal, ties included.
void TestGpu::halfRoundingIsCoreFp16() {
  std::mt19937 rng(19);
  uint64_t checked = 0;
  for (int e = -30; e <= 17; ++e)
    for (int i = 0; i < 20000; ++i) {
      uint32_t mant = rng() & 0x7fffffu;
      if (i % 4 == 0) mant = (mant & ~0x1fffu) | 0x1000u;  // a tie for normal fp16 results
      const float x = std::ldexp(1.0f + float(mant) / float(1 << 23), e) * (i % 2 ? -1.f : 1.f);
      const float want = peat::fp::roundTo(peat::fp::kFp16, x);
      const float got = math::roundToHalf(x);
      if (peat::fp::bitsOf(got) != peat::fp::bitsOf(want))
        QFAIL(qPrintable(QStringLiteral("x = %1: %2, core says %3").arg(double(x), 0, 'g', 9).arg(double(got), 0, 'g', 9).arg(double(want), 0, 'g', 9)));
      ++checked;
    }
  for (float x : {65504.f, 65519.99f, 65520.f, -70000.f, 0.f, -0.f, 1e-45f, 5.96e-8f, 2.98e-8f, 2.99e-8f,
                  std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    const float want = peat::fp::roundTo(peat::fp::kFp16, x), got = math::roundToHalf(x);
    QVERIFY2(peat::fp::bitsOf(got) == peat::fp::bitsOf(want) || (std::isnan(got) && std::isnan(want)),
             qPrintable(QString::number(double(x), 'g', 9)));
  }
  QVERIFY(checked > 900000);
}

void TestGpu::deviceSpecs() {
  OpenedDevice cpu = openDevice("cpu");
  QCOMPARE(cpu.device->info().backend, std::string("cpu"));
  QVERIFY(openDevice("cpu:0").device != nullptr);
  QVERIFY_THROWS_EXCEPTION(std::out_of_range, openDevice("cpu:1"));
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, openDevice("cpu:x"));
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, openDevice("cpu:"));
  QVERIFY_THROWS_EXCEPTION(std::runtime_error, openDevice("tpu:0"));
  QCOMPARE(gemmFromName("splitk"), GemmKind::SplitK);
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, gemmFromName("fast"));
  for (GemmKind k : gemmKinds()) QCOMPARE(gemmFromName(gemmName(k)), k);
}

void TestGpu::probeListsAllBackends() {
  const std::vector<BackendProbe> probes = probeBackends();
  QCOMPARE(probes.size(), std::size_t(3));
  QCOMPARE(probes[0].name, std::string("cpu"));
  QVERIFY(probes[0].usable);
  QCOMPARE(probes[0].devices.size(), std::size_t(1));
  QVERIFY(probes[0].devices[0].totalMemory > 0);
  for (std::size_t i = 1; i < probes.size(); ++i) {
    QVERIFY2(!probes[i].status.empty(), probes[i].name.c_str());
    QCOMPARE(probes[i].usable, !probes[i].devices.empty());
  }
}

void TestGpu::modulesWereBuilt() {
  // The build compiles each device module whenever its compiler was found; this proves it did.
#ifdef PEAT_TEST_EXPECT_CUDA
  QVERIFY2(peat::sys::fileExists(peat::sys::modulePath("peat_gpu_cuda")), "nvcc was found but no CUDA module");
#endif
#ifdef PEAT_TEST_EXPECT_HIP
  QVERIFY2(peat::sys::fileExists(peat::sys::modulePath("peat_gpu_hip")), "hipcc was found but no HIP module");
#endif
  QVERIFY(peat::sys::fileExists(peat::sys::modulePath("peat_torch")));
}

void TestGpu::unknownBackendIsRefused() {
  QVERIFY_THROWS_EXCEPTION(std::runtime_error, openBackend("opencl"));
  QVERIFY(openBackend("cpu") != nullptr);
}

QTEST_GUILESS_MAIN(TestGpu)
#include "tst_gpu.moc"
