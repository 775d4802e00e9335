// SPDX-License-Identifier: MIT
// The main window, headless: opens a session, shows it, refuses bad files without losing the
// open one, and renders to a PNG under the build tree for people to look at.
#include "views/qcustomplot_include.h"  // first: see the header

#include <QDialog>
#include <QVBoxLayout>
#include <QtTest>

#include "tests/gui/settle.h"

#include <QDockWidget>
#include <QAbstractScrollArea>
#include <QAbstractSpinBox>
#include <QComboBox>
#include <QTabBar>
#include <QTabWidget>
#include <QMenuBar>
#include <QTableView>
#include <QThread>
#include <QLineEdit>
#include <QMimeData>
#include <QElapsedTimer>
#include <QProcess>
#include <QSignalSpy>
#include <QLabel>
#include <QStatusBar>
#include <cstdio>
#include <functional>

#include <atomic>
#include <climits>
#include <cmath>
#include <numeric>

#include "core/fp/format.h"
#include "core/store/h5.h"
#include "core/store/session.h"
#include "views/bitexplorer.h"
#include "views/errorplotpanel.h"
#include "views/verdicttablemodel.h"

#include "tests/support/sample_session.h"
#include "views/mainwindow.h"
#include "views/curvepanel.h"
#include "views/pageexport.h"
#include "views/savepanel.h"
#include "views/callpage.h"
#include "views/sessiontreemodel.h"
#include "tests/support/tooltips.h"

using peat::views::MainWindow;

class TestMainWindow : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void hasMenusAndDocks();
  void opensSessionAndRenders();
  void badFileKeepsCurrentSession();
  void recentSessionsAreRemembered();
  void dropsSessionsAndTensors();
  void callTensorsLoadOnDemand();
  void comparedElementOpensInBitExplorer();
  void historyGoesBackAndForward();
  void fitsSmallScreens_data();
  void fitsSmallScreens();
  void bitExplorerReadsBitPatterns();
  void exportsTakeWhatWasUsedAndNameIt();
  void sessionReplacedOnDisk();
  void runDeletedInPlace();
  void smallScreenIsSaid();

 private:
  QTemporaryDir dir_;
  QString sample_;
};

void TestMainWindow::initTestCase() {
  QStandardPaths::setTestModeEnabled(true);  // QSettings go to a test location
  QSettings().clear();
  QVERIFY(dir_.isValid());
  sample_ = dir_.filePath(QStringLiteral("sample.h5"));
  peat::testsupport::writeSampleSession(sample_.toStdString());
}

void TestMainWindow::hasMenusAndDocks() {
  MainWindow w;
  QStringList menus;
  for (QAction* a : w.menuBar()->actions()) menus << a->text();
  QCOMPARE(menus, (QStringList{QStringLiteral("&File"), QStringLiteral("&Edit"), QStringLiteral("&Compare"), QStringLiteral("&Run"), QStringLiteral("&Tools"), QStringLiteral("&Go"), QStringLiteral("&View"), QStringLiteral("&Help")}));
  QStringList docks;
  for (QDockWidget* d : w.findChildren<QDockWidget*>()) docks << d->objectName();
  docks.sort();
  QCOMPARE(docks, (QStringList{QStringLiteral("DevicesDock"), QStringLiteral("ErrorPlotDock"), QStringLiteral("ExplainDock"),
                               QStringLiteral("RunDock"), QStringLiteral("SessionDock"), QStringLiteral("VerdictDock")}));
}

void TestMainWindow::opensSessionAndRenders() {
  MainWindow w;
  w.setQuietErrors(true);
  w.resize(1400, 860);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  // the probe, the structure and the first verdicts are read off the GUI thread
  guiThreadReads = 0;
  peat::store::setSessionAccessObserver(countGuiThreadRead);
  QVERIFY(w.openSession(sample_));
  peat::store::setSessionAccessObserver(nullptr);
  QCOMPARE(guiThreadReads.load(), 0);
  QCOMPARE(w.verdictModel()->rowCount(), 2);  // the first run's verdicts, read with it
  QCOMPARE(w.sessionModel()->rowCount(), 2);
  bool saveSaysWhatToSelect = false;  // its items are SAVE analyses and layers, not calls
  for (const QLabel* l : w.savePanel()->findChildren<QLabel*>())
    saveSaysWhatToSelect = saveSaysWhatToSelect || l->text().startsWith(QStringLiteral("Select a SAVE analysis or one of its layers"));
  QVERIFY(saveSaysWhatToSelect);
  QVERIFY(w.windowTitle().startsWith(QStringLiteral("sample.h5")));
  QVERIFY(w.verdictTable());
  QTest::qWait(100);

  const QImage shot = w.grab().toImage();
  QCOMPARE(shot.width(), w.width() * int(shot.devicePixelRatio()));
  QSet<QRgb> colours;
  for (int y = 0; y < shot.height(); y += 7)
    for (int x = 0; x < shot.width(); x += 7) colours.insert(shot.pixel(x, y));
  QVERIFY2(colours.size() > 10, "the rendered window is nearly blank");
  const QString out = QStringLiteral(PEAT_TEST_OUTPUT_DIR "/mainwindow-offscreen.png");
  QVERIFY(shot.save(out));
  qInfo("rendered %s", qPrintable(out));
}

void TestMainWindow::badFileKeepsCurrentSession() {
  MainWindow w;
  w.setQuietErrors(true);
  QVERIFY(w.openSession(sample_));
  const QString junk = dir_.filePath(QStringLiteral("junk.h5"));
  QFile f(junk);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write("junk");
  f.close();
  QVERIFY(!w.openSession(junk));
  QVERIFY(w.lastError().contains(QStringLiteral("not an HDF5 file")));
  QCOMPARE(w.sessionPath(), sample_);
  QCOMPARE(w.sessionModel()->rowCount(), 2);
  QVERIFY(!w.openSession(dir_.filePath(QStringLiteral("missing.h5"))));
  QCOMPARE(w.sessionPath(), sample_);
}

