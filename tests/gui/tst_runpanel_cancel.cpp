// SPDX-License-Identifier: MIT
// The run panel against a stand-in for `peat` (PEAT_CLI, a shell script writing the event stream
// of docs/events.md): the bar is determinate from the start, the time left is estimated from the
// rate of the run's own progress (not from its start-up), and Cancel ends a child that ignores
// SIGINT within a second and says "Cancelled".
#include <QAbstractButton>
#include <QElapsedTimer>
#include <QMessageBox>
#include <QPointer>
#include <QProgressBar>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "views/mainwindow.h"
#include "views/runpanel.h"

using peat::views::RunPanel;

namespace {

// A script that starts up for `startup` seconds, then counts `total` steps of `step` seconds,
// ignoring SIGINT as a command busy with a long point would.
QString fakePeat(const QTemporaryDir& dir, double startup, int total, double step) {
  const QString path = dir.filePath(QStringLiteral("peat"));
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly)) return {};
  f.write(QStringLiteral("#!/bin/sh\ntrap '' INT\nsleep %1\ni=0\nwhile [ $i -le %2 ]; do\n"
                         "  echo '{\"v\":1,\"event\":\"progress\",\"done\":'$i',\"total\":%2,\"stage\":\"points\"}' >&2\n"
                         "  i=$((i+1)); sleep %3\ndone\n")
              .arg(startup)
              .arg(total)
              .arg(step)
              .toUtf8());
  f.close();
  f.setPermissions(f.permissions() | QFileDevice::ExeOwner);
  return path;
}

// A run panel with spies on its progress and its end, whose runs start `fakePeat(startup, total,
// step)`: PEAT_CLI names the script from before the panel is made until the run is over.
struct FakeRun {
  FakeRun(double startup, int total, double step)
      : scriptSet(qputenv("PEAT_CLI", fakePeat(dir, startup, total, step).toUtf8())) {}
  ~FakeRun() { qunsetenv("PEAT_CLI"); }
  bool start() {
    return panel.startSequence({{QStringLiteral("save"), QStringLiteral("campaign")}}, dir.filePath(QStringLiteral("s.h5")));
  }

  QTemporaryDir dir;
  const bool scriptSet;
  RunPanel panel;
  QSignalSpy progressed{&panel, &RunPanel::progressed};
  QSignalSpy finished{&panel, &RunPanel::finished};
};

}  // namespace

class TestRunPanelCancel : public QObject {
  Q_OBJECT
 private slots:
  void estimateComesFromTheRate();
  void cancelEndsWithinASecond();
  void closingDuringARunAsks();
};

void TestRunPanelCancel::estimateComesFromTheRate() {
  // 1.5 s of start-up, then 40 steps of 0.05 s: at step 10 about 1.5 s are left. Counting the
  // start-up as work (the estimate before this) said about 5 s.
  FakeRun run(1.5, 40, 0.05);
  RunPanel& panel = run.panel;
  const QSignalSpy &progressed = run.progressed, &finished = run.finished;
  QVERIFY(run.start());
  auto* bar = panel.findChild<QProgressBar*>();
  QVERIFY(bar);
  QVERIFY(bar->maximum() > 0);  // determinate before the first event
  QTRY_VERIFY_WITH_TIMEOUT(!progressed.isEmpty() && progressed.last().at(0).toLongLong() >= 10, 10000);
  const double left = panel.secondsLeft();
  QVERIFY2(left > 0.5 && left < 3.5, qPrintable(QString::number(left)));
  QVERIFY(panel.statusText().contains(QStringLiteral("at this rate")));
  QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 15000);
  QVERIFY(finished.at(0).at(0).toBool());
}

