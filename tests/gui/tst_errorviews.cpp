// SPDX-License-Identifier: MIT
// The workbench's error views on a real analysed session (PEAT_ANALYSED_SESSION: an MLP profiled,
// replayed through fp16 with stored outputs and analysed by `peat analyze --session`): a selected
// call shows the histograms its stored report holds, several calls overlay, and choosing a
// detector verdict selects its call. Renders the view to errorviews.png under the build tree.
#include "views/qcustomplot_include.h"  // first: see the header

#include <QLabel>
#include <QAbstractItemModelTester>
#include <QTableView>
#include <QTableWidget>
#include <QTreeView>
#include <QtTest>
#include <QTabWidget>
#include <QToolTip>

#include "tests/gui/settle.h"
#include <QAbstractButton>
#include <QAbstractItemView>
#include <QLabel>
#include <QStyleFactory>
#include <cmath>

#include "core/analysis/session_analysis.h"
#include "core/detector/detector.h"
#include "views/comparepanel.h"
#include "views/bitexplorer.h"
#include "views/callpage.h"
#include "views/errorplotpanel.h"
#include "views/mainwindow.h"
#include "views/palette.h"
#include "views/plotstyle.h"
#include "views/pageexport.h"
#include "views/savepanel.h"
#include "views/sessiontreemodel.h"
#include "views/verdicttablemodel.h"

using peat::views::MainWindow;
using peat::views::SessionTreeModel;

class TestErrorViews : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void oneCallShowsItsReport();
  void severalCallsOverlay();
  void verdictSelectsItsCall();
  void bitFlipVerdictHighlightsItsBit();
  void indexErrorVerdictMarksItsStride();
  void comparesTwoKernelsSideBySide();
  void comparesTwoSessions();
  void followsADarkPalette();
  void keyboardWalksCallsAndVerdicts();
  void exportKeepsTheEvidence();
  void verdictRowsRepaintWithTheTree();
  void notesFitANarrowDock();

 private:
  QTemporaryDir dir_;
  QString session_;
  std::unique_ptr<MainWindow> window_;
  QModelIndex callIndex(int iteration, int row, const QString& runName = QStringLiteral("stored")) {
    auto* model = window_->sessionModel();
    for (int r = 0; r < model->rowCount(); ++r) {
      const QModelIndex run = model->index(r, 0);
      if (run.data().toString() == runName) return model->index(row, 0, model->index(iteration, 0, run));
    }
    return {};
  }
  int verdictRow(const QString& model, const QString& evidence) {
    QTableView* verdicts = window_->verdictTable();
    QAbstractItemModel* m = verdicts->model();
    for (int r = 0; r < m->rowCount(); ++r)
      if (m->index(r, 1).data().toString() == model && m->index(r, 3).data().toString().contains(evidence)) return r;
    return -1;
  }
};

void TestErrorViews::initTestCase() {
  const QString source = qEnvironmentVariable("PEAT_ANALYSED_SESSION");
  QVERIFY2(QFileInfo::exists(source), "PEAT_ANALYSED_SESSION names no session (run through ctest)");
  session_ = dir_.filePath(QStringLiteral("analysed.h5"));
  QVERIFY(QFile::copy(source, session_));
  window_ = std::make_unique<MainWindow>();
  // the verdict table's model, checked on every change the tests make
  new QAbstractItemModelTester(window_->verdictModel(), QAbstractItemModelTester::FailureReportingMode::QtTest,
                               window_.get());
  window_->setQuietErrors(true);
  window_->resize(1500, 900);
  window_->show();
  QVERIFY(window_->openSession(session_));
}

