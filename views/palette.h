// SPDX-License-Identifier: MIT
#pragma once
// The workbench's colours, in one place, chosen to stay apart for colour-blind readers: the bit
// classes (blue, yellow, vermillion from Okabe and Ito's palette: they differ in lightness as
// well as hue), the protection schemes, and viridis for sequential quantities (perceptually
// uniform, monotone in lightness, readable in grey). SAVE's maps and bars, the campaign plot and
// the bit explorer take their colours from here.
#include <QColor>
#include <string>

class QCPColorGradient;

namespace peat::views::palette {

// Bit classes (core/save/bits.h): robust, ranging, vulnerable.
QColor robust();
QColor ranging();
QColor vulnerable();
QColor bitClass(int cls);  // 0 robust, 1 ranging, 2 vulnerable

// A protection scheme of a SAVE campaign (none, save, tmr, ranger, ecc; anything else gets a
// colour of its own too).
QColor scheme(const std::string& name);

// Viridis at t in [0, 1] (clamped).
QColor viridis(double t);
QRgb viridisRgb(double t);
// The same as a QCustomPlot gradient (include views/qcustomplot_include.h before using it).
QCPColorGradient viridisGradient();

}  // namespace peat::views::palette