void TestMainWindow::recentSessionsAreRemembered() {
  {
    MainWindow w;
    w.setQuietErrors(true);
    QVERIFY(w.openSession(sample_));
  }
  const QStringList recent = QSettings().value(QStringLiteral("session/recent")).toStringList();
  QVERIFY(!recent.isEmpty());
  QCOMPARE(recent.first(), QFileInfo(sample_).absoluteFilePath());
}

namespace {
// A little-endian fp32 .npy file of one dimension.
void writeNpy(const QString& path, const std::vector<float>& v) {
  QByteArray header = QStringLiteral("{'descr': '<f4', 'fortran_order': False, 'shape': (%1,), }").arg(v.size()).toLatin1();
  while ((10 + header.size() + 1) % 64) header.append(' ');
  header.append('\n');
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  const char magic[] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  f.write(magic, 8);
  const quint16 len = quint16(header.size());
  f.write(reinterpret_cast<const char*>(&len), 2);
  f.write(header);
  f.write(reinterpret_cast<const char*>(v.data()), qint64(v.size() * sizeof(float)));
}
}  // namespace

// Dropped files: two tensors are compared (the candidate rounded to bf16 reads as precision
// loss), one tensor waits for the other, a session opens, anything else is refused.
void TestMainWindow::dropsSessionsAndTensors() {
  struct Droppable : MainWindow {
    using MainWindow::dropEvent;  // the handler, called as Qt calls it on a drop
  } w;
  w.setQuietErrors(true);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  std::vector<float> golden(4096), candidate(4096);
  for (std::size_t i = 0; i < golden.size(); ++i) {
    golden[i] = std::sin(float(i) * 0.37f) * 3.0f + 0.001f * float(i);
    candidate[i] = peat::fp::roundTo(peat::fp::kBf16, golden[i]);
  }
  const QString g = dir_.filePath(QStringLiteral("golden.npy")), c = dir_.filePath(QStringLiteral("bf16.npy"));
  writeNpy(g, golden);
  writeNpy(c, candidate);
  QSignalSpy shown(&w, &MainWindow::comparisonShown), detected(&w, &MainWindow::comparisonDetected);
  QVERIFY(w.openFiles({g, c}));  // off the GUI thread: the histograms, then the verdict
  QVERIFY(detected.wait(30000));
  QCOMPARE(shown.count(), 1);
  QCOMPARE(w.errorPlot()->reportCount(), 1);
  QVERIFY(w.statusBar()->currentMessage().contains(QStringLiteral("precision_loss")));
  // the same pair as two datasets of one HDF5 file, named as the CLI names them (FILE.h5:/dataset)
  const QString h5 = dir_.filePath(QStringLiteral("pair.h5"));
  {
    const peat::h5::Lock lock;
    peat::h5::File f(lock, h5.toStdString(), peat::h5::File::Mode::Truncate);
    f.root().createDataset("golden", peat::h5::Type::F32, {golden.size()}, golden.data());
    f.root().createDataset("candidate", peat::h5::Type::F32, {candidate.size()}, candidate.data());
  }
  QVERIFY(w.openFiles({h5 + QStringLiteral(":/golden"), h5 + QStringLiteral(":/candidate")}));
  QVERIFY(detected.wait(30000));
  QCOMPARE(shown.count(), 2);
  QVERIFY(w.statusBar()->currentMessage().contains(QStringLiteral("precision_loss")));
  // one at a time, as two drops: the first waits for the second
  QVERIFY(w.openFiles({g}));
  QVERIFY(w.statusBar()->currentMessage().contains(QStringLiteral("now drop the candidate")));
  // a real drop event, carrying the candidate
  auto* mime = new QMimeData;
  mime->setUrls({QUrl::fromLocalFile(c)});
  QDropEvent drop(QPointF(10, 10), Qt::CopyAction, mime, Qt::LeftButton, Qt::NoModifier);
  w.dropEvent(&drop);
  QVERIFY2(drop.isAccepted(), qPrintable(w.lastError() + QStringLiteral(" / ") + w.statusBar()->currentMessage()));
  QVERIFY(detected.wait(30000));
  QVERIFY(w.statusBar()->currentMessage().contains(QStringLiteral("precision_loss")));
  delete mime;
  // mismatched shapes are refused with the reason; a session opens
  writeNpy(dir_.filePath(QStringLiteral("short.npy")), std::vector<float>(10, 1.0f));
  QVERIFY(w.openFiles({g, dir_.filePath(QStringLiteral("short.npy"))}));
  QTRY_VERIFY_WITH_TIMEOUT(w.lastError().contains(QStringLiteral("shapes differ")), 30000);
  QVERIFY(!w.openFiles({dir_.filePath(QStringLiteral("notes.txt"))}));
  QVERIFY(w.openFiles({sample_}));
  QCOMPARE(w.sessionPath(), sample_);
}

