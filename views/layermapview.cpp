// SPDX-License-Identifier: MIT
#include "views/layermapview.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QStringList>
#include <QScrollArea>
#include <QSpinBox>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "views/palette.h"

namespace peat::views {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

constexpr int kGap = 6;           // between channel maps
constexpr int kLegendWidth = 120;  // the legend's column at the right

QString kib(double bytes) { return QString::number(bytes / 1024.0, 'f', 1) + QStringLiteral(" KiB"); }

QString shapeText(const std::vector<int64_t>& shape) {
  QStringList dims;
  for (int64_t d : shape) dims << QString::number(d);
  return QLatin1Char('[') + dims.join(QStringLiteral(", ")) + QLatin1Char(']');
}

}  // namespace

// The drawing surface: the channel maps (or the bits-by-channel matrix) and the legend.
class LayerMapCanvas : public QWidget {
 public:
  explicit LayerMapCanvas(LayerMapView* view) : QWidget(view), view_(view) {
    setMouseTracking(true);
    setMinimumSize(300, 180);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
  }

  // The geometry of the maps for the current size.
  struct Layout {
    int64_t mapRows = 1, mapCols = 1;    // one channel's cells (a long strip wraps)
    int64_t gridRows = 1, gridCols = 1;  // channel maps across and down
    double cell = 1;                     // pixels per cell
    int64_t maps = 1;
    // Tiled: the tensor as SAVE tiles it ([rows, cols]), cut into bands of whole tiles, one band per
    // "map"; the grid lines then fall on tile edges. Otherwise one spatial map per channel.
    bool tiled = false;
    int64_t matrixCols = 1, plane = 1;
    // The element drawn at cell (row, col) of map k; -1 for none.
    int64_t element(int64_t k, int64_t row, int64_t col) const {
      if (tiled) {
        const int64_t c = k * mapCols + col;
        return c < matrixCols ? row * matrixCols + c : -1;
      }
      const int64_t offset = row * mapCols + col;
      return offset < plane ? k * plane + offset : -1;
    }
    QRectF mapRect(int64_t m) const {
      const double w = double(mapCols) * cell, h = double(mapRows) * cell;
      return QRectF(kGap + double(m % gridCols) * (w + kGap), kGap + 14 + double(m / gridCols) * (h + kGap + 14), w, h);
    }
  };

  Layout layout() const {
    Layout l;
    const save::LayerMap& m = view_->map_;
    const int labels = view_->view() == LayerMapView::View::BitsByChannel ? 24 : 0;  // bit numbers at the right
    const double w = std::max(10, width() - kLegendWidth - kGap - labels), h = std::max(10, height() - kGap);
    l.plane = m.height * m.width;
    if (view_->view() == LayerMapView::View::BitsByChannel) {
      l.mapRows = 32;
      l.mapCols = m.channels;
      l.maps = 1;
    } else if (view_->tiled()) {
      l.tiled = true;
      l.matrixCols = m.cols;
      l.mapRows = m.rows;
      Layout best = l;
      best.cell = -1;
      const int64_t tile = std::max<int64_t>(1, m.tileCols);
      for (int64_t t = 1; t <= m.tilesAcross; t = t < 8 ? t + 1 : t * 2) {  // bands of t tiles: the largest cells
        Layout c = l;
        c.mapCols = std::min(m.cols, t * tile);
        c.maps = (m.cols + c.mapCols - 1) / c.mapCols;
        fit(c, w, h);
        if (c.cell > best.cell) best = c;
      }
      return best;
    } else {
      l.maps = m.channels;
      const int64_t plane = m.height * m.width;
      if (m.height == 1 && m.width > 32) {  // a long strip wraps at a multiple of the tile width, about twice as wide as high
        const int64_t tile = std::max<int64_t>(1, m.tileCols);
        l.mapCols = std::min(m.width, (int64_t(std::ceil(std::sqrt(2.0 * double(m.width)))) + tile - 1) / tile * tile);
        l.mapRows = (plane + l.mapCols - 1) / l.mapCols;
      } else {
        l.mapCols = m.width;
        l.mapRows = m.height;
      }
    }
    fit(l, w, h);
    return l;
  }

