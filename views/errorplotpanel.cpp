// SPDX-License-Identifier: MIT
#include "views/qcustomplot_include.h"  // first: see the header

#include <QComboBox>
#include <QHBoxLayout>
#include <QSplitter>
#include <QTabWidget>
#include <QToolTip>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "views/errorplotpanel.h"

#include "core/analysis/finding_evidence.h"
#include "views/palette.h"
#include "views/plotstyle.h"

namespace peat::views {



namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

// The elements of tile (row, c): the last row and column of tiles may be cut short.
uint64_t tileElements(const analyzer::StoredCallReport& r, int row, int c) {
  return std::min<uint64_t>(r.tileRows, r.rows - uint64_t(row) * r.tileRows) * std::min<uint64_t>(r.tileCols, r.cols - uint64_t(c) * r.tileCols);
}



// The call as the session tree names it ("#3 conv2 (iteration 0)"), or its path when unknown.
QString shortCall(const analyzer::StoredCallReport& r) { return qs(r.displayName.empty() ? r.call : r.displayName); }

}  // namespace

ErrorPlotPanel::ErrorPlotPanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  scaleBox_ = new QComboBox(this);
  scaleBox_->addItems({tr("log2 |candidate - golden|"), tr("log2 ULP distance")});
  scaleBox_->setToolTip(tr("The error measure of the histogram"));
  groupBox_ = new QComboBox(this);
  groupBox_->addItems({tr("Where: tiles of 16 x 16"), tr("Where: blocks of 32 along rows (MX)"),
                       tr("Where: blocks of 16 along rows (NVFP4)")});
  groupBox_->setToolTip(tr("How the Where map groups the output's elements. Blocks along the rows are those of the\n"
                           "block-scaled formats: a scale computed from the wrong block shows as whole blocks in error.\n"
                           "A compared pair, or a call of a run that stored its outputs, is regrouped at once; other\n"
                           "calls keep the tiles their analysis stored (peat analyze -s SESSION --run RUN --tile 1x32)."));
  for (QComboBox* box : {scaleBox_, groupBox_}) {  // narrow panels elide the choices instead of widening the window
    box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    box->setMinimumContentsLength(6);
  }
  auto* top = new QHBoxLayout;
  top->addWidget(scaleBox_, 1);
  top->addWidget(groupBox_, 1);
  layout->addLayout(top);
  connect(groupBox_, &QComboBox::activated, this, &ErrorPlotPanel::requestGrouping);
  auto* split = new QSplitter(Qt::Vertical, this);
  plot_ = new QCustomPlot(split);
  lower_ = new QTabWidget(split);
  bits_ = new QCustomPlot(lower_);
  map_ = new QCustomPlot(lower_);
  lower_->addTab(bits_, tr("Bits"));
  lower_->addTab(map_, tr("Where"));
  map_->setMouseTracking(true);
  for (QCustomPlot* p : {plot_, bits_, map_}) {
    followPalette(p);
    legendBelow(p);  // never over the bars, the tiles or the evidence's label
  }
  map_->setToolTip(tr("The share of mismatched elements in each tile of the output (seen as rows x columns);\n"
                      "the star marks the element with the largest error. Errors confined to an edge, a band or a\n"
                      "stride point to indexing; errors everywhere to rounding."));
  connect(map_, &QCustomPlot::mouseMove, this, &ErrorPlotPanel::hoverMap);
  connect(map_, &QCustomPlot::mousePress, this, [this](QMouseEvent* event) {
    const auto tile = tileAt(event->position());
    if (tile) emit tileClicked(tile->first, tile->second);
  });
  // explicit minimums: layouts then ignore the plots' own hints, which follow their legends and
  // colour scales, so a call with a wider legend never widens the window
  plot_->setMinimumSize(160, 120);
  bits_->setMinimumSize(160, 100);
  map_->setMinimumSize(160, 100);
  plot_->setToolTip(tr("How many elements of the call's output differ from the golden kernel's by each power of two.\n"
                       "Select several calls (Ctrl+click) to overlay them."));
  bits_->setToolTip(tr("Elements whose bit differs, per bit position: 31 is the sign, 30-23 the exponent, 22-0 the mantissa.\n"
                       "Precision loss shows in the low mantissa bits; bit flips and stuck-at faults in single positions."));
  plot_->setMouseTracking(true);
  bits_->setMouseTracking(true);
  layout->addWidget(split, 1);
  connect(scaleBox_, &QComboBox::currentIndexChanged, this, [this](int i) { setScale(i == 0 ? Scale::Log2Abs : Scale::Log2Ulp); });
  connect(plot_, &QCustomPlot::mouseMove, this, &ErrorPlotPanel::hoverHistogram);
  connect(bits_, &QCustomPlot::mouseMove, this, &ErrorPlotPanel::hoverBits);
  connect(plot_, &QCustomPlot::mousePress, this, [this](QMouseEvent* event) {
    if (reports_.empty() || scale_ != Scale::Log2Abs) return;
    const int bin = int(std::lround(plot_->xAxis->pixelToCoord(event->position().x())));
    const analyzer::StoredCallReport& r = reports_.front();
    const int i = bin - r.log2AbsFirstBin;
    if (i < 0 || i >= int(r.log2Abs.size()) || r.log2Abs[std::size_t(i)] == 0) return;
    if ((event->modifiers() & Qt::ShiftModifier) && mapBin_ != INT_MIN)  // extend the selection to this bar
      emit binClicked(std::min(mapBin_, bin), std::max(mapBinLast_, bin));
    else
      emit binClicked(bin);
  });
  connect(bits_, &QCustomPlot::mousePress, this, [this](QMouseEvent* event) {
    if (reports_.empty()) return;
    const int b = int(std::lround(bits_->xAxis->pixelToCoord(event->position().x())));
    if (b >= 0 && b < int(reports_.front().bitMismatch.size()) && reports_.front().bitMismatch[std::size_t(b)] > 0)
      emit bitClicked(b);
  });
  showMessage(tr("Select an analysed call"));
}