// The window opens sessions without their tensor lists; a call's tooltip reads its own, in a
// worker: the first answer (on the GUI thread) says they are being read, then the tooltip is whole
// and the model says so.
void TestMainWindow::callTensorsLoadOnDemand() {
  MainWindow w;
  w.setQuietErrors(true);
  QVERIFY(w.openSession(sample_));
  QVERIFY(w.sessionModel()->summary().runs.front().iterations.at(1).calls.at(3).tensors.empty());
  const QModelIndex call = w.sessionModel()->index(3, 0, w.sessionModel()->index(1, 0, w.sessionModel()->index(0, 0)));
  QCOMPARE(call.data().toString(), QStringLiteral("#3 fc3"));
  QSignalSpy read(w.sessionModel(), &peat::views::SessionTreeModel::toolTipRead);
  const QString first = call.data(Qt::ToolTipRole).toString();
  QVERIFY2(peat::testsupport::toolTipReading(first), qPrintable(first));
  QVERIFY(!first.contains(QStringLiteral("input_0")));
  const QString whole = peat::testsupport::wholeToolTip(call);
  QVERIFY2(whole.contains(QStringLiteral("input_0 float32[64x128]")), qPrintable(whole));
  QCOMPARE(read.count(), 1);
  QCOMPARE(read.front().front().value<QModelIndex>(), call);
  // the tree made again (a session opened) while a read is in flight: its result, for a node that is
  // gone, is dropped; the new tree reads its own
  const QModelIndex other = w.sessionModel()->index(2, 0, w.sessionModel()->index(1, 0, w.sessionModel()->index(0, 0)));
  QVERIFY(peat::testsupport::toolTipReading(other.data(Qt::ToolTipRole).toString()));
  const peat::store::SessionSummary summary = w.sessionModel()->summary();
  w.sessionModel()->setSummary(summary);  // no event ran since the read started
  QTest::qWait(300);
  QCOMPARE(read.count(), 1);
  const QModelIndex again = w.sessionModel()->index(2, 0, w.sessionModel()->index(1, 0, w.sessionModel()->index(0, 0)));
  QVERIFY(!peat::testsupport::wholeToolTip(again).isEmpty());
}

