// SPDX-License-Identifier: MIT
// The run panel drives real `peat` runs (PEAT_CLI) off the GUI thread: a SAVE analysis lands in the
// session and the main window shows it; a SAVE campaign cancelled mid-run leaves a readable session
// with the points it finished; an incomplete form is refused with a reason. The GUI thread never
// reads or writes a session file while a run goes on or while the window reopens the session
// (counted at the session layer's entry, so the check does not depend on the machine's load); a
// watchdog timer reports, for information, the longest gap in its event loop. A plain PyTorch script
// is recorded through the panel (peat record -- /usr/bin/python3 SCRIPT): its form, a run into the
// window with its live loss, a runtime-FI swap, a failing script and a cancelled recording.
#include "views/qcustomplot_include.h"  // first: see the header

#include <QSignalSpy>
#include <QTabWidget>
#include <QTableView>
#include <QThread>
#include <QFile>
#include <QAbstractSpinBox>
#include <QComboBox>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProgressBar>
#include <QtTest>
#include <QScrollBar>
#include <QScrollArea>
#include <QFormLayout>

#include "tests/gui/settle.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <optional>
#include <utility>

#include "core/catalog/catalog.h"
#include "core/save/analysis_record.h"
#include "core/save/campaign_record.h"
#include "core/store/session.h"
#include "views/mainwindow.h"
#include "views/curvepanel.h"
#include "views/savepanel.h"
#include "views/runpanel.h"
#include "views/sessiontreemodel.h"
#include "views/callpage.h"
#include "views/bitexplorer.h"
#include "views/errorplotpanel.h"
#include "views/overviewpanel.h"
#include "views/tourpanel.h"

using peat::views::TourPanel;
using peat::views::RunPanel;

namespace {

// Counts entries into the session layer (HDF5 reads and writes, probes) on the GUI thread while it lives.
std::atomic<int> guiThreadFileAccesses{0};
struct GuiThreadFileAccesses {
  GuiThreadFileAccesses() {
    guiThreadFileAccesses = 0;
    peat::store::setSessionAccessObserver([] {
      if (QThread::currentThread() == QCoreApplication::instance()->thread()) ++guiThreadFileAccesses;
    });
  }
  ~GuiThreadFileAccesses() { peat::store::setSessionAccessObserver(nullptr); }
  int count() const { return guiThreadFileAccesses.load(); }
};

// The longest gap between ticks of a 5 ms timer while `until` is false, in ms.
struct Watchdog {
  QTimer timer;
  QElapsedTimer clock;
  qint64 last = 0, worst = 0;
  Watchdog() {
    timer.setInterval(5);
    QObject::connect(&timer, &QTimer::timeout, [this] {
      const qint64 now = clock.elapsed();
      worst = std::max(worst, now - last);
      last = now;
    });
    clock.start();
    timer.start();
  }
};

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

QString writeFile(const QString& path, const char* text) {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly)) return {};
  f.write(text);
  return path;
}

// `peat ARGS`: its exit code, and its standard output in `out`.
int runPeat(const QStringList& args, QByteArray* out = nullptr) {
  QProcess p;
  p.start(qEnvironmentVariable("PEAT_CLI"), args);
  if (!p.waitForFinished(60000)) return -1;
  if (out) *out = p.readAllStandardOutput();
  return p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
}

// The runs of a session as `peat info --json` gives them.
QJsonArray sessionRuns(const QString& session) {
  QByteArray out;
  if (runPeat({QStringLiteral("info"), QStringLiteral("--json"), session}, &out) != 0) return {};
  return QJsonDocument::fromJson(out).object().value(QStringLiteral("runs")).toArray();
}

// The widgets of `root` that are shown smaller than they need (as tst_mainwindow.fitsSmallScreens).
QStringList squeezed(QWidget* root) {
  QStringList found;
  for (QWidget* c : root->findChildren<QWidget*>()) {
    if (!c->isVisible() || c->isWindow()) continue;
    if (qobject_cast<QAbstractSpinBox*>(c->parentWidget()) || qobject_cast<QComboBox*>(c->parentWidget())) continue;
    QSize need = c->minimumSizeHint();
    if (!need.isValid()) continue;
    if (c->sizeHint().isValid()) need = need.boundedTo(c->sizeHint());
    if (c->width() < need.width() || c->height() < need.height())
      found << QStringLiteral("%1 %2: %3x%4 < %5x%6")
                   .arg(QString::fromLatin1(c->metaObject()->className()), c->objectName())
                   .arg(c->width()).arg(c->height()).arg(need.width()).arg(need.height());
  }
  return found;
}

}  // namespace