void TestErrorViews::oneCallShowsItsReport() {
  const QModelIndex call = callIndex(0, 0);
  QVERIFY(call.isValid());
  window_->sessionTree()->selectionModel()->setCurrentIndex(call, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  QVERIFY(peat::testsupport::settle(*window_));
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
  // the star at the worst element's own cell: its centre, in tile units
  QCOMPARE(panel->mapPlot()->graph(0)->data()->at(0)->key, (double(report.worstCol) + 0.5) / double(report.tileCols));
  QCOMPARE(panel->mapPlot()->graph(0)->data()->at(0)->value, (double(report.worstRow) + 0.5) / double(report.tileRows));
  QVERIFY(panel->mapPlot()->savePng(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/errorviews-where.png"), 600, 400));
  panel->setScale(peat::views::ErrorPlotPanel::Scale::Log2Ulp);
  QVERIFY(panel->plot()->xAxis->label().contains(QStringLiteral("ULP")));
  panel->setScale(peat::views::ErrorPlotPanel::Scale::Log2Abs);
  QVERIFY(panel->csv().startsWith(QStringLiteral("call,measure,log2_bin,elements\n")));
}

void TestErrorViews::severalCallsOverlay() {
  auto* selection = window_->sessionTree()->selectionModel();
  selection->setCurrentIndex(callIndex(0, 0), QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  QVERIFY(peat::testsupport::settle(*window_));
  selection->select(callIndex(0, 1), QItemSelectionModel::Select | QItemSelectionModel::Rows);
  QVERIFY(peat::testsupport::settle(*window_));
  QCOMPARE(window_->errorPlot()->reportCount(), 2);
  QCOMPARE(window_->errorPlot()->plot()->graphCount(), 2);  // step lines, one per call
  QVERIFY(window_->grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/errorviews.png")));
}

void TestErrorViews::verdictSelectsItsCall() {
  QTableView* verdicts = window_->verdictTable();
  QAbstractItemModel* m = verdicts->model();
  QVERIFY(m->rowCount() >= 3);
  const int row = (verdicts->currentIndex().row() + 2) % m->rowCount();  // not the row shown now
  verdicts->setCurrentIndex(m->index(row, 0));
  QVERIFY(peat::testsupport::settle(*window_));
  const QModelIndex current = window_->sessionTree()->currentIndex();
  QCOMPARE(current.data(peat::views::SessionTreeModel::PathRole).toString(), m->index(row, 0).data(peat::views::VerdictTableModel::PathRole).toString());
  QCOMPARE(window_->errorPlot()->reportCount(), 1);
  // the verdict's meaning is explained and is the verdict cell's tooltip
  const QString model = m->index(row, 1).data().toString();
  QVERIFY(!m->index(row, 1).data(Qt::ToolTipRole).toString().isEmpty());
  QCOMPARE(m->index(row, 1).data(Qt::ToolTipRole).toString(), QString::fromStdString(peat::detector::verdictExplanation(model.toStdString())));
}

// A bit_flip verdict's evidence is a bit position: choosing the verdict frames that bit's bar.
void TestErrorViews::bitFlipVerdictHighlightsItsBit() {
  QVERIFY(peat::testsupport::selectAndSettle(*window_, QStringLiteral("flips")));  // its analysis's verdicts fill the table
  QTableView* verdicts = window_->verdictTable();
  QAbstractItemModel* m = verdicts->model();
  int row = -1;
  for (int r = 0; r < m->rowCount() && row < 0; ++r)
    if (m->index(r, 1).data().toString() == QLatin1String("bit_flip") && m->index(r, 3).data().toString().contains(QStringLiteral("bit=30")))
      row = r;
  QVERIFY2(row >= 0, "no bit_flip verdict on bit 30");
  verdicts->setCurrentIndex(m->index(row == 0 && m->rowCount() > 1 ? 1 : 0, 0));  // start elsewhere
  QSignalSpy stats(window_.get(), &MainWindow::pairStatsShown);
  verdicts->setCurrentIndex(m->index(row, 0));
  QVERIFY(peat::testsupport::settle(*window_));
  QCOMPARE(window_->errorPlot()->reportCount(), 1);
  QCOMPARE(window_->errorPlot()->highlightedBit(), 30);
  QCOMPARE(window_->errorPlot()->bitPlot()->itemCount(), 2);  // the frame and its label
  QVERIFY(window_->errorPlot()->bitPlot()->savePng(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/errorviews-bitflip.png"), 600, 300));
  // the call's page at the centre: its name, statistics and verdict, and the plots with the
  // verdict's bit framed there too
  peat::views::CallPage* page = window_->callPage();
  QVERIFY(page->isVisible());
  const QString call = m->index(row, 0).data(peat::views::VerdictTableModel::PathRole).toString();
  QVERIFY2(page->titleText().contains(call), qPrintable(page->titleText()));
  QVERIFY2(page->detailsText().contains(QStringLiteral("Verdict: bit_flip")), qPrintable(page->detailsText()));
  QVERIFY(page->detailsText().contains(QStringLiteral("mismatched")));
  QVERIFY(page->detailsText().contains(QStringLiteral("bit=30")));
  QCOMPARE(page->plots()->reportCount(), 1);
  QCOMPARE(page->plots()->highlightedBit(), 30);
  // the golden and candidate outputs side by side (the run stored them): min and max computed here
  {
    const peat::store::SessionReader reader(session_.toStdString());
    const peat::analyzer::StoredCallReport* report = page->plots()->firstReport();
    QVERIFY(report);
    const peat::analyzer::CallPair pair = peat::analyzer::loadCallPair(reader, report->analysisRun, report->call);
    QTRY_VERIFY_WITH_TIMEOUT(stats.count() > 0, 20000);  // read and computed off the GUI thread
    const QString details = page->detailsText();
    QVERIFY2(details.contains(QStringLiteral("Golden and candidate")), qPrintable(details));
    for (const std::vector<float>* v : {&pair.golden, &pair.candidate}) {
      float lo = INFINITY, hi = -INFINITY;
      for (float x : *v)
        if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
      QVERIFY2(details.contains(QString::number(double(lo), 'g', 6)) && details.contains(QString::number(double(hi), 'g', 6)),
               qPrintable(details));
    }
  }
  QVERIFY(window_->grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/callpage.png")));
  // the page's Where map goes back to the elements: the session's stored outputs are read on the
  // first click, and the tile of the largest error opens that element, its bit 30 framed
  QVERIFY(page->plots()->firstReport());
  const peat::analyzer::StoredCallReport copy = *page->plots()->firstReport();  // the panel's changes below
  const peat::analyzer::StoredCallReport* shown = &copy;
  QVERIFY(shown->worstRow >= 0);
  emit page->plots()->tileClicked(shown->worstRow / qint64(shown->tileRows), shown->worstCol / qint64(shown->tileCols));
  peat::views::BitExplorer* explorer = window_->bitExplorer();
  QVERIFY(explorer);
  QCOMPARE(explorer->differingBits(), uint32_t(1) << 30);
  QVERIFY2(explorer->contextText().contains(QStringLiteral("[%1, %2]").arg(shown->worstRow).arg(shown->worstCol)),
           qPrintable(explorer->contextText()));
  QCOMPARE(page->plots()->reportCount(), 2);  // the tile's histogram beside the call's
  // and a bit's bar shows where that bit differs: bit 30 in one element of that tile
  emit page->plots()->bitClicked(30);
  QCOMPARE(page->plots()->mapBit(), 30);
  uint64_t flipped = 0;
  for (uint64_t n : page->plots()->mapCounts()) flipped += n;
  QCOMPARE(double(flipped), shown->mismatched);
}

// An index_error verdict of the tile-edge bug (every 16th column reads its neighbour): choosing it
// marks, on the Where map, the elements a whole number of strides from the worst one.
void TestErrorViews::indexErrorVerdictMarksItsStride() {
  QVERIFY(peat::testsupport::selectAndSettle(*window_, QStringLiteral("edge")));
  const int row = verdictRow(QStringLiteral("index_error"), QStringLiteral("repeat every 16 elements"));
  QVERIFY2(row >= 0, "no periodic index_error verdict");
  QTableView* verdicts = window_->verdictTable();
  QAbstractItemModel* m = verdicts->model();
  verdicts->setCurrentIndex(m->index(row == 0 && m->rowCount() > 1 ? 1 : 0, 0));
  QVERIFY(peat::testsupport::settle(*window_));
  verdicts->setCurrentIndex(m->index(row, 0));
  QVERIFY(peat::testsupport::settle(*window_));
  peat::views::ErrorPlotPanel* panel = window_->errorPlot();
  QCOMPARE(panel->reportCount(), 1);
  QVERIFY(panel->patternMarks() > 0);
  QVERIFY(panel->mapPlot()->isVisible());  // the Where tab is in front
  // the marks: the worst element and its neighbours 16 elements apart, in tile coordinates
  const peat::store::SessionReader reader(session_.toStdString());
  const peat::analyzer::StoredCallReport report = peat::analyzer::loadCallReport(
      reader, peat::analyzer::analysisRunOf(reader.summary(), "edge"), m->index(row, 0).data(peat::views::VerdictTableModel::PathRole).toString().toStdString());
  QCPGraph* marks = nullptr;
  for (int g = 0; g < panel->mapPlot()->graphCount(); ++g)
    if (panel->mapPlot()->graph(g)->name().contains(QStringLiteral("every 16"))) marks = panel->mapPlot()->graph(g);
  QVERIFY(marks);
  QCOMPARE(marks->dataCount(), panel->patternMarks());
  const int64_t worst = report.worstRow * int64_t(report.cols) + report.worstCol;
  bool worstMarked = false;
  for (int i = 0; i < marks->dataCount(); ++i) {
    const auto col = std::llround(marks->data()->at(i)->key * double(report.tileCols) - 0.5);
    const auto r = std::llround(marks->data()->at(i)->value * double(report.tileRows) - 0.5);
    const int64_t at = r * int64_t(report.cols) + col;
    QCOMPARE((at - worst) % 16, int64_t(0));
    worstMarked = worstMarked || at == worst;
  }
  QVERIFY(worstMarked);
  QVERIFY(panel->mapPlot()->savePng(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/errorviews-index-error.png"), 600, 400));
  // a verdict without such evidence clears the marks: fc3's forward under tile-edge is exact or
  // differs only in summation order, depending on how this CPU's OpenBLAS blocks the golden GEMM
  int plain = verdictRow(QStringLiteral("exact"), QString());
  if (plain < 0) plain = verdictRow(QStringLiteral("accumulation_order"), QString());
  QVERIFY(plain >= 0);
  QVERIFY(!m->index(plain, 3).data().toString().contains(QStringLiteral("repeat every")));
  verdicts->setCurrentIndex(m->index(plain, 0));
  QVERIFY(peat::testsupport::settle(*window_));
  QCOMPARE(panel->patternMarks(), 0);
}

// One call under two kernels (the fp16 replay and the bit-flip replay), side by side.
void TestErrorViews::comparesTwoKernelsSideBySide() {
  auto* selection = window_->sessionTree()->selectionModel();
  selection->setCurrentIndex(callIndex(0, 0), QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  QVERIFY(peat::testsupport::settle(*window_));
  QVERIFY(!window_->compareSelected());  // one call and no second session: not a pair
  QVERIFY(window_->lastError().contains(QStringLiteral("select two")));
  selection->select(callIndex(0, 0, QStringLiteral("flips")), QItemSelectionModel::Select | QItemSelectionModel::Rows);
  QVERIFY(peat::testsupport::settle(*window_));
  guiThreadReads = 0;
  peat::store::setSessionAccessObserver(countGuiThreadRead);
  QVERIFY2(window_->compareSelected(), qPrintable(window_->lastError()));
  peat::store::setSessionAccessObserver(nullptr);
  QCOMPARE(guiThreadReads.load(), 0);  // the reports were read in a worker
  peat::views::ComparePanel* compare = window_->comparePanel();
  QVERIFY(compare->hasPair());
  const peat::store::SessionReader reader(session_.toStdString());
  const std::string call = callIndex(0, 0).data(peat::views::SessionTreeModel::PathRole).toString().toStdString();
  const auto fp16 = peat::analyzer::loadCallReport(reader, peat::analyzer::analysisRunOf(reader.summary(), "stored"), call);
  const auto flips = peat::analyzer::loadCallReport(reader, peat::analyzer::analysisRunOf(reader.summary(), "flips"), call);
  QTableWidget* table = compare->table();
  QCOMPARE(table->item(2, 0)->text(), QStringLiteral("max |error|"));
  QCOMPARE(table->item(2, 1)->text().toDouble(), QString::number(fp16.maxAbs, 'g', 6).toDouble());
  QCOMPARE(table->item(2, 2)->text().toDouble(), QString::number(flips.maxAbs, 'g', 6).toDouble());
  QCOMPARE(table->item(5, 1)->text(), QString::fromStdString(fp16.verdict));
  QCOMPARE(table->item(5, 2)->text(), QString::fromStdString(flips.verdict));
  QVERIFY(fp16.verdict != flips.verdict);
  QCOMPARE(table->item(5, 3)->text(), QStringLiteral("differ"));
  // shared axes: the two histograms compare by eye
  QCOMPARE(compare->left()->plot()->xAxis->range().lower, compare->right()->plot()->xAxis->range().lower);
  QCOMPARE(compare->left()->plot()->xAxis->range().upper, compare->right()->plot()->xAxis->range().upper);
  QCOMPARE(compare->left()->plot()->yAxis->range().upper, compare->right()->plot()->yAxis->range().upper);
  // one side's error measure is the other's
  compare->left()->setScale(peat::views::ErrorPlotPanel::Scale::Log2Ulp);
  QCOMPARE(compare->right()->plot()->xAxis->label(), compare->left()->plot()->xAxis->label());
  compare->left()->setScale(peat::views::ErrorPlotPanel::Scale::Log2Abs);
  QVERIFY(withoutHead(window_->currentCsv()).startsWith(QStringLiteral("measure,left,right,right_over_left\nelements,")));
  QVERIFY(window_->grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/compare-kernels.png")));
}

// The selected call here against the same call in a second session.
void TestErrorViews::comparesTwoSessions() {
  QVERIFY(!window_->openCompareSession(dir_.filePath(QStringLiteral("missing.h5"))));
  const QString other = dir_.filePath(QStringLiteral("other.h5"));
  QVERIFY(QFile::copy(session_, other));
  QVERIFY2(window_->openCompareSession(other), qPrintable(window_->lastError()));
  window_->sessionTree()->selectionModel()->setCurrentIndex(callIndex(0, 1), QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  QVERIFY(peat::testsupport::settle(*window_));
  guiThreadReads = 0;
  peat::store::setSessionAccessObserver(countGuiThreadRead);
  QVERIFY2(window_->compareSelected(), qPrintable(window_->lastError()));
  peat::store::setSessionAccessObserver(nullptr);
  QCOMPARE(guiThreadReads.load(), 0);  // both sessions read in a worker
  QTableWidget* table = window_->comparePanel()->table();
  QCOMPARE(table->item(2, 1)->text(), table->item(2, 2)->text());  // the same call in a copy
  QCOMPARE(table->item(2, 3)->text(), QStringLiteral("1"));
  QCOMPARE(table->item(5, 3)->text(), QStringLiteral("same"));
  QVERIFY(window_->comparePanel()->findChildren<QLabel*>().size() >= 2);
  bool namesOther = false;
  for (QLabel* l : window_->comparePanel()->findChildren<QLabel*>()) namesOther = namesOther || l->text().contains(QStringLiteral("other.h5"));
  QVERIFY(namesOther);
}

// A dark desktop palette with the Fusion style reaches the plots as it changes, and back; every
// label, button and list of the window stays readable in it (WCAG contrast of at least 4.5).
void TestErrorViews::followsADarkPalette() {
  const QPalette light = QApplication::palette();
  const QString style = QApplication::style()->name();
  QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
  QPalette dark;
  dark.setColor(QPalette::Window, QColor(0x2b, 0x2b, 0x2b));
  dark.setColor(QPalette::Base, QColor(0x1e, 0x1e, 0x1e));
  dark.setColor(QPalette::AlternateBase, QColor(0x26, 0x26, 0x26));
  dark.setColor(QPalette::Mid, QColor(0x50, 0x50, 0x50));
  dark.setColor(QPalette::Text, QColor(0xe0, 0xe0, 0xe0));
  dark.setColor(QPalette::WindowText, QColor(0xe0, 0xe0, 0xe0));
  dark.setColor(QPalette::Button, QColor(0x35, 0x35, 0x35));
  dark.setColor(QPalette::ButtonText, QColor(0xe0, 0xe0, 0xe0));
  QApplication::setPalette(dark);
  QCoreApplication::processEvents();
  QCustomPlot* plot = window_->errorPlot()->plot();
  const auto corner = [](QCustomPlot* p) { return QColor(p->toPixmap(400, 300).toImage().pixel(3, 3)); };
  QCOMPARE(corner(plot), QColor(0x1e, 0x1e, 0x1e));  // the plot's background is the palette's base
  QCOMPARE(plot->xAxis->tickLabelColor(), QColor(0xe0, 0xe0, 0xe0));
  QCOMPARE(plot->legend->textColor(), QColor(0xe0, 0xe0, 0xe0));
  QCOMPARE(corner(window_->comparePanel()->left()->bitPlot()), QColor(0x1e, 0x1e, 0x1e));
  const auto luminance = [](const QColor& c) {
    auto channel = [](double v) { return v <= 0.03928 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * channel(c.redF()) + 0.7152 * channel(c.greenF()) + 0.0722 * channel(c.blueF());
  };
  const auto contrast = [&](const QColor& a, const QColor& b) {
    const double x = luminance(a), y = luminance(b);
    return (std::max(x, y) + 0.05) / (std::min(x, y) + 0.05);
  };
  QStringList unreadable;
  for (QWidget* w : window_->findChildren<QWidget*>()) {
    if (!w->isVisible()) continue;
    const bool view = qobject_cast<QAbstractItemView*>(w) != nullptr;
    if (!view && !qobject_cast<QLabel*>(w) && !qobject_cast<QAbstractButton*>(w)) continue;
    const QPalette& p = w->palette();
    const QColor fg = view ? p.color(QPalette::Text) : p.color(w->foregroundRole());
    const QColor bg = view ? p.color(QPalette::Base) : p.color(w->backgroundRole());
    if (contrast(fg, bg) < 4.5) unreadable << QString::fromLatin1(w->metaObject()->className()) + QLatin1Char(' ') + w->objectName();
  }
  QVERIFY2(unreadable.isEmpty(), qPrintable(unreadable.join(QStringLiteral(", "))));
  QVERIFY(window_->grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/errorviews-dark.png")));
  QApplication::setStyle(QStyleFactory::create(style));
  QApplication::setPalette(light);
  QCoreApplication::processEvents();
  QCOMPARE(corner(plot), light.color(QPalette::Base));
}

// The keyboard alone: Down in the session tree opens the next call's page; Down in the verdict
// table selects the next verdict's call in the tree and its page.
void TestErrorViews::keyboardWalksCallsAndVerdicts() {
  QVERIFY(peat::testsupport::selectAndSettle(*window_, QStringLiteral("flips")));
  QTreeView* tree = window_->sessionTree();
  const QModelIndex first = callIndex(0, 0, QStringLiteral("flips"));
  tree->setCurrentIndex(first);
  QVERIFY(peat::testsupport::settle(*window_));
  tree->setFocus();
  const QString firstTitle = window_->callPage()->titleText();
  QTest::keyClick(tree, Qt::Key_Down);
  QVERIFY(peat::testsupport::settle(*window_));
  QCOMPARE(tree->currentIndex(), callIndex(0, 1, QStringLiteral("flips")));
  QVERIFY(window_->callPage()->titleText() != firstTitle);
  QVERIFY2(window_->callPage()->titleText().contains(tree->currentIndex().data(SessionTreeModel::PathRole).toString()),
           qPrintable(window_->callPage()->titleText()));
  QTableView* verdicts = window_->verdictTable();
  QVERIFY(verdicts->model()->rowCount() > 2);
  verdicts->setCurrentIndex(verdicts->model()->index(0, 0));
  QVERIFY(peat::testsupport::settle(*window_));
  verdicts->setFocus();
  QTest::keyClick(verdicts, Qt::Key_Down);
  QVERIFY(peat::testsupport::settle(*window_));
  QCOMPARE(verdicts->currentIndex().row(), 1);
  const QString call = verdicts->model()->index(1, 0).data(peat::views::VerdictTableModel::PathRole).toString();
  QCOMPARE(tree->currentIndex().data(SessionTreeModel::PathRole).toString(), call);
  QVERIFY2(window_->callPage()->titleText().contains(call), qPrintable(window_->callPage()->titleText()));
}

// An exported plot keeps what the view drew over it: the bit-flip verdict's framed bit is in the
// PNG (the evidence colour at the framed bar), and the SVG carries its label.
void TestErrorViews::exportKeepsTheEvidence() {
  QVERIFY(peat::testsupport::selectAndSettle(*window_, QStringLiteral("flips")));
  QTableView* verdicts = window_->verdictTable();
  QAbstractItemModel* m = verdicts->model();
  int row = -1;
  for (int r = 0; r < m->rowCount() && row < 0; ++r)
    if (m->index(r, 1).data().toString() == QLatin1String("bit_flip")) row = r;
  QVERIFY(row >= 0);
  verdicts->setCurrentIndex(m->index(row, 0));
  QVERIFY(peat::testsupport::settle(*window_));
  QCustomPlot* bits = window_->callPage()->plots()->bitPlot();
  QCOMPARE(window_->callPage()->plots()->highlightedBit(), 30);
  QString error;
  const QString png = dir_.filePath(QStringLiteral("bits.png")), svg = dir_.filePath(QStringLiteral("bits.svg"));
  QVERIFY2(peat::views::exportPlot(bits, png, &error), qPrintable(error));
  QVERIFY2(peat::views::exportPlot(bits, svg, &error), qPrintable(error));
  const QImage image(png);
  QVERIFY(!image.isNull());
  const QColor evidence = peat::views::palette::evidence();
  int framed = 0;
  for (int y = 0; y < image.height(); ++y)
    for (int x = 0; x < image.width(); ++x) {
      const QColor c = image.pixelColor(x, y);
      framed += std::abs(c.red() - evidence.red()) < 8 && std::abs(c.green() - evidence.green()) < 8 &&
                std::abs(c.blue() - evidence.blue()) < 8;
    }
  QVERIFY2(framed > 50, qPrintable(QString::number(framed)));
  QFile file(svg);
  QVERIFY(file.open(QIODevice::ReadOnly));
  QVERIFY(file.readAll().contains("evidence: bit 30"));
}

// A verdict row chosen, then another call chosen in the tree: the table paints only the shown
// call's rows as selected (the earlier row stayed painted selected: its selection was cleared with
// the selection model's signals blocked, so the view never repainted it).
void TestErrorViews::verdictRowsRepaintWithTheTree() {
  QVERIFY(peat::testsupport::selectAndSettle(*window_, QStringLiteral("flips")));
  QTableView* verdicts = window_->verdictTable();
  QAbstractItemModel* m = verdicts->model();
  QVERIFY(m->rowCount() > 2);
  const QString firstCall = m->index(0, 0).data(peat::views::VerdictTableModel::PathRole).toString();
  int other = -1;  // a row of another call
  for (int r = 1; r < m->rowCount() && other < 0; ++r)
    if (m->index(r, 0).data(peat::views::VerdictTableModel::PathRole).toString() != firstCall) other = r;
  QVERIFY(other > 0);
  QTreeView* tree = window_->sessionTree();
  verdicts->setCurrentIndex(m->index(other, 0));  // the tree node of the other call: where the table takes it
  QVERIFY(peat::testsupport::settle(*window_));
  const QPersistentModelIndex node = tree->currentIndex();
  QCOMPARE(node.data(SessionTreeModel::PathRole).toString(), m->index(other, 0).data(peat::views::VerdictTableModel::PathRole).toString());
  verdicts->setCurrentIndex(m->index(0, 0));
  QVERIFY(peat::testsupport::settle(*window_));
  // the view repaints the rows the selection model says changed: row 0 must be among them
  QSignalSpy changed(verdicts->selectionModel(), &QItemSelectionModel::selectionChanged);
  tree->setCurrentIndex(node);
  QVERIFY(peat::testsupport::settle(*window_));
  QVERIFY(!verdicts->selectionModel()->isRowSelected(0, {}));
  QVERIFY(verdicts->selectionModel()->isRowSelected(other, {}));
  bool toldDeselected = false, toldSelected = false;
  for (const QList<QVariant>& signal : changed) {
    toldSelected = toldSelected || signal.at(0).value<QItemSelection>().contains(m->index(other, 0));
    toldDeselected = toldDeselected || signal.at(1).value<QItemSelection>().contains(m->index(0, 0));
  }
  QVERIFY2(toldDeselected && toldSelected, "the table view was not told which rows' selection changed");
}

// A note in a plot (nothing selected) is wrapped to the plot's width, whatever the dock's width (it
// was one line, cut at both ends); a blank panel no longer keeps the last call's counts' axis.
void TestErrorViews::notesFitANarrowDock() {
  peat::views::ErrorPlotPanel panel;
  panel.resize(260, 300);
  panel.show();
  QVERIFY(QTest::qWaitForWindowExposed(&panel));
  panel.bitPlot()->yAxis->setRange(0, 60000);  // as a call's counts left it
  panel.mapPlot()->xAxis->setLabel(QStringLiteral("tile column (16 columns each; output seen as 1024 x 100)"));  // and its map
  const QString text = QStringLiteral("No call is selected: select an analysed call in the session tree, and its page opens here");
  panel.showMessage(text);
  panel.plot()->replot();
  QCOMPARE(panel.bitPlot()->yAxis->range().upper, 1.0);
  QVERIFY(panel.mapPlot()->xAxis->label().isEmpty());  // no tile map's words left from a call
  QCPItemText* note = nullptr;
  for (int i = 0; i < panel.plot()->itemCount(); ++i)
    if (auto* t = qobject_cast<QCPItemText*>(panel.plot()->item(i))) note = t;
  QVERIFY(note);
  const QStringList lines = note->text().split(QLatin1Char('\n'));
  QVERIFY2(lines.size() > 1, qPrintable(note->text()));
  QCOMPARE(lines.join(QLatin1Char(' ')), text);
  const QFontMetrics metrics(note->font());
  for (const QString& line : lines)
    QVERIFY2(metrics.horizontalAdvance(line) <= panel.plot()->axisRect()->width(), qPrintable(line));
  // wider: fewer lines
  panel.resize(900, 300);
  QTest::qWait(50);
  panel.plot()->replot();
  QVERIFY2(note->text().split(QLatin1Char('\n')).size() < lines.size(), qPrintable(note->text()));
  // a call's Where map and bit span in the narrow dock: the map's x label takes the longest of its
  // forms that fits in one line, the span's label wraps inside the plot; wide, both are whole
  peat::analyzer::StoredCallReport r;
  r.call = "iterations/000000/calls/000003";
  r.elements = 102400, r.mismatched = 448, r.maxAbs = 0.5, r.meanAbs = 0.01, r.p99 = 0.25;
  r.log2AbsFirstBin = -12, r.log2Abs = {100, 200, 148};
  r.log2Ulp.assign(33, 0), r.log2Ulp[16] = 448;
  r.bitMismatch.assign(32, 0);
  for (int b = 0; b < 16; ++b) r.bitMismatch[std::size_t(b)] = 400 - uint64_t(b);
  r.rows = 1024, r.cols = 100, r.tileRows = 16, r.tileCols = 16, r.tilesDown = 64, r.tilesAcross = 7;
  r.tileMismatch.assign(64 * 7, 1);
  r.worstRow = 10, r.worstCol = 20;
  r.verdict = "stride_error";  // the histogram's legend: "iterations/000000/calls/000003 (stride_error)"
  const QString longLabel = QStringLiteral("tile column (16 columns each; output seen as 1024 x 100)");
  const QString span = QStringLiteral("bits bf16 does not keep (0-15)");
  const auto fits = [](QCustomPlot* plot, const QString& words, const QFont& font) {
    for (const QString& line : words.split(QLatin1Char('\n')))
      if (QFontMetrics(font).horizontalAdvance(line) > plot->axisRect()->width()) return false;
    return true;
  };
  const auto spanText = [&panel]() -> QCPItemText* {
    for (int i = 0; i < panel.bitPlot()->itemCount(); ++i)
      if (auto* t = qobject_cast<QCPItemText*>(panel.bitPlot()->item(i))) return t;
    return nullptr;
  };
  // a legend's items all inside the plot (the legend below it takes fewer columns when narrow)
  const auto legendFits = [](QCustomPlot* plot) {
    const std::vector<QCPAbstractLegendItem*> items = peat::views::legendItems(plot->legend);
    if (items.empty()) return false;
    for (QCPAbstractLegendItem* legendItem : items) {
      const QRect item = legendItem->outerRect();
      if (item.left() < 0 || item.right() > plot->width() || item.bottom() > plot->height()) return false;
      if (item.width() < legendItem->minimumOuterSizeHint().width()) return false;  // its text cut short
    }
    return true;
  };
  auto* tabs = panel.findChild<QTabWidget*>();
  QVERIFY(tabs && tabs->indexOf(panel.mapPlot()) >= 0);
  const auto showMap = [&] {  // the Where tab in front, laid out and drawn
    tabs->setCurrentWidget(panel.mapPlot());
    QTest::qWait(50);
    panel.mapPlot()->replot();
    return panel.mapPlot()->xAxis->label();
  };
  panel.resize(360, 300);
  QTest::qWait(50);
  panel.showReports({r});
  const QString narrowLabel = showMap();
  QVERIFY2(narrowLabel.startsWith(QStringLiteral("tile column")) && narrowLabel != longLabel, qPrintable(narrowLabel));
  QVERIFY2(fits(panel.mapPlot(), narrowLabel, panel.mapPlot()->xAxis->labelFont()), qPrintable(narrowLabel));
  QCOMPARE(panel.mapPlot()->yAxis->label(), QStringLiteral("tile row"));  // the map is short here too
  QTRY_VERIFY2(legendFits(panel.mapPlot()), "the Where map's legend is cut at 360 px");
  QCPColorScale* scale = nullptr;  // its label along the short map: the form that fits
  for (int i = 0; i < panel.mapPlot()->plotLayout()->elementCount(); ++i)
    if (auto* s = qobject_cast<QCPColorScale*>(panel.mapPlot()->plotLayout()->elementAt(i))) scale = s;
  QVERIFY(scale);
  QVERIFY2(QFontMetrics(scale->axis()->labelFont()).horizontalAdvance(scale->axis()->label()) <=
               panel.mapPlot()->axisRect()->height(),
           qPrintable(scale->axis()->label()));
  QVERIFY(panel.grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/errorviews-narrow-where.png")));
  panel.resize(260, 300);
  panel.highlightBitSpan(0, 15, span);  // brings the Bits tab to the front
  QTest::qWait(50);
  panel.bitPlot()->replot();
  QVERIFY(spanText());
  QVERIFY2(spanText()->text().contains(QLatin1Char('\n')), qPrintable(spanText()->text()));
  QCOMPARE(spanText()->text().split(QLatin1Char('\n')).join(QLatin1Char(' ')), span);
  QVERIFY2(fits(panel.bitPlot(), spanText()->text(), spanText()->font()), qPrintable(spanText()->text()));
  QTRY_VERIFY2(legendFits(panel.bitPlot()), "the Bits plot's legend is cut at 260 px");
  // the histogram's legend names the call: too long for 260 px, shortened with an ellipsis
  QTRY_VERIFY2(legendFits(panel.plot()), "the histogram's legend is cut at 260 px");
  const QString shortName = panel.plot()->plottable(0)->name();
  QVERIFY2(shortName.endsWith(QChar(0x2026)), qPrintable(shortName));
  QVERIFY(QStringLiteral("iterations/000000/calls/000003 (stride_error)").startsWith(shortName.chopped(1)));
  {  // the shortened name whole in its entry's tooltip; none over the data
    const QPoint at = peat::views::legendItems(panel.plot()->legend).front()->outerRect().center();
    QHelpEvent over(QEvent::ToolTip, at, panel.plot()->mapToGlobal(at));
    QApplication::sendEvent(panel.plot(), &over);
    QTRY_COMPARE(QToolTip::text(), QStringLiteral("iterations/000000/calls/000003 (stride_error)"));
    QCOMPARE(peat::views::shortenedLegendNameAt(panel.plot(), panel.plot()->axisRect()->rect().center()), QString());
    QToolTip::hideText();
  }
  const int narrowColumns = panel.bitPlot()->legend->wrap();
  const int bitItems = int(peat::views::legendItems(panel.bitPlot()->legend).size());
  QVERIFY2(narrowColumns < bitItems, "the Bits legend is in one row at 260 px");
  QVERIFY(panel.grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/errorviews-narrow-bits.png")));
  panel.resize(900, 300);
  QTest::qWait(50);
  panel.bitPlot()->replot();
  QCOMPARE(spanText()->text(), span);
  QTRY_COMPARE(panel.bitPlot()->legend->wrap(), std::min(4, bitItems));  // wide: one row again
  QTRY_VERIFY2(panel.plot()->plottable(0)->name().endsWith(QStringLiteral("000003 (stride_error)")),
               qPrintable(panel.plot()->plottable(0)->name()));  // and the whole name back
  QVERIFY(legendFits(panel.bitPlot()));
  QCOMPARE(showMap(), longLabel);
}

QTEST_MAIN(TestErrorViews)
#include "tst_errorviews.moc"
