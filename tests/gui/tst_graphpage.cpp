// SPDX-License-Identifier: MIT
// Issue 43, item 6: the Graph page. On a real analysed MLP session (PEAT_ANALYSED_SESSION) and a
// real SAVE analysis of LeNet (PEAT_SAVE_SESSION), both copied first: the page follows the tree's
// selection (a run, a call, a SAVE layer, no session), colours each op as the session says (the
// verdicts of its calls, read here with the session layer; the layer's vulnerable bits), and a
// click on an op selects exactly its calls, or opens its SAVE layer's map. The GUI thread never
// reads the session while it does so.
#include "views/qcustomplot_include.h"  // first: see the header

#include <QtTest>

#include <QTabWidget>
#include <QThread>
#include <QTreeView>

#include <atomic>
#include <map>
#include <set>

#include "core/detector/detector.h"
#include "core/save/analysis_record.h"
#include "core/store/session.h"
#include "tests/gui/settle.h"
#include "views/graphpanel.h"
#include "views/mainwindow.h"
#include "views/palette.h"
#include "views/savepanel.h"
#include "views/sessiontreemodel.h"

using peat::views::GraphPanel;
using peat::views::MainWindow;
using peat::views::SessionTreeModel;


class TestGraphPage : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void cleanupTestCase();
  void runIsColouredByItsVerdicts_data();
  void runIsColouredByItsVerdicts();
  void callFramesItsOp();
  void clickSelectsTheOpsCalls();
  void saveAnalysisByItsBits();
  void closingSaysWhy();

 private:
  QTemporaryDir dir_;
  QString analysed_, saved_;
  std::unique_ptr<MainWindow> window_;
  // run -> layer -> its calls' paths; run -> call -> verdict model (its newest analysis)
  std::map<std::string, std::map<std::string, std::set<std::string>>> callsOf_;
  std::map<std::string, std::map<std::string, std::string>> verdictOf_;
  GraphPanel* graph() const { return window_->graphPanel(); }
  void showGraphTab() {
    auto* tabs = qobject_cast<QTabWidget*>(window_->centralWidget());
    tabs->setCurrentWidget(graph());
  }
};

void TestGraphPage::initTestCase() {
  for (auto [variable, copy] : {std::pair{"PEAT_ANALYSED_SESSION", &analysed_}, std::pair{"PEAT_SAVE_SESSION", &saved_}}) {
    const QString source = qEnvironmentVariable(variable);
    QVERIFY2(QFileInfo::exists(source), variable);
    *copy = dir_.filePath(QFileInfo(source).fileName());
    QVERIFY(QFile::copy(source, *copy));
  }
  const peat::store::SessionReader reader(analysed_.toStdString());
  const peat::store::SessionSummary summary = reader.summary();
  std::map<std::string, std::string> analysisOf;
  for (const peat::store::RunInfo& r : summary.runs) {
    const auto at = r.attributes.find("candidate_run");
    if (r.spec.kind == "analysis" && at != r.attributes.end()) analysisOf[at->second] = r.name;  // the newest last
  }
  for (const peat::store::RunInfo& r : summary.runs) {
    for (const peat::store::IterationInfo& it : r.iterations)
      for (const peat::store::CallInfo& c : it.calls) callsOf_[r.name][c.id.layer].insert(c.path);
    if (analysisOf.count(r.name))
      for (const peat::store::Verdict& v : reader.verdicts(analysisOf.at(r.name))) verdictOf_[r.name][v.call] = v.model;
  }
  QVERIFY(verdictOf_.count("edge") && verdictOf_.count("stored"));
  window_ = std::make_unique<MainWindow>();
  window_->setQuietErrors(true);
  window_->resize(1366, 768);
  window_->show();
  QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
  QVERIFY(window_->openSession(analysed_));
  QVERIFY(peat::testsupport::settle(*window_));
  peat::store::setSessionAccessObserver(countGuiThreadRead);
}

void TestGraphPage::cleanupTestCase() {
  peat::store::setSessionAccessObserver(nullptr);
  QCOMPARE(guiThreadReads.load(), 0);
}

void TestGraphPage::runIsColouredByItsVerdicts_data() {
  QTest::addColumn<QString>("run");
  QTest::newRow("tile-edge bug") << "edge";
  QTest::newRow("fp16") << "stored";
  QTest::newRow("bit flips") << "flips";
  QTest::newRow("golden: no analysis") << "golden";
}

// Each op's colour is the class of the most serious verdict among its calls, as the session holds them.
void TestGraphPage::runIsColouredByItsVerdicts() {
  QFETCH(QString, run);
  QVERIFY(peat::testsupport::selectAndSettle(*window_, run));
  QCOMPARE(graph()->shownKey(), QStringLiteral("run:") + run);
  QVERIFY(graph()->hasGraph());
  const auto& g = graph()->graph();
  const std::string name = run.toStdString();
  QCOMPARE(g.callRun, name);
  int coloured = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const std::set<std::string>& calls = callsOf_[name][g.nodes[i].name];
    QCOMPARE(std::set<std::string>(g.nodes[i].calls.begin(), g.nodes[i].calls.end()), calls);
    int worst = -1;  // 0 legitimate, 1 unknown, 2 error
    for (const std::string& c : calls)
      if (verdictOf_[name].count(c)) {
        const std::string cls = peat::detector::verdictClass(verdictOf_[name].at(c));
        worst = std::max(worst, cls == "error" ? 2 : cls == "unknown" ? 1 : 0);
      }
    const QColor want = worst < 0 ? QColor(0xee, 0xee, 0xee)
                                  : peat::views::palette::verdictClass(worst == 2 ? "error" : worst == 1 ? "unknown" : "legitimate");
    QCOMPARE(graph()->nodeColour(int(i)), want);
    coloured += worst >= 0;
  }
  QCOMPARE(coloured, run == QLatin1String("golden") ? 0 : 3);  // fc1, fc2, fc3
}