  // The grid of maps with the largest cells in w x h pixels.
  static void fit(Layout& l, double w, double h) {
    l.cell = 0;
    for (int64_t gc = 1; gc <= l.maps; ++gc) {  // the grid with the largest cells
      const int64_t gr = (l.maps + gc - 1) / gc;
      const double cell = std::min((w - double(gc + 1) * kGap) / double(gc * l.mapCols),
                                   (h - double(gr) * (kGap + 14)) / double(gr * l.mapRows));
      if (cell > l.cell) {
        l.cell = cell;
        l.gridCols = gc;
        l.gridRows = gr;
      }
    }
    l.cell = std::max(l.cell, 0.05);
  }

  // The element drawn at a point, or (for the bits-by-channel view) the bit and channel as
  // -(bit * channels + channel) - 2; -1 for none.
  int64_t hit(const QPointF& p) const {
    if (!view_->hasMap_) return -1;
    const Layout l = layout();
    const save::LayerMap& m = view_->map_;
    for (int64_t k = 0; k < l.maps; ++k) {
      const QRectF r = l.mapRect(k);
      if (!r.contains(p)) continue;
      const int64_t row = std::min(l.mapRows - 1, int64_t((p.y() - r.top()) / l.cell));
      const int64_t col = std::min(l.mapCols - 1, int64_t((p.x() - r.left()) / l.cell));
      if (view_->view() == LayerMapView::View::BitsByChannel) return -((31 - row) * m.channels + col) - 2;
      return l.element(k, row, col);
    }
    return -1;
  }

  QPointF centreOf(int64_t element) const {
    const Layout l = layout();
    const save::LayerMap& m = view_->map_;
    if (l.tiled) {  // row and column of the [rows, cols] matrix, then its band
      const int64_t row = element / l.matrixCols, col = element % l.matrixCols, k = col / l.mapCols;
      const QRectF r = l.mapRect(k);
      return {r.left() + (double(col % l.mapCols) + 0.5) * l.cell, r.top() + (double(row) + 0.5) * l.cell};
    }
    const int64_t plane = m.height * m.width, k = element / plane, offset = element % plane;
    const QRectF r = l.mapRect(k);
    return {r.left() + (double(offset % l.mapCols) + 0.5) * l.cell, r.top() + (double(offset / l.mapCols) + 0.5) * l.cell};
  }