void TestRunPanelCancel::cancelEndsWithinASecond() {
  FakeRun run(0.1, 1000, 0.1);
  RunPanel& panel = run.panel;
  const QSignalSpy &progressed = run.progressed, &finished = run.finished;
  QVERIFY(run.start());
  QTRY_VERIFY_WITH_TIMEOUT(progressed.size() >= 2, 10000);
  QElapsedTimer clock;
  clock.start();
  panel.cancel();
  QVERIFY(panel.statusText().startsWith(QStringLiteral("Cancelling")));  // at once, not "Running"
  QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 5000);
  QVERIFY2(clock.elapsed() < 1000, qPrintable(QString::number(clock.elapsed())));
  QVERIFY(!finished.at(0).at(0).toBool());
  QVERIFY(finished.at(0).at(1).toString().startsWith(QStringLiteral("Cancelled")));
  QVERIFY(panel.statusText().startsWith(QStringLiteral("Cancelled")));
  QVERIFY(!panel.running());
}

// Closing the window while a run goes asks first: Keep Running keeps both; Stop the Run and Close
// interrupts the command as Cancel does (SIGINT: the commands end their point or iteration and
// mark the run cancelled, cli_interrupt and cli_interrupt_campaign) and closes once it has ended.
void TestRunPanelCancel::closingDuringARunAsks() {
  QStandardPaths::setTestModeEnabled(true);  // the window's saved layout goes to a test location
  QTemporaryDir dir;
  const QString marker = dir.filePath(QStringLiteral("interrupted"));
  const QString script = dir.filePath(QStringLiteral("peat"));
  {
    QFile f(script);
    QVERIFY(f.open(QIODevice::WriteOnly));
    // a command that takes 1.5 s to end its point after SIGINT (longer than Cancel's grace), then
    // says so as peat does and exits 130
    f.write(QStringLiteral("#!/bin/sh\ntrap 'sleep 1.5; echo stopped > %1; exit 130' INT\ni=0\nwhile [ $i -le 1000 ]; do\n"
                           "  echo '{\"v\":1,\"event\":\"progress\",\"done\":'$i',\"total\":1000,\"stage\":\"points\"}' >&2\n"
                           "  i=$((i+1)); sleep 0.1\ndone\n")
                .arg(marker)
                .toUtf8());
    f.close();
    f.setPermissions(f.permissions() | QFileDevice::ExeOwner);
  }
  qputenv("PEAT_CLI", script.toUtf8());
  auto* window = new peat::views::MainWindow;
  window->setAttribute(Qt::WA_DeleteOnClose);
  QPointer<peat::views::MainWindow> alive(window);
  window->setQuietErrors(true);
  window->show();
  RunPanel* panel = window->runPanel();
  QSignalSpy finished(panel, &RunPanel::finished);
  QVERIFY(panel->startSequence({{QStringLiteral("save"), QStringLiteral("campaign")}}, dir.filePath(QStringLiteral("s.h5"))));
  QTRY_VERIFY_WITH_TIMEOUT(panel->running(), 5000);
  const auto prompt = [&] { return window->findChild<QMessageBox*>(QStringLiteral("ClosePrompt")); };
  const auto press = [&](const QString& text) {
    for (QAbstractButton* b : prompt()->buttons())
      if (b->text() == text) {
        b->click();
        return true;
      }
    return false;
  };
  QVERIFY(!window->close());  // asked, not closed
  QTRY_VERIFY(prompt() && prompt()->isVisible());
  QVERIFY(prompt()->text().contains(QStringLiteral("A run is in progress")));
  QVERIFY(press(QStringLiteral("Keep Running")));
  QTest::qWait(300);
  QVERIFY(alive && window->isVisible() && panel->running());
  QVERIFY(!window->close());
  QTRY_VERIFY(prompt() && prompt()->isVisible());
  QVERIFY(press(QStringLiteral("Stop the Run and Close")));
  // the command is given the time to end its point: it writes its marker, and the window closes
  QTRY_VERIFY_WITH_TIMEOUT(!alive, 8000);
  QVERIFY(QFile::exists(marker));
  QCOMPARE(finished.size(), 1);
  QVERIFY(finished.at(0).at(1).toString().startsWith(QStringLiteral("Cancelled")));
  qunsetenv("PEAT_CLI");
}

QTEST_MAIN(TestRunPanelCancel)
#include "tst_runpanel_cancel.moc"
