// SPDX-License-Identifier: MIT
// The workbench's SAVE views on a session `peat save analyze` and `peat save campaign` wrote
// (path in PEAT_SAVE_SESSION): what each plot draws equals what the session holds, the tree
// selects them, plots export as PNG, SVG and PDF, tables as CSV, and each view is rendered to a
// PNG under the build tree (look at them: savepanel-*.png).
#include "views/qcustomplot_include.h"  // first: see the header

#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QtTest>

#include <algorithm>

#include "tests/gui/settle.h"
#include <QThread>

#include <atomic>

#include "core/save/analysis_record.h"
#include "core/save/campaign_record.h"
#include "core/fp/ulp.h"
#include "views/bitexplorer.h"
#include "views/layermapview.h"
#include "views/mainwindow.h"
#include "views/pageexport.h"
#include "views/savepanel.h"
#include "views/sessiontreemodel.h"
#include "core/save/check_bits.h"
#include "core/save/dataset.h"
#include "core/save/flip_in_model.h"
#include "core/save/model_source.h"


using peat::views::MainWindow;
using peat::views::SavePanel;

class TestSavePanel : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void bitClassBarsMatchTheSession();
  void tileMapShowsPlacement();
  void layerMapShowsEveryValue();
  void bitExplorerFromTheMap();
  void campaignLinesPerScheme();
  void exportsAndCsv();
  void unknownItemIsRefused();

 private:
  QString session_;
  peat::save::StoredAnalysis analysis_;
  std::unique_ptr<MainWindow> window_;
  std::unique_ptr<QAbstractItemModelTester> tester_;
  void shoot(const QString& name) {
    QVERIFY(window_->grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/savepanel-") + name + QStringLiteral(".png")));
  }
};

void TestSavePanel::initTestCase() {
  session_ = qEnvironmentVariable("PEAT_SAVE_SESSION");
  QVERIFY2(QFileInfo::exists(session_), "PEAT_SAVE_SESSION names no session (run through ctest)");
  const peat::store::SessionReader reader(session_.toStdString());
  QCOMPARE(peat::save::storedAnalyses(reader), std::vector<std::string>{"lenet-symbolic"});
  analysis_ = peat::save::loadAnalysis(reader, "lenet-symbolic");
  QCOMPARE(int(analysis_.layers.size()), 12);
  window_ = std::make_unique<MainWindow>();
  window_->setQuietErrors(true);
  window_->resize(1500, 900);
  window_->show();
  // the tree with SAVE layers under their analysis, checked by Qt's model tester as it fills
  tester_ = std::make_unique<QAbstractItemModelTester>(window_->sessionModel(),
                                                       QAbstractItemModelTester::FailureReportingMode::QtTest);
  QVERIFY(window_->openSession(session_));
}

void TestSavePanel::bitClassBarsMatchTheSession() {
  QVERIFY(peat::testsupport::selectAndSettle(*window_, QStringLiteral("SAVE/lenet-symbolic")));
  SavePanel* panel = window_->savePanel();
  QCOMPARE(panel->currentTab(), SavePanel::BitsTab);
  QCOMPARE(panel->layerCount(), 12);
  QCustomPlot* plot = panel->bitsPlot();
  QCOMPARE(plot->plottableCount(), 3);  // vulnerable, ranging, robust, stacked
  for (int k = 0; k < 3; ++k) {
    auto* bars = qobject_cast<QCPBars*>(plot->plottable(k));
    QVERIFY(bars);
    QCOMPARE(bars->data()->size(), 12);
    for (int i = 0; i < 12; ++i) {
      const peat::save::StoredLayer& l = analysis_.layers[std::size_t(i)];
      const double bits = 32.0 * double(l.elements);
      const double want = 100 * (k == 0 ? l.vulnerableBits : k == 1 ? l.rangingBits : l.robustBits) / bits;
      QCOMPARE(bars->data()->at(i)->value, want);
    }
  }
  // the three classes cover every bit of a layer
  for (const peat::save::StoredLayer& l : analysis_.layers)
    QCOMPARE(l.robustBits + l.rangingBits + l.vulnerableBits, 32.0 * double(l.elements));
  shoot(QStringLiteral("bits"));
}

