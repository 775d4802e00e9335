// SPDX-License-Identifier: MIT
// core/fp against the IEEE-754 and OCP FP8 specifications' facts.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/fp/block.h"
#include "core/fp/explain.h"
#include "core/fp/format.h"
#include "core/fp/ulp.h"

using namespace peat::fp;

class TestFp : public QObject {
  Q_OBJECT
 private slots:
  void formatWidths();
  void decomposeFp32();
  void classification_data();
  void classification();
  void bitFields();
  void flips();
  void flipOutOfRange();
  void ulpAcrossZeroAndSubnormals();
  void ulpNaN();
  void ulpMatchesNextafter();
  void e4m3Facts();
  void e5m2Facts();
  void roundingTiesToEven_data();
  void roundingTiesToEven();
  void overflow_data();
  void overflow();
  void tf32KeepsTenBits();
  void roundTripAllPatterns_data();
  void roundTripAllPatterns();
  void nanStaysNaN();
  void formatByName();
  void roundInPlaceMatchesRoundTo_data();
  void roundInPlaceMatchesRoundTo();
  void narrowFormatsEveryCode_data();
  void narrowFormatsEveryCode();
  void narrowFormatsRoundToNearestCode();
  void e8m0Scales();
  void mxBlocksFollowTheSpecification_data();
  void mxBlocksFollowTheSpecification();
  void nvfp4TwoLevelScales();
  void blockBugsDiffer();
  void explainedNeighboursAndToggles();
  void fastElementRoundingMatchesTheCodec();
};

void TestFp::formatWidths() {
  QCOMPARE(kFp32.width(), 32);
  QCOMPARE(kFp16.width(), 16);
  QCOMPARE(kBf16.width(), 16);
  QCOMPARE(kTf32.width(), 19);
  QCOMPARE(kE4M3.width(), 8);
  QCOMPARE(kE5M2.width(), 8);
}

void TestFp::decomposeFp32() {
  const Fields f = decompose(kFp32, bitsOf(-6.5f));  // -1.625 * 2^2
  QVERIFY(f.sign);
  QCOMPARE(f.exponent, 129u);
  QCOMPARE(f.unbiasedExponent, 2);
  QCOMPARE(f.mantissa, 0x500000u);
  QCOMPARE(f.cls, FpClass::Normal);
}

void TestFp::classification_data() {
  QTest::addColumn<QString>("format");
  QTest::addColumn<uint>("bits");
  QTest::addColumn<int>("cls");
  QTest::newRow("fp32 +0") << "fp32" << 0x00000000u << int(FpClass::Zero);
  QTest::newRow("fp32 -0") << "fp32" << 0x80000000u << int(FpClass::Zero);
  QTest::newRow("fp32 min subnormal") << "fp32" << 0x00000001u << int(FpClass::Subnormal);
  QTest::newRow("fp32 min normal") << "fp32" << 0x00800000u << int(FpClass::Normal);
  QTest::newRow("fp32 inf") << "fp32" << 0x7f800000u << int(FpClass::Infinite);
  QTest::newRow("fp32 nan") << "fp32" << 0x7fc00000u << int(FpClass::NaN);
  QTest::newRow("fp16 max subnormal") << "fp16" << 0x03ffu << int(FpClass::Subnormal);
  QTest::newRow("fp16 -inf") << "fp16" << 0xfc00u << int(FpClass::Infinite);
  QTest::newRow("fp16 snan") << "fp16" << 0x7c01u << int(FpClass::NaN);
  QTest::newRow("bf16 inf") << "bf16" << 0x7f80u << int(FpClass::Infinite);
  QTest::newRow("e4m3 S.1111.110 is 448") << "e4m3" << 0x7eu << int(FpClass::Normal);
  QTest::newRow("e4m3 S.1111.000 is finite") << "e4m3" << 0x78u << int(FpClass::Normal);
  QTest::newRow("e4m3 +NaN") << "e4m3" << 0x7fu << int(FpClass::NaN);
  QTest::newRow("e4m3 -NaN") << "e4m3" << 0xffu << int(FpClass::NaN);
  QTest::newRow("e5m2 inf") << "e5m2" << 0x7cu << int(FpClass::Infinite);
  QTest::newRow("e5m2 nan") << "e5m2" << 0x7du << int(FpClass::NaN);
  QTest::newRow("e5m2 subnormal") << "e5m2" << 0x01u << int(FpClass::Subnormal);
}

void TestFp::classification() {
  QFETCH(QString, format);
  QFETCH(uint, bits);
  QFETCH(int, cls);
  const Format f = *peat::fp::formatByName(format.toStdString());
  QCOMPARE(int(classify(f, bits)), cls);
  QCOMPARE(isNaN(f, bits), cls == int(FpClass::NaN));
}

