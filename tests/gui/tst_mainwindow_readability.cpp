// SPDX-License-Identifier: MIT
// Readability of the workbench's plots and the bit explorer (issue 33, part 6), on small data made
// here: every heatmap has a colour scale over the data's own range and a hover readout, legends
// sit off the data, the SAVE map's tile grid falls on tile edges, the empty Bit classes tab says
// why, and the bit explorer steps to the neighbouring floats and saturates E4M3 as the candidate.
#include "views/qcustomplot_include.h"  // first: see the header

#include <QCheckBox>
#include <QLabel>
#include <QPushButton>
#include <QToolButton>
#include <QtTest>

#include <cmath>
#include <map>

#include "core/analysis/session_analysis.h"
#include "core/fp/explain.h"
#include "core/save/analysis_record.h"
#include "core/save/campaign_record.h"
#include "core/save/layer_map.h"
#include "core/store/curves.h"
#include "views/bitexplorer.h"
#include "views/curvepanel.h"
#include "views/errorplotpanel.h"
#include "views/layermapview.h"
#include "views/mainwindow.h"
#include "views/savepanel.h"
#include "views/tourpanel.h"

#include "tests/support/sample_session.h"

using peat::analyzer::StoredCallReport;

namespace {

// 32 x 64 elements in tiles of 16 x 16: 2 x 4 tiles; tile (1, 1) holds the most mismatches.
StoredCallReport sampleReport() {
  StoredCallReport r;
  r.call = "iterations/000000/calls/000003";
  r.displayName = "#3 conv2 (iteration 0)";
  r.verdict = "precision_loss";
  r.elements = 2048;
  r.mismatched = 10 + 20 + 128 + 40;
  r.log2AbsFirstBin = -20;
  r.log2Abs = {0, 5, 50, 100, 43};
  r.log2Ulp = {100, 98};
  r.bitMismatch.assign(32, 0);
  for (int b = 0; b < 16; ++b) r.bitMismatch[std::size_t(b)] = 100;
  r.rows = 32;
  r.cols = 64;
  r.tileRows = r.tileCols = 16;
  r.tilesDown = 2;
  r.tilesAcross = 4;
  r.tileMismatch = {10, 0, 0, 20, 0, 128, 40, 0};
  r.worstRow = 20;
  r.worstCol = 21;
  return r;
}

bool apart(const QRectF& a, const QRectF& b) { return !a.intersects(b); }

}  // namespace

class TestReadability : public QObject {
  Q_OBJECT
 private slots:
  void whereMapHasAScaleAndAHoverReadout();
  void legendsStayOffTheData();
  void confinementIsFramedWhereItIs();
  void convOutputsAreChannelsByPositions();
  void tilesHeatmapUsesTheDataRange();
  void emptyBitClassesTabSaysWhy();
  void saveTileGridFallsOnTileEdges();
  void bitExplorerStepsToTheNeighbours();
  void bitExplorerSaturatesE4M3AsTheCandidate();
  void bitExplorerTogglesFormatsAndShowsFp64();
  void tourRunsInPlaceAndReturns();
};

void TestReadability::whereMapHasAScaleAndAHoverReadout() {
  peat::views::ErrorPlotPanel panel;
  panel.resize(700, 600);
  panel.show();
  panel.showReports({sampleReport()});
  QCPColorScale* scale = panel.mapScale();
  QVERIFY(scale);
  // the data's own range: the busiest tile holds 128 of its 256 elements
  QCOMPARE(scale->dataRange().lower, 0.0);
  QCOMPARE(scale->dataRange().upper, 0.5);
  auto* map = qobject_cast<QCPColorMap*>(panel.mapPlot()->plottable(0));
  QVERIFY(map);
  QCOMPARE(map->colorScale(), scale);
  // light where nothing differs, dark blue where every element does (not the scale's default gradient)
  QCOMPARE(QColor(scale->gradient().color(1.0, QCPRange(0, 1))), QColor(0x0d, 0x47, 0xa1));
  QCOMPARE(QColor(scale->gradient().color(0.0, QCPRange(0, 1))), QColor(0xf5, 0xf5, 0xf5));
  const QString text = panel.mapHoverText(1, 1);
  QVERIFY2(text.contains(QStringLiteral("128 of 256")) && text.contains(QStringLiteral("50.0%")), qPrintable(text));
  QVERIFY(text.contains(QStringLiteral("rows 16-31, columns 16-31")));
  // a real mouse move over that tile reads the same out
  panel.mapPlot()->replot();
  const QPoint at(int(panel.mapPlot()->xAxis->coordToPixel(1.5)), int(panel.mapPlot()->yAxis->coordToPixel(1.5)));
  QMouseEvent move(QEvent::MouseMove, QPointF(at), panel.mapPlot()->mapToGlobal(QPointF(at)), Qt::NoButton, Qt::NoButton, Qt::NoModifier);
  QApplication::sendEvent(panel.mapPlot(), &move);
  QCOMPARE(panel.hoverText(), text);
}

