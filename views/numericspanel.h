// SPDX-License-Identifier: MIT
#pragma once
#include <QWidget>

#include <functional>
#include <string>
#include <vector>

#include "core/analysis/numerics_record.h"

class QComboBox;
class QCustomPlot;
class QCPColorScale;
class QLabel;
class QMouseEvent;

namespace peat::views {

// A profile run's numerics over training (issue 21): a heat map of layers (rows) by recorded
// iterations (columns), coloured by one quantity of the layers' forward outputs: the share of
// values that underflow or saturate in a chosen format (plain, with one scale per tensor, or
// block-scaled), the dynamic range in binades, or amax. What it draws comes from
// core/analysis/numerics_record.h; colours from views/palette.h.
class JobTracker;

class NumericsPanel : public QWidget {
  Q_OBJECT
 public:
  // Reads one quantity's grid; run off the GUI thread in the page's own job tracker (it must hold
  // the session reader it reads, not look it up).
  using GridLoader = std::function<analyzer::NumericsGrid(const std::string& quantity)>;
  explicit NumericsPanel(QWidget* parent = nullptr);
  void showRun(const QString& run, const std::vector<std::string>& quantities, GridLoader loader);
  // Reads the run's quantities off the GUI thread in the page's job (`quantities` holds the reader
  // it reads), then shows the run as showRun does.
  void loadRun(const QString& run, std::function<std::vector<std::string>()> quantities, GridLoader loader);
  void setQuantity(const QString& quantity);
  QCustomPlot* plot() const { return plot_; }
  const analyzer::NumericsGrid& grid() const { return grid_; }
  bool loading() const;  // a run's quantities or a grid is being read
  void dropLoad();       // a quantities read in flight will not be shown (a grid read goes on)

  QString csv() const;

 signals:
  void gridShown();  // a grid was read and drawn (or why not)


 private:
  void draw();      // reads the chosen quantity's grid
  void drawGrid();  // ... and draws it
  void hover(QMouseEvent* event);
  QComboBox* quantity_;
  QLabel* info_;
  QCustomPlot* plot_;
  QCPColorScale* scale_ = nullptr;
  GridLoader loader_;
  JobTracker* jobs_;          // the grid shown
  JobTracker* quantityJobs_;  // a run's quantities
  QString run_;
  analyzer::NumericsGrid grid_;
};

}  // namespace peat::views
