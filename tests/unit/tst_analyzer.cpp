// SPDX-License-Identifier: MIT
// The analyzer's report on pairs whose answers are known, against brute force where they are not,
// and the tensor readers (.npy, HDF5) with their refusals.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/analyzer/report.h"
#include "core/fp/format.h"
#include "tests/support/random_values.h"
#include "core/io/tensor_source.h"
#include "tests/support/sample_session.h"

using namespace peat;
using analyzer::analyze;
using analyzer::Report;

namespace {
std::vector<float> randomValues(std::size_t n, uint64_t seed) { return testsupport::normalValues(n, seed); }
float flip(float x, int bit) { return fp::floatOf(fp::bitsOf(x) ^ (1u << bit)); }
}  // namespace

class TestAnalyzer : public QObject {
  Q_OBJECT
 private slots:
  void identicalPair();
  void singleBitFlip();
  void signAndMantissaClasses();
  void nonFiniteCounts();
  void tileEdgeColumnsShowAPeriod();
  void percentilesAreExact_data();
  void percentilesAreExact();
  void runsAcrossThreadBoundaries();
  void longAxesAreBinned();
  void rejectsEmptyAndBadTiles();
  void npyRoundTrip();
  void npyRefusals_data();
  void npyRefusals();
  void hdf5Source();
};

void TestAnalyzer::identicalPair() {
  const auto g = randomValues(1000, 1);
  const Report r = analyze(g.data(), g.data(), {10, 100});
  QCOMPARE(r.elements, uint64_t(1000));
  QCOMPARE(r.identical, uint64_t(1000));
  QCOMPARE(r.mismatched, uint64_t(0));
  QCOMPARE(r.maxAbs, 0.0);
  QCOMPARE(r.p99, 0.0);
  QCOMPARE(r.runs, uint64_t(0));
  QVERIFY(r.goldenRms > 0.5 && r.goldenRms < 1.5);
}

void TestAnalyzer::singleBitFlip() {
  auto g = randomValues(64 * 64, 2);
  auto c = g;
  c[5 * 64 + 7] = flip(c[5 * 64 + 7], 27);
  const Report r = analyze(g.data(), c.data(), {64, 64});
  QCOMPARE(r.mismatched, uint64_t(1));
  QCOMPARE(r.bitMismatch[27], uint64_t(1));
  QCOMPARE(std::accumulate(r.bitMismatch.begin(), r.bitMismatch.end(), uint64_t(0)), uint64_t(1));
  QCOMPARE(r.exponentInvolved, uint64_t(1));
  QCOMPARE(r.maxAbsPosition, (std::vector<uint64_t>{5, 7}));
  QCOMPARE(r.maxAbsIndex, uint64_t(5 * 64 + 7));
  QCOMPARE(r.rowMismatch.counts[5], uint64_t(1));
  QCOMPARE(r.colMismatch.counts[7], uint64_t(1));
  QCOMPARE(r.tileMismatch[0], uint64_t(1));
  QCOMPARE(r.runs, uint64_t(1));
  QCOMPARE(r.longestRun, uint64_t(1));
  QCOMPARE(r.log2Ulp[27 - 23 + 23], uint64_t(1));  // a flip of bit 27 moves 2^27 ULPs
  QCOMPARE(r.maxAbs, std::fabs(double(c[5 * 64 + 7]) - double(g[5 * 64 + 7])));
  QCOMPARE(r.p50, double(float(r.maxAbs)));
}

void TestAnalyzer::signAndMantissaClasses() {
  auto g = randomValues(4096, 3);
  auto c = g;
  for (int i = 0; i < 10; ++i) c[std::size_t(i)] = -c[std::size_t(i)];
  for (std::size_t i = 100; i < 4096; ++i) c[i] = fp::roundTo(fp::kBf16, c[i]);
  const Report r = analyze(g.data(), c.data(), {4096});
  QCOMPARE(r.signOnly, uint64_t(10));
  QCOMPARE(r.signOnly + r.exponentInvolved + r.mantissaOnly, r.mismatched);
  QVERIFY(r.mantissaOnly > 3900);                   // rounding to bf16 rarely carries into the exponent
  QCOMPARE(r.bitMismatch[31], uint64_t(10));        // only the sign flips touch bit 31
  uint64_t low = 0;
  for (int b = 0; b < 16; ++b) low += r.bitMismatch[std::size_t(b)];
  QVERIFY(low > 3900 * 4);                          // the cleared low half-words
  QVERIFY(r.log2Ulp[12] + r.log2Ulp[13] + r.log2Ulp[14] + r.log2Ulp[15] > 3500);  // up to 2^15 ULPs
  QCOMPARE(r.log2Ulp[16], uint64_t(0));
}