void TestSavePanel::tileMapShowsPlacement() {
  QVERIFY(peat::testsupport::selectAndSettle(*window_, QStringLiteral("SAVE/lenet-symbolic/conv2")));
  SavePanel* panel = window_->savePanel();
  QCOMPARE(panel->currentTab(), SavePanel::MapTab);  // a layer opens on its map
  panel->setCurrentTab(SavePanel::TilesTab);
  int index = -1;
  for (int i = 0; i < 12; ++i)
    if (analysis_.layers[std::size_t(i)].name == "conv2") index = i;
  QCOMPARE(panel->currentLayer(), index);
  const peat::save::StoredLayer& l = analysis_.layers[std::size_t(index)];
  QCustomPlot* plot = panel->tilePlot();
  auto* map = qobject_cast<QCPColorMap*>(plot->plottable(0));
  QVERIFY(map);
  QCOMPARE(map->data()->keySize(), int(2 * l.tilesAcross));
  QCOMPARE(map->data()->valueSize(), int(2 * l.tilesDown));
  // coloured by the tiles' vulnerable bits per value (they vary where every value is type 2), or
  // by their type-2 share when chosen
  QCOMPARE(l.tileVulnerableBits.size(), l.tileShare.size());
  for (int64_t t = 0; t < l.tilesDown * l.tilesAcross; ++t)
    QCOMPARE(map->data()->cell(int(2 * (t % l.tilesAcross)), int(2 * (t / l.tilesAcross))),
             double(l.tileVulnerableBits[std::size_t(t)]));
  auto* measure = panel->findChild<QComboBox*>(QStringLiteral("TileMeasure"));
  QVERIFY(measure && measure->isEnabled());
  measure->setCurrentIndex(1);
  map = qobject_cast<QCPColorMap*>(plot->plottable(0));
  QVERIFY(map);
  for (int64_t t = 0; t < l.tilesDown * l.tilesAcross; ++t)
    QCOMPARE(map->data()->cell(int(2 * (t % l.tilesAcross)), int(2 * (t / l.tilesAcross))), double(l.tileShare[std::size_t(t)]));
  int reliable = 0;
  for (uint8_t r : l.tileReliable) reliable += r;
  int frames = 0, notes = 0;
  for (int i = 0; i < plot->itemCount(); ++i) {
    frames += qobject_cast<QCPItemRect*>(plot->item(i)) != nullptr;
    notes += qobject_cast<QCPItemText*>(plot->item(i)) != nullptr;
  }
  QCOMPARE(frames, reliable);  // one frame per tile in reliable memory
  // a layer whose tiles all hold the same share says so, since its map is then one colour
  const auto [low, high] = std::minmax_element(l.tileShare.begin(), l.tileShare.end());
  QCOMPARE(notes, *low == *high ? 1 : 0);
  measure->setCurrentIndex(0);
  shoot(QStringLiteral("tiles"));
}

