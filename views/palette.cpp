// SPDX-License-Identifier: MIT
#include "views/qcustomplot_include.h"  // first: see the header

#include "views/palette.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace peat::views::palette {

namespace {

// viridis (matplotlib's) sampled at nine evenly spaced points
constexpr std::array<QRgb, 9> kViridis = {0x440154, 0x472d7b, 0x3b528b, 0x2c728e, 0x21918c,
                                          0x28ae80, 0x5ec962, 0xaddc30, 0xfde725};

}  // namespace

QColor series(int k) {
  static const std::array<QColor, 6> kSeries = {QColor(0x00, 0x72, 0xb2), QColor(0xd5, 0x5e, 0x00), QColor(0x00, 0x9e, 0x73),
                                                 QColor(0xe6, 0x9f, 0x00), QColor(0xcc, 0x79, 0xa7), QColor(0x56, 0xb4, 0xe9)};
  return kSeries[std::size_t(((k % 6) + 6) % 6)];
}

QColor bitField(int field) {
  return field == 0 ? QColor(0xcc, 0x79, 0xa7) : field == 1 ? QColor(0xd5, 0x5e, 0x00) : QColor(0x00, 0x72, 0xb2);
}

QColor evidence() { return QColor(0xff, 0x8f, 0x00); }

QColor verdictClass(const std::string& cls) {
  if (cls == "error") return QColor(0xd5, 0x5e, 0x00);       // vermillion
  if (cls == "unknown") return QColor(0xe6, 0x9f, 0x00);     // orange
  if (cls == "legitimate") return QColor(0x00, 0x9e, 0x73);  // bluish green
  return QColor(0xee, 0xee, 0xee);
}

QColor robust() { return QColor(0x00, 0x72, 0xb2); }      // blue
QColor ranging() { return QColor(0xf0, 0xe4, 0x42); }     // yellow
QColor vulnerable() { return QColor(0xd5, 0x5e, 0x00); }  // vermillion

QString bitClassText(int cls) {
  return (cls == 1 ? QColor(0xc9, 0xa8, 0x00) : bitClass(cls)).name();
}

QColor bitClass(int cls) {
  switch (cls) {
    case 0: return robust();
    case 1: return ranging();
    default: return vulnerable();
  }
}

QColor scheme(const std::string& name) {
  if (name == "none") return QColor(0x60, 0x60, 0x60);    // grey
  if (name == "save") return QColor(0xd5, 0x5e, 0x00);    // vermillion
  if (name == "tmr") return QColor(0x00, 0x72, 0xb2);     // blue
  if (name == "ranger") return QColor(0x00, 0x9e, 0x73);  // bluish green
  if (name == "ecc") return QColor(0xcc, 0x79, 0xa7);     // reddish purple
  return QColor(0xe6, 0x9f, 0x00);                        // orange
}

QRgb viridisRgb(double t) {
  if (!(t > 0)) t = 0;  // NaN too
  t = std::min(t, 1.0) * double(kViridis.size() - 1);
  const std::size_t i = std::min(std::size_t(t), kViridis.size() - 2);
  const double f = t - double(i);
  auto mix = [&](int shift) {
    const double a = (kViridis[i] >> shift) & 0xff, b = (kViridis[i + 1] >> shift) & 0xff;
    return QRgb(std::lround(a + (b - a) * f)) << shift;
  };
  return 0xff000000u | mix(16) | mix(8) | mix(0);
}

QColor viridis(double t) { return QColor::fromRgb(viridisRgb(t)); }

QCPColorGradient viridisGradient() {
  QCPColorGradient g;
  g.clearColorStops();
  for (std::size_t i = 0; i < kViridis.size(); ++i)
    g.setColorStopAt(double(i) / double(kViridis.size() - 1), QColor::fromRgb(kViridis[i]));
  g.setLevelCount(256);
  return g;
}

}  // namespace peat::views::palette
