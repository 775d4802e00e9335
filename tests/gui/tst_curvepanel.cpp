// SPDX-License-Identifier: MIT
// The workbench's training curves on a real runtime fault-injection session (PEAT_RUNTIME_FI_SESSION:
// an MLP trained twice, the second time with bf16 every 7th linear call): the FI run shows beside
// its golden twin, with a marker at each iteration the candidate was substituted.
#include "views/qcustomplot_include.h"  // first: see the header

#include <QtTest>

#include "tests/gui/settle.h"

#include <cmath>
#include <future>
#include <stdexcept>

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
  void loadsAreThePagesOwn();
};

namespace {
QString shownText(QCustomPlot* plot) {  // the message the page shows in place of curves
  for (int i = 0; i < plot->itemCount(); ++i)
    if (auto* t = qobject_cast<QCPItemText*>(plot->item(i))) return t->text().replace(QLatin1Char('\n'), QLatin1Char(' '));  // wrapped to the plot
  return QString();
}
}  // namespace

// The page reads in its own job: a load in flight says so, a message shown meanwhile drops it
// (its result never drawn), a failed read says why, and a read that delivers is drawn.
void TestCurvePanel::loadsAreThePagesOwn() {
  peat::views::CurvePanel panel;
  QSignalSpy shown(&panel, &peat::views::CurvePanel::curvesShown);
  QSignalSpy failed(&panel, &peat::views::CurvePanel::readFailed);
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  peat::store::TrainingCurve curve;
  curve.iteration = {0, 1, 2};
  curve.loss = {2.0, 1.5, 1.0};
  curve.accuracy = {0.1, 0.2, 0.3};
  panel.load(QStringLiteral("slow"), [go, curve] {
    go.wait();  // until the test lets it deliver
    peat::views::RunCurves c;
    c.curve = curve;
    c.about = QStringLiteral("profile run");
    return c;
  });
  QVERIFY(panel.loading());
  QCOMPARE(shownText(panel.plot()), QStringLiteral("Loading slow ..."));
  panel.showMessage(QStringLiteral("something else"));  // the user moved on
  QVERIFY(!panel.loading());
  release.set_value();
  QTest::qWait(300);  // the dropped read delivers into nothing
  QCOMPARE(shown.count(), 0);
  QCOMPARE(panel.plot()->graphCount(), 0);
  QCOMPARE(shownText(panel.plot()), QStringLiteral("something else"));

  panel.load(QStringLiteral("broken"), []() -> peat::views::RunCurves { throw std::runtime_error("no such table"); });
  QTRY_COMPARE(failed.count(), 1);
  QCOMPARE(failed.at(0).at(0).toString(), QStringLiteral("no such table"));
  QCOMPARE(shownText(panel.plot()), QStringLiteral("broken could not be read: no such table"));

  panel.load(QStringLiteral("good"), [curve] {
    peat::views::RunCurves c;
    c.curve = curve;
    return c;
  });
  QTRY_COMPARE(shown.count(), 1);
  QCOMPARE(shown.at(0).at(0).toBool(), true);
  QVERIFY(!panel.loading());
  QVERIFY(panel.plot()->graphCount() >= 1);
  QCOMPARE(panel.plot()->graph(0)->data()->size(), 3);
}

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
