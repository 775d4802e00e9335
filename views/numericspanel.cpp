// SPDX-License-Identifier: MIT
#include "views/qcustomplot_include.h"  // first: see the header

#include "views/numericspanel.h"
#include "views/jobtracker.h"

#include <QComboBox>
#include <QLabel>
#include <QVBoxLayout>

#include <cmath>

#include "views/palette.h"
#include "views/plotstyle.h"

namespace peat::views {

namespace {
QString qs(const std::string& s) { return QString::fromStdString(s); }
bool isShare(const std::string& q) { return q.size() > 9 && (q.rfind("_underflow") == q.size() - 10 || q.rfind("_saturated") == q.size() - 10); }
}  // namespace

NumericsPanel::NumericsPanel(QWidget* parent)
    : QWidget(parent), jobs_(new JobTracker(this)), quantityJobs_(new JobTracker(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  quantity_ = new QComboBox(this);
  quantity_->setToolTip(tr("What colours each layer and iteration: the share of the layer's forward output that underflows\n"
                           "or saturates in a format (plain, with one scale per tensor, or block-scaled), its dynamic range, or amax"));
  info_ = new QLabel(this);
  info_->setWordWrap(true);
  plot_ = newTrackingPlot(this);
  plot_->setMinimumSize(320, 240);
  layout->addWidget(quantity_);
  layout->addWidget(info_);
  layout->addWidget(plot_, 1);
  connect(quantity_, &QComboBox::currentTextChanged, this, [this](const QString&) { draw(); });
  connect(plot_, &QCustomPlot::mouseMove, this, &NumericsPanel::hover);
  info_->setText(tr("Select a profile run recorded with peat profile --numerics"));
}

void NumericsPanel::showRun(const QString& run, const std::vector<std::string>& quantities, GridLoader loader) {
  quantityJobs_->cancel();
  run_ = run;
  loader_ = std::move(loader);
  const QString keep = quantity_->currentText();
  {
    const QSignalBlocker block(quantity_);
    quantity_->clear();
    for (const std::string& q : quantities) quantity_->addItem(qs(q));
    int at = quantity_->findText(keep.isEmpty() ? QStringLiteral("plain_e4m3_underflow") : keep);
    if (at < 0) at = quantity_->findText(QStringLiteral("plain_e4m3_underflow"));
    quantity_->setCurrentIndex(std::max(at, 0));
  }
  draw();
}

void NumericsPanel::loadRun(const QString& run, std::function<std::vector<std::string>()> quantities, GridLoader loader) {
  jobs_->cancel();
  loader_ = nullptr;  // the run shown before is no longer drawn
  plot_->clearPlottables();
  plot_->clearItems();
  grid_ = {};
  info_->setText(tr("Reading the numerics of %1 ...").arg(run));
  plot_->replot();
  quantityJobs_->start<std::vector<std::string>>(
      std::move(quantities),
      [this, run, loader = std::move(loader)](const std::vector<std::string>& q) {
        showRun(run, q, loader);
        if (!jobs_->pending()) emit gridShown();  // no quantity to read: the read has ended here
      },
      [this, run](const QString& why) {
        info_->setText(tr("The numerics of %1 could not be read: %2").arg(run, why));
        plot_->replot();
        emit gridShown();
      });
}

void NumericsPanel::setQuantity(const QString& quantity) { quantity_->setCurrentText(quantity); }

void NumericsPanel::draw() {
  jobs_->cancel();
  plot_->clearPlottables();
  plot_->clearItems();
  grid_ = {};
  if (!loader_ || quantity_->currentText().isEmpty()) return;
  const std::string quantity = quantity_->currentText().toStdString();
  info_->setText(tr("Reading %1 of %2 ...").arg(qs(quantity), run_));
  plot_->replot();
  jobs_->start<analyzer::NumericsGrid>(
      [load = loader_, quantity] { return load(quantity); },
      [this](const analyzer::NumericsGrid& g) {
        grid_ = g;
        drawGrid();
        emit gridShown();
      },
      [this](const QString& why) {
        info_->setText(why);
        plot_->replot();
        emit gridShown();
      });
}

bool NumericsPanel::loading() const { return jobs_->pending() || quantityJobs_->pending(); }

void NumericsPanel::dropLoad() { quantityJobs_->cancel(); }

void NumericsPanel::drawGrid() {
  const int rows = int(grid_.layers.size()), cols = int(grid_.iterations.size());
  if (rows == 0 || cols == 0) {
    info_->setText(tr("%1: no forward outputs in the numerics table").arg(run_));
    plot_->replot();
    return;
  }
  auto* map = new QCPColorMap(plot_->xAxis, plot_->yAxis);
  map->data()->setSize(cols, rows);
  map->data()->setRange(QCPRange(0, cols - 1), QCPRange(0, rows - 1));
  double lo = HUGE_VAL, hi = -HUGE_VAL;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const double v = grid_.values[std::size_t(r) * std::size_t(cols) + std::size_t(c)];
      map->data()->setCell(c, r, v);
      if (!std::isnan(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    }
  const bool share = isShare(grid_.quantity);
  if (share) lo = 0, hi = std::max(hi, 1e-9);
  if (!(hi > lo)) hi = lo + 1;
  map->setInterpolate(false);
  if (!scale_) {
    scale_ = new QCPColorScale(plot_);
    plot_->plotLayout()->addElement(0, 1, scale_);
  }
  map->setColorScale(scale_);
  scale_->setGradient(palette::viridisGradient());
  scale_->setDataRange(QCPRange(lo, hi));
  scale_->setLabel(share ? tr("share of the output's nonzero values") : qs(grid_.quantity));
  QSharedPointer<QCPAxisTickerText> layers(new QCPAxisTickerText), iterations(new QCPAxisTickerText);
  for (int r = 0; r < rows; ++r) layers->addTick(r, qs(grid_.layers[std::size_t(r)]));
  const int step = std::max(1, cols / 12);
  for (int c = 0; c < cols; c += step) iterations->addTick(c, QString::number(grid_.iterations[std::size_t(c)]));
  plot_->yAxis->setTicker(layers);
  plot_->xAxis->setTicker(iterations);
  plot_->yAxis->setRange(-0.5, rows - 0.5);
  plot_->yAxis->setRangeReversed(true);
  plot_->xAxis->setRange(-0.5, cols - 0.5);
  plot_->xAxis->setLabel(tr("iteration"));
  plot_->yAxis->setLabel(tr("layer (forward output)"));
  info_->setText(tr("%1: %2 by layer and recorded iteration (%3 layers, %4 iterations); largest %5")
                     .arg(run_, qs(grid_.quantity))
                     .arg(rows)
                     .arg(cols)
                     .arg(share ? QString::number(100 * hi, 'f', 2) + QLatin1Char('%') : QString::number(hi, 'g', 4)));
  followPalette(plot_);
  plot_->replot();
}

void NumericsPanel::hover(QMouseEvent* event) {
  const int rows = int(grid_.layers.size()), cols = int(grid_.iterations.size());
  if (!rows || !cols) return;
  const int c = int(std::lround(plot_->xAxis->pixelToCoord(event->position().x())));
  const int r = int(std::lround(plot_->yAxis->pixelToCoord(event->position().y())));
  if (r < 0 || r >= rows || c < 0 || c >= cols) return;
  const double v = grid_.values[std::size_t(r) * std::size_t(cols) + std::size_t(c)];
  plot_->setToolTip(tr("%1, iteration %2: %3 = %4")
                        .arg(qs(grid_.layers[std::size_t(r)]))
                        .arg(grid_.iterations[std::size_t(c)])
                        .arg(qs(grid_.quantity))
                        .arg(std::isnan(v) ? tr("no call") : QString::number(v, 'g', 5)));
}

QString NumericsPanel::csv() const {
  QStringList lines;
  lines << QStringLiteral("layer,iteration,%1").arg(qs(grid_.quantity));
  for (std::size_t r = 0; r < grid_.layers.size(); ++r)
    for (std::size_t c = 0; c < grid_.iterations.size(); ++c)
      lines << QStringLiteral("%1,%2,%3").arg(qs(grid_.layers[r])).arg(grid_.iterations[c])
                   .arg(grid_.values[r * grid_.iterations.size() + c], 0, 'g', 9);
  return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
}

}  // namespace peat::views
