// SPDX-License-Identifier: MIT
#pragma once
// The compared pair: the golden and candidate tensors behind the plots shown, kept so that the
// linked views (views/linkedviews.h) can go back to the elements. Either two dropped tensors
// (compared here, the histograms first and the detector's verdict after), or a session call's
// stored outputs. Every pair is read and its statistics computed once, off the GUI thread, in a
// JobTracker: a newer request (another call shown, a reset) drops an older one.
#include <QObject>
#include <QString>
#include <QStringList>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/analysis/session_analysis.h"
#include "core/analyzer/numerics.h"
#include "core/io/tensor_source.h"
#include "views/sessionstate.h"

class QTabWidget;

namespace peat::views {

class CallPage;
class ErrorPlotPanel;
class ExplainPanel;
class JobTracker;

struct ComparedPair {
  io::FloatTensor g, c;  // golden, candidate
  std::string name;      // the call's path, or "candidate.npy vs golden.npy"
  std::string analysisRun;  // the analysis it was read for ("" for a dropped pair): runs share call paths
  uint64_t tileRows = 0, tileCols = 0;  // the Where map's grouping (changed by a regroup)
  analyzer::ValueStats goldenStats, candidateStats;  // computed where the pair was read, off the GUI thread
};

class PairController : public QObject {
  Q_OBJECT
 public:
  using Ready = std::function<void(const std::shared_ptr<ComparedPair>&)>;
  // callPage and dock: the pages a dropped pair is shown on; central brings the call page forward.
  PairController(const SessionState* session, CallPage* callPage, ErrorPlotPanel* dock, ExplainPanel* explain,
                 QTabWidget* central, QObject* parent);

  const std::shared_ptr<ComparedPair>& current() const { return pair_; }
  // `shown`'s pair: `ready` now when it is at hand; else read (once) and `ready` once it is, or
  // `unavailable` when the session does not hold both outputs (or the read fails). Nothing runs
  // when a newer request or a reset comes first.
  void withPairOf(const analyzer::StoredCallReport& shown, Ready ready, std::function<void()> unavailable);
  // The call page's golden and candidate statistics for `shown` (or why there are none).
  void requestStats(const analyzer::StoredCallReport& shown);
  // Two tensors dropped (or given), golden first: one waits for the other. False: none given.
  bool takeTensors(const QStringList& tensors);
  void compareTensors(const QString& golden, const QString& candidate);
  // The pair at hand is `shown`'s: the same call of the same analysis (runs share call paths).
  bool holds(const analyzer::StoredCallReport& shown) const;
  void cancelReads();  // another call is selected: reads for the one before are dropped
  void reset();        // the pair goes too (a session opened, closed or reset)

 signals:
  void statsShown();
  void comparisonShown();     // a dropped pair's histograms are on screen
  void comparisonDetected();  // ... and the detector's verdict
  void errorRaised(const QString& text);
  void statusMessage(const QString& text, int timeout);
  void errorCleared();

 private:
  struct Waiter {
    Ready ready;
    std::function<void()> unavailable;
  };
  // One read of a session call's outputs in flight, and who waits for it.
  struct Read {
    JobTracker* jobs;
    std::string analysisRun, call;
    std::vector<Waiter> waiters;
  };
  // Reads `shown`'s pair in `read`, replacing its job and its waiters; stats: for the call page.
  void start(Read& read, const analyzer::StoredCallReport& shown, std::vector<Waiter> waiters, bool stats);
  void detect(const std::shared_ptr<ComparedPair>& pair, const analyzer::StoredCallReport& report,
              const QString& description);

  const SessionState* session_;
  CallPage* callPage_;
  ErrorPlotPanel* dock_;
  ExplainPanel* explain_;
  QTabWidget* central_;
  std::shared_ptr<ComparedPair> pair_;
  Read stats_;            // the call page's call (its statistics shown when read)
  Read demand_;           // a call a linked view needs that the call page does not show
  JobTracker* compares_;  // a dropped pair's two stages
  QString pendingGolden_;  // a dropped .npy waiting for its candidate
};

}  // namespace peat::views