 protected:
  void paintEvent(QPaintEvent*) override {
    QPainter p(this);
    p.fillRect(rect(), palette().color(QPalette::Base));
    p.setPen(palette().color(QPalette::Text));
    if (!view_->hasMap_) {
      p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap, message_);
      return;
    }
    const Layout l = layout();
    const save::LayerMap& m = view_->map_;
    const bool bitsView = view_->view() == LayerMapView::View::BitsByChannel;
    QFont small = font();
    small.setPointSizeF(std::max(6.0, small.pointSizeF() - 1.5));
    p.setFont(small);
    for (int64_t k = 0; k < l.maps; ++k) {
      const QRectF r = l.mapRect(k);
      QImage image(int(l.mapCols), int(l.mapRows), QImage::Format_RGB32);
      image.fill(palette().color(QPalette::Mid));
      for (int64_t row = 0; row < l.mapRows; ++row) {
        auto* line = reinterpret_cast<QRgb*>(image.scanLine(int(row)));
        for (int64_t col = 0; col < l.mapCols; ++col) {
          std::size_t i;
          if (bitsView) {
            i = std::size_t((31 - row) * m.channels + col);
          } else {
            const int64_t e = l.element(k, row, col);
            if (e < 0) continue;
            i = std::size_t(e);
          }
          line[col] = colorOf(view_->values_[i]);
        }
      }
      p.drawImage(r, image);
      if (!bitsView) drawTiles(p, l, k);
      p.setPen(palette().color(QPalette::Text));
      // a panel's title within its own width (side by side, long titles ran into the next panel's):
      // the longest form that fits, else the shortest elided
      const double titleWidth = bitsView ? double(width() - kLegendWidth) : r.width();
      QStringList forms;
      if (bitsView) {
        forms << tr("rows: bit positions (31 the sign, 30-23 the exponent, 22-0 the mantissa); columns: channels 0-%1")
                     .arg(m.channels - 1);
      } else if (l.tiled) {
        const int64_t first = k * l.mapCols, last = std::min(m.cols, (k + 1) * l.mapCols) - 1;
        if (m.rows > 1) forms << tr("rows 0-%1, columns %2-%3").arg(m.rows - 1).arg(first).arg(last);
        forms << tr("columns %1-%2").arg(first).arg(last) << tr("cols %1-%2").arg(first).arg(last)
              << QStringLiteral("%1-%2").arg(first).arg(last);
      } else if (m.channels > 1) {
        forms << tr("channel %1").arg(k) << tr("ch %1").arg(k) << QString::number(k);
      }
      QString title = forms.isEmpty() ? QString() : p.fontMetrics().elidedText(forms.back(), Qt::ElideRight, int(titleWidth));
      for (const QString& form : forms)
        if (p.fontMetrics().horizontalAdvance(form) <= titleWidth) {
          title = form;
          break;
        }
      p.drawText(QRectF(r.left(), r.top() - 14, titleWidth, 14), Qt::AlignLeft | Qt::AlignBottom, title);
      if (bitsView)  // the bit positions beside the rows
        for (const int bit : {31, 30, 23, 22, 0})
          p.drawText(QPointF(r.right() + 4, r.top() + (31.5 - bit) * l.cell + 4), QString::number(bit));
      p.setPen(QPen(palette().color(QPalette::Mid), 1));
      p.setBrush(Qt::NoBrush);
      p.drawRect(r.adjusted(-0.5, -0.5, 0.5, 0.5));
    }
    drawLegend(p);
  }

  void mousePressEvent(QMouseEvent* event) override {
    const int64_t h = hit(event->position());
    if (h >= 0) emit view_->elementClicked(qint64(h));
  }

  void mouseMoveEvent(QMouseEvent* event) override {
    const int64_t h = hit(event->position());
    if (h >= 0) {
      view_->hoverElement(h);
    } else if (h <= -2) {
      const int64_t code = -h - 2, channels = std::max<int64_t>(1, view_->map_.channels);
      view_->hoverBitChannel(int(code / channels), code % channels);
    }
  }

 public:
  QString message_;

 private:
  QRgb colorOf(float v) const {
    if (view_->categorical_) return palette::bitClass(int(v)).rgb();
    const double t = (double(v) - view_->valueLo_) / (view_->valueHi_ - view_->valueLo_);
    return palette::viridisRgb(t);
  }

  // The tile grid (lines between cells of different tiles) and the reliable tiles (hatched; a
  // light veil where cells are too small for a hatch).
  void drawTiles(QPainter& p, const Layout& l, int64_t k) const {
    const save::LayerMap& m = view_->map_;
    auto elementOf = [&](int64_t row, int64_t col) { return l.element(k, row, col); };
    auto reliable = [&](int64_t e) {
      const int64_t t = m.tileOf(e);
      return std::size_t(t) < m.tileReliable.size() && m.tileReliable[std::size_t(t)] != 0;
    };
    const QRectF r = l.mapRect(k);
    const bool fine = l.cell >= 4;
    static const QPixmap stripe = [] {  // a sparse, thin diagonal hatch: the heatmap shows through
      QPixmap tile(12, 12);
      tile.fill(Qt::transparent);
      QPainter q(&tile);
      q.setRenderHint(QPainter::Antialiasing);
      q.setPen(QPen(QColor(255, 255, 255, 150), 1.0));
      q.drawLine(QPointF(0, 12), QPointF(12, 0));
      q.end();
      return tile;
    }();
    const QBrush hatch(stripe);
    const QBrush veil(QColor(255, 255, 255, 60));
    p.setPen(Qt::NoPen);
    for (int64_t row = 0; row < l.mapRows; ++row)
      for (int64_t col = 0; col < l.mapCols;) {
        const int64_t e = elementOf(row, col);
        if (e < 0 || !reliable(e)) {
          ++col;
          continue;
        }
        int64_t end = col + 1;
        while (end < l.mapCols && elementOf(row, end) >= 0 && reliable(elementOf(row, end))) ++end;
        const QRectF run(r.left() + double(col) * l.cell, r.top() + double(row) * l.cell, double(end - col) * l.cell, l.cell);
        p.setBrush(fine ? hatch : veil);
        p.drawRect(run);
        col = end;
      }
    if (!l.tiled) return;  // in a channel's picture tiles are runs of positions, not rectangles: no grid
    // the tile grid, thin, on tile edges; reliable tiles framed
    const int64_t tileCols = std::max<int64_t>(1, m.tileCols), tileRows = std::max<int64_t>(1, m.tileRows);
    const int64_t used = std::min(l.mapCols, l.matrixCols - k * l.mapCols);
    p.setPen(QPen(QColor(0, 0, 0, 110), 1.0));
    for (int64_t c = tileCols; c < used; c += tileCols)
      p.drawLine(QPointF(r.left() + double(c) * l.cell, r.top()), QPointF(r.left() + double(c) * l.cell, r.bottom()));
    for (int64_t row = tileRows; row < l.mapRows; row += tileRows)
      p.drawLine(QPointF(r.left(), r.top() + double(row) * l.cell), QPointF(r.left() + double(used) * l.cell, r.top() + double(row) * l.cell));
    p.setPen(QPen(QColor(255, 255, 255, 230), 2.0));
    p.setBrush(Qt::NoBrush);
    for (int64_t row = 0; row < l.mapRows; row += tileRows)
      for (int64_t c = 0; c < used; c += tileCols) {
        const int64_t e = elementOf(row, c);
        if (e < 0 || !reliable(e)) continue;
        p.drawRect(QRectF(r.left() + double(c) * l.cell + 1, r.top() + double(row) * l.cell + 1,
                          double(std::min(tileCols, used - c)) * l.cell - 2, double(std::min(tileRows, l.mapRows - row)) * l.cell - 2));
      }
  }

  void drawLegend(QPainter& p) const {
    const QRectF area(width() - kLegendWidth + 8, kGap + 14, kLegendWidth - 16, std::min(260, height() - 2 * kGap - 30));
    p.setPen(palette().color(QPalette::Text));
    const bool bitsView = view_->view() == LayerMapView::View::BitsByChannel;
    if (view_->categorical_) {
      const QString names[3] = {tr("robust"), tr("ranging"), tr("vulnerable")};
      const LayerMapView::View v = view_->view();
      const int first = v == LayerMapView::View::Type ? 1 : 0;
      for (int c = first; c < 3; ++c) {
        const QRectF swatch(area.left(), area.top() + (c - first) * 22, 14, 14);
        p.fillRect(swatch, palette::bitClass(c));
        p.drawRect(swatch);
        const QString text = v == LayerMapView::View::Type ? (c == 1 ? tr("type 1") : tr("type 2")) : names[c];
        p.drawText(QPointF(swatch.right() + 6, swatch.bottom() - 2), text);
      }
    } else {
      const QRectF bar(area.left(), area.top(), 16, area.height());
      QImage gradient(1, 256, QImage::Format_RGB32);
      for (int y = 0; y < 256; ++y) gradient.setPixel(0, y, palette::viridisRgb(1.0 - y / 255.0));
      p.drawImage(bar, gradient);
      p.drawRect(bar);
      auto label = [&](double v) -> QString {
        if (view_->view() == LayerMapView::View::Width) return QString::number(std::pow(10.0, v), 'g', 3);
        if (bitsView) return QString::number(100 * v, 'f', 0) + QLatin1Char('%');
        return QString::number(v, 'g', 3);
      };
      p.drawText(QPointF(bar.right() + 5, bar.top() + 8), label(view_->valueHi_));
      p.drawText(QPointF(bar.right() + 5, bar.bottom()), label(view_->valueLo_));
      const QString title = view_->view() == LayerMapView::View::Width ? tr("interval width")
                            : bitsView                                  ? tr("vulnerable share")
                                                                        : tr("vulnerable bits");
      p.drawText(QPointF(area.left(), bar.bottom() + 16), title);
    }
    if (!bitsView) {
      const QRectF swatch(area.left(), area.top() + area.height() + 28, 14, 14);
      p.fillRect(swatch, palette::viridis(0.5));
      p.fillRect(swatch, QBrush(QColor(255, 255, 255, 200), Qt::BDiagPattern));
      p.drawRect(swatch);
      p.drawText(QPointF(swatch.right() + 6, swatch.bottom() - 2), tr("reliable tile"));
    }
  }

  LayerMapView* view_;
};

