// SPDX-License-Identifier: MIT
#pragma once
// The workbench's pages read what is selected in jobs off the GUI thread (views/jobtracker.h):
// a test that selects something waits for the pages to show it before it looks.
#include <QCoreApplication>
#include <QTest>
#include <QThread>

#include <atomic>

#include "views/mainwindow.h"

namespace peat::testsupport {

// Serves events until no page is reading (at most `ms`); false on time-out.
inline bool settle(const views::MainWindow& w, int ms = 30000) {
  return QTest::qWaitFor([&w] { return !w.pagesLoading(); }, ms);
}

// selectItem, then the pages' reads: false when the item is missing, a read failed or timed out.
inline bool selectAndSettle(views::MainWindow& w, const QString& path) {
  if (!w.selectItem(path)) return false;
  return settle(w) && w.lastError().isEmpty();
}

}  // namespace peat::testsupport

// Entries into the session layer (HDF5, probes) made on the GUI thread, counted while
// peat::store::setSessionAccessObserver(countGuiThreadRead) is set: the pages read off it.
inline std::atomic<int> guiThreadReads{0};
inline void countGuiThreadRead() {
  if (QThread::currentThread() == QCoreApplication::instance()->thread()) ++guiThreadReads;
}

// An exported table without its first line, "# PEAT Workbench: session ...", which names what it shows.
inline QString withoutHead(const QString& csv) {
  return csv.startsWith(QStringLiteral("# ")) ? csv.section(QLatin1Char('\n'), 1) : csv;
}