class TestRunPanel : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void incompleteFormIsRefused();
  void listsComeFromTheCatalog();
  void fitsANarrowDock();
  void gpuKernelsRunOnTheChosenDevice();
  void modelFileNeedsItsData();
  void pluginOffersItsOpKinds();
  void saveAnalysisAppearsInTheWindow();
  void cancelledCampaignKeepsItsPoints();
  void profileThenPlaybackWithAnalysis();
  void cancelledProfileIsMarkedCancelled();
  void demoSessionIsMadeThenOpened();
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
  // The form for a run into a new session `file` of the test's folder; returns the session's path.
  QString prepare(RunPanel& panel, const QString& file, RunPanel::Mode mode, const QString& model) {
    const QString session = dir_.filePath(file);
    panel.setSessionPath(session);
    panel.setMode(mode);
    panel.setModel(model);
    return session;
  }
  QTemporaryDir dir_;
};

void TestRunPanel::initTestCase() {
  QVERIFY2(QFileInfo::exists(qEnvironmentVariable("PEAT_CLI")), "PEAT_CLI names no peat program (run through ctest)");
}

// The Run dock beside the pages of a 1024 x 700 window is about 190 px wide: in every mode the
// form fits it (no sideways scrolling), each field at least as wide as it needs.
void TestRunPanel::fitsANarrowDock() {
  QScrollArea dock;
  auto* panel = new RunPanel;
  dock.setWidget(panel);
  dock.setWidgetResizable(true);
  dock.setFrameShape(QFrame::NoFrame);
  dock.resize(200, 700);
  dock.show();
  QVERIFY(QTest::qWaitForWindowExposed(&dock));
  for (const RunPanel::Mode m : {RunPanel::Mode::Profile, RunPanel::Mode::Playback, RunPanel::Mode::RuntimeFi,
                                 RunPanel::Mode::SaveAnalyze, RunPanel::Mode::SaveCampaign, RunPanel::Mode::SaveRun,
                                 RunPanel::Mode::PythonRecord}) {
    panel->setMode(m);
    QTest::qWait(20);
    const QString mode = panel->findChild<QComboBox*>()->currentText();
    QVERIFY2(panel->minimumSizeHint().width() <= dock.viewport()->width(),
             qPrintable(QStringLiteral("%1: the form needs %2 px, the dock has %3").arg(mode)
                            .arg(panel->minimumSizeHint().width()).arg(dock.viewport()->width())));
    QTRY_VERIFY2(!dock.horizontalScrollBar()->isVisible(), qPrintable(mode));
    QTRY_VERIFY2(squeezed(panel).isEmpty(), qPrintable(mode + QStringLiteral(": ") + squeezed(panel).join(QStringLiteral("; "))));
  }
  auto* form = panel->findChild<QFormLayout*>();
  QVERIFY(form);
  QCOMPARE(form->rowWrapPolicy(), QFormLayout::WrapAllRows);  // narrow: each label above its field
  dock.resize(700, 700);  // wide: beside it, the form still whole
  QTRY_COMPARE(form->rowWrapPolicy(), QFormLayout::DontWrapRows);
  QTRY_VERIFY2(!dock.horizontalScrollBar()->isVisible() && squeezed(panel).isEmpty(), qPrintable(squeezed(panel).join(QStringLiteral("; "))));
}

// The run panel's models and kernels are the catalog's (core/catalog): every zoo model; every
// candidate and fault model but golden (the reference) and plugin (its own button); choosing one
// written for an op chooses that op.
void TestRunPanel::listsComeFromTheCatalog() {
  RunPanel panel;
  auto* model = panel.findChild<QComboBox*>(QStringLiteral("model"));
  auto* kernel = panel.findChild<QComboBox*>(QStringLiteral("kernel"));
  QVERIFY(model && kernel);
  QStringList models, kernels, want;
  for (int i = 0; i < model->count(); ++i) models << model->itemText(i);
  for (const peat::catalog::ZooModel& m : peat::catalog::zooModels()) want << QString::fromStdString(m.name);
  QCOMPARE(models, want);
  for (int i = 0; i < kernel->count(); ++i) kernels << kernel->itemText(i);
  want.clear();
  for (const peat::catalog::KernelDescription& k : peat::catalog::kernels())
    if (k.family != "golden" && k.family != "plugin") want << QString::fromStdString(k.name);
  kernels.sort();
  want.sort();
  QCOMPARE(kernels, want);
  QCOMPARE(RunPanel::kernelOp(QStringLiteral("softmax-online")), QStringLiteral("softmax"));
  QCOMPARE(RunPanel::kernelOp(QStringLiteral("rmsnorm")), QStringLiteral("layernorm"));
  QCOMPARE(RunPanel::kernelOp(QStringLiteral("splitk:parts=4")), QString());  // a GEMM candidate keeps the op
}

