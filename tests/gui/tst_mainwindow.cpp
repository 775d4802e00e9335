// SPDX-License-Identifier: MIT
// The main window, headless: opens a session, shows it, refuses bad files without losing the
// open one, and renders to a PNG under the build tree for people to look at.
#include <QtTest>

#include <QDockWidget>
#include <QMenuBar>
#include <QTableWidget>

#include "tests/support/sample_session.h"
#include "views/mainwindow.h"
#include "views/sessiontreemodel.h"

using peat::views::MainWindow;

class TestMainWindow : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void hasMenusAndDocks();
  void opensSessionAndRenders();
  void badFileKeepsCurrentSession();
  void recentSessionsAreRemembered();

 private:
  QTemporaryDir dir_;
  QString sample_;
};

void TestMainWindow::initTestCase() {
  QStandardPaths::setTestModeEnabled(true);  // QSettings go to a test location
  QSettings().clear();
  QVERIFY(dir_.isValid());
  sample_ = dir_.filePath(QStringLiteral("sample.h5"));
  peat::testsupport::writeSampleSession(sample_.toStdString());
}

void TestMainWindow::hasMenusAndDocks() {
  MainWindow w;
  QStringList menus;
  for (QAction* a : w.menuBar()->actions()) menus << a->text();
  QCOMPARE(menus, (QStringList{QStringLiteral("&File"), QStringLiteral("&Edit"), QStringLiteral("&Run"), QStringLiteral("&View"), QStringLiteral("&Help")}));
  QStringList docks;
  for (QDockWidget* d : w.findChildren<QDockWidget*>()) docks << d->objectName();
  docks.sort();
  QCOMPARE(docks, (QStringList{QStringLiteral("DevicesDock"), QStringLiteral("ErrorPlotDock"), QStringLiteral("ExplainDock"),
                               QStringLiteral("RunDock"), QStringLiteral("SessionDock"), QStringLiteral("VerdictDock")}));
}

void TestMainWindow::opensSessionAndRenders() {
  MainWindow w;
  w.setQuietErrors(true);
  w.resize(1400, 860);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  QVERIFY(w.openSession(sample_));
  QCOMPARE(w.sessionModel()->rowCount(), 2);
  QVERIFY(w.windowTitle().startsWith(QStringLiteral("sample.h5")));
  auto* verdicts = w.findChild<QTableWidget*>();
  QVERIFY(verdicts);
  QTest::qWait(100);

  const QImage shot = w.grab().toImage();
  QCOMPARE(shot.width(), w.width() * int(shot.devicePixelRatio()));
  QSet<QRgb> colours;
  for (int y = 0; y < shot.height(); y += 7)
    for (int x = 0; x < shot.width(); x += 7) colours.insert(shot.pixel(x, y));
  QVERIFY2(colours.size() > 10, "the rendered window is nearly blank");
  const QString out = QStringLiteral(PEAT_TEST_OUTPUT_DIR "/mainwindow-offscreen.png");
  QVERIFY(shot.save(out));
  qInfo("rendered %s", qPrintable(out));
}

void TestMainWindow::badFileKeepsCurrentSession() {
  MainWindow w;
  w.setQuietErrors(true);
  QVERIFY(w.openSession(sample_));
  const QString junk = dir_.filePath(QStringLiteral("junk.h5"));
  QFile f(junk);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write("junk");
  f.close();
  QVERIFY(!w.openSession(junk));
  QVERIFY(w.lastError().contains(QStringLiteral("not an HDF5 file")));
  QCOMPARE(w.sessionPath(), sample_);
  QCOMPARE(w.sessionModel()->rowCount(), 2);
  QVERIFY(!w.openSession(dir_.filePath(QStringLiteral("missing.h5"))));
  QCOMPARE(w.sessionPath(), sample_);
}

void TestMainWindow::recentSessionsAreRemembered() {
  {
    MainWindow w;
    w.setQuietErrors(true);
    QVERIFY(w.openSession(sample_));
  }
  const QStringList recent = QSettings().value(QStringLiteral("session/recent")).toStringList();
  QVERIFY(!recent.isEmpty());
  QCOMPARE(recent.first(), QFileInfo(sample_).absoluteFilePath());
}

QTEST_MAIN(TestMainWindow)
#include "tst_mainwindow.moc"
