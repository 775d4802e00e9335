// SPDX-License-Identifier: MIT
#pragma once
// Tools > Bit Explorer's window (made on first use) and its "Flip in the model": the SAVE value the
// explorer shows, and the flip of its bits in the network, run off the GUI thread on one test image
// (a JobTracker: a newer flip, or another value, drops an older result).
#include <QObject>

#include <string>

#include "views/sessionstate.h"

class QDialog;
class QWidget;

namespace peat::save {
struct LayerMap;
}

namespace peat::views {

class BitExplorer;
class JobTracker;


class FlipController : public QObject {
  Q_OBJECT
 public:
  FlipController(const SessionState* session, QWidget* window);
  BitExplorer* showExplorer();                          // made on first use, then shown and raised
  BitExplorer* explorer() const { return explorer_; }  // null until first shown
  // Value `index` of a layer's map, in the explorer: its bound of largest magnitude, its sound range
  // and its bits' classes; the flips that follow are of this value. Nothing for an index outside.
  void openValue(const save::LayerMap& map, qint64 index);
  void flip(quint32 mask, int image);

 signals:
  void flipShown();  // the flip's outcome (or its error) is in the explorer

 private:
  const SessionState* session_;
  QWidget* window_;
  QDialog* explorerWindow_ = nullptr;
  BitExplorer* explorer_ = nullptr;
  JobTracker* jobs_;
  std::string analysis_, layer_;
  qint64 element_ = -1;
};

}  // namespace peat::views