void TestRunPanel::incompleteFormIsRefused() {
  RunPanel panel;
  QSignalSpy finished(&panel, &RunPanel::finished);
  panel.setSessionPath(QString());
  QVERIFY(!panel.start());
  QCOMPARE(finished.count(), 1);
  QCOMPARE(finished.at(0).at(0).toBool(), false);
  QVERIFY(finished.at(0).at(1).toString().contains(QStringLiteral("choose a session file")));
  panel.setSessionPath(dir_.filePath(QStringLiteral("x.h5")));
  panel.setMode(RunPanel::Mode::SaveAnalyze);
  panel.setModel(QStringLiteral("resnet"));  // no shipped weights
  QString error;
  QVERIFY(panel.arguments(&error).isEmpty());
  QVERIFY(error.contains(QStringLiteral("no trained weights of resnet")));
  // an ONNX file carries its weights: no -w
  const QString onnx = dir_.filePath(QStringLiteral("net.onnx"));
  panel.setModel(onnx);
  QVERIFY(panel.arguments(&error).isEmpty());
  QVERIFY2(error.contains(QStringLiteral("does not exist")), qPrintable(error));
  QFile f(onnx);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.close();
  const QStringList args = panel.arguments(&error);
  QVERIFY2(!args.isEmpty(), qPrintable(error));
  QCOMPARE(args.mid(0, 4), (QStringList{QStringLiteral("save"), QStringLiteral("analyze"), QStringLiteral("-m"), onnx}));
  QVERIFY(!args.contains(QStringLiteral("-w")));
}

// The gpu-* kernels take the chosen device; every other kernel runs on the CPU and refuses a GPU.
void TestRunPanel::gpuKernelsRunOnTheChosenDevice() {
  RunPanel panel;
  panel.setSessionPath(dir_.filePath(QStringLiteral("d.h5")));
  panel.setMode(RunPanel::Mode::Playback);
  panel.setDevices({QStringLiteral("cpu:0"), QStringLiteral("cuda:0")});
  panel.setDevice(QStringLiteral("cuda:0"));
  panel.setKernel(QStringLiteral("gpu-tiled"));
  QString error;
  QStringList args = panel.arguments(&error);
  QVERIFY2(!args.isEmpty(), qPrintable(error));
  QCOMPARE(args.mid(args.indexOf(QStringLiteral("--device")), 2), (QStringList{QStringLiteral("--device"), QStringLiteral("cuda:0")}));
  panel.setKernel(QStringLiteral("bf16"));
  QVERIFY(panel.arguments(&error).isEmpty());
  QVERIFY(error.contains(QStringLiteral("bf16 runs on the CPU")));
  panel.setDevice(QStringLiteral("cpu:0"));
  args = panel.arguments(&error);
  QVERIFY(!args.isEmpty());
  QVERIFY(!args.contains(QStringLiteral("--device")));
  panel.setMode(RunPanel::Mode::RuntimeFi);
  panel.setKernel(QStringLiteral("gpu-half"));
  args = panel.arguments(&error);
  QCOMPARE(args.mid(args.indexOf(QStringLiteral("--device")), 2), (QStringList{QStringLiteral("--device"), QStringLiteral("cpu:0")}));
}

// A user kernel chosen as the candidate: the panel probes it (peat kernels --probe, in a child
// process), says which op kinds and dtypes it exports and offers only the slot ops it runs; a fused
// attention run asks for --attention fused.
void TestRunPanel::pluginOffersItsOpKinds() {
  const QString plugins = qEnvironmentVariable("PEAT_PLUGIN_DIR");
  const QString flash = plugins + QStringLiteral("/libpeat_example_flash_attention.so");
  QVERIFY2(QFileInfo::exists(flash), qPrintable(flash));
  RunPanel panel;
  panel.setSessionPath(dir_.filePath(QStringLiteral("p.h5")));
  panel.setMode(RunPanel::Mode::RuntimeFi);
  panel.setModel(QStringLiteral("chargpt"));
  panel.setFusedAttention(true);
  panel.setKernel(QStringLiteral("plugin:path=") + flash);
  QTRY_VERIFY_WITH_TIMEOUT(!panel.pluginOps().isEmpty(), 30000);
  QCOMPARE(panel.pluginOps(), QStringList{QStringLiteral("attention")});
  QString error;
  QStringList args = panel.arguments(&error);
  QVERIFY2(!args.isEmpty(), qPrintable(error));
  QCOMPARE(args.mid(args.indexOf(QStringLiteral("--op")), 2), (QStringList{QStringLiteral("--op"), QStringLiteral("attention")}));
  QCOMPARE(args.mid(args.indexOf(QStringLiteral("--attention")), 2),
           (QStringList{QStringLiteral("--attention"), QStringLiteral("fused")}));
  auto* label = panel.findChild<QLabel*>(QStringLiteral("pluginOps"));
  QVERIFY(label && label->text().contains(QStringLiteral("flash-attention")) && label->text().contains(QStringLiteral("bf16")));
  if (const QString shots = qEnvironmentVariable("PEAT_SHOT_DIR"); !shots.isEmpty()) {  // to look at it
    panel.resize(640, 720);
    panel.grab().save(shots + QStringLiteral("/runpanel-plugin.png"));
  }
  // the bf16 GEMM runs the GEMM-based ops
  panel.setKernel(QStringLiteral("plugin:path=") + plugins + QStringLiteral("/libpeat_example_bf16_gemm.so"));
  QTRY_VERIFY_WITH_TIMEOUT(panel.pluginOps().contains(QStringLiteral("linear")), 30000);
  QCOMPARE(panel.pluginOps(), (QStringList{QStringLiteral("linear"), QStringLiteral("conv2d"), QStringLiteral("matmul")}));
  // a library that is no plugin: refused with the probe's line, every op offered again
  panel.setKernel(QStringLiteral("plugin:path=") + qEnvironmentVariable("PEAT_CLI"));
  QTRY_VERIFY_WITH_TIMEOUT(label->text().startsWith(QStringLiteral("refused")), 30000);
  QVERIFY(panel.pluginOps().isEmpty());
}

