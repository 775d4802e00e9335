// SPDX-License-Identifier: MIT
#pragma once
// The title labels at the top of the pages (overview, tour, call page).
#include <QFont>
#include <QLabel>

namespace peat::views {

// Makes `label` a heading: its font `scale` times as large, and bold.
inline void makeHeading(QLabel* label, double scale) {
  QFont f = label->font();
  f.setPointSizeF(f.pointSizeF() * scale);
  f.setBold(true);
  label->setFont(f);
}

}  // namespace peat::views
