// SPDX-License-Identifier: MIT
// Issue 33: a page shows the selection it was given or says why it cannot, never a previous one.
// On a real analysed session (PEAT_ANALYSED_SESSION: an MLP profiled, replayed through fp16, single
// bit flips and the tile-edge bug, each analysed), every call of every run is opened by --select
// (selectItem), by a mouse click, after the session is opened again and after another run's call
// was shown; each time the call page's run, call and verdict, the error dock's analysis and the
// verdict table are checked against the session as read here. The GUI thread never reads the
// session while it does so.
#include "views/qcustomplot_include.h"  // first: see the header

#include <QtTest>

#include <QTableView>
#include <QThread>
#include <QTreeView>

#include <atomic>
#include <map>
#include <set>

#include "core/analysis/session_analysis.h"
#include "core/store/session.h"
#include "tests/gui/settle.h"
#include "views/callpage.h"
#include "views/errorplotpanel.h"
#include "views/explainpanel.h"
#include "views/mainwindow.h"
#include "views/sessiontreemodel.h"
#include "views/verdicttablemodel.h"

using peat::views::MainWindow;
using peat::views::SessionTreeModel;

namespace {

// What the session says of one call, read here without the workbench.
struct Truth {
  QString run, iteration, name, path;  // the tree's names and the call's path
  std::string analysis;                // the run's newest analysis ("" none)
  std::string verdict;                 // that analysis's verdict for the call ("" none)
  std::size_t verdictRows = 0;         // that analysis's verdicts
};
}  // namespace

class TestPageTruth : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void cleanupTestCase();
  void everyCallBySelect();
  void everyCallByClick();
  void afterReopen();
  void callWithoutAnalysisSaysWhy();
  void runsShowTheirOwnVerdicts();

 private:
  QTemporaryDir dir_;
  QString session_;
  std::unique_ptr<MainWindow> window_;
  std::vector<Truth> calls_;
  std::map<std::string, std::string> analysisOf_;  // run -> its newest analysis
  std::map<std::string, std::size_t> verdictsOf_;  // analysis -> its verdicts

  QModelIndex nodeOf(const Truth& t) const;
  // The pages show `t`: its run, path and verdict, its analysis's report and verdicts.
  void checkShows(const Truth& t, const char* how);
  void checkNoCallShown(const QString& item);
};

void TestPageTruth::initTestCase() {
  const QString source = qEnvironmentVariable("PEAT_ANALYSED_SESSION");
  QVERIFY2(QFileInfo::exists(source), "PEAT_ANALYSED_SESSION names no session (run through ctest)");
  session_ = dir_.filePath(QStringLiteral("analysed.h5"));
  QVERIFY(QFile::copy(source, session_));
  // the truth, read with the session layer alone
  const peat::store::SessionReader reader(session_.toStdString());
  const peat::store::SessionSummary summary = reader.summary();
  for (const peat::store::RunInfo& r : summary.runs) {
    const auto at = r.attributes.find("candidate_run");
    if (r.spec.kind == "analysis" && at != r.attributes.end()) analysisOf_[at->second] = r.name;  // the newest last
  }
  for (const peat::store::RunInfo& r : summary.runs) {
    const auto a = analysisOf_.find(r.name);
    std::vector<peat::store::Verdict> verdicts;
    if (a != analysisOf_.end()) verdicts = reader.verdicts(a->second);
    if (a != analysisOf_.end()) verdictsOf_[a->second] = verdicts.size();
    for (const peat::store::IterationInfo& it : r.iterations)
      for (const peat::store::CallInfo& c : it.calls) {
        Truth t;
        t.run = QString::fromStdString(r.name);
        t.iteration = QStringLiteral("iteration %1").arg(it.iteration);
        t.name = QStringLiteral("#%1 %2").arg(c.id.callIndex).arg(QString::fromStdString(c.id.layer));
        t.path = QString::fromStdString(c.path);
        if (a != analysisOf_.end()) t.analysis = a->second;
        t.verdictRows = verdicts.size();
        for (const peat::store::Verdict& v : verdicts)
          if (v.call == c.path) t.verdict = v.model;
        calls_.push_back(t);
      }
  }
  // the session holds analysed runs whose verdicts differ, or the test could not tell them apart
  std::set<std::string> models;
  for (const Truth& t : calls_) models.insert(t.verdict);
  QVERIFY2(models.size() >= 3, "the fixture's analyses give fewer than two different verdicts");
  QVERIFY(analysisOf_.count("flips") && analysisOf_.count("edge") && analysisOf_.count("stored"));
  window_ = std::make_unique<MainWindow>();
  window_->setQuietErrors(true);
  window_->resize(1366, 768);
  window_->show();
  QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
  QVERIFY(window_->openSession(session_));
  peat::store::setSessionAccessObserver(countGuiThreadRead);
}