LayerMapView::LayerMapView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* controls = new QHBoxLayout;
  viewBox_ = new QComboBox(this);
  viewBox_->addItem(tr("Vulnerable bits per value"));
  viewBox_->addItem(tr("Interval width (log scale)"));
  viewBox_->addItem(tr("Type 1 / type 2"));
  viewBox_->addItem(tr("Class of one bit position"));
  viewBox_->addItem(tr("Vulnerable share per bit position and channel"));
  viewBox_->setToolTip(tr("What colours each value of the layer"));
  bitBox_ = new QSpinBox(this);
  bitBox_->setRange(0, 31);
  bitBox_->setValue(30);
  bitBox_->setPrefix(tr("bit "));
  bitBox_->setToolTip(tr("The bit position shown (31: the sign, 30-23: the exponent, 22-0: the mantissa)"));
  bitBox_->setEnabled(false);
  arrangeBox_ = new QComboBox(this);
  arrangeBox_->addItem(tr("As SAVE tiles it (rows x columns)"));
  arrangeBox_->addItem(tr("One picture per channel"));
  arrangeBox_->setToolTip(tr("Tiled: the layer as SAVE cuts it into tiles, [channels, positions] in bands of whole tiles, with\n"
                             "the tile grid and the reliable tiles framed. Per channel: each channel's spatial picture; a tile\n"
                             "is then a run of positions across rows, so no grid is drawn (hover a value for its tile)."));
  for (QComboBox* box : {viewBox_, arrangeBox_}) {  // a narrow window elides the choices instead of widening
    box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    box->setMinimumContentsLength(12);
  }
  controls->addWidget(viewBox_, 1);
  controls->addWidget(arrangeBox_, 1);
  controls->addWidget(bitBox_);
  controls->addStretch(1);
  layout->addLayout(controls);
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  // a long summary scrolls in at most six lines, so a short window leaves the map its room
  auto* summaryScroll = new QScrollArea(this);
  summaryScroll->setWidget(summary_);
  summaryScroll->setWidgetResizable(true);
  summaryScroll->setFrameShape(QFrame::NoFrame);
  summaryScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  summaryScroll->setMaximumHeight(6 * fontMetrics().lineSpacing() + 4);
  layout->addWidget(summaryScroll);
  canvas_ = new LayerMapCanvas(this);
  layout->addWidget(canvas_, 1);
  hover_ = new QLabel(this);
  hover_->setTextFormat(Qt::RichText);
  hover_->setWordWrap(true);
  hover_->setMinimumHeight(3 * fontMetrics().height());
  layout->addWidget(hover_);
  connect(viewBox_, &QComboBox::currentIndexChanged, this, [this](int) {
    bitBox_->setEnabled(view() == View::BitClass);
    recompute();
  });
  connect(bitBox_, &QSpinBox::valueChanged, this, [this](int) { recompute(); });
  connect(arrangeBox_, &QComboBox::currentIndexChanged, canvas_, [this](int) { canvas_->update(); });
  clear(tr("Select a layer of a SAVE analysis"));
}

