// SPDX-License-Identifier: MIT
// Issue 43, item 6: the model as a graph (core/modelgraph). Checked against the sessions as read
// here with the session layer alone: a real analysed MLP session (PEAT_ANALYSED_SESSION: replays
// through fp16, bit flips and the tile-edge bug, each analysed), a real SAVE analysis of LeNet
// (PEAT_SAVE_SESSION; each copied first), SAVE's own graphs of the zoo (data flow, skips and branches), and a session
// written here for a model no zoo knows (call order, the only structure such a session holds).
#include <QtTest>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <map>
#include <set>

#include "core/detector/detector.h"
#include "core/modelgraph/model_graph.h"
#include "core/save/analysis_record.h"
#include "core/save/graph.h"
#include "core/store/session.h"

using namespace peat;

class TestModelGraph : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void layoutKeepsInputsAbove_data();
  void layoutKeepsInputsAbove();
  void verdictsSitOnTheirLayers_data();
  void verdictsSitOnTheirLayers();
  void callOrderForAModelWithoutDataFlow();
  void saveLayersCarryTheirBits();
  void dotAndJsonSayTheSame();
  void unknownRunIsRefused();

 private:
  QTemporaryDir dir_;
  std::string analysed_, saved_;  // copies of the sessions
};

void TestModelGraph::initTestCase() {
  for (auto [variable, copy] : {std::pair{"PEAT_ANALYSED_SESSION", &analysed_}, std::pair{"PEAT_SAVE_SESSION", &saved_}}) {
    const QString source = qEnvironmentVariable(variable);
    QVERIFY2(QFileInfo::exists(source), variable);
    const QString to = dir_.filePath(QFileInfo(source).fileName());
    QVERIFY(QFile::copy(source, to));
    *copy = to.toStdString();
  }
}

namespace {
// No two nodes share a place, every input sits in a row above its user.
void checkLayout(const modelgraph::ModelGraph& g) {
  std::set<std::pair<int, double>> places;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const modelgraph::GraphNode& n = g.nodes[i];
    QVERIFY2(places.insert({n.rank, n.slot}).second, n.name.c_str());
    for (int in : n.inputs) QVERIFY2(g.nodes[std::size_t(in)].rank < n.rank, n.name.c_str());
    QVERIFY(n.rank < g.ranks);
  }
}

int nodeNamed(const modelgraph::ModelGraph& g, const std::string& name) {
  const int at = g.findNode(name);
  if (at < 0) qWarning("no node %s", name.c_str());
  return at;
}
}  // namespace

void TestModelGraph::layoutKeepsInputsAbove_data() {
  QTest::addColumn<QString>("model");
  for (const char* m : {"mlp", "lenet", "resnet", "vit", "resnet18", "grouped"}) QTest::newRow(m) << QString::fromLatin1(m);
}

void TestModelGraph::layoutKeepsInputsAbove() {
  QFETCH(QString, model);
  const save::Graph sg = save::randomGraph(model.toStdString(), 1);
  const modelgraph::ModelGraph g = modelgraph::dataFlowGraph(sg);
  QCOMPARE(g.nodes.size(), sg.nodes.size());
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    QCOMPARE(g.nodes[i].name, sg.nodes[i].name);
    QCOMPARE(g.nodes[i].inputs, sg.nodes[i].inputs);
    QCOMPARE(g.nodes[i].shape, sg.nodes[i].shape);
  }
  checkLayout(g);
  if (model == QLatin1String("resnet")) {
    // a downsampling block: its shortcut beside its first conv, the add below both of its inputs
    const auto& conv1 = g.nodes[std::size_t(nodeNamed(g, "block2.conv1"))];
    const auto& shortcut = g.nodes[std::size_t(nodeNamed(g, "block2.shortcut"))];
    QCOMPARE(shortcut.rank, conv1.rank);
    QVERIFY(shortcut.slot != conv1.slot);
    QCOMPARE(g.widestRank, 2);
  }
  if (model == QLatin1String("mlp")) {  // a chain is one column
    for (const auto& n : g.nodes) QCOMPARE(n.slot, 0.0);
    QCOMPARE(g.ranks, int(g.nodes.size()));
  }
}

void TestModelGraph::verdictsSitOnTheirLayers_data() {
  QTest::addColumn<QString>("run");
  QTest::addColumn<QString>("worst");  // the verdict class every analysed layer must show
  QTest::newRow("tile-edge bug") << "edge" << "error";
  QTest::newRow("bit flips") << "flips" << "error";
  QTest::newRow("fp16") << "stored" << "legitimate";
}

