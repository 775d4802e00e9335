// SPDX-License-Identifier: MIT
// gpu/: the CPU reference backend, module discovery, and each device backend against the CPU,
// bit for bit. Device rows skip when the machine has no such device.
#include <QtTest>

#include <random>

#include "core/fp/format.h"
#include "gpu/backend.h"
#include "gpu/runtime_module.h"

using namespace peat::gpu;

class TestGpu : public QObject {
  Q_OBJECT
 private slots:
  void cpuFlipsBits();
  void cpuDuplicateFlipsCompose();
  void cpuRejectsOutOfRange();
  void probeListsAllBackends();
  void modulesWereBuilt();
  void unknownBackendIsRefused();
  void deviceMatchesCpu_data();
  void deviceMatchesCpu();
};

void TestGpu::cpuFlipsBits() {
  auto cpu = makeCpuBackend();
  std::vector<uint32_t> w{peat::fp::bitsOf(1.0f), 0, 0xffffffffu};
  cpu->injectBitFlips(0, w.data(), w.size(), {{0, 1u << 31}, {1, 0x5u}, {2, 0xffffffffu}});
  QCOMPARE(peat::fp::floatOf(w[0]), -1.0f);
  QCOMPARE(w[1], 0x5u);
  QCOMPARE(w[2], 0u);
}

void TestGpu::cpuDuplicateFlipsCompose() {
  auto cpu = makeCpuBackend();
  std::vector<uint32_t> w(4, 0);
  cpu->injectBitFlips(0, w.data(), w.size(), {{3, 0x1u}, {3, 0x1u}, {3, 0x2u}});
  QCOMPARE(w[3], 0x2u);  // the two flips of bit 0 cancel
}

void TestGpu::cpuRejectsOutOfRange() {
  auto cpu = makeCpuBackend();
  std::vector<uint32_t> w(4, 7);
  QVERIFY_THROWS_EXCEPTION(std::out_of_range, cpu->injectBitFlips(0, w.data(), w.size(), {{0, 1}, {4, 1}}));
  QCOMPARE(w[0], 7u);  // validated before anything is written
  QVERIFY_THROWS_EXCEPTION(std::out_of_range, cpu->injectBitFlips(1, w.data(), w.size(), {}));
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

void TestGpu::deviceMatchesCpu_data() {
  QTest::addColumn<QString>("backend");
  QTest::newRow("cuda") << "cuda";
  QTest::newRow("hip") << "hip";
}

void TestGpu::deviceMatchesCpu() {
  QFETCH(QString, backend);
  std::unique_ptr<Backend> device;
  try {
    device = openBackend(backend.toStdString());
  } catch (const std::exception& e) {
    QSKIP(qPrintable(QStringLiteral("no %1 device here: %2").arg(backend, QString::fromStdString(e.what()))));
  }
  std::mt19937_64 rng(7);
  std::vector<uint32_t> words(1 << 20);
  for (uint32_t& w : words) w = uint32_t(rng());
  std::vector<BitFlip> flips(100000);
  for (BitFlip& f : flips) f = {rng() % 4096, uint32_t(1) << (rng() % 32)};  // many repeats: exercises atomics
  std::vector<uint32_t> expected = words;
  makeCpuBackend()->injectBitFlips(0, expected.data(), expected.size(), flips);
  device->injectBitFlips(0, words.data(), words.size(), flips);
  QVERIFY(words == expected);
}

QTEST_GUILESS_MAIN(TestGpu)
#include "tst_gpu.moc"