void TestFp::bitFields() {
  QCOMPARE(fieldOf(kFp32, 31), BitField::Sign);
  QCOMPARE(fieldOf(kFp32, 30), BitField::Exponent);
  QCOMPARE(fieldOf(kFp32, 23), BitField::Exponent);
  QCOMPARE(fieldOf(kFp32, 22), BitField::Mantissa);
  QCOMPARE(fieldOf(kFp32, 0), BitField::Mantissa);
  QCOMPARE(fieldOf(kE4M3, 7), BitField::Sign);
  QCOMPARE(fieldOf(kE4M3, 3), BitField::Exponent);
  QCOMPARE(fieldOf(kE4M3, 2), BitField::Mantissa);
  QCOMPARE(fieldOf(kTf32, 18), BitField::Sign);
  QCOMPARE(fieldOf(kTf32, 10), BitField::Exponent);
}

void TestFp::flips() {
  QCOMPARE(floatOf(flipBit(kFp32, bitsOf(1.0f), 31)), -1.0f);
  QCOMPARE(floatOf(flipBit(kFp32, bitsOf(1.0f), 23)), 0.5f);    // lowest exponent bit of 127 -> 126
  QCOMPARE(floatOf(flipBit(kFp32, bitsOf(1.0f), 30)), INFINITY);  // 127 | 128 = 255
  QCOMPARE(floatOf(flipBit(kFp32, bitsOf(1.0f), 22)), 1.5f);
  QCOMPARE(flipBits(kFp16, 0x3c00u, 0x3u), 0x3c03u);
  QCOMPARE(flipBit(kE4M3, 0x38u, 7), 0xb8u);  // 1.0 -> -1.0
  QCOMPARE(decode(kE4M3, 0xb8u), -1.0f);
}

void TestFp::flipOutOfRange() {
  QVERIFY_THROWS_EXCEPTION(std::out_of_range, flipBit(kFp16, 0, 16));
  QVERIFY_THROWS_EXCEPTION(std::out_of_range, flipBit(kFp32, 0, -1));
  QVERIFY_THROWS_EXCEPTION(std::out_of_range, flipBits(kE4M3, 0, 0x100u));
}

void TestFp::ulpAcrossZeroAndSubnormals() {
  QCOMPARE(*ulpDistance(kFp32, bitsOf(0.0f), bitsOf(-0.0f)), 0ull);
  QCOMPARE(*ulpDistance(kFp32, 0x00000001u, 0x80000001u), 2ull);  // +-min subnormal straddle zero
  QCOMPARE(*ulpDistance(kFp32, 0x007fffffu, 0x00800000u), 1ull);  // max subnormal -> min normal
  QCOMPARE(*ulpDistance(kFp32, bitsOf(1.0f), bitsOf(-1.0f)), 2ull * 0x3f800000ull);
  QCOMPARE(*ulpDistance(kFp32, bitsOf(std::numeric_limits<float>::max()), bitsOf(INFINITY)), 1ull);
  QCOMPARE(*ulpDistance(kFp16, 0x0001u, 0x8001u), 2ull);
  QCOMPARE(*ulpDistance(kE4M3, 0x7eu, 0x7du), 1ull);
  QCOMPARE(ulpDistance32(bitsOf(-0.0f), bitsOf(0.0f)), 0ull);
  QCOMPARE(ulpDistance32(0x80000001u, 0x00000002u), 3ull);
}

void TestFp::ulpNaN() {
  QVERIFY(!ulpDistance(kFp32, 0x7fc00000u, 0).has_value());
  QVERIFY(!ulpDistance(kFp16, 0x3c00u, 0x7e00u).has_value());
  QVERIFY(!ulpDistance(kE4M3, 0x7fu, 0x7eu).has_value());
  QCOMPARE(ulpDistance32(0xffc00001u, 0), kNanUlp);
  QVERIFY(ulpDistance(kE5M2, 0x7cu, 0x7bu).has_value());  // Inf is on the line
}

void TestFp::ulpMatchesNextafter() {
  // Stepping with nextafter must always be exactly one ULP, including through zero and subnormals.
  float x = -1.2e-38f;
  for (int i = 0; i < 40000000 && x < 1.2e-38f; ++i) {
    const float next = std::nextafter(x, INFINITY);
    if (x == 0.0f && next == 0.0f) {  // -0 -> +0 is one step of nextafter but zero ULP apart
      x = next;
      continue;
    }
    if (ulpDistance32(bitsOf(x), bitsOf(next)) != 1ull) QFAIL(qPrintable(QString::number(double(x))));
    x = next;
  }
  QVERIFY(x >= 1.2e-38f);
}

