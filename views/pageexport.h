// SPDX-License-Identifier: MIT
#pragma once
// What File > Export and Edit > Copy act on: the current page's plot (or picture) and table. The
// pages not listed here (Overview, Call) export the Error distribution dock's plot and the
// verdict table.
#include <QString>

class QCustomPlot;
class QTabWidget;
class QWidget;

namespace peat::views {

class ComparePanel;
class CurvePanel;
class ErrorPlotPanel;
class NumericsPanel;
class SavePanel;
class VerdictTableModel;

class PageExport {
 public:
  PageExport(QTabWidget* central, SavePanel* save, CurvePanel* curves, NumericsPanel* numerics, ComparePanel* compare,
             ErrorPlotPanel* dock, VerdictTableModel* verdicts);
  QCustomPlot* currentPlot() const;  // null: the SAVE page's current picture is no plot
  QString currentCsv() const;
  QWidget* currentPicture() const;  // what a copy or an export draws when there is no plot
  // Writes the plot (PNG, SVG or PDF by the suffix) or the table (CSV) to `path`; false with `error`.
  bool exportPlot(const QString& path, QString* error) const;
  bool exportTable(const QString& path, QString* error) const;

 private:
  QTabWidget* central_;
  SavePanel* save_;
  CurvePanel* curves_;
  NumericsPanel* numerics_;
  ComparePanel* compare_;
  ErrorPlotPanel* dock_;
  VerdictTableModel* verdicts_;
};

}  // namespace peat::views
