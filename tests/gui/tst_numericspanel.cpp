// SPDX-License-Identifier: MIT
// The workbench's numerics heat map on a real profile (PEAT_NUMERICS_SESSION: LeNet profiled with
// --numerics): selecting the run fills a layers x iterations grid whose cells are the largest
// value over each layer's forward outputs of that iteration, computed here from the raw table.
#include "views/qcustomplot_include.h"  // first: see the header

#include <QTabWidget>
#include <QThread>
#include <QtTest>

#include "tests/gui/settle.h"

#include <cmath>
#include <atomic>
#include <map>

#include "core/store/session.h"
#include "views/mainwindow.h"
#include "views/numericspanel.h"


class TestNumericsPanel : public QObject {
  Q_OBJECT
 private slots:
  void layersByIterations();
};

void TestNumericsPanel::layersByIterations() {
  const QString session = qEnvironmentVariable("PEAT_NUMERICS_SESSION");
  QVERIFY2(QFileInfo::exists(session), "PEAT_NUMERICS_SESSION names no session (run through ctest)");
  const peat::store::SessionReader reader(session.toStdString());
  const std::vector<peat::h5::Column> table = reader.table("golden", "numerics");
  const peat::h5::Column* layer = peat::h5::findColumn(table, "layer");
  const peat::h5::Column* phase = peat::h5::findColumn(table, "phase");
  const peat::h5::Column* tensor = peat::h5::findColumn(table, "tensor");
  const peat::h5::Column* iteration = peat::h5::findColumn(table, "iteration");
  const char* quantity = "block_mxfp4_underflow";
  const peat::h5::Column* value = peat::h5::findColumn(table, quantity);
  QVERIFY(layer && phase && tensor && iteration && value);
  std::map<std::pair<std::string, int64_t>, double> want;
  for (std::size_t r = 0; r < layer->size(); ++r) {
    if (phase->text[r] != "forward" || tensor->text[r] != "output") continue;
    const auto key = std::make_pair(layer->text[r], int64_t(iteration->numbers[r]));
    want[key] = want.count(key) ? std::max(want[key], value->numbers[r]) : value->numbers[r];
  }
  QVERIFY(want.size() >= 5 * 4);  // LeNet's five GEMM layers, iterations 0, 3, 6, 9

  peat::views::MainWindow window;
  window.setQuietErrors(true);
  window.resize(1500, 900);
  window.show();
  QVERIFY(window.openSession(session));
  QVERIFY(peat::testsupport::selectAndSettle(window, QStringLiteral("golden")));
  peat::views::NumericsPanel* panel = window.numericsPanel();
  peat::store::setSessionAccessObserver(countGuiThreadRead);  // the page reads its grids off the GUI thread
  panel->setQuantity(QString::fromLatin1(quantity));
  QVERIFY(peat::testsupport::settle(window));
  peat::store::setSessionAccessObserver(nullptr);
  QCOMPARE(guiThreadReads.load(), 0);
  const peat::analyzer::NumericsGrid& g = panel->grid();
  QCOMPARE(g.quantity, std::string(quantity));
  QCOMPARE(g.layers.size() * g.iterations.size(), want.size());
  for (std::size_t r = 0; r < g.layers.size(); ++r)
    for (std::size_t c = 0; c < g.iterations.size(); ++c)
      QCOMPARE(g.values[r * g.iterations.size() + c], want.at({g.layers[r], g.iterations[c]}));
  auto* map = qobject_cast<QCPColorMap*>(panel->plot()->plottable(0));
  QVERIFY(map);
  QCOMPARE(map->data()->keySize(), int(g.iterations.size()));
  QCOMPARE(map->data()->valueSize(), int(g.layers.size()));
  QVERIFY(panel->csv().startsWith(QStringLiteral("layer,iteration,block_mxfp4_underflow\n")));
  auto* tabs = qobject_cast<QTabWidget*>(panel->parentWidget() ? panel->parentWidget()->parentWidget() : nullptr);
  QVERIFY(tabs);
  tabs->setCurrentWidget(panel);
  QCOMPARE(window.currentPlot(), panel->plot());
  QVERIFY(withoutHead(window.currentCsv()).startsWith(QStringLiteral("layer,iteration,")));
  QVERIFY(window.grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/numericspanel.png")));
}

QTEST_MAIN(TestNumericsPanel)
#include "tst_numericspanel.moc"