// A click on a tile of a compared pair's Where map opens the tile's worst element in the bit
// explorer: its golden value, the candidate's differing bit framed, and the block of each
// block-scaled format it belongs to, with the block's amax and MX scale computed here by hand.
void TestMainWindow::comparedElementOpensInBitExplorer() {
  MainWindow w;
  w.setQuietErrors(true);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  std::vector<float> golden(4096), candidate;
  for (std::size_t i = 0; i < golden.size(); ++i) golden[i] = std::sin(float(i) * 0.37f) * (1.0f + float(i % 97) / 10.0f);
  candidate = golden;
  candidate[1000] = peat::fp::floatOf(peat::fp::bitsOf(golden[1000]) ^ (1u << 27));  // the tile's worst element
  candidate[1003] = std::nextafter(golden[1003], 100.0f);                            // a one-ULP change beside it
  const QString g = dir_.filePath(QStringLiteral("g-explore.npy")), c = dir_.filePath(QStringLiteral("c-explore.npy"));
  writeNpy(g, golden);
  writeNpy(c, candidate);
  QSignalSpy detected(&w, &MainWindow::comparisonDetected);
  QVERIFY(w.openFiles({g, c}));
  QVERIFY(detected.wait(30000));
  const peat::analyzer::StoredCallReport* r = w.errorPlot()->firstReport();
  QVERIFY(r);
  QCOMPARE(r->tileCols, uint64_t(16));  // a [4096] tensor: one row of tiles 16 wide
  // the pair's page at the centre: its verdict (one flipped bit beside a one-ULP change) with the
  // bit framed, and the two tensors side by side (the largest |x| computed here)
  QCOMPARE(qobject_cast<QTabWidget*>(w.centralWidget())->currentWidget(), static_cast<QWidget*>(w.callPage()));
  QVERIFY2(w.callPage()->detailsText().contains(QStringLiteral("Verdict: bit_flip")), qPrintable(w.callPage()->detailsText()));
  QCOMPARE(w.callPage()->plots()->highlightedBit(), 27);
  QCOMPARE(w.errorPlot()->highlightedBit(), 27);  // the dock draws the evidence too
  {
    float ga = 0, ca = 0;
    for (float v : golden) ga = std::max(ga, std::fabs(v));
    for (float v : candidate) ca = std::max(ca, std::fabs(v));
    const QString details = w.callPage()->detailsText();
    QVERIFY2(details.contains(QStringLiteral("Golden and candidate")) && details.contains(QString::number(double(ga), 'g', 6)) &&
                 details.contains(QString::number(double(ca), 'g', 6)),
             qPrintable(details));
  }
  emit w.errorPlot()->tileClicked(0, 1000 / 16);
  // linked: the histogram overlays the tile's own (its two mismatches: columns 1000 and 1003)
  QCOMPARE(w.errorPlot()->reportCount(), 2);
  {
    uint64_t inTile = 0;
    for (const QString& l : w.errorPlot()->csv().split(QLatin1Char('\n')))
      if (l.startsWith(QStringLiteral("tile r0 c62,log2_abs,"))) inTile += l.section(QLatin1Char(','), 3, 3).toULongLong();
    QCOMPARE(inTile, uint64_t(2));
  }
  peat::views::BitExplorer* x = w.bitExplorer();
  QVERIFY(x);
  QCOMPARE(x->referenceValue(), golden[1000]);
  QCOMPARE(x->differingBits(), uint32_t(1) << 27);
  QVERIFY2(x->contextText().contains(QStringLiteral("[0, 1000]")), qPrintable(x->contextText()));
  QVERIFY(x->contextText().contains(QStringLiteral("bits that differ (framed): 27")));
  // MXFP4: block 31 holds columns 992-1023; its scale is 2^(floor(log2 amax) - 2)
  float amax = 0;
  for (int i = 992; i < 1024; ++i) amax = std::max(amax, std::fabs(golden[std::size_t(i)]));
  const int exponent = int(std::floor(std::log2(double(amax)))) - 2;
  const QString line = x->blocksText().split(QLatin1Char('\n')).filter(QStringLiteral("mxfp4 ")).value(0);
  QVERIFY2(line.contains(QStringLiteral("block 31 (columns 992-1023)")), qPrintable(x->blocksText()));
  QVERIFY2(line.contains(QStringLiteral("amax %1,").arg(QString::number(double(amax), 'g', 9))), qPrintable(line));
  QVERIFY2(line.contains(QStringLiteral("scale 2^%1 ").arg(exponent)), qPrintable(line));
  x->window()->resize(900, 560);
  QVERIFY(x->window()->grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/bitexplorer-pair.png")));
  // grouped by MXFP4's blocks: both mismatches (columns 1000 and 1003) fall in block 31, and a click
  // on it opens the worse of the two
  QSignalSpy regrouped(&w, &MainWindow::comparisonRegrouped);
  w.errorPlot()->requestGrouping(1);
  QVERIFY(regrouped.wait(30000));
  const peat::analyzer::StoredCallReport* blocks = w.errorPlot()->firstReport();
  QCOMPARE(blocks->tileRows, uint64_t(1));
  QCOMPARE(blocks->tileCols, uint64_t(32));
  QCOMPARE(blocks->tilesAcross, uint64_t(4096 / 32));
  QCOMPARE(blocks->tileMismatch.at(31), uint64_t(2));
  QCOMPARE(std::accumulate(blocks->tileMismatch.begin(), blocks->tileMismatch.end(), uint64_t(0)), uint64_t(2));
  QVERIFY(w.errorPlot()->mapPlot()->xAxis->label().contains(QStringLiteral("block along the row")));
  QVERIFY(w.errorPlot()->mapPlot()->savePng(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/where-blocks.png"), 700, 260));
  // linked: bit 27's bar shows on the Where map only the elements where bit 27 differs (element
  // 1000; element 1003's one-ULP change is in low bits), and a second click shows all mismatches again
  emit w.errorPlot()->bitClicked(27);
  QCOMPARE(w.errorPlot()->mapBit(), 27);
  QCOMPARE(w.errorPlot()->highlightedBit(), 27);
  QCOMPARE(w.errorPlot()->mapCounts().size(), blocks->tileMismatch.size());
  QCOMPARE(w.errorPlot()->mapCounts().at(31), uint64_t(1));
  QCOMPARE(std::accumulate(w.errorPlot()->mapCounts().begin(), w.errorPlot()->mapCounts().end(), uint64_t(0)), uint64_t(1));
  emit w.errorPlot()->bitClicked(0);  // the one-ULP change's lowest bit: element 1003
  QCOMPARE(w.errorPlot()->mapBit(), 0);
  QCOMPARE(w.errorPlot()->mapCounts().at(31), uint64_t((peat::fp::bitsOf(golden[1003]) ^ peat::fp::bitsOf(candidate[1003])) & 1u));
  emit w.errorPlot()->bitClicked(0);
  QCOMPARE(w.errorPlot()->mapBit(), -1);
  // a histogram bar: the bit flip's error (|g| times 2^16 or 2^-16 off) sits in one bin, alone
  const double flipError = std::fabs(double(candidate[1000]) - double(golden[1000]));
  const int bin = int(std::floor(std::log2(flipError)));
  emit w.errorPlot()->binClicked(bin);
  QCOMPARE(w.errorPlot()->mapBin(), bin);
  QCOMPARE(w.errorPlot()->mapCounts().at(31), uint64_t(1));
  QCOMPARE(std::accumulate(w.errorPlot()->mapCounts().begin(), w.errorPlot()->mapCounts().end(), uint64_t(0)), uint64_t(1));
  emit w.errorPlot()->binClicked(bin);
  QCOMPARE(w.errorPlot()->mapBin(), INT_MIN);
  // a range of bars, by clicking one and shift-clicking another on the histogram itself: the
  // one-ULP change's bar up to the flip's holds both elements
  const int ulpBin = int(std::floor(std::log2(std::fabs(double(candidate[1003]) - double(golden[1003])))));
  QCustomPlot* histogram = w.errorPlot()->plot();
  const auto clickBar = [&](int b, Qt::KeyboardModifiers modifiers) {
    const QPoint at(int(histogram->xAxis->coordToPixel(b)), histogram->axisRect()->center().y());
    QTest::mouseClick(histogram, Qt::LeftButton, modifiers, at);
  };
  clickBar(bin, Qt::NoModifier);
  QCOMPARE(w.errorPlot()->mapBin(), bin);
  clickBar(ulpBin, Qt::ShiftModifier);
  QCOMPARE(w.errorPlot()->mapBin(), ulpBin);
  QCOMPARE(w.errorPlot()->mapBinLast(), bin);
  QCOMPARE(w.errorPlot()->mapCounts().at(31), uint64_t(2));
  QCOMPARE(std::accumulate(w.errorPlot()->mapCounts().begin(), w.errorPlot()->mapCounts().end(), uint64_t(0)), uint64_t(2));
  // ... and their bit positions over the Bits plot: bit 27 of one, the one-ULP change's bits of the other
  {
    std::vector<uint64_t> want(32, 0);
    for (int e : {1000, 1003}) {
      const uint32_t d = peat::fp::bitsOf(golden[std::size_t(e)]) ^ peat::fp::bitsOf(candidate[std::size_t(e)]);
      for (int b = 0; b < 32; ++b) want[std::size_t(b)] += (d >> b) & 1u;
    }
    QCOMPARE(w.errorPlot()->selectionBits(), want);
  }
  emit w.errorPlot()->binClicked(ulpBin, bin);  // the same range again: all mismatches
  QCOMPARE(w.errorPlot()->mapBin(), INT_MIN);
  QVERIFY(w.errorPlot()->selectionBits().empty());
  x->setValue(0.0f);
  emit w.errorPlot()->tileClicked(0, 31);
  QCOMPARE(x->referenceValue(), golden[1000]);
  // a tile whose elements are all identical opens nothing and says so
  emit w.errorPlot()->tileClicked(0, 0);
  QVERIFY(w.statusBar()->currentMessage().contains(QStringLiteral("bit-identical")));
  QCOMPARE(x->referenceValue(), golden[1000]);
  // typing a value drops the pair and the blocks
  x->clearContexts();
  QCOMPARE(x->differingBits(), uint32_t(0));
  QVERIFY(x->blocksText().isEmpty());
}

// Go > Back and Forward walk the calls selected in the tree, as a browser walks pages (the runs and
// iterations selected between them are no steps); selecting a new call drops the forward history;
// opening a session starts a new one.
void TestMainWindow::historyGoesBackAndForward() {
  MainWindow w;
  w.setQuietErrors(true);
  QVERIFY(w.openSession(sample_));
  QTreeView* tree = w.findChild<QTreeView*>();
  QVERIFY(tree);
  const QModelIndex iteration = w.sessionModel()->index(1, 0, w.sessionModel()->index(0, 0));
  const QModelIndex a = w.sessionModel()->index(3, 0, iteration), b = w.sessionModel()->index(2, 0, iteration),
                    c = w.sessionModel()->index(1, 0, iteration);
  auto select = [&](const QModelIndex& i) {
    tree->selectionModel()->setCurrentIndex(i, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    QVERIFY(peat::testsupport::settle(w));
  };
  QAction* back = nullptr;
  for (QAction* action : w.findChildren<QAction*>())
    if (action->text() == QStringLiteral("&Back")) back = action;
  QVERIFY(back);
  QCOMPARE(back->shortcut(), QKeySequence(Qt::ALT | Qt::Key_Left));
  QVERIFY(!back->isEnabled());
  select(a);
  select(iteration);  // a run or an iteration between two calls is no step of the history
  select(w.sessionModel()->index(0, 0));
  select(b);
  QVERIFY(back->isEnabled());
  // the keys themselves, as a user presses them (bound once each: a key bound twice does nothing)
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  tree->setFocus();
  QTest::keyClick(tree, Qt::Key_Left, Qt::AltModifier);
  QVERIFY(peat::testsupport::settle(w));
  QCOMPARE(tree->selectionModel()->currentIndex(), a);
  QTest::keyClick(tree, Qt::Key_Right, Qt::AltModifier);
  QVERIFY(peat::testsupport::settle(w));
  QCOMPARE(tree->selectionModel()->currentIndex(), b);
  // and the mouse's back and forward buttons
  QTest::mouseClick(tree->viewport(), Qt::BackButton);
  QCOMPARE(tree->selectionModel()->currentIndex(), a);
  QTest::mouseClick(tree->viewport(), Qt::ForwardButton);
  QCOMPARE(tree->selectionModel()->currentIndex(), b);
  back->trigger();
  QCOMPARE(tree->selectionModel()->currentIndex(), a);
  QVERIFY(!w.goBack());  // the first page
  QVERIFY(w.goForward());
  QCOMPARE(tree->selectionModel()->currentIndex(), b);
  QVERIFY(!w.goForward());
  QVERIFY(w.goBack());
  select(c);  // from a: c replaces b ahead
  QVERIFY(!w.goForward());
  QVERIFY(w.goBack());
  QCOMPARE(tree->selectionModel()->currentIndex(), a);
  select(iteration);  // from a page that is no entry, Back returns to the call left
  QVERIFY(back->isEnabled());
  QVERIFY(w.goBack());
  QCOMPARE(tree->selectionModel()->currentIndex(), a);
  QVERIFY(w.openSession(sample_));
  QVERIFY(!w.goBack() && !w.goForward());
}

// At 1024 x 700 and 1366 x 768 (and at a device pixel ratio of 2 when run with QT_SCALE_FACTOR=2:
// ctest's tst_mainwindow_hidpi) the window keeps that size, and no widget is squeezed below what it
// needs to show itself (its minimum size hint), with a call's page, each central tab, each SAVE
// tab and each dock of the right-hand area in view.
void TestMainWindow::fitsSmallScreens_data() {
  QTest::addColumn<QSize>("screen");
  QTest::newRow("1024x700") << QSize(1024, 700);
  QTest::newRow("1366x768") << QSize(1366, 768);
}

void TestMainWindow::fitsSmallScreens() {
  QFETCH(QSize, screen);
  MainWindow w;
  w.setQuietErrors(true);
  w.show();
  w.resize(screen);
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  const QByteArray scale = qgetenv("QT_SCALE_FACTOR");
  if (!scale.isEmpty()) QCOMPARE(w.devicePixelRatioF(), scale.toDouble());
  QVERIFY(w.openSession(sample_));
  QVERIFY2(w.selectItem(QStringLiteral("SAVE/fc0-bits")), qPrintable(w.lastError()));
  QTRY_VERIFY(!w.pagesLoading());
  auto* tabs = qobject_cast<QTabWidget*>(w.centralWidget());
  QVERIFY(tabs);
  auto* saveTabs = w.savePanel()->findChild<QTabWidget*>();
  QVERIFY(saveTabs);
  // the views to walk: each central tab, then each SAVE tab, then each dock on the right raised
  std::vector<std::function<QString()>> views;
  for (int t = 0; t < tabs->count(); ++t)
    views.push_back([tabs, t]() -> QString {
      tabs->setCurrentIndex(t);
      return tabs->tabText(t);
    });
  for (int t = 0; t < saveTabs->count(); ++t)
    views.push_back([tabs, saveTabs, &w, t]() -> QString {
      tabs->setCurrentWidget(w.savePanel());
      saveTabs->setCurrentIndex(t);
      return QStringLiteral("SAVE/") + saveTabs->tabText(t);
    });
  for (const char* dock : {"RunDock", "ExplainDock", "ErrorPlotDock"})
    views.push_back([&w, dock]() -> QString {
      auto* d = w.findChild<QDockWidget*>(QLatin1String(dock));
      d->show();
      d->raise();
      return QString::fromLatin1(dock);
    });
  for (const auto& show : views) {
    const QString view = show();
    QTest::qWait(30);
    QVERIFY2(w.width() <= screen.width() && w.height() <= screen.height(),
             qPrintable(QStringLiteral("%1: %2 x %3").arg(view).arg(w.width()).arg(w.height())));
    QStringList squeezed;
    for (QWidget* c : w.findChildren<QWidget*>()) {
      if (!c->isVisible() || c->isWindow()) continue;
      // Qt draws the docks' title buttons smaller than their hint by design
      if (QByteArray(c->metaObject()->className()).startsWith("QDockWidgetTitle")) continue;
      // the editors inside spin and combo boxes are laid out by their box
      if (qobject_cast<QAbstractSpinBox*>(c->parentWidget()) || qobject_cast<QComboBox*>(c->parentWidget())) continue;
      QSize need = c->minimumSizeHint();  // at its size hint a widget shows all (a tab bar's minimum adds scroll buttons)
      if (!need.isValid()) continue;
      if (c->sizeHint().isValid()) need = need.boundedTo(c->sizeHint());
      // an explicit minimum is what the widget declares it needs (layouts use it over the hint: the
      // plots set one so that their hint, which follows legends and labels, never widens the window)
      if (c->minimumWidth() > 0) need.setWidth(c->minimumWidth());
      if (c->minimumHeight() > 0) need.setHeight(c->minimumHeight());
      // a scroll area's contents scroll: only widgets outside one must fit
      bool scrolled = false;
      for (QWidget* p = c->parentWidget(); p && !scrolled; p = p->parentWidget())
        scrolled = qobject_cast<QAbstractScrollArea*>(p) != nullptr;
      if (scrolled) continue;
      if (c->width() < need.width() || c->height() < need.height())
        squeezed << QStringLiteral("%1 (%2) %3x%4 < %5x%6")
                        .arg(QString::fromLatin1(c->metaObject()->className()),
                             c->objectName() + QLatin1Char('/') + QString::fromLatin1(c->parentWidget()->metaObject()->className()) +
                                 QLatin1Char('/') + c->parentWidget()->parentWidget()->objectName())
                        .arg(c->width()).arg(c->height()).arg(need.width()).arg(need.height());
    }
    QVERIFY2(squeezed.isEmpty(), qPrintable(view + QLatin1Char('\n') + squeezed.join(QLatin1Char('\n'))));
    // every central tab's name is in view: no scrolling through the page tabs
    QVERIFY2(tabs->tabBar()->width() >= tabs->tabBar()->sizeHint().width(),
             qPrintable(QStringLiteral("%1: the page tabs need %2 px, have %3").arg(view)
                            .arg(tabs->tabBar()->sizeHint().width()).arg(tabs->tabBar()->width())));
    // the docks keep a usable width: the session tree shows its names
    for (QDockWidget* d : w.findChildren<QDockWidget*>())
      if (d->isVisible() && d->objectName() == QLatin1String("SessionDock"))
        QVERIFY2(d->width() >= 200, qPrintable(QString::number(d->width())));
  }
}

// The bit explorer takes what teachers type (float.exposed's inputs): a bit pattern in hex or
// binary, a decimal, inf and nan; it names the exponent field's special values and prints the
// exact decimal value with its significand x 2^e.
void TestMainWindow::bitExplorerReadsBitPatterns() {
  QDialog window;  // in a dialog, as the workbench shows it: Enter must not press one of its buttons
  auto* layout = new QVBoxLayout(&window);
  auto* shown = new peat::views::BitExplorer(&window);
  layout->addWidget(shown);
  window.show();
  QVERIFY(QTest::qWaitForWindowExposed(&window));
  peat::views::BitExplorer& explorer = *shown;
  auto* input = explorer.findChild<QLineEdit*>();
  QVERIFY(input);
  const auto type = [&](const QString& text) {
    input->setFocus();
    input->setText(text);
    QTest::keyClick(input, Qt::Key_Return);
  };
  type(QStringLiteral("1"));  // 1, not the float before it (0.99999994)
  QCOMPARE(explorer.bits(), 0x3f800000u);
  type(QStringLiteral("65504"));
  QCOMPARE(explorer.bits(), 0x477fe000u);
  type(QStringLiteral("0x3f800000"));
  QCOMPARE(explorer.bits(), 0x3f800000u);
  QVERIFY2(explorer.valueText().contains(QStringLiteral("exactly 1 = 1 x 2^0")), qPrintable(explorer.valueText()));
  type(QStringLiteral("0b0_10000000_10000000000000000000000"));  // 3
  QCOMPARE(explorer.bits(), 0x40400000u);
  QVERIFY2(explorer.valueText().contains(QStringLiteral("= 1.5 x 2^1")), qPrintable(explorer.valueText()));
  type(QStringLiteral("0.1"));  // not 0.1: the float nearest it, every digit
  QVERIFY2(explorer.valueText().contains(QStringLiteral("exactly 0.100000001490116119384765625 ")), qPrintable(explorer.valueText()));
  type(QStringLiteral("0x00000001"));  // the smallest subnormal: 2^-149
  QVERIFY2(explorer.valueText().contains(QStringLiteral("x 2^-126")) && explorer.valueText().contains(QStringLiteral("subnormal")),
           qPrintable(explorer.valueText()));
  type(QStringLiteral("nan"));
  QVERIFY2(explorer.valueText().contains(QStringLiteral("all ones: Inf or NaN")) && !explorer.valueText().contains(QStringLiteral("2^128")),
           qPrintable(explorer.valueText()));
  const uint32_t before = explorer.bits();
  type(QStringLiteral("0x1ffffffff"));  // more than 32 bits: refused, the value kept
  QCOMPARE(explorer.bits(), before);
}

// File > Export takes the plot or table the user worked with last (while it is in view), and every
// file names the session and the item shown: the PNG's Description, the CSV's first line, the
// suggested file name.
void TestMainWindow::exportsTakeWhatWasUsedAndNameIt() {
  MainWindow w;
  w.setQuietErrors(true);
  w.resize(1400, 860);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  QVERIFY(w.openSession(sample_));
  const QString call = QStringLiteral("iterations/000001/calls/000002");
  QModelIndex node;
  const auto* m = w.sessionModel();
  for (int r = 0; r < m->rowCount() && !node.isValid(); ++r)
    for (int i = 0; i < m->rowCount(m->index(r, 0)) && !node.isValid(); ++i)
      for (int c = 0; c < m->rowCount(m->index(i, 0, m->index(r, 0))); ++c) {
        const QModelIndex at = m->index(c, 0, m->index(i, 0, m->index(r, 0)));
        if (at.data(peat::views::SessionTreeModel::PathRole).toString() == call) node = at;
      }
  QVERIFY(node.isValid());
  w.sessionTree()->setCurrentIndex(node);
  QTRY_VERIFY(!w.pagesLoading());
  auto* dock = w.findChild<QDockWidget*>(QStringLiteral("ErrorPlotDock"));
  dock->raise();
  QTest::qWait(50);
  // the dock's bit plot, used last, is what Export takes, whatever the page at the centre
  QCustomPlot* bits = w.errorPlot()->bitPlot();
  QVERIFY(bits->isVisible());
  QTest::mousePress(bits, Qt::LeftButton, Qt::NoModifier, QPoint(bits->width() / 2, bits->height() / 2));
  QTest::mouseRelease(bits, Qt::LeftButton, Qt::NoModifier, QPoint(bits->width() / 2, bits->height() / 2));
  qobject_cast<QTabWidget*>(w.centralWidget())->setCurrentWidget(w.curvePanel());
  QCOMPARE(w.currentPlot(), bits);
  // the table of the panel used: its histograms, under a line naming the session and the call
  QString csv = w.currentCsv();
  const QString head = csv.section(QLatin1Char('\n'), 0, 0);
  QVERIFY2(head.startsWith(QStringLiteral("# PEAT Workbench: session sample.h5, ")) && head.contains(call), qPrintable(head));
  QCOMPARE(csv.section(QLatin1Char('\n'), 1), w.errorPlot()->csv());
  // the PNG says the same in its Description
  QTemporaryDir dir;
  QString error;
  const QString png = dir.filePath(QStringLiteral("bits.png"));
  QVERIFY2(w.pageExport()->exportPlot(png, &error), qPrintable(error));
  QCOMPARE(QImage(png).text(QStringLiteral("Description")), head.mid(2));
  // a press on the verdict table: its rows are the table exported
  w.verdictTable()->show();
  QTest::mouseClick(w.verdictTable()->viewport(), Qt::LeftButton, Qt::NoModifier, QPoint(5, 5));
  csv = w.currentCsv();
  QCOMPARE(csv.section(QLatin1Char('\n'), 1), w.verdictModel()->csv());
  // the training plot, pressed: the plot exported again follows
  QTest::mousePress(w.curvePanel()->plot(), Qt::LeftButton, Qt::NoModifier, QPoint(10, 10));
  QCOMPARE(w.currentPlot(), w.curvePanel()->plot());
  // hidden (another tab), a plot used before gives way to the page's own
  qobject_cast<QTabWidget*>(w.centralWidget())->setCurrentWidget(w.callPage());
  QVERIFY(w.currentPlot() != w.curvePanel()->plot());
  QVERIFY2(w.pageExport()->suggestedName().startsWith(QStringLiteral("sample-golden-iteration-1-")), qPrintable(w.pageExport()->suggestedName()));
}

namespace {

// A sample session written at `path`, shown in `w` on golden/iteration 1 with its pages read.
bool showSampleAt(MainWindow& w, const QString& path) {
  peat::testsupport::writeSampleSession(path.toStdString());
  w.setQuietErrors(true);
  w.show();
  if (!w.openSession(path) || !w.selectItem(QStringLiteral("golden/iteration 1"))) return false;
  QElapsedTimer waited;
  waited.start();
  while (w.pagesLoading() && waited.elapsed() < 10000) QTest::qWait(10);
  return !w.pagesLoading();
}

}  // namespace

// Another program deletes the shown run inside the file (h5py, with HDF5's file locking off: with
// it on, the window's open file keeps the writer out): the window opens the file again and shows
// what is there now, not what its open handle had cached; the item shown is said to be gone.
void TestMainWindow::runDeletedInPlace() {
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("shown.h5"));
  MainWindow w;
  QVERIFY(showSampleAt(w, path));
  QCOMPARE(w.sessionModel()->index(0, 0).data().toString(), QStringLiteral("golden"));
  QProcess h5py;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert(QStringLiteral("HDF5_USE_FILE_LOCKING"), QStringLiteral("FALSE"));
  h5py.setProcessEnvironment(env);
  h5py.start(QStringLiteral("/usr/bin/python3"),
             {QStringLiteral("-c"), QStringLiteral("import sys, h5py\nwith h5py.File(sys.argv[1], 'a') as f:\n    del f['runs/golden']"),
              path});
  QVERIFY(h5py.waitForFinished(60000));
  QVERIFY2(h5py.exitCode() == 0, h5py.readAllStandardError().constData());
  QTRY_VERIFY_WITH_TIMEOUT(w.sessionModel()->rowCount() > 0 &&
                               w.sessionModel()->index(0, 0).data().toString() != QStringLiteral("golden"),
                           10000);
  QTRY_VERIFY(!w.pagesLoading());
  QVERIFY2(w.lastError().contains(QStringLiteral("golden/iteration 1 is no longer in shown.h5")), qPrintable(w.lastError()));
  QVERIFY(w.currentItemPath() != QStringLiteral("golden/iteration 1"));
}

// The session shown is replaced on disk by another program: by a file that is no session, the
// pages close and say why (none stays up from the file that was); by a session again, it opens
// again; removed, the window says so.
void TestMainWindow::sessionReplacedOnDisk() {
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("shown.h5"));
  MainWindow w;
  QVERIFY(showSampleAt(w, path));
  QVERIFY(w.sessionModel()->rowCount() > 0);
  // another program writes a foreign HDF5 file under a temporary name and renames it over
  const QString other = dir.filePath(QStringLiteral("other.tmp"));
  peat::testsupport::writeForeignHdf5(other.toStdString());
  QVERIFY(std::rename(other.toLocal8Bit().constData(), path.toLocal8Bit().constData()) == 0);
  QTRY_VERIFY_WITH_TIMEOUT(w.sessionModel()->rowCount() == 0, 10000);
  QVERIFY(!w.lastError().isEmpty());  // why, in words
  QVERIFY(w.sessionPath().isEmpty());  // closed: no page of the file that was
  QVERIFY(!w.errorPlot()->firstReport());
  // ... and a session again: it opens (File > Open is not needed)
  QVERIFY(w.openSession(path) == false);  // still foreign
  peat::testsupport::writeSampleSession(other.toStdString());
  QVERIFY(std::rename(other.toLocal8Bit().constData(), path.toLocal8Bit().constData()) == 0);
  QVERIFY(w.openSession(path));
  QTRY_VERIFY(!w.pagesLoading());
  QSignalSpy reopened(&w, &MainWindow::sessionOpenEnded);
  peat::testsupport::writeSampleSession(other.toStdString());
  QVERIFY(std::rename(other.toLocal8Bit().constData(), path.toLocal8Bit().constData()) == 0);
  QTRY_VERIFY_WITH_TIMEOUT(!reopened.isEmpty(), 10000);  // opened again by itself, from the new file
  QCOMPARE(reopened.last().at(0).toString(), path);
  QVERIFY(reopened.last().at(1).toBool());
  QTRY_VERIFY_WITH_TIMEOUT(!w.pagesLoading() && w.sessionModel()->rowCount() > 0 && w.sessionPath() == path, 10000);
  // the item shown taken out by another program (the file rewritten without it): the pages and
  // the status line say so, no page keeps it
  QVERIFY(w.selectItem(QStringLiteral("golden/iteration 2")));
  QTRY_VERIFY(!w.pagesLoading());
  QCOMPARE(w.currentItemPath(), QStringLiteral("golden/iteration 2"));
  QSignalSpy shrunk(&w, &MainWindow::sessionOpenEnded);
  peat::testsupport::writeSampleSession(other.toStdString(), 2);
  QVERIFY(std::rename(other.toLocal8Bit().constData(), path.toLocal8Bit().constData()) == 0);
  QTRY_VERIFY_WITH_TIMEOUT(!shrunk.isEmpty(), 10000);
  QTRY_VERIFY(!w.pagesLoading());
  const QString gone = QStringLiteral("golden/iteration 2 is no longer in shown.h5: another program changed the file");
  QCOMPARE(w.lastError(), gone);
  QCOMPARE(w.statusBar()->currentMessage(), gone);
  QVERIFY(w.currentItemPath() != QStringLiteral("golden/iteration 2"));
  bool said = false;
  for (const QLabel* l : w.callPage()->findChildren<QLabel*>()) said = said || l->text() == gone;
  QVERIFY2(said, "the call page does not say why");
  QCOMPARE(w.sessionModel()->rowCount(), 2);  // the rest of the session is shown again
  // removed: said in the title and the status line
  QVERIFY(QFile::remove(path));
  QTRY_VERIFY_WITH_TIMEOUT(w.windowTitle().contains(QStringLiteral("removed from disk")), 10000);
  QVERIFY(w.lastError().contains(QStringLiteral("was removed from disk")));
}

// A screen under the layout's least (1024x700; the offscreen platform's is 800x600) is said in the
// status line and on the empty overview; a large one is not (gui_xvfb_layout checks both in X).
void TestMainWindow::smallScreenIsSaid() {
  MainWindow w;
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  // the first start offers the demo every way there is, the tour too
  bool offered = false;
  for (const QLabel* l : w.findChildren<QLabel*>())
    offered = offered || (l->isVisible() && l->text().contains(QStringLiteral("Run > Open Demo Session")) &&
                          l->text().contains(QStringLiteral("peat-workbench --demo")) && l->text().contains(QStringLiteral("Tour (F1)")));
  QVERIFY2(offered, "no visible label offers the demo and the tour");
  const QRect room = w.screen()->availableGeometry();
  if (room.width() >= 1024 && room.height() >= 700) {
    QVERIFY(w.screenNote().isEmpty());
    return;
  }
  QVERIFY(w.screenNote().contains(QStringLiteral("%1 x %2 pixels").arg(room.width()).arg(room.height())));
  QCOMPARE(w.statusBar()->currentMessage(), w.screenNote());
  bool said = false;
  for (const QLabel* l : w.findChildren<QLabel*>()) said = said || (l->isVisible() && l->text().contains(w.screenNote()));
  QVERIFY2(said, "no visible label says the screen is small");
  QVERIFY(w.width() <= room.width() && w.height() <= room.height());
  qInfo("said: %s", qPrintable(w.screenNote()));
}

QTEST_MAIN(TestMainWindow)
#include "tst_mainwindow.moc"