void LayerMapView::clear(const QString& message) {
  hasMap_ = false;
  map_ = save::LayerMap{};
  values_.clear();
  canvas_->message_ = message;
  summary_->clear();
  hover_->clear();
  hoverText_.clear();
  canvas_->update();
}

void LayerMapView::showLayer(const save::StoredAnalysis& analysis, save::LayerMap map) {
  analysis_ = analysis;
  map_ = std::move(map);
  hasMap_ = true;
  const save::LayerMap::Counts c = map_.counts();
  const int64_t n = map_.elements();
  QString text = tr("<b>%1</b> (%2), shape %3: %4 values, %5 type 2 (%6%), %7 vulnerable bits per value on average; "
                    "tiles of %8 x %9 values, %10 x %11 of them, %12 in reliable memory (hatched, and framed when tiled), holding %13 values; "
                    "%14 type-2 values left in unreliable memory for the checks.")
                     .arg(qs(map_.name), qs(map_.op), shapeText(map_.shape))
                     .arg(n)
                     .arg(c.type2)
                     .arg(n ? 100.0 * double(c.type2) / double(n) : 0.0, 0, 'f', 1)
                     .arg(c.meanVulnerableBits, 0, 'f', 1)
                     .arg(map_.tileRows)
                     .arg(map_.tileCols)
                     .arg(map_.tilesDown)
                     .arg(map_.tilesAcross)
                     .arg(c.reliableTiles)
                     .arg(c.reliableValues)
                     .arg(c.type2InUnreliable);
  text += QStringLiteral("<br>") + tr("The analysis (%1 criterion): reliable memory %2 in use of a %3 budget")
                                       .arg(qs(analysis_.criterion.empty() ? "value" : analysis_.criterion), kib(analysis_.reliableBytes),
                                            kib(analysis_.budgetBytes));
  if (analysis_.workingSetBytes > 0) text += tr(" (working set %1)").arg(kib(analysis_.workingSetBytes));
  if (analysis_.recomputeAllWork > 0)
    text += tr("; recomputation per image: %1 of %2 multiply-adds left, the placement avoids %3% (the same budget in random order: %4%)")
                .arg(analysis_.recomputeWork, 0, 'g', 3)
                .arg(analysis_.recomputeAllWork, 0, 'g', 3)
                .arg(100.0 * (1.0 - analysis_.recomputeWork / analysis_.recomputeAllWork), 0, 'f', 1)
                .arg(100.0 * (1.0 - analysis_.randomPlacementWork / analysis_.recomputeAllWork), 0, 'f', 1);
  summary_->setText(text + QLatin1Char('.'));
  hover_->setText(tr("Hover a value to see its range, its 32 bits by class and its tile."));
  recompute();
}

