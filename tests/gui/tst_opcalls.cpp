// SPDX-License-Identifier: MIT
// Calls of every op in the workbench (issue 31, item 6): a small language model traced at test time
// (tests/gui/op_calls_model.py: layer norm with eps 1e-6, GELU in its tanh form, dropout p 0.25),
// profiled with --record-ops all and a learning rate of 0.0025 by the real peat, replayed through
// layernorm-onepass, dropout-reuse and adam-bf16 and analysed. The tree and the call page show a
// layer norm's grad_bias call, a dropout call and an Adam update with their op kind, variant,
// decoded parameters (the values the test chose, not defaults the views could know) and inputs
// named by their roles; the run panel offers every op the CLI takes and records them all.
#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QHeaderView>
#include <QProcess>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTreeView>
#include <QtTest>

#include <set>

#include "tests/gui/settle.h"

#include "core/store/session.h"
#include "views/callpage.h"
#include "views/mainwindow.h"
#include "views/runpanel.h"
#include "views/sessiontreemodel.h"
#include "tests/support/tooltips.h"

using peat::views::MainWindow;
using peat::views::RunPanel;
using peat::views::SessionTreeModel;

namespace {

// Runs `program` with `args`: true with its stdout in `out` when it succeeded, else a warning with both streams.
bool run(const QString& program, const QStringList& args, QString* out = nullptr) {
  QProcess p;
  p.start(program, args);
  if (!p.waitForFinished(180000) || p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0) {
    qWarning("%s %s: %s %s", qPrintable(program), qPrintable(args.join(QLatin1Char(' '))), p.readAllStandardOutput().constData(),
             p.readAllStandardError().constData());
    return false;
  }
  if (out) *out = QString::fromUtf8(p.readAllStandardOutput());
  return true;
}

bool runPeat(const QStringList& args, QString* out = nullptr) { return run(qEnvironmentVariable("PEAT_CLI"), args, out); }

// The stdout of `peat args` ("" when it failed, with a warning).
QString peatOutput(const QStringList& args) {
  QString out;
  runPeat(args, &out);
  return out;
}

// "float32[4x16x16]" as the session lists the tensor
QString shapeText(const peat::store::TensorInfo& t) {
  QStringList dims;
  for (uint64_t d : t.shape) dims << QString::number(d);
  return QString::fromStdString(t.dtype) + QLatin1Char('[') + dims.join(QLatin1Char('x')) + QLatin1Char(']');
}

// The op names a --help line lists in parentheses ("... (linear, conv2d, ..., all)").
QStringList helpList(const QString& help, const QString& option) {
  const int at = help.indexOf(option);
  if (at < 0) return {};
  const int next = help.indexOf(QStringLiteral("\n  -"), at);  // the next option
  const QString line = help.mid(at, next < 0 ? -1 : next - at).simplified();
  const QRegularExpressionMatch m = QRegularExpression(QStringLiteral("(?:\\(|: )((?:[a-z0-9_]+, )+(?:or )?[a-z0-9_]+)")).match(line);
  QStringList names = m.captured(1).split(QStringLiteral(", "));
  for (QString& n : names) n.remove(QStringLiteral("or "));
  return names;
}

QStringList comboItems(const QComboBox* box) {
  QStringList items;
  for (int i = 0; i < box->count(); ++i) items << box->itemText(i);
  return items;
}

}  // namespace

class TestOpCalls : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void treeShowsOpVariantAndParameters();
  void callPages_data();
  void callPages();
  void runPanelOffersEveryOp();
  void runPanelRecordsEveryOp();

 private:
  // a recorded call of the golden run: its path, tree name and tensors
  struct Recorded {
    QString path, name;
    std::vector<peat::store::TensorInfo> tensors;
    QString shape(const char* tensor) const {
      for (const auto& t : tensors)
        if (t.name == tensor) return shapeText(t);
      return QStringLiteral("(none)");
    }
  };
  Recorded find(const char* op, int64_t variant, const char* layer = nullptr) const;

  QTemporaryDir dir_;
  QString session_;
  peat::store::SessionSummary summary_;
};

