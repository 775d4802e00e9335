// SPDX-License-Identifier: MIT
#pragma once
// What File > Export and Edit > Copy act on: the plot or table last used (clicked, scrolled or
// focused) while it is in view; else the current page's plot (or picture) and table, and for the
// pages not listed here (Overview, Call) the Error distribution dock's plot and the verdict table.
// Every file names what it shows (the session, run and call: `setDescriber`).
#include <QObject>
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

class PageExport : public QObject {
 public:
  // What is shown: the session file, the tree item ("bf16/iteration 0/#0 conv1") and its call path.
  struct Shown {
    QString session, item, call;
  };
  PageExport(QTabWidget* central, SavePanel* save, CurvePanel* curves, NumericsPanel* numerics, ComparePanel* compare,
             ErrorPlotPanel* dock, VerdictTableModel* verdicts);
  QCustomPlot* currentPlot() const;  // null: the SAVE page's current picture is no plot
  QString currentCsv() const;  // with a first line "# ..." naming what it shows
  // The plot or table the user worked with last: presses, wheels and focus on every plot under
  // `window` and on `table` are watched.
  void watch(QWidget* window, QWidget* table);
  void noteUsed(QWidget* widget);
  void setShown(std::function<Shown()> shown) { shown_ = std::move(shown); }
  // What the exports show, in words ("PEAT Workbench: session demo.h5, bf16/iteration 0/#0 conv1
  // (call iterations/000000/calls/000000)"); "" with no session.
  QString description() const;
  // File > Export's suggested file name (no suffix): the session and the item ("demo-bf16-iteration-0-0-conv1").
  QString suggestedName() const;
  QWidget* currentPicture() const;  // what a copy or an export draws when there is no plot
  // Writes the plot (PNG, SVG or PDF by the suffix) or the table (CSV) to `path`; false with `error`.
  bool exportPlot(const QString& path, QString* error) const;
  bool exportTable(const QString& path, QString* error) const;
  // File > Export: asks for a file (named after what is shown) and writes the plot or the table;
  // false with `message` the error, or "" when the user cancelled; true with "Wrote PATH".
  bool exportByDialog(QWidget* parent, bool table, QString* message) const;

 private:
  QTabWidget* central_;
  SavePanel* save_;
  CurvePanel* curves_;
  NumericsPanel* numerics_;
  ComparePanel* compare_;
  ErrorPlotPanel* dock_;
  VerdictTableModel* verdicts_;
  QPointer<QWidget> lastUsed_;
  std::function<Shown()> shown_;
  QWidget* table_ = nullptr;
  bool eventFilter(QObject* watched, QEvent* event) override;
  QWidget* usedInView() const;  // lastUsed_ while it is on screen
  QString pageCsv() const;      // the current page's table
};

// Writes a widget as PNG, SVG or PDF, chosen by the file's suffix; false (with `error` set) on
// failure. `description` (the session, run and call shown) goes into the file: the PNG's
// Description text, the SVG's description, the PDF's title.
bool exportWidget(QWidget* widget, const QString& path, QString* error, const QString& description = {});
// The same for a plot.
bool exportPlot(QCustomPlot* plot, const QString& path, QString* error, const QString& description = {});

}  // namespace peat::views