// A TorchScript file instead of a zoo name: the Data row appears, and the command needs --data.
void TestRunPanel::modelFileNeedsItsData() {
  RunPanel panel;
  panel.setSessionPath(dir_.filePath(QStringLiteral("m.h5")));
  panel.setMode(RunPanel::Mode::Profile);
  const QString model = dir_.filePath(QStringLiteral("net.pt"));
  QString error;
  panel.setModel(model);
  QVERIFY(panel.arguments(&error).isEmpty());
  QVERIFY2(error.contains(QStringLiteral("does not exist")), qPrintable(error));
  QFile f(model);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write("PK");
  f.close();
  QVERIFY(panel.arguments(&error).isEmpty());
  QVERIFY2(error.contains(QStringLiteral("choose the model file's data")), qPrintable(error));
  panel.setData(QStringLiteral("fashion-mnist:3x32x32"));
  QStringList args = panel.arguments(&error);
  QVERIFY2(!args.isEmpty(), qPrintable(error));
  QCOMPARE(args.mid(args.indexOf(QStringLiteral("--model")), 4),
           (QStringList{QStringLiteral("--model"), model, QStringLiteral("--data"), QStringLiteral("fashion-mnist:3x32x32")}));
  panel.setMode(RunPanel::Mode::RuntimeFi);
  panel.setKernel(QStringLiteral("bf16"));
  args = panel.arguments(&error);
  QVERIFY(args.contains(QStringLiteral("--data")));
  panel.setMode(RunPanel::Mode::Profile);
  panel.setModel(QStringLiteral("lenet"));  // a zoo model has its own data
  args = panel.arguments(&error);
  QVERIFY(!args.isEmpty() && !args.contains(QStringLiteral("--data")));
  // a SAVE campaign on an ONNX model takes the data too (optional: Fashion-MNIST resized otherwise)
  const QString onnx = dir_.filePath(QStringLiteral("net.onnx"));
  QFile o(onnx);
  QVERIFY(o.open(QIODevice::WriteOnly));
  o.close();
  panel.setMode(RunPanel::Mode::SaveCampaign);
  panel.setModel(onnx);
  panel.setData(QStringLiteral("samples.h5"));
  args = panel.arguments(&error);
  QVERIFY2(args.contains(QStringLiteral("--data")) && args.contains(QStringLiteral("samples.h5")), qPrintable(args.join(' ')));
  panel.setData(QString());
  args = panel.arguments(&error);
  QVERIFY2(!args.isEmpty() && !args.contains(QStringLiteral("--data")), qPrintable(error));
  // the campaign's fault basis (the README's: the same rate per byte of unreliable memory) and schemes
  const auto after = [&](const char* option) {
    const int at = args.indexOf(QLatin1String(option));
    return at >= 0 && at + 1 < args.size() ? args[at + 1] : QString();
  };
  QCOMPARE(after("--basis"), QStringLiteral("memory"));
  QCOMPARE(after("--schemes"), QStringLiteral("none,save,tmr,ranger,ecc"));
  QVERIFY(panel.setBasis(QStringLiteral("inference")) && panel.setSchemes(QStringLiteral("save,none")));
  QVERIFY(!panel.setBasis(QStringLiteral("time")) && !panel.setSchemes(QStringLiteral("save,raid")));
  args = panel.arguments(&error);
  QCOMPARE(after("--basis"), QStringLiteral("inference"));
  QCOMPARE(after("--schemes"), QStringLiteral("none,save"));
  QVERIFY(panel.setSchemes(QString()));  // none chosen: refused in words
  QVERIFY(panel.arguments(&error).isEmpty());
  QVERIFY2(error.contains(QStringLiteral("at least one scheme")), qPrintable(error));
  QVERIFY(panel.setSchemes(QStringLiteral("none,save,tmr,ranger,ecc")) && panel.setBasis(QStringLiteral("memory")));
}

