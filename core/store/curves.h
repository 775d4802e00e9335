// SPDX-License-Identifier: MIT
#pragma once
// The home of training curves (a run's "curve" table): the layout the profiler writes, and the
// reader for plots, with the iterations where runtime fault injection substituted the candidate
// (its "call_errors").
#include <cmath>
#include <cstdint>
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

// A runtime fault-injection run against its golden twin (the same seed and data), at the
// iterations both measured: where the losses first differ (bit for bit), the largest |loss
// difference| and where, and each run's last loss and last test accuracy (NaN: none measured).
struct CurveDivergence {
  int64_t iterations = 0;          // iterations both runs measured a loss at
  int64_t substituted = 0;         // iterations with a substituted call
  double firstDifference = -1;     // the first iteration whose losses differ; -1: identical throughout
  double largestDifference = 0, largestAt = -1;
  double finalLoss = NAN, goldenFinalLoss = NAN;
  double finalTestAccuracy = NAN, goldenFinalTestAccuracy = NAN;
};
CurveDivergence compareCurves(const TrainingCurve& run, const TrainingCurve& golden);

}  // namespace peat::store
