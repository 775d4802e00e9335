// SPDX-License-Identifier: MIT
#include "views/saveruncontroller.h"

#include <QFileInfo>
#include <QJsonArray>
#include <QTabWidget>

#include <stdexcept>
#include <string>

#include "core/io/tensor_source.h"
#include "views/jobtracker.h"
#include "views/runpanel.h"
#include "views/savepanel.h"
#include "views/saverunview.h"

namespace peat::views {

namespace {
constexpr int kTopClasses = 5;       // per sample, as the table shows them
constexpr int64_t kShownSamples = 1000;  // rows of the table; the page says when there are more
constexpr int kFirstValues = 8;

// One entry of the command's "comparison" or "comparisons" (empty: no expected outputs given).
SaveRunComparison comparisonOf(const QJsonObject& c) {
  SaveRunComparison out;
  out.given = !c.isEmpty();
  out.reference = c.value(QLatin1String("reference")).toString();
  out.maxAbs = c.value(QLatin1String("max_abs")).toDouble();
  out.maxRel = c.value(QLatin1String("max_rel")).toDouble();
  out.worstSample = c.value(QLatin1String("worst_sample")).toInteger();
  out.worstElement = c.value(QLatin1String("worst_element")).toInteger();
  out.top1Agree = c.value(QLatin1String("top1_agree")).toInteger();
  out.nonFinite = c.value(QLatin1String("non_finite")).toInteger();
  return out;
}
}  // namespace

SaveRunController::SaveRunController(RunPanel* run, SavePanel* save, QTabWidget* central, QObject* parent)
    : QObject(parent), run_(run), save_(save), central_(central), jobs_(new JobTracker(this)) {
  connect(run_, &RunPanel::started, this, [this] {
    if (run_->writesSession()) return;
    jobs_->cancel();  // the outputs of a run before are no longer what the page is for
    save_->runView()->showMessage(tr("Running peat save run ..."));
  });
  connect(run_, &RunPanel::saveRunEnded, this, &SaveRunController::ended);
}

bool SaveRunController::loading() const { return jobs_->pending(); }

SaveRunOutputs SaveRunController::read(const QJsonObject& result, const QString& input, const QString& outputs) {
  SaveRunOutputs out;
  out.model = result.value(QLatin1String("model")).toString();
  out.input = input;
  out.outputs = outputs;
  out.protection = result.value(QLatin1String("protect")).toString();
  out.flips = result.value(QLatin1String("flips")).toInteger();
  out.seconds = result.value(QLatin1String("seconds")).toDouble();
  const QJsonObject stats = result.value(QLatin1String("stats")).toObject();
  out.faults = stats.value(QLatin1String("faults")).toInteger();
  out.detections = stats.value(QLatin1String("detections")).toInteger();
  out.recoveries = stats.value(QLatin1String("recoveries")).toInteger();
  out.unrecovered = stats.value(QLatin1String("unrecovered")).toInteger();
  out.comparison = comparisonOf(result.value(QLatin1String("comparison")).toObject());
  const int64_t samples = result.value(QLatin1String("samples")).toInteger();
  // One outputs file of `samples` x `shape` values, summarised.
  auto summarise = [&](const QString& file, const QJsonArray& dims) {
    std::vector<int64_t> shape;
    int64_t size = 1;
    for (const QJsonValue d : dims) {
      shape.push_back(d.toInteger());
      size *= shape.back();
    }
    const io::FloatTensor y = io::readSource(file.toStdString());
    if (samples < 0 || y.size() != uint64_t(samples * size))
      throw std::runtime_error("the outputs file " + file.toStdString() + " holds " + std::to_string(y.size()) +
                               " values, not the " + std::to_string(samples * size) + " the run reported");
    return save::summariseOutputs(y.data(), samples, shape, kTopClasses, kShownSamples, kFirstValues);
  };
  const QJsonArray parts = result.value(QLatin1String("outputs")).toArray();
  if (parts.isEmpty()) {
    out.summary = summarise(outputs, result.value(QLatin1String("output_shape")).toArray());
    return out;
  }
  for (const QJsonValue v : parts) {  // several outputs: each in the file the command named for it
    const QJsonObject p = v.toObject();
    SaveRunOutputPart part;
    part.name = p.value(QLatin1String("name")).toString();
    part.file = p.value(QLatin1String("file")).toString();
    if (part.file.isEmpty()) throw std::runtime_error("the run names no file for output " + part.name.toStdString());
    part.summary = summarise(part.file, p.value(QLatin1String("shape")).toArray());
    for (const QJsonValue c : result.value(QLatin1String("comparisons")).toArray())  // its own comparison
      if (c.toObject().value(QLatin1String("output")).toString() == part.name) part.comparison = comparisonOf(c.toObject());
    out.parts.push_back(std::move(part));
  }
  out.summary = out.parts.front().summary;
  return out;
}

void SaveRunController::ended(bool ok, const QString& message, const QJsonObject& result, const QString& input,
                              const QString& outputs) {
  bringForward();
  if (!ok) {
    jobs_->cancel();
    save_->runView()->showMessage(message);
    emit outputsShown(false);
    return;
  }
  save_->runView()->showMessage(tr("Reading the outputs ..."));
  jobs_->start<SaveRunOutputs>(
      [result, input, outputs] { return read(result, input, outputs); },
      [this](const SaveRunOutputs& run) {
        save_->runView()->showOutputs(run);
        emit outputsShown(true);
      },
      [this](const QString& why) {
        save_->runView()->showMessage(tr("The outputs could not be read: %1").arg(why));
        emit outputsShown(false);
      });
}

void SaveRunController::bringForward() {
  save_->setCurrentTab(SavePanel::RunTab);
  central_->setCurrentWidget(save_);
}

}  // namespace peat::views