void TestReadability::legendsStayOffTheData() {
  peat::views::ErrorPlotPanel panel;
  panel.resize(700, 700);
  panel.show();
  panel.showReports({sampleReport()});
  panel.highlightBitSpan(0, 15, QStringLiteral("bits bf16 does not keep (0-15)"));
  panel.highlightBit(12);  // "evidence: bit 12" over its bar
  for (QCustomPlot* plot : {panel.plot(), panel.bitPlot(), panel.mapPlot()}) {
    plot->replot();
    QVERIFY(plot->legend->visible());
    QVERIFY2(apart(plot->legend->outerRect(), plot->axisRect()->rect()), "a legend sits inside the axis rect, over the data");
  }
  // the training curves' legend too: loss and accuracy lines cross every corner
  peat::views::CurvePanel curves;
  curves.resize(700, 500);
  curves.show();
  peat::store::TrainingCurve curve;
  curve.run = "golden";
  curve.kind = "profile";
  for (int i = 0; i < 30; ++i) {
    curve.iteration.push_back(i);
    curve.loss.push_back(0.5 - 0.01 * i);
    curve.accuracy.push_back(0.8 + 0.005 * i);
    curve.testLoss.push_back(std::nan(""));
    curve.testAccuracy.push_back(std::nan(""));
  }
  curves.showCurves(curve, {});
  curves.plot()->replot();
  QVERIFY(curves.plot()->legend->visible());
  QVERIFY(apart(curves.plot()->legend->outerRect(), curves.plot()->axisRect()->rect()));
  // the histogram's legend names the call as the session tree does
  QVERIFY(panel.plot()->legend->itemCount() == 1);
  auto* item = qobject_cast<QCPPlottableLegendItem*>(panel.plot()->legend->item(0));
  QVERIFY(item);
  QCOMPARE(item->plottable()->name(), QStringLiteral("#3 conv2 (iteration 0) (precision_loss)"));
}

// index_error confined to columns: the Where map frames those columns (the detector's evidence
// fields), not the first tiles with any mismatch.
void TestReadability::confinementIsFramedWhereItIs() {
  peat::views::ErrorPlotPanel panel;
  panel.resize(700, 600);
  panel.show();
  panel.showReports({sampleReport()});  // 32 x 64, tiles of 16 x 16: 2 x 4 tiles, mismatches in 4
  peat::store::Finding f;
  f.model = "index_error";
  f.numbers = {{"confined", 1.0}, {"columns_hit", 5.0}, {"rows_hit", 32.0}};
  f.labels = {{"columns", "60-63,7"}};
  panel.showFinding(f);
  QCOMPARE(panel.evidenceText(), QStringLiteral("evidence: large errors confined to 5 columns (60-63, 7)"));
  std::vector<QRectF> bands;
  for (int i = 0; i < panel.mapPlot()->itemCount(); ++i)
    if (auto* rect = qobject_cast<QCPItemRect*>(panel.mapPlot()->item(i)))
      bands.push_back(QRectF(rect->topLeft->coords(), rect->bottomRight->coords()));
  QCOMPARE(bands.size(), std::size_t(2));
  // in tile units: columns 60-63 are the last quarter of the last tile column, over both tile rows
  QCOMPARE(bands[0], QRectF(QPointF(60.0 / 16, 0), QPointF(64.0 / 16, 2)));
  QCOMPARE(bands[1], QRectF(QPointF(7.0 / 16, 0), QPointF(8.0 / 16, 2)));
  // rows too
  f.labels = {{"rows", "3"}};
  panel.showFinding(f);
  QCOMPARE(panel.evidenceText(), QStringLiteral("evidence: large errors confined to 1 row (3)"));
}

