// SPDX-License-Identifier: MIT
#pragma once
#include <QWidget>

#include "core/analysis/session_analysis.h"

class QCustomPlot;
class QLabel;
class QTableWidget;

namespace peat::views {

class ErrorPlotPanel;

// Two analysed calls side by side: two calls of one run, one call under two kernels (two playback
// runs), or one call in two sessions. Both sides share their axes, so the plots compare by eye,
// and a table sets the numbers against each other.
class ComparePanel : public QWidget {
  Q_OBJECT
 public:
  explicit ComparePanel(QWidget* parent = nullptr);
  // `leftTitle` and `rightTitle` say where each report comes from (run, session).
  void showPair(const analyzer::StoredCallReport& left, const QString& leftTitle,
                const analyzer::StoredCallReport& right, const QString& rightTitle);
  void showMessage(const QString& text);
  bool hasPair() const { return hasPair_; }
  ErrorPlotPanel* left() const { return left_; }
  ErrorPlotPanel* right() const { return right_; }
  QTableWidget* table() const { return table_; }
  QString csv() const;  // the table

 private:
  void alignAxes();
  ErrorPlotPanel *left_, *right_;
  QLabel *leftTitle_, *rightTitle_;
  QTableWidget* table_;
  bool hasPair_ = false;
};

}  // namespace peat::views
