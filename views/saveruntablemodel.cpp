// SPDX-License-Identifier: MIT
#include "views/saveruntablemodel.h"

#include <QStringList>

#include <algorithm>

namespace peat::views {

namespace {
QString number(double v, int digits = 6) { return QString::number(v, 'g', digits); }

QString csvCell(QString text) {
  if (text.contains(QLatin1Char(',')) || text.contains(QLatin1Char('"')))
    text = QLatin1Char('"') + text.replace(QLatin1Char('"'), QStringLiteral("\"\"")) + QLatin1Char('"');
  return text;
}
}  // namespace

SaveRunTableModel::SaveRunTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void SaveRunTableModel::setSummary(save::OutputSummary summary) {
  beginResetModel();
  summary_ = std::move(summary);
  endResetModel();
}

int SaveRunTableModel::classColumns() const {
  if (!summary_.scoreVector) return 0;
  std::size_t k = 1;  // a sample with NaN or Inf says so in the first column
  for (const save::SampleOutputs& s : summary_.shown) k = std::max(k, s.classes.size());
  return int(k);
}

int SaveRunTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(summary_.shown.size());
}

int SaveRunTableModel::columnCount(const QModelIndex& parent) const {
  if (parent.isValid() || summary_.shown.empty()) return 0;
  return summary_.scoreVector ? 1 + classColumns() : int(ValueColumns);
}

QVariant SaveRunTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) return {};
  const save::SampleOutputs& s = summary_.shown[std::size_t(index.row())];
  const int c = index.column();
  if (c == 0) return role == Qt::DisplayRole ? QVariant(QString::number(s.sample)) : QVariant();
  if (summary_.scoreVector) {
    const std::size_t k = std::size_t(c - 1);
    if (k >= s.classes.size()) {
      const bool broken = s.classes.empty() && k == 0;  // topClasses skips a sample that is not all finite
      return broken && role == Qt::DisplayRole ? QVariant(tr("NaN or Inf in the output")) : QVariant();
    }
    switch (role) {
      case Qt::DisplayRole: return tr("%1 (%2)").arg(s.classes[k]).arg(number(s.scores[k]));
      case Qt::ToolTipRole: return tr("class %1, output %2").arg(s.classes[k]).arg(number(s.scores[k], 9));
      case ClassRole: return int(s.classes[k]);
      case ScoreRole: return double(s.scores[k]);
      default: return {};
    }
  }
  if (c == FirstColumn) {
    if (role != Qt::DisplayRole && role != Qt::ToolTipRole) return {};
    QStringList values;
    for (float v : s.first) values << number(v, role == Qt::ToolTipRole ? 9 : 6);
    return values.join(QStringLiteral(", "));
  }
  const double v = c == MinColumn ? s.stats.min : c == MaxColumn ? s.stats.max : s.stats.mean;
  if (role == Qt::DisplayRole) return s.stats.finite ? number(v) : tr("no finite value");
  if (role == Qt::ToolTipRole) return number(v, 9);
  if (role == ScoreRole && s.stats.finite) return v;
  if (role == Qt::TextAlignmentRole) return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
  return {};
}

QVariant SaveRunTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  if (section == 0) return tr("Sample");
  if (summary_.scoreVector) return tr("Top %1").arg(section);
  switch (section) {
    case MinColumn: return tr("Min");
    case MaxColumn: return tr("Max");
    case MeanColumn: return tr("Mean");
    case FirstColumn: return tr("First values");
    default: return {};
  }
}

QString SaveRunTableModel::csv() const {
  QStringList lines;
  if (summary_.scoreVector) {
    QStringList header{QStringLiteral("sample")};
    for (int k = 1; k <= classColumns(); ++k) header << QStringLiteral("class_%1,output_%1").arg(k);
    lines << header.join(QLatin1Char(','));
    for (const save::SampleOutputs& s : summary_.shown) {
      QStringList cells{QString::number(s.sample)};
      for (std::size_t k = 0; k < std::size_t(classColumns()); ++k)
        cells << (k < s.classes.size() ? QStringLiteral("%1,%2").arg(s.classes[k]).arg(number(s.scores[k], 9))
                                       : QStringLiteral(","));
      lines << cells.join(QLatin1Char(','));
    }
  } else {
    lines << QStringLiteral("sample,min,max,mean,first_values");
    for (const save::SampleOutputs& s : summary_.shown) {
      QStringList first;
      for (float v : s.first) first << number(v, 9);
      lines << QStringLiteral("%1,%2,%3,%4,%5")
                   .arg(s.sample)
                   .arg(number(s.stats.min, 9), number(s.stats.max, 9), number(s.stats.mean, 9),
                        csvCell(first.join(QLatin1Char(' '))));
    }
  }
  return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
}

}  // namespace peat::views
