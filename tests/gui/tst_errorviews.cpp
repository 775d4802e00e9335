// SPDX-License-Identifier: MIT
// The workbench's error views on a real analysed session (PEAT_ANALYSED_SESSION: an MLP profiled,
// replayed through fp16 with stored outputs and analysed by `peat analyze --session`): a selected
// call shows the histograms its stored report holds, several calls overlay, and choosing a
// detector verdict selects its call. Renders the view to errorviews.png under the build tree.
#include "views/qcustomplot_include.h"  // first: see the header

#include <QTableWidget>
#include <QTreeView>
#include <QtTest>

#include "core/analyzer/session_analysis.h"
#include "core/detector/detector.h"
#include "views/errorplotpanel.h"
#include "views/mainwindow.h"
#include "views/sessiontreemodel.h"

using peat::views::MainWindow;

class TestErrorViews : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void oneCallShowsItsReport();
  void severalCallsOverlay();
  void verdictSelectsItsCall();
  void bitFlipVerdictHighlightsItsBit();

 private:
  QTemporaryDir dir_;
  QString session_;
  std::unique_ptr<MainWindow> window_;
  QModelIndex callIndex(int iteration, int row) {
    auto* model = window_->sessionModel();
    for (int r = 0; r < model->rowCount(); ++r) {
      const QModelIndex run = model->index(r, 0);
      if (run.data().toString() == QLatin1String("stored")) return model->index(row, 0, model->index(iteration, 0, run));
    }
    return {};
  }
};

void TestErrorViews::initTestCase() {
  const QString source = qEnvironmentVariable("PEAT_ANALYSED_SESSION");
  QVERIFY2(QFileInfo::exists(source), "PEAT_ANALYSED_SESSION names no session (run through ctest)");
  session_ = dir_.filePath(QStringLiteral("analysed.h5"));
  QVERIFY(QFile::copy(source, session_));
  window_ = std::make_unique<MainWindow>();
  window_->setQuietErrors(true);
  window_->resize(1500, 900);
  window_->show();
  QVERIFY(window_->openSession(session_));
}