void ErrorPlotPanel::showMessage(const QString& text) {
  reports_.clear();
  binSpan_ = nullptr;  // the plots' items and plottables go below
  selectionBars_ = nullptr;
  selectionBits_.clear();
  spanLabel_.clear();
  for (QCustomPlot* p : {plot_, bits_, map_}) {
    p->clearPlottables();
    p->clearItems();
    showLegendBelow(p, false);
  }
  plot_->xAxis->setLabel(scaleBox_->currentText());
  plot_->yAxis->setLabel(tr("elements"));
  plot_->xAxis->setRange(-40, 10);
  plot_->yAxis->setRange(0, 1);
  centredNote(plot_, text);
  bits_->xAxis->setLabel(tr("bit position"));
  bits_->xAxis->setRange(-1, 32);
  bits_->xAxis->setRangeReversed(true);
  bits_->yAxis->setLabel(tr("elements"));
  bits_->yAxis->setRange(0, 1);  // not the last call's counts
  // nor the last call's tile map's words (its colour map went with the plottables)
  map_->xAxis->setLabel(QString());
  map_->yAxis->setLabel(QString());
  centredNote(map_, text);
  plot_->replot(QCustomPlot::rpQueuedReplot);
  bits_->replot(QCustomPlot::rpQueuedReplot);
  map_->replot(QCustomPlot::rpQueuedReplot);
}

void ErrorPlotPanel::showReports(const std::vector<analyzer::StoredCallReport>& reports) {
  mapCounts_.clear();
  mapBit_ = -1;
  mapBin_ = mapBinLast_ = INT_MIN;
  if (reports.empty()) {
    showMessage(tr("No analysed call selected"));
    return;
  }
  reports_ = reports;
  draw();
}

void ErrorPlotPanel::setScale(Scale scale) {
  if (scale == scale_) return;
  scale_ = scale;
  {
    const QSignalBlocker block(scaleBox_);
    scaleBox_->setCurrentIndex(scale == Scale::Log2Abs ? 0 : 1);
  }
  if (!reports_.empty()) {
    draw();
  } else {  // no call: the axis still says which scale
    plot_->xAxis->setLabel(scaleBox_->currentText());
    plot_->replot(QCustomPlot::rpQueuedReplot);
  }
  emit scaleChanged(scale);
}