LayerMapView::View LayerMapView::view() const { return View(viewBox_->currentIndex()); }
void LayerMapView::setView(View v) { viewBox_->setCurrentIndex(int(v)); }
void LayerMapView::setBit(int bit) { bitBox_->setValue(bit); }
bool LayerMapView::tiled() const { return arrangeBox_->currentIndex() == 0; }
void LayerMapView::setTiled(bool tiled) { arrangeBox_->setCurrentIndex(tiled ? 0 : 1); }
QWidget* LayerMapView::canvas() const { return canvas_; }
QString LayerMapView::summaryText() const { return summary_->text(); }
QString LayerMapView::hoverText() const { return hoverText_; }

void LayerMapView::recompute() {
  if (!hasMap_) return;
  categorical_ = false;
  switch (view()) {
    case View::VulnerableBits: values_ = map_.values(save::MapQuantity::VulnerableBits); break;
    case View::Width: values_ = map_.values(save::MapQuantity::Width); break;
    case View::Type: values_ = map_.values(save::MapQuantity::Type); categorical_ = true; break;
    case View::BitClass: values_ = map_.values(save::MapQuantity::BitClassAt, bitBox_->value()); categorical_ = true; break;
    case View::BitsByChannel: values_ = map_.vulnerableShareByBitAndChannel(); break;
  }
  if (view() == View::BitsByChannel) {
    valueLo_ = 0;
    valueHi_ = 1;
  } else if (!categorical_ && !values_.empty()) {
    const auto [lo, hi] = std::minmax_element(values_.begin(), values_.end());
    valueLo_ = *lo;
    valueHi_ = *hi;
    if (valueHi_ - valueLo_ < 1e-9) {  // one value everywhere: the middle of the scale
      valueLo_ -= 0.5;
      valueHi_ += 0.5;
    }
  }
  canvas_->update();
}

int64_t LayerMapView::elementAt(const QPoint& p) const {
  const int64_t h = canvas_->hit(QPointF(p) + QPointF(0.5, 0.5));
  return h >= 0 ? h : -1;
}

QPoint LayerMapView::canvasPointOf(int64_t element) const { return canvas_->centreOf(element).toPoint(); }

