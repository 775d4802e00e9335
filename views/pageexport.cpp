// SPDX-License-Identifier: MIT
#include "views/pageexport.h"

#include <QTabWidget>

#include "core/util/files.h"
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
  try {  // a fresh file renamed over PATH: a link planted there is refused, never written through
    util::writeFileAtomically(path.toStdString(), true, currentCsv().toStdString());
    return true;
  } catch (const util::FileRefused& e) {
    *error = QString::fromStdString(e.what());
    return false;
  }
}

}  // namespace peat::views
