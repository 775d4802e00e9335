// SPDX-License-Identifier: MIT
#pragma once
// A run's results as they arrive, drawn from its progress lines while the writer still holds the
// session file: the campaign's points per scheme (kept sorted by flips) and the training loss (the
// golden loss beside it for a run with a twin). The first result brings its page forward.
#include <QObject>
#include <QString>

#include "core/save/campaign_record.h"
#include "core/store/curves.h"

class QTabWidget;

namespace peat::views {

class CurvePanel;
class RunPanel;
class SavePanel;

class LiveRun : public QObject {
  Q_OBJECT
 public:
  // Follows `run`'s live points and losses.
  LiveRun(RunPanel* run, SavePanel* save, CurvePanel* curves, QTabWidget* central, QObject* parent);
  void begin();  // a run started: nothing of an earlier one stays
  void addPoint(const QString& scheme, double flips, double accuracy);
  void addLoss(double iteration, double loss, double candidateLoss);  // candidateLoss NaN: no twin
  // The run ended (`ok`, or cancelled or failed as `message` says) writing `session`: the live result
  // stays up, named by the file it went to and how it ended, not as "running" under whatever session
  // the window shows.
  void end(bool ok, const QString& message, const QString& session);
  bool shown() const { return shown_; }  // a live result is on a page
  void forget() { shown_ = false; }      // a selection (or a session) replaces it

 private:
  SavePanel* save_;
  CurvePanel* curves_;
  QTabWidget* central_;
  save::StoredCampaign campaign_;             // the running campaign's points so far
  store::TrainingCurve curve_, golden_;      // the running training's loss so far
  bool shown_ = false;
};

}  // namespace peat::views