void TestFp::e4m3Facts() {
  // OCP 8-bit Floating Point Specification (OFP8) rev 1.0, table 1.
  QCOMPARE(decode(kE4M3, maxFinite(kE4M3)), 448.0f);
  QCOMPARE(maxFinite(kE4M3), 0x7eu);
  QCOMPARE(decode(kE4M3, 0x08u), std::ldexp(1.0f, -6));       // min normal
  QCOMPARE(decode(kE4M3, 0x07u), 0.875f * std::ldexp(1.0f, -6));  // max subnormal
  QCOMPARE(decode(kE4M3, 0x01u), std::ldexp(1.0f, -9));       // min subnormal
  QVERIFY(!infinity(kE4M3).has_value());
  QVERIFY(std::isnan(decode(kE4M3, 0x7fu)));
  QVERIFY(std::isnan(decode(kE4M3, 0xffu)));
  QCOMPARE(encode(kE4M3, 448.0f), 0x7eu);
  QCOMPARE(encode(kE4M3, std::ldexp(1.0f, -10)), 0x00u);  // half the min subnormal ties to even zero
  QCOMPARE(encode(kE4M3, std::ldexp(1.5f, -10)), 0x01u);
  QCOMPARE(encode(kE4M3, -std::ldexp(1.0f, -9)), 0x81u);
}

void TestFp::e5m2Facts() {
  QCOMPARE(decode(kE5M2, maxFinite(kE5M2)), 57344.0f);
  QCOMPARE(maxFinite(kE5M2), 0x7bu);
  QCOMPARE(*infinity(kE5M2), 0x7cu);
  QCOMPARE(decode(kE5M2, 0x04u), std::ldexp(1.0f, -14));  // min normal
  QCOMPARE(decode(kE5M2, 0x03u), 0.75f * std::ldexp(1.0f, -14));
  QCOMPARE(decode(kE5M2, 0x01u), std::ldexp(1.0f, -16));  // min subnormal
  QVERIFY(std::isinf(decode(kE5M2, 0xfcu)) && decode(kE5M2, 0xfcu) < 0);
  for (uint32_t nan : {0x7du, 0x7eu, 0x7fu}) QVERIFY(std::isnan(decode(kE5M2, nan)));
}

void TestFp::roundingTiesToEven_data() {
  QTest::addColumn<QString>("format");
  QTest::addColumn<float>("input");
  QTest::addColumn<float>("expected");
  QTest::newRow("fp16 1+2^-11 tie -> 1") << "fp16" << (1.0f + std::ldexp(1.0f, -11)) << 1.0f;
  QTest::newRow("fp16 1+3*2^-11 tie -> up") << "fp16" << (1.0f + 3 * std::ldexp(1.0f, -11))
                                            << (1.0f + std::ldexp(1.0f, -9));
  QTest::newRow("fp16 just above tie") << "fp16" << std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)
                                       << (1.0f + std::ldexp(1.0f, -10));
  QTest::newRow("bf16 1+2^-8 tie -> 1") << "bf16" << (1.0f + std::ldexp(1.0f, -8)) << 1.0f;
  QTest::newRow("e4m3 1+2^-4 tie -> 1") << "e4m3" << 1.0625f << 1.0f;
  QTest::newRow("e4m3 1.1875 tie -> 1.25") << "e4m3" << 1.1875f << 1.25f;
  QTest::newRow("e5m2 1.125 tie -> 1") << "e5m2" << 1.125f << 1.0f;
  QTest::newRow("fp16 subnormal tie") << "fp16" << std::ldexp(1.5f, -24) << std::ldexp(2.0f, -24);
  QTest::newRow("fp16 mantissa carry to exponent") << "fp16" << std::nextafter(2.0f, 0.0f) << 2.0f;
  QTest::newRow("fp16 subnormal rounds up to min normal") << "fp16" << std::nextafter(std::ldexp(1.0f, -14), 0.0f)
                                                          << std::ldexp(1.0f, -14);
  QTest::newRow("bf16 fp32 subnormal") << "bf16" << floatOf(0x00018000u) << floatOf(0x00020000u);
}

void TestFp::roundingTiesToEven() {
  QFETCH(QString, format);
  QFETCH(float, input);
  QFETCH(float, expected);
  const Format f = *peat::fp::formatByName(format.toStdString());
  QCOMPARE(roundTo(f, input), expected);
  QCOMPARE(roundTo(f, -input), -expected);
}