void LayerMapView::hoverElement(int64_t index) {
  if (!hasMap_ || index < 0 || index >= map_.elements()) return;
  const save::MapElement e = map_.element(index);
  QString bits;
  for (int b = 31; b >= 0; --b) {
    const save::BitClass c = e.bits[std::size_t(b)];
    bits += QStringLiteral("<span style=\"background-color:%1;color:%2\">%3</span>")
                .arg(palette::bitClass(int(c)).name(), c == save::BitClass::Ranging ? QStringLiteral("#000000") : QStringLiteral("#ffffff"),
                     c == save::BitClass::Robust ? QStringLiteral("r") : c == save::BitClass::Ranging ? QStringLiteral("g") : QStringLiteral("v"));
    if (b == 31 || b == 23) bits += QStringLiteral("&nbsp;");
  }
  QString where = map_.channels > 1 ? tr("channel %1, row %2, column %3").arg(e.channel).arg(e.y).arg(e.x)
                  : map_.height > 1 ? tr("row %1, column %2").arg(e.y).arg(e.x)
                                    : tr("position %1").arg(e.x);
  hoverText_ = tr("%1[%2] (%3): range [%4, %5], width %6; %7 vulnerable bits; tile %8 (%9)")
                   .arg(qs(map_.name))
                   .arg(e.index)
                   .arg(where)
                   .arg(e.lo, 0, 'g', 6)
                   .arg(e.hi, 0, 'g', 6)
                   .arg(e.hi - e.lo, 0, 'g', 4)
                   .arg(e.vulnerableBits)
                   .arg(e.tile)
                   .arg(e.reliable ? tr("reliable memory") : tr("unreliable memory"));
  hover_->setText(hoverText_.toHtmlEscaped() + QStringLiteral("<br><tt>") + tr("sign | exponent | mantissa: ") + bits +
                  QStringLiteral("</tt>&nbsp; ") + tr("r robust, g ranging, v vulnerable"));
  emit elementHovered(qint64(index));
}

void LayerMapView::hoverBitChannel(int bit, int64_t channel) {
  if (!hasMap_ || bit < 0 || bit > 31 || channel < 0 || channel >= map_.channels) return;
  const float share = values_[std::size_t(bit * map_.channels + channel)];
  hoverText_ = tr("%1, channel %2, bit %3 (%4): vulnerable in %5% of the channel's values")
                   .arg(qs(map_.name))
                   .arg(channel)
                   .arg(bit)
                   .arg(bit == 31 ? tr("sign") : bit >= 23 ? tr("exponent") : tr("mantissa"))
                   .arg(100.0 * double(share), 0, 'f', 1);
  hover_->setText(hoverText_.toHtmlEscaped());
}

QString LayerMapView::csv() const {
  QStringList lines;
  if (!hasMap_) return QString();
  if (view() == View::BitsByChannel) {
    lines << QStringLiteral("bit,channel,vulnerable_share");
    for (int b = 0; b < 32; ++b)
      for (int64_t c = 0; c < map_.channels; ++c)
        lines << QStringLiteral("%1,%2,%3").arg(b).arg(c).arg(double(values_[std::size_t(b * map_.channels + c)]), 0, 'g', 6);
    return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
  }
  const char* names[] = {"vulnerable_bits", "log10_width", "type", "bit_class"};
  lines << QStringLiteral("index,channel,row,column,lo,hi,%1,tile,reliable").arg(QLatin1String(names[int(view())]));
  for (int64_t i = 0; i < map_.elements(); ++i) {
    const save::MapElement e = map_.element(i);
    lines << QStringLiteral("%1,%2,%3,%4,%5,%6,%7,%8,%9")
                 .arg(i)
                 .arg(e.channel)
                 .arg(e.y)
                 .arg(e.x)
                 .arg(e.lo, 0, 'g', 9)
                 .arg(e.hi, 0, 'g', 9)
                 .arg(double(values_[std::size_t(i)]), 0, 'g', 6)
                 .arg(e.tile)
                 .arg(e.reliable ? 1 : 0);
  }
  return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
}

}  // namespace peat::views