void TestRunPanel::saveAnalysisAppearsInTheWindow() {
  peat::views::MainWindow window;
  window.setQuietErrors(true);
  window.show();
  RunPanel* panel = window.runPanel();
  const QString session = dir_.filePath(QStringLiteral("analysis.h5"));
  panel->setSessionPath(session);
  panel->setMode(RunPanel::Mode::SaveAnalyze);
  panel->setModel(QStringLiteral("lenet"));
  const QStringList args = panel->arguments(nullptr);
  QCOMPARE(args.mid(0, 4), (QStringList{QStringLiteral("save"), QStringLiteral("analyze"), QStringLiteral("-m"), QStringLiteral("lenet")}));
  QSignalSpy finished(panel, &RunPanel::finished);
  QSignalSpy opened(&window, &peat::views::MainWindow::sessionOpenEnded);
  Watchdog watchdog;
  QVERIFY(panel->start());
  QVERIFY(panel->running());
  QVERIFY(finished.wait(120000));
  QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(finished.at(0).at(1).toString()));
  QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 30000);  // the window opens the session off the GUI thread
  qInfo("GUI thread: longest gap between 5 ms ticks during the analysis: %lld ms", watchdog.worst);
  // the window reopened the session and lists the analysis
  QCOMPARE(window.sessionPath(), session);
  QVERIFY(peat::testsupport::selectAndSettle(window, QStringLiteral("SAVE/lenet-symbolic")));
  const peat::store::SessionReader reader(session.toStdString());
  QCOMPARE(peat::save::storedAnalyses(reader), std::vector<std::string>{"lenet-symbolic"});
}

