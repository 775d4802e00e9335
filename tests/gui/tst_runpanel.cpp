// SPDX-License-Identifier: MIT
// The run panel drives real `peat` runs (PEAT_CLI) off the GUI thread: a SAVE analysis lands in the
// session and the main window shows it; a SAVE campaign cancelled mid-run leaves a readable session
// with the points it finished; an incomplete form is refused with a reason. The GUI thread never
// reads or writes a session file while a run goes on or while the window reopens the session
// (counted at the session layer's entry, so the check does not depend on the machine's load); a
// watchdog timer reports, for information, the longest gap in its event loop. (A plain PyTorch
// script recorded through the panel: tst_runpanel_record.)
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
#include "tests/gui/runpanel_support.h"

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
using peat::testsupport::sessionRuns;
using peat::testsupport::squeezed;

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

 private:
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
  dock.resize(200, 700);  // and narrow again: above once more, no sideways scrolling
  QTRY_COMPARE(form->rowWrapPolicy(), QFormLayout::WrapAllRows);
  QTRY_VERIFY(!dock.horizontalScrollBar()->isVisible());
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

QTEST_MAIN(TestRunPanel)
#include "tst_runpanel.moc"