void ErrorPlotPanel::draw() {
  plot_->clearPlottables();
  plot_->clearItems();
  binSpan_ = nullptr;
  double lo = 1e9, hi = -1e9, top = 1;
  const bool several = reports_.size() > 1;
  for (std::size_t k = 0; k < reports_.size(); ++k) {
    const analyzer::StoredCallReport& r = reports_[k];
    const std::vector<uint64_t>& h = scale_ == Scale::Log2Abs ? r.log2Abs : r.log2Ulp;
    const int first = scale_ == Scale::Log2Abs ? r.log2AbsFirstBin : 0;
    QVector<double> x, y;
    for (std::size_t i = 0; i < h.size(); ++i)
      if (h[i]) {
        x << first + int(i);
        y << double(h[i]);
        lo = std::min(lo, double(first + int(i)));
        hi = std::max(hi, double(first + int(i)));
        top = std::max(top, double(h[i]));
      }
    const QColor color = palette::series(int(k));
    const QString name = shortCall(r) + (r.verdict.empty() ? QString() : QStringLiteral(" (") + qs(r.verdict) + QLatin1Char(')'));
    if (!several) {
      auto* bars = new QCPBars(plot_->xAxis, plot_->yAxis);
      bars->setName(name);
      bars->setWidth(0.9);
      bars->setPen(Qt::NoPen);
      bars->setBrush(color);
      bars->setData(x, y, true);
    } else {
      QCPGraph* g = plot_->addGraph();
      g->setName(name);
      g->setLineStyle(QCPGraph::lsStepCenter);
      g->setPen(QPen(color, 2));
      g->setData(x, y, true);
    }
  }
  if (lo > hi) {
    centredNote(plot_, tr("No element differs"));
    lo = -1;
    hi = 1;
  }
  plot_->yAxis->setScaleType(QCPAxis::stLogarithmic);
  plot_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  plot_->yAxis->setRange(0.8, top * 2);
  plot_->xAxis->setRange(lo - 1.5, hi + 1.5);
  wholeTicks(plot_->xAxis);  // bins are whole powers of two
  plot_->xAxis->setLabel(scale_ == Scale::Log2Abs ? tr("log2 |candidate - golden|") : tr("log2 ULP distance"));
  plot_->yAxis->setLabel(tr("elements (log)"));
  setLegendColumns(plot_, reports_.size() > 3 ? 2 : 1);  // call names are long: one or two to a row
  showLegendBelow(plot_, true);
  plot_->replot();

  // bit positions of the first call, coloured by field
  bits_->clearPlottables();
  selectionBars_ = nullptr;
  selectionBits_.clear();
  bits_->clearItems();
  highlighted_ = -1;
  spanLabel_.clear();
  const analyzer::StoredCallReport& r = reports_.front();
  QVector<double> keys[3], values[3];
  for (int b = 0; b < int(r.bitMismatch.size()); ++b) {
    const int field = b == 31 ? 0 : b >= 23 ? 1 : 2;
    keys[field] << b;
    values[field] << double(r.bitMismatch[std::size_t(b)]);
  }
  const QString names[3] = {tr("sign"), tr("exponent"), tr("mantissa")};
  const QColor colors[3] = {palette::bitField(0), palette::bitField(1), palette::bitField(2)};
  double most = 1;
  for (int f = 0; f < 3; ++f) {
    auto* bars = new QCPBars(bits_->xAxis, bits_->yAxis);
    bars->setName(names[f]);
    bars->setPen(Qt::NoPen);
    bars->setBrush(colors[f]);
    bars->setWidth(0.8);
    bars->setData(keys[f], values[f], true);
    for (double v : values[f]) most = std::max(most, v);
  }
  bits_->xAxis->setRange(-1, 32);
  bits_->xAxis->setRangeReversed(true);  // the sign on the left, as bits are written
  bits_->xAxis->setLabel(several ? tr("bit position, %1").arg(shortCall(r)) : tr("bit position"));
  bits_->yAxis->setRange(0, most * 1.1);
  bits_->yAxis->setLabel(tr("elements"));
  showLegendBelow(bits_, true);
  bits_->replot();
  drawMap();
}