void TestReadability::convOutputsAreChannelsByPositions() {
  using peat::analyzer::mapShape;
  QCOMPARE(mapShape({2, 6, 10, 10}, "conv2d"), (std::vector<uint64_t>{12, 100}));
  QCOMPARE(mapShape({2, 6, 10, 10}, ""), (std::vector<uint64_t>{12, 100}));  // a dropped NCHW tensor
  QCOMPARE(mapShape({2, 4, 8, 16}, "matmul"), (std::vector<uint64_t>{2, 4, 8, 16}));  // a batched GEMM stays
  QCOMPARE(mapShape({16, 256}, "linear"), (std::vector<uint64_t>{16, 256}));
  // so a conv output of 6 channels of 10 x 10 is 7 tiles across, not one column of tiles
  std::vector<float> g(600, 1.0f), c(600, 1.0f);
  c[550] = 2.0f;
  const peat::analyzer::Report r = peat::analyzer::analyze(g.data(), c.data(), mapShape({1, 6, 10, 10}, "conv2d"));
  QCOMPARE(r.rows, uint64_t(6));
  QCOMPARE(r.tilesAcross, uint64_t(7));
}

void TestReadability::tilesHeatmapUsesTheDataRange() {
  peat::save::StoredAnalysis a;
  a.model = "lenet";
  a.mode = "symbolic";
  peat::save::StoredLayer l;
  l.name = "conv2";
  l.op = "conv2d";
  l.elements = 1024;
  l.tilesDown = 1;
  l.tilesAcross = 4;
  l.tileRows = l.tileCols = 16;
  l.tileShare = {0.82f, 0.9f, 1.0f, 0.95f};
  l.tileReliable = {0, 0, 1, 0};
  a.layers = {l};
  peat::views::SavePanel panel;
  panel.resize(800, 600);
  panel.showAnalysis(a);
  QVERIFY(panel.tilesScale());
  QCOMPARE(float(panel.tilesScale()->dataRange().lower), 0.82f);
  QCOMPARE(float(panel.tilesScale()->dataRange().upper), 1.0f);
  // with each tile's mean vulnerable bits stored, those by default, over their own range
  a.layers[0].tileVulnerableBits = {3.0f, 9.5f, 12.0f, 7.0f};
  panel.showAnalysis(a);
  QCOMPARE(float(panel.tilesScale()->dataRange().lower), 3.0f);
  QCOMPARE(float(panel.tilesScale()->dataRange().upper), 12.0f);
  QCOMPARE(panel.tilesScale()->label(), QStringLiteral("vulnerable bits per value"));
}

void TestReadability::emptyBitClassesTabSaysWhy() {
  peat::views::SavePanel panel;
  QVERIFY(panel.bitsEmptyText().contains(QStringLiteral("No SAVE analysis")));
  peat::save::StoredCampaign campaign;
  panel.showCampaign(campaign);
  QVERIFY(panel.bitsEmptyText().contains(QStringLiteral("Campaign tab")));
  peat::save::StoredAnalysis a;
  peat::save::StoredLayer l;
  l.name = "fc1";
  l.elements = 16;
  l.tilesDown = l.tilesAcross = 1;
  l.tileRows = l.tileCols = 16;
  l.tileShare = {0.5f};
  l.tileReliable = {0};
  a.layers = {l};
  panel.showAnalysis(a);
  QVERIFY(panel.bitsEmptyText().isEmpty());  // the plot is shown
}