void TestAnalyzer::nonFiniteCounts() {
  auto g = randomValues(100, 4);
  auto c = g;
  g[0] = NAN;
  c[0] = NAN;  // NaN in both, same bits: identical
  c[1] = INFINITY;
  c[2] = NAN;
  g[3] = -INFINITY;
  const Report r = analyze(g.data(), c.data(), {100});
  QCOMPARE(r.goldenNaN, uint64_t(1));
  QCOMPARE(r.goldenInf, uint64_t(1));
  QCOMPARE(r.candidateNaN, uint64_t(2));
  QCOMPARE(r.candidateInf, uint64_t(1));
  QCOMPARE(r.newlyNonFinite, uint64_t(2));
  QCOMPARE(r.nanPairs, uint64_t(1));
  QCOMPARE(r.mismatched, uint64_t(3));
  QCOMPARE(r.maxAbs, 0.0);  // no mismatched pair is finite on both sides
}

void TestAnalyzer::tileEdgeColumnsShowAPeriod() {
  auto g = randomValues(32 * 48, 5);
  auto c = g;
  for (std::size_t row = 0; row < 32; ++row)
    for (std::size_t col = 15; col < 48; col += 16) c[row * 48 + col] += 1.0f;
  const Report r = analyze(g.data(), c.data(), {32, 48});
  QCOMPARE(r.mismatched, uint64_t(96));
  QCOMPARE(r.dominantGap, uint64_t(16));
  QVERIFY(r.dominantGapShare > 0.95);
  for (std::size_t col = 0; col < 48; ++col) QCOMPARE(r.colMismatch.counts[col], uint64_t(col % 16 == 15 ? 32 : 0));
  QCOMPARE(r.tilesDown * r.tilesAcross, uint64_t(6));
  for (uint64_t t : r.tileMismatch) QCOMPARE(t, uint64_t(16));
}

void TestAnalyzer::percentilesAreExact_data() {
  QTest::addColumn<unsigned>("threads");
  QTest::newRow("1 thread") << 1u;
  QTest::newRow("2 threads") << 2u;
}

void TestAnalyzer::percentilesAreExact() {
  QFETCH(unsigned, threads);
  const std::size_t n = 300000;
  auto g = randomValues(n, 6);
  auto c = g;
  std::mt19937_64 rng(7);
  for (std::size_t i = 0; i < n; ++i)
    if (rng() % 3) c[i] = g[i] + float(int(rng() % 9) - 4) * 1e-3f;  // many ties, some zero changes
  analyzer::ReportOptions o;
  o.threads = threads;
  const Report r = analyze(g.data(), c.data(), {600, 500}, o);
  std::vector<float> errs;
  for (std::size_t i = 0; i < n; ++i)
    if (fp::bitsOf(g[i]) != fp::bitsOf(c[i])) errs.push_back(float(std::fabs(double(c[i]) - double(g[i]))));
  std::sort(errs.begin(), errs.end());
  auto rank = [&](double q) { return double(errs[std::size_t(std::ceil(q * double(errs.size()))) - 1]); };
  QCOMPARE(r.mismatched, uint64_t(errs.size()));
  QCOMPARE(r.p50, rank(0.5));
  QCOMPARE(r.p99, rank(0.99));
  QCOMPARE(r.p999, rank(0.999));
}

void TestAnalyzer::runsAcrossThreadBoundaries() {
  const std::size_t rows = 1000, cols = 200;  // 200k elements: two threads, split at row 500
  auto g = randomValues(rows * cols, 8);
  auto c = g;
  for (std::size_t i = 499 * cols + 150; i < 501 * cols + 20; ++i) c[i] = flip(c[i], 3);  // crosses the split
  for (std::size_t i = 10; i < 13; ++i) c[i] = flip(c[i], 3);
  c[rows * cols - 1] = flip(c[rows * cols - 1], 3);
  analyzer::ReportOptions o;
  o.threads = 2;
  const Report r = analyze(g.data(), c.data(), {rows, cols}, o);
  QCOMPARE(r.runs, uint64_t(3));
  QCOMPARE(r.longestRun, uint64_t(2 * cols - 150 + 20));
  QCOMPARE(r.runLengthLog2[1], uint64_t(1));  // the run of 3
  QCOMPARE(r.runLengthLog2[0], uint64_t(1));  // the last element
}

