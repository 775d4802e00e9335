// SPDX-License-Identifier: MIT
#pragma once
// Shared plot styling. Include after views/qcustomplot_include.h.
#include <QEvent>
#include <QFontMetrics>
#include <QHelpEvent>
#include <QPalette>
#include <QStringList>
#include <QTimer>
#include <QToolTip>

#include <algorithm>
#include <utility>
#include <vector>

namespace peat::views {

// Plot colours from the widget's palette, so a dark desktop gets a dark plot.
inline void applyPalette(QCustomPlot* plot) {
  const QPalette p = plot->palette();
  plot->setBackground(p.color(QPalette::Base));
  for (QCPAxis* axis : plot->axisRect()->axes()) {
    axis->setBasePen(QPen(p.color(QPalette::Text)));
    axis->setTickPen(QPen(p.color(QPalette::Text)));
    axis->setSubTickPen(QPen(p.color(QPalette::Text)));
    axis->setTickLabelColor(p.color(QPalette::Text));
    axis->setLabelColor(p.color(QPalette::Text));
  }
  QColor legend = p.color(QPalette::Base);
  legend.setAlpha(200);  // the data shows through a little
  plot->legend->setBrush(legend);
  plot->legend->setBorderPen(QPen(p.color(QPalette::Mid)));
  plot->legend->setTextColor(p.color(QPalette::Text));
}

// Applies the palette now and again whenever it changes (the desktop switches between light and
// dark, or the application sets another palette).
inline void followPalette(QCustomPlot* plot) {
  struct Follower : QObject {
    using QObject::QObject;
    bool eventFilter(QObject* watched, QEvent* event) override {
      if (event->type() == QEvent::PaletteChange) {
        auto* p = static_cast<QCustomPlot*>(watched);
        applyPalette(p);
        p->replot();  // now: a palette change is rare, and a grab right after it must see it
      }
      return false;
    }
  };
  applyPalette(plot);
  plot->installEventFilter(new Follower(plot));
}

// A new plot that follows the palette and tracks the mouse (for its tooltips).
inline QCustomPlot* newTrackingPlot(QWidget* parent) {
  auto* plot = new QCustomPlot(parent);
  // an explicit minimum: layouts then ignore the plot's own hint, which follows its legend and
  // labels, so new data never widens the window
  plot->setMinimumSize(160, 120);
  plot->setMouseTracking(true);
  followPalette(plot);
  return plot;
}

// `text` broken at spaces into lines no wider than `width` pixels in `font` (a word wider than
// that stays whole on its own line).
inline QString wrappedText(const QString& text, const QFont& font, int width) {
  const QFontMetrics metrics(font);
  QStringList lines;
  for (const QString& paragraph : text.split(QLatin1Char('\n'))) {
    QString line;
    for (const QString& word : paragraph.split(QLatin1Char(' '))) {
      const QString tried = line.isEmpty() ? word : line + QLatin1Char(' ') + word;
      if (!line.isEmpty() && metrics.horizontalAdvance(tried) > width) {
        lines << line;
        line = word;
      } else {
        line = tried;
      }
    }
    lines << line;
  }
  return lines.join(QLatin1Char('\n'));
}

// Keeps a note's text (`text`) wrapped to its plot's axis rect, less a margin, after every layout
// (a long note in a narrow dock was cut at both ends).
inline void wrapToAxisRect(QCustomPlot* plot, QCPItemText* item, const QString& text, int margin = 12) {
  const auto wrap = [plot, item, text, margin] {
    const QMargins pad = item->padding();
    const int width = std::max(60, plot->axisRect()->width() - margin - pad.left() - pad.right());
    item->setText(wrappedText(text, item->font(), width));
  };
  wrap();
  QObject::connect(plot, &QCustomPlot::afterLayout, item, wrap);
}

// An axis label that takes the longest of `forms` (longest first) that fits along its axis rect
// after every layout, the last when none does: one line always (a label wrapped to two lines
// squashed the Where map in a narrow dock, one cut at both ends said nothing). A label set later by
// other means is left alone.
inline void fitAxisLabel(QCustomPlot* plot, QCPAxis* axis, const QStringList& forms) {
  axis->setProperty("peatLabelForms", forms);
  const auto fit = [plot, axis] {
    const QStringList all = axis->property("peatLabelForms").toStringList();
    if (all.isEmpty() || !all.contains(axis->label())) return;
    const QFontMetrics metrics(axis->labelFont());
    const bool across = axis->orientation() == Qt::Horizontal;
    const int room = (across ? plot->axisRect()->width() : plot->axisRect()->height()) - 4;
    QString chosen = all.back();
    for (const QString& form : all)
      if (metrics.horizontalAdvance(form) <= room) {
        chosen = form;
        break;
      }
    if (chosen != axis->label()) axis->setLabel(chosen);
  };
  axis->setLabel(forms.isEmpty() ? QString() : forms.front());
  if (!axis->property("peatLabelFitted").toBool()) {
    axis->setProperty("peatLabelFitted", true);
    QObject::connect(plot, &QCustomPlot::afterLayout, axis, fit);
  }
  fit();
}

// A grey note in the middle of the plot, where there is nothing to draw.
inline void centredNote(QCustomPlot* plot, const QString& text) {
  auto* item = new QCPItemText(plot);
  item->position->setType(QCPItemPosition::ptAxisRectRatio);
  item->position->setCoords(0.5, 0.5);
  item->setColor(QColor(0x80, 0x80, 0x80));
  wrapToAxisRect(plot, item, text);
}

// Integer ticks only (bins, tiles).
inline void wholeTicks(QCPAxis* axis) {
  QSharedPointer<QCPAxisTickerFixed> whole(new QCPAxisTickerFixed);
  whole->setTickStep(1);
  whole->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  axis->setTicker(whole);
}

// Shows or hides a legend kept below the axis rect. A hidden one leaves the layout: an invisible
// element still holds its cell, and an empty legend's cell narrows the axis rect's column.
inline void showLegendBelow(QCustomPlot* plot, bool shown) {
  QCPLayoutGrid* grid = plot->plotLayout();
  plot->legend->setVisible(shown);
  const bool placed = plot->legend->layout() == grid;
  if (shown && !placed) {
    const int row = grid->rowCount();
    grid->addElement(row, 0, plot->legend);
    grid->setRowStretchFactor(row, 0.001);
  } else if (!shown && placed) {
    grid->take(plot->legend);
    grid->simplify();
  }
}

// The legend's items in their order (QCPLegend::itemCount counts the empty cells of its last row too).
inline std::vector<QCPAbstractLegendItem*> legendItems(QCPLegend* legend) {
  std::vector<QCPAbstractLegendItem*> items;
  for (int i = 0; i < legend->itemCount(); ++i)
    if (QCPAbstractLegendItem* item = legend->item(i)) items.push_back(item);
  return items;
}

// The most columns, up to `most`, in which `legend`'s items side by side fit `width` pixels (each
// column as wide as its widest item); one when none do.
inline int legendColumnsFitting(QCPLegend* legend, int width, int most) {
  const std::vector<QCPAbstractLegendItem*> items = legendItems(legend);
  for (int columns = std::max(1, std::min(most, int(items.size()))); columns > 1; --columns) {
    std::vector<int> widest(std::size_t(columns), 0);
    for (std::size_t i = 0; i < items.size(); ++i)
      widest[i % std::size_t(columns)] = std::max(widest[i % std::size_t(columns)], items[i]->minimumOuterSizeHint().width());
    int total = legend->margins().left() + legend->margins().right() + (columns - 1) * legend->columnSpacing();
    for (int w : widest) total += w;
    if (total <= width) return columns;
  }
  return 1;
}

// The width the legend below `plot` has: that of its column of the plot's layout, under the axis
// rect (a colour scale takes the next column).
inline int legendRoom(QCustomPlot* plot) {
  const int width = plot->axisRect()->outerRect().width() > 0 ? plot->axisRect()->outerRect().width() : plot->viewport().width();
  return width - 4;
}

// The columns the legend below `plot` fits in now: its most, fewer in a narrow plot.
inline int legendColumnsNow(QCustomPlot* plot) {
  const int most = std::max(1, plot->legend->property("peatMostColumns").toInt());
  return legendColumnsFitting(plot->legend, legendRoom(plot), most);
}

// The name a plottable had before its legend shortened it ("peatWholeName" while the short one set
// then is still shown), else its name: one set since by other code is whole.
inline QString wholeLegendName(const QCPAbstractPlottable* plottable) {
  const QString whole = plottable->property("peatWholeName").toString();
  return !whole.isEmpty() && plottable->property("peatShownName").toString() == plottable->name() ? whole : plottable->name();
}

// The names a legend in one column must shorten (with an ellipsis) to fit its room, or may have
// back whole (wholeLegendName): each plottable with the name to show.
inline std::vector<std::pair<QCPAbstractPlottable*, QString>> legendNamesToFit(QCustomPlot* plot, int columns) {
  std::vector<std::pair<QCPAbstractPlottable*, QString>> changes;
  QCPLegend* legend = plot->legend;
  for (QCPAbstractLegendItem* item : legendItems(legend)) {
    auto* entry = qobject_cast<QCPPlottableLegendItem*>(item);
    if (!entry) continue;
    QCPAbstractPlottable* plottable = entry->plottable();
    const QString whole = wholeLegendName(plottable);
    const int textRoom = legendRoom(plot) - legend->margins().left() - legend->margins().right() - item->margins().left() -
                         item->margins().right() - legend->iconSize().width() - legend->iconTextPadding() - 2;
    const QString shown = columns > 1 ? whole : QFontMetrics(item->font()).elidedText(whole, Qt::ElideRight, std::max(textRoom, 24));
    if (shown != plottable->name()) changes.emplace_back(plottable, shown);
  }
  return changes;
}

// The legend's items laid out again in `columns` columns, filled row by row.
inline void arrangeLegend(QCPLegend* legend, int columns) {
  legend->setWrap(columns);
  legend->setFillOrder(QCPLegend::foColumnsFirst, true);
}

// Fits the legend below `plot` to its room now: its columns, and in one column its names
// (legendNamesToFit); true when anything changed.
inline bool fitLegend(QCustomPlot* plot) {
  bool changed = false;
  const int columns = legendColumnsNow(plot);
  if (columns != plot->legend->wrap()) {
    arrangeLegend(plot->legend, columns);
    changed = true;
  }
  for (const auto& [plottable, shown] : legendNamesToFit(plot, columns)) {
    plottable->setProperty("peatWholeName", wholeLegendName(plottable));
    plottable->setName(shown);
    plottable->setProperty("peatShownName", shown);
    changed = true;
  }
  return changed;
}

// The whole name of the legend entry of `plot` at `pos` where its legend shows it shortened, else empty.
inline QString shortenedLegendNameAt(QCustomPlot* plot, const QPoint& pos) {
  if (!plot->legend->visible()) return {};
  for (QCPAbstractLegendItem* item : legendItems(plot->legend))
    if (auto* entry = qobject_cast<QCPPlottableLegendItem*>(item); entry && item->outerRect().contains(pos)) {
      const QString whole = wholeLegendName(entry->plottable());
      return whole != entry->plottable()->name() ? whole : QString();
    }
  return {};
}

// Shows a shortened legend name whole as the tooltip of its entry (the plot's own tooltips elsewhere).
class LegendNameTips : public QObject {
 public:
  explicit LegendNameTips(QCustomPlot* plot) : QObject(plot), plot_(plot) { plot->installEventFilter(this); }
  bool eventFilter(QObject* watched, QEvent* event) override {
    if (watched != plot_ || event->type() != QEvent::ToolTip) return false;
    const auto* help = static_cast<QHelpEvent*>(event);
    const QString whole = shortenedLegendNameAt(plot_, help->pos());
    if (whole.isEmpty()) return false;
    QToolTip::showText(help->globalPos(), whole, plot_);
    return true;
  }

