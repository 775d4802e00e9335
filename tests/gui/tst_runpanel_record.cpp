// SPDX-License-Identifier: MIT
// A plain PyTorch script recorded through the run panel (peat record -- /usr/bin/python3 SCRIPT):
// its form, a run into the window with its live loss, a runtime-FI swap, a failing script and a
// cancelled recording (split from tst_runpanel).
#include "views/qcustomplot_include.h"  // first: see the header
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>
#include "tests/gui/runpanel_support.h"
#include "tests/gui/settle.h"
#include "views/curvepanel.h"
#include "views/mainwindow.h"
#include "views/runpanel.h"

using peat::testsupport::runPeat;
using peat::testsupport::sessionRuns;
using peat::testsupport::squeezed;
using peat::testsupport::writeFile;
using peat::views::RunPanel;

namespace {

// A plain PyTorch training script (no peat in it): a small MLP on random data, SGD, one print per
// step; `--steps N` steps, and `--fail-after N` raises a ValueError after N steps.
const char* kTrainScript = R"(import argparse
import torch
p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=6)
p.add_argument("--fail-after", type=int, default=-1)
p.add_argument("--name", default="")
a = p.parse_args()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 8), torch.randint(0, 2, (32,))
for step in range(a.steps):
    if step == a.fail_after:
        raise ValueError("planted after %d steps" % step)
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    print(a.name, "step", step, "loss", float(loss), flush=True)
)";

// A runtime-FI candidate beside the script: the GEMMs in bf16.
const char* kCandidate = R"(import peat
@peat.gemm
def bf16(a, b):
    return (a.bfloat16() @ b.bfloat16()).float()
)";

}  // namespace

class TestRunPanelRecord : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void recordFormGivesPeatRecord();
  void recordsAScriptIntoTheWindow();
  void recordsARuntimeFiSwap();
  void failingScriptSaysWhy();
  void cancelledRecordingKeepsItsIterations();

 private:
  // The form for recording `script` (in the test's folder) into a new session `file`.
  QString prepareRecord(RunPanel& panel, const QString& file, const QString& script, const QString& arguments) {
    const QString session = dir_.filePath(file);
    panel.setMode(RunPanel::Mode::PythonRecord);
    panel.setSessionPath(session);
    panel.setInterpreter(QStringLiteral("/usr/bin/python3"));
    panel.setScript(script);
    panel.setScriptArguments(arguments);
    return session;
  }
  QString trainScript() { return writeFile(dir_.filePath(QStringLiteral("train.py")), kTrainScript); }
  // The runs need the Python package beside peat (built with pybind11-dev) and Debian's python3-torch.
  bool canRecord() const {
#ifdef PEAT_RECORD_PACKAGE
    return true;
#else
    return false;
#endif
  }
  QTemporaryDir dir_;
};

void TestRunPanelRecord::initTestCase() {
  QVERIFY2(QFileInfo::exists(qEnvironmentVariable("PEAT_CLI")), "PEAT_CLI names no peat program (run through ctest)");
}

