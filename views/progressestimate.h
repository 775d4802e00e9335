// SPDX-License-Identifier: MIT
#pragma once
#include <cstdint>

namespace peat::views {

// The time left of a run, from the rate of its own progress events: measured from the first event
// (so the child's start-up, loading a model or probing a session, is not counted as work), and
// only once the run has moved on from there. Restarted when the count's total changes (the next
// stage or step).
class ProgressEstimate {
 public:
  void reset() { *this = ProgressEstimate{}; }
  // A progress event: `done` of `total` at `seconds` since the run started.
  void update(int64_t done, int64_t total, double seconds) {
    if (total != total_ || done < firstDone_) {
      total_ = total;
      firstDone_ = done;
      firstSeconds_ = seconds;
    }
    done_ = done;
    seconds_ = seconds;
  }
  // Seconds left, or a negative number while the rate is not yet known.
  double secondsLeft() const {
    const int64_t moved = done_ - firstDone_;
    const double spent = seconds_ - firstSeconds_;
    if (moved <= 0 || spent <= 0.05) return -1;
    return double(total_ - done_) * spent / double(moved);
  }

 private:
  int64_t total_ = -1, firstDone_ = 0, done_ = 0;
  double firstSeconds_ = 0, seconds_ = 0;
};

}  // namespace peat::views
