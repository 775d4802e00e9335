// SPDX-License-Identifier: MIT
// Calls a user kernel failed in its kernel host (issue 34) in the workbench: a recorded MLP session
// (the cli_mlp_ro fixture, copied) replayed through the late-failure plugins of tests/plugins
// (every GEMM with 10 output columns: the MLP's fc3 forward), a segfault analysed, an out-of-bounds
// write not. The tree lists the failed calls among the others, marked with their outcome; their
// page shows the recorded shapes, the failure line, the verdict kernel_crash (or how to get one),
// and a command that, copied and run, replays that call alone and fails it again. Choosing the
// verdict in the table opens the same page.
#include <QApplication>
#include <QClipboard>
#include <QProcess>
#include <QPushButton>
#include <QTableView>
#include <QTemporaryDir>
#include <QTreeView>
#include <QtTest>

#include "tests/gui/settle.h"

#include "core/store/session.h"
#include "views/callpage.h"
#include "views/mainwindow.h"
#include "views/sessiontreemodel.h"
#include "views/verdicttablemodel.h"

using peat::views::MainWindow;
using peat::views::SessionTreeModel;

namespace {

QString plugin(const char* kind) {
  return qEnvironmentVariable("PEAT_TEST_PLUGINS") + QStringLiteral("/libpeat_late_%1.so").arg(QLatin1String(kind));
}

// Runs peat with `args`; its stderr, or a failure message with both streams.
bool runPeat(const QStringList& args, QString* err = nullptr) {
  QProcess p;
  p.start(qEnvironmentVariable("PEAT_CLI"), args);
  if (!p.waitForFinished(180000) || p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0) {
    qWarning("peat %s: %s %s", qPrintable(args.join(QLatin1Char(' '))), p.readAllStandardOutput().constData(),
             p.readAllStandardError().constData());
    return false;
  }
  if (err) *err = QString::fromUtf8(p.readAllStandardError());
  return true;
}

}  // namespace

class TestKernelFailures : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void treeMarksTheFailedCalls();
  void pageShowsShapesFailureAndVerdict();
  void copiedCommandReplaysTheFailure();
  void verdictOpensTheFailedCall();
  void unanalysedRunSaysHowToAnalyse();

 private:
  QTemporaryDir dir_;
  QString session_;
  QStringList fc3Forward_;  // the recorded fc3 forward calls: the ones the plugins fail
};

void TestKernelFailures::initTestCase() {
  QVERIFY2(QFileInfo::exists(qEnvironmentVariable("PEAT_CLI")), "PEAT_CLI names no peat program (run through ctest)");
  session_ = dir_.filePath(QStringLiteral("failures.h5"));
  QVERIFY(QFile::copy(qEnvironmentVariable("PEAT_RECORDED_SESSION"), session_));
  QVERIFY(runPeat({QStringLiteral("playback"), QStringLiteral("-s"), session_, QStringLiteral("-k"),
                QStringLiteral("plugin:path=") + plugin("segv"), QStringLiteral("--store-outputs"), QStringLiteral("--name"),
                QStringLiteral("crash")}));
  QVERIFY(runPeat({QStringLiteral("analyze"), QStringLiteral("--session"), session_, QStringLiteral("--run"),
                   QStringLiteral("crash")}));
  QVERIFY(runPeat({QStringLiteral("playback"), QStringLiteral("-s"), session_, QStringLiteral("-k"),
                QStringLiteral("plugin:path=") + plugin("overflow"), QStringLiteral("--name"), QStringLiteral("scribble")}));
  // which calls fail, from the recording itself (not from what the playback wrote)
  const peat::store::SessionSummary summary = peat::store::SessionReader(session_.toStdString()).summary();
  for (const peat::store::RunInfo& r : summary.runs)
    if (r.name == "golden")
      for (const peat::store::IterationInfo& it : r.iterations)
        for (const peat::store::CallInfo& c : it.calls)
          if (c.id.layer == "fc3" && c.id.phase == peat::store::Phase::Forward) fc3Forward_ << QString::fromStdString(c.path);
  QVERIFY2(fc3Forward_.size() == 2, qPrintable(fc3Forward_.join(QLatin1Char(' '))));
}