void TestRunPanel::cancelledCampaignKeepsItsPoints() {
  RunPanel panel;
  const QString session = prepare(panel, QStringLiteral("campaign.h5"), RunPanel::Mode::SaveCampaign, QStringLiteral("lenet"));
  panel.setImages(2000);
  panel.setFlips(QStringLiteral("1,2,4,8,16,32,64,128,256,512,1024,2048,4096,4096,4096,4096,4096,4096"));
  QSignalSpy progressed(&panel, &RunPanel::progressed);
  QSignalSpy finished(&panel, &RunPanel::finished);
  QSignalSpy live(&panel, &RunPanel::livePoint);
  Watchdog watchdog;
  GuiThreadFileAccesses accesses;
  QVERIFY(panel.start());
  QVERIFY(progressed.wait(120000));  // the first point is stored
  QVERIFY(!finished.count());
  const qint64 total = progressed.last().at(1).toLongLong();
  QVERIFY(live.count() >= 1);  // the finished point, as it arrived
  QCOMPARE(live.first().at(0).toString(), QStringLiteral("none"));  // the campaign's first scheme
  QCOMPARE(live.first().at(1).toDouble(), 1.0);
  QVERIFY(live.first().at(2).toDouble() > 0.5);
  QCOMPARE(total, qint64(18 * 5));
  panel.cancel();
  QVERIFY(finished.wait(60000));
  QCOMPARE(finished.at(0).at(0).toBool(), false);
  QVERIFY(finished.at(0).at(1).toString().contains(QStringLiteral("Cancelled")));
  QVERIFY(!panel.running());
  QCOMPARE(accesses.count(), 0);
  qInfo("GUI thread: longest gap between 5 ms ticks during the campaign: %lld ms", watchdog.worst);
  panel.resize(420, 520);
  QVERIFY(panel.grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/runpanel.png")));
  // the session opens, and holds the points finished before the cancel (fewer than all)
  const peat::store::SessionReader reader(session.toStdString());
  const peat::save::StoredCampaign c = peat::save::loadCampaign(reader, "save-campaign");
  std::size_t points = 0;
  for (const auto& s : c.series) points += s.flips.size();
  QVERIFY(points >= 1 && points < std::size_t(total));
}

// Cancel during a LeNet profile: the run ends its iteration in flight and marks itself cancelled
// (the walk of 2026-12-08, on a loaded machine, found it killed after the 0.6 s grace of then and
// shown interrupted; idle, the run ends in about 1.2 s).
void TestRunPanel::cancelledProfileIsMarkedCancelled() {
  RunPanel panel;
  const QString session = prepare(panel, QStringLiteral("cancelled-profile.h5"), RunPanel::Mode::Profile, QStringLiteral("lenet"));
  panel.setIterations(5000);
  QSignalSpy finished(&panel, &RunPanel::finished);
  QSignalSpy loss(&panel, &RunPanel::liveLoss);
  QVERIFY(panel.start());
  QTRY_VERIFY_WITH_TIMEOUT(!loss.isEmpty(), 120000);
  QTest::qWait(3000);  // mid-run, as a user cancels
  panel.cancel();
  QVERIFY(finished.wait(30000));
  QVERIFY(finished.at(0).at(1).toString().startsWith(QStringLiteral("Cancelled")));
  const QJsonArray runs = sessionRuns(session);
  QCOMPARE(runs.size(), 1);
  QCOMPARE(runs.at(0)[QStringLiteral("status")].toString(), QStringLiteral("cancelled"));
}

// Training goes through the same panel: a profile, then a playback through bf16 that the panel
// follows with the analysis of the replayed calls (for the error views).
void TestRunPanel::profileThenPlaybackWithAnalysis() {
  RunPanel panel;
  const QString session = prepare(panel, QStringLiteral("profile.h5"), RunPanel::Mode::Profile, QStringLiteral("mlp"));
  panel.setIterations(3);
  QSignalSpy finished(&panel, &RunPanel::finished);
  QSignalSpy loss(&panel, &RunPanel::liveLoss);
  QVERIFY(panel.start());
  QVERIFY(finished.wait(180000));
  QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(finished.at(0).at(1).toString()));
  QVERIFY(loss.count() >= 1);  // the training loss as it arrived (the last iteration always reports)
  QCOMPARE(loss.last().at(0).toDouble(), 3.0);
  QVERIFY(loss.last().at(1).toDouble() > 0);
  // Start again with the same form: the file exists, so the run writes the first free name beside it
  // (issue 33: the defaults used to fail with "already exists")
  const QString second = QFileInfo(session).dir().filePath(QStringLiteral("profile-2.h5"));
  QVERIFY(!QFileInfo::exists(second));
  QVERIFY(panel.start());
  QVERIFY(finished.wait(180000));
  QVERIFY2(finished.at(1).at(0).toBool(), qPrintable(finished.at(1).at(1).toString()));
  QCOMPARE(panel.sessionPath(), second);
  QVERIFY(QFileInfo(second).size() > 0);
  QCOMPARE(RunPanel::freeSessionPath(second), QFileInfo(session).dir().filePath(QStringLiteral("profile-3.h5")));
  QCOMPARE(RunPanel::freeSessionPath(QFileInfo(session).dir().filePath(QStringLiteral("none.h5"))),
           QFileInfo(session).dir().filePath(QStringLiteral("none.h5")));
  // the playback appends to the session a window has open: the window lets the file go for the run
  // (HDF5 admits a writer only when no one else has the file open) and shows the new runs after it
  peat::views::MainWindow window;
  window.setQuietErrors(true);
  QVERIFY(window.openSession(session));
  RunPanel& runner = *window.runPanel();
  QSignalSpy done(&runner, &RunPanel::finished);
  runner.setSessionPath(session);
  runner.setMode(RunPanel::Mode::Playback);
  runner.setKernel(QStringLiteral("bf16"));
  runner.setAnalyzeAfterPlayback(true);
  QSignalSpy reopened(&window, &peat::views::MainWindow::sessionOpenEnded);
  std::optional<GuiThreadFileAccesses> accesses;
  accesses.emplace();
  QVERIFY(runner.start());
  QVERIFY(done.wait(180000));
  QVERIFY2(done.at(0).at(0).toBool(), qPrintable(done.at(0).at(1).toString()));
  QTRY_COMPARE_WITH_TIMEOUT(reopened.count(), 1, 30000);  // off the GUI thread
  QCOMPARE(reopened.at(0).at(1).toBool(), true);
  QCOMPARE(accesses->count(), 0);  // the run, the live curves and the reopening
  accesses.reset();
  QCOMPARE(window.sessionPath(), session);
  QVERIFY(peat::testsupport::selectAndSettle(window, QStringLiteral("playback-bf16")));  // reopened, with the new run
  const peat::store::SessionSummary s = peat::store::SessionReader(session.toStdString()).summary();
  QStringList runs;
  for (const auto& r : s.runs) runs << QString::fromStdString(r.name + ":" + r.spec.kind + ":" + r.status);
  runs.sort();
  QCOMPARE(runs, (QStringList{QStringLiteral("analysis-playback-bf16:analysis:complete"), QStringLiteral("golden:profile:complete"),
                              QStringLiteral("playback-bf16:playback:complete")}));
}

