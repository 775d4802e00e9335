// SPDX-License-Identifier: MIT
// The analyzer's report on pairs whose answers are known, against brute force where they are not,
// and the tensor readers (.npy, HDF5) with their refusals.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <thread>

#include <hwy/targets.h>

#include "core/analysis/call_spool.h"
#include "core/analyzer/criteria.h"
#include "core/analyzer/numerics.h"
#include "core/analyzer/report.h"
#include "core/fp/block.h"
#include "core/analyzer/report_simd.h"
#include "core/fp/format.h"
#include "core/fp/ulp.h"
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
  void criteriaUsersApply();
  void identicalPair();
  void singleBitFlip();
  void signAndMantissaClasses();
  void nonFiniteCounts();
  void tileEdgeColumnsShowAPeriod();
  void percentilesAreExact_data();
  void percentilesAreExact();
  void runsAcrossThreadBoundaries();
  void longAxesAreBinned();
  void matchesBruteForce_data();
  void matchesBruteForce();
  void rejectsEmptyAndBadTiles();
  void npyRoundTrip();
  void npyRefusals_data();
  void npyRefusals();
  void hdf5Source();
  void npyIntegersAreReadExactly();
  void numericsMatchQuantisation();
  void callSpoolKeepsEveryField();
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

namespace {

// The report computed the obvious way, one element at a time: the reference for the vector scan.
Report bruteForce(const std::vector<float>& g, const std::vector<float>& c, const std::vector<uint64_t>& shape,
                  uint64_t tileRows, uint64_t tileCols) {
  Report r;
  const uint64_t n = g.size(), cols = shape.back(), rows = n / cols;
  r.elements = n;
  const uint64_t rowBin = (rows + analyzer::kMaxAxisBins - 1) / analyzer::kMaxAxisBins;
  const uint64_t colBin = (cols + analyzer::kMaxAxisBins - 1) / analyzer::kMaxAxisBins;
  r.rowMismatch = {rowBin, std::vector<uint64_t>((rows + rowBin - 1) / rowBin)};
  r.colMismatch = {colBin, std::vector<uint64_t>((cols + colBin - 1) / colBin)};
  r.tilesDown = (rows + tileRows - 1) / tileRows;
  r.tilesAcross = (cols + tileCols - 1) / tileCols;
  r.tileMismatch.assign(r.tilesDown * r.tilesAcross, 0);
  double sumAbs = 0, sumSq = 0, sumRel = 0, sumG2 = 0;
  uint64_t gFinite = 0, run = 0;
  int64_t last = -1;
  std::vector<uint64_t> gaps(4097);
  std::vector<float> errors;
  r.maxAbs = -1;
  auto endRun = [&] {
    if (run == 0) return;
    ++r.runs;
    r.longestRun = std::max(r.longestRun, run);
    ++r.runLengthLog2[std::size_t(std::ilogb(double(run)))];
    run = 0;
  };
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t gb = fp::bitsOf(g[i]), cb = fp::bitsOf(c[i]);
    if (std::isfinite(g[i])) {
      sumG2 += double(g[i]) * double(g[i]);
      ++gFinite;
    }
    r.goldenNaN += std::isnan(g[i]);
    r.goldenInf += std::isinf(g[i]);
    r.candidateNaN += std::isnan(c[i]);
    r.candidateInf += std::isinf(c[i]);
    if (gb == cb) {
      ++r.identical;
      endRun();
      continue;
    }
    ++r.mismatched;
    ++run;
    if (last >= 0 && i - uint64_t(last) <= 4096) ++gaps[i - uint64_t(last)];
    last = int64_t(i);
    r.newlyNonFinite += std::isfinite(g[i]) && !std::isfinite(c[i]);
    const uint32_t x = gb ^ cb;
    for (int b = 0; b < 32; ++b) r.bitMismatch[std::size_t(b)] += (x >> b) & 1;
    if (x == 0x80000000u)
      ++r.signOnly;
    else if (x & 0x7f800000u)
      ++r.exponentInvolved;
    else
      ++r.mantissaOnly;
    if (std::isnan(g[i]) || std::isnan(c[i])) {
      ++r.nanPairs;
    } else if (const uint64_t ulp = fp::ulpDistance32(gb, cb)) {
      ++r.log2Ulp[std::size_t(std::ilogb(double(ulp)))];
    }
    if (std::isfinite(g[i]) && std::isfinite(c[i])) {
      const double d = std::fabs(double(c[i]) - double(g[i]));
      sumAbs += d;
      sumSq += d * d;
      const double rel = d / std::max(std::fabs(double(g[i])), 0x1p-126);
      sumRel += rel;
      r.maxRel = std::max(r.maxRel, rel);
      if (d > r.maxAbs) {
        r.maxAbs = d;
        r.maxAbsIndex = i;
      }
      if (d > 0) ++r.log2Abs[std::size_t(std::ilogb(d) - Report::kLog2AbsMin)];
      errors.push_back(float(d));
    }
    const uint64_t row = i / cols, col = i % cols;
    ++r.rowMismatch.counts[row / rowBin];
    ++r.colMismatch.counts[col / colBin];
    ++r.tileMismatch[(row / tileRows) * r.tilesAcross + col / tileCols];
  }
  endRun();
  r.maxAbs = std::max(r.maxAbs, 0.0);
  r.meanAbs = sumAbs / double(n);
  r.rmsAbs = std::sqrt(sumSq / double(n));
  r.meanRel = sumRel / double(n);
  r.goldenRms = gFinite ? std::sqrt(sumG2 / double(gFinite)) : 0;
  std::sort(errors.begin(), errors.end());
  auto rank = [&](double q) -> double {
    if (errors.empty()) return 0;
    return errors[std::min(errors.size() - 1, std::size_t(std::ceil(q * double(errors.size()))) - 1)];
  };
  r.p50 = rank(0.5);
  r.p99 = rank(0.99);
  r.p999 = rank(0.999);
  r.dominantGap = std::size_t(std::max_element(gaps.begin() + 1, gaps.end()) - gaps.begin());
  if (gaps[r.dominantGap] == 0) r.dominantGap = 0;
  return r;
}

