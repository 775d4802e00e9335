// SPDX-License-Identifier: MIT
// Whole-operation timings of the workbench's two loads that scale with data (docs/benchmarks.md, "Workbench
// speed"); offscreen, one line of numbers per measurement:
//   bench_workbench open SESSION          session tree ready (summary read, model built, shown)
//   bench_workbench pair GOLDEN CANDIDATE  two tensors read, analysed, detected and plotted; and the
//                                          read alone, so the rest is what follows the read
#include <QApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFileInfo>

#include <cstdio>

#include "core/io/tensor_source.h"
#include "views/errorplotpanel.h"
#include "views/mainwindow.h"

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  const QStringList args = app.arguments();
  if (args.size() < 3) {
    std::fprintf(stderr, "usage: bench_workbench open SESSION | pair GOLDEN CANDIDATE\n");
    return 2;
  }
  peat::views::MainWindow window;
  window.setQuietErrors(true);
  window.show();
  QElapsedTimer clock;
  if (args[1] == QLatin1String("open")) {
    clock.start();
    const bool ok = window.openSession(args[2]);
    QCoreApplication::processEvents();
    const qint64 ms = clock.elapsed();
    std::printf("open %s: %lld ms (%.0f MiB file, %s)\n", qPrintable(QFileInfo(args[2]).fileName()), (long long)ms,
                double(QFileInfo(args[2]).size()) / (1 << 20), ok ? "ok" : qPrintable(window.lastError()));
    return ok ? 0 : 1;
  }
  if (args[1] == QLatin1String("pair") && args.size() >= 4) {
    // the read alone: map both files and touch every page
    clock.start();
    {
      const peat::io::FloatTensor g = peat::io::readSource(args[2].toStdString());
      const peat::io::FloatTensor c = peat::io::readSource(args[3].toStdString());
      double sum = 0;
      for (uint64_t i = 0; i < g.size(); i += 1024) sum += double(g.data()[i]) + double(c.data()[i]);
      if (sum == 12345.678) std::printf(" ");
    }
    const qint64 read = clock.elapsed();
    QEventLoop shown, detected;
    QObject::connect(&window, &peat::views::MainWindow::comparisonShown, &shown, &QEventLoop::quit);
    QObject::connect(&window, &peat::views::MainWindow::comparisonDetected, &detected, &QEventLoop::quit);
    clock.restart();
    window.openFiles({args[2], args[3]});
    shown.exec();
    const qint64 histograms = clock.elapsed();
    detected.exec();
    const qint64 verdict = clock.elapsed();
    std::printf("pair: read (page cache) %lld ms; histograms on screen %lld ms, %lld ms after the read; verdict %lld ms\n",
                (long long)read, (long long)histograms, (long long)(histograms - read), (long long)verdict);
    return window.lastError().isEmpty() ? 0 : 1;
  }
  return 2;
}
