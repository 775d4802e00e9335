// SPDX-License-Identifier: MIT
#pragma once
#include <QWidget>

#include "core/store/curves.h"

class QCustomPlot;
class QMouseEvent;

namespace peat::views {

// Training curves: a run's loss (left axis) and accuracy (right axis) against the iteration; for a
// runtime fault-injection run, its golden twin beside it and a marker at every iteration where the
// candidate kernel was substituted.
class CurvePanel : public QWidget {
  Q_OBJECT
 public:
  explicit CurvePanel(QWidget* parent = nullptr);
  // `golden` may be empty (no twin).
  void showCurves(const store::TrainingCurve& run, const store::TrainingCurve& golden);
  QCustomPlot* plot() const { return plot_; }
  QString csv() const;

 private:
  void hover(QMouseEvent* event);
  QCustomPlot* plot_;
  store::TrainingCurve run_, golden_;
};

}  // namespace peat::views