void TestPageTruth::cleanupTestCase() {
  peat::store::setSessionAccessObserver(nullptr);
  QCOMPARE(guiThreadReads.load(), 0);  // no selection read the session on the GUI thread
}

QModelIndex TestPageTruth::nodeOf(const Truth& t) const {
  const SessionTreeModel* m = window_->sessionModel();
  for (int r = 0; r < m->rowCount(); ++r) {
    const QModelIndex run = m->index(r, 0);
    if (run.data().toString() != t.run) continue;
    for (int i = 0; i < m->rowCount(run); ++i)
      for (int c = 0; c < m->rowCount(m->index(i, 0, run)); ++c) {
        const QModelIndex call = m->index(c, 0, m->index(i, 0, run));
        if (call.data(SessionTreeModel::PathRole).toString() == t.path) return call;
      }
  }
  return {};
}

void TestPageTruth::checkShows(const Truth& t, const char* how) {
  const QString where = QStringLiteral("%1 %2/%3/%4").arg(QLatin1String(how), t.run, t.iteration, t.name);
  const peat::views::CallPage* page = window_->callPage();
  const QString title = page->titleText(), details = page->detailsText();
  QVERIFY2(title.contains(t.name) && title.contains(QStringLiteral("run %1,").arg(t.run)) && title.contains(t.path),
           qPrintable(where + QStringLiteral(": title ") + title));
  if (t.analysis.empty()) {  // nothing to show: the page says why, and shows no verdict
    QVERIFY2(!details.contains(QStringLiteral("Verdict:")), qPrintable(where + QStringLiteral(": ") + details));
    return;
  }
  const QString verdictLine = QStringLiteral("Verdict: %1").arg(QString::fromStdString(t.verdict));
  if (t.verdict.empty()) QVERIFY2(!details.contains(QStringLiteral("Verdict:")), qPrintable(where + QStringLiteral(": ") + details));
  else QVERIFY2(details.contains(verdictLine), qPrintable(where + QStringLiteral(": wants ") + verdictLine + QStringLiteral(", shows ") + details));
  // the plots on the page and in the dock are this call's report, from its run's analysis
  for (const peat::views::ErrorPlotPanel* plots : {page->plots(), window_->errorPlot()}) {
    const peat::analyzer::StoredCallReport* shown = plots->firstReport();
    QVERIFY2(shown, qPrintable(where));
    QCOMPARE(shown->analysisRun, t.analysis);
    QCOMPARE(shown->call, t.path.toStdString());
    QCOMPARE(shown->verdict, t.verdict);
  }
  // the Explain dock explains this call's verdict (the overview for a call without one)
  const QString explained = window_->findChild<peat::views::ExplainPanel*>()->toPlainText();
  if (t.verdict.empty()) QVERIFY2(explained.startsWith(QStringLiteral("Reading the workbench")), qPrintable(where + QStringLiteral(": ") + explained.left(80)));
  else QVERIFY2(explained.startsWith(QString::fromStdString(t.verdict)), qPrintable(where + QStringLiteral(": ") + explained.left(80)));
  // the verdict table holds that analysis's verdicts, the call's row with its verdict
  const peat::views::VerdictTableModel* table = window_->verdictModel();
  QCOMPARE(std::size_t(table->rowCount()), t.verdictRows);
  // ... selected and current (the focus frame) when it has one, and no other row
  const QModelIndexList rows = window_->verdictTable()->selectionModel()->selectedRows();
  const int current = window_->verdictTable()->selectionModel()->currentIndex().row();
  if (t.verdict.empty()) {
    QVERIFY2(rows.isEmpty() && current < 0, qPrintable(where + QStringLiteral(": a verdict row is highlighted")));
  } else {
    QCOMPARE(rows.size(), 1);
    QCOMPARE(rows.front().row(), table->rowOf(t.path));
    QCOMPARE(current, table->rowOf(t.path));
  }
  if (!t.verdict.empty()) {
    const int row = table->rowOf(t.path);
    QVERIFY2(row >= 0, qPrintable(where));
    QCOMPARE(table->verdict(row)->model, t.verdict);
    // named as the tree names it, the path kept for the CSV
    QCOMPARE(table->index(row, 0).data().toString(), QStringLiteral("%1 (%2)").arg(t.name, t.iteration));
    QVERIFY(table->csv().contains(t.path + QLatin1Char(',') + t.name + QStringLiteral(" (") + t.iteration + QLatin1Char(')')));
  }
}