void TestAnalyzer::longAxesAreBinned() {
  const std::size_t n = 200000;
  auto g = randomValues(n, 9);
  auto c = g;
  c[n - 1] = flip(c[n - 1], 0);
  const Report r = analyze(g.data(), c.data(), {n});
  QCOMPARE(r.colMismatch.binWidth, uint64_t(4));
  QCOMPARE(r.colMismatch.counts.size(), std::size_t(50000));
  QCOMPARE(r.colMismatch.counts.back(), uint64_t(1));
}

void TestAnalyzer::rejectsEmptyAndBadTiles() {
  const float x = 1;
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, analyze(&x, &x, {0, 3}));
  analyzer::ReportOptions o;
  o.tileRows = 0;
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, analyze(&x, &x, {1}, o));
}

void TestAnalyzer::npyRoundTrip() {
  QTemporaryDir dir;
  const std::string path = dir.filePath(QStringLiteral("a.npy")).toStdString();
  const auto v = randomValues(3 * 5 * 7, 10);
  io::writeNpy(path, v.data(), {3, 5, 7});
  const io::FloatTensor t = io::readNpy(path);
  QCOMPARE(t.shape(), (std::vector<uint64_t>{3, 5, 7}));
  QCOMPARE(t.dtype, std::string("float32"));
  QVERIFY(std::equal(v.begin(), v.end(), t.data()));
  const std::string one = dir.filePath(QStringLiteral("b.npy")).toStdString();
  io::writeNpy(one, v.data(), {4});
  QCOMPARE(io::readSource(one).shape(), std::vector<uint64_t>{4});
}

void TestAnalyzer::npyRefusals_data() {
  QTest::addColumn<QByteArray>("header");
  QTest::addColumn<int>("payload");
  QTest::addColumn<QString>("reason");
  auto h = [](const char* dict) -> QByteArray { return QByteArray("\x93NUMPY\x01\x00", 8) + QByteArray(2, '\0') + dict; };
  QTest::newRow("big-endian") << h("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }") << 8 << "big-endian";
  QTest::newRow("fortran") << h("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }") << 16 << "Fortran order";
  QTest::newRow("object") << h("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }") << 16 << "object arrays";
  QTest::newRow("int") << h("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }") << 8 << "not supported";
  QTest::newRow("truncated") << h("{'descr': '<f4', 'fortran_order': False, 'shape': (100,), }") << 8 << "truncated";
  QTest::newRow("no shape") << h("{'descr': '<f4', 'fortran_order': False, }") << 8 << "lacks";
  QTest::newRow("garbage") << QByteArray("this is not numpy at all") << 0 << "not a .npy file";
}

void TestAnalyzer::npyRefusals() {
  QFETCH(QByteArray, header);
  QFETCH(int, payload);
  QFETCH(QString, reason);
  if (header.startsWith("\x93NUMPY")) {
    const int len = int(header.size()) - 10;
    header[8] = char(len & 0xff);
    header[9] = char(len >> 8);
  }
  QTemporaryDir dir;
  QFile f(dir.filePath(QStringLiteral("bad.npy")));
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(header + QByteArray(payload, '\0'));
  f.close();
  try {
    io::readNpy(f.fileName().toStdString());
    QFAIL("a bad .npy was accepted");
  } catch (const io::SourceError& e) {
    QVERIFY2(QString::fromStdString(e.what()).contains(reason), e.what());
  }
}

void TestAnalyzer::hdf5Source() {
  QTemporaryDir dir;
  const std::string path = dir.filePath(QStringLiteral("s.h5")).toStdString();
  testsupport::writeSampleSession(path);
  const io::FloatTensor t = io::readSource(path + ":/runs/golden/iterations/000001/calls/000002/output_bf16");
  QCOMPARE(t.dtype, std::string("bfloat16"));
  QCOMPARE(t.shape(), (std::vector<uint64_t>{64, 32}));
  QCOMPARE(fp::bitsOf(t.data()[3]) & 0xffffu, 0u);  // widened exactly from bf16
  QVERIFY_THROWS_EXCEPTION(io::SourceError, io::readSource(path + ":/runs/golden/nope"));
  QVERIFY_THROWS_EXCEPTION(io::SourceError, io::readSource(path + ":/runs/golden/tables"));
  QVERIFY_THROWS_EXCEPTION(io::SourceError, io::readSource(path + ":/runs/golden/iterations/000000/calls/000000/labels"));
}

QTEST_GUILESS_MAIN(TestAnalyzer)
#include "tst_analyzer.moc"
