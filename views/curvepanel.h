// SPDX-License-Identifier: MIT
#pragma once
#include <QWidget>

#include <functional>
#include <optional>

#include "core/store/curves.h"

class QCustomPlot;
class QMouseEvent;
class QLabel;

namespace peat::views {

class JobTracker;

// A run's curves as its load reads them: none for a run that did not train.
struct RunCurves {
  std::optional<store::TrainingCurve> curve, golden;
  QString about;  // what the run is (CurvePanel::showCurves)
};

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
  // No curves: `text` (loading, the reason a run has none) in their place. Both drop a load in flight.
  void showMessage(const QString& text);
  // Reads a run's curves off the GUI thread in the page's own job (`read` holds the session reader
  // it reads); "Loading TITLE ..." until it delivers, then the curves, or why there are none.
  void load(const QString& title, std::function<RunCurves()> read);
  bool loading() const;  // a load has not delivered yet
  void dropLoad();       // a load in flight will not be shown (what is shown stays)
  QString summaryText() const;
  QCustomPlot* plot() const { return plot_; }
  QString csv() const;

 signals:
  void curvesShown(bool trained);  // a load delivered: the curves, or (false) why there are none
  void readFailed(const QString& why);

 private:
  void hover(QMouseEvent* event);
  QCustomPlot* plot_;
  QLabel* summary_;
  store::TrainingCurve run_, golden_;
  JobTracker* jobs_;
};

}  // namespace peat::views