// --select (selectItem: the command line's option and the tour's steps), each time straight after
// a call of another run was shown, so that the verdict table held another analysis.
void TestPageTruth::everyCallBySelect() {
  for (std::size_t i = 0; i < calls_.size(); ++i) {
    const Truth& before = calls_[(i + calls_.size() / 2) % calls_.size()];
    const Truth& t = calls_[i];
    QVERIFY(window_->selectItem(before.run + QLatin1Char('/') + before.iteration + QLatin1Char('/') + before.name));
    // no wait: the next selection comes while the previous one may still be reading
    QVERIFY(window_->selectItem(t.run + QLatin1Char('/') + t.iteration + QLatin1Char('/') + t.name));
    QVERIFY(peat::testsupport::settle(*window_));
    checkShows(t, "select");
    if (QTest::currentTestFailed()) return;
  }
}

void TestPageTruth::everyCallByClick() {
  QTreeView* tree = window_->sessionTree();
  for (std::size_t i = 0; i < calls_.size(); i += 3) {  // every third: clicks scroll the tree
    const Truth& t = calls_[i];
    const QModelIndex node = nodeOf(t);
    QVERIFY(node.isValid());
    tree->scrollTo(node);
    // the view lays itself out later (delayed layout, more so on a loaded machine): click only where the
    // node now is
    QTRY_VERIFY_WITH_TIMEOUT(tree->indexAt(tree->visualRect(node).center()) == node, 5000);
    QTest::mouseClick(tree->viewport(), Qt::LeftButton, Qt::NoModifier, tree->visualRect(node).center());
    QVERIFY(peat::testsupport::settle(*window_));
    QCOMPARE(tree->currentIndex().data(SessionTreeModel::PathRole).toString(), t.path);
    checkShows(t, "click");
    if (QTest::currentTestFailed()) return;
  }
}

// The session opened again (File > Open of the same file, or the reopen after a run): the call
// shown is found again and shown anew from the new reader, or the pages say to select one.
void TestPageTruth::afterReopen() {
  const Truth& t = calls_[calls_.size() - 1];
  QVERIFY(peat::testsupport::selectAndSettle(*window_, t.run + QLatin1Char('/') + t.iteration + QLatin1Char('/') + t.name));
  checkShows(t, "before reopening");
  QVERIFY(window_->openSession(session_));
  QVERIFY(peat::testsupport::settle(*window_));
  checkShows(t, "reopened");
  QCOMPARE(window_->currentItemPath(), t.run + QLatin1Char('/') + t.iteration + QLatin1Char('/') + t.name);
  // another file: nothing of this one stays up
  const QString other = dir_.filePath(QStringLiteral("other.h5"));
  QVERIFY(QFile::copy(session_, other));
  QVERIFY(window_->openSession(other));
  QVERIFY(peat::testsupport::settle(*window_));
  QVERIFY2(!window_->callPage()->titleText().contains(t.path), qPrintable(window_->callPage()->titleText()));
  QVERIFY(!window_->callPage()->detailsText().contains(QStringLiteral("Verdict:")));
  QCOMPARE(window_->verdictModel()->rowCount() > 0, true);  // the first analysis, read with the open
  QVERIFY(!window_->errorPlot()->firstReport());
  QVERIFY(window_->openSession(session_));
  QVERIFY(peat::testsupport::settle(*window_));
}