void TestFp::overflow_data() {
  QTest::addColumn<QString>("format");
  QTest::addColumn<float>("input");
  QTest::addColumn<uint>("standard");
  QTest::addColumn<uint>("saturated");
  QTest::newRow("fp16 65504") << "fp16" << 65504.0f << 0x7bffu << 0x7bffu;
  QTest::newRow("fp16 65519 rounds down") << "fp16" << 65519.0f << 0x7bffu << 0x7bffu;
  QTest::newRow("fp16 65520 -> inf") << "fp16" << 65520.0f << 0x7c00u << 0x7bffu;
  QTest::newRow("fp16 inf") << "fp16" << INFINITY << 0x7c00u << 0x7bffu;
  QTest::newRow("e4m3 464 ties to 448") << "e4m3" << 464.0f << 0x7eu << 0x7eu;
  QTest::newRow("e4m3 465 -> NaN") << "e4m3" << 465.0f << 0x7fu << 0x7eu;
  QTest::newRow("e4m3 inf -> NaN") << "e4m3" << INFINITY << 0x7fu << 0x7eu;
  QTest::newRow("e5m2 61440 -> inf") << "e5m2" << 61440.0f << 0x7cu << 0x7bu;
  QTest::newRow("bf16 max") << "bf16" << std::numeric_limits<float>::max() << 0x7f80u << 0x7f7fu;
}

void TestFp::overflow() {
  QFETCH(QString, format);
  QFETCH(float, input);
  QFETCH(uint, standard);
  QFETCH(uint, saturated);
  const Format f = *peat::fp::formatByName(format.toStdString());
  QCOMPARE(encode(f, input, Overflow::Standard), standard);
  QCOMPARE(encode(f, input, Overflow::Saturate), saturated);
  QCOMPARE(encode(f, -input, Overflow::Standard), standard | f.signMask());
}

void TestFp::tf32KeepsTenBits() {
  for (float x : {1.0f, 3.14159265f, -1e-3f, 6.5e4f, 1e-40f, 3.4e38f}) {
    const float r = roundTo(kTf32, x);
    QCOMPARE(bitsOf(r) & 0x1fffu, 0u);                 // low 13 of 23 mantissa bits cleared
    // unit roundoff 2^-11 for normals; half the subnormal quantum, 2^-137, below them
    const float bound = std::max(std::fabs(x) * std::ldexp(1.0f, -11), std::ldexp(1.0f, -137));
    QVERIFY(std::fabs(r - x) <= bound || std::isinf(r));
  }
  QCOMPARE(roundTo(kTf32, floatOf(0x3f801000u)), 1.0f);              // exact tie, even
  QCOMPARE(bitsOf(roundTo(kTf32, floatOf(0x3f803000u))), 0x3f804000u);  // tie, odd -> up
}

void TestFp::roundTripAllPatterns_data() {
  QTest::addColumn<QString>("format");
  for (const char* name : {"fp16", "bf16", "e4m3", "e5m2"}) QTest::newRow(name) << name;
}

void TestFp::roundTripAllPatterns() {
  // Every non-NaN pattern decodes to an fp32 value that encodes back to the same pattern.
  QFETCH(QString, format);
  const Format f = *peat::fp::formatByName(format.toStdString());
  int nans = 0;
  for (uint32_t bits = 0; bits <= f.allMask(); ++bits) {
    if (isNaN(f, bits)) {
      ++nans;
      QVERIFY(std::isnan(decode(f, bits)));
      continue;
    }
    if (encode(f, decode(f, bits)) != bits) QFAIL(qPrintable(QString::number(bits, 16)));
  }
  const int expectedNaNs = f.encoding == Encoding::FiniteNanOnly ? 2 : 2 * int(f.manMask());
  QCOMPARE(nans, expectedNaNs);
}

void TestFp::nanStaysNaN() {
  for (const Format& f : allFormats()) {
    if (f.encoding == Encoding::FiniteOnly) {  // no NaN code: the largest magnitude, sign kept
      QCOMPARE(encode(f, std::numeric_limits<float>::quiet_NaN()), maxFinite(f));
      QCOMPARE(encode(f, -std::numeric_limits<float>::quiet_NaN()), maxFinite(f) | f.signMask());
      continue;
    }
    QVERIFY(isNaN(f, encode(f, std::numeric_limits<float>::quiet_NaN())));
    QVERIFY(isNaN(f, encode(f, -std::numeric_limits<float>::quiet_NaN())));
    QVERIFY(isNaN(f, encode(f, std::numeric_limits<float>::quiet_NaN(), Overflow::Saturate)));
  }
}

void TestFp::formatByName() {
  QVERIFY(peat::fp::formatByName("tf32").has_value());
  QVERIFY(!peat::fp::formatByName("fp64").has_value());
  QCOMPARE(allFormats().size(), std::size_t(9));
  QVERIFY(peat::fp::formatByName("e2m1").has_value());
}