// Every kind of difference, in stretches and scattered: rounding to bf16, single and multiple
// bit flips, +0/-0, NaN and Inf on either side, and identical stretches between them.
void corrupt(std::vector<float>& g, std::vector<float>& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t i = 0; i < g.size();) {
    const std::size_t length = std::size_t(rng() % 300);
    const unsigned kind = unsigned(rng() % 9);
    for (std::size_t j = i; j < std::min(g.size(), i + length); ++j) {
      switch (kind) {
        case 0: c[j] = fp::roundTo(fp::kBf16, g[j]); break;
        case 1: if (rng() % 7 == 0) c[j] = flip(g[j], int(rng() % 32)); break;
        case 2: c[j] = fp::floatOf(fp::bitsOf(g[j]) ^ uint32_t(rng())); break;
        case 3: g[j] = 0.0f; c[j] = (rng() & 1) ? -0.0f : 0.0f; break;
        case 4: if (rng() % 5 == 0) (rng() & 1 ? g[j] : c[j]) = (rng() & 1) ? nan : -inf; break;
        case 5: if (rng() % 11 == 0) g[j] = c[j] = inf; break;
        case 6: c[j] = g[j] * 1e30f; break;  // overflows to Inf for some
        default: break;  // identical
      }
    }
    i += length + 1;
  }
}

}  // namespace

void TestAnalyzer::matchesBruteForce_data() {
  QTest::addColumn<QVector<qulonglong>>("shape");
  QTest::addColumn<qulonglong>("tile");
  QTest::addColumn<unsigned>("threads");
  QTest::newRow("odd 2-D tail") << QVector<qulonglong>{37, 129} << 7ull << 1u;
  QTest::newRow("one column") << QVector<qulonglong>{20000, 1} << 16ull << 1u;
  QTest::newRow("one long row, binned columns") << QVector<qulonglong>{1, 140001} << 16ull << 2u;
  QTest::newRow("1-D") << QVector<qulonglong>{4099} << 5ull << 1u;
  QTest::newRow("3-D, two threads") << QVector<qulonglong>{3, 250, 301} << 16ull << 2u;
  QTest::newRow("rows not a chunk multiple, two threads") << QVector<qulonglong>{401, 333} << 32ull << 2u;
}