// A call of a run without analysis (the golden recording) after an analysed call: its page says
// why it has nothing to show, and no plot keeps the call before.
void TestPageTruth::callWithoutAnalysisSaysWhy() {
  const Truth* analysed = nullptr;
  const Truth* bare = nullptr;
  for (const Truth& t : calls_) {
    if (!t.verdict.empty() && !analysed) analysed = &t;
    if (t.analysis.empty() && !bare) bare = &t;
  }
  QVERIFY(analysed && bare);
  QVERIFY(peat::testsupport::selectAndSettle(*window_, analysed->run + QLatin1Char('/') + analysed->iteration + QLatin1Char('/') + analysed->name));
  QVERIFY(window_->selectItem(bare->run + QLatin1Char('/') + bare->iteration + QLatin1Char('/') + bare->name));
  QVERIFY(peat::testsupport::settle(*window_));
  const QString title = window_->callPage()->titleText();
  QVERIFY2(title.contains(QStringLiteral("has no analysis")) && title.contains(bare->run), qPrintable(title));
  QVERIFY(!window_->callPage()->plots()->firstReport());
  QVERIFY(!window_->errorPlot()->firstReport());
}

// A run or an iteration selected: the table holds that run's analysis's verdicts; no call page
// stays up beside it.
void TestPageTruth::runsShowTheirOwnVerdicts() {
  for (const auto& [run, analysis] : analysisOf_) {
    const Truth& other = calls_.front().run == QString::fromStdString(run) ? calls_.back() : calls_.front();
    QVERIFY(peat::testsupport::selectAndSettle(*window_, other.run + QLatin1Char('/') + other.iteration + QLatin1Char('/') + other.name));
    QVERIFY(window_->selectItem(QString::fromStdString(run)));
    QVERIFY(peat::testsupport::settle(*window_));
    QCOMPARE(std::size_t(window_->verdictModel()->rowCount()), verdictsOf_.at(analysis));
    QVERIFY2(!window_->callPage()->titleText().contains(other.path), qPrintable(window_->callPage()->titleText()));
    QVERIFY(!window_->callPage()->plots()->firstReport());
    checkNoCallShown(QString::fromStdString(run));
    QVERIFY(window_->selectItem(QString::fromStdString(run) + QStringLiteral("/iteration 0")));
    QVERIFY(peat::testsupport::settle(*window_));
    QCOMPARE(std::size_t(window_->verdictModel()->rowCount()), verdictsOf_.at(analysis));
    checkNoCallShown(QString::fromStdString(run) + QStringLiteral("/iteration 0"));
    // the analysis run itself, and a SAVE item: no call stays up in the docks either
    QVERIFY(peat::testsupport::selectAndSettle(*window_, other.run + QLatin1Char('/') + other.iteration + QLatin1Char('/') + other.name));
    QVERIFY(window_->selectItem(QString::fromStdString(analysis)));
    QVERIFY(peat::testsupport::settle(*window_));
    checkNoCallShown(QString::fromStdString(analysis));
  }
}

// Nothing selected is a call: the error dock, the Explain dock and the verdict table show no call.
void TestPageTruth::checkNoCallShown(const QString& item) {
  QVERIFY2(!window_->errorPlot()->firstReport(), qPrintable(item + QStringLiteral(": the error dock keeps a call")));
  QVERIFY2(window_->verdictTable()->selectionModel()->selectedRows().isEmpty() &&
               window_->verdictTable()->selectionModel()->currentIndex().row() < 0,
           qPrintable(item + QStringLiteral(": a verdict row stays highlighted")));
  const QString explained = window_->findChild<peat::views::ExplainPanel*>()->toPlainText();
  QVERIFY2(explained.startsWith(QStringLiteral("Reading the workbench")), qPrintable(item + QStringLiteral(": ") + explained.left(80)));
}

QTEST_MAIN(TestPageTruth)
#include "tst_pagetruth.moc"