void TestOpCalls::initTestCase() {
  QStandardPaths::setTestModeEnabled(true);  // the window's saved layout and recent files stay out of the user's
  QVERIFY2(QFileInfo::exists(qEnvironmentVariable("PEAT_CLI")), "PEAT_CLI names no peat program (run through ctest)");
  QVERIFY(run(QStringLiteral(PEAT_PYTHON), {QStringLiteral(PEAT_SOURCE_DIR "/tests/gui/op_calls_model.py"), dir_.path()}));
  session_ = dir_.filePath(QStringLiteral("ops.h5"));
  QVERIFY(runPeat({QStringLiteral("profile"), QStringLiteral("--model"), dir_.filePath(QStringLiteral("model.pt")),
                 QStringLiteral("--data"), dir_.filePath(QStringLiteral("tokens.h5")), QStringLiteral("--batch"),
                 QStringLiteral("4"), QStringLiteral("-n"), QStringLiteral("2"), QStringLiteral("--record-every"),
                 QStringLiteral("1"), QStringLiteral("--record-ops"), QStringLiteral("all"), QStringLiteral("--lr"),
                 QStringLiteral("0.0025"), QStringLiteral("-o"), session_}));
  for (const char* kernel : {"layernorm-onepass", "dropout-reuse", "adam-bf16"}) {
    const QString name = QString::fromLatin1(kernel).section(QLatin1Char('-'), 0, 0);
    QVERIFY(runPeat({QStringLiteral("playback"), QStringLiteral("-s"), session_, QStringLiteral("-k"), QLatin1String(kernel),
                   QStringLiteral("--store-outputs"), QStringLiteral("--name"), name}));
    QVERIFY(runPeat({QStringLiteral("analyze"), QStringLiteral("--session"), session_, QStringLiteral("--run"), name}));
  }
  summary_ = peat::store::SessionReader(session_.toStdString()).summary();
}

TestOpCalls::Recorded TestOpCalls::find(const char* op, int64_t variant, const char* layer) const {
  for (const peat::store::RunInfo& r : summary_.runs)
    if (r.name == "golden")
      for (const peat::store::CallInfo& c : r.iterations.front().calls) {
        const auto v = c.params.find("variant");
        if (c.id.op == op && v != c.params.end() && v->second == variant && (!layer || c.id.layer == layer))
          return {QString::fromStdString(c.path), QStringLiteral("#%1 %2").arg(c.id.callIndex).arg(QString::fromStdString(c.id.layer)),
                  c.tensors};
      }
  return {};
}