// The form of "Record a Python script": the command it stands for, and a one-line reason when it is incomplete.
void TestRunPanelRecord::recordFormGivesPeatRecord() {
  RunPanel panel;
  panel.setSessionPath(QString());
  panel.setMode(RunPanel::Mode::PythonRecord);
  QString error;
  QVERIFY(panel.arguments(&error).isEmpty());
  QVERIFY2(error.contains(QStringLiteral("choose a session file")), qPrintable(error));
  const QString session = prepareRecord(panel, QStringLiteral("form.h5"), QString(), QString());
  QVERIFY(panel.arguments(&error).isEmpty());
  QVERIFY2(error.contains(QStringLiteral("choose the training script")), qPrintable(error));
  panel.setScript(dir_.filePath(QStringLiteral("missing.py")));
  QVERIFY(panel.arguments(&error).isEmpty());
  QVERIFY2(error.contains(QStringLiteral("missing.py does not exist")), qPrintable(error));
  const QString script = trainScript();
  panel.setScript(script);
  // split as QProcess::splitCommand does: double quotes keep words together, """ is a quote
  panel.setScriptArguments(QStringLiteral("--steps 6 --name \"my run\" \"say \"\"\"hi\"\"\"\""));
  QStringList args = panel.arguments(&error);
  QVERIFY2(!args.isEmpty(), qPrintable(error));
  QCOMPARE(args, (QStringList{QStringLiteral("record"), QStringLiteral("-o"), session, QStringLiteral("--ops"), QStringLiteral("all"),
                              QStringLiteral("--every"), QStringLiteral("1"), QStringLiteral("--"), QStringLiteral("/usr/bin/python3"),
                              script, QStringLiteral("--steps"), QStringLiteral("6"), QStringLiteral("--name"),
                              QStringLiteral("my run"), QStringLiteral("say \"hi\"")}));
  for (const QString& bad : {QStringLiteral("gemm"), QStringLiteral("=python:k:f"), QStringLiteral("gemm=")}) {
    panel.setSwap(bad);
    QVERIFY(panel.arguments(&error).isEmpty());
    QVERIFY2(error.contains(QStringLiteral("OP=KERNEL")) && !error.contains(QLatin1Char('\n')), qPrintable(error));
  }
  panel.setSwap(QStringLiteral("gemm=python:mykern:bf16"));
  panel.setSwapEvery(3);
  panel.setRecordEvery(2);
  panel.setScriptOps(QStringLiteral("linear, matmul"));
  panel.setReplaceSession(true);
  panel.setScriptArguments(QString());
  args = panel.arguments(&error);
  QCOMPARE(args, (QStringList{QStringLiteral("record"), QStringLiteral("-o"), session, QStringLiteral("--force"), QStringLiteral("--ops"),
                              QStringLiteral("linear,matmul"), QStringLiteral("--every"), QStringLiteral("2"), QStringLiteral("--swap"),
                              QStringLiteral("gemm=python:mykern:bf16"), QStringLiteral("--swap-every"), QStringLiteral("3"),
                              QStringLiteral("--"), QStringLiteral("/usr/bin/python3"), script}));
  panel.setScriptOps(QStringLiteral(" , "));
  QVERIFY(panel.arguments(&error).isEmpty());
  QVERIFY2(error.startsWith(QStringLiteral("ops to record")), qPrintable(error));
  panel.setScriptOps(QStringLiteral("all"));
  panel.setInterpreter(QStringLiteral("no-such-python-here"));
  QVERIFY(panel.arguments(&error).isEmpty());
  QVERIFY2(error.contains(QStringLiteral("no Python interpreter 'no-such-python-here'")), qPrintable(error));
  // an interpreter peat would not know by its name goes as PEAT_PYTHON only, not after --
  panel.setInterpreter(QStringLiteral("/bin/sh"));
  args = panel.arguments(&error);
  QVERIFY2(!args.isEmpty(), qPrintable(error));
  QCOMPARE(args.mid(args.indexOf(QStringLiteral("--"))), (QStringList{QStringLiteral("--"), script}));
  panel.setInterpreter(QStringLiteral("python3"));  // a name on PATH stays a name
  args = panel.arguments(&error);
  QCOMPARE(args.mid(args.indexOf(QStringLiteral("--")), 2), (QStringList{QStringLiteral("--"), QStringLiteral("python3")}));
}

