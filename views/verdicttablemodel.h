// SPDX-License-Identifier: MIT
#pragma once
// The detector's verdicts of one analysis run as a table: call, error model, confidence, evidence.
// A snapshot taken in one step; each row keeps its structured findings for the views that draw
// the evidence (ErrorPlotPanel::showFinding).
#include <QAbstractTableModel>

#include <vector>

#include "core/store/session.h"

namespace peat::views {

class VerdictTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { CallColumn, ModelColumn, ConfidenceColumn, EvidenceColumn, ColumnCount };

  explicit VerdictTableModel(QObject* parent = nullptr);

  // `names`: each verdict's call as the session tree names it ("#3 conv2 (iteration 0)"), shown in
  // the Call column; the path stays its tooltip, PathRole and the CSV's call column.
  void setVerdicts(std::vector<store::Verdict> verdicts, std::vector<QString> names = {});
  enum Role { PathRole = Qt::UserRole + 1 };
  void clear() { setVerdicts({}); }
  const store::Verdict* verdict(int row) const;
  // The row of a call path, or -1.
  int rowOf(const QString& call) const;
  // Every row as CSV, with a header line (Edit > Copy, File > Export Table).
  QString csv() const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<store::Verdict> verdicts_;
  std::vector<QString> names_;
};

}  // namespace peat::views
