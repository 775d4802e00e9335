// SPDX-License-Identifier: MIT
// core/fp against LibTorch's own fp16 and bf16 conversions: every 16-bit pattern, and the fp32
// values at and around every rounding boundary.
#include <QtTest>

#include <cmath>
#include <random>

#include "core/fp/format.h"
#include "tests/support/torchref.h"

using namespace peat::fp;
using peat::testsupport::TorchHalfKind;

class TestFpTorch : public QObject {
  Q_OBJECT
 private slots:
  void widenEveryPattern_data();
  void widenEveryPattern();
  void narrowAtBoundaries_data();
  void narrowAtBoundaries();
  void narrowRandom_data();
  void narrowRandom();

 private:
  static void addFormats() {
    QTest::addColumn<int>("kind");
    QTest::newRow("fp16") << int(TorchHalfKind::Half);
    QTest::newRow("bf16") << int(TorchHalfKind::BFloat16);
  }
  static Format formatOf(int kind) { return kind == int(TorchHalfKind::Half) ? kFp16 : kBf16; }
  static void compareNarrowing(int kind, const std::vector<float>& values);
};

void TestFpTorch::widenEveryPattern_data() { addFormats(); }

void TestFpTorch::widenEveryPattern() {
  QFETCH(int, kind);
  const Format f = formatOf(kind);
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = uint16_t(i);
  const std::vector<float> ref = peat::testsupport::torchWiden(TorchHalfKind(kind), all);
  int nans = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    const float ours = decode(f, i);
    if (std::isnan(ref[i])) {
      ++nans;
      if (!std::isnan(ours)) QFAIL(qPrintable(QStringLiteral("pattern %1: torch NaN, ours %2").arg(i, 4, 16).arg(ours)));
      continue;
    }
    if (bitsOf(ours) != bitsOf(ref[i]))
      QFAIL(qPrintable(QStringLiteral("pattern %1: torch %2, ours %3").arg(i, 4, 16).arg(ref[i]).arg(ours)));
  }
  QCOMPARE(nans, 2 * int(f.manMask()));
}

void TestFpTorch::compareNarrowing(int kind, const std::vector<float>& values) {
  const Format f = formatOf(kind);
  const std::vector<uint16_t> ref = peat::testsupport::torchNarrow(TorchHalfKind(kind), values);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const uint32_t ours = encode(f, values[i]);
    if (isNaN(f, ref[i]) && isNaN(f, ours)) continue;
    if (ours != ref[i])
      QFAIL(qPrintable(QStringLiteral("fp32 %1 (0x%2): torch 0x%3, ours 0x%4")
                           .arg(double(values[i]), 0, 'g', 9)
                           .arg(bitsOf(values[i]), 8, 16)
                           .arg(ref[i], 4, 16)
                           .arg(ours, 4, 16)));
  }
}

void TestFpTorch::narrowAtBoundaries_data() { addFormats(); }

void TestFpTorch::narrowAtBoundaries() {
  // For each representable value: itself, the midpoint to its successor (a tie), and the fp32
  // neighbours of that midpoint on both sides. Covers subnormals, overflow and both signs.
  QFETCH(int, kind);
  const Format f = formatOf(kind);
  std::vector<float> values;
  values.reserve(65536 * 4);
  for (uint32_t bits = 0; bits < 0x8000u; ++bits) {
    if (isNaN(f, bits)) continue;
    const double here = decode(f, bits);
    if (std::isinf(here)) {
      values.push_back(float(here));
      values.push_back(float(-here));
      continue;
    }
    // Past the largest finite value the successor is where the next binade would start.
    const double successor = decode(f, bits + 1);
    const double next = std::isinf(successor) ? here + (here - double(decode(f, bits - 1))) : successor;
    for (double sign : {1.0, -1.0}) {
      const float mid = float(sign * (here + next) / 2);  // exact in fp32: one more bit than the format
      values.push_back(float(sign * here));
      values.push_back(mid);
      values.push_back(std::nextafter(mid, INFINITY));
      values.push_back(std::nextafter(mid, -INFINITY));
    }
  }
  compareNarrowing(kind, values);
}

void TestFpTorch::narrowRandom_data() { addFormats(); }

void TestFpTorch::narrowRandom() {
  QFETCH(int, kind);
  std::mt19937 rng(20261130);
  std::vector<float> values(4 << 20);
  for (float& v : values) v = floatOf(uint32_t(rng()));  // every fp32 pattern is equally likely
  compareNarrowing(kind, values);
}

QTEST_GUILESS_MAIN(TestFpTorch)
#include "tst_fp_torch.moc"