// A plain PyTorch script recorded from the run panel of a window at 1366x768: the bar is busy (the
// script alone knows how many iterations it runs) with the count and the time, the loss is drawn live
// on the Training tab, and the session opens when the run ends and verifies.
void TestRunPanelRecord::recordsAScriptIntoTheWindow() {
  if (!canRecord()) QSKIP("the Python package peat is not built (pybind11-dev)");
  peat::views::MainWindow window;
  window.setQuietErrors(true);
  window.resize(1366, 768);
  window.show();
  QVERIFY(QTest::qWaitForWindowExposed(&window));
  window.showRunPanel();
  RunPanel* panel = window.runPanel();
  const QString session = prepareRecord(*panel, QStringLiteral("recorded.h5"), trainScript(), QStringLiteral("--steps 6"));
  QTest::qWait(50);
  // every row of the mode shows whole in the dock
  QVERIFY2(squeezed(panel).isEmpty(), qPrintable(squeezed(panel).join(QLatin1Char('\n'))));
  QVERIFY(window.width() <= 1366 && window.height() <= 768);
  auto* bar = panel->findChild<QProgressBar*>();
  QVERIFY(bar);
  QStringList statuses;
  int busy = 0;
  const QString shots = qEnvironmentVariable("PEAT_SHOT_DIR");  // to look at the panel as it runs and after
  connect(panel, &RunPanel::progressed, this, [&](qint64, qint64 total) {
    statuses << panel->statusText();
    busy += total <= 0 && bar->maximum() == 0;
  });
  bool shot = false;  // once the first loss is drawn, the bar busy
  connect(panel, &RunPanel::liveLoss, this, [&] {
    if (!shots.isEmpty() && !std::exchange(shot, true))
      window.grab().save(shots + QStringLiteral("/runpanel-record-running-1366x768.png"));
  });
  QSignalSpy progressed(panel, &RunPanel::progressed);
  QSignalSpy finished(panel, &RunPanel::finished);
  QSignalSpy loss(panel, &RunPanel::liveLoss);
  QSignalSpy opened(&window, &peat::views::MainWindow::sessionOpenEnded);
  QVERIFY(panel->start());
  QVERIFY(finished.wait(120000));
  QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(finished.at(0).at(1).toString()));
  QCOMPARE(finished.at(0).at(2).toString(), session);
  QVERIFY2(finished.at(0).at(1).toString().contains(QRegularExpression(QStringLiteral(": iteration 6, [1-9][0-9]* calls recorded$"))),
           qPrintable(finished.at(0).at(1).toString()));
  QVERIFY(progressed.count() >= 1);
  QCOMPARE(progressed.first().at(1).toLongLong(), qint64(0));  // no total: the script decides
  QCOMPARE(progressed.last().at(0).toLongLong(), qint64(6));   // iterations run
  QCOMPARE(busy, progressed.count());
  QVERIFY2(statuses.last().contains(QStringLiteral("iteration 6")) && statuses.last().contains(QStringLiteral("s elapsed")),
           qPrintable(statuses.join(QLatin1Char('\n'))));
  QVERIFY(loss.count() >= 1);
  QCOMPARE(loss.first().at(0).toDouble(), 1.0);  // after the first iteration
  QVERIFY(loss.first().at(1).toDouble() > 0);
  QVERIFY(window.curvePanel()->plot()->graphCount() >= 1);  // drawn live
  QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 30000);
  QCOMPARE(window.sessionPath(), session);
  QVERIFY(peat::testsupport::selectAndSettle(window, QStringLiteral("golden")));
  QVERIFY(window.curvePanel()->plot()->graphCount() >= 1);  // the stored curve
  QCOMPARE(runPeat({QStringLiteral("info"), QStringLiteral("--verify"), session}), 0);
  const QJsonArray runs = sessionRuns(session);
  QCOMPARE(runs.size(), qsizetype(1));
  QCOMPARE(runs.at(0)[QStringLiteral("status")].toString(), QStringLiteral("complete"));
  QCOMPARE(runs.at(0)[QStringLiteral("iterations_complete")].toInt(), 6);
  QVERIFY(runs.at(0)[QStringLiteral("calls")].toInt() > 0);
  // the form and the Training tab with the recorded loss, to look at
  QVERIFY(window.grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/runpanel-record.png")));
  if (!shots.isEmpty()) window.grab().save(shots + QStringLiteral("/runpanel-record-1366x768.png"));
}

// --swap: the script runs golden, then with a Python candidate in every 2nd GEMM call; the panel says
// which pass goes, and the loss of the second pass comes with the golden one beside it: the Training
// tab draws the pair (the golden pass's own live curve gives way to it).
void TestRunPanelRecord::recordsARuntimeFiSwap() {
  if (!canRecord()) QSKIP("the Python package peat is not built (pybind11-dev)");
  peat::views::MainWindow window;
  window.setQuietErrors(true);
  RunPanel& panel = *window.runPanel();
  QVERIFY(!writeFile(dir_.filePath(QStringLiteral("mykern.py")), kCandidate).isEmpty());
  const QString session = prepareRecord(panel, QStringLiteral("swap.h5"), trainScript(), QStringLiteral("--steps 4"));
  panel.setSwap(QStringLiteral("gemm=python:mykern:bf16"));
  panel.setSwapEvery(2);
  QStringList statuses;
  connect(&panel, &RunPanel::progressed, this, [&] { statuses << panel.statusText(); });
  QSignalSpy finished(&panel, &RunPanel::finished);
  QSignalSpy loss(&panel, &RunPanel::liveLoss);
  QVERIFY(panel.start());
  QVERIFY(finished.wait(120000));
  QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(finished.at(0).at(1).toString()));
  const QString all = statuses.join(QLatin1Char('\n'));
  QVERIFY2(statuses.first().startsWith(QStringLiteral("golden pass: ")), qPrintable(all));
  QVERIFY2(statuses.last().startsWith(QStringLiteral("pass with the candidate: ")), qPrintable(all));
  int twins = 0, candidates = 0;  // losses with the golden one beside them; with the candidate's
  for (const QList<QVariant>& l : loss) {
    candidates += std::isfinite(l.at(2).toDouble());
    twins += std::isfinite(l.at(2).toDouble()) && std::isfinite(l.at(1).toDouble());
  }
  QVERIFY(twins >= 1);
  {  // as drawn live, before the session reopens
    const QCustomPlot* plot = window.curvePanel()->plot();
    QStringList names;
    const QCPGraph* live = nullptr;
    for (int i = 0; i < plot->graphCount(); ++i) {
      names << plot->graph(i)->name();
      // named, once the run has ended, by the file it wrote and how it ended
      if (plot->graph(i)->name() == QStringLiteral("finished run in swap.h5 (candidate) loss")) live = plot->graph(i);
    }
    QVERIFY2(live && names.contains(QStringLiteral("golden loss")), qPrintable(names.join(QStringLiteral(", "))));
    QCOMPARE(live->dataCount(), candidates);  // the candidate's losses only (not the golden pass's), in order
    for (int i = 1; i < live->dataCount(); ++i) QVERIFY(live->data()->at(i)->key > live->data()->at(i - 1)->key);
  }
  QCOMPARE(runPeat({QStringLiteral("info"), QStringLiteral("--verify"), session}), 0);
  QStringList runs;
  for (const QJsonValue& r : sessionRuns(session))
    runs << r[QStringLiteral("name")].toString() + QLatin1Char(':') + r[QStringLiteral("status")].toString();
  QCOMPARE(runs, (QStringList{QStringLiteral("golden:complete"), QStringLiteral("runtime-fi-bf16:complete")}));
}

