// SPDX-License-Identifier: MIT
// The error panel's evidence marks: a verdict's finding drawn where its evidence is (a bit, a span of
// bits a format drops, a stride, the confined columns or rows).
#include "views/qcustomplot_include.h"  // first: see the header

#include <QStringList>

#include <algorithm>

#include "core/analysis/finding_evidence.h"
#include "views/errorplotpanel.h"
#include "views/palette.h"
#include "views/plotstyle.h"

namespace peat::views {

namespace {
// "60-63" / "5, 60-63": ranges of lines as people read them
QString rangeText(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  QStringList parts;
  for (const auto& [lo, hi] : ranges) parts << (lo == hi ? QString::number(lo) : QStringLiteral("%1-%2").arg(lo).arg(hi));
  return parts.join(QStringLiteral(", "));
}
}  // namespace

void ErrorPlotPanel::showFinding(const store::Finding& finding) {
  const analyzer::FindingEvidence e = analyzer::findingEvidence(finding);
  if (e.bit) {
    highlightBit(*e.bit);
    showBitsTab();
  } else if (e.stride) {
    highlightPattern(*e.stride);
  } else if (e.confined && (!e.columns.empty() || !e.rows.empty())) {
    highlightConfinement(e.columns, e.rows, e.truncated);
  } else if (e.confined) {
    highlightPattern(0);
  } else if (e.highestDroppedBit >= 0) {
    highlightBitSpan(0, e.highestDroppedBit,
                     tr("bits %1 does not keep (0-%2)").arg(QString::fromStdString(e.format)).arg(e.highestDroppedBit));
  }
}

int ErrorPlotPanel::highlightConfinement(const std::vector<std::pair<uint64_t, uint64_t>>& columns,
                                         const std::vector<std::pair<uint64_t, uint64_t>>& rows, bool truncated) {
  if (reports_.empty()) return 0;
  drawMap();  // drops earlier marks
  const analyzer::StoredCallReport& r = reports_.front();
  if (r.tileMismatch.empty() || r.tileCols == 0 || r.tileRows == 0) return 0;
  lower_->setCurrentWidget(map_);
  const QColor orange = palette::evidence();
  // the map's x is the column in tiles, its y the row in tiles: each range is a band across the
  // whole map, from its first line's edge to its last's
  const double across = double(r.tilesAcross), down = double(r.tilesDown);
  uint64_t lines = 0;
  for (const auto& [lo, hi] : columns) {
    auto* band = new QCPItemRect(map_);
    band->topLeft->setCoords(double(lo) / double(r.tileCols), 0);
    band->bottomRight->setCoords(double(hi + 1) / double(r.tileCols), down);
    band->setPen(QPen(orange, 2));
    ++marks_;
    lines += hi - lo + 1;
  }
  uint64_t rowLines = 0;
  for (const auto& [lo, hi] : rows) {
    auto* band = new QCPItemRect(map_);
    band->topLeft->setCoords(0, double(lo) / double(r.tileRows));
    band->bottomRight->setCoords(across, double(hi + 1) / double(r.tileRows));
    band->setPen(QPen(orange, 2));
    ++marks_;
    rowLines += hi - lo + 1;
  }
  QStringList where;
  const auto count = [](uint64_t n, const QString& one, const QString& many) { return QStringLiteral("%1 %2").arg(n).arg(n == 1 ? one : many); };
  if (!columns.empty())
    where << count(lines, tr("column"), tr("columns")) +
                 (columns.size() <= 3 ? QStringLiteral(" (%1)").arg(rangeText(columns)) : QString());
  if (!rows.empty())
    where << count(rowLines, tr("row"), tr("rows")) + (rows.size() <= 3 ? QStringLiteral(" (%1)").arg(rangeText(rows)) : QString());
  auto* note = new QCPItemText(map_);
  note->position->setType(QCPItemPosition::ptAxisRectRatio);
  note->position->setCoords(0.01, 0.01);
  note->setPositionAlignment(Qt::AlignTop | Qt::AlignLeft);
  evidenceText_ = tr("evidence: large errors confined to %1%2").arg(where.join(tr(" and ")), truncated ? tr(" (the first 64 ranges)") : QString());
  note->setColor(orange);
  note->setBrush(map_->legend->brush());
  wrapToAxisRect(map_, note, evidenceText_);
  map_->replot();
  return marks_;
}

int ErrorPlotPanel::highlightPattern(int stride) {
  if (reports_.empty()) return 0;
  drawMap();  // drops earlier marks
  if (reports_.front().tileMismatch.empty() || stride < 0) return 0;
  const analyzer::StoredCallReport& r = reports_.front();
  lower_->setCurrentWidget(map_);
  const QColor orange = palette::evidence();
  QString text;
  if (stride > 0 && r.worstRow >= 0) {
    // every element a whole number of strides from the worst one, at most kMarks of them
    constexpr uint64_t kMarks = 4096;
    const uint64_t n = r.rows * r.cols, worst = uint64_t(r.worstRow) * r.cols + uint64_t(r.worstCol);
    const uint64_t step = uint64_t(stride) * std::max<uint64_t>(1, n / uint64_t(stride) / kMarks);
    QCPGraph* marks = map_->addGraph();
    marks->setLineStyle(QCPGraph::lsNone);
    marks->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssPlus, QPen(orange, 1.5), Qt::NoBrush, 5));
    for (uint64_t i = worst % step; i < n; i += step) {
      marks->addData((double(i % r.cols) + 0.5) / double(r.tileCols), (double(i / r.cols) + 0.5) / double(r.tileRows));
      ++marks_;
    }
    marks->setName(tr("evidence: every %1 elements from the worst").arg(stride));
    text = tr("evidence: errors repeat every %1 elements").arg(stride);
  } else {
    constexpr int kFrames = 512;
    for (uint64_t t = 0; t < r.tileMismatch.size() && marks_ < kFrames; ++t) {
      if (!r.tileMismatch[t]) continue;
      const double x = double(t % r.tilesAcross), y = double(t / r.tilesAcross);
      auto* frame = new QCPItemRect(map_);
      frame->topLeft->setCoords(x + 0.04, y + 0.04);
      frame->bottomRight->setCoords(x + 0.96, y + 0.96);
      frame->setPen(QPen(orange, 2));
      ++marks_;
    }
    text = tr("evidence: errors confined to %n tile(s)", nullptr, marks_);
  }
  auto* note = new QCPItemText(map_);
  note->position->setType(QCPItemPosition::ptAxisRectRatio);
  note->position->setCoords(0.01, 0.01);
  note->setPositionAlignment(Qt::AlignTop | Qt::AlignLeft);
  note->setColor(orange);
  note->setBrush(map_->legend->brush());
  wrapToAxisRect(map_, note, text);
  evidenceText_ = text;
  map_->replot();
  return marks_;
}

}  // namespace peat::views
