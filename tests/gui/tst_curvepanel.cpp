// SPDX-License-Identifier: MIT
// The workbench's training curves on a real runtime fault-injection session (PEAT_RUNTIME_FI_SESSION:
// an MLP trained twice, the second time with bf16 every 7th linear call): the FI run shows beside
// its golden twin, with a marker at each iteration the candidate was substituted.
#include "views/qcustomplot_include.h"  // first: see the header

#include <QtTest>

#include "tests/gui/settle.h"

#include <cmath>

#include "core/store/curves.h"
#include "views/curvepanel.h"
#include "views/liverun.h"
#include "views/runpanel.h"
#include "views/savepanel.h"
#include <QTabWidget>
#include "views/mainwindow.h"

class TestCurvePanel : public QObject {
  Q_OBJECT
 private slots:
  void runtimeFiBesideGolden();
  void liveCurveKeepsItsRunsName();
};

void TestCurvePanel::runtimeFiBesideGolden() {
  const QString session = qEnvironmentVariable("PEAT_RUNTIME_FI_SESSION");
  QVERIFY2(QFileInfo::exists(session), "PEAT_RUNTIME_FI_SESSION names no session (run through ctest)");
  const peat::store::SessionReader reader(session.toStdString());
  std::string fiRun;
  for (const peat::store::RunInfo& r : reader.summary().runs)
    if (r.spec.kind == "runtime_fi") fiRun = r.name;
  QVERIFY(!fiRun.empty());
  const peat::store::TrainingCurve fi = peat::store::loadTrainingCurve(reader, fiRun);
  QCOMPARE(fi.goldenRun, std::string("golden"));
  QCOMPARE(int(fi.iteration.size()), 6);
  QVERIFY(!fi.substituted.empty());

  peat::views::MainWindow window;
  window.setQuietErrors(true);
  window.resize(1500, 900);
  window.show();
  QVERIFY(window.openSession(session));
  QVERIFY(peat::testsupport::selectAndSettle(window, QString::fromStdString(fiRun)));
  QCustomPlot* plot = window.curvePanel()->plot();
  QCOMPARE(window.currentPlot(), plot);  // the Training tab came to the front
  QCOMPARE(plot->graphCount(), 5);  // golden loss and accuracy, FI loss and accuracy, markers
  const peat::store::TrainingCurve golden = peat::store::loadTrainingCurve(reader, "golden");
  for (int i = 0; i < 6; ++i) {
    QCOMPARE(plot->graph(0)->data()->at(i)->value, golden.loss[std::size_t(i)]);
    QCOMPARE(plot->graph(2)->data()->at(i)->value, fi.loss[std::size_t(i)]);
  }
  QCOMPARE(plot->graph(4)->data()->size(), int(fi.substituted.size()));
  for (int i = 0; i < plot->graph(4)->data()->size(); ++i)
    QCOMPARE(plot->graph(4)->data()->at(i)->key, fi.substituted[std::size_t(i)]);
  // same seed and data order: the runs agree before the first substitution and part after it
  bool differ = false;
  for (std::size_t i = 0; i < 6; ++i) {
    if (fi.iteration[i] < fi.substituted.front()) QCOMPARE(fi.loss[i], golden.loss[i]);
    differ = differ || fi.loss[i] != golden.loss[i];
  }
  QVERIFY(differ);
  // the runtime-FI page's header: the swap-in, and where the losses first differ, found here
  double first = -1;
  for (std::size_t i = 0; i < 6 && first < 0; ++i)
    if (fi.loss[i] != golden.loss[i]) first = fi.iteration[i];
  const QString summary = window.curvePanel()->summaryText();
  QVERIFY2(summary.contains(QStringLiteral("every 7 calls")), qPrintable(summary));
  QVERIFY2(summary.contains(QStringLiteral("first differ at iteration <b>%1</b>").arg(first)), qPrintable(summary));
  QVERIFY2(summary.contains(QStringLiteral("substituted at %1 iteration").arg(fi.substituted.size())), qPrintable(summary));
  QVERIFY(withoutHead(window.currentCsv()).startsWith(QStringLiteral("run,iteration,loss,accuracy,test_loss,test_accuracy\n")));
  QVERIFY(window.grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/curvepanel.png")));
}

// A run's live loss curve, once the run is cancelled while the window shows another session,
// names the file the run wrote and how it ended, not "running" under the other session's title.
void TestCurvePanel::liveCurveKeepsItsRunsName() {
  peat::views::RunPanel run;
  peat::views::SavePanel save;
  QTabWidget central;
  auto& curves = *new peat::views::CurvePanel;
  central.addTab(&curves, QStringLiteral("Training"));  // owns it
  central.show();
  peat::views::LiveRun live(&run, &save, &curves, &central, nullptr);
  live.begin();
  for (int i = 1; i <= 3; ++i) live.addLoss(i, 1.0 / i, std::nan(""));
  QVERIFY(live.shown());
  QCOMPARE(curves.plot()->graph(0)->name(), QStringLiteral("running loss"));
  live.end(false, QStringLiteral("Cancelled; the session keeps what was finished"), QStringLiteral("/tmp/x/lenet-2.h5"));
  QCOMPARE(curves.plot()->graph(0)->name(), QStringLiteral("cancelled run in lenet-2.h5 loss"));
  QVERIFY2(curves.summaryText().contains(QStringLiteral("lenet-2.h5")) && curves.summaryText().contains(QStringLiteral("cancelled")),
           qPrintable(curves.summaryText()));
  QCOMPARE(curves.plot()->graph(0)->dataCount(), 3);  // the points drawn stay
}

QTEST_MAIN(TestCurvePanel)
#include "tst_curvepanel.moc"
