// SPDX-License-Identifier: MIT
#include "views/qcustomplot_include.h"  // first: see the header

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QStackedWidget>
#include <QTabWidget>
#include <QToolTip>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/save/selection.h"
#include "views/jobtracker.h"
#include "views/layermapview.h"
#include "views/palette.h"
#include "views/plotstyle.h"
#include "views/savepanel.h"
#include "views/saverunview.h"

namespace peat::views {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }


QCustomPlot* newPlot(QWidget* parent) {
  QCustomPlot* plot = newTrackingPlot(parent);
  plot->setMinimumSize(320, 240);
  return plot;
}

}  // namespace

SavePanel::SavePanel(QWidget* parent)
    : QWidget(parent), mapJobs_(new JobTracker(this)), analysisJobs_(new JobTracker(this)), campaignJobs_(new JobTracker(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  tabs_ = new QTabWidget(this);
  layout->addWidget(tabs_);

  bits_ = newPlot(this);
  bits_->plotLayout()->insertRow(0);
  bitsTitle_ = new QCPTextElement(bits_, QString());
  bits_->plotLayout()->addElement(0, 0, bitsTitle_);
  bits_->axisRect()->insetLayout()->take(bits_->legend);  // the legend goes below the bars, in one row
  bits_->plotLayout()->addElement(2, 0, bits_->legend);
  setLegendColumns(bits_, 8);  // in one row, or as many as the plot's width holds
  bits_->plotLayout()->setRowStretchFactor(2, 0.001);
  bits_->setToolTip(tr("Per layer, the share of all activation bits in each class.\n"
                       "robust: a flip moves the value by less than tau (plus rtol times its size, or the logits by less\n"
                       "than epsilon, by the criterion), or the next ReLU hides it;\n"
                       "ranging: every value of the range shares it, so a flip leaves the range (caught by the range check);\n"
                       "vulnerable: neither; a value with a vulnerable bit is type 2 and is verified by recomputation."));
  // with no analysis the tab says why in words, not as text squeezed into an empty plot
  bitsStack_ = new QStackedWidget(this);
  bitsEmpty_ = new QLabel(bitsStack_);
  bitsEmpty_->setAlignment(Qt::AlignCenter);
  bitsEmpty_->setWordWrap(true);
  bitsEmpty_->setMargin(24);
  bitsStack_->addWidget(bitsEmpty_);
  bitsStack_->addWidget(bits_);
  tabs_->addTab(bitsStack_, tr("Bit classes"));

  auto* tilePage = new QWidget(this);
  auto* tileLayout = new QVBoxLayout(tilePage);
  tileLayout->setContentsMargins(0, 0, 0, 0);
  layerBox_ = new QComboBox(tilePage);
  layerBox_->setToolTip(tr("The layer whose tiles are shown"));
  tileMeasure_ = new QComboBox(tilePage);
  tileMeasure_->setObjectName(QStringLiteral("TileMeasure"));
  tileMeasure_->addItem(tr("Vulnerable bits per value"));
  tileMeasure_->addItem(tr("Share of type-2 values"));
  tileMeasure_->setToolTip(tr("What colours a tile: the mean number of vulnerable bits of its values (it varies even where\n"
                              "every value is type 2), or the share of its values that have any vulnerable bit (type 2)"));
  for (QComboBox* box : {layerBox_, tileMeasure_}) {
    box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    box->setMinimumContentsLength(12);
  }
  connect(tileMeasure_, &QComboBox::currentIndexChanged, this, [this] {
    if (layer_ >= 0) drawTiles();
  });
  tileInfo_ = new QLabel(tilePage);
  tileInfo_->setWordWrap(true);  // a long layer summary wraps instead of widening the window
  tiles_ = newPlot(tilePage);
  tiles_->setToolTip(tr("Each cell is one tile of the layer's output, coloured by its values' mean number of vulnerable\n"
                        "bits or by its share of type-2 values\n"
                        "(values with a vulnerable bit). Framed cells sit in reliable memory."));
  auto* tileControls = new QHBoxLayout;
  tileControls->addWidget(layerBox_, 1);
  tileControls->addWidget(tileMeasure_, 1);
  tileLayout->addLayout(tileControls);
  tileLayout->addWidget(tileInfo_);
  tileLayout->addWidget(tiles_, 1);
  tabs_->addTab(tilePage, tr("Tiles"));
  connect(layerBox_, &QComboBox::currentIndexChanged, this, [this](int index) {
    if (index >= 0 && index != layer_) selectLayer(index);
  });

  campaign_ = newPlot(this);
  campaign_->setToolTip(tr("Top-1 accuracy on the test images against the number of bit flips per inference,\n"
                           "one line per protection scheme; the legend gives each scheme's fault-free latency and CPU time\n"
                           "(every thread: SAVE's checks run on a second core) against no protection."));
  legendBelow(campaign_, 2);  // the schemes' lines run through every corner; their names are long
  tabs_->addTab(campaign_, tr("Campaign"));

  map_ = new LayerMapView(this);
  tabs_->addTab(map_, tr("Map"));
  run_ = new SaveRunView(this);
  tabs_->addTab(run_, tr("Run outputs"));

  connect(bits_, &QCustomPlot::mouseMove, this, &SavePanel::hoverBits);
  connect(tiles_, &QCustomPlot::mouseMove, this, &SavePanel::hoverTiles);
  connect(campaign_, &QCustomPlot::mouseMove, this, &SavePanel::hoverCampaign);
  for (QCustomPlot* p : {bits_, tiles_, campaign_}) centredNote(p, tr("Select a SAVE result or campaign in the session"));
  showBitsEmpty(tr("No SAVE analysis is selected, so there are no bit classes to show.\n\n"
                   "Select a SAVE result (SAVE > model in the session tree), or make one with Run > SAVE analyze."));
}

void SavePanel::showBitsEmpty(const QString& why) {
  bitsEmpty_->setText(why);
  bitsStack_->setCurrentWidget(bitsEmpty_);
}

QString SavePanel::bitsEmptyText() const { return bitsStack_->currentWidget() == bitsEmpty_ ? bitsEmpty_->text() : QString(); }

void SavePanel::loadAnalysis(const QString& title, std::function<save::StoredAnalysis()> read) {
  showMessage(tr("Loading %1 ...").arg(title));
  analysisJobs_->start<save::StoredAnalysis>(
      std::move(read),
      [this](const save::StoredAnalysis& a) {
        showAnalysis(a);
        emit analysisShown();
      },
      loadFailed(title));
}

void SavePanel::loadCampaign(const QString& title, std::function<save::StoredCampaign()> read) {
  // the analysis shown (if any) stays until the campaign arrives, as showCampaign keeps it
  campaignJobs_->start<save::StoredCampaign>(
      std::move(read),
      [this](const save::StoredCampaign& c) {
        showCampaign(c);
        emit campaignShown();
      },
      loadFailed(title));
}

std::function<void(const QString&)> SavePanel::loadFailed(const QString& title) {
  return [this, title](const QString& why) {
    showMessage(tr("%1 could not be read: %2").arg(title, why));
    emit readFailed(why);
  };
}

void SavePanel::dropLoads() {
  analysisJobs_->cancel();
  campaignJobs_->cancel();
}

void SavePanel::showAnalysis(const save::StoredAnalysis& analysis) {
  analysisJobs_->cancel();
  mapJobs_->cancel();
  analysis_ = analysis;
  layer_ = -1;
  drawBits();
  {
    const QSignalBlocker block(layerBox_);
    layerBox_->clear();
    for (const save::StoredLayer& l : analysis_.layers) layerBox_->addItem(qs(l.name) + QStringLiteral(" (") + qs(l.op) + QLatin1Char(')'));
  }
  if (!analysis_.layers.empty()) selectLayer(0);
}

void SavePanel::showMessage(const QString& text) {
  for (JobTracker* jobs : {mapJobs_, analysisJobs_, campaignJobs_}) jobs->cancel();  // reads of what was shown
  analysis_ = {};
  layer_ = -1;
  {
    const QSignalBlocker block(layerBox_);
    layerBox_->clear();
  }
  for (QCustomPlot* p : {bits_, tiles_}) {
    p->clearPlottables();
    p->clearItems();
  }
  bitsTitle_->setText(text);
  showBitsEmpty(text);
  tileInfo_->setText(text);
  bits_->replot();
  tiles_->replot();
}

void SavePanel::drawBits() {
  bits_->clearPlottables();
  bits_->clearItems();
  const int n = int(analysis_.layers.size());
  QVector<double> x, robust, ranging, vulnerable;
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  for (int i = 0; i < n; ++i) {
    const save::StoredLayer& l = analysis_.layers[std::size_t(i)];
    const double bits = std::max(1.0, 32.0 * double(l.elements));
    x << i + 1;
    robust << 100 * l.robustBits / bits;
    ranging << 100 * l.rangingBits / bits;
    vulnerable << 100 * l.vulnerableBits / bits;
    ticker->addTick(i + 1, qs(l.name));
  }
  auto bars = [&](const QString& name, const QColor& color, const QVector<double>& values, QCPBars* below) {
    auto* b = new QCPBars(bits_->xAxis, bits_->yAxis);
    b->setName(name);
    b->setPen(Qt::NoPen);
    b->setBrush(color);
    b->setWidth(0.75);
    b->setData(x, values, true);
    if (below) b->moveAbove(below);
    return b;
  };
  QCPBars* v = bars(tr("vulnerable"), palette::vulnerable(), vulnerable, nullptr);
  QCPBars* g = bars(tr("ranging"), palette::ranging(), ranging, v);
  bars(tr("robust"), palette::robust(), robust, g);
  bits_->xAxis->setTicker(ticker);
  bits_->xAxis->setTickLabelRotation(60);
  bits_->xAxis->setSubTicks(false);
  bits_->xAxis->setRange(0.3, n + 0.7);
  bits_->yAxis->setRange(0, 100);
  bits_->yAxis->setLabel(tr("share of the layer's bits (%)"));
  bitsTitle_->setText(tr("%1, %2 ranges (%3), %4: %5 of %6 values type 2")
                          .arg(qs(analysis_.model), qs(analysis_.mode), qs(analysis_.ranges))
                          .arg(qs(save::criterionText(analysis_.criterion, analysis_.tau, analysis_.rtol, analysis_.epsilon)))
                          .arg(analysis_.type2)
                          .arg(analysis_.elements));
  bits_->legend->setVisible(true);
  followPalette(bits_);
  bitsStack_->setCurrentWidget(bits_);
  bits_->replot();
}

void SavePanel::selectLayer(int layer) {
  if (layer < 0 || layer >= int(analysis_.layers.size())) return;
  layer_ = layer;
  {
    const QSignalBlocker block(layerBox_);
    layerBox_->setCurrentIndex(layer);
  }
  drawTiles();
  showLayerMap();
}

void SavePanel::showLayerMap() {
  if (!loadMap_) {
    map_->clear(tr("No session to read the layer's values from"));
    return;
  }
  const save::StoredLayer& l = analysis_.layers[std::size_t(layer_)];
  const QString name = qs(l.name);
  LayerMapRead read;
  try {
    read = loadMap_(analysis_.id, l.name);
  } catch (const std::exception& e) {
    map_->clear(tr("No map for %1: %2").arg(name, QString::fromUtf8(e.what())));
    return;
  }
  map_->clear(tr("Reading %1's values ...").arg(name));
  // off the GUI thread, as every other read of a selection; a newer layer drops this one's result
  mapJobs_->start<save::LayerMap>(
      std::move(read),
      [this](const save::LayerMap& m) {
        map_->showLayer(analysis_, m);
        emit layerMapShown();
      },
      [this, name](const QString& why) {
        map_->clear(tr("No map for %1: %2").arg(name, why));
        emit layerMapShown();
      });
}

bool SavePanel::loading() const { return mapJobs_->pending() || analysisJobs_->pending() || campaignJobs_->pending(); }

bool SavePanel::selectLayerNamed(const QString& name) {
  for (std::size_t i = 0; i < analysis_.layers.size(); ++i)
    if (qs(analysis_.layers[i].name) == name) {
      selectLayer(int(i));
      return true;
    }
  return false;
}

void SavePanel::drawTiles() {
  tiles_->clearPlottables();
  tiles_->clearItems();
  const save::StoredLayer& l = analysis_.layers[std::size_t(layer_)];
  // vulnerable bits per value where the session stores them (the default: it varies even where every
  // value is type 2), else the type-2 share
  const bool hasBits = l.tileVulnerableBits.size() == l.tileShare.size() && !l.tileShare.empty();
  tileMeasure_->setEnabled(hasBits);
  const bool bitsShown = hasBits && tileMeasure_->currentIndex() == 0;
  const std::vector<float>& values = bitsShown ? l.tileVulnerableBits : l.tileShare;
  const QCPColorGradient gradient = palette::viridisGradient();  // dark: few or none; yellow: the most
  const int across = int(l.tilesAcross), down = int(l.tilesDown);
  QCPColorMap* map = tileMap(tiles_, across, down, gradient,
                             [&](int r, int c) { return double(values[std::size_t(r) * std::size_t(across) + std::size_t(c)]); });
  int reliable = 0, worst = 0;
  QVector<double> rx, ry;
  for (int t = 0; t < down * across; ++t) {
    if (values[std::size_t(t)] > values[std::size_t(worst)]) worst = t;
    if (l.tileReliable[std::size_t(t)]) {
      ++reliable;
      rx << t % across;
      ry << t / across;
    }
  }
  map->setName(bitsShown ? tr("vulnerable bits per value") : tr("type-2 share"));
  map->removeFromLegend();
  if (!scale_) {
    scale_ = new QCPColorScale(tiles_);
    tiles_->plotLayout()->addElement(0, 1, scale_);
  }
  scale_->setLabel(bitsShown ? tr("vulnerable bits per value") : tr("share of type-2 values"));
  map->setColorScale(scale_);  // the scale takes over the gradient and range: set them there
  scale_->setGradient(gradient);
  // the data's own range: a layer whose tiles all hold 80-100% type 2 is not one flat colour
  const auto [low, high] = std::minmax_element(values.begin(), values.end());
  const bool flat = values.empty() || *high - *low < 1e-6;
  scale_->setDataRange(flat ? QCPRange(0, bitsShown ? std::max(1.0, double(*low)) : 1) : QCPRange(double(*low), double(*high)));
  if (flat && !values.empty()) {  // one colour is the truth here: say so
    auto* note = new QCPItemText(tiles_);
    note->position->setType(QCPItemPosition::ptAxisRectRatio);
    note->position->setCoords(0.5, 0.02);
    note->setPositionAlignment(Qt::AlignTop | Qt::AlignHCenter);
    note->setBrush(QBrush(QColor(255, 255, 255, 220)));
    note->setPadding(QMargins(4, 2, 4, 2));
    wrapToAxisRect(tiles_, note,
                   bitsShown ? tr("every tile's values have %1 vulnerable bits on average: the Map tab shows the layer value by value")
                                   .arg(double(*low), 0, 'f', 2)
                             : tr("every tile holds %1% type-2 values: the Map tab shows the layer value by value")
                                   .arg(100.0 * double(*low), 0, 'f', 1));
  }
  // Reliable tiles get a frame: one rectangle each (a marker per tile for very large layers).
  const QPen frame(QColor(0xff, 0xff, 0xff), 2);
  if (rx.size() <= 4000) {
    for (int i = 0; i < rx.size(); ++i) {
      auto* box = new QCPItemRect(tiles_);
      box->topLeft->setCoords(rx[i] + 0.08, ry[i] + 0.08);
      box->bottomRight->setCoords(rx[i] + 0.92, ry[i] + 0.92);
      box->setPen(frame);
    }
  } else {
    QCPGraph* marks = tiles_->addGraph();
    marks->setLineStyle(QCPGraph::lsNone);
    marks->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssSquare, frame, Qt::NoBrush, 6));
    for (int i = 0; i < rx.size(); ++i) marks->addData(rx[i] + 0.5, ry[i] + 0.5);
  }
  tiles_->xAxis->setLabel(tr("tile column (%1 values wide)").arg(l.tileCols));
  tiles_->yAxis->setLabel(tr("tile row (%1 values high)").arg(l.tileRows));
  tiles_->xAxis->setRange(0, double(l.tilesAcross));
  tiles_->yAxis->setRange(0, double(l.tilesDown));
  tiles_->yAxis->setRangeReversed(true);
  tiles_->legend->setVisible(false);
  const std::size_t w = std::size_t(worst);
  const QString highest = bitsShown ? tr("most vulnerable bits per value %1").arg(double(values[w]), 0, 'f', 2)
                                    : tr("highest tile share %1%").arg(100.0 * double(values[w]), 0, 'f', 1);
  tileInfo_->setText(tr("%1: %2 x %3 tiles, %4 in reliable memory (framed); %5 of %6 values type 2; %7 (row %8, column %9)")
                         .arg(qs(l.name))
                         .arg(l.tilesDown)
                         .arg(l.tilesAcross)
                         .arg(reliable)
                         .arg(l.type2)
                         .arg(l.elements)
                         .arg(highest)
                         .arg(int64_t(w) / l.tilesAcross)
                         .arg(int64_t(w) % l.tilesAcross));
  followPalette(tiles_);
  tiles_->replot();
}