// The layer map: one 28x28 map per channel of conv1, its values read from the session's raw
// arrays here (not through the map's loader), hovering names an element's range, bits and tile,
// the colours vary, and the bits-by-channel view counts what the masks say.
void TestSavePanel::layerMapShowsEveryValue() {
  // the page reads the layer's values in its own job, off the GUI thread (issue 43 item 8)
  QVERIFY(peat::testsupport::selectAndSettle(*window_, QStringLiteral("SAVE/lenet-symbolic/conv2")));
  guiThreadReads = 0;
  peat::store::setSessionAccessObserver(countGuiThreadRead);
  QVERIFY(peat::testsupport::selectAndSettle(*window_, QStringLiteral("SAVE/lenet-symbolic/conv1")));
  peat::store::setSessionAccessObserver(nullptr);
  QCOMPARE(guiThreadReads.load(), 0);
  SavePanel* panel = window_->savePanel();
  QCOMPARE(panel->currentTab(), SavePanel::MapTab);
  peat::views::LayerMapView* view = panel->layerMap();
  const peat::save::LayerMap& m = view->layerMap();
  QCOMPARE(m.name, std::string("conv1"));
  QCOMPARE(m.shape, (std::vector<int64_t>{6, 28, 28}));
  QCOMPARE(m.channels, int64_t(6));
  QCOMPARE(m.height, int64_t(28));
  QCOMPARE(m.width, int64_t(28));
  const peat::store::SessionReader reader(session_.toStdString());
  const peat::store::StoredRecord raw = reader.saveResult("lenet-symbolic.conv1");
  auto rawArray = [&](const char* name) { return raw.arrays.at(name); };
  const peat::store::Tensor lo = rawArray("lo"), hi = rawArray("hi"), robust = rawArray("robust_mask"),
                            ranging = rawArray("ranging_mask"), reliable = rawArray("tile_reliable");
  QCOMPARE(int64_t(lo.elementCount()), m.elements());
  const auto* los = reinterpret_cast<const double*>(lo.bytes.data());
  const auto* his = reinterpret_cast<const double*>(hi.bytes.data());
  const auto* robusts = reinterpret_cast<const uint32_t*>(robust.bytes.data());
  const auto* rangings = reinterpret_cast<const uint32_t*>(ranging.bytes.data());
  const int64_t tileRows = int64_t(raw.scalars.at("tile_rows")), tileCols = int64_t(raw.scalars.at("tile_cols"));
  const int64_t across = int64_t(raw.scalars.at("tiles_across"));
  // hover three elements: the first, one inside, the last
  QWidget* canvas = view->canvas();
  int vulnerableMin = 33, vulnerableMax = -1;
  for (int64_t i = 0; i < m.elements(); ++i) {
    const int v = __builtin_popcount(~(robusts[i] | rangings[i]));
    vulnerableMin = std::min(vulnerableMin, v);
    vulnerableMax = std::max(vulnerableMax, v);
  }
  QVERIFY2(vulnerableMax > vulnerableMin, "conv1's values all have as many vulnerable bits: a one-colour map");
  for (const int64_t i : {int64_t(0), int64_t(3 * 784 + 10 * 28 + 12), m.elements() - 1}) {
    const QPoint p = view->canvasPointOf(i);
    QVERIFY(canvas->rect().contains(p));
    QCOMPARE(view->elementAt(p), i);
    QMouseEvent move(QEvent::MouseMove, QPointF(p), canvas->mapToGlobal(QPointF(p)), Qt::NoButton, Qt::NoButton, Qt::NoModifier);
    QApplication::sendEvent(canvas, &move);  // the canvas's own handling of a move to p
    const QString text = view->hoverText();
    const int64_t c = i / 784, y = (i % 784) / 28, x = i % 28;
    QVERIFY2(text.contains(QStringLiteral("channel %1, row %2, column %3").arg(c).arg(y).arg(x)), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("range [%1, %2]").arg(los[i], 0, 'g', 6).arg(his[i], 0, 'g', 6)), qPrintable(text));
    const int64_t tile = (c / tileRows) * across + (y * 28 + x) / tileCols;
    const bool inReliable = reinterpret_cast<const uint8_t*>(reliable.bytes.data())[tile] != 0;
    QVERIFY2(text.contains(QStringLiteral("tile %1 (%2)").arg(tile).arg(inReliable ? QStringLiteral("reliable memory")
                                                                                        : QStringLiteral("unreliable memory"))),
             qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("%1 vulnerable bits").arg(__builtin_popcount(~(robusts[i] | rangings[i])))), qPrintable(text));
  }
  // the colours vary over the map (the first round's map was one colour)
  const QImage shot = canvas->grab().toImage();
  QSet<QRgb> colours;
  for (int y = 0; y < shot.height(); y += 2)
    for (int x = 0; x < shot.width(); x += 2) colours.insert(shot.pixel(x, y));
  QVERIFY2(colours.size() > 12, qPrintable(QString::number(colours.size())));
  shoot(QStringLiteral("map"));
  view->setView(peat::views::LayerMapView::View::Width);
  shoot(QStringLiteral("map-width"));
  // per bit position and channel: the share of vulnerable values, counted from the masks here
  view->setView(peat::views::LayerMapView::View::BitsByChannel);
  const QStringList lines = withoutHead(window_->currentCsv()).trimmed().split(QLatin1Char('\n'));
  QCOMPARE(lines.size(), 1 + 32 * 6);
  QCOMPARE(lines.first(), QStringLiteral("bit,channel,vulnerable_share"));
  for (const QString& line : lines.mid(1)) {
    const QStringList f = line.split(QLatin1Char(','));
    const int bit = f[0].toInt(), c = f[1].toInt();
    int count = 0;
    for (int64_t i = c * 784; i < (c + 1) * 784; ++i) count += !((robusts[i] | rangings[i]) & (1u << bit));
    QVERIFY2(std::fabs(f[2].toDouble() - count / 784.0) < 1e-5, qPrintable(line));
  }
  shoot(QStringLiteral("map-bits"));
  // a linear layer is one strip
  QVERIFY(peat::testsupport::selectAndSettle(*window_, QStringLiteral("SAVE/lenet-symbolic/fc1")));
  QCOMPARE(view->layerMap().channels, int64_t(1));
  QCOMPARE(view->layerMap().height, int64_t(1));
  QCOMPARE(view->layerMap().width, int64_t(120));
  view->setView(peat::views::LayerMapView::View::BitClass);
  view->setBit(30);
  QVERIFY(view->summaryText().contains(QStringLiteral("in reliable memory")));
  shoot(QStringLiteral("map-fc1"));
  // the map exports as a picture too
  QTemporaryDir dir;
  for (const char* suffix : {"png", "svg", "pdf"}) {
    QString error;
    const QString path = dir.filePath(QStringLiteral("map.") + QLatin1String(suffix));
    QVERIFY2(peat::views::exportWidget(panel->currentPicture(), path, &error), qPrintable(error));
    QVERIFY(QFileInfo(path).size() > 1000);
  }
  view->setView(peat::views::LayerMapView::View::VulnerableBits);
}

