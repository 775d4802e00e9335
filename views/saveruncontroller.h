// SPDX-License-Identifier: MIT
#pragma once
// Brings a SAVE run's outputs to the SAVE tab's Run outputs page: when the run panel's `peat save
// run` ends, its JSON summary and its outputs file are read (the file off the GUI thread, in a
// JobTracker job that core's summariseOutputs runs in); a failure or a cancel shows as one line.
#include <QJsonObject>
#include <QObject>
#include <QString>

class QTabWidget;

namespace peat::views {

class JobTracker;
class RunPanel;
class SavePanel;
struct SaveRunOutputs;

class SaveRunController : public QObject {
  Q_OBJECT
 public:
  SaveRunController(RunPanel* run, SavePanel* save, QTabWidget* central, QObject* parent);
  bool loading() const;  // the outputs of a finished run are still being read

  // The run's summary and outputs file as the page shows them (on a worker thread; throws with the
  // reason when the file does not hold what the summary says).
  static SaveRunOutputs read(const QJsonObject& result, const QString& input, const QString& outputs);

 signals:
  void outputsShown(bool ok);  // the page shows a run's outputs (true) or why there are none (false)

 private:
  void ended(bool ok, const QString& message, const QJsonObject& result, const QString& input, const QString& outputs);
  void bringForward();

  RunPanel* run_;
  SavePanel* save_;
  QTabWidget* central_;
  JobTracker* jobs_;
};

}  // namespace peat::views