void TestFp::roundInPlaceMatchesRoundTo_data() {
  QTest::addColumn<QString>("format");
  QTest::addColumn<bool>("saturate");
  for (const char* name : {"bf16", "tf32", "fp16", "e4m3", "e5m2", "e3m2", "e2m3", "e2m1"}) {
    QTest::newRow(qPrintable(QStringLiteral("%1 standard").arg(QLatin1String(name)))) << name << false;
    QTest::newRow(qPrintable(QStringLiteral("%1 saturate").arg(QLatin1String(name)))) << name << true;
  }
}

void TestFp::roundInPlaceMatchesRoundTo() {
  // The fast path must agree with encode/decode on every kind of input: random patterns (NaN, Inf,
  // subnormals included) and the values next to the overflow threshold.
  QFETCH(QString, format);
  QFETCH(bool, saturate);
  const Format f = *peat::fp::formatByName(format.toStdString());
  const Overflow o = saturate ? Overflow::Saturate : Overflow::Standard;
  std::vector<float> values;
  uint64_t state = 12345;
  for (int i = 0; i < 1 << 20; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    values.push_back(floatOf(uint32_t(state >> 32)));
  }
  // and values across the format's own range (its subnormals, normals and just past its largest),
  // with the exact midpoints between neighbouring codes (ties) and their float neighbours
  for (int i = 0; i < 1 << 20; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int lowest = 1 - f.bias - f.manBits - 3, span = (1 << f.expBits) + f.manBits + 6;
    const int e = lowest + int((state >> 40) % uint64_t(span));
    const float v = std::ldexp(1.0f + float((state >> 16) & 0xffffff) / 16777216.0f, e);
    values.push_back((state >> 63) ? -v : v);
  }
  // and a run of values all within the format's range (subnormals, normals, ties, signed zeros), so
  // that whole blocks take the fast path's vector lanes: the mixed values above send most blocks
  // element by element
  const float inRangeTop = decode(f, maxFinite(f));
  for (int i = 0; i < 1 << 18; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int lowest = 1 - f.bias - f.manBits - 3, span = (1 << f.expBits) + f.manBits + 3;
    const int e = lowest + int((state >> 40) % uint64_t(span));
    float v = std::ldexp(1.0f + float((state >> 16) & 0xffffff) / 16777216.0f, e);
    if (!(v <= inRangeTop)) v = inRangeTop;
    if ((state >> 8) % 97 == 0) v = 0.0f;
    values.push_back((state >> 63) ? -v : v);
  }
  for (uint32_t code = 0; code <= f.allMask(); ++code) {
    const float a = decode(f, code), b = decode(f, code + 1 <= f.allMask() ? code + 1 : code);
    if (!std::isfinite(a) || !std::isfinite(b)) continue;
    const float mid = (a + b) / 2;  // exact: neighbours differ by a power of two that float holds
    for (float v : {mid, std::nextafter(mid, INFINITY), std::nextafter(mid, -INFINITY), a}) values.push_back(v);
  }
  const float top = decode(f, maxFinite(f));
  for (float v : {top, std::nextafter(top, INFINITY), top * 1.0078125f, top * 1.01f, INFINITY,
                  std::numeric_limits<float>::max(), floatOf(0x7f7fffffu), floatOf(0x00000001u)}) {
    values.push_back(v);
    values.push_back(-v);
  }
  std::vector<float> fast = values;
  roundInPlace(f, fast.data(), fast.size(), o);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float slow = roundTo(f, values[i], o);
    if (std::isnan(slow) ? !std::isnan(fast[i]) : bitsOf(slow) != bitsOf(fast[i]))
      QFAIL(qPrintable(QStringLiteral("input 0x%1: roundTo 0x%2, roundInPlace 0x%3")
                           .arg(bitsOf(values[i]), 8, 16, QLatin1Char('0'))
                           .arg(bitsOf(slow), 8, 16, QLatin1Char('0'))
                           .arg(bitsOf(fast[i]), 8, 16, QLatin1Char('0'))));
  }
}

namespace {
// The nearest code to x by brute force over every code of f (ties: the even code, i.e. the one
// whose mantissa LSB is 0), saturating: an oracle independent of encode()'s bit arithmetic.
uint32_t nearestCode(const Format& f, float x) {
  uint32_t best = 0;
  double bestDistance = HUGE_VAL;
  for (uint32_t code = 0; code <= f.allMask(); ++code) {
    if (isNaN(f, code) || classify(f, code) == peat::fp::FpClass::Infinite) continue;
    if ((code & f.signMask()) != (std::signbit(x) ? f.signMask() : 0)) continue;
    const double d = std::fabs(double(decode(f, code)) - double(x));
    if (d < bestDistance || (d == bestDistance && (code & 1) == 0)) {
      bestDistance = d;
      best = code;
    }
  }
  return best;
}
}  // namespace