void TestReadability::saveTileGridFallsOnTileEdges() {
  // 6 channels of 12 x 12, tiled as [6, 144] in tiles of 16 x 16: a tile is 16 positions of all six
  // channels, a run that wraps a channel's rows (brickwork, drawn spatially)
  peat::save::LayerMap m;
  m.name = "conv1";
  m.op = "conv2d";
  m.shape = {6, 12, 12};
  m.channels = 6;
  m.height = m.width = 12;
  m.rows = 6;
  m.cols = 144;
  m.tileRows = m.tileCols = 16;
  m.tilesDown = 1;
  m.tilesAcross = 9;
  const std::size_t n = 6 * 144;
  m.lo.assign(n, -1.0);
  m.hi.assign(n, 1.0);
  for (std::size_t i = 0; i < n; ++i) m.hi[i] = 1.0 + double(i % 7);
  m.robustMask.assign(n, 0xffffu);
  m.rangingMask.assign(n, 0x80000000u);
  m.tileReliable = {1, 0, 0, 0, 0, 0, 0, 0, 0};
  peat::save::StoredAnalysis a;
  peat::views::LayerMapView view;
  view.resize(900, 600);
  view.show();
  view.showLayer(a, m);
  QVERIFY(view.tiled());  // the default
  // every tile's cells fill the rectangle their centres span, and no other tile's cell lies in it
  auto rectangles = [&] {
    std::map<int64_t, QRectF> box;
    std::map<int64_t, int> count;
    for (int64_t e = 0; e < int64_t(n); ++e) {
      const QPointF p = view.canvasPointOf(e);
      const int64_t t = m.tileOf(e);
      box[t] = count[t]++ ? box[t].united(QRectF(p, QSizeF(0.01, 0.01))) : QRectF(p, QSizeF(0.01, 0.01));
    }
    for (int64_t e = 0; e < int64_t(n); ++e)
      for (const auto& [t, r] : box)
        if (t != m.tileOf(e) && r.contains(view.canvasPointOf(e))) return false;
    return true;
  };
  QVERIFY(rectangles());
  view.setTiled(false);  // each channel's picture: the same tiles are not rectangles there
  QVERIFY(!rectangles());
  view.setTiled(true);
  // hovering reads an element's tile out
  view.hoverElement(20);
  QVERIFY2(view.hoverText().contains(QStringLiteral("tile 1")), qPrintable(view.hoverText()));
}

void TestReadability::bitExplorerStepsToTheNeighbours() {
  peat::views::BitExplorer explorer;
  explorer.setValue(1.0f);
  explorer.stepNext();
  QCOMPARE(QString::number(double(explorer.referenceValue()), 'g', 17), QStringLiteral("1.0000001192092896"));
  QCOMPARE(explorer.bits(), 0x3f800001u);
  explorer.setValue(1.0f);
  explorer.stepPrevious();
  QCOMPARE(QString::number(double(explorer.referenceValue()), 'g', 8), QStringLiteral("0.99999994"));
  QCOMPARE(explorer.bits(), 0x3f7fffffu);
  // the buttons do the same
  auto* next = explorer.findChild<QPushButton*>();
  QVERIFY(next);
  for (QPushButton* b : explorer.findChildren<QPushButton*>())
    if (b->text().contains(QStringLiteral("Next"))) next = b;
  explorer.setValue(1.0f);
  next->click();
  QCOMPARE(explorer.bits(), 0x3f800001u);
}

void TestReadability::bitExplorerSaturatesE4M3AsTheCandidate() {
  const peat::fp::Narrowed n = peat::fp::narrowAsCandidate(peat::fp::kE4M3, 65504.0f);
  QCOMPARE(n.value, 448.0f);
  QVERIFY(n.saturated);
  QCOMPARE(peat::fp::narrowAsCandidate(peat::fp::kE4M3, 1.0f).saturated, false);
  QVERIFY(std::isinf(peat::fp::narrowAsCandidate(peat::fp::kFp16, 1e6f).value));  // fp16 overflows as its kernel does
  peat::views::BitExplorer explorer;
  explorer.setValue(65504.0f);
  QString e4m3;
  for (const QString& line : explorer.formatsText().split(QLatin1Char('\n')))
    if (line.startsWith(QStringLiteral("e4m3"))) e4m3 = line;
  QVERIFY2(e4m3.contains(QStringLiteral("= 448 ")) && e4m3.contains(QStringLiteral("saturated")), qPrintable(e4m3));
  QVERIFY(!e4m3.contains(QStringLiteral("nan"), Qt::CaseInsensitive));
}

