// SPDX-License-Identifier: MIT
#pragma once
// Shared plot styling. Include after views/qcustomplot_include.h.
#include <QPalette>

namespace peat::views {

// Plot colours from the widget's palette, so a dark desktop gets a dark plot.
inline void followPalette(QCustomPlot* plot) {
  const QPalette p = plot->palette();
  plot->setBackground(p.color(QPalette::Base));
  for (QCPAxis* axis : plot->axisRect()->axes()) {
    axis->setBasePen(QPen(p.color(QPalette::Text)));
    axis->setTickPen(QPen(p.color(QPalette::Text)));
    axis->setSubTickPen(QPen(p.color(QPalette::Text)));
    axis->setTickLabelColor(p.color(QPalette::Text));
    axis->setLabelColor(p.color(QPalette::Text));
  }
  plot->legend->setBrush(p.color(QPalette::Base));
  plot->legend->setTextColor(p.color(QPalette::Text));
}

}  // namespace peat::views