void TestOpCalls::treeShowsOpVariantAndParameters() {
  MainWindow w;
  w.setQuietErrors(true);
  QVERIFY(w.openSession(session_));
  SessionTreeModel* m = w.sessionModel();
  QAbstractItemModelTester tester(m, QAbstractItemModelTester::FailureReportingMode::QtTest);
  const auto detail = [](const QModelIndex& i) { return i.siblingAtColumn(SessionTreeModel::DetailColumn).data().toString(); };

  const Recorded dBeta = find("layernorm", 3);
  QVERIFY(!dBeta.path.isEmpty());
  QModelIndex node = m->findCall("golden", dBeta.path);
  QVERIFY(node.isValid());
  QCOMPARE(node.data().toString(), dBeta.name);
  QCOMPARE(detail(node), QStringLiteral("layernorm grad_bias, eps 1e-06"));  // the model's eps, from its bits
  QCOMPARE(node.data(SessionTreeModel::CallKindRole).toString(), QStringLiteral("layernorm grad_bias"));
  QString tip = peat::testsupport::wholeToolTip(node);
  QStringList lines = tip.split(QLatin1Char('\n'));
  QCOMPARE(lines.value(0), QStringLiteral("layer norm, gradient of beta (dBeta = sum dy)"));
  QCOMPARE(lines.value(1), QStringLiteral("normalized 1 (default), eps 1e-06, weight 1 (with gamma, default), bias 1 (with beta, default)"));
  QCOMPARE(lines.value(2), QStringLiteral("dy: input_0 %1 (the gradient of the output)").arg(dBeta.shape("input_0")));
  QCOMPARE(lines.value(3), QStringLiteral("output %1: dBeta").arg(dBeta.shape("output")));
  QCOMPARE(lines.size(), 4);  // dBeta takes dy alone

  const Recorded drop = find("dropout", 0);
  node = m->findCall("golden", drop.path);
  QVERIFY(node.isValid());
  QCOMPARE(detail(node), QStringLiteral("dropout forward, p 0.25"));
  tip = peat::testsupport::wholeToolTip(node);
  QVERIFY2(tip.contains(QStringLiteral("\nx: input_0 %1 (the input)\n").arg(drop.shape("input_0"))), qPrintable(tip));
  QVERIFY2(tip.contains(QStringLiteral("\nmask: input_1 %1 (the recorded mask: 0 or 1/(1-p))\n").arg(drop.shape("input_1"))),
           qPrintable(tip));
  const Recorded dropBack = find("dropout", 1);
  QCOMPARE(detail(m->findCall("golden", dropBack.path)), QStringLiteral("dropout grad_input, p 0.25"));
  QVERIFY(peat::testsupport::wholeToolTip(m->findCall("golden", dropBack.path)).contains(QStringLiteral("\ndy: input_0 ")));

  const Recorded adam = find("adam", 4, "norm.bias");
  node = m->findCall("golden", adam.path);
  QVERIFY(node.isValid());
  QCOMPARE(detail(node), QStringLiteral("adam update, lr 0.0025, beta1 0.9, beta2 0.999, eps 1e-08, step 1"));
  tip = peat::testsupport::wholeToolTip(node);
  QVERIFY2(tip.startsWith(QStringLiteral("Adam update: new parameter, m and v stacked (m' = beta1 m")), qPrintable(tip));
  const char* roles[][2] = {{"p", "the parameter"}, {"g", "its gradient"}, {"m", "the first moment"}, {"v", "the second moment"}};
  for (int i = 0; i < 4; ++i) {
    const QString input = QStringLiteral("input_%1").arg(i);
    const QString line = QStringLiteral("\n%1: %2 %3 (%4)\n")
                             .arg(QLatin1String(roles[i][0]), input, adam.shape(qPrintable(input)), QLatin1String(roles[i][1]));
    QVERIFY2(tip.contains(line), qPrintable(line + tip));
  }
  QVERIFY(tip.endsWith(QStringLiteral("output %1: p', m', v'").arg(adam.shape("output"))));
  QVERIFY(adam.shape("output").startsWith(QStringLiteral("float32[3x")));  // the three stacked
  // a later step counts on; the playback runs keep the op and its parameters
  QVERIFY(detail(m->findCall("golden", QString(adam.path).replace(QStringLiteral("iterations/000000"), QStringLiteral("iterations/000001"))))
              .endsWith(QStringLiteral("step 2")));
  QCOMPARE(detail(m->findCall("adam", adam.path)), detail(node));
  // GELU's tanh form; a GEMM as before, by its variant
  QCOMPARE(detail(m->findCall("golden", find("gelu", 0).path)), QStringLiteral("gelu forward, approximate 1 (tanh form)"));
  QCOMPARE(detail(m->findCall("golden", find("linear", 2, "head").path)), QStringLiteral("linear grad_weight"));
  QVERIFY(peat::testsupport::wholeToolTip(m->findCall("golden", find("linear", 2, "head").path)).contains(QStringLiteral("\ndy: input_0 ")));

  // how the tree reads, wide enough for its details (test output, to look at)
  QTreeView view;
  view.setModel(m);
  view.resize(760, 820);
  view.header()->resizeSection(0, 260);
  view.expand(m->findPath(QStringLiteral("golden")));
  view.expand(m->findPath(QStringLiteral("golden/iteration 0")));
  view.scrollTo(m->findPath(QStringLiteral("golden/iteration 0")), QAbstractItemView::PositionAtTop);
  view.grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/opcalls-tree.png"));
}