// Each verdict of the run's newest analysis counted once, on the node of its call's layer, its
// class as the detector names it; the node's most serious verdict is one of its own calls'.
void TestModelGraph::verdictsSitOnTheirLayers() {
  QFETCH(QString, run);
  QFETCH(QString, worst);
  const store::SessionReader reader(analysed_);
  const store::SessionSummary summary = reader.summaryWithoutTensors();
  const modelgraph::ModelGraph g = modelgraph::runGraph(reader, summary, run.toStdString());
  QCOMPARE(g.structure, std::string("data flow"));
  QCOMPARE(g.overlay, std::string("verdicts"));
  // the newest analysis of the run (cli_analyze_session_force may have added analysis-stored-2)
  std::vector<std::string> analyses;
  for (const store::RunInfo& r : summary.runs)
    if (r.spec.kind == "analysis" && r.attributes.count("candidate_run") && r.attributes.at("candidate_run") == run.toStdString())
      analyses.push_back(r.name);
  QVERIFY(!analyses.empty());
  QCOMPARE(g.overlayRun, analyses.back());
  QVERIFY(QString::fromStdString(g.overlayRun).startsWith(QLatin1String("analysis-") + run));
  checkLayout(g);
  // the truth: each call's layer from the summary, each verdict from the analysis run
  std::map<std::string, std::string> layerOf;
  for (const store::RunInfo& r : summary.runs)
    if (r.name == run.toStdString())
      for (const store::IterationInfo& it : r.iterations)
        for (const store::CallInfo& c : it.calls) layerOf[c.path] = c.id.layer;
  std::map<std::string, std::map<std::string, int64_t>> classes;  // layer -> class -> verdicts
  const std::vector<store::Verdict> verdicts = reader.verdicts(g.overlayRun);
  QVERIFY(!verdicts.empty());
  for (const store::Verdict& v : verdicts) ++classes[layerOf.at(v.call)][detector::verdictClass(v.model)];
  QCOMPARE(g.unplacedVerdicts, int64_t(0));
  QCOMPARE(g.unplacedCalls, int64_t(0));
  int64_t counted = 0, calls = 0;
  for (const modelgraph::GraphNode& n : g.nodes) {
    counted += n.errors + n.unknown + n.legitimate;
    calls += int64_t(n.calls.size());
    const auto& want = classes[n.name];
    QCOMPARE(n.errors, want.count("error") ? want.at("error") : 0);
    QCOMPARE(n.unknown, want.count("unknown") ? want.at("unknown") : 0);
    QCOMPARE(n.legitimate, want.count("legitimate") ? want.at("legitimate") : 0);
    for (const std::string& c : n.calls) QCOMPARE(layerOf.at(c), n.name);
    if (n.worst.empty()) continue;
    QCOMPARE(QString::fromLatin1(detector::verdictClass(n.worst)), worst);
    bool own = false;
    for (const store::Verdict& v : verdicts) own = own || (v.call == n.worstCall && v.model == n.worst);
    QVERIFY2(own, n.name.c_str());
    QCOMPARE(layerOf.at(n.worstCall), n.name);
  }
  QCOMPARE(counted, int64_t(verdicts.size()));
  QCOMPARE(calls, int64_t(layerOf.size()));
  for (const char* layer : {"fc1", "fc2", "fc3"}) QVERIFY(!g.nodes[std::size_t(nodeNamed(g, layer))].worst.empty());
  // the analysis run itself draws the same
  const modelgraph::ModelGraph same = modelgraph::runGraph(reader, summary, g.overlayRun);
  QCOMPARE(same.callRun, run.toStdString());
  QCOMPARE(modelgraph::graphJson(same), modelgraph::graphJson(g));
}

