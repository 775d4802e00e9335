// SPDX-License-Identifier: MIT
#pragma once
// Training curves as the profiler stores them (a run's "curve" table), read back for plots, with
// the iterations where runtime fault injection substituted the candidate (its "call_errors").
#include <string>
#include <vector>

#include "core/store/session.h"

namespace peat::store {

struct TrainingCurve {
  std::string run, kind;
  std::vector<double> iteration, loss, accuracy, testLoss, testAccuracy;  // NaN where not measured
  std::vector<double> substituted;  // iterations with at least one substituted call (runtime FI)
  std::string goldenRun;            // runtime FI: the golden twin trained with the same seed and data
};

// Throws SessionError when `run` has no curve table.
TrainingCurve loadTrainingCurve(const SessionReader& reader, const std::string& run);

}  // namespace peat::store
