// SPDX-License-Identifier: MIT
#pragma once
// The home of training curves (a run's "curve" table): the layout the profiler writes, and the
// reader for plots, with the iterations where runtime fault injection substituted the candidate
// (its "call_errors").
#include <string>
#include <vector>

#include "core/store/session.h"
#include "core/store/table.h"

namespace peat::store {

struct TrainingCurve {
  std::string run, kind;
  std::vector<double> iteration, loss, accuracy, testLoss, testAccuracy;  // NaN where not measured
  std::vector<double> substituted;  // iterations with at least one substituted call (runtime FI)
  std::string goldenRun;            // runtime FI: the golden twin trained with the same seed and data
};

// The curve table: loss and batch accuracy per iteration, test numbers where evaluated (NaN else).
TableBuilder curveTable();
void addCurveRow(TableBuilder& table, int64_t iteration, double loss, double accuracy, double testLoss,
                 double testAccuracy);

// Throws SessionError when `run` has no curve table.
TrainingCurve loadTrainingCurve(const SessionReader& reader, const std::string& run);

}  // namespace peat::store