// A model no zoo knows: the recorded forward calls in the order they ran, one node per layer and
// op, shapes from the recorded outputs, backward calls on their layer's node.
void TestModelGraph::callOrderForAModelWithoutDataFlow() {
  QTemporaryDir dir;
  const std::string path = dir.filePath(QStringLiteral("own.h5")).toStdString();
  {
    store::Provenance p;
    p.model = "my_net";
    store::SessionWriter w(path, p);
    w.beginRun({"golden", "profile", "golden", ""});
    const std::vector<float> x(2 * 3, 1.0f), y(2 * 5, 1.0f);
    const store::NamedTensor in{"input_0", {store::DType::F32, {2, 3}, x.data()}};
    const store::NamedTensor out{"output", {store::DType::F32, {2, 5}, y.data()}};
    for (int64_t it = 0; it < 2; ++it) {
      w.beginIteration(it);
      int64_t k = 0;
      // outputs named "output"; the softmax's input under another name
      const store::NamedTensor soft{"input_0", out.view};
      const store::NamedTensor small{"output", in.view};
      w.recordCall({"encoder.proj", "linear", store::Phase::Forward, it, k++}, {in, out});
      w.recordCall({"encoder", "softmax", store::Phase::Forward, it, k++}, {soft, out});
      w.recordCall({"head", "linear", store::Phase::Forward, it, k++}, {soft, small});
      w.recordCall({"head", "linear", store::Phase::Backward, it, k++}, {soft, small});
      w.recordCall({"encoder.proj", "linear", store::Phase::Backward, it, k++}, {soft, small});
      w.endIteration();
    }
    w.endRun(store::RunStatus::Complete);
  }
  const store::SessionReader reader(path);
  const modelgraph::ModelGraph g = modelgraph::runGraph(reader, reader.summaryWithoutTensors(), "golden");
  QCOMPARE(g.structure, std::string("call order"));
  QVERIFY(g.note.find("no data flow") != std::string::npos);
  QCOMPARE(int(g.nodes.size()), 3);
  QCOMPARE(g.nodes[0].name, std::string("encoder.proj"));
  QCOMPARE(g.nodes[1].op, std::string("softmax"));
  QCOMPARE(g.nodes[2].name, std::string("head"));
  QCOMPARE(g.nodes[0].shape, (std::vector<int64_t>{2, 5}));
  QCOMPARE(g.nodes[2].shape, (std::vector<int64_t>{2, 3}));
  QCOMPARE(g.nodes[2].inputs, std::vector<int>{1});
  QCOMPARE(g.nodes[0].calls.size(), std::size_t(4));  // two iterations, forward and backward
  QCOMPARE(g.nodes[1].calls.size(), std::size_t(2));
  QCOMPARE(g.overlay, std::string());
  checkLayout(g);
}

void TestModelGraph::saveLayersCarryTheirBits() {
  const store::SessionReader reader(saved_);
  const save::StoredAnalysis a = save::loadAnalysis(reader, "lenet-symbolic");
  const modelgraph::ModelGraph g = modelgraph::saveAnalysisGraph(reader, "lenet-symbolic");
  QCOMPARE(g.structure, std::string("data flow"));
  QCOMPARE(g.overlay, std::string("save"));
  int saved = 0;
  for (const modelgraph::GraphNode& n : g.nodes) saved += n.saved;
  QCOMPARE(saved, int(a.layers.size()));
  for (const save::StoredLayer& l : a.layers) {
    const modelgraph::GraphNode& n = g.nodes[std::size_t(nodeNamed(g, l.name))];
    QCOMPARE(n.elements, l.elements);
    QCOMPARE(n.type2, l.type2);
    QCOMPARE(n.tiles, l.tilesDown * l.tilesAcross);
    int64_t reliable = 0;
    for (uint8_t r : l.tileReliable) reliable += r;
    QCOMPARE(n.reliableTiles, reliable);
    QCOMPARE(n.meanVulnerableBits, l.vulnerableBits / double(l.elements));
  }
  QVERIFY(!g.nodes[0].saved);  // the input: no layer record
  // an id that is no SAVE analysis
  QVERIFY_THROWS_EXCEPTION(save::SaveError, modelgraph::saveAnalysisGraph(reader, "no-such-analysis"));
}

// The dot output has one node statement per op and one edge per input; JSON lists the same nodes.
void TestModelGraph::dotAndJsonSayTheSame() {
  const modelgraph::ModelGraph g = modelgraph::dataFlowGraph(save::randomGraph("resnet", 1));
  const QString dot = QString::fromStdString(modelgraph::graphDot(g));
  int inputs = 0;
  for (const auto& n : g.nodes) inputs += int(n.inputs.size());
  QCOMPARE(int(dot.count(QStringLiteral(" -> "))), inputs);
  QCOMPARE(int(dot.count(QStringLiteral("[label="))), int(g.nodes.size()));
  const QJsonDocument json = QJsonDocument::fromJson(QByteArray::fromStdString(modelgraph::graphJson(g)));
  QVERIFY(json.isObject());
  const QJsonArray nodes = json.object().value(QStringLiteral("nodes")).toArray();
  QCOMPARE(nodes.size(), qsizetype(g.nodes.size()));
  for (qsizetype i = 0; i < nodes.size(); ++i) {
    QCOMPARE(nodes[i].toObject().value(QStringLiteral("name")).toString().toStdString(), g.nodes[std::size_t(i)].name);
    QCOMPARE(nodes[i].toObject().value(QStringLiteral("inputs")).toArray().size(), qsizetype(g.nodes[std::size_t(i)].inputs.size()));
  }
}

void TestModelGraph::unknownRunIsRefused() {
  const store::SessionReader reader(analysed_);
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, modelgraph::runGraph(reader, reader.summaryWithoutTensors(), "nope"));
}

QTEST_GUILESS_MAIN(TestModelGraph)
#include "tst_modelgraph.moc"
