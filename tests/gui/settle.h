// SPDX-License-Identifier: MIT
#pragma once
// The workbench's pages read what is selected in jobs off the GUI thread (views/jobtracker.h):
// a test that selects something waits for the pages to show it before it looks.
#include <QTest>

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

// An exported table without its first line, "# PEAT Workbench: session ...", which names what it shows.
inline QString withoutHead(const QString& csv) {
  return csv.startsWith(QStringLiteral("# ")) ? csv.section(QLatin1Char('\n'), 1) : csv;
}
