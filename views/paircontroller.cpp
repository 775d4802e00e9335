// SPDX-License-Identifier: MIT
#include "views/paircontroller.h"

#include <QFileInfo>
#include <QStringList>
#include <QTabWidget>

#include <stdexcept>

#include "core/detector/detector.h"
#include "views/callpage.h"
#include "views/errorplotpanel.h"
#include "views/explainpanel.h"
#include "views/jobtracker.h"

namespace peat::views {

namespace {
// What the first stage of a dropped pair's comparison delivers.
struct DroppedPair {
  std::shared_ptr<ComparedPair> pair;
  analyzer::StoredCallReport report;
};
}  // namespace

PairController::PairController(const SessionState* session, CallPage* callPage, ErrorPlotPanel* dock,
                               ExplainPanel* explain, QTabWidget* central, QObject* parent)
    : QObject(parent),
      session_(session),
      callPage_(callPage),
      dock_(dock),
      explain_(explain),
      central_(central),
      stats_{new JobTracker(this), {}, {}, {}},
      demand_{new JobTracker(this), {}, {}, {}},
      compares_(new JobTracker(this)) {}

void PairController::cancelReads() {
  for (Read* r : {&stats_, &demand_}) {
    r->jobs->cancel();
    r->waiters.clear();
  }
}

bool PairController::holds(const analyzer::StoredCallReport& shown) const {
  return pair_ && pair_->name == shown.call && pair_->analysisRun == shown.analysisRun;
}

void PairController::reset() {
  cancelReads();
  pair_.reset();  // a pair read from the old session (a dropped pair goes too)
}

void PairController::withPairOf(const analyzer::StoredCallReport& shown, Ready ready, std::function<void()> unavailable) {
  if (holds(shown)) {
    ready(pair_);
    return;
  }
  if (shown.analysisRun.empty() || !session_->reader) {
    unavailable();
    return;
  }
  // one read per call: a request for a call being read waits for that read
  Waiter waiter{std::move(ready), std::move(unavailable)};
  for (Read* r : {&stats_, &demand_})
    if (r->jobs->pending() && r->call == shown.call && r->analysisRun == shown.analysisRun) {
      r->waiters.push_back(std::move(waiter));
      return;
    }
  std::vector<Waiter> waiters;
  waiters.push_back(std::move(waiter));
  start(demand_, shown, std::move(waiters), false);
}

void PairController::requestStats(const analyzer::StoredCallReport& shown) {
  cancelReads();  // the statistics of a call shown before are not this one's
  if (holds(shown)) {  // read already (a dropped pair, or a call clicked before)
    callPage_->showPairStats(pair_->goldenStats, pair_->candidateStats);
    emit statsShown();
    return;
  }
  if (!session_->reader || shown.analysisRun.empty()) {
    callPage_->showNoPairStats(tr("No outputs to compare: this call has no analysis run."));
    emit statsShown();
    return;
  }
  start(stats_, shown, {}, true);
}

void PairController::start(Read& read, const analyzer::StoredCallReport& shown, std::vector<Waiter> waiters, bool stats) {
  read.call = shown.call;
  read.analysisRun = shown.analysisRun;
  read.waiters = std::move(waiters);
  Read* r = &read;
  auto reader = session_->reader;
  const analyzer::StoredCallReport report = shown;
  read.jobs->start<std::shared_ptr<ComparedPair>>(
      [reader, report] {
        analyzer::CallPair loaded;
        try {
          loaded = analyzer::loadCallPair(*reader, report.analysisRun, report.call);
        } catch (const std::invalid_argument& e) {  // the session does not hold both outputs
          throw std::runtime_error(std::string("The outputs are not in the session (") + e.what() +
                                   "): replay with peat playback --store-outputs to see the golden and candidate "
                                   "statistics and to link the plots to the elements.");
        } catch (const std::exception& e) {
          throw std::runtime_error(std::string("The outputs could not be read: ") + e.what());
        }
        auto pair = std::make_shared<ComparedPair>();
        pair->g = io::FloatTensor::owned(std::move(loaded.golden), loaded.shape);
        pair->c = io::FloatTensor::owned(std::move(loaded.candidate), loaded.shape);
        if (pair->g.size() != uint64_t(report.elements)) throw std::runtime_error("the stored outputs do not match the call's report");
        pair->name = report.call;
        pair->analysisRun = report.analysisRun;
        pair->tileRows = report.tileRows;
        pair->tileCols = report.tileCols;
        pair->goldenStats = analyzer::valueStats(pair->g.data(), pair->g.size());
        pair->candidateStats = analyzer::valueStats(pair->c.data(), pair->c.size());
        return pair;
      },
      [this, r, stats](const std::shared_ptr<ComparedPair>& pair) {
        if (!pair_ || pair_->name != pair->name || pair_->analysisRun != pair->analysisRun) pair_ = pair;
        if (stats) {
          callPage_->showPairStats(pair->goldenStats, pair->candidateStats);
          emit statsShown();
        }
        const std::vector<Waiter> waiting = std::move(r->waiters);
        r->waiters.clear();
        for (const Waiter& w : waiting) w.ready(pair_);
      },
      [this, r, stats](const QString& why) {
        if (stats) {
          callPage_->showNoPairStats(why);
          emit statsShown();
        }
        const std::vector<Waiter> waiting = std::move(r->waiters);
        r->waiters.clear();
        for (const Waiter& w : waiting) w.unavailable();
      });
}

bool PairController::takeTensors(const QStringList& tensors) {
  if (tensors.isEmpty()) return false;
  if (tensors.size() == 1 && pendingGolden_.isEmpty()) {
    pendingGolden_ = tensors.front();
    emit statusMessage(tr("Golden tensor %1: now drop the candidate").arg(QFileInfo(pendingGolden_).fileName()), 0);
    return true;
  }
  const QString golden = tensors.size() >= 2 ? tensors[0] : pendingGolden_;
  const QString candidate = tensors.size() >= 2 ? tensors[1] : tensors[0];
  pendingGolden_.clear();
  compareTensors(golden, candidate);
  return true;
}

// Off the GUI thread: the histograms as soon as the analyzer's pass is done, the detector's verdict
// after its own pass. The tensors stay mapped between the two, and afterwards for the bit explorer.
void PairController::compareTensors(const QString& golden, const QString& candidate) {
  const std::string g = golden.toStdString(), c = candidate.toStdString();
  const std::string name = QFileInfo(candidate).fileName().toStdString() + " vs " + QFileInfo(golden).fileName().toStdString();
  emit statusMessage(tr("Comparing %1 with %2...").arg(QFileInfo(candidate).fileName(), QFileInfo(golden).fileName()), 0);
  compares_->start<DroppedPair>(
      [g, c, name] {
        DroppedPair out;
        out.pair = std::make_shared<ComparedPair>();
        ComparedPair& pair = *out.pair;
        pair.g = io::readSource(g);
        pair.c = io::readSource(c);
        io::checkComparable(pair.g, pair.c);
        pair.goldenStats = analyzer::valueStats(pair.g.data(), pair.g.size());
        pair.candidateStats = analyzer::valueStats(pair.c.data(), pair.c.size());
        const analyzer::Report r = analyzer::analyze(pair.g.data(), pair.c.data(), analyzer::mapShape(pair.g.shape(), {}));
        out.report = analyzer::plottedReport(r, name, std::string());
        return out;
      },
      [this, golden, candidate](const DroppedPair& dropped) {
        const std::shared_ptr<ComparedPair>& pair = dropped.pair;
        const analyzer::StoredCallReport& report = dropped.report;
        pair->name = report.call;
        pair->analysisRun = report.analysisRun;
        pair->tileRows = report.tileRows;
        pair->tileCols = report.tileCols;
        pair_ = pair;
        dock_->showReports({report});
        // the pair's page at the centre: its identity, error statistics and plots, the two tensors'
        // statistics side by side; the verdict follows
        QString shape;
        for (uint64_t d : pair->g.shape()) shape += (shape.isEmpty() ? QString() : QStringLiteral("x")) + QString::number(d);
        const QString description = tr("golden %1\ncandidate %2\nfloat32[%3]").arg(golden, candidate, shape);
        callPage_->showCall(report, QString::fromStdString(report.call), description, nullptr);
        callPage_->showPairStats(pair->goldenStats, pair->candidateStats);
        central_->setCurrentWidget(callPage_);
        emit comparisonShown();
        detect(pair, report, description);
      },
      [this](const QString& why) { emit errorRaised(why); });
}

void PairController::detect(const std::shared_ptr<ComparedPair>& pair, const analyzer::StoredCallReport& report,
                            const QString& description) {
  compares_->start<detector::Detection>(
      [pair] {
        try {
          return detector::detect(pair->g.data(), {pair->c.data()}, pair->g.shape());
        } catch (const std::exception& e) {  // the verdict says what failed
          detector::Detection failed;
          failed.verdict.model = "unknown";
          failed.verdict.explanation = std::string("the detector failed: ") + e.what();
          return failed;
        }
      },
      [this, pair, report, description](const detector::Detection& detection) {
        if (pair_ != pair) return;  // another pair came meanwhile
        analyzer::StoredCallReport withVerdict = report;
        withVerdict.verdict = detection.verdict.model;
        dock_->showReports({withVerdict});
        const store::Verdict verdict = analyzer::storedVerdict(report.call, detection);
        callPage_->showCall(withVerdict, QString::fromStdString(report.call), description, &verdict);
        callPage_->showPairStats(pair->goldenStats, pair->candidateStats);
        if (!verdict.findings.empty()) {  // drawn where it shows, on the page and the dock alike
          callPage_->plots()->showFinding(verdict.findings.front());
          dock_->showFinding(verdict.findings.front());
        }
        explain_->showVerdict(QString::fromStdString(withVerdict.verdict));
        emit statusMessage(tr("%1: %2").arg(QString::fromStdString(withVerdict.call), QString::fromStdString(withVerdict.verdict)), 0);
        emit errorCleared();
        emit comparisonDetected();
      },
      [this](const QString& why) { emit errorRaised(why); });
}

}  // namespace peat::views