void TestFp::narrowFormatsEveryCode_data() {
  QTest::addColumn<QString>("format");
  QTest::addColumn<float>("largest");
  QTest::addColumn<float>("smallestSubnormal");
  QTest::newRow("e2m1") << "e2m1" << 6.0f << 0.5f;
  QTest::newRow("e3m2") << "e3m2" << 28.0f << 0.0625f;
  QTest::newRow("e2m3") << "e2m3" << 7.5f << 0.125f;
  QTest::newRow("e4m3") << "e4m3" << 448.0f << std::ldexp(1.0f, -9);
  QTest::newRow("e5m2") << "e5m2" << 57344.0f << std::ldexp(1.0f, -16);
}

// Every code of the narrow formats: the largest and smallest values of the OCP tables, every code
// decodes to a value that encodes back to it, positive codes are ordered like their values.
void TestFp::narrowFormatsEveryCode() {
  QFETCH(QString, format);
  QFETCH(float, largest);
  QFETCH(float, smallestSubnormal);
  const Format f = *peat::fp::formatByName(format.toStdString());
  QCOMPARE(decode(f, maxFinite(f)), largest);
  QCOMPARE(decode(f, 1), smallestSubnormal);
  float previous = -1;
  for (uint32_t code = 0; code <= f.allMask(); ++code) {
    if (isNaN(f, code) || classify(f, code) == peat::fp::FpClass::Infinite) continue;
    const float v = decode(f, code);
    QCOMPARE(encode(f, v), code);
    if (code < f.signMask()) {
      QVERIFY(v > previous);
      previous = v;
    }
  }
  if (f.encoding == Encoding::FiniteOnly) {  // every code is finite, and beyond the largest saturates
    QCOMPARE(encode(f, largest * 1.5f), maxFinite(f));
    QCOMPARE(encode(f, INFINITY), maxFinite(f));
  }
}

// E2M1's eight magnitudes, and rounding to nearest (ties to even) against a brute-force search
// over every code, on 20,000 values across each format's range.
void TestFp::narrowFormatsRoundToNearestCode() {
  const float e2m1[] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (uint32_t code = 0; code < 8; ++code) QCOMPARE(decode(peat::fp::kE2M1, code), e2m1[code]);
  QCOMPARE(roundTo(peat::fp::kE2M1, 2.5f), 2.0f);  // tie: even mantissa
  QCOMPARE(roundTo(peat::fp::kE2M1, 5.0f), 4.0f);  // tie between 4 and 6: 4 (mantissa 0)
  QCOMPARE(roundTo(peat::fp::kE2M1, 0.25f), 0.0f);  // tie between 0 and 0.5
  QCOMPARE(roundTo(peat::fp::kE2M1, 0.75f), 1.0f);  // tie between 0.5 and 1: 1 (mantissa 0)
  std::mt19937 rng(5);
  for (const Format& f : {peat::fp::kE2M1, peat::fp::kE3M2, peat::fp::kE2M3, peat::fp::kE4M3}) {
    const float top = decode(f, maxFinite(f)) * 1.3f;
    std::uniform_real_distribution<float> u(-top, top);
    for (int k = 0; k < 5000; ++k) {
      const float x = k % 2 ? u(rng) : u(rng) * std::ldexp(1.0f, -int(rng() % 8));
      QCOMPARE(encode(f, x, Overflow::Saturate), nearestCode(f, x));
    }
  }
}

void TestFp::e8m0Scales() {
  QCOMPARE(peat::fp::decodeE8M0(127), 1.0f);
  QCOMPARE(peat::fp::decodeE8M0(0), std::ldexp(1.0f, -127));
  QCOMPARE(peat::fp::decodeE8M0(254), std::ldexp(1.0f, 127));
  QVERIFY(std::isnan(peat::fp::decodeE8M0(255)));
  for (int code = 0; code < 255; ++code) QCOMPARE(int(peat::fp::e8m0OfExponent(code - 127)), code);
  QCOMPARE(int(peat::fp::e8m0OfExponent(-300)), 0);
  QCOMPARE(int(peat::fp::e8m0OfExponent(300)), 254);
  QCOMPARE(peat::fp::largestExponent(peat::fp::kE2M1), 2);
  QCOMPARE(peat::fp::largestExponent(peat::fp::kE4M3), 8);
  QCOMPARE(peat::fp::largestExponent(peat::fp::kE5M2), 15);
  QCOMPARE(peat::fp::largestExponent(peat::fp::kE3M2), 4);
  QCOMPARE(peat::fp::largestExponent(peat::fp::kE2M3), 2);
}

