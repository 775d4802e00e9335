// SPDX-License-Identifier: MIT
// The run panel's SAVE run (issue 30, item 4): `peat save run` (PEAT_CLI) started from the form in
// the main window, its outputs on the SAVE tab's Run outputs page, checked against PyTorch's own
// outputs on the same inputs (tests/gui/save_run_models.py exports the models at test time): the top
// classes per sample and their scores against torch.topk, a conv's per-sample range and first
// values against PyTorch's output tensor, the largest difference against one computed here from
// the outputs file, and what the protection caught against the command's own JSON. A bad input is
// one line on the page and in the panel; a form without an input is refused; Cancel ends a run.
#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QElapsedTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>

#include "core/io/tensor_source.h"
#include "views/mainwindow.h"
#include "views/runpanel.h"
#include "views/savepanel.h"
#include "views/saveruncontroller.h"
#include "views/saveruntablemodel.h"
#include "views/saverunview.h"
#include "tests/gui/settle.h"

using peat::views::MainWindow;
using peat::views::RunPanel;
using peat::views::SavePanel;
using peat::views::SaveRunController;
using peat::views::SaveRunTableModel;

namespace {

peat::io::FloatTensor load(const QString& path) { return peat::io::readSource(path.toStdString()); }

bool close(double shown, double expected, double tolerance) {
  return std::fabs(shown - expected) <= tolerance * std::max(1.0, std::fabs(expected));
}

}  // namespace

class TestSaveRun : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void classifierShowsTopClasses();
  void tensorShowsItsRangeAndFirstValues();
  void severalOutputsShowOneAtATime();
  void severalInputsAreOneFieldEach();
  void protectionSaysWhatItCaught();
  void badInputIsOneLine();
  void incompleteFormIsRefused();
  void cancelEndsTheRun();

 private:
  QString file(const QString& name) const { return dir_.filePath(name); }
  // Fills the window's run panel for a SAVE run of `model` on x.npy (expected outputs `expect`).
  static void fill(MainWindow& w, const QString& model, const QString& input, const QString& expect) {
    RunPanel* panel = w.runPanel();
    panel->setMode(RunPanel::Mode::SaveRun);
    panel->setModel(model);
    panel->setInput(input);
    panel->setExpected(expect);
  }
  // Starts the form; true once the SAVE tab shows the run's outputs (`ok`) or why there are none.
  static bool runUntilShown(MainWindow& w, bool ok) {
    QSignalSpy shown(w.saveRuns(), &SaveRunController::outputsShown);
    if (!w.runPanel()->start()) return false;
    if (!QTest::qWaitFor([&] { return !shown.isEmpty(); }, 120000)) return false;
    return shown.first().at(0).toBool() == ok && !w.pagesLoading();
  }
  QTemporaryDir dir_;
};

void TestSaveRun::initTestCase() {
  QVERIFY2(QFileInfo::exists(qEnvironmentVariable("PEAT_CLI")), "PEAT_CLI names no peat program (run through ctest)");
  QProcess python;
  python.start(QStringLiteral(PEAT_PYTHON), {QStringLiteral(PEAT_SOURCE_DIR "/tests/gui/save_run_models.py"), dir_.path()});
  QVERIFY(python.waitForFinished(120000));
  QVERIFY2(python.exitCode() == 0, python.readAllStandardError().constData());
}

