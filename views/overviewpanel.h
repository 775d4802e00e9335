// SPDX-License-Identifier: MIT
#pragma once
#include <QWidget>

#include "core/store/session.h"

class QTableWidget;
class QLabel;

namespace peat::views {

// The session's provenance and totals, as a two-column table.
class OverviewPanel : public QWidget {
  Q_OBJECT
 public:
  explicit OverviewPanel(QWidget* parent = nullptr);
  void showSummary(const store::SessionSummary& summary);
  void showNothing(const QString& hint);
  // What an empty workbench says: how to open a session, the demo and the tour.
  static QString firstStartHint();

 private:
  QLabel* title_;
  QTableWidget* table_;
};

}  // namespace peat::views