void TestGraphPage::callFramesItsOp() {
  for (const char* layer : {"fc1", "fc3"}) {
    const std::string first = *callsOf_["edge"][layer].begin();
    const QModelIndex node = window_->sessionModel()->findCall("edge", QString::fromStdString(first));
    QVERIFY(node.isValid());
    QVERIFY(peat::testsupport::selectAndSettle(*window_, SessionTreeModel::pathOf(node)));
    QCOMPARE(graph()->shownKey(), QStringLiteral("run:edge"));
    QCOMPARE(graph()->highlighted(), graph()->graph().findNode(layer));
  }
  QVERIFY(peat::testsupport::selectAndSettle(*window_, QStringLiteral("edge")));
  QCOMPARE(graph()->highlighted(), -1);
}

// A click on fc2 selects exactly fc2's calls of the run, its most serious verdict's call current.
void TestGraphPage::clickSelectsTheOpsCalls() {
  QVERIFY(peat::testsupport::selectAndSettle(*window_, QStringLiteral("edge")));
  showGraphTab();
  const int fc2 = graph()->graph().findNode("fc2");
  QVERIFY(fc2 >= 0);
  QTest::mouseClick(graph()->viewport(), Qt::LeftButton, Qt::NoModifier, graph()->nodeViewPos(fc2));
  QVERIFY(peat::testsupport::settle(*window_));
  auto* tree = window_->findChild<QTreeView*>();
  std::set<std::string> selected;
  for (const QModelIndex& i : tree->selectionModel()->selectedRows(SessionTreeModel::NameColumn)) {
    QCOMPARE(i.data(SessionTreeModel::KeyRole).toString(), QStringLiteral("edge"));
    selected.insert(i.data(SessionTreeModel::PathRole).toString().toStdString());
  }
  QCOMPARE(selected, callsOf_["edge"]["fc2"]);
  const std::string current = tree->currentIndex().data(SessionTreeModel::PathRole).toString().toStdString();
  QVERIFY(selected.count(current));
  QCOMPARE(std::string(peat::detector::verdictClass(verdictOf_["edge"].at(current))), std::string("error"));
  QCOMPARE(graph()->highlighted(), fc2);  // still framed, the same graph
  QCOMPARE(graph()->shownKey(), QStringLiteral("run:edge"));
  QVERIFY(graph()->grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/graphpage-verdicts.png")));
}

// A SAVE analysis: each layer's op coloured by its vulnerable bits per value; a click opens its map.
void TestGraphPage::saveAnalysisByItsBits() {
  peat::store::setSessionAccessObserver(nullptr);  // read here
  peat::save::StoredAnalysis a;
  {
    const peat::store::SessionReader reader(saved_.toStdString());
    a = peat::save::loadAnalysis(reader, "lenet-symbolic");
  }
  peat::store::setSessionAccessObserver(countGuiThreadRead);
  QVERIFY(window_->openSession(saved_));
  QVERIFY(peat::testsupport::selectAndSettle(*window_, QStringLiteral("SAVE/lenet-symbolic")));
  QCOMPARE(graph()->shownKey(), QStringLiteral("save:lenet-symbolic"));
  const auto& g = graph()->graph();
  QCOMPARE(graph()->colour(), GraphPanel::Colour::VulnerableBits);
  for (const peat::save::StoredLayer& l : a.layers) {
    const int at = g.findNode(l.name);
    QVERIFY2(at >= 0, l.name.c_str());
    QCOMPARE(graph()->nodeColour(at), peat::views::palette::viridis(l.vulnerableBits / double(l.elements) / 32.0));
  }
  graph()->setColour(GraphPanel::Colour::ReliableTiles);
  for (const peat::save::StoredLayer& l : a.layers) {
    int64_t reliable = 0;
    for (uint8_t r : l.tileReliable) reliable += r;
    QCOMPARE(graph()->nodeColour(g.findNode(l.name)),
             peat::views::palette::viridis(double(reliable) / double(l.tilesDown * l.tilesAcross)));
  }
  // a layer selected in the tree is framed; an op clicked opens its layer's map
  QVERIFY(peat::testsupport::selectAndSettle(*window_, QStringLiteral("SAVE/lenet-symbolic/pool1")));
  QCOMPARE(graph()->highlighted(), g.findNode("pool1"));
  showGraphTab();
  const int conv2 = g.findNode("conv2");
  QTest::mouseClick(graph()->viewport(), Qt::LeftButton, Qt::NoModifier, graph()->nodeViewPos(conv2));
  QVERIFY(peat::testsupport::settle(*window_));
  auto* tree = window_->findChild<QTreeView*>();
  QCOMPARE(SessionTreeModel::pathOf(tree->currentIndex()), QStringLiteral("SAVE/lenet-symbolic/conv2"));
  QCOMPARE(window_->savePanel()->currentTab(), peat::views::SavePanel::MapTab);
  int index = -1;
  for (std::size_t i = 0; i < a.layers.size(); ++i)
    if (a.layers[i].name == "conv2") index = int(i);
  QCOMPARE(window_->savePanel()->currentLayer(), index);
  QCOMPARE(graph()->highlighted(), conv2);
  showGraphTab();
  graph()->setColour(GraphPanel::Colour::VulnerableBits);
  QVERIFY(graph()->grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/graphpage-save.png")));
}

void TestGraphPage::closingSaysWhy() {
  window_->closeSession();
  QVERIFY(!graph()->hasGraph());
  QVERIFY(graph()->message().contains(QStringLiteral("No session is open")));
}

QTEST_MAIN(TestGraphPage)
#include "tst_graphpage.moc"