void TestKernelFailures::treeMarksTheFailedCalls() {
  MainWindow w;
  w.setQuietErrors(true);
  QVERIFY(w.openSession(session_));
  SessionTreeModel* m = w.sessionModel();
  for (const char* run : {"crash", "scribble"}) {
    for (const QString& call : fc3Forward_) {
      const QModelIndex node = m->findCall(run, call);
      QVERIFY2(node.isValid(), qPrintable(call));  // listed, though the playback kept no call for it
      QCOMPARE(node.data().toString(), QStringLiteral("#4 fc3"));
      const QString outcome = node.data(SessionTreeModel::OutcomeRole).toString();
      QCOMPARE(outcome, QLatin1String(std::string(run) == "crash" ? "crash:SIGSEGV" : "out_of_bounds"));
      const auto detail = [](const QModelIndex& i) {
        return i.siblingAtColumn(SessionTreeModel::DetailColumn).data().toString();
      };
      QVERIFY(detail(node).endsWith(QStringLiteral("kernel ") + outcome));
      QVERIFY(node.data(Qt::ForegroundRole).isValid());
      QVERIFY(detail(node.parent()).contains(QStringLiteral("1 failed")));
      // in call order among the calls that ran ("#0 fc1", "#2 fc2", "#4 fc3", "#5 fc3", ...; a
      // playback without --store-outputs lists none of those)
      const bool stored = std::string(run) == "crash";
      QVERIFY(!stored || (node.row() > 0 && node.row() + 1 < m->rowCount(node.parent())));
      QVERIFY(stored || m->rowCount(node.parent()) == 1);
      const auto indexAt = [&](int row) {  // "#4 fc3" -> 4
        return m->index(row, 0, node.parent()).data().toString().section(QLatin1Char(' '), 0, 0).mid(1).toInt();
      };
      for (int r = 1; r < m->rowCount(node.parent()); ++r) QVERIFY(indexAt(r - 1) < indexAt(r));
    }
    // every other call of the run is an ordinary one
    int marked = 0;
    const QModelIndex top = m->findPath(QLatin1String(run));
    for (int i = 0; i < m->rowCount(top); ++i)
      for (int c = 0; c < m->rowCount(m->index(i, 0, top)); ++c)
        marked += !m->index(c, 0, m->index(i, 0, top)).data(SessionTreeModel::OutcomeRole).toString().isEmpty();
    QCOMPARE(marked, 2);
  }
}

void TestKernelFailures::pageShowsShapesFailureAndVerdict() {
  MainWindow w;
  w.setQuietErrors(true);
  QVERIFY(w.openSession(session_));
  QVERIFY(peat::testsupport::selectAndSettle(w, QStringLiteral("crash/iteration 0/#4 fc3")));
  peat::views::CallPage* page = w.callPage();
  QCOMPARE(qobject_cast<QTabWidget*>(w.centralWidget())->currentWidget(), page);
  QVERIFY2(page->titleText().startsWith(QStringLiteral("#4 fc3 linear forward: kernel crash:SIGSEGV (run crash, ")),
           qPrintable(page->titleText()));
  const QString details = page->detailsText();
  // the recorded call's tensors, as the session lists them
  const auto tensors = peat::store::SessionReader(session_.toStdString()).callTensors("golden", fc3Forward_[0].toStdString());
  QCOMPARE(tensors.size(), std::size_t(4));  // input, weight, bias, output
  for (const peat::store::TensorInfo& t : tensors) {
    QStringList dims;
    for (uint64_t d : t.shape) dims << QString::number(d);
    const QString line = QStringLiteral("%1 %2[%3]").arg(QString::fromStdString(t.name), QString::fromStdString(t.dtype),
                                                          dims.join(QLatin1Char('x')));
    QVERIFY2(details.contains(line), qPrintable(line + QStringLiteral("\n") + details));
    if (t.name == "output") QCOMPARE(t.shape.back(), uint64_t(10));  // the GEMMs the plugin fails
  }
  QVERIFY2(details.contains(QStringLiteral("Kernel failure: crash:SIGSEGV")), qPrintable(details));
  QVERIFY2(details.contains(QStringLiteral("it 0 call 4 fc3 linear forward: plugin 'late-failure' crashed in the kernel host "
                                           "(signal 11")),
           qPrintable(details));
  QVERIFY(details.contains(QStringLiteral("Verdict: kernel_crash (1)")));
  QVERIFY(details.contains(QStringLiteral("peat playback --call ") + fc3Forward_[0]));
  // the verdict table shows the analysis, this call's row highlighted
  peat::views::VerdictTableModel* verdicts = w.verdictModel();
  const int row = verdicts->rowOf(fc3Forward_[0]);
  QVERIFY(row >= 0);
  QCOMPARE(verdicts->verdict(row)->model, std::string("kernel_crash"));
  QVERIFY(w.verdictTable()->selectionModel()->isRowSelected(row, {}));
  w.grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/kernelfailure.png"));
}