void TestOpCalls::callPages_data() {
  QTest::addColumn<QString>("run");
  QTest::addColumn<QString>("op");
  QTest::addColumn<int>("variant");
  QTest::addColumn<QString>("layer");
  QTest::addColumn<QString>("kind");
  QTest::addColumn<QString>("text");
  QTest::addColumn<QString>("parameters");
  QTest::addColumn<QStringList>("roles");
  QTest::addColumn<QString>("output");
  QTest::newRow("layernorm grad_bias") << QStringLiteral("layernorm") << QStringLiteral("layernorm") << 3 << QString()
                                       << QStringLiteral("layernorm grad_bias")
                                       << QStringLiteral("layer norm, gradient of beta (dBeta = sum dy)")
                                       << QStringLiteral("eps 1e-06; defaults: normalized 1, weight 1 (with gamma), bias 1 (with beta)")
                                       << QStringList{QStringLiteral("dy")} << QStringLiteral("dBeta");
  QTest::newRow("dropout forward") << QStringLiteral("dropout") << QStringLiteral("dropout") << 0 << QString()
                                   << QStringLiteral("dropout forward") << QStringLiteral("dropout (y = x * mask)")
                                   << QStringLiteral("p 0.25") << QStringList{QStringLiteral("x"), QStringLiteral("mask")}
                                   << QStringLiteral("y");
  QTest::newRow("adam update") << QStringLiteral("adam") << QStringLiteral("adam") << 4 << QStringLiteral("up.weight")
                               << QStringLiteral("adam update") << QStringLiteral("Adam update: new parameter, m and v stacked")
                               << QStringLiteral("lr 0.0025, beta1 0.9, beta2 0.999, eps 1e-08, step 1")
                               << QStringList{QStringLiteral("p"), QStringLiteral("g"), QStringLiteral("m"), QStringLiteral("v")}
                               << QStringLiteral("p', m', v'");
}

void TestOpCalls::callPages() {
  QFETCH(QString, run);
  QFETCH(QString, op);
  QFETCH(int, variant);
  QFETCH(QString, layer);
  QFETCH(QString, kind);
  QFETCH(QString, text);
  QFETCH(QString, parameters);
  QFETCH(QStringList, roles);
  QFETCH(QString, output);
  const Recorded call = find(qPrintable(op), variant, layer.isEmpty() ? nullptr : qPrintable(layer));
  QVERIFY(!call.path.isEmpty());
  MainWindow w;
  w.setQuietErrors(true);
  QVERIFY(w.openSession(session_));
  QVERIFY(peat::testsupport::selectAndSettle(w, run + QStringLiteral("/iteration 0/") + call.name));
  peat::views::CallPage* page = w.callPage();
  QCOMPARE(qobject_cast<QTabWidget*>(w.centralWidget())->currentWidget(), page);
  QCOMPARE(page->titleText(), QStringLiteral("%1 %2 (run %3, %4)").arg(call.name, kind, run, call.path));
  const QString details = page->detailsText();
  const QStringList lines = details.split(QLatin1Char('\n'));
  // the section before the error statistics: kind, what it computes, parameters, then the tensors
  QCOMPARE(lines.value(0), QStringLiteral("Call"));
  QVERIFY2(lines.value(1).startsWith(kind + QStringLiteral(": ") + text), qPrintable(details));  // the formula may go on
  QCOMPARE(lines.value(2), parameters);
  // each input by its role beside its shape, as the recording holds it; the playback's own output
  for (int i = 0; i < roles.size(); ++i) {
    const QString input = QStringLiteral("input_%1").arg(i);
    const int at = lines.indexOf(roles[i]);
    QVERIFY2(at > 2, qPrintable(roles[i] + QStringLiteral(" in\n") + details));
    QCOMPARE(lines.value(at + 1), call.shape(qPrintable(input)));
    QCOMPARE(at, 3 + 2 * i);  // in the order of the call's inputs
  }
  QVERIFY2(!details.contains(QStringLiteral("input_")), qPrintable(details));  // every input has its role
  const auto own = peat::store::SessionReader(session_.toStdString()).callTensors(run.toStdString(), call.path.toStdString());
  QString outputShape;
  for (const auto& t : own)
    if (t.name == "output") outputShape = shapeText(t);
  QVERIFY(!outputShape.isEmpty());
  const int at = lines.indexOf(output);
  QVERIFY2(at > 0, qPrintable(output + QStringLiteral(" in\n") + details));
  QCOMPARE(lines.value(at + 1), outputShape);
  QCOMPARE(at, 3 + 2 * int(roles.size()));
  QVERIFY(details.contains(QStringLiteral("\nInputs as run golden recorded them\n")));
  QVERIFY(lines.indexOf(QStringLiteral("Error")) > at);  // the error statistics follow as before
  w.grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/opcalls-%1.png").arg(op));
}