// --demo: the first time, the run panel makes the demo session step by step and the window opens
// it; the next time it opens at once.
void TestRunPanel::demoSessionIsMadeThenOpened() {
  qputenv("XDG_DATA_HOME", dir_.filePath(QStringLiteral("xdg")).toUtf8());
  const QString path = peat::views::MainWindow::demoPath();
  QVERIFY(path.startsWith(dir_.path()));
  {
    peat::views::MainWindow window;
    window.setQuietErrors(true);
    window.show();
    QSignalSpy finished(window.runPanel(), &RunPanel::finished);
    QSignalSpy opened(&window, &peat::views::MainWindow::sessionOpenEnded);
    QVERIFY(window.openDemo());
    QVERIFY(window.runPanel()->running());
    // a second window asked for the demo meanwhile (two --demo at once) waits for this one's
    // instead of making the same file, and opens it once it is made
    peat::views::MainWindow second;
    second.setQuietErrors(true);
    QVERIFY(second.openDemo());
    QVERIFY(!second.runPanel()->running());
    QVERIFY(finished.wait(600000));
    QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(finished.at(0).at(1).toString()));
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 30000);
    QTRY_COMPARE_WITH_TIMEOUT(second.sessionPath(), path, 30000);
    QVERIFY(!second.runPanel()->running());
    QVERIFY(!QFileInfo::exists(path + QStringLiteral(".lock")));
    // before any selection: the campaign was drawn live, point by point, one line per scheme,
    // and the profile's loss curve as it trained
    QCOMPARE(window.savePanel()->campaignPlot()->graphCount(), 5);
    QVERIFY(window.curvePanel()->plot()->graphCount() >= 2);
    QCOMPARE(window.sessionPath(), path);
    QVERIFY(peat::testsupport::selectAndSettle(window, QStringLiteral("SAVE/lenet-symbolic")));
    QVERIFY(peat::testsupport::selectAndSettle(window, QStringLiteral("save-campaign")));
    {  // the legend gives each scheme's fault-free latency and CPU time, as stored
      const QCustomPlot* plot = window.savePanel()->campaignPlot();
      int withCpu = 0;
      for (int i = 0; i < plot->graphCount(); ++i) withCpu += plot->graph(i)->name().contains(QStringLiteral(", CPU "));
      QCOMPARE(withCpu, plot->graphCount());
    }
    QVERIFY(peat::testsupport::selectAndSettle(window, QStringLiteral("bf16/iteration 0")));
    QVERIFY(window.verdictTable()->model()->rowCount() > 0);  // the analysis of the bf16 replay
  }
  {  // F1 at first start (no session open): the demo opens for the tour, whose first step chooses
     // its page (the walk of 2026-12-08 found the demo's telling call shown over steps 1 and 2)
    peat::views::MainWindow fresh;
    fresh.setQuietErrors(true);
    fresh.show();
    fresh.startTour();
    QTRY_VERIFY_WITH_TIMEOUT(fresh.sessionPath() == path && fresh.tourPanel(), 30000);
    QVERIFY(peat::testsupport::settle(fresh));
    auto* pages = qobject_cast<QTabWidget*>(fresh.centralWidget());
    QCOMPARE(fresh.tourPanel()->step(), 0);
    QCOMPARE(pages->currentWidget(), static_cast<QWidget*>(fresh.curvePanel()));
    QVERIFY(fresh.tourPanel()->next());
    QVERIFY(peat::testsupport::settle(fresh));
    QVERIFY(qobject_cast<peat::views::OverviewPanel*>(pages->currentWidget()));
  }
  peat::views::MainWindow again;
  again.setQuietErrors(true);
  again.show();
  QVERIFY(again.openDemo());
  QVERIFY(peat::testsupport::settle(again));
  QCOMPARE(again.sessionPath(), path);
  QVERIFY(!again.runPanel()->running());
  // it opens on its most telling page: an analysed bf16 call, its verdict and its evidence drawn
  auto* central = qobject_cast<QTabWidget*>(again.centralWidget());
  QVERIFY(central);
  QCOMPARE(central->currentWidget(), static_cast<QWidget*>(again.callPage()));
  QVERIFY2(again.callPage()->detailsText().contains(QStringLiteral("Verdict: precision_loss")), qPrintable(again.callPage()->detailsText()));
  QCOMPARE(again.callPage()->plots()->bitSpanLabel(), QStringLiteral("bits bf16 does not keep (0-15)"));

  // Help > Tour: each step selects its page; it can be left at any step and begun again
  again.startTour();
  QVERIFY(peat::testsupport::settle(again));
  TourPanel* tour = again.tourPanel();
  QVERIFY(tour);
  QCOMPARE(tour->steps(), 7);
  QCOMPARE(tour->step(), 0);
  QCOMPARE(central->currentWidget(), static_cast<QWidget*>(again.curvePanel()));
  QVERIFY(again.curvePanel()->plot()->graphCount() > 0);
  QVERIFY(tour->next());
  QVERIFY(peat::testsupport::settle(again));
  QVERIFY(again.verdictTable()->model()->rowCount() > 0);  // the bf16 replay's verdicts
  // step 2 changes the page: a playback has no training curve, so not step 1's Training tab
  QVERIFY(qobject_cast<peat::views::OverviewPanel*>(central->currentWidget()));
  tour->leave();
  QVERIFY(!tour->parentWidget()->isVisible());
  again.startTour();
  QVERIFY(peat::testsupport::settle(again));
  QCOMPARE(tour->step(), 0);
  QVERIFY(tour->parentWidget()->isVisible());
  QVERIFY(tour->goTo(2));
  QVERIFY(peat::testsupport::settle(again));
  QCOMPARE(central->currentWidget(), static_cast<QWidget*>(again.callPage()));
  QVERIFY(again.callPage()->detailsText().contains(QStringLiteral("Verdict: precision_loss")));
  QVERIFY(tour->next());
  QVERIFY(peat::testsupport::settle(again));
  QVERIFY(again.callPage()->plots()->bitSpanLabel().contains(QStringLiteral("bf16")));
  QVERIFY(tour->back());  // Back: step 3 again, its page selected anew
  QVERIFY(peat::testsupport::settle(again));
  QCOMPARE(tour->step(), 2);
  QVERIFY(tour->text().contains(QStringLiteral("3. Read the error histogram")));
  QCOMPARE(central->currentWidget(), static_cast<QWidget*>(again.callPage()));
  QVERIFY(tour->next());
  QVERIFY(peat::testsupport::settle(again));
  QVERIFY(tour->next());
  QVERIFY(peat::testsupport::settle(again));
  QCOMPARE(central->currentWidget(), static_cast<QWidget*>(again.savePanel()));
  QCOMPARE(again.savePanel()->currentTab(), peat::views::SavePanel::MapTab);
  QSignalSpy flipped(&again, &peat::views::MainWindow::flipShown);
  QVERIFY(tour->next());  // a ranging bit of a conv1 value, flipped in the model
  QVERIFY(peat::testsupport::settle(again));
  QVERIFY(flipped.wait(60000));
  QVERIFY2(again.bitExplorer()->flipText().contains(QStringLiteral("Test image 0")), qPrintable(again.bitExplorer()->flipText()));
  QVERIFY2(again.bitExplorer()->flipText().contains(QStringLiteral("caught by")), qPrintable(again.bitExplorer()->flipText()));
  QVERIFY(tour->text().contains(QStringLiteral("6. Flip a bit")));
  QVERIFY(!tour->text().contains(QStringLiteral("cannot show")));
  QVERIFY(again.grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/tour.png")));
  QVERIFY(again.bitExplorer()->window()->grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/tour-flip.png")));
  QVERIFY(again.bitExplorer()->window()->isVisible());
  // the explorer beside the tour's panel, not over its text or buttons (it covered them at 1024 x 700)
  const QRect panelRect(tour->mapToGlobal(QPoint(0, 0)), tour->size());
  QVERIFY2(!again.bitExplorer()->window()->frameGeometry().intersects(panelRect),
           qPrintable(QStringLiteral("explorer %1,%2 %3x%4; tour panel %5,%6 %7x%8")
                          .arg(again.bitExplorer()->window()->frameGeometry().x()).arg(again.bitExplorer()->window()->frameGeometry().y())
                          .arg(again.bitExplorer()->window()->frameGeometry().width()).arg(again.bitExplorer()->window()->frameGeometry().height())
                          .arg(panelRect.x()).arg(panelRect.y()).arg(panelRect.width()).arg(panelRect.height())));
  // Large type grows the explorer's window: it stays beside the panel and on the screen (it grew past
  // the screen's edge, and a window manager then pushed it back over the panel)
  again.bitExplorer()->setLargeType(true);
  QVERIFY(peat::testsupport::settle(again));
  const QRect grown = again.bitExplorer()->window()->frameGeometry();
  QVERIFY2(!grown.intersects(QRect(tour->mapToGlobal(QPoint(0, 0)), tour->size())), "the Large-type explorer covers the tour's panel");
  QVERIFY2(again.bitExplorer()->window()->screen()->availableGeometry().contains(grown),
           qPrintable(QStringLiteral("the Large-type explorer (%1,%2 %3x%4) runs off the screen")
                          .arg(grown.x()).arg(grown.y()).arg(grown.width()).arg(grown.height())));
  again.bitExplorer()->setLargeType(false);
  QVERIFY(tour->next());
  QVERIFY(peat::testsupport::settle(again));
  QCOMPARE(again.savePanel()->currentTab(), peat::views::SavePanel::CampaignTab);
  QVERIFY(!again.bitExplorer()->window()->isVisible());  // step 6's explorer does not cover step 7
  QVERIFY(tour->text().contains(QStringLiteral("--basis memory")));  // the basis the README quotes, stated
  QVERIFY(!tour->next());  // the last step
  tour->leave();
  QCOMPARE(tour->step(), -1);
}

// The form of "Record a Python script": the command it stands for, and a one-line reason when it is incomplete.
void TestRunPanel::recordFormGivesPeatRecord() {
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
void TestRunPanel::recordsAScriptIntoTheWindow() {
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
void TestRunPanel::recordsARuntimeFiSwap() {
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
void TestRunPanel::failingScriptSaysWhy() {
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
void TestRunPanel::cancelledRecordingKeepsItsIterations() {
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

QTEST_MAIN(TestRunPanel)
#include "tst_runpanel.moc"