void SavePanel::showCampaign(const save::StoredCampaign& c) {
  campaignJobs_->cancel();
  campaignData_ = c;
  if (analysis_.layers.empty())
    showBitsEmpty(tr("A campaign is selected: its accuracy under bit flips is on the Campaign tab.\n\n"
                     "Bit classes belong to a SAVE analysis: select a SAVE result in the session tree."));
  campaign_->clearPlottables();
  campaign_->clearItems();
  double top = 0, bottom = 0;  // the smallest and largest flip counts drawn
  int skipped = 0;
  std::vector<save::CampaignSeries> order = c.series;  // SAVE drawn last, on top of lines it meets
  std::stable_partition(order.begin(), order.end(), [](const save::CampaignSeries& s) { return s.scheme != "save"; });
  for (const save::CampaignSeries& s : order) {
    QCPGraph* g = campaign_->addGraph();
    QString name = qs(s.scheme);
    if (s.latencyRatio > 0 && s.cpuRatio > 0)
      name = tr("%1 (latency %2x, CPU %3x)").arg(name).arg(s.latencyRatio, 0, 'f', 2).arg(s.cpuRatio, 0, 'f', 2);
    else if (s.latencyRatio > 0)
      name = tr("%1 (latency %2x)").arg(name).arg(s.latencyRatio, 0, 'f', 2);
    g->setName(name);
    QPen pen(palette::scheme(s.scheme), s.scheme == "save" ? 3 : 2);
    if (s.scheme == "ecc") pen.setStyle(Qt::DashLine);
    g->setPen(pen);
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
    QVector<double> x, y;
    for (std::size_t i = 0; i < s.flips.size(); ++i) {
      if (s.flips[i] <= 0) {  // no place on a log axis
        ++skipped;
        continue;
      }
      x << s.flips[i];
      y << 100 * s.accuracy[i];
      top = std::max(top, s.flips[i]);
      bottom = bottom > 0 ? std::min(bottom, s.flips[i]) : s.flips[i];
    }
    g->setData(x, y, true);
  }
  campaign_->xAxis->setScaleType(QCPAxis::stLogarithmic);
  QSharedPointer<QCPAxisTickerLog> log(new QCPAxisTickerLog);
  log->setLogBase(2);
  log->setSubTickCount(0);
  campaign_->xAxis->setTicker(log);
  campaign_->xAxis->setNumberFormat(QStringLiteral("f"));
  campaign_->xAxis->setNumberPrecision(0);
  campaign_->xAxis->setLabel(tr("bit flips per inference") + (skipped ? tr(" (points at 0 flips not shown)") : QString()));
  campaign_->xAxis->setRange(bottom > 0 ? bottom / 1.6 : 0.8, std::max(2.0, top * 1.25));
  campaign_->yAxis->setLabel(tr("top-1 accuracy (%)"));
  campaign_->yAxis->setRange(0, 100);
  showLegendBelow(campaign_, true);
  followPalette(campaign_);
  campaign_->replot();
}