// The ops the CLI takes are the ones the panel offers, and a candidate written for one op chooses it.
void TestOpCalls::runPanelOffersEveryOp() {
  RunPanel panel;
  const QStringList replayed = helpList(peatOutput({QStringLiteral("playback"), QStringLiteral("--help")}), QStringLiteral("--op "));
  QVERIFY2(replayed.size() > 10 && replayed.contains(QStringLiteral("adam")) && replayed.contains(QStringLiteral("all")),
           qPrintable(replayed.join(QLatin1Char(' '))));
  auto* op = panel.findChild<QComboBox*>(QStringLiteral("op"));
  QVERIFY(op);
  const QStringList offered = comboItems(op);
  QCOMPARE(QSet<QString>(offered.begin(), offered.end()), QSet<QString>(replayed.begin(), replayed.end()));
  QCOMPARE(offered.size(), replayed.size());
  const QStringList recorded = helpList(peatOutput({QStringLiteral("profile"), QStringLiteral("--help")}), QStringLiteral("--record-ops"));
  QVERIFY2(recorded.contains(QStringLiteral("dropout")) && recorded.contains(QStringLiteral("all")), qPrintable(recorded.join(QLatin1Char(' '))));
  auto* recordOps = panel.findChild<QComboBox*>(QStringLiteral("recordOps"));
  QVERIFY(recordOps);
  for (const QString& name : recorded) QVERIFY2(comboItems(recordOps).contains(name), qPrintable(name));

  // profile: --record-ops only when it is not the default (the GEMMs); names checked
  panel.setSessionPath(dir_.filePath(QStringLiteral("panel.h5")));
  panel.setMode(RunPanel::Mode::Profile);
  panel.setModel(QStringLiteral("mlp"));
  QString error;
  QStringList args = panel.arguments(&error);
  QVERIFY2(!args.isEmpty(), qPrintable(error));
  QVERIFY(!args.contains(QStringLiteral("--record-ops")));
  panel.setRecordOps(QStringLiteral("all"));
  panel.resize(420, 560);
  panel.grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/opcalls-runpanel.png"));  // to look at
  args = panel.arguments(&error);
  QCOMPARE(args.mid(args.indexOf(QStringLiteral("--record-ops")), 2), (QStringList{QStringLiteral("--record-ops"), QStringLiteral("all")}));
  panel.setRecordOps(QStringLiteral("layernorm, dropout,adam"));
  args = panel.arguments(&error);
  QCOMPARE(args.mid(args.indexOf(QStringLiteral("--record-ops")), 2),
           (QStringList{QStringLiteral("--record-ops"), QStringLiteral("layernorm,dropout,adam")}));
  panel.setRecordOps(QStringLiteral("softmax,layer_norm"));
  QVERIFY(panel.arguments(&error).isEmpty());
  QVERIFY2(error.startsWith(QStringLiteral("record ops: no op 'layer_norm' (linear, conv2d, ")), qPrintable(error));

  // playback and runtime FI: --op any of them
  panel.setMode(RunPanel::Mode::Playback);
  panel.setKernel(QStringLiteral("bf16"));
  QVERIFY(panel.setOp(QStringLiteral("layernorm")));
  QVERIFY(!panel.setOp(QStringLiteral("layer_norm")));
  args = panel.arguments(&error);
  QCOMPARE(args.mid(args.indexOf(QStringLiteral("--op")), 2), (QStringList{QStringLiteral("--op"), QStringLiteral("layernorm")}));
  panel.setKernel(QStringLiteral("adam-bf16"));
  args = panel.arguments(&error);
  QCOMPARE(args.mid(args.indexOf(QStringLiteral("--op")), 2), (QStringList{QStringLiteral("--op"), QStringLiteral("adam")}));
  panel.setMode(RunPanel::Mode::RuntimeFi);
  panel.setKernel(QStringLiteral("softmax-poly:degree=5"));
  args = panel.arguments(&error);
  QCOMPARE(args.mid(args.indexOf(QStringLiteral("--op")), 2), (QStringList{QStringLiteral("--op"), QStringLiteral("softmax")}));

  // every kernel offered is one `peat kernels` lists; every candidate it lists for one op is offered, choosing that op
  auto* kernel = panel.findChild<QComboBox*>(QStringLiteral("kernel"));
  QVERIFY(kernel);
  std::map<QString, QString> listed;  // name -> ops column
  for (const QString& line : peatOutput({QStringLiteral("kernels")}).split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
    const QStringList words = line.simplified().split(QLatin1Char(' '));
    if (words.size() >= 3) listed[words[0]] = words[2];
  }
  QVERIFY(listed.count(QStringLiteral("softmax-online")));
  for (const QString& k : comboItems(kernel)) QVERIFY2(listed.count(k.section(QLatin1Char(':'), 0, 0)), qPrintable(k));
  const std::set<QString> every{QStringLiteral("all"), QStringLiteral("gemm")};
  for (const auto& [name, ops] : listed) {
    if (every.count(ops)) {
      QCOMPARE(RunPanel::kernelOp(name), QString());
      continue;
    }
    QVERIFY2(comboItems(kernel).contains(name), qPrintable(name));
    QCOMPARE(RunPanel::kernelOp(name), ops);
  }
}