void TestReadability::bitExplorerTogglesFormatsAndShowsFp64() {
  peat::views::BitExplorer explorer;
  explorer.setValue(0.1f);
  QVERIFY(explorer.formatsText().contains(QStringLiteral("bf16")));
  explorer.setFormatShown(QStringLiteral("bf16"), false);
  QVERIFY(!explorer.formatsText().contains(QStringLiteral("bf16")));
  QVERIFY(!explorer.formatsText().contains(QStringLiteral("e2m1")));  // fp4 on demand
  explorer.setFormatShown(QStringLiteral("e2m1"), true);
  QVERIFY(explorer.formatsText().contains(QStringLiteral("e2m1")));
  // fp64 beside fp32: the fp32 value 0.1f exactly, with its 64 bits
  QVERIFY2(explorer.fp64Text().contains(QStringLiteral("0.100000001490116119384765625")), qPrintable(explorer.fp64Text()));
  QVERIFY(explorer.fp64Text().startsWith(QStringLiteral("fp64  0 01111111011 1001100110011001100110100000")));
  // a toggled bit: the fp64 line follows the value the bits now hold (it kept the one opened)
  explorer.setValue(1.0f);
  explorer.toggleBit(22);  // the top mantissa bit: 1.5
  QVERIFY2(explorer.fp64Text().contains(QStringLiteral("= 1.5 ")), qPrintable(explorer.fp64Text()));
  explorer.toggleBit(22);
  QVERIFY2(explorer.fp64Text().contains(QStringLiteral("= 1 ")), qPrintable(explorer.fp64Text()));
  explorer.setValue(0.1f);
  // the bits are numbered and the fields named
  QStringList labels;
  for (QLabel* l : explorer.findChildren<QLabel*>()) labels << l->text();
  QVERIFY(labels.contains(QStringLiteral("31")) && labels.contains(QStringLiteral("0")) && labels.contains(QStringLiteral("23")));
  QVERIFY(labels.contains(QStringLiteral("sign")));
  // large type: bigger bits
  const int small = explorer.findChild<QToolButton*>()->width();
  explorer.setLargeType(true);
  QVERIFY(explorer.largeType());
  QVERIFY(explorer.findChild<QToolButton*>()->width() > small);
}

void TestReadability::tourRunsInPlaceAndReturns() {
  QTemporaryDir dir;
  qputenv("XDG_DATA_HOME", dir.filePath(QStringLiteral("xdg")).toUtf8());
  const QString demo = peat::views::MainWindow::demoPath();
  QVERIFY(demo.startsWith(dir.path()));
  QVERIFY(QDir().mkpath(QFileInfo(demo).absolutePath()));
  peat::testsupport::writeSampleSession(demo.toStdString());  // stands in for the demo session
  const QString own = dir.filePath(QStringLiteral("mine.h5"));
  peat::testsupport::writeSampleSession(own.toStdString());
  peat::views::MainWindow window;
  window.setQuietErrors(true);
  window.show();
  QVERIFY(window.openSession(own));
  QVERIFY(window.selectItem(QStringLiteral("golden/iteration 1")));
  const QString item = window.currentItemPath();
  const QWidgetList tops = QApplication::topLevelWidgets();
  const QSet<QWidget*> before(tops.begin(), tops.end());
  window.startTour();  // F1
  // in place: the demo in this window, the tour beside it; no second window
  QTRY_COMPARE_WITH_TIMEOUT(window.sessionPath(), demo, 20000);
  QTRY_VERIFY_WITH_TIMEOUT(window.tourPanel() && window.tourPanel()->step() == 0, 20000);
  for (QWidget* w : QApplication::topLevelWidgets())
    QVERIFY(!qobject_cast<peat::views::MainWindow*>(w) || before.contains(w));
  // Leave: the user's session again, on the item it showed
  auto* leave = window.tourPanel()->findChild<QPushButton*>(QString(), Qt::FindDirectChildrenOnly);
  for (QPushButton* b : window.tourPanel()->findChildren<QPushButton*>())
    if (b->text().contains(QStringLiteral("Leave"))) leave = b;
  QVERIFY(leave && leave->text().contains(QStringLiteral("Leave")));
  const QPoint nextAt = window.tourPanel()->findChildren<QPushButton*>()[1]->pos();
  window.tourPanel()->goTo(window.tourPanel()->steps() - 1);  // Next reads Done: the buttons stay put
  QCOMPARE(window.tourPanel()->findChildren<QPushButton*>()[1]->pos(), nextAt);
  leave->click();
  QTRY_COMPARE_WITH_TIMEOUT(window.sessionPath(), own, 20000);
  QTRY_COMPARE_WITH_TIMEOUT(window.currentItemPath(), item, 20000);
  QVERIFY(!window.tourPanel()->isVisible());
  qunsetenv("XDG_DATA_HOME");
}

QTEST_MAIN(TestReadability)
#include "tst_mainwindow_readability.moc"
