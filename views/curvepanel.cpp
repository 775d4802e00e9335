// SPDX-License-Identifier: MIT
#include "views/qcustomplot_include.h"  // first: see the header

#include <QLabel>
#include <QToolTip>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "views/curvepanel.h"
#include "views/jobtracker.h"
#include "views/palette.h"
#include "views/plotstyle.h"

namespace peat::views {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

// The finite points of one column against the iterations.
void setCurve(QCPGraph* g, const std::vector<double>& x, const std::vector<double>& y, double scale = 1) {
  QVector<double> kx, ky;
  for (std::size_t i = 0; i < x.size() && i < y.size(); ++i)
    if (std::isfinite(y[i])) {
      kx << x[i];
      ky << scale * y[i];
    }
  g->setData(kx, ky, true);
}

}  // namespace

CurvePanel::CurvePanel(QWidget* parent) : QWidget(parent), jobs_(new JobTracker(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  plot_ = newTrackingPlot(this);
  legendBelow(plot_);  // the loss and accuracy lines cross every corner
  plot_->setToolTip(tr("Training loss (left axis, solid) and accuracy (right axis, dashed) per iteration.\n"
                       "Runtime fault injection: the golden run (grey) and the run with the candidate kernel (red);\n"
                       "triangles mark iterations where the candidate replaced the golden kernel."));
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  summary_->setContentsMargins(6, 4, 6, 4);
  summary_->hide();
  layout->addWidget(summary_);
  layout->addWidget(plot_, 1);
  connect(plot_, &QCustomPlot::mouseMove, this, &CurvePanel::hover);
  showMessage(tr("Select a run that trained (profile or runtime FI)"));
}

void CurvePanel::load(const QString& title, std::function<RunCurves()> read) {
  showMessage(tr("Loading %1 ...").arg(title));
  jobs_->start<RunCurves>(
      std::move(read),
      [this](const RunCurves& c) {
        if (c.curve) {
          showCurves(*c.curve, c.golden ? *c.golden : store::TrainingCurve{}, c.about);
        } else {
          showMessage(tr("%1: no training curve (profile and runtime-FI runs train)").arg(c.about));
        }
        emit curvesShown(c.curve.has_value());
      },
      [this, title](const QString& why) {
        showMessage(tr("%1 could not be read: %2").arg(title, why));
        emit readFailed(why);
      });
}

bool CurvePanel::loading() const { return jobs_->pending(); }

void CurvePanel::dropLoad() { jobs_->cancel(); }

void CurvePanel::showMessage(const QString& text) {
  jobs_->cancel();
  run_ = {};
  golden_ = {};
  summary_->hide();
  plot_->clearPlottables();
  plot_->clearItems();
  showLegendBelow(plot_, false);
  centredNote(plot_, text);
  plot_->replot();
}

QString CurvePanel::summaryText() const { return summary_->isVisible() ? summary_->text() : QString(); }

void CurvePanel::showCurves(const store::TrainingCurve& run, const store::TrainingCurve& golden, const QString& about) {
  jobs_->cancel();
  run_ = run;
  golden_ = golden;
  QString summary = about.toHtmlEscaped();
  if (!golden.iteration.empty()) {
    const store::CurveDivergence d = store::compareCurves(run, golden);
    const auto number = [](double v) { return std::isfinite(v) ? QString::number(v, 'g', 6) : tr("-"); };
    summary += tr("<br>Beside its golden twin <b>%1</b> (the same seed and data): ").arg(qs(golden.run).toHtmlEscaped());
    summary += d.substituted > 0 ? tr("the candidate was substituted at %n iteration(s); ", nullptr, int(d.substituted))
                                 : tr("the curve table records no iteration with a substituted call; ");
    summary += d.firstDifference < 0
                   ? tr("the losses are <b>bit-identical</b> over the %1 iterations both measured.").arg(d.iterations)
                   : tr("the losses first differ at iteration <b>%1</b>; the largest |difference| is %2 at iteration %3.")
                         .arg(d.firstDifference)
                         .arg(number(d.largestDifference))
                         .arg(d.largestAt);
    summary += tr(" Last loss %1 (golden %2); last test accuracy %3 (golden %4).")
                   .arg(number(d.finalLoss), number(d.goldenFinalLoss),
                        std::isfinite(d.finalTestAccuracy) ? number(100 * d.finalTestAccuracy) + QLatin1Char('%') : tr("-"),
                        std::isfinite(d.goldenFinalTestAccuracy) ? number(100 * d.goldenFinalTestAccuracy) + QLatin1Char('%') : tr("-"));
  }
  summary_->setText(summary);
  summary_->setVisible(!summary.isEmpty());
  plot_->clearPlottables();
  plot_->clearItems();
  plot_->yAxis2->setVisible(true);
  plot_->yAxis2->setLabel(tr("accuracy (%)"));
  plot_->yAxis2->setRange(0, 100);
  plot_->yAxis->setLabel(tr("training loss"));
  plot_->xAxis->setLabel(tr("iteration"));
  const bool twin = !golden.iteration.empty();
  const QColor runColor = palette::series(twin ? 1 : 0), goldColor(0xb0, 0xb0, 0xb0);
  auto add = [&](const store::TrainingCurve& c, const QColor& color, const QString& who) {
    QCPGraph* loss = plot_->addGraph(plot_->xAxis, plot_->yAxis);
    loss->setName(tr("%1 loss").arg(who));
    loss->setPen(QPen(color, &c == &golden ? 5 : 2));  // the golden run wide underneath: both stay visible
    setCurve(loss, c.iteration, c.loss);
    QCPGraph* accuracy = plot_->addGraph(plot_->xAxis, plot_->yAxis2);
    accuracy->setName(tr("%1 accuracy").arg(who));
    QPen dashed(color, 1.5);
    dashed.setStyle(Qt::DashLine);
    accuracy->setPen(dashed);
    setCurve(accuracy, c.iteration, c.accuracy, 100);
    return loss;
  };
  if (twin) add(golden, goldColor, tr("golden"));
  QCPGraph* loss = add(run, runColor, twin ? tr("%1 (candidate)").arg(qs(run.run)) : qs(run.run));
  if (!run.substituted.empty()) {  // markers on the loss curve at the substituted iterations
    QCPGraph* marks = plot_->addGraph(plot_->xAxis, plot_->yAxis);
    marks->setName(tr("candidate substituted"));
    marks->setLineStyle(QCPGraph::lsNone);
    marks->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssTriangle, runColor, runColor, 7));
    QVector<double> x, y;
    for (double it : run.substituted) {
      const auto at = std::find(run.iteration.begin(), run.iteration.end(), it);
      if (at == run.iteration.end()) continue;
      const double v = run.loss[std::size_t(at - run.iteration.begin())];
      if (!std::isfinite(v)) continue;
      x << it;
      y << v;
    }
    marks->setData(x, y, true);
  }
  bool found = false;
  plot_->xAxis->setRange(loss->getKeyRange(found));
  QCPRange losses = loss->getValueRange(found);
  if (twin) {
    bool other = false;
    const QCPRange g = plot_->graph(0)->getValueRange(other);
    if (other) losses.expand(g);
  }
  plot_->yAxis->setRange(0, found ? losses.upper * 1.1 : 1);
  showLegendBelow(plot_, true);
  plot_->replot();
}