void TestFp::mxBlocksFollowTheSpecification_data() {
  QTest::addColumn<QString>("format");
  for (const peat::fp::BlockFormat& f : peat::fp::blockFormats())
    if (f.scale == peat::fp::ScaleKind::E8M0) QTest::newRow(f.name.data()) << QString::fromLatin1(f.name.data(), int(f.name.size()));
}

// MX blocks against the specification's rule computed here: X = 2^(floor(log2 amax) - emax), each
// element the nearest code of V / X (brute force), saturating; blocks of wide and tiny magnitudes,
// a short last block, an all-zero block, and a block with a NaN.
void TestFp::mxBlocksFollowTheSpecification() {
  QFETCH(QString, format);
  const peat::fp::BlockFormat f = *peat::fp::blockFormatByName(format.toStdString());
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> v(32 * 6 + 7);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = normal(rng) * std::ldexp(1.0f, int(i / 32) * 9 - 20);
  for (int i = 64; i < 96; ++i) v[std::size_t(i)] = 0;  // block 2: zeros
  v[5 * 32 + 3] = NAN;                                 // block 5: NaN
  std::vector<float> q = v;
  const peat::fp::BlockQuantization r = peat::fp::quantizeBlocks(f, q.data(), q.size());
  QCOMPARE(r.blockScales.size(), std::size_t(7));
  const int emax = peat::fp::largestExponent(f.element);
  for (std::size_t b = 0; b < 7; ++b) {
    float amax = 0;
    bool nan = false;
    for (std::size_t i = b * 32; i < std::min(v.size(), b * 32 + 32); ++i) {
      nan = nan || std::isnan(v[i]);
      amax = std::max(amax, std::fabs(v[i]));
    }
    if (nan) {
      QVERIFY(std::isnan(r.blockScales[b]));
      for (std::size_t i = b * 32; i < b * 32 + 32; ++i) QVERIFY(std::isnan(q[i]));
      continue;
    }
    if (amax == 0) {
      for (std::size_t i = b * 32; i < b * 32 + 32; ++i) QCOMPARE(q[i], 0.0f);
      continue;
    }
    int e = 0;
    std::frexp(amax, &e);
    const float scale = std::ldexp(1.0f, std::clamp(e - 1 - emax, -127, 127));
    QCOMPARE(r.blockScales[b], scale);
    for (std::size_t i = b * 32; i < std::min(v.size(), b * 32 + 32); ++i)
      QCOMPARE(q[i], decode(f.element, nearestCode(f.element, v[i] / scale)) * scale);
  }
}

// NVFP4: the tensor scale amax / (6 * 448), each block's E4M3 scale, elements of E2M1; the block
// with the tensor's amax maps it to 6 exactly.
void TestFp::nvfp4TwoLevelScales() {
  std::vector<float> v(48);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& x : v) x = u(rng);
  v[20] = 12.0f;  // block 1's and the tensor's amax
  std::vector<float> q = v;
  const peat::fp::BlockQuantization r = peat::fp::quantizeBlocks(peat::fp::kNvfp4, q.data(), q.size());
  QCOMPARE(r.tensorScale, 12.0f / (6.0f * 448.0f));
  QCOMPARE(r.blockScales.size(), std::size_t(3));
  QCOMPARE(r.blockScales[1], 448.0f);  // amax / (6 s) = 448 exactly
  QCOMPARE(q[20], 12.0f);
  for (std::size_t b = 0; b < 3; ++b) {
    float amax = 0;
    for (std::size_t i = b * 16; i < b * 16 + 16; ++i) amax = std::max(amax, std::fabs(v[i]));
    QCOMPARE(r.blockScales[b], roundTo(peat::fp::kE4M3, amax / (6.0f * r.tensorScale), Overflow::Saturate));
    const float step = r.blockScales[b] * r.tensorScale;
    for (std::size_t i = b * 16; i < b * 16 + 16; ++i)
      QCOMPARE(q[i], decode(peat::fp::kE2M1, nearestCode(peat::fp::kE2M1, v[i] / step)) * step);
  }
}