void ErrorPlotPanel::showMapCounts(const std::vector<uint64_t>& counts, int bit) {
  if (reports_.empty()) return;
  const bool again = bit == mapBit_;  // the same bar twice: back to all mismatches
  mapCounts_ = again ? std::vector<uint64_t>{} : counts;
  mapBit_ = again ? -1 : bit;
  mapBin_ = INT_MIN;
  shadeBins();
  showSelectionBits({});
  highlightBit(mapBit_);
  drawMap();
  lower_->setCurrentWidget(map_);
}

void ErrorPlotPanel::showMapCountsOfBin(const std::vector<uint64_t>& counts, int bin, int lastBin) {
  if (reports_.empty()) return;
  lastBin = std::max(bin, lastBin);
  const bool again = bin == mapBin_ && lastBin == mapBinLast_;  // the same selection twice: all mismatches
  mapCounts_ = again ? std::vector<uint64_t>{} : counts;
  mapBin_ = again ? INT_MIN : bin;
  mapBinLast_ = again ? INT_MIN : lastBin;
  mapBit_ = -1;
  highlightBit(-1);
  shadeBins();
  drawMap();
  lower_->setCurrentWidget(map_);
}

void ErrorPlotPanel::showSelectionBits(const std::vector<uint64_t>& counts) {
  if (selectionBars_) bits_->removePlottable(selectionBars_);
  selectionBars_ = nullptr;
  selectionBits_ = mapBin_ == INT_MIN ? std::vector<uint64_t>{} : counts;  // a cleared selection shows none
  if (!selectionBits_.empty()) {
    selectionBars_ = new QCPBars(bits_->xAxis, bits_->yAxis);
    selectionBars_->setName(tr("selected bars' elements"));
    selectionBars_->setPen(QPen(palette::evidence().darker(140), 1));
    selectionBars_->setBrush(palette::evidence());
    selectionBars_->setWidth(0.5);
    QVector<double> keys, values;
    for (int b = 0; b < int(selectionBits_.size()); ++b) {
      keys << b;
      values << double(selectionBits_[std::size_t(b)]);
    }
    selectionBars_->setData(keys, values, true);
  }
  bits_->replot();
}

void ErrorPlotPanel::shadeBins() {
  if (binSpan_) plot_->removeItem(binSpan_);
  binSpan_ = nullptr;
  if (mapBin_ != INT_MIN && scale_ == Scale::Log2Abs) {
    binSpan_ = new QCPItemRect(plot_);
    for (QCPItemPosition* corner : {binSpan_->topLeft, binSpan_->bottomRight}) {
      corner->setTypeX(QCPItemPosition::ptPlotCoords);
      corner->setTypeY(QCPItemPosition::ptAxisRectRatio);
    }
    binSpan_->topLeft->setCoords(mapBin_ - 0.5, 0.0);
    binSpan_->bottomRight->setCoords(mapBinLast_ + 0.5, 1.0);
    binSpan_->setPen(QPen(palette::evidence(), 1.5, Qt::DashLine));
    QColor fill = palette::evidence();
    fill.setAlpha(45);
    binSpan_->setBrush(fill);
  }
  plot_->replot();
}

void ErrorPlotPanel::requestGrouping(int index) {
  const QSignalBlocker block(groupBox_);
  groupBox_->setCurrentIndex(index);
  if (index == 1) emit groupingRequested(1, 32);
  else if (index == 2) emit groupingRequested(1, 16);
  else emit groupingRequested(16, 16);
}

