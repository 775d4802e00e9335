// SPDX-License-Identifier: MIT
#include "views/linkedviews.h"

#include <algorithm>

#include "core/fp/explain.h"
#include "views/bitexplorer.h"
#include "views/errorplotpanel.h"
#include "views/jobtracker.h"
#include "views/paircontroller.h"

namespace peat::views {

LinkedViews::LinkedViews(PairController* pairs, std::function<BitExplorer*()> openExplorer, QObject* parent)
    : QObject(parent), pairs_(pairs), openExplorer_(std::move(openExplorer)), regroups_(new JobTracker(this)) {}

void LinkedViews::link(ErrorPlotPanel* panel) {
  connect(panel, &ErrorPlotPanel::tileClicked, this, [this, panel](qint64 r, qint64 c) { openElement(panel, r, c); });
  connect(panel, &ErrorPlotPanel::groupingRequested, this, [this, panel](qint64 r, qint64 c) { regroup(panel, r, c); });
  connect(panel, &ErrorPlotPanel::bitClicked, this, [this, panel](int bit) { showBit(panel, bit); });
  connect(panel, &ErrorPlotPanel::binClicked, this, [this, panel](int bin, int last) { showBin(panel, bin, last); });
}

void LinkedViews::withPair(ErrorPlotPanel* panel, const QString& unavailable, Act act) {
  const analyzer::StoredCallReport* shown = panel->firstReport();
  if (!shown) {
    emit statusMessage(unavailable, 0);
    return;
  }
  const std::string call = shown->call;
  pairs_->withPairOf(
      *shown,
      [panel, call, act = std::move(act)](const std::shared_ptr<ComparedPair>& pair) {
        const analyzer::StoredCallReport* now = panel->firstReport();
        if (now && now->call == call) act(*now, pair);  // else the panel moved on while the pair was read
      },
      [this, unavailable] { emit statusMessage(unavailable, 0); });
}

void LinkedViews::openElement(ErrorPlotPanel* panel, qint64 tileRow, qint64 tileCol) {
  withPair(panel,
           tr("Elements open in the bit explorer from a compared pair of tensors (drop two .npy files, or select a "
              "call of a run made with peat playback --store-outputs)"),
           [this, panel, tileRow, tileCol](const analyzer::StoredCallReport& shown, const std::shared_ptr<ComparedPair>& pair) {
             const io::FloatTensor& g = pair->g;
             // the layout the map was drawn in (a conv output: channels x positions)
             const uint64_t cols = std::max<uint64_t>(shown.cols, 1), rows = g.size() / cols;
             const int64_t i = analyzer::worstInTile(g.data(), pair->c.data(), rows, cols, pair->tileRows, pair->tileCols,
                                                     uint64_t(tileRow), uint64_t(tileCol));
             if (i < 0) {
               emit statusMessage(tr("Every element of tile (%1, %2) is bit-identical").arg(tileRow).arg(tileCol), 0);
               return;
             }
             // the histogram restricted to the tile, over the whole tensor's (a linked view)
             try {
               const analyzer::StoredCallReport whole = shown;
               const analyzer::Report tile = analyzer::analyzeTile(g.data(), pair->c.data(), rows, cols, pair->tileRows,
                                                                   pair->tileCols, uint64_t(tileRow), uint64_t(tileCol));
               panel->showReports({whole, analyzer::plottedReport(tile, tr("tile r%1 c%2").arg(tileRow).arg(tileCol).toStdString(),
                                                                  std::string())});
             } catch (const std::exception& e) {
               emit errorRaised(QString::fromStdString(e.what()));
             }
             BitExplorer* explorer = openExplorer_();
             explorer->setPairContext(QStringLiteral("%1 [%2, %3]")
                                          .arg(QString::fromStdString(pair->name))
                                          .arg(uint64_t(i) / cols)
                                          .arg(uint64_t(i) % cols),
                                      g.data()[i], pair->c.data()[i]);
             explorer->setBlockContext(fp::blockPlacesInTensor(g.data(), g.size(), g.shape().empty() ? 1 : g.shape().back(), uint64_t(i)));
           });
}

void LinkedViews::showBit(ErrorPlotPanel* panel, int bit) {
  withPair(panel,
           tr("Where one bit differs is shown for a compared pair of tensors (drop two .npy files, or select a call "
              "of a run made with peat playback --store-outputs)"),
           [panel, bit](const analyzer::StoredCallReport& shown, const std::shared_ptr<ComparedPair>& pair) {
             panel->showMapCounts(analyzer::bitTileCounts(pair->g.data(), pair->c.data(), shown.rows, shown.cols,
                                                          shown.tileRows, shown.tileCols, bit),
                                  bit);
           });
}

void LinkedViews::showBin(ErrorPlotPanel* panel, int bin, int lastBin) {
  withPair(panel,
           tr("Where one bar's elements sit is shown for a compared pair of tensors (drop two .npy files, or select a "
              "call of a run made with peat playback --store-outputs)"),
           [panel, bin, lastBin](const analyzer::StoredCallReport& shown, const std::shared_ptr<ComparedPair>& pair) {
             panel->showMapCountsOfBin(analyzer::errorBinTileCounts(pair->g.data(), pair->c.data(), shown.rows, shown.cols,
                                                                    shown.tileRows, shown.tileCols, bin, lastBin),
                                       bin, lastBin);
             // and their bit positions, over the Bits plot
             panel->showSelectionBits(analyzer::errorBinBitCounts(pair->g.data(), pair->c.data(), pair->g.size(), bin, lastBin));
           });
}

void LinkedViews::regroup(ErrorPlotPanel* panel, qint64 tileRows, qint64 tileCols) {
  withPair(panel,
           tr("This call's run did not store its outputs, so it keeps the tiles its analysis stored: peat analyze -s "
              "SESSION --run RUN --tile %1x%2 stores these")
               .arg(tileRows)
               .arg(tileCols),
           [this, panel, tileRows, tileCols](const analyzer::StoredCallReport& shown, const std::shared_ptr<ComparedPair>& pair) {
             const std::string verdict = shown.verdict;
             regroups_->start<analyzer::StoredCallReport>(
                 [pair, verdict, tileRows, tileCols, seen = std::vector<uint64_t>{shown.rows, shown.cols}] {
                   analyzer::ReportOptions options;
                   options.tileRows = uint64_t(tileRows);
                   options.tileCols = uint64_t(tileCols);
                   const analyzer::Report r = analyzer::analyze(pair->g.data(), pair->c.data(),
                                                                   seen[0] * seen[1] == pair->g.size() ? seen : pair->g.shape(), options);
                   return analyzer::plottedReport(r, pair->name, verdict);
                 },
                 [this, pair, panel](const analyzer::StoredCallReport& report) {
                   if (pairs_->current() != pair) return;  // another pair came meanwhile
                   pair->tileRows = report.tileRows;
                   pair->tileCols = report.tileCols;
                   panel->showReports({report});
                   emit regrouped();
                 },
                 [this](const QString& why) { emit errorRaised(why); });
           });
}

}  // namespace peat::views