void SavePanel::setCurrentTab(Tab tab) { tabs_->setCurrentIndex(int(tab)); }
SavePanel::Tab SavePanel::currentTab() const { return Tab(tabs_->currentIndex()); }

QCustomPlot* SavePanel::currentPlot() const {
  switch (currentTab()) {
    case BitsTab: return bits_;
    case TilesTab: return tiles_;
    case CampaignTab: return campaign_;
    case MapTab:
    case RunTab: return nullptr;  // a widget, not a plot: currentPicture()
  }
  return bits_;
}

QWidget* SavePanel::currentPicture() const {
  if (currentTab() == MapTab) return map_;
  if (currentTab() == RunTab) return run_;
  return currentPlot();
}

QString SavePanel::currentCsv() const {
  if (currentTab() == MapTab) return map_->csv();
  if (currentTab() == RunTab) return run_->csv();
  QStringList lines;
  if (currentTab() == BitsTab) {
    lines << QStringLiteral("layer,op,elements,robust_bits,ranging_bits,vulnerable_bits,type2");
    for (const save::StoredLayer& l : analysis_.layers)
      lines << QStringLiteral("%1,%2,%3,%4,%5,%6,%7").arg(qs(l.name), qs(l.op)).arg(l.elements).arg(l.robustBits, 0, 'f', 0)
                   .arg(l.rangingBits, 0, 'f', 0).arg(l.vulnerableBits, 0, 'f', 0).arg(l.type2);
  } else if (currentTab() == TilesTab) {
    lines << QStringLiteral("layer,tile_row,tile_col,type2_share,reliable");
    if (layer_ >= 0) {
      const save::StoredLayer& l = analysis_.layers[std::size_t(layer_)];
      for (int64_t t = 0; t < l.tilesDown * l.tilesAcross; ++t)
        lines << QStringLiteral("%1,%2,%3,%4,%5").arg(qs(l.name)).arg(t / l.tilesAcross).arg(t % l.tilesAcross)
                     .arg(double(l.tileShare[std::size_t(t)]), 0, 'g', 6).arg(int(l.tileReliable[std::size_t(t)]));
    }
  } else {
    lines << QStringLiteral("scheme,flips,accuracy,error_rate");
    for (const save::CampaignSeries& s : campaignData_.series)
      for (std::size_t i = 0; i < s.flips.size(); ++i)
        lines << QStringLiteral("%1,%2,%3,%4").arg(qs(s.scheme)).arg(s.flips[i], 0, 'f', 0).arg(s.accuracy[i], 0, 'g', 6)
                     .arg(s.errorRate[i], 0, 'g', 6);
  }
  return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
}

