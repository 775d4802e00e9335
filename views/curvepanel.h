// SPDX-License-Identifier: MIT
#pragma once
#include <QWidget>

#include "core/store/curves.h"

class QCustomPlot;
class QMouseEvent;
class QLabel;

namespace peat::views {

// Training curves: a run's loss (left axis) and accuracy (right axis) against the iteration; for a
// runtime fault-injection run, its golden twin beside it and a marker at every iteration where the
// candidate kernel was substituted.
class CurvePanel : public QWidget {
  Q_OBJECT
 public:
  explicit CurvePanel(QWidget* parent = nullptr);
  // `golden` may be empty (no twin). `about`: what the run is (its kernel and how it was swapped in),
  // shown above the plot with, for a runtime fault-injection run, how it diverged from its twin.
  void showCurves(const store::TrainingCurve& run, const store::TrainingCurve& golden, const QString& about = QString());
  // No curves: `text` (loading, the reason a run has none) in their place.
  void showMessage(const QString& text);
  QString summaryText() const;
  QCustomPlot* plot() const { return plot_; }
  QString csv() const;

 private:
  void hover(QMouseEvent* event);
  QCustomPlot* plot_;
  QLabel* summary_;
  store::TrainingCurve run_, golden_;
};

}  // namespace peat::views
