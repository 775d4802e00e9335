// SPDX-License-Identifier: MIT
// peat-workbench: the desktop face of PEAT Workbench.
#include <QApplication>
#include <QCommandLineParser>
#include <QIcon>
#include <QTimer>

#include <cstdio>
#include <memory>

#include "core/version.h"
#include "views/mainwindow.h"
#include "views/runpanel.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("peat-workbench"));
  QApplication::setOrganizationName(QStringLiteral("PEAT"));
  QApplication::setOrganizationDomain(QStringLiteral("peat.invalid"));
  QApplication::setApplicationVersion(QString::fromLatin1(peat::toolVersion()));
  QApplication::setDesktopFileName(QStringLiteral("io.github.peat.Workbench"));
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/peat/icon.svg")));

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Desktop workbench for GPU kernel validation (PEAT) and SAVE."));
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addPositionalArgument(QStringLiteral("files"),
                               QStringLiteral("A session (.h5) to open, or a golden and a candidate tensor (.npy) to compare."));
  QCommandLineOption screenshot(QStringLiteral("screenshot"),
                                QStringLiteral("Render the main window to a PNG file once shown, then quit."),
                                QStringLiteral("file"));
  parser.addOption(screenshot);
  QCommandLineOption select(QStringLiteral("select"),
                            QStringLiteral("Open the view of a session item, by its path in the tree, e.g. SAVE/lenet-symbolic."),
                            QStringLiteral("path"));
  parser.addOption(select);
  QCommandLineOption demo(QStringLiteral("demo"),
                          QStringLiteral("Open the demo session (LeNet profiled, replayed through bf16 and analysed, with "
                                         "SAVE's selection and a campaign); it is made on first use, in about 10 seconds."));
  parser.addOption(demo);
  parser.process(app);

  peat::views::MainWindow window;
  const bool shooting = parser.isSet(screenshot);
  window.setQuietErrors(shooting);
  window.show();
  bool opened = true;
  if (!parser.positionalArguments().isEmpty()) opened = window.openFiles(parser.positionalArguments());
  if (parser.isSet(demo)) opened = window.openDemo();
  if (opened && parser.isSet(select)) opened = window.selectItem(parser.value(select));

  if (shooting) {
    const QString file = parser.value(screenshot);
    auto shoot = [&window, file, &opened] {
      // once the pages have read what is selected (they read off the GUI thread), then 300 ms to paint
      auto* wait = new QTimer(&window);
      auto waited = std::make_shared<int>(0);
      QObject::connect(wait, &QTimer::timeout, &window, [&window, file, &opened, wait, waited] {
        if (window.pagesLoading() && ++*waited < 600) return;  // at most 30 s
        wait->stop();
        QTimer::singleShot(300, &window, [&window, file, &opened] {
          opened = opened && window.lastError().isEmpty();
          const bool saved = window.grab().save(file, "PNG");
          if (!saved) std::fprintf(stderr, "peat-workbench: error: cannot write %s\n", qPrintable(file));
          if (!opened) std::fprintf(stderr, "peat-workbench: error: %s\n", qPrintable(window.lastError()));
          QApplication::exit(saved && opened ? 0 : 1);
        });
      });
      wait->start(50);
    };
    if (window.runPanel()->running()) {  // the demo is being made: shoot once it is open
      QObject::connect(window.runPanel(), &peat::views::RunPanel::finished, &window,
                       [&opened, shoot](bool ok, const QString& message) {
                         if (!ok) std::fprintf(stderr, "peat-workbench: error: %s\n", qPrintable(message));
                         opened = opened && ok;
                         shoot();
                       });
    } else {
      shoot();
    }
  }
  return QApplication::exec();
}
