// SPDX-License-Identifier: MIT
#include "core/store/curves.h"

#include <algorithm>
#include <cmath>

namespace peat::store {

namespace {

std::vector<double> numbers(const std::vector<h5::Column>& table, const std::string& name, std::size_t rows) {
  const h5::Column* c = h5::findColumn(table, name);
  return c && !c->isText ? c->numbers : std::vector<double>(rows, std::nan(""));
}

}  // namespace

TableBuilder curveTable() { return TableBuilder({}, {"iteration", "loss", "accuracy", "test_loss", "test_accuracy"}); }

void addCurveRow(TableBuilder& t, int64_t iteration, double loss, double accuracy, double testLoss, double testAccuracy) {
  t.row({}, {double(iteration), loss, accuracy, testLoss, testAccuracy});
}

TrainingCurve loadTrainingCurve(const SessionReader& reader, const std::string& run) {
  const SessionSummary summary = reader.summaryWithoutTensors();
  const RunInfo* info = nullptr;
  for (const RunInfo& r : summary.runs)
    if (r.name == run) info = &r;
  if (!info) throw SessionError("the session has no run '" + run + "'");
  if (std::find(info->tables.begin(), info->tables.end(), "curve") == info->tables.end())
    throw SessionError("run '" + run + "' has no training curve");
  TrainingCurve c;
  c.run = run;
  c.kind = info->spec.kind;
  const std::vector<h5::Column> table = reader.table(run, "curve");
  c.iteration = numbers(table, "iteration", 0);
  const std::size_t rows = c.iteration.size();
  c.loss = numbers(table, "loss", rows);
  c.accuracy = numbers(table, "accuracy", rows);
  c.testLoss = numbers(table, "test_loss", rows);
  c.testAccuracy = numbers(table, "test_accuracy", rows);
  if (c.kind == "runtime_fi") {
    if (std::find(info->tables.begin(), info->tables.end(), "call_errors") != info->tables.end()) {
      std::vector<double> its = numbers(reader.table(run, "call_errors"), "iteration", 0);
      std::sort(its.begin(), its.end());
      its.erase(std::unique(its.begin(), its.end()), its.end());
      c.substituted = its;
    }
    // The golden twin: the one the run names (a sweep has one per seed), else the session's only one.
    const auto named = info->attributes.find("golden_run");
    for (const RunInfo& r : summary.runs)
      if (r.spec.kind == "runtime_fi_golden" && (named == info->attributes.end() || named->second == r.name))
        c.goldenRun = r.name;
  }
  return c;
}

CurveDivergence compareCurves(const TrainingCurve& run, const TrainingCurve& golden) {
  CurveDivergence d;
  d.substituted = int64_t(run.substituted.size());
  const auto last = [](const std::vector<double>& v) {
    for (auto it = v.rbegin(); it != v.rend(); ++it)
      if (std::isfinite(*it)) return *it;
    return double(NAN);
  };
  d.finalLoss = last(run.loss);
  d.goldenFinalLoss = last(golden.loss);
  d.finalTestAccuracy = last(run.testAccuracy);
  d.goldenFinalTestAccuracy = last(golden.testAccuracy);
  // the iterations of both, in order (each curve's iterations ascend)
  std::size_t j = 0;
  for (std::size_t i = 0; i < run.iteration.size() && i < run.loss.size(); ++i) {
    while (j < golden.iteration.size() && golden.iteration[j] < run.iteration[i]) ++j;
    if (j >= golden.iteration.size() || j >= golden.loss.size() || golden.iteration[j] != run.iteration[i]) continue;
    const double a = run.loss[i], b = golden.loss[j];
    if (std::isnan(a) && std::isnan(b)) continue;
    ++d.iterations;
    const bool same = a == b || (std::isnan(a) && std::isnan(b));
    if (!same && d.firstDifference < 0) d.firstDifference = run.iteration[i];
    const double gap = std::isfinite(a) && std::isfinite(b) ? std::fabs(a - b) : double(INFINITY);
    if (!same && gap > d.largestDifference) {
      d.largestDifference = gap;
      d.largestAt = run.iteration[i];
    }
  }
  return d;
}

}  // namespace peat::store