void ErrorPlotPanel::drawMap() {
  map_->clearPlottables();
  map_->clearItems();
  showLegendBelow(map_, false);  // back with the worst element's star
  marks_ = 0;
  evidenceText_.clear();
  const analyzer::StoredCallReport& r = reports_.front();
  if (r.tileMismatch.empty() || r.tilesDown == 0 || r.tilesAcross == 0) {
    centredNote(map_, tr("No tile map stored for this call"));
    map_->replot();
    return;
  }
  const int across = int(r.tilesAcross), down = int(r.tilesDown);
  // light: no mismatch; dark blue: every element of the tile differs
  // one bit's mismatches (a linked view from the Bits plot) or all of them
  const bool oneBit = (mapBit_ >= 0 || mapBin_ != INT_MIN) && mapCounts_.size() == r.tileMismatch.size();
  const std::vector<uint64_t>& counts = oneBit ? mapCounts_ : r.tileMismatch;
  double most = 0;  // the scale runs over the data's own range, so a map of small shares is not all white
  const QCPColorGradient blues = threeColors(QColor(0xf5, 0xf5, 0xf5), QColor(0x64, 0xb5, 0xf6), QColor(0x0d, 0x47, 0xa1));
  QCPColorMap* tiles = tileMap(map_, across, down, blues,
                               [&](int row, int c) {
                                 const double share = double(counts[std::size_t(row) * std::size_t(across) + std::size_t(c)]) /
                                                      double(std::max<uint64_t>(1, tileElements(r, row, c)));
                                 most = std::max(most, share);
                                 return share;
                               });
  QCPColorScale* scale = colorScaleOf(map_, tr("share differing"));
  tiles->setColorScale(scale);  // the map takes the scale's gradient and range: set them there
  scale->setGradient(blues);
  scale->setDataRange(QCPRange(0, most > 0 ? most : 1));
  fitAxisLabel(map_, scale->axis(), {tr("share differing"), tr("share")});  // along a short map, the short form
  if (oneBit) {
    auto* title = new QCPItemText(map_);
    title->position->setType(QCPItemPosition::ptAxisRectRatio);
    title->position->setCoords(0.5, 0.02);
    title->setPositionAlignment(Qt::AlignTop | Qt::AlignHCenter);
    title->setBrush(QBrush(QColor(255, 255, 255, 220)));
    wrapToAxisRect(map_, title,
                   mapBit_ >= 0
                       ? tr("elements whose bit %1 differs (click the Bits plot's bar again for all mismatches)").arg(mapBit_)
                       : tr("elements with |error| in [2^%1, 2^%2) (click the histogram's bar again for all mismatches, "
                            "shift-click another to extend)")
                             .arg(mapBin_)
                             .arg(mapBinLast_ + 1));
  }
  if (r.worstRow >= 0) {
    QCPGraph* worst = map_->addGraph();
    worst->setLineStyle(QCPGraph::lsNone);
    worst->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssStar, QPen(QColor(0xd3, 0x2f, 0x2f), 2), Qt::NoBrush, 14));
    worst->addData((double(r.worstCol) + 0.5) / double(r.tileCols), (double(r.worstRow) + 0.5) / double(r.tileRows));
    worst->setName(tr("largest |error|: row %1, col %2").arg(r.worstRow).arg(r.worstCol));
    showLegendBelow(map_, true);
  }
  if (r.tileRows == 1) {  // blocks along the rows
    fitAxisLabel(map_, map_->xAxis,
                 {tr("block along the row (%1 values each, %2 columns in all)").arg(r.tileCols).arg(r.cols),
                  tr("block along the row (%1 values each)").arg(r.tileCols), tr("block along the row")});
    fitAxisLabel(map_, map_->yAxis, {tr("row (%1 in all)").arg(r.rows), tr("row")});
  } else {
    fitAxisLabel(map_, map_->xAxis,
                 {tr("tile column (%1 columns each; output seen as %2 x %3)").arg(r.tileCols).arg(r.rows).arg(r.cols),
                  tr("tile column (%1 columns each)").arg(r.tileCols), tr("tile column")});
    fitAxisLabel(map_, map_->yAxis, {tr("tile row (%1 rows each)").arg(r.tileRows), tr("tile row")});
  }
  map_->xAxis->setRange(0, across);
  map_->yAxis->setRange(0, down);
  map_->yAxis->setRangeReversed(true);
  map_->replot();
}

std::optional<std::pair<qint64, qint64>> ErrorPlotPanel::tileAt(const QPointF& pixel) const {
  if (reports_.empty() || reports_.front().tileMismatch.empty()) return std::nullopt;
  const analyzer::StoredCallReport& r = reports_.front();
  const double x = std::floor(map_->xAxis->pixelToCoord(pixel.x())), y = std::floor(map_->yAxis->pixelToCoord(pixel.y()));
  if (x < 0 || y < 0 || x >= double(r.tilesAcross) || y >= double(r.tilesDown)) return std::nullopt;
  return std::make_pair(qint64(y), qint64(x));
}

