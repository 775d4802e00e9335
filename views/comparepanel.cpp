// SPDX-License-Identifier: MIT
#include "views/qcustomplot_include.h"  // first: see the header

#include "views/comparepanel.h"

#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>

#include "views/errorplotpanel.h"

namespace peat::views {

namespace {

QWidget* side(QWidget* parent, QLabel** title, ErrorPlotPanel** panel) {
  auto* box = new QWidget(parent);
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 0, 0, 0);
  *title = new QLabel(box);
  (*title)->setTextInteractionFlags(Qt::TextSelectableByMouse);
  (*title)->setWordWrap(true);
  *panel = new ErrorPlotPanel(box);
  layout->addWidget(*title);
  layout->addWidget(*panel, 1);
  return box;
}

// Union of the two axes' ranges, set on both.
void shareRange(QCPAxis* a, QCPAxis* b) {
  const QCPRange ra = a->range(), rb = b->range();
  const QCPRange both(std::min(ra.lower, rb.lower), std::max(ra.upper, rb.upper));
  a->setRange(both);
  b->setRange(both);
}

}  // namespace

ComparePanel::ComparePanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* vertical = new QSplitter(Qt::Vertical, this);
  auto* sides = new QSplitter(Qt::Horizontal, vertical);
  sides->addWidget(side(sides, &leftTitle_, &left_));
  sides->addWidget(side(sides, &rightTitle_, &right_));
  table_ = new QTableWidget(0, 4, vertical);
  table_->setHorizontalHeaderLabels({tr("Measure"), tr("Left"), tr("Right"), tr("Right / left")});
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setToolTip(tr("The two calls' numbers side by side. Right / left above 1: the right call errs more."));
  vertical->addWidget(sides);
  vertical->addWidget(table_);
  vertical->setStretchFactor(0, 4);
  vertical->setStretchFactor(1, 1);
  layout->addWidget(vertical);
  // the error measure follows from one side to the other, and the axes stay shared
  connect(left_, &ErrorPlotPanel::scaleChanged, this, [this](ErrorPlotPanel::Scale s) {
    right_->setScale(s);
    alignAxes();
  });
  connect(right_, &ErrorPlotPanel::scaleChanged, this, [this](ErrorPlotPanel::Scale s) {
    left_->setScale(s);
    alignAxes();
  });
  showMessage(tr("Select two analysed calls (Ctrl+click: two calls, or one call in two playback runs) and choose "
                 "Compare > Compare Selected (Ctrl+D). To compare sessions, open the second one with "
                 "Compare > Compare With Session."));
}

void ComparePanel::showMessage(const QString& text) {
  hasPair_ = false;
  left_->showMessage(QString());
  right_->showMessage(QString());
  leftTitle_->setText(text);
  rightTitle_->clear();
  table_->setRowCount(0);
}

void ComparePanel::showPair(const analyzer::StoredCallReport& left, const QString& leftTitle,
                            const analyzer::StoredCallReport& right, const QString& rightTitle) {
  hasPair_ = true;
  leftTitle_->setText(tr("<b>Left:</b> %1").arg(leftTitle.toHtmlEscaped()));
  rightTitle_->setText(tr("<b>Right:</b> %1").arg(rightTitle.toHtmlEscaped()));
  left_->showReports({left});
  right_->showReports({right});
  alignAxes();

  struct Row {
    QString name;
    double l, r;
  };
  const Row rows[] = {{tr("elements"), left.elements, right.elements},
                      {tr("mismatched elements"), left.mismatched, right.mismatched},
                      {tr("max |error|"), left.maxAbs, right.maxAbs},
                      {tr("mean |error|"), left.meanAbs, right.meanAbs},
                      {tr("p99 |error|"), left.p99, right.p99}};
  table_->setRowCount(int(std::size(rows)) + 1);
  int i = 0;
  for (const Row& row : rows) {
    table_->setItem(i, 0, new QTableWidgetItem(row.name));
    table_->setItem(i, 1, new QTableWidgetItem(QString::number(row.l, 'g', 6)));
    table_->setItem(i, 2, new QTableWidgetItem(QString::number(row.r, 'g', 6)));
    table_->setItem(i, 3, new QTableWidgetItem(row.l != 0 ? QString::number(row.r / row.l, 'g', 4)
                                                          : row.r == 0 ? QStringLiteral("1") : QStringLiteral("-")));
    ++i;
  }
  table_->setItem(i, 0, new QTableWidgetItem(tr("verdict")));
  table_->setItem(i, 1, new QTableWidgetItem(QString::fromStdString(left.verdict)));
  table_->setItem(i, 2, new QTableWidgetItem(QString::fromStdString(right.verdict)));
  table_->setItem(i, 3, new QTableWidgetItem(left.verdict == right.verdict ? tr("same") : tr("differ")));
}

void ComparePanel::alignAxes() {
  if (!hasPair_) return;
  shareRange(left_->plot()->xAxis, right_->plot()->xAxis);
  shareRange(left_->plot()->yAxis, right_->plot()->yAxis);
  for (ErrorPlotPanel* p : {left_, right_}) {
    p->plot()->replot();  // bit counts keep their own scale: one flipped element next to thousands of rounded ones
  }
}

QString ComparePanel::csv() const {
  QStringList lines{QStringLiteral("measure,left,right,right_over_left")};
  for (int r = 0; r < table_->rowCount(); ++r) {
    QStringList cells;
    for (int c = 0; c < 4; ++c) cells << (table_->item(r, c) ? table_->item(r, c)->text() : QString());
    lines << cells.join(QLatin1Char(','));
  }
  return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
}

}  // namespace peat::views
