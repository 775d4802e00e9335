// SPDX-License-Identifier: MIT
#include <QAbstractItemModelTester>
#include <QtTest>

#include "core/store/session.h"
#include "tests/support/sample_session.h"
#include "views/devicespanel.h"
#include "views/sessiontreemodel.h"

#include <QTreeWidget>

using peat::views::SessionTreeModel;

class TestSessionTreeModel : public QObject {
  Q_OBJECT
 private slots:
  void structureFollowsSession();
  void incompleteIterationIsFlagged();
  void resetToEmpty();
  void cutTextsWholeOnHovering();
};

void TestSessionTreeModel::structureFollowsSession() {
  QTemporaryDir dir;
  const std::string path = dir.filePath(QStringLiteral("s.h5")).toStdString();
  peat::testsupport::writeSampleSession(path);
  SessionTreeModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  model.setSummary(peat::store::SessionReader(path).summary());
  QCOMPARE(model.rowCount(), 2);  // the run, and the SAVE group
  const QModelIndex run = model.index(0, 0);
  QCOMPARE(run.data().toString(), QStringLiteral("golden"));
  QVERIFY(model.index(0, 1).data().toString().contains(QStringLiteral("complete")));
  QCOMPARE(model.rowCount(run), 3);
  const QModelIndex it1 = model.index(1, 0, run);
  QCOMPARE(it1.data().toString(), QStringLiteral("iteration 1"));
  QCOMPARE(model.rowCount(it1), 4);
  const QModelIndex call = model.index(3, 0, it1);
  QCOMPARE(call.data().toString(), QStringLiteral("#3 fc3"));
  QCOMPARE(model.index(3, 1, it1).data().toString(), QStringLiteral("relu backward"));
  QVERIFY(call.data(Qt::ToolTipRole).toString().contains(QStringLiteral("input_0 float32[64x128]")));
  QCOMPARE(model.parent(call), it1);
  const QModelIndex save = model.index(1, 0);
  QCOMPARE(save.data().toString(), QStringLiteral("SAVE"));
  QCOMPARE(model.index(0, 0, save).data().toString(), QStringLiteral("fc0-bits"));
}

void TestSessionTreeModel::incompleteIterationIsFlagged() {
  peat::store::SessionSummary s;
  peat::store::RunInfo run;
  run.name = "r";
  run.iterations.push_back({0, true, {}});
  run.iterations.push_back({1, false, {}});
  s.runs.push_back(run);
  SessionTreeModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  model.setSummary(s);
  const QModelIndex r = model.index(0, 0);
  QCOMPARE(model.index(1, 1, r).data().toString(), QStringLiteral("incomplete"));
  QVERIFY(model.index(1, 0, r).data(Qt::ForegroundRole).isValid());
  QVERIFY(!model.index(0, 0, r).data(Qt::ForegroundRole).isValid());
}

void TestSessionTreeModel::resetToEmpty() {
  SessionTreeModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  peat::store::SessionSummary s;
  s.runs.resize(2);
  model.setSummary(s);
  QCOMPARE(model.rowCount(), 2);
  model.clear();
  QCOMPARE(model.rowCount(), 0);
}

// A narrow dock cuts a run's Details and a backend's status: the column holds what fits first (the
// run's details, the backend's one word) and hovering gives the whole of it.
void TestSessionTreeModel::cutTextsWholeOnHovering() {
  QTemporaryDir dir;
  const std::string path = dir.filePath(QStringLiteral("s.h5")).toStdString();
  peat::testsupport::writeSampleSession(path);
  SessionTreeModel model;
  model.setSummary(peat::store::SessionReader(path).summary());
  const QString details = model.index(0, 1).data().toString();
  QVERIFY(!details.isEmpty());
  QVERIFY2(model.index(0, 1).data(Qt::ToolTipRole).toString().startsWith(details + QLatin1Char('\n')),
           qPrintable(model.index(0, 1).data(Qt::ToolTipRole).toString()));

  peat::views::DevicesPanel devices;
  peat::gpu::BackendProbe cuda;
  cuda.name = "cuda";
  cuda.status = "no device: cudaGetDeviceCount failed (no CUDA-capable device is detected)";
  devices.showBackends({cuda});
  const QTreeWidgetItem* item = devices.findChild<QTreeWidget*>()->topLevelItem(0);
  QCOMPARE(item->text(1), QStringLiteral("unavailable"));
  QCOMPARE(item->toolTip(1), QStringLiteral("unavailable: ") + QString::fromStdString(cuda.status));
}

QTEST_MAIN(TestSessionTreeModel)
#include "tst_sessiontreemodel.moc"