void TestSaveRun::classifierShowsTopClasses() {
  MainWindow w;
  w.setQuietErrors(true);
  w.resize(1366, 768);
  w.show();
  fill(w, file(QStringLiteral("classifier.onnx")), file(QStringLiteral("x.npy")), file(QStringLiteral("ref.npy")));
  w.runPanel()->setOutputs(file(QStringLiteral("out.npy")));
  auto* view = w.savePanel()->runView();
  QAbstractItemModelTester tester(view->model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
  QVERIFY(runUntilShown(w, true));
  QCOMPARE(w.savePanel()->currentTab(), SavePanel::RunTab);
  QCOMPARE(qobject_cast<QTabWidget*>(w.centralWidget())->currentWidget(), w.savePanel());

  // PyTorch's top 5 per sample, as torch.topk gave them
  const peat::io::FloatTensor index = load(file(QStringLiteral("top_index.npy")));
  const peat::io::FloatTensor value = load(file(QStringLiteral("top_value.npy")));
  SaveRunTableModel* m = view->model();
  QCOMPARE(m->rowCount(), 6);
  QCOMPARE(m->classColumns(), 5);
  for (int r = 0; r < 6; ++r)
    for (int k = 0; k < 5; ++k) {
      const QModelIndex cell = m->index(r, 1 + k);
      const std::size_t at = std::size_t(r * 5 + k);
      QCOMPARE(cell.data(SaveRunTableModel::ClassRole).toInt(), int(index.data()[at]));
      QVERIFY2(close(cell.data(SaveRunTableModel::ScoreRole).toDouble(), value.data()[at], 1e-5),
               qPrintable(cell.data().toString()));
      QVERIFY(cell.data().toString().startsWith(QString(QString::number(int(index.data()[at])) + QStringLiteral(" ("))));
    }

  // the largest difference from PyTorch's outputs, computed here from the outputs the run wrote
  const peat::io::FloatTensor out = load(file(QStringLiteral("out.npy"))), ref = load(file(QStringLiteral("ref.npy")));
  QCOMPARE(out.size(), ref.size());
  double largest = 0;
  for (uint64_t i = 0; i < out.size(); ++i) largest = std::max(largest, std::fabs(double(out.data()[i]) - ref.data()[i]));
  QVERIFY2(largest < 1e-5, qPrintable(QString::number(largest)));  // SAVE's engine computes what PyTorch computes
  const QString details = view->detailsText();
  QVERIFY2(details.contains(QStringLiteral("largest |difference| %1 ").arg(QString::number(largest, 'g', 6))),
           qPrintable(details));
  QVERIFY2(details.contains(QStringLiteral("top-1 agrees on 6 of 6 samples")), qPrintable(details));
  QVERIFY2(details.contains(QStringLiteral("6 x [7]")), qPrintable(details));
  QVERIFY(details.contains(QStringLiteral("plain fp32 engine")));
  QCOMPARE(view->titleText(), QStringLiteral("classifier.onnx on 6 sample(s) of x.npy"));
  // File > Export Table: the same rows
  const QStringList csv = withoutHead(w.currentCsv()).trimmed().split(QLatin1Char('\n'));
  QCOMPARE(csv.size(), 7);
  QVERIFY(csv.front().startsWith(QStringLiteral("sample,class_1,output_1,")));
  QVERIFY(csv[1].startsWith(QStringLiteral("0,%1,").arg(int(index.data()[0]))));
  w.grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/saverun.png"));
}

// A conv's output [2, 2, 2] is no vector of scores: each sample's range and its first values.
void TestSaveRun::tensorShowsItsRangeAndFirstValues() {
  MainWindow w;
  w.setQuietErrors(true);
  fill(w, file(QStringLiteral("conv.onnx")), file(QStringLiteral("x.npy")), file(QStringLiteral("conv_ref.npy")));
  QVERIFY(runUntilShown(w, true));  // the outputs go to a file of the panel's own
  SaveRunTableModel* m = w.savePanel()->runView()->model();
  QAbstractItemModelTester tester(m, QAbstractItemModelTester::FailureReportingMode::QtTest);
  QCOMPARE(m->classColumns(), 0);
  QCOMPARE(m->rowCount(), 6);
  QCOMPARE(m->columnCount(), 5);
  QCOMPARE(m->headerData(4, Qt::Horizontal).toString(), QStringLiteral("First values"));
  const peat::io::FloatTensor ref = load(file(QStringLiteral("conv_ref.npy")));
  QCOMPARE(ref.size(), uint64_t(6 * 8));
  for (int r = 0; r < 6; ++r) {
    const float* y = ref.data() + r * 8;
    double lo = y[0], hi = y[0], sum = 0;
    for (int i = 0; i < 8; ++i) {
      lo = std::min(lo, double(y[i]));
      hi = std::max(hi, double(y[i]));
      sum += y[i];
    }
    QVERIFY(close(m->index(r, 1).data(SaveRunTableModel::ScoreRole).toDouble(), lo, 1e-5));
    QVERIFY(close(m->index(r, 2).data(SaveRunTableModel::ScoreRole).toDouble(), hi, 1e-5));
    QVERIFY(close(m->index(r, 3).data(SaveRunTableModel::ScoreRole).toDouble(), sum / 8, 1e-5));
    const QStringList first = m->index(r, 4).data(Qt::ToolTipRole).toString().split(QStringLiteral(", "));
    QCOMPARE(first.size(), 8);
    for (int i = 0; i < 8; ++i) QVERIFY2(close(first[i].toDouble(), y[i], 1e-5), qPrintable(first.join(QLatin1Char(' '))));
  }
  QVERIFY(w.savePanel()->runView()->detailsText().contains(QStringLiteral("6 x [2x2x2]")));
}

// A model with two outputs (scores [7], box [2, 3]): each output's file read, one shown at a time,
// chosen above the table; the tables against PyTorch's outputs of each head.
void TestSaveRun::severalOutputsShowOneAtATime() {
  MainWindow w;
  w.setQuietErrors(true);
  w.resize(1366, 768);
  w.show();
  // the references named, the second first: each output is compared with its own
  fill(w, file(QStringLiteral("two_heads.onnx")), file(QStringLiteral("x.npy")),
       QStringLiteral("box=%1; scores=%2").arg(file(QStringLiteral("two_box_ref.npy")), file(QStringLiteral("two_scores_ref.npy"))));
  w.runPanel()->setOutputs(file(QStringLiteral("two.npy")));
  auto* view = w.savePanel()->runView();
  SaveRunTableModel* m = view->model();
  QAbstractItemModelTester tester(m, QAbstractItemModelTester::FailureReportingMode::QtTest);
  QVERIFY(runUntilShown(w, true));
  QComboBox* chooser = view->outputChooser();
  QVERIFY(chooser->isVisibleTo(view));
  QCOMPARE(chooser->count(), 2);
  QCOMPARE(chooser->itemText(0), QStringLiteral("scores [7]"));
  QCOMPARE(chooser->itemText(1), QStringLiteral("box [2x3]"));
  QCOMPARE(chooser->currentIndex(), 0);
  const QString details = view->detailsText();
  QVERIFY2(details.contains(QStringLiteral("2 output(s) of 6 sample(s): scores [7] written to %1")
                                .arg(file(QStringLiteral("two.scores.npy")))),
           qPrintable(details));
  QVERIFY2(details.contains(QStringLiteral("Against two_scores_ref.npy")), qPrintable(details));
  QVERIFY2(details.contains(QStringLiteral("top-1 agrees on 6 of 6 samples")), qPrintable(details));
  // scores: top classes as PyTorch's
  const peat::io::FloatTensor scores = load(file(QStringLiteral("two_scores_ref.npy")));
  QCOMPARE(m->classColumns(), 5);
  QCOMPARE(m->rowCount(), 6);
  for (int r = 0; r < 6; ++r) {
    const float* y = scores.data() + r * 7;
    QCOMPARE(m->index(r, 1).data(SaveRunTableModel::ClassRole).toInt(), int(std::max_element(y, y + 7) - y));
    QVERIFY(close(m->index(r, 1).data(SaveRunTableModel::ScoreRole).toDouble(), *std::max_element(y, y + 7), 1e-5));
  }
  // box: each sample's range, as PyTorch's second output
  chooser->setCurrentIndex(1);
  const peat::io::FloatTensor box = load(file(QStringLiteral("two_box_ref.npy")));
  QCOMPARE(m->classColumns(), 0);
  QCOMPARE(m->rowCount(), 6);
  for (int r = 0; r < 6; ++r) {
    const float* y = box.data() + r * 6;
    QVERIFY(close(m->index(r, 1).data(SaveRunTableModel::ScoreRole).toDouble(), *std::min_element(y, y + 6), 1e-5));
    QVERIFY(close(m->index(r, 2).data(SaveRunTableModel::ScoreRole).toDouble(), *std::max_element(y, y + 6), 1e-5));
  }
  QVERIFY2(view->detailsText().contains(QStringLiteral("All values of box")), qPrintable(view->detailsText()));
  QVERIFY2(view->detailsText().contains(QStringLiteral("Against two_box_ref.npy")), qPrintable(view->detailsText()));
  w.grab().save(QStringLiteral(PEAT_TEST_OUTPUT_DIR "/saverun-two-outputs.png"));
  // a model with one output afterwards: no chooser
  fill(w, file(QStringLiteral("conv.onnx")), file(QStringLiteral("x.npy")), QString());
  w.runPanel()->setOutputs(QString());
  QVERIFY(runUntilShown(w, true));
  QVERIFY(!chooser->isVisibleTo(view));
  QCOMPARE(m->classColumns(), 0);
}

// A model with two inputs: the Input field names one file per input, separated by ';', in order or
// as NAME=FILE; the outputs against PyTorch's; a missing second file is refused by name.
void TestSaveRun::severalInputsAreOneFieldEach() {
  MainWindow w;
  w.setQuietErrors(true);
  const peat::io::FloatTensor ref = load(file(QStringLiteral("two_inputs_ref.npy")));
  const QList<QPair<QString, QString>> cases = {
      {file(QStringLiteral("x.npy")) + QStringLiteral("; ") + file(QStringLiteral("b.npy")), QStringLiteral("x.npy, b.npy")},
      {QStringLiteral("b=%1;a=%2").arg(file(QStringLiteral("b.npy")), file(QStringLiteral("x.npy"))), QStringLiteral("b.npy, x.npy")}};
  for (const auto& [given, shown] : cases) {
    fill(w, file(QStringLiteral("two_inputs.onnx")), given, QString());
    QVERIFY2(runUntilShown(w, true), qPrintable(given));
    SaveRunTableModel* m = w.savePanel()->runView()->model();
    QCOMPARE(m->rowCount(), 6);
    QCOMPARE(m->classColumns(), 5);
    for (int r = 0; r < 6; ++r) {
      const float* y = ref.data() + r * 5;
      QCOMPARE(m->index(r, 1).data(SaveRunTableModel::ClassRole).toInt(), int(std::max_element(y, y + 5) - y));
      QVERIFY(close(m->index(r, 1).data(SaveRunTableModel::ScoreRole).toDouble(), *std::max_element(y, y + 5), 1e-5));
    }
    QCOMPARE(w.savePanel()->runView()->titleText(), QStringLiteral("two_inputs.onnx on 6 sample(s) of ") + shown);
  }
  fill(w, file(QStringLiteral("two_inputs.onnx")), file(QStringLiteral("x.npy")) + QStringLiteral("; ") + file(QStringLiteral("none.npy")),
       QString());
  QString why;
  QVERIFY(w.runPanel()->arguments(&why).isEmpty());
  QVERIFY2(why.contains(QStringLiteral("none.npy does not exist")), qPrintable(why));
}

// The counts the page shows are the command's: faults injected, detected and recovered.
void TestSaveRun::protectionSaysWhatItCaught() {
  const QStringList args{QStringLiteral("save"),      QStringLiteral("run"),  QStringLiteral("-m"),
                         file(QStringLiteral("classifier.onnx")), QStringLiteral("-i"), file(QStringLiteral("x.npy")),
                         QStringLiteral("--protect"), QStringLiteral("save"), QStringLiteral("--flips"),
                         QStringLiteral("20"),        QStringLiteral("--seed"), QStringLiteral("3"),
                         QStringLiteral("--json")};
  QProcess cli;
  cli.start(qEnvironmentVariable("PEAT_CLI"), args);
  QVERIFY(cli.waitForFinished(120000) && cli.exitCode() == 0);
  const QJsonObject stats = QJsonDocument::fromJson(cli.readAllStandardOutput()).object().value(QLatin1String("stats")).toObject();
  const qint64 detections = stats.value(QLatin1String("detections")).toInteger();
  QVERIFY2(detections > 0, "20 flips over the classifier are detected");  // else the check below proves little

  MainWindow w;
  w.setQuietErrors(true);
  fill(w, file(QStringLiteral("classifier.onnx")), file(QStringLiteral("x.npy")), QString());
  w.runPanel()->setProtection(QStringLiteral("save"));
  w.runPanel()->setFaults(20);
  w.runPanel()->setSeed(3);
  QVERIFY(runUntilShown(w, true));
  const QString details = w.savePanel()->runView()->detailsText();
  QVERIFY2(details.contains(QStringLiteral("%1 fault(s) injected, %2 detected, %3 recovered")
                                .arg(stats.value(QLatin1String("faults")).toInteger())
                                .arg(detections)
                                .arg(stats.value(QLatin1String("recoveries")).toInteger())),
           qPrintable(details));
  QVERIFY(details.contains(QStringLiteral("protected by save, 20 bit flip(s) asked")));
  QVERIFY(!details.contains(QStringLiteral("Against")));  // no expected outputs given
}

void TestSaveRun::badInputIsOneLine() {
  MainWindow w;
  w.setQuietErrors(true);
  fill(w, file(QStringLiteral("classifier.onnx")), file(QStringLiteral("x.npy")), QString());
  QVERIFY(runUntilShown(w, true));
  QCOMPARE(w.savePanel()->runView()->model()->rowCount(), 6);
  w.runPanel()->setInput(file(QStringLiteral("wrong.npy")));
  QVERIFY(runUntilShown(w, false));
  const QString shown = w.savePanel()->runView()->titleText();
  QVERIFY2(shown.startsWith(QStringLiteral("peat: error: ")) && shown.contains(QStringLiteral("[3,3]")) &&
               !shown.contains(QLatin1Char('\n')),
           qPrintable(shown));
  QCOMPARE(w.runPanel()->statusText(), shown);
  QCOMPARE(w.savePanel()->runView()->model()->rowCount(), 0);  // the outputs before are not this run's
  QVERIFY(!w.savePanel()->runView()->table()->isVisible());
}

void TestSaveRun::incompleteFormIsRefused() {
  RunPanel panel;
  panel.setMode(RunPanel::Mode::SaveRun);
  panel.setSessionPath(QString());  // a SAVE run writes no session
  panel.setModel(file(QStringLiteral("classifier.onnx")));
  QString error;
  QVERIFY(panel.arguments(&error).isEmpty());
  QVERIFY2(error.contains(QStringLiteral("choose the model's input")), qPrintable(error));
  panel.setInput(file(QStringLiteral("missing.npy")));
  QVERIFY(panel.arguments(&error).isEmpty());
  QVERIFY2(error.contains(QStringLiteral("does not exist")), qPrintable(error));
  panel.setInput(file(QStringLiteral("x.npy")));
  panel.setExpected(file(QStringLiteral("missing.npy")));
  QVERIFY(panel.arguments(&error).isEmpty());
  QVERIFY2(error.contains(QStringLiteral("expected outputs")), qPrintable(error));
  panel.setExpected(QString());
  panel.setModel(QStringLiteral("resnet"));  // no shipped weights
  QVERIFY(panel.arguments(&error).isEmpty());
  QVERIFY(error.contains(QStringLiteral("no trained weights of resnet")));
  panel.setModel(file(QStringLiteral("classifier.onnx")));
  panel.setProtection(QStringLiteral("tmr"));
  panel.setFaults(7);
  const QStringList args = panel.arguments(&error);
  QVERIFY2(!args.isEmpty(), qPrintable(error));
  QCOMPARE(args.mid(0, 4), (QStringList{QStringLiteral("save"), QStringLiteral("run"), QStringLiteral("-m"),
                                        file(QStringLiteral("classifier.onnx"))}));
  QCOMPARE(args.mid(args.indexOf(QStringLiteral("--protect")), 4),
           (QStringList{QStringLiteral("--protect"), QStringLiteral("tmr"), QStringLiteral("--flips"), QStringLiteral("7")}));
  QVERIFY(args.contains(QStringLiteral("--json")) && !args.contains(QStringLiteral("-s")) &&
          !args.contains(QStringLiteral("--expect")));
  QCOMPARE(args.at(args.indexOf(QStringLiteral("--output")) + 1), panel.outputsPath());
  QVERIFY(!panel.writesSession());
}

// A stand-in for peat that ignores SIGINT: Cancel still ends it, and the page says so.
void TestSaveRun::cancelEndsTheRun() {
  const QString fake = file(QStringLiteral("slow-peat"));
  QFile f(fake);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write("#!/bin/sh\ntrap '' INT\nsleep 30\n");
  f.close();
  f.setPermissions(f.permissions() | QFileDevice::ExeOwner);
  const QByteArray real = qgetenv("PEAT_CLI");
  qputenv("PEAT_CLI", fake.toUtf8());
  MainWindow w;
  w.setQuietErrors(true);
  fill(w, file(QStringLiteral("classifier.onnx")), file(QStringLiteral("x.npy")), QString());
  QSignalSpy shown(w.saveRuns(), &SaveRunController::outputsShown);
  QVERIFY(w.runPanel()->start());
  QVERIFY(w.savePanel()->runView()->titleText().startsWith(QStringLiteral("Running")));
  QTest::qWait(200);
  QElapsedTimer clock;
  clock.start();
  w.runPanel()->cancel();
  QTRY_COMPARE_WITH_TIMEOUT(shown.size(), 1, 5000);
  qputenv("PEAT_CLI", real);
  QVERIFY2(clock.elapsed() < 2000, qPrintable(QString::number(clock.elapsed())));
  QCOMPARE(shown.first().at(0).toBool(), false);
  QCOMPARE(w.savePanel()->runView()->titleText(), QStringLiteral("Cancelled"));
  QVERIFY(!w.runPanel()->running());
}

QTEST_MAIN(TestSaveRun)
#include "tst_saverun.moc"