 private:
  QCustomPlot* plot_;
};

// The legend below `plot` in at most `most` columns, fewer when the plot is too narrow for them
// (a narrow dock, longer names), names shortened where even one column is too narrow: after every
// replot that finds it does not fit, it is fitted again and drawn once more, outside that replot
// (a layout changed while it is drawn can crash). A shortened name shows whole as its entry's tooltip.
inline void setLegendColumns(QCustomPlot* plot, int most) {
  plot->legend->setProperty("peatMostColumns", most);
  if (!plot->property("peatLegendFits").toBool()) {
    plot->setProperty("peatLegendFits", true);
    new LegendNameTips(plot);
    QObject::connect(plot, &QCustomPlot::afterReplot, plot, [plot] {
      if (!plot->legend->visible()) return;
      const int columns = legendColumnsNow(plot);
      if (columns == plot->legend->wrap() && legendNamesToFit(plot, columns).empty()) return;
      QTimer::singleShot(0, plot, [plot] {
        if (fitLegend(plot)) plot->replot(QCustomPlot::rpQueuedReplot);
      });
    });
  }
  fitLegend(plot);
}

// The legend below the axis rect, in rows, so it never covers data or labels drawn on the plot.
// Call once per plot; `columns`: the most items per row (fewer for long names, and in a narrow plot).
inline void legendBelow(QCustomPlot* plot, int columns = 4) {
  if (plot->axisRect()->insetLayout()->elements(false).contains(plot->legend))
    plot->axisRect()->insetLayout()->take(plot->legend);
  plot->legend->setMargins(QMargins(4, 2, 4, 2));
  setLegendColumns(plot, columns);
  showLegendBelow(plot, plot->legend->visible());
}

// A colour scale at the right of the axis rect, made once and kept (the plot owns it).
inline QCPColorScale* colorScaleOf(QCustomPlot* plot, const QString& label) {
  QCPColorScale* scale = nullptr;
  for (int i = 0; i < plot->plotLayout()->elementCount(); ++i)
    if (auto* s = qobject_cast<QCPColorScale*>(plot->plotLayout()->elementAt(i))) scale = s;
  if (!scale) {
    scale = new QCPColorScale(plot);
    plot->plotLayout()->addElement(0, 1, scale);
    scale->setBarWidth(12);
    auto* margins = new QCPMarginGroup(plot);  // the bar as tall as the axis rect
    plot->axisRect()->setMarginGroup(QCP::msTop | QCP::msBottom, margins);
    scale->setMarginGroup(QCP::msTop | QCP::msBottom, margins);
  }
  scale->setLabel(label);
  scale->axis()->setLabelColor(plot->xAxis->labelColor());
  scale->axis()->setTickLabelColor(plot->xAxis->tickLabelColor());
  scale->axis()->setBasePen(plot->xAxis->basePen());
  scale->axis()->setTickPen(plot->xAxis->tickPen());
  return scale;
}

inline QCPColorGradient threeColors(const QColor& low, const QColor& mid, const QColor& high) {
  QCPColorGradient g;
  g.clearColorStops();
  g.setColorStopAt(0, low);
  g.setColorStopAt(0.5, mid);
  g.setColorStopAt(1, high);
  g.setLevelCount(64);
  return g;
}

// A map of shares in [0, 1], one unit square per tile over [0, across] x [0, down], with whole
// ticks: two cells per tile each way, so the squares are exact even one tile high or wide.
// share(row, column) gives each tile's value.
template <class Share>
QCPColorMap* tileMap(QCustomPlot* plot, int across, int down, const QCPColorGradient& gradient, Share share) {
  auto* map = new QCPColorMap(plot->xAxis, plot->yAxis);
  map->data()->setSize(2 * across, 2 * down);
  map->data()->setRange(QCPRange(0.25, across - 0.25), QCPRange(0.25, down - 0.25));
  for (int r = 0; r < down; ++r)
    for (int c = 0; c < across; ++c) {
      const double v = share(r, c);
      for (int k = 0; k < 4; ++k) map->data()->setCell(2 * c + k % 2, 2 * r + k / 2, v);
    }
  map->removeFromLegend();  // its colour scale explains it; an empty legend item took a column
  map->setGradient(gradient);
  map->setDataRange(QCPRange(0, 1));
  map->setInterpolate(false);
  wholeTicks(plot->xAxis);
  wholeTicks(plot->yAxis);
  return map;
}

}  // namespace peat::views