void TestErrorViews::oneCallShowsItsReport() {
  const QModelIndex call = callIndex(0, 0);
  QVERIFY(call.isValid());
  window_->sessionTree()->selectionModel()->setCurrentIndex(call, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  peat::views::ErrorPlotPanel* panel = window_->errorPlot();
  QCOMPARE(panel->reportCount(), 1);
  const peat::store::SessionReader reader(session_.toStdString());
  const std::string analysis = peat::analyzer::analysisRunOf(reader.summary(), "stored");
  QVERIFY(analysis.rfind("analysis-stored", 0) == 0);  // the newest analysis of run stored
  const peat::analyzer::StoredCallReport report =
      peat::analyzer::loadCallReport(reader, analysis, call.data(peat::views::SessionTreeModel::PathRole).toString().toStdString());
  auto* bars = qobject_cast<QCPBars*>(panel->plot()->plottable(0));
  QVERIFY(bars);
  int bins = 0;
  for (std::size_t i = 0; i < report.log2Abs.size(); ++i) {
    if (!report.log2Abs[i]) continue;
    QCOMPARE(bars->data()->at(bins)->key, double(report.log2AbsFirstBin + int(i)));
    QCOMPARE(bars->data()->at(bins)->value, double(report.log2Abs[i]));
    ++bins;
  }
  QVERIFY(bins > 3);  // fp16 rounding spreads the errors over many powers of two
  QCOMPARE(bars->data()->size(), bins);
  double shown = 0, stored = 0;
  QCOMPARE(panel->bitPlot()->plottableCount(), 3);  // sign, exponent, mantissa
  for (int f = 0; f < 3; ++f) {
    auto* b = qobject_cast<QCPBars*>(panel->bitPlot()->plottable(f));
    for (int i = 0; i < b->data()->size(); ++i) shown += b->data()->at(i)->value;
  }
  for (uint64_t n : report.bitMismatch) stored += double(n);
  QCOMPARE(shown, stored);
  // where: the tile map of mismatches, and a star on the element with the largest error
  QVERIFY(!report.tileMismatch.empty());
  auto* map = qobject_cast<QCPColorMap*>(panel->mapPlot()->plottable(0));
  QVERIFY(map);
  QCOMPARE(map->data()->keySize(), int(2 * report.tilesAcross));
  QCOMPARE(map->data()->valueSize(), int(2 * report.tilesDown));
  uint64_t inTiles = 0;
  for (uint64_t n : report.tileMismatch) inTiles += n;
  QCOMPARE(double(inTiles), report.mismatched);
  QVERIFY(report.worstRow >= 0 && report.worstCol >= 0);
  QCOMPARE(panel->mapPlot()->graph(0)->data()->at(0)->key, double(report.worstCol) / double(report.tileCols));
  QCOMPARE(panel->mapPlot()->graph(0)->data()->at(0)->value, double(report.worstRow) / double(report.tileRows));
  QVERIFY(panel->mapPlot()->savePng(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/errorviews-where.png"), 600, 400));
  panel->setScale(peat::views::ErrorPlotPanel::Scale::Log2Ulp);
  QVERIFY(panel->plot()->xAxis->label().contains(QStringLiteral("ULP")));
  panel->setScale(peat::views::ErrorPlotPanel::Scale::Log2Abs);
  QVERIFY(panel->csv().startsWith(QStringLiteral("call,measure,log2_bin,elements\n")));
}

void TestErrorViews::severalCallsOverlay() {
  auto* selection = window_->sessionTree()->selectionModel();
  selection->setCurrentIndex(callIndex(0, 0), QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  selection->select(callIndex(0, 1), QItemSelectionModel::Select | QItemSelectionModel::Rows);
  QCOMPARE(window_->errorPlot()->reportCount(), 2);
  QCOMPARE(window_->errorPlot()->plot()->graphCount(), 2);  // step lines, one per call
  QVERIFY(window_->grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/errorviews.png")));
}

void TestErrorViews::verdictSelectsItsCall() {
  QTableWidget* verdicts = window_->verdictTable();
  QVERIFY(verdicts->rowCount() >= 3);
  const int row = (verdicts->currentRow() + 2) % verdicts->rowCount();  // not the row shown now
  verdicts->setCurrentCell(row, 0);
  const QModelIndex current = window_->sessionTree()->currentIndex();
  QCOMPARE(current.data(peat::views::SessionTreeModel::PathRole).toString(), verdicts->item(row, 0)->text());
  QCOMPARE(window_->errorPlot()->reportCount(), 1);
  // the verdict's meaning is explained and is the verdict cell's tooltip
  const QString model = verdicts->item(row, 1)->text();
  QVERIFY(!verdicts->item(row, 1)->toolTip().isEmpty());
  QCOMPARE(verdicts->item(row, 1)->toolTip(), QString::fromStdString(peat::detector::verdictExplanation(model.toStdString())));
}

// A bit_flip verdict's evidence is a bit position: choosing the verdict frames that bit's bar.
void TestErrorViews::bitFlipVerdictHighlightsItsBit() {
  QVERIFY(window_->selectItem(QStringLiteral("flips")));  // its analysis's verdicts fill the table
  QTableWidget* verdicts = window_->verdictTable();
  int row = -1;
  for (int r = 0; r < verdicts->rowCount() && row < 0; ++r)
    if (verdicts->item(r, 1)->text() == QLatin1String("bit_flip") && verdicts->item(r, 3)->text().contains(QStringLiteral("bit=30")))
      row = r;
  QVERIFY2(row >= 0, "no bit_flip verdict on bit 30");
  verdicts->setCurrentCell(row == 0 && verdicts->rowCount() > 1 ? 1 : 0, 0);  // start elsewhere
  verdicts->setCurrentCell(row, 0);
  QCOMPARE(window_->errorPlot()->reportCount(), 1);
  QCOMPARE(window_->errorPlot()->highlightedBit(), 30);
  QCOMPARE(window_->errorPlot()->bitPlot()->itemCount(), 2);  // the frame and its label
  QVERIFY(window_->errorPlot()->bitPlot()->savePng(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/errorviews-bitflip.png"), 600, 300));
}

QTEST_MAIN(TestErrorViews)
#include "tst_errorviews.moc"