QString CurvePanel::csv() const {
  QStringList lines{QStringLiteral("run,iteration,loss,accuracy,test_loss,test_accuracy")};
  for (const store::TrainingCurve* c : {&golden_, &run_})
    for (std::size_t i = 0; i < c->iteration.size(); ++i)
      lines << QStringLiteral("%1,%2,%3,%4,%5,%6").arg(qs(c->run)).arg(c->iteration[i]).arg(c->loss[i], 0, 'g', 8)
                   .arg(c->accuracy[i], 0, 'g', 8).arg(c->testLoss[i], 0, 'g', 8).arg(c->testAccuracy[i], 0, 'g', 8);
  return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
}

void CurvePanel::hover(QMouseEvent* event) {
  if (run_.iteration.empty()) return;
  const double it = std::round(plot_->xAxis->pixelToCoord(event->position().x()));
  QStringList lines{tr("iteration %1").arg(it)};
  for (const store::TrainingCurve* c : {&golden_, &run_}) {
    const auto at = std::find(c->iteration.begin(), c->iteration.end(), it);
    if (at == c->iteration.end()) continue;
    const std::size_t i = std::size_t(at - c->iteration.begin());
    lines << tr("%1: loss %2, accuracy %3%").arg(qs(c->run)).arg(c->loss[i], 0, 'g', 4).arg(100 * c->accuracy[i], 0, 'f', 1);
  }
  if (std::binary_search(run_.substituted.begin(), run_.substituted.end(), it)) lines << tr("candidate substituted here");
  QToolTip::showText(event->globalPosition().toPoint(), lines.join(QLatin1Char('\n')), plot_);
}

}  // namespace peat::views