// Clicking a value on the map opens it in the bit explorer with its sound range and bit classes;
// toggling each of the 32 bits gives the value, the relative and the ULP change computed here
// independently; a ranging bit's flip leaves the range, which the explorer says.
void TestSavePanel::bitExplorerFromTheMap() {
  QVERIFY(peat::testsupport::selectAndSettle(*window_, QStringLiteral("SAVE/lenet-symbolic/conv1.relu")));  // its sign bits are ranging
  peat::views::LayerMapView* view = window_->savePanel()->layerMap();
  const peat::save::LayerMap& m = view->layerMap();
  // a value with ranging bits (its range keeps one sign) that is not zero in test image `image`
  // (for "Flip in the model" below: -0 passes a range check of [0, hi])
  const peat::save::Graph g = peat::save::buildGraph(analysis_.source);
  const peat::save::DataSet d = peat::save::loadDataSet(g, "", "test", 4, 0, 1);
  int node = -1;
  for (std::size_t v = 0; v < g.nodes.size(); ++v)
    if (g.nodes[v].name == "conv1.relu") node = int(v);
  const int image = 3;
  peat::save::FlipOracle oracle(g, d.normalised.data() + image * g.nodes[0].size(), 1);
  int64_t index = -1;
  for (int64_t i = 0; i < m.elements() && index < 0; ++i)
    if (m.rangingMask[std::size_t(i)] != 0 && oracle.value(0, node, uint32_t(i)) != 0) index = i;
  QVERIFY(index >= 0);
  const QPoint p = view->canvasPointOf(index);
  QMouseEvent press(QEvent::MouseButtonPress, QPointF(p), view->canvas()->mapToGlobal(QPointF(p)), Qt::LeftButton, Qt::LeftButton,
                    Qt::NoModifier);
  QApplication::sendEvent(view->canvas(), &press);
  peat::views::BitExplorer* explorer = window_->bitExplorer();
  QVERIFY(explorer);
  const double lo = m.lo[std::size_t(index)], hi = m.hi[std::size_t(index)];
  float value = float(std::fabs(hi) >= std::fabs(lo) ? hi : lo);  // inside the range: rounded toward zero
  if (std::fabs(double(value)) > std::max(std::fabs(hi), std::fabs(lo))) value = std::nextafter(value, 0.0f);
  QVERIFY(double(value) >= lo && double(value) <= hi);
  QCOMPARE(explorer->referenceValue(), value);
  QVERIFY2(explorer->valueText().contains(QString::number(double(value), 'g', 9)), qPrintable(explorer->valueText()));
  uint32_t ref;
  std::memcpy(&ref, &value, 4);
  for (int b = 0; b < 32; ++b) {
    explorer->toggleBit(b);
    const uint32_t want = ref ^ (uint32_t(1) << b);
    float wantValue;
    std::memcpy(&wantValue, &want, 4);
    QCOMPARE(explorer->bits(), want);
    QVERIFY(explorer->lastToggle().has_value());
    const peat::fp::Toggle& t = *explorer->lastToggle();
    if (!std::isnan(wantValue)) {
      QCOMPARE(t.after.value, wantValue);
      if (std::isfinite(wantValue))
        QCOMPARE(t.relativeChange, std::fabs(double(wantValue) - double(value)) / std::fabs(double(value)));
      const int64_t a = (ref >> 31) ? -int64_t(ref & 0x7fffffff) : int64_t(ref & 0x7fffffff);
      const int64_t c = (want >> 31) ? -int64_t(want & 0x7fffffff) : int64_t(want & 0x7fffffff);
      QCOMPARE(*t.ulpChange, uint64_t(std::llabs(a - c)));
    } else {
      QVERIFY(!t.ulpChange.has_value());
    }
    explorer->toggleBit(b);  // back
    QCOMPARE(explorer->bits(), ref);
  }
  bool inside = false;
  for (QLabel* l : explorer->findChildren<QLabel*>()) inside = inside || l->text().contains(QStringLiteral("inside the range"));
  QVERIFY(inside);
  // a ranging bit (every value of the range shares it) takes the value out of the range
  int rangingBit = -1;
  for (int b = 31; b >= 0 && rangingBit < 0; --b)
    if ((m.rangingMask[std::size_t(index)] >> b) & 1) rangingBit = b;
  QVERIFY(rangingBit >= 0);
  explorer->toggleBit(rangingBit);
  bool outside = false;
  for (QLabel* l : explorer->findChildren<QLabel*>()) outside = outside || l->text().contains(QStringLiteral("a range check catches it"));
  QVERIFY(outside);
  // "Flip in the model": that bit flipped in this value of test image 3, the network run on off the
  // GUI thread; what it shows equals core's run and the flip oracle's independent rerun
  QSignalSpy shown(window_.get(), &MainWindow::flipShown);
  explorer->setFlipImage(image);
  guiThreadReads = 0;  // the analysis, its layers and the weights are read off the GUI thread
  peat::store::setSessionAccessObserver(countGuiThreadRead);
  explorer->requestFlip();
  QVERIFY(shown.wait(60000));
  peat::store::setSessionAccessObserver(nullptr);
  QCOMPARE(guiThreadReads.load(), 0);
  const peat::store::SessionReader reader(session_.toStdString());
  const peat::save::ModelFlip f =
      peat::save::flipInModel(reader, "lenet-symbolic", "conv1.relu", index, uint32_t(1) << rangingBit, image);
  QVERIFY2(explorer->flipText().contains(QStringLiteral("caught by the range check")), qPrintable(explorer->flipText()));
  QVERIFY(f.outOfRange);
  for (std::size_t i = 0; i < f.logitsAfter.size(); ++i) {  // a row per class, its numbers never broken
    QVERIFY2(explorer->flipText().contains(QString::number(double(f.logitsAfter[i]), 'g', 9)), qPrintable(explorer->flipText()));
    QVERIFY(explorer->flipText().contains(QStringLiteral("<td>%1</td><td align=right style=\"white-space:nowrap\">").arg(i)));
  }
  {  // a model with 1,000 classes: the two predicted ones and the 8 that moved most, the rest counted
    peat::save::ModelFlip many = f;
    many.logitsBefore.assign(1000, 0.5f);
    many.logitsAfter = many.logitsBefore;
    for (int c : {7, 400, 999}) many.logitsAfter[std::size_t(c)] = 1.5f + float(c);
    many.classBefore = 500, many.classAfter = 999;
    explorer->showFlip(many);
    const QString text = explorer->flipText();
    for (int c : {7, 400, 500, 999}) QVERIFY2(text.contains(QStringLiteral("<td>%1</td><td align=right").arg(c)), qPrintable(text));
    // the 8 that moved most (the 3 that moved, then the first unmoved) and class 500
    QCOMPARE(text.count(QStringLiteral("align=right style")), 2 * (8 + 1));
    QVERIFY2(text.contains(QStringLiteral("991 other classes")), qPrintable(text));
    explorer->showFlip(f);
  }
  QCOMPARE(f.before, oracle.value(0, node, uint32_t(index)));
  // the explorer now holds the image's value and its flip (not the range's bound it opened on)
  QCOMPARE(explorer->referenceValue(), f.before);
  QCOMPARE(explorer->bits(), peat::fp::bitsOf(f.after));
  const bool changed = oracle.activationFlip(0, node, uint32_t(index), rangingBit);
  QCOMPARE(f.classAfter != f.classBefore, changed);
  QVERIFY(explorer->flipText().contains(changed ? QStringLiteral("prediction changed</b>") : QStringLiteral("prediction is unchanged")));
  QVERIFY(explorer->window()->grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/bitexplorer-flip.png")));
  // a robust bit (its change moves the value by less than the criterion allows) passes every check
  const uint32_t robust = m.robustMask[std::size_t(index)] & ~m.rangingMask[std::size_t(index)];
  explorer->toggleBit(rangingBit);
  if (robust != 0) {
    const int robustBit = __builtin_ctz(robust);
    explorer->toggleBit(robustBit);
    explorer->requestFlip();
    QVERIFY(shown.wait(60000));
    QVERIFY2(explorer->flipText().contains(QStringLiteral("not caught")) ||
                 explorer->flipText().contains(QStringLiteral("caught by the range check of")),
             qPrintable(explorer->flipText()));
    explorer->toggleBit(robustBit);
  }
  explorer->requestFlip();  // nothing toggled: nothing to flip
  QVERIFY(explorer->flipText().contains(QStringLiteral("Toggle the bits")));
  // the narrow formats beside it: the value rounded by core/fp
  explorer->setValue(value);
  QVERIFY(explorer->formatsText().contains(QString::number(double(peat::fp::roundTo(peat::fp::kBf16, value)), 'g', 9)));
  QVERIFY(explorer->window()->grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/bitexplorer-save.png")));
  explorer->clearSaveContext();
  explorer->setValue(0.1f);
  explorer->toggleBit(30);
  QVERIFY(explorer->window()->grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/bitexplorer.png")));
  explorer->window()->hide();
}

void TestSavePanel::campaignLinesPerScheme() {
  QVERIFY(peat::testsupport::selectAndSettle(*window_, QStringLiteral("save-campaign")));
  SavePanel* panel = window_->savePanel();
  QCOMPARE(panel->currentTab(), SavePanel::CampaignTab);
  const peat::store::SessionReader reader(session_.toStdString());
  const peat::save::StoredCampaign c = peat::save::loadCampaign(reader, "save-campaign");
  QCOMPARE(int(c.series.size()), 3);  // none, save, ecc
  QCustomPlot* plot = panel->campaignPlot();
  QCOMPARE(plot->graphCount(), 3);
  QCOMPARE(plot->xAxis->scaleType(), QCPAxis::stLogarithmic);
  for (int g = 0; g < plot->graphCount(); ++g) {
    const QString name = plot->graph(g)->name();
    const auto it = std::find_if(c.series.begin(), c.series.end(), [&](const peat::save::CampaignSeries& s) {
      return name.startsWith(QString::fromStdString(s.scheme) + QLatin1Char(' '));
    });
    QVERIFY2(it != c.series.end(), qPrintable(name));
    QCOMPARE(plot->graph(g)->data()->size(), int(it->flips.size()));
    for (int i = 0; i < int(it->flips.size()); ++i) {
      QCOMPARE(plot->graph(g)->data()->at(i)->key, it->flips[std::size_t(i)]);
      QCOMPARE(plot->graph(g)->data()->at(i)->value, 100 * it->accuracy[std::size_t(i)]);
    }
  }
  // the campaign's point (the first round's fault model, --no-rerun-faults in the fixture): at 4096
  // flips SAVE keeps its accuracy where no protection loses it
  const auto find = [&](const char* s) { return *std::find_if(c.series.begin(), c.series.end(), [&](const auto& x) { return x.scheme == s; }); };
  QVERIFY(find("save").accuracy.back() > find("none").accuracy.back() + 0.2);
  shoot(QStringLiteral("campaign"));
}

void TestSavePanel::exportsAndCsv() {
  QTemporaryDir dir;
  SavePanel* panel = window_->savePanel();
  for (const SavePanel::Tab tab : {SavePanel::BitsTab, SavePanel::TilesTab, SavePanel::CampaignTab}) {
    panel->setCurrentTab(tab);
    for (const char* suffix : {"png", "svg", "pdf"}) {
      const QString path = dir.filePath(QStringLiteral("plot%1.%2").arg(int(tab)).arg(QLatin1String(suffix)));
      QString error;
      QVERIFY2(peat::views::exportPlot(window_->currentPlot(), path, &error), qPrintable(error));
      QFile f(path);
      QVERIFY(f.open(QIODevice::ReadOnly));
      const QByteArray head = f.read(64);
      if (QLatin1String(suffix) == QLatin1String("png")) QVERIFY(head.startsWith("\x89PNG"));
      if (QLatin1String(suffix) == QLatin1String("pdf")) QVERIFY(head.startsWith("%PDF"));
      if (QLatin1String(suffix) == QLatin1String("svg")) {
        const QByteArray svg = head + f.readAll();
        QVERIFY(svg.contains("<svg") && svg.size() > 2000);
        f.copy(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/savepanel-export%1.svg").arg(int(tab)));
      }
    }
  }
  QString error;
  QVERIFY(!peat::views::exportPlot(panel->bitsPlot(), dir.filePath(QStringLiteral("x.bmpx")), &error));
  QVERIFY(error.contains(QStringLiteral("use .png, .svg or .pdf")));
  panel->setCurrentTab(SavePanel::BitsTab);
  const QStringList lines = withoutHead(window_->currentCsv()).trimmed().split(QLatin1Char('\n'));
  QCOMPARE(lines.size(), 13);
  QCOMPARE(lines.first(), QStringLiteral("layer,op,elements,robust_bits,ranging_bits,vulnerable_bits,type2"));
  QVERIFY(lines.at(1).startsWith(QString::fromStdString(analysis_.layers[0].name) + QLatin1Char(',')));
}

void TestSavePanel::unknownItemIsRefused() {
  QVERIFY(!peat::testsupport::selectAndSettle(*window_, QStringLiteral("SAVE/no-such-analysis")));
  QVERIFY(window_->lastError().contains(QStringLiteral("no item 'SAVE/no-such-analysis'")));
  QVERIFY(peat::testsupport::selectAndSettle(*window_, QStringLiteral("SAVE/lenet-symbolic")));  // still usable
}

QTEST_MAIN(TestSavePanel)
#include "tst_savepanel.moc"