void SavePanel::hoverBits(QMouseEvent* event) {
  const int i = int(std::lround(bits_->xAxis->pixelToCoord(event->position().x()))) - 1;
  if (i < 0 || i >= int(analysis_.layers.size())) return;
  const save::StoredLayer& l = analysis_.layers[std::size_t(i)];
  const double bits = std::max(1.0, 32.0 * double(l.elements));
  QToolTip::showText(event->globalPosition().toPoint(),
                     tr("%1 (%2): robust %3%, ranging %4%, vulnerable %5%; %6 of %7 values type 2")
                         .arg(qs(l.name), qs(l.op))
                         .arg(100 * l.robustBits / bits, 0, 'f', 1)
                         .arg(100 * l.rangingBits / bits, 0, 'f', 1)
                         .arg(100 * l.vulnerableBits / bits, 0, 'f', 1)
                         .arg(l.type2)
                         .arg(l.elements),
                     bits_);
}

void SavePanel::hoverTiles(QMouseEvent* event) {
  if (layer_ < 0) return;
  const save::StoredLayer& l = analysis_.layers[std::size_t(layer_)];
  const int c = int(std::floor(tiles_->xAxis->pixelToCoord(event->position().x())));
  const int r = int(std::floor(tiles_->yAxis->pixelToCoord(event->position().y())));
  if (c < 0 || r < 0 || c >= int(l.tilesAcross) || r >= int(l.tilesDown)) return;
  const std::size_t t = std::size_t(r) * std::size_t(l.tilesAcross) + std::size_t(c);
  QToolTip::showText(event->globalPosition().toPoint(),
                     tr("tile row %1, column %2: %3% type 2%4, %5")
                         .arg(r)
                         .arg(c)
                         .arg(100.0 * double(l.tileShare[t]), 0, 'f', 1)
                         .arg(t < l.tileVulnerableBits.size()
                                  ? tr(", %1 vulnerable bits per value").arg(double(l.tileVulnerableBits[t]), 0, 'f', 2)
                                  : QString())
                         .arg(l.tileReliable[t] ? tr("reliable memory") : tr("unreliable memory")),
                     tiles_);
}

void SavePanel::hoverCampaign(QMouseEvent* event) {
  const double flips = campaign_->xAxis->pixelToCoord(event->position().x());
  QStringList lines;
  for (const save::CampaignSeries& s : campaignData_.series) {  // the nearest point of each scheme
    std::size_t best = s.flips.size();
    for (std::size_t i = 0; i < s.flips.size(); ++i)
      if (s.flips[i] > 0 && (best == s.flips.size() || std::fabs(std::log2(s.flips[i] / flips)) <
                                                           std::fabs(std::log2(s.flips[best] / flips))))
        best = i;
    if (best < s.flips.size())
      lines << tr("%1: %2% at %3 flips").arg(qs(s.scheme)).arg(100 * s.accuracy[best], 0, 'f', 1).arg(s.flips[best], 0, 'f', 0);
  }
  if (!lines.isEmpty()) QToolTip::showText(event->globalPosition().toPoint(), lines.join(QLatin1Char('\n')), campaign_);
}

}  // namespace peat::views
