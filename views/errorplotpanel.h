// SPDX-License-Identifier: MIT
#pragma once
#include <QWidget>

class QCustomPlot;

namespace peat::views {

// The place for error distributions (log2 |error|, log2 ULP). Histograms arrive with the analyzer;
// until a report is selected it shows empty, labelled axes and says why.
class ErrorPlotPanel : public QWidget {
  Q_OBJECT
 public:
  explicit ErrorPlotPanel(QWidget* parent = nullptr);
  void showMessage(const QString& text);
  QCustomPlot* plot() const { return plot_; }

 private:
  QCustomPlot* plot_;
};

}  // namespace peat::views
