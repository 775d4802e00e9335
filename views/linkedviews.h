// SPDX-License-Identifier: MIT
#pragma once
// The error plots linked back to the elements of the compared pair (views/paircontroller.h): a
// tile of the Where map opens its worst element in the bit explorer, with the tile's histogram
// over the whole's; a bit's bar or a histogram bar shows on the map where those elements sit; a
// new grouping of the map is computed off the GUI thread.
#include <QObject>
#include <QString>

#include <functional>
#include <memory>

#include "core/analysis/session_analysis.h"

namespace peat::views {

class BitExplorer;
class ErrorPlotPanel;
class JobTracker;
class PairController;
struct ComparedPair;

class LinkedViews : public QObject {
  Q_OBJECT
 public:
  // openExplorer: brings up the window's bit explorer (made on first use) and returns it.
  LinkedViews(PairController* pairs, std::function<BitExplorer*()> openExplorer, QObject* parent);
  void link(ErrorPlotPanel* panel);  // the panel's clicks act on the pair behind its first report

  void openElement(ErrorPlotPanel* panel, qint64 tileRow, qint64 tileCol);
  void showBit(ErrorPlotPanel* panel, int bit);
  void showBin(ErrorPlotPanel* panel, int bin, int lastBin);
  void regroup(ErrorPlotPanel* panel, qint64 tileRows, qint64 tileCols);

 signals:
  void regrouped();  // the pair's report, with the Where map grouped anew
  void errorRaised(const QString& text);
  void statusMessage(const QString& text, int timeout);

 private:
  using Act = std::function<void(const analyzer::StoredCallReport& shown, const std::shared_ptr<ComparedPair>& pair)>;
  // `act` on the panel's first report and its pair, now or once the pair is read; `unavailable`
  // goes to the status bar when there is no pair for it.
  void withPair(ErrorPlotPanel* panel, const QString& unavailable, Act act);

  PairController* pairs_;
  std::function<BitExplorer*()> openExplorer_;
  JobTracker* regroups_;
};

}  // namespace peat::views
