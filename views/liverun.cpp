// SPDX-License-Identifier: MIT
#include "views/liverun.h"

#include <QFileInfo>

#include <QTabWidget>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "views/curvepanel.h"
#include "views/runpanel.h"
#include "views/savepanel.h"

namespace peat::views {

LiveRun::LiveRun(RunPanel* run, SavePanel* save, CurvePanel* curves, QTabWidget* central, QObject* parent)
    : QObject(parent), save_(save), curves_(curves), central_(central) {
  connect(run, &RunPanel::livePoint, this, &LiveRun::addPoint);
  connect(run, &RunPanel::liveLoss, this, &LiveRun::addLoss);
}

void LiveRun::begin() {
  campaign_ = {};
  curve_ = {};
  golden_ = {};
  shown_ = false;
}

void LiveRun::addPoint(const QString& scheme, double flips, double accuracy) {
  campaign_.run = "running campaign";
  auto it = std::find_if(campaign_.series.begin(), campaign_.series.end(),
                         [&](const save::CampaignSeries& s) { return s.scheme == scheme.toStdString(); });
  if (it == campaign_.series.end()) {
    campaign_.series.push_back({scheme.toStdString(), {}, {}, {}, 0});
    it = std::prev(campaign_.series.end());
  }
  const auto at = std::upper_bound(it->flips.begin(), it->flips.end(), flips) - it->flips.begin();
  it->flips.insert(it->flips.begin() + at, flips);
  it->accuracy.insert(it->accuracy.begin() + at, accuracy);
  it->errorRate.insert(it->errorRate.begin() + at, 0.0);
  save_->showCampaign(campaign_);
  if (!shown_) {
    shown_ = true;
    save_->setCurrentTab(SavePanel::CampaignTab);
    central_->setCurrentWidget(save_);
  }
}

void LiveRun::end(bool ok, const QString& message, const QString& session) {
  if (!shown_) return;
  const QString file = session.isEmpty() ? tr("no session") : QFileInfo(session).fileName();
  const QString how = ok ? tr("finished") : message.startsWith(QStringLiteral("Cancelled")) ? tr("cancelled") : tr("failed");
  const QString about = tr("The run that wrote %1 (%2): %3").arg(file, how, message);
  if (!campaign_.series.empty()) {
    campaign_.run = tr("%1 campaign in %2").arg(how, file).toStdString();
    save_->showCampaign(campaign_);
  }
  if (!curve_.iteration.empty()) {
    curve_.run = tr("%1 run in %2").arg(how, file).toStdString();
    curves_->showCurves(curve_, golden_, about);
  }
}

void LiveRun::addLoss(double iteration, double loss, double candidateLoss) {
  const bool twin = std::isfinite(candidateLoss);
  // peat record --swap runs the script twice: the golden pass's own curve gives way to the pair
  // (the twin's events carry the golden loss beside the candidate's)
  if (twin && curve_.run == "running") curve_ = {};
  curve_.run = twin ? "live run" : "running";
  curve_.iteration.push_back(iteration - 1);  // progress counts finished iterations
  curve_.loss.push_back(twin ? candidateLoss : loss);
  for (auto* v : {&curve_.accuracy, &curve_.testLoss, &curve_.testAccuracy}) v->push_back(std::nan(""));
  if (twin) {
    golden_.run = "golden";
    golden_.iteration.push_back(iteration - 1);
    golden_.loss.push_back(loss);
    for (auto* v : {&golden_.accuracy, &golden_.testLoss, &golden_.testAccuracy}) v->push_back(std::nan(""));
  }
  curves_->showCurves(curve_, golden_);
  if (!shown_) {
    shown_ = true;
    central_->setCurrentWidget(curves_);
  }
}

}  // namespace peat::views