// The command the page offers, copied and run as a user would: the call alone, failing again.
void TestKernelFailures::copiedCommandReplaysTheFailure() {
  MainWindow w;
  w.setQuietErrors(true);
  QVERIFY(w.openSession(session_));
  QVERIFY(peat::testsupport::selectAndSettle(w, QStringLiteral("crash/iteration 2/#4 fc3")));
  QApplication::clipboard()->clear();
  w.callPage()->copyReplayButton()->click();
  const QString command = QApplication::clipboard()->text();
  QCOMPARE(command, w.callPage()->replayCommand());
  QVERIFY2(command.contains(QStringLiteral(" --call ") + fc3Forward_[1]), qPrintable(command));
  QVERIFY2(command.contains(QStringLiteral(" -k plugin:path=") + plugin("segv")), qPrintable(command));
  QStringList words = QProcess::splitCommand(command);
  QCOMPARE(words.takeFirst(), QStringLiteral("peat"));
  QString err;
  QVERIFY(runPeat(words, &err));
  QVERIFY2(err.contains(QStringLiteral("the kernel failed 1 of 1 calls (crash:SIGSEGV 1)")), qPrintable(err));
  QVERIFY(err.contains(QStringLiteral("it 2 call 4 fc3 linear forward")));
  QVERIFY(QFileInfo::exists(dir_.filePath(QStringLiteral("failures-replay.h5"))));  // beside, not into, the session
}

void TestKernelFailures::verdictOpensTheFailedCall() {
  MainWindow w;
  w.setQuietErrors(true);
  QVERIFY(w.openSession(session_));
  QVERIFY(peat::testsupport::selectAndSettle(w, QStringLiteral("crash")));
  peat::views::VerdictTableModel* verdicts = w.verdictModel();
  const int row = verdicts->rowOf(fc3Forward_[1]);
  QVERIFY(row >= 0);
  QCOMPARE(verdicts->verdict(row)->model, std::string("kernel_crash"));
  // named as the tree names the call, not by its path
  QCOMPARE(verdicts->index(row, peat::views::VerdictTableModel::CallColumn).data().toString(),
           QStringLiteral("#4 fc3 (iteration 2)"));
  w.verdictTable()->selectionModel()->setCurrentIndex(verdicts->index(row, 0),
                                                      QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  QVERIFY(peat::testsupport::settle(w));
  QCOMPARE(w.currentItemPath(), QStringLiteral("crash/iteration 2/#4 fc3"));
  QVERIFY2(w.callPage()->titleText().contains(fc3Forward_[1]), qPrintable(w.callPage()->titleText()));
  QVERIFY(w.callPage()->detailsText().contains(QStringLiteral("Verdict: kernel_crash")));
  QVERIFY(!w.callPage()->replayCommand().isEmpty());
  // an analysed call that ran has no replay row
  QVERIFY(peat::testsupport::selectAndSettle(w, QStringLiteral("crash/iteration 2/#0 fc1")));
  QVERIFY(w.callPage()->replayCommand().isEmpty());
  QVERIFY(w.callPage()->detailsText().contains(QStringLiteral("max |error|")));
}

void TestKernelFailures::unanalysedRunSaysHowToAnalyse() {
  MainWindow w;
  w.setQuietErrors(true);
  QVERIFY(w.openSession(session_));
  QVERIFY(peat::testsupport::selectAndSettle(w, QStringLiteral("scribble/iteration 0/#4 fc3")));
  QString details = w.callPage()->detailsText();
  QVERIFY2(details.contains(QStringLiteral("Kernel failure: out_of_bounds")), qPrintable(details));
  QVERIFY2(details.contains(QStringLiteral("wrote past the end of output 2 [16x10]")), qPrintable(details));
  QVERIFY(details.contains(QStringLiteral("peat analyze --session ")));
  QVERIFY(details.contains(QStringLiteral("--run scribble")));
  // the run keeps the line of its first failure only: the second call says so
  QVERIFY(peat::testsupport::selectAndSettle(w, QStringLiteral("scribble/iteration 2/#4 fc3")));
  details = w.callPage()->detailsText();
  QVERIFY2(details.contains(QStringLiteral("keeps the line of its first failure only: it 0 call 4 fc3")), qPrintable(details));
}

QTEST_MAIN(TestKernelFailures)
#include "tst_kernelfailures.moc"
