// SPDX-License-Identifier: MIT
#include "views/verdicttablemodel.h"

#include <QBrush>
#include <QColor>
#include <QStringList>

#include "core/detector/detector.h"

namespace peat::views {

VerdictTableModel::VerdictTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void VerdictTableModel::setVerdicts(std::vector<store::Verdict> verdicts, std::vector<QString> names) {
  beginResetModel();
  verdicts_ = std::move(verdicts);
  names_ = std::move(names);
  names_.resize(verdicts_.size());
  endResetModel();
}

const store::Verdict* VerdictTableModel::verdict(int row) const {
  return row >= 0 && std::size_t(row) < verdicts_.size() ? &verdicts_[std::size_t(row)] : nullptr;
}

int VerdictTableModel::rowOf(const QString& call) const {
  const std::string wanted = call.toStdString();
  for (std::size_t i = 0; i < verdicts_.size(); ++i)
    if (verdicts_[i].call == wanted) return int(i);
  return -1;
}

int VerdictTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(verdicts_.size());
}

int VerdictTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant VerdictTableModel::data(const QModelIndex& index, int role) const {
  const store::Verdict* v = index.isValid() ? verdict(index.row()) : nullptr;
  if (!v) return {};
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case CallColumn:
        return names_[std::size_t(index.row())].isEmpty() ? QString::fromStdString(v->call) : names_[std::size_t(index.row())];
      case ModelColumn: return QString::fromStdString(v->model);
      case ConfidenceColumn: return QString::number(v->confidence, 'f', 2);
      case EvidenceColumn: return QString::fromStdString(v->evidence);
      default: return {};
    }
  }
  if (role == PathRole) return QString::fromStdString(v->call);
  if (role == Qt::ToolTipRole) {
    if (index.column() == CallColumn) return QString::fromStdString(v->call);
    if (index.column() == ModelColumn) return QString::fromStdString(detector::verdictExplanation(v->model));
    if (index.column() == EvidenceColumn) return QString::fromStdString(v->evidence);
  }
  // a kernel that crashed, hung or wrote out of bounds: the tree marks that call the same way
  if (role == Qt::ForegroundRole && v->model.rfind("kernel_", 0) == 0) return QBrush(QColor(0xb0, 0x40, 0x20));
  if (role == Qt::TextAlignmentRole && index.column() == ConfidenceColumn)
    return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
  return {};
}

QVariant VerdictTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case CallColumn: return tr("Call");
    case ModelColumn: return tr("Error model");
    case ConfidenceColumn: return tr("Confidence");
    case EvidenceColumn: return tr("Evidence");
    default: return {};
  }
}

QString VerdictTableModel::csv() const {
  QStringList lines{QStringLiteral("call,layer,error_model,confidence,evidence")};
  for (int r = 0; r < rowCount(); ++r) {
    QStringList cells;
    for (int c = -1; c < ColumnCount; ++c) {  // the path, then the columns (the tree's name first)
      QString text = c < 0 ? data(index(r, 0), PathRole).toString() : data(index(r, c)).toString();
      if (text.contains(QLatin1Char(',')) || text.contains(QLatin1Char('"')))
        text = QLatin1Char('"') + text.replace(QLatin1Char('"'), QStringLiteral("\"\"")) + QLatin1Char('"');
      cells << text;
    }
    lines << cells.join(QLatin1Char(','));
  }
  return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
}

}  // namespace peat::views
