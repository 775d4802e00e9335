// SPDX-License-Identifier: MIT
#include "views/qcustomplot_include.h"  // first: see the header

#include <QVBoxLayout>

#include "views/errorplotpanel.h"

namespace peat::views {

ErrorPlotPanel::ErrorPlotPanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  plot_ = new QCustomPlot(this);
  plot_->xAxis->setLabel(tr("log2 |candidate - golden|"));
  plot_->yAxis->setLabel(tr("elements"));
  plot_->xAxis->setRange(-40, 10);
  plot_->yAxis->setRange(0, 1);
  layout->addWidget(plot_);
  showMessage(tr("No error report selected"));
}

void ErrorPlotPanel::showMessage(const QString& text) {
  plot_->clearItems();
  auto* label = new QCPItemText(plot_);
  label->position->setType(QCPItemPosition::ptAxisRectRatio);
  label->position->setCoords(0.5, 0.5);
  label->setText(text);
  label->setColor(QColor(0x70, 0x70, 0x70));
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace peat::views
