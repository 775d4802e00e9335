// SPDX-License-Identifier: MIT
#pragma once
// What File > Export and Edit > Copy act on: the plot or table last used (clicked, scrolled or
// focused) while it is in view; else the current page's plot (or picture) and table, and for the
// pages not listed here (Overview, Call) the Error distribution dock's plot and the verdict table.
// Every file names what it shows (the session, run and call: `setDescriber`).
#include <QPointer>
#include <QString>

#include <functional>

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
  QString currentCsv() const;  // with a first line "# ..." naming what it shows
  // The plot or table the user worked with last (MainWindow reports presses, wheels and focus).
  void noteUsed(QWidget* widget);
  // What the exports show, in words ("session demo.h5, run bf16, call iterations/000000/calls/000000").
  void setDescriber(std::function<QString()> describe) { describe_ = std::move(describe); }
  QString description() const { return describe_ ? describe_() : QString(); }
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
  QPointer<QWidget> lastUsed_;
  std::function<QString()> describe_;
  QWidget* usedInView() const;  // lastUsed_ while it is on screen
  QString pageCsv() const;      // the current page's table
};

}  // namespace peat::views
