// SPDX-License-Identifier: MIT
#include "views/pageexport.h"

#include <QCoreApplication>
#include <QFile>
#include <QTabWidget>

#include "views/comparepanel.h"
#include "views/curvepanel.h"
#include "views/errorplotpanel.h"
#include "views/numericspanel.h"
#include "views/savepanel.h"
#include "views/verdicttablemodel.h"

namespace peat::views {

PageExport::PageExport(QTabWidget* central, SavePanel* save, CurvePanel* curves, NumericsPanel* numerics,
                       ComparePanel* compare, ErrorPlotPanel* dock, VerdictTableModel* verdicts)
    : central_(central), save_(save), curves_(curves), numerics_(numerics), compare_(compare), dock_(dock), verdicts_(verdicts) {}

QCustomPlot* PageExport::currentPlot() const {
  if (central_->currentWidget() == save_) return save_->currentPlot();
  if (central_->currentWidget() == curves_) return curves_->plot();
  if (central_->currentWidget() == numerics_) return numerics_->plot();
  if (central_->currentWidget() == compare_) return compare_->left()->plot();
  return dock_->plot();
}

QString PageExport::currentCsv() const {
  if (central_->currentWidget() == save_) return save_->currentCsv();
  if (central_->currentWidget() == curves_) return curves_->csv();
  if (central_->currentWidget() == numerics_) return numerics_->csv();
  if (central_->currentWidget() == compare_) return compare_->csv();
  return verdicts_->csv();
}

QWidget* PageExport::currentPicture() const { return save_->currentPicture(); }

bool PageExport::exportPlot(const QString& path, QString* error) const {
  QCustomPlot* plot = currentPlot();
  return plot ? views::exportPlot(plot, path, error) : exportWidget(currentPicture(), path, error);
}

bool PageExport::exportTable(const QString& path, QString* error) const {
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Text) || file.write(currentCsv().toUtf8()) < 0) {
    *error = QCoreApplication::translate("peat::views::MainWindow", "could not write %1").arg(path);
    return false;
  }
  return true;
}

}  // namespace peat::views
