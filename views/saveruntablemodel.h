// SPDX-License-Identifier: MIT
#pragma once
// A SAVE run's outputs, one row per sample: its top classes with their scores when one sample's
// output is a vector of scores, else the range and the first values of its output. A snapshot of
// core's summary (save::summariseOutputs) taken in one step; the numbers are core's.
#include <QAbstractTableModel>

#include "core/save/output_summary.h"

namespace peat::views {

class SaveRunTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  // Per cell of a class column: ClassRole the class (int), ScoreRole its output (double); per cell
  // of a value column, ScoreRole its number. Invalid where a cell holds none.
  enum Role { ClassRole = Qt::UserRole + 1, ScoreRole };

  explicit SaveRunTableModel(QObject* parent = nullptr);
  void setSummary(save::OutputSummary summary);
  void clear() { setSummary({}); }
  const save::OutputSummary& summary() const { return summary_; }
  int classColumns() const;  // top-k columns (0: the output is not a vector of scores)
  QString csv() const;       // every row, with a header line

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  enum ValueColumn { MinColumn = 1, MaxColumn, MeanColumn, FirstColumn, ValueColumns };
  save::OutputSummary summary_;
};

}  // namespace peat::views