// The panel's profile of the model file with Record ops 'all' records every op of the model.
void TestOpCalls::runPanelRecordsEveryOp() {
  RunPanel panel;
  const QString session = dir_.filePath(QStringLiteral("from-panel.h5"));
  panel.setSessionPath(session);
  panel.setMode(RunPanel::Mode::Profile);
  panel.setModel(dir_.filePath(QStringLiteral("model.pt")));
  panel.setData(dir_.filePath(QStringLiteral("tokens.h5")));
  panel.setIterations(1);
  panel.setRecordOps(QStringLiteral("all"));
  QSignalSpy finished(&panel, &RunPanel::finished);
  QVERIFY(panel.start());
  QVERIFY(finished.wait(120000));
  QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(finished.at(0).at(1).toString()));
  std::set<std::string> ops;
  for (const peat::store::RunInfo& r : peat::store::SessionReader(session.toStdString()).summary().runs)
    for (const peat::store::IterationInfo& it : r.iterations)
      for (const peat::store::CallInfo& c : it.calls) ops.insert(c.id.op);
  QCOMPARE(ops, (std::set<std::string>{"adam", "cross_entropy", "dropout", "embedding", "gelu", "layernorm", "linear"}));
}

QTEST_MAIN(TestOpCalls)
#include "tst_opcalls.moc"