QCPColorScale* ErrorPlotPanel::mapScale() const {
  for (int i = 0; i < map_->plotLayout()->elementCount(); ++i)
    if (auto* s = qobject_cast<QCPColorScale*>(map_->plotLayout()->elementAt(i))) return s;
  return nullptr;
}

QString ErrorPlotPanel::mapHoverText(qint64 row, qint64 c) const {
  if (reports_.empty() || reports_.front().tileMismatch.empty()) return {};
  const analyzer::StoredCallReport& r = reports_.front();
  if (row < 0 || c < 0 || uint64_t(row) >= r.tilesDown || uint64_t(c) >= r.tilesAcross) return {};
  const bool linked = (mapBit_ >= 0 || mapBin_ != INT_MIN) && mapCounts_.size() == r.tileMismatch.size();
  const std::size_t t = std::size_t(row) * std::size_t(r.tilesAcross) + std::size_t(c);
  const uint64_t n = (linked ? mapCounts_ : r.tileMismatch)[t], all = tileElements(r, int(row), int(c));
  const uint64_t top = uint64_t(row) * r.tileRows, left = uint64_t(c) * r.tileCols;
  return tr("tile row %1, column %2 (rows %3-%4, columns %5-%6): %7 of %8 elements %9 (%10%)")
      .arg(row).arg(c).arg(top).arg(std::min(r.rows, top + r.tileRows) - 1).arg(left).arg(std::min(r.cols, left + r.tileCols) - 1)
      .arg(n).arg(all).arg(linked ? tr("selected") : tr("differ"))
      .arg(all ? 100.0 * double(n) / double(all) : 0.0, 0, 'f', 1);
}

void ErrorPlotPanel::hoverMap(QMouseEvent* event) {
  const auto tile = tileAt(event->position());
  if (!tile) return;
  hover_ = mapHoverText(tile->first, tile->second);
  QToolTip::showText(event->globalPosition().toPoint(), hover_, map_);
}

void ErrorPlotPanel::highlightBit(int bit) {
  bits_->clearItems();
  spanLabel_.clear();
  highlighted_ = -1;
  if (reports_.empty() || bit < 0 || bit >= int(reports_.front().bitMismatch.size())) {
    bits_->replot();
    return;
  }
  highlighted_ = bit;
  const double height = double(reports_.front().bitMismatch[std::size_t(bit)]);
  bits_->yAxis->setRange(0, std::max(bits_->yAxis->range().upper, height * 1.3));  // room for the label
  auto* box = new QCPItemRect(bits_);
  box->topLeft->setCoords(bit + 0.6, height + bits_->yAxis->range().size() * 0.04);
  box->bottomRight->setCoords(bit - 0.6, 0);
  box->setPen(QPen(palette::evidence(), 2.5));
  auto* text = new QCPItemText(bits_);
  text->position->setCoords(bit, height + bits_->yAxis->range().size() * 0.08);
  // the axis runs 31 .. 0 from left to right: keep the label inside the plot near either edge
  text->setPositionAlignment(Qt::AlignBottom | (bit >= 24 ? Qt::AlignLeft : bit <= 7 ? Qt::AlignRight : Qt::AlignHCenter));
  text->setText(tr("evidence: bit %1").arg(bit));
  text->setColor(palette::evidence());
  bits_->replot();
}