// The planted bugs change the result, each in its own way.
void TestFp::blockBugsDiffer() {
  std::vector<float> v(128);
  // block maxima near 1.2 x 2^3b: floor(log2(amax / max)) then lies a binade below the rule's scale
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 1.2f * std::sin(float(i)) * std::ldexp(1.0f, int(i / 32) * 3);
  for (const peat::fp::BlockFormat& f : peat::fp::blockFormats()) {
    std::vector<float> good = v, wrong = v, truncated = v;
    const auto g = peat::fp::quantizeBlocks(f, good.data(), good.size());
    const auto w = peat::fp::quantizeBlocks(f, wrong.data(), wrong.size(), 0, peat::fp::BlockBug::WrongBlock);
    const auto t = peat::fp::quantizeBlocks(f, truncated.data(), truncated.size(), 0, peat::fp::BlockBug::TruncatedScale);
    QVERIFY2(good != wrong && good != truncated, f.name.data());
    QCOMPARE(w.blockScales[0], g.blockScales[1]);  // block 0 took block 1's scale, the last block 0's
    QCOMPARE(w.blockScales.back(), g.blockScales.front());
    QVERIFY(t.saturated > g.saturated);             // a scale too small: more values clamp
  }
}

// The bit explorer's numbers: for every code of the narrow formats (and fp16, bf16), the
// neighbours one ULP away are the next smaller and larger values among all of the format's
// values (sorted here), one ULP is the gap to the next larger magnitude, and toggling any bit
// gives the code XOR that bit with its ULP change on the sorted line.
void TestFp::explainedNeighboursAndToggles() {
  for (const Format& f : {peat::fp::kE2M1, peat::fp::kE3M2, peat::fp::kE2M3, peat::fp::kE4M3, peat::fp::kE5M2,
                          peat::fp::kFp16, peat::fp::kBf16}) {
    std::vector<float> values;
    for (uint32_t code = 0; code <= f.allMask(); ++code)
      if (!isNaN(f, code)) values.push_back(decode(f, code));
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());  // +0 and -0 are one value
    for (uint32_t code = 0; code <= f.allMask(); ++code) {
      if (isNaN(f, code)) continue;
      const peat::fp::Explained e = peat::fp::explain(f, code);
      const auto at = std::lower_bound(values.begin(), values.end(), e.value);
      QVERIFY(at != values.end() && *at == e.value);
      if (at == values.begin()) QVERIFY(!e.below.has_value());
      else QCOMPARE(*e.below, *(at - 1));
      if (at + 1 == values.end()) QVERIFY(!e.above.has_value());
      else QCOMPARE(*e.above, *(at + 1));
      if (std::isfinite(e.value) && e.value >= 0 && at + 1 != values.end() && std::isfinite(*(at + 1)))
        QCOMPARE(e.ulp, double(*(at + 1)) - double(e.value));
      for (int bit = 0; bit < f.width() && f.width() <= 8; ++bit) {
        const peat::fp::Toggle t = peat::fp::toggle(f, code, bit);
        QCOMPARE(t.after.bits, code ^ (uint32_t(1) << bit));
        if (isNaN(f, t.after.bits)) continue;
        // on the sorted line, +0 and -0 sit together: the ULP change is the distance in ranks
        const auto there = std::lower_bound(values.begin(), values.end(), t.after.value);
        QCOMPARE(*t.ulpChange, uint64_t(std::llabs(int64_t(there - values.begin()) - int64_t(at - values.begin()))));
      }
    }
  }
}

// The block quantiser's fast rounding (ElementRounder) against the codec's encode/decode, for every
// element format: a sweep of every 509th positive fp32 bit pattern below Inf, both signs, and each
// code's value, its midpoints with the next code and one fp32 ULP either side of them.
void TestFp::fastElementRoundingMatchesTheCodec() {
  for (const Format& f : {kE2M1, kE2M3, kE3M2, kE4M3, kE5M2, kFp16, kBf16, kTf32}) {
    const ElementRounder fast(f);
    std::vector<float> probes;
    for (uint32_t u = 0; u < 0x7f800000u; u += 509) probes.push_back(floatOf(u));
    for (uint32_t code = 0; code <= f.allMask() >> 1; ++code) {
      const float v = decode(f, code);
      if (!std::isfinite(v)) continue;
      const float next = decode(f, code + 1);
      const float mid = std::isfinite(next) ? (v + next) / 2 : v * 1.0625f;
      for (const float x : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) probes.push_back(x);
    }
    uint64_t checked = 0;
    for (const float p : probes)
      for (const float x : {p, -p}) {
        const float want = decode(f, encode(f, x, Overflow::Saturate)), got = fast(x);
        if (bitsOf(want) != bitsOf(got))
          QFAIL(qPrintable(QStringLiteral("%1: %2 rounds to %3, the codec says %4")
                               .arg(QString::fromLatin1(f.name.data(), int(f.name.size())))
                               .arg(double(x), 0, 'g', 9)
                               .arg(double(got), 0, 'g', 9)
                               .arg(double(want), 0, 'g', 9)));
        ++checked;
      }
    QVERIFY(checked > 8000000);
  }
}

QTEST_GUILESS_MAIN(TestFp)
#include "tst_fp.moc"
