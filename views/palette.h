// SPDX-License-Identifier: MIT
#pragma once
// The workbench's colours, in one place, chosen to stay apart for colour-blind readers: the bit
// classes (blue, yellow, vermillion from Okabe and Ito's palette: they differ in lightness as
// well as hue), the protection schemes, and viridis for sequential quantities (perceptually
// uniform, monotone in lightness, readable in grey). SAVE's maps and bars, the campaign plot and
// the bit explorer take their colours from here.
#include <QColor>
#include <QString>
#include <string>

class QCPColorGradient;

namespace peat::views::palette {

// Bit classes (core/save/bits.h): robust, ranging, vulnerable.
QColor robust();
QColor ranging();
QColor vulnerable();
QColor bitClass(int cls);  // 0 robust, 1 ranging, 2 vulnerable
// The same hues for words on a light background (the yellow darkened until it reads), as "#rrggbb".
QString bitClassText(int cls);

// A protection scheme of a SAVE campaign (none, save, tmr, ranger, ecc; anything else gets a
// colour of its own too).
QColor scheme(const std::string& name);

// Series k of a plot (calls overlaid, runs): Okabe and Ito's qualitative colours, in an order whose
// neighbours differ for every common colour-vision deficiency (blue, vermillion, bluish green,
// orange, reddish purple, sky blue), repeating after six.
QColor series(int k);
// The fields of an fp32 value on the bit plots: sign, exponent, mantissa.
QColor bitField(int field);  // 0 sign, 1 exponent, 2 mantissa
// Evidence drawn over a plot (a framed bit, marked elements): a dark orange that stands apart from
// every series colour.
QColor evidence();

// A verdict's class (core/detector: detector::verdictClass): "error" vermillion, "unknown" orange,
// "legitimate" bluish green; anything else light grey.
QColor verdictClass(const std::string& cls);

// Viridis at t in [0, 1] (clamped).
QColor viridis(double t);
QRgb viridisRgb(double t);
// The same as a QCustomPlot gradient (include views/qcustomplot_include.h before using it).
QCPColorGradient viridisGradient();

}  // namespace peat::views::palette