void ErrorPlotPanel::highlightBitSpan(int lowest, int highest, const QString& label) {
  highlightBit(-1);
  spanLabel_.clear();
  if (reports_.empty() || lowest < 0 || highest < lowest || highest > 31) return;
  spanLabel_ = label;
  const QColor orange = palette::evidence();
  auto* box = new QCPItemRect(bits_);
  box->topLeft->setTypeX(QCPItemPosition::ptPlotCoords);
  box->topLeft->setTypeY(QCPItemPosition::ptAxisRectRatio);
  box->bottomRight->setTypeX(QCPItemPosition::ptPlotCoords);
  box->bottomRight->setTypeY(QCPItemPosition::ptAxisRectRatio);
  box->topLeft->setCoords(highest + 0.5, 0.0);
  box->bottomRight->setCoords(lowest - 0.5, 1.0);
  box->setPen(QPen(orange, 1.5, Qt::DashLine));
  QColor fill = orange;
  fill.setAlpha(40);
  box->setBrush(fill);
  box->setLayer(QStringLiteral("background"));
  auto* text = new QCPItemText(bits_);
  text->position->setTypeX(QCPItemPosition::ptPlotCoords);
  text->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
  // anchored at the span's end nearer the plot's edge, running inward, so it is never clipped there
  const bool rightHalf = (lowest + highest) / 2.0 < 15.5;  // the axis runs 31 .. 0 from left to right
  text->position->setCoords(rightHalf ? lowest - 0.5 : highest + 0.5, 0.03);
  text->setPositionAlignment(Qt::AlignTop | (rightHalf ? Qt::AlignRight : Qt::AlignLeft));
  text->setPadding(QMargins(3, 0, 3, 0));
  text->setBrush(QBrush(QColor(255, 255, 255, 210)));  // readable where it meets a bar
  const auto& counts = reports_.front().bitMismatch;  // headroom over the tallest bar: the label sits above the bars
  bits_->yAxis->setRange(0, std::max(1.0, double(counts.empty() ? 1 : *std::max_element(counts.begin(), counts.end()))) * 1.3);
  wrapToAxisRect(bits_, text, label);  // in a narrow dock, on two lines rather than cut at the edge
  text->setColor(orange.darker(130));
  bits_->replot();
  lower_->setCurrentWidget(bits_);
}

void ErrorPlotPanel::showBitsTab() { lower_->setCurrentWidget(bits_); }


QString ErrorPlotPanel::csv() const {
  QStringList lines{QStringLiteral("call,measure,log2_bin,elements")};
  for (const analyzer::StoredCallReport& r : reports_) {
    for (std::size_t i = 0; i < r.log2Abs.size(); ++i)
      if (r.log2Abs[i]) lines << QStringLiteral("%1,log2_abs,%2,%3").arg(qs(r.call)).arg(r.log2AbsFirstBin + int(i)).arg(r.log2Abs[i]);
    for (std::size_t i = 0; i < r.log2Ulp.size(); ++i)
      if (r.log2Ulp[i]) lines << QStringLiteral("%1,log2_ulp,%2,%3").arg(qs(r.call)).arg(i).arg(r.log2Ulp[i]);
  }
  return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
}

void ErrorPlotPanel::hoverHistogram(QMouseEvent* event) {
  if (reports_.empty()) return;
  const int bin = int(std::lround(plot_->xAxis->pixelToCoord(event->position().x())));
  QStringList lines;
  for (const analyzer::StoredCallReport& r : reports_) {
    const std::vector<uint64_t>& h = scale_ == Scale::Log2Abs ? r.log2Abs : r.log2Ulp;
    const int i = bin - (scale_ == Scale::Log2Abs ? r.log2AbsFirstBin : 0);
    const uint64_t n = i >= 0 && i < int(h.size()) ? h[std::size_t(i)] : 0;
    lines << tr("%1: %2 elements in [2^%3, 2^%4)").arg(shortCall(r)).arg(n).arg(bin).arg(bin + 1);
  }
  QToolTip::showText(event->globalPosition().toPoint(), lines.join(QLatin1Char('\n')), plot_);
}

void ErrorPlotPanel::hoverBits(QMouseEvent* event) {
  if (reports_.empty()) return;
  const int b = int(std::lround(bits_->xAxis->pixelToCoord(event->position().x())));
  const analyzer::StoredCallReport& r = reports_.front();
  if (b < 0 || b >= int(r.bitMismatch.size())) return;
  QToolTip::showText(event->globalPosition().toPoint(),
                     tr("bit %1 (%2): differs in %3 of %4 elements").arg(b)
                         .arg(b == 31 ? tr("sign") : b >= 23 ? tr("exponent") : tr("mantissa"))
                         .arg(r.bitMismatch[std::size_t(b)])
                         .arg(r.elements, 0, 'f', 0),
                     bits_);
}

}  // namespace peat::views