// The vector scan against brute force, on every SIMD target Highway compiled that this CPU runs.
void TestAnalyzer::matchesBruteForce() {
  QFETCH(QVector<qulonglong>, shape);
  QFETCH(qulonglong, tile);
  QFETCH(unsigned, threads);
  const std::vector<uint64_t> dims(shape.begin(), shape.end());
  const uint64_t n = std::accumulate(dims.begin(), dims.end(), uint64_t(1), std::multiplies<uint64_t>());
  auto g = randomValues(n, 20 + n);
  auto c = g;
  corrupt(g, c, n);
  const Report want = bruteForce(g, c, dims, tile, tile);
  QVERIFY(want.mismatched > 0 && want.identical > 0 && want.nanPairs > 0 && want.newlyNonFinite > 0);
  analyzer::ReportOptions o;
  o.tileRows = o.tileCols = tile;
  o.threads = threads;
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  QVERIFY(!targets.empty());
  for (const int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    const std::string name = analyzer::detail::simdTarget();
    QCOMPARE(name, std::string(hwy::TargetName(target)));
    const Report r = analyze(g.data(), c.data(), dims, o);
    const QByteArray on = QByteArray("on ") + name.c_str();
    QVERIFY2(r.identical == want.identical && r.mismatched == want.mismatched, on);
    QVERIFY2(r.goldenNaN == want.goldenNaN && r.goldenInf == want.goldenInf, on);
    QVERIFY2(r.candidateNaN == want.candidateNaN && r.candidateInf == want.candidateInf, on);
    QVERIFY2(r.newlyNonFinite == want.newlyNonFinite && r.nanPairs == want.nanPairs, on);
    QVERIFY2(r.bitMismatch == want.bitMismatch, on);
    QVERIFY2(r.signOnly == want.signOnly && r.exponentInvolved == want.exponentInvolved, on);
    QVERIFY2(r.mantissaOnly == want.mantissaOnly, on);
    QVERIFY2(r.log2Ulp == want.log2Ulp && r.log2Abs == want.log2Abs, on);
    QVERIFY2(r.maxAbs == want.maxAbs && r.maxAbsIndex == want.maxAbsIndex, on);
    QVERIFY2(r.maxRel == want.maxRel, on);
    for (auto [got, expected] : {std::pair{r.meanAbs, want.meanAbs}, {r.rmsAbs, want.rmsAbs},
                                 {r.meanRel, want.meanRel}, {r.goldenRms, want.goldenRms}})
      QVERIFY2(std::fabs(got - expected) <= 1e-12 * std::fabs(expected), on);
    QVERIFY2(r.p50 == want.p50 && r.p99 == want.p99 && r.p999 == want.p999, on);
    QVERIFY2(r.rowMismatch.counts == want.rowMismatch.counts, on);
    QVERIFY2(r.colMismatch.binWidth == want.colMismatch.binWidth, on);
    QVERIFY2(r.colMismatch.counts == want.colMismatch.counts, on);
    QVERIFY2(r.tileMismatch == want.tileMismatch, on);
    QVERIFY2(r.runs == want.runs && r.longestRun == want.longestRun, on);
    QVERIFY2(r.runLengthLog2 == want.runLengthLog2, on);
    QVERIFY2(r.dominantGap == want.dominantGap, on);
  }
  hwy::SetSupportedTargetsForTest(0);  // back to what the CPU supports
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
  QTest::newRow("complex") << h("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }") << 16 << "not supported";
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

// Integers (labels, token ids) are read, but only where fp32 holds them exactly.
void TestAnalyzer::npyIntegersAreReadExactly() {
  QTemporaryDir dir;
  auto write = [&](const char* name, const char* descr, const QByteArray& data, int count) {
    QByteArray dict = QByteArray("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" +
                      QByteArray::number(count) + ",), }";
    const int len = int(dict.size());
    QByteArray file = QByteArray("\x93NUMPY\x01\x00", 8) + char(len & 0xff) + char(len >> 8) + dict + data;
    QFile f(dir.filePath(QString::fromLatin1(name)));
    if (!f.open(QIODevice::WriteOnly)) return std::string();
    f.write(file);
    return f.fileName().toStdString();
  };
  const std::string small = write("small.npy", "<i8", QByteArray("\x07\0\0\0\0\0\0\0\xfd\xff\xff\xff\xff\xff\xff\xff", 16), 2);
  const io::FloatTensor t = io::readNpy(small);
  QCOMPARE(t.dtype, std::string("int64"));
  QCOMPARE(t.data()[0], 7.0f);
  QCOMPARE(t.data()[1], -3.0f);
  const std::string bytes = write("u8.npy", "|u1", QByteArray("\xff\x00", 2), 2);
  QCOMPARE(io::readNpy(bytes).data()[0], 255.0f);
  // 2^25 + 1 rounds in fp32
  const std::string big = write("big.npy", "<i8", QByteArray("\x01\0\0\x02\0\0\0\0", 8), 1);
  try {
    io::readNpy(big);
    QFAIL("an integer fp32 cannot hold was read");
  } catch (const io::SourceError& e) {
    QVERIFY2(QString::fromStdString(e.what()).contains(QStringLiteral("not exact in float32")), e.what());
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
  // integer datasets (labels) are read exactly
  const io::FloatTensor labels = io::readSource(path + ":/runs/golden/iterations/000000/calls/000000/labels");
  QVERIFY(labels.dtype.find("int") != std::string::npos);
  for (uint64_t i = 0; i < labels.size(); ++i) QCOMPARE(labels.data()[i], std::floor(labels.data()[i]));
}

// The numerics statistics count what quantising does, without quantising: checked against
// encode() per element (plain formats) and against core/fp's block quantisation (flushed and
// saturated values), on 64 rows of 200 values spread over 40 binades, with zeros and a NaN.
void TestAnalyzer::numericsMatchQuantisation() {
  const uint64_t rows = 64, cols = 200, n = rows * cols;
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0, 1);
  std::uniform_real_distribution<float> binade(-30, 10);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng) * std::exp2(binade(rng));
  for (uint64_t i = 0; i < n; i += 97) v[i] = 0;
  v[5] = NAN;
  const peat::analyzer::TensorNumerics t = peat::analyzer::tensorNumerics(v.data(), n, cols);
  uint64_t nonzero = 0;
  double amax = 0, amin = HUGE_VAL;
  for (float x : v)
    if (std::isfinite(x) && x != 0) {
      ++nonzero;
      amax = std::max(amax, double(std::fabs(x)));
      amin = std::min(amin, double(std::fabs(x)));
    }
  QCOMPARE(t.nonzero, nonzero);
  QCOMPARE(t.nonFinite, uint64_t(1));
  QCOMPARE(t.amax, amax);
  QCOMPARE(t.rangeBinades, std::log2(amax / amin));
  for (const auto& share : t.plain) {
    const peat::fp::Format f = *peat::fp::formatByName(share.format);
    uint64_t under = 0, over = 0;
    for (float x : v) {
      if (!std::isfinite(x) || x == 0) continue;
      under += peat::fp::roundTo(f, x, peat::fp::Overflow::Saturate) == 0.0f;
      over += std::fabs(x) > peat::fp::decode(f, peat::fp::maxFinite(f));
    }
    QCOMPARE(share.underflow, double(under) / double(nonzero));
    QCOMPARE(share.saturated, double(over) / double(nonzero));
  }
  QVERIFY(t.plain[0].underflow > 0.1 && t.plain[0].underflow < 0.9);  // fp16 loses part of this tensor
  for (const auto& share : t.blockScaled) {
    const peat::fp::BlockFormat f = *peat::fp::blockFormatByName(share.format);
    std::vector<float> q = v;
    uint64_t flushed = 0, saturated = 0;
    for (uint64_t r = 0; r < rows; ++r) {
      const auto b = peat::fp::quantizeBlocks(f, q.data() + r * cols, cols, 0, peat::fp::BlockBug::None, float(amax));
      flushed += b.flushedToZero;
      saturated += b.saturated;
    }
    QCOMPARE(share.underflow, double(flushed) / double(nonzero));
    QCOMPARE(share.saturated, double(saturated) / double(nonzero));
  }
  // block scaling keeps far more of a wide tensor than one scale for the tensor does
  const auto find = [](const std::vector<peat::analyzer::FormatShare>& s, const char* name) {
    return std::find_if(s.begin(), s.end(), [&](const auto& x) { return x.format == name; })->underflow;
  };
  QVERIFY(find(t.blockScaled, "mxfp8-e4m3") < find(t.tensorScaled, "e4m3"));
  uint64_t blocks = 0;
  for (uint64_t c : t.blocks[0].rangeCounts) blocks += c;
  QCOMPARE(blocks, rows * ((cols + 31) / 32) - 1);  // every block but the one with the NaN
}

// msProbe's metrics and FlashAttention's rule on a pair worked out by hand: golden (1, 2, -4, 0.5),
// candidate (1, 2.02, -4.004, 0.5 + 2^-24): relative errors 0, 1e-2, 1e-3, 2^-23 (one ULP of 0.5
// is 2^-24), so above 1e-2 none (1e-2 itself is not above), above 1e-3 one, above 1e-4 two.
void TestAnalyzer::criteriaUsersApply() {
  const float g[] = {1.0f, 2.0f, -4.0f, 0.5f};
  const float c[] = {1.0f, 2.02f, -4.004f, 0.5f + std::ldexp(1.0f, -24)};
  const analyzer::Criteria k = analyzer::criteria(g, c, 4);
  double gg = 0, cc = 0, gc = 0;
  for (int i = 0; i < 4; ++i) gg += double(g[i]) * g[i], cc += double(c[i]) * c[i], gc += double(g[i]) * c[i];
  QCOMPARE(k.cosine, gc / std::sqrt(gg * cc));
  QVERIFY(k.cosine < 1 && k.cosine > 0.99999);
  QCOMPARE(k.maxAbs, double(c[1]) - 2.0);
  QVERIFY(std::fabs(k.maxRel - (double(c[1]) - 2.0) / 2.0) < 1e-12);
  // c[1] - 2 as fp32 is 0.0200000..., a shade above 1e-2 relative: above 1e-2 counts it
  QCOMPARE(k.relAbove2, (double(c[1]) - 2.0) / 2.0 > 1e-2 ? 0.25 : 0.0);
  QCOMPARE(k.relAbove3, 0.5);
  QCOMPARE(k.relAbove4, 0.5);
  // the largest error in ULPs of golden: 2.02 - 2 over 2^-22 (2's ULP)
  QCOMPARE(k.maxUlp, (double(c[1]) - 2.0) / std::ldexp(1.0, -22));
  QVERIFY(!k.ruleEvaluated);
  // the rule: float64 values, a reference (PyTorch's kernel) off by 1e-3 at most, the candidate by 3e-3
  const double exact[] = {1.0, 2.0, -4.0, 0.5};
  const double reference[] = {1.001, 2.0, -4.0, 0.5};
  analyzer::Criteria fails = k;
  analyzer::applyReferenceRule(fails, c, exact, reference, 4, "golden");
  QVERIFY(fails.ruleEvaluated);
  QCOMPARE(fails.referenceError, 1.001 - 1.0);
  QCOMPARE(fails.candidateError, double(c[1]) - 2.0);
  QVERIFY(!fails.rulePasses());  // 0.02 > 2 x 0.001 + 1e-5
  const double looser[] = {1.0, 2.011, -4.0, 0.5};
  analyzer::Criteria passes = k;
  analyzer::applyReferenceRule(passes, c, exact, looser, 4, "golden");
  QVERIFY(passes.rulePasses());  // 0.02 <= 2 x 0.011 + 1e-5
  // a NaN in the candidate is an infinite error; two zero tensors have cosine 1
  const float nan[] = {1.0f, NAN, -4.0f, 0.5f};
  analyzer::Criteria withNan = analyzer::criteria(g, nan, 4);
  QCOMPARE(withNan.nonFinite, uint64_t(1));
  analyzer::applyReferenceRule(withNan, nan, exact, exact, 4, "golden");
  QVERIFY(std::isinf(withNan.candidateError) && !withNan.rulePasses());
  const float zeros[] = {0, 0};
  QCOMPARE(analyzer::criteria(zeros, zeros, 2).cosine, 1.0);
}

QTEST_GUILESS_MAIN(TestAnalyzer)
#include "tst_analyzer.moc"

// analyze --session keeps each call's analysis in a file until it is stored and printed
// (core/analysis/call_spool.h): every field of a real report with mismatches in several tiles, a
// verdict with findings and alternatives, and the criteria read back as they were; a damaged or
// cut record is refused, not misread.
void TestAnalyzer::callSpoolKeepsEveryField() {
  const auto g = randomValues(96 * 80, 11);
  auto c = g;
  for (std::size_t i = 3; i < c.size(); i += 97) c[i] = flip(c[i], int(i % 23));
  c[17] = std::nanf("");
  analyzer::CallAnalysis a;
  a.call = "iterations/000010/calls/000003";
  a.layer = "conv2\x1b[2J";
  a.op = "conv2d";
  a.iteration = 10, a.callIndex = 3, a.variant = 2;
  a.report = analyze(g.data(), c.data(), {96, 80});
  a.criteria = analyzer::criteria(g.data(), c.data(), g.size());
  a.criteria.ruleEvaluated = true, a.criteria.candidateError = 0.25, a.criteria.referenceError = 0.125;
  a.criteria.reference = "the bf16 replay";
  a.detection.verdict = {"bit_flip", 0.875, {{"bit", "27"}, {"format", "fp32"}}, {{"elements", 1}, {"rows_hit", 3}},
                         "one element"};
  a.detection.findings = {{"precision_loss", 0.5, {{"format", "bf16"}}, {}, "the rest"}};
  a.detection.alternatives = {{"accumulation_order", 0.25, {}, {{"k", 64}}, ""}, {"unknown", 0, {}, {}, "none"}};
  QVERIFY(a.report.mismatched > 50 && a.report.tileMismatch.size() > 4 && a.report.runs > 0);

  const std::vector<unsigned char> bytes = analyzer::CallSpool::encode(a);
  const analyzer::CallAnalysis b = analyzer::CallSpool::decode(bytes);
  QCOMPARE(b.call, a.call);
  QCOMPARE(b.layer, a.layer);
  QCOMPARE(b.op, a.op);
  QCOMPARE(b.iteration, a.iteration);
  QCOMPARE(b.callIndex, a.callIndex);
  QCOMPARE(b.variant, a.variant);
  const Report &r = a.report, &q = b.report;
  QCOMPARE(q.shape, r.shape);
  for (auto [x, y] : {std::pair{r.rows, q.rows}, {r.cols, q.cols}, {r.elements, q.elements}, {r.identical, q.identical},
                      {r.mismatched, q.mismatched}, {r.goldenNaN, q.goldenNaN}, {r.goldenInf, q.goldenInf},
                      {r.candidateNaN, q.candidateNaN}, {r.candidateInf, q.candidateInf},
                      {r.newlyNonFinite, q.newlyNonFinite}, {r.maxAbsIndex, q.maxAbsIndex}, {r.nanPairs, q.nanPairs},
                      {r.signOnly, q.signOnly}, {r.exponentInvolved, q.exponentInvolved},
                      {r.mantissaOnly, q.mantissaOnly}, {r.rowMismatch.binWidth, q.rowMismatch.binWidth},
                      {r.colMismatch.binWidth, q.colMismatch.binWidth}, {r.tileRows, q.tileRows},
                      {r.tileCols, q.tileCols}, {r.tilesDown, q.tilesDown}, {r.tilesAcross, q.tilesAcross},
                      {r.runs, q.runs}, {r.longestRun, q.longestRun}, {r.dominantGap, q.dominantGap}})
    QCOMPARE(y, x);
  for (auto [x, y] : {std::pair{r.maxAbs, q.maxAbs}, {r.meanAbs, q.meanAbs}, {r.rmsAbs, q.rmsAbs}, {r.maxRel, q.maxRel},
                      {r.meanRel, q.meanRel}, {r.goldenRms, q.goldenRms}, {r.maxAbsOverScale, q.maxAbsOverScale},
                      {r.meanAbsOverScale, q.meanAbsOverScale}, {r.p50, q.p50}, {r.p99, q.p99}, {r.p999, q.p999},
                      {r.dominantGapShare, q.dominantGapShare}})
    QCOMPARE(y, x);
  QCOMPARE(q.maxAbsGolden, r.maxAbsGolden);
  QCOMPARE(q.maxAbsCandidate, r.maxAbsCandidate);
  QVERIFY(q.log2Ulp == r.log2Ulp && q.bitMismatch == r.bitMismatch && q.runLengthLog2 == r.runLengthLog2);
  QVERIFY(q.maxAbsPosition == r.maxAbsPosition && q.log2Abs == r.log2Abs && q.tileMismatch == r.tileMismatch);
  QVERIFY(q.rowMismatch.counts == r.rowMismatch.counts && q.colMismatch.counts == r.colMismatch.counts);
  const auto sameVerdict = [](const detector::Verdict& x, const detector::Verdict& y) {
    return x.model == y.model && x.confidence == y.confidence && x.parameters == y.parameters &&
           x.evidence == y.evidence && x.explanation == y.explanation;
  };
  QVERIFY(sameVerdict(b.detection.verdict, a.detection.verdict));
  QCOMPARE(b.detection.findings.size(), std::size_t(1));
  QVERIFY(sameVerdict(b.detection.findings[0], a.detection.findings[0]));
  QCOMPARE(b.detection.alternatives.size(), std::size_t(2));
  for (std::size_t i = 0; i < 2; ++i) QVERIFY(sameVerdict(b.detection.alternatives[i], a.detection.alternatives[i]));
  const analyzer::Criteria &k = a.criteria, &m = b.criteria;
  for (auto [x, y] : {std::pair{k.cosine, m.cosine}, {k.maxAbs, m.maxAbs}, {k.maxRel, m.maxRel},
                      {k.relAbove2, m.relAbove2}, {k.relAbove3, m.relAbove3}, {k.relAbove4, m.relAbove4},
                      {k.maxUlp, m.maxUlp}, {k.candidateError, m.candidateError}, {k.referenceError, m.referenceError}})
    QCOMPARE(y, x);
  QCOMPARE(m.elements, k.elements);
  QCOMPARE(m.nonFinite, k.nonFinite);
  QCOMPARE(m.ruleEvaluated, k.ruleEvaluated);
  QCOMPARE(m.reference, k.reference);
  // the bytes again are the same bytes; cut or lengthened, the record is refused
  QVERIFY(analyzer::CallSpool::encode(b) == bytes);
  std::vector<unsigned char> cut(bytes.begin(), bytes.end() - 3), longer = bytes;
  longer.push_back(0);
  QVERIFY_THROWS_EXCEPTION(std::runtime_error, analyzer::CallSpool::decode(cut));
  QVERIFY_THROWS_EXCEPTION(std::runtime_error, analyzer::CallSpool::decode(longer));
  // through the file beside a session, out of order and from two threads
  const QTemporaryDir dir;
  analyzer::CallSpool spool(dir.filePath(QStringLiteral("s.h5")).toStdString(), 3);
  analyzer::CallAnalysis other = a;
  other.call = "iterations/000011/calls/000000";
  std::thread t([&] { spool.add(2, other); });
  spool.add(0, a);
  t.join();
  QCOMPARE(spool.read(2).call, other.call);
  QCOMPARE(spool.read(0).report.tileMismatch, a.report.tileMismatch);
  QVERIFY_THROWS_EXCEPTION(std::runtime_error, spool.read(1));  // never kept
}
