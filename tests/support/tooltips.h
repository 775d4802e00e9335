// SPDX-License-Identifier: MIT
#pragma once
// The session tree reads a call's tensors for its tooltip in a worker: until the read ends the
// tooltip says "Reading its tensors...". wholeToolTip waits (running the event loop) for the
// tooltip the read makes, for up to ten seconds.
#include <QElapsedTimer>
#include <QModelIndex>
#include <QString>
#include <QTest>

namespace peat::testsupport {

inline bool toolTipReading(const QString& tip) { return tip.endsWith(QStringLiteral("Reading its tensors...")); }

inline QString wholeToolTip(const QModelIndex& index) {
  QString tip = index.data(Qt::ToolTipRole).toString();
  QElapsedTimer waited;
  waited.start();
  while (toolTipReading(tip) && waited.elapsed() < 10000) {
    QTest::qWait(10);
    tip = index.data(Qt::ToolTipRole).toString();
  }
  return tip;
}

}  // namespace peat::testsupport