// A script that raises: the panel says how it ended, with the exception's line.
void TestRunPanelRecord::failingScriptSaysWhy() {
  if (!canRecord()) QSKIP("the Python package peat is not built (pybind11-dev)");
  RunPanel panel;
  prepareRecord(panel, QStringLiteral("failing.h5"), trainScript(), QStringLiteral("--fail-after 2"));
  QSignalSpy finished(&panel, &RunPanel::finished);
  QVERIFY(panel.start());
  QVERIFY(finished.wait(120000));
  QCOMPARE(finished.at(0).at(0).toBool(), false);
  const QString message = finished.at(0).at(1).toString();
  QVERIFY2(message.contains(QStringLiteral("exit code 1")) && message.contains(QStringLiteral("ValueError: planted after 2 steps")),
           qPrintable(message));
  QCOMPARE(panel.statusText(), message);
}

// Cancel while a long script trains: SIGINT ends it, the session keeps the iterations recorded
// before with the run marked cancelled, and verifies.
void TestRunPanelRecord::cancelledRecordingKeepsItsIterations() {
  if (!canRecord()) QSKIP("the Python package peat is not built (pybind11-dev)");
  RunPanel panel;
  const QString session = prepareRecord(panel, QStringLiteral("cancelled.h5"), trainScript(), QStringLiteral("--steps 1000000"));
  QSignalSpy progressed(&panel, &RunPanel::progressed);
  QSignalSpy finished(&panel, &RunPanel::finished);
  QVERIFY(panel.start());
  // The first iteration is written: the package sends an iteration's progress event just before it
  // writes it, so the event that counts two iterations is the one that follows the first one's write.
  QTRY_VERIFY_WITH_TIMEOUT(!progressed.isEmpty() && progressed.last().at(0).toLongLong() >= 2, 60000);
  QVERIFY(!finished.count());
  QElapsedTimer clock;
  clock.start();
  panel.cancel();
  QVERIFY(panel.statusText().startsWith(QStringLiteral("Cancelling")));
  QVERIFY(finished.wait(RunPanel::kRecordCancelGraceMs + 10000));
  qInfo("the recording ended %lld ms after Cancel", clock.elapsed());
  QCOMPARE(finished.at(0).at(0).toBool(), false);
  const QString message = finished.at(0).at(1).toString();
  QVERIFY2(message.startsWith(QStringLiteral("Cancelled; the session keeps what was recorded")), qPrintable(message));
  QCOMPARE(finished.at(0).at(2).toString(), session);
  QCOMPARE(runPeat({QStringLiteral("info"), QStringLiteral("--verify"), session}), 0);
  const QJsonArray runs = sessionRuns(session);
  QCOMPARE(runs.size(), qsizetype(1));
  QCOMPARE(runs.at(0)[QStringLiteral("status")].toString(), QStringLiteral("cancelled"));
  QVERIFY2(runs.at(0)[QStringLiteral("iterations_complete")].toInt() >= 1,
           qPrintable(QString::fromUtf8(QJsonDocument(runs.at(0).toObject()).toJson())));
}

QTEST_MAIN(TestRunPanelRecord)
#include "tst_runpanel_record.moc"
