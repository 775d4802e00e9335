// SPDX-License-Identifier: MIT
// peat-workbench: the desktop face of PEAT Workbench.
#include <QApplication>
#include <QCommandLineParser>
#include <QIcon>
#include <QProcess>
#include <QScreen>
#include <QTabWidget>
#include <QScrollBar>
#include <QTextBrowser>
#include <QTimer>

#include <cstdio>
#include <functional>
#include <map>
#include <memory>

#include "core/version.h"
#include "views/mainwindow.h"
#include "views/bitexplorer.h"
#include "views/runpanel.h"
#include "views/tourpanel.h"

namespace {

// --page: a tab by its title, a nested tab after a slash ("SAVE/Tiles", "Call/Where"); false when
// there is none of that name.
bool showPage(peat::views::MainWindow& window, const QString& path) {
  QWidget* at = window.centralWidget();
  for (const QString& name : path.split(QLatin1Char('/'), Qt::SkipEmptyParts)) {
    auto* tabs = qobject_cast<QTabWidget*>(at);
    if (!tabs && at) tabs = at->findChild<QTabWidget*>();
    if (!tabs) return false;
    int found = -1;
    for (int i = 0; i < tabs->count() && found < 0; ++i)
      if (tabs->tabText(i).remove(QLatin1Char('&')).compare(name, Qt::CaseInsensitive) == 0) found = i;
    if (found < 0) return false;
    tabs->setCurrentIndex(found);
    at = tabs->widget(found);
  }
  return true;
}

// --save-run: the run panel's form for `peat save run` from that command's arguments; false with
// `error` set for an argument the form does not take.
bool fillSaveRun(peat::views::RunPanel& panel, const QStringList& args, QString* error) {
  using Setter = std::function<bool(const QString&)>;  // false: a value the form does not take
  const auto number = [](const QString& v, auto set) {
    bool ok = false;
    const qlonglong n = v.toLongLong(&ok);
    if (ok && n >= 0) set(n);
    return ok && n >= 0;
  };
  const auto text = [](auto set) {
    return [set](const QString& v) {
      set(v);
      return true;
    };
  };
  const std::map<QString, Setter> setters{
      {QStringLiteral("-m"), text([&](const QString& v) { panel.setModel(v); })},
      {QStringLiteral("--model"), text([&](const QString& v) { panel.setModel(v); })},
      {QStringLiteral("-i"), text([&](const QString& v) { panel.setInput(v); })},
      {QStringLiteral("--input"), text([&](const QString& v) { panel.setInput(v); })},
      {QStringLiteral("--expect"), text([&](const QString& v) { panel.setExpected(v); })},
      {QStringLiteral("-o"), text([&](const QString& v) { panel.setOutputs(v); })},
      {QStringLiteral("--output"), text([&](const QString& v) { panel.setOutputs(v); })},
      {QStringLiteral("--protect"), [&](const QString& v) { return panel.setProtection(v); }},
      {QStringLiteral("--flips"), [&](const QString& v) { return number(v, [&](qlonglong n) { panel.setFaults(n); }); }},
      {QStringLiteral("--seed"), [&](const QString& v) { return number(v, [&](qlonglong n) { panel.setSeed(int(n)); }); }}};
  panel.setMode(peat::views::RunPanel::Mode::SaveRun);
  for (int i = 0; i < args.size(); i += 2) {
    const auto it = setters.find(args[i]);
    if (it == setters.end() || i + 1 >= args.size()) {
      *error = QStringLiteral("--save-run takes -m, -i, --expect, --protect, --flips, --seed and -o, each with a value, "
                              "not '%1'").arg(args[i]);
      return false;
    }
    if (!it->second(args[i + 1])) {
      *error = QStringLiteral("--save-run: %1 does not take '%2'").arg(args[i], args[i + 1]);
      return false;
    }
  }
  return true;
}

// Calls `then` once the pages have read what is selected (off the GUI thread), at most 30 s on.
void whenSettled(peat::views::MainWindow& window, std::function<void()> then) {
  auto* wait = new QTimer(&window);
  auto waited = std::make_shared<int>(0);
  QObject::connect(wait, &QTimer::timeout, &window, [&window, wait, waited, then] {
    if (window.pagesLoading() && ++*waited < 600) return;
    wait->stop();
    wait->deleteLater();
    then();
  });
  wait->start(50);
}

}  // namespace

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
  QCommandLineOption page(QStringLiteral("page"),
                          QStringLiteral("With --screenshot: the page to render, by its tab's title (\"SAVE/Tiles\", \"Call/Where\"); "
                                         "\"Bit Explorer:VALUE[:large]\" renders the bit explorer on VALUE (in large type), \"Tour:N\" the tour at step N; "
                                         "PAGE@ITEM selects ITEM first. Repeated: one picture per page, named by \"{page}\" in the file."),
                          QStringLiteral("page"));
  parser.addOption(page);
  QCommandLineOption saveRun(QStringLiteral("save-run"),
                             QStringLiteral("Run `peat save run` from the run panel with these arguments (\"-m MODEL -i "
                                            "INPUT [--expect Y.npy] [--protect P] [--flips N] [--seed S] [-o Y.npy]\") "
                                            "and show its outputs on the SAVE tab."),
                             QStringLiteral("arguments"));
  parser.addOption(saveRun);
  parser.process(app);

  peat::views::MainWindow window;
  const bool shooting = parser.isSet(screenshot);
  window.setQuietErrors(shooting);
  window.show();
  bool opened = true;
  if (!parser.positionalArguments().isEmpty()) opened = window.openFiles(parser.positionalArguments());
  if (parser.isSet(demo)) opened = window.openDemo();
  if (opened && parser.isSet(select)) opened = window.selectItem(parser.value(select));
  if (opened && parser.isSet(saveRun)) {
    QString error;
    window.showRunPanel();  // the form it runs, beside its outputs
    opened = fillSaveRun(*window.runPanel(), QProcess::splitCommand(parser.value(saveRun)), &error) &&
             window.runPanel()->start();
    if (!error.isEmpty() || !opened) {
      const QString why = error.isEmpty() ? window.runPanel()->statusText() : error;
      std::fprintf(stderr, "peat-workbench: error: %s\n", qPrintable(why));
      window.reportError(why);  // the window says it too: its form is empty or was not run
    }
  }

  if (shooting) {
    // several --page values: one picture each, in one process, the file named by "{page}" in --screenshot
    QStringList pages = parser.values(page);
    if (pages.isEmpty()) pages << QString();
    const QString pattern = parser.value(screenshot);
    if (pages.size() > 1 && !pattern.contains(QLatin1String("{page}"))) {
      std::fprintf(stderr, "peat-workbench: error: several --page values need \"{page}\" in the --screenshot file name\n");
      return 2;
    }
    auto shootAt = std::make_shared<std::function<void(int)>>();
    *shootAt = [&window, &opened, pages, pattern, shootAt](int at) {
      if (at >= pages.size()) {
        QApplication::exit(opened ? 0 : 1);
        return;
      }
      // "PAGE@ITEM": ITEM selected in the session tree first
      const QString spec = pages[at];
      const QString pageName = spec.contains(QLatin1Char('@')) ? spec.section(QLatin1Char('@'), 0, -2) : spec;
      const QString item = spec.contains(QLatin1Char('@')) ? spec.section(QLatin1Char('@'), -1) : QString();
      QString slug = pageName.toLower();
      for (QChar& c : slug)
        if (!c.isLetterOrNumber()) c = QLatin1Char('-');
      const QString file = QString(pattern).replace(QLatin1String("{page}"), slug);
      if (!item.isEmpty() && !window.selectItem(item)) {
        std::fprintf(stderr, "peat-workbench: error: %s\n", qPrintable(window.lastError()));
        opened = false;
      }
      // once the pages have read what is selected, the page asked for, its reads, then 300 ms to paint
      whenSettled(window, [&window, file, &opened, pageName, shootAt, at] {
        QWidget* target = &window;
        if (pageName.startsWith(QLatin1String("Bit Explorer"), Qt::CaseInsensitive)) {
          window.showBitExplorer();
          bool number = false;
          const float value = pageName.section(QLatin1Char(':'), 1, 1).toFloat(&number);
          if (number) window.bitExplorer()->setValue(value);
          window.bitExplorer()->setLargeType(pageName.section(QLatin1Char(':'), 2) == QLatin1String("large"));
          target = window.bitExplorer()->window();
        } else if (pageName.startsWith(QLatin1String("Tour:"), Qt::CaseInsensitive)) {
          if (!window.tourPanel() || window.tourPanel()->step() < 0) window.startTour();
          if (!window.tourPanel() || !window.tourPanel()->goTo(pageName.section(QLatin1Char(':'), 1).toInt() - 1)) {
            std::fprintf(stderr, "peat-workbench: error: no tour step '%s'\n", qPrintable(pageName));
            opened = false;
          }
        } else if (!pageName.isEmpty() && !showPage(window, pageName)) {
          std::fprintf(stderr, "peat-workbench: error: no page '%s'\n", qPrintable(pageName));
          opened = false;
        }
        whenSettled(window, [&window, file, &opened, target, pageName, shootAt, at] {
          QTimer::singleShot(300, &window, [&window, file, &opened, target, pageName, shootAt, at] {
            opened = opened && window.lastError().isEmpty();
            if (at == 0 && !window.screenNote().isEmpty())
              std::fprintf(stderr, "peat-workbench: note: %s\n", qPrintable(window.screenNote()));
            const bool saved = target->grab().save(file, "PNG");
            if (!saved) std::fprintf(stderr, "peat-workbench: error: cannot write %s\n", qPrintable(file));
            if (!opened && !window.lastError().isEmpty())
              std::fprintf(stderr, "peat-workbench: error: %s\n", qPrintable(window.lastError()));
            // the window never grows past the screen it is on, whatever the page shows
            const QRect room = target->screen() ? target->screen()->availableGeometry() : QRect();
            if (room.isValid() && (target->width() > room.width() || target->height() > room.height())) {
              std::fprintf(stderr, "peat-workbench: error: on page '%s' the window is %d x %d, larger than the screen's %d x %d\n",
                           qPrintable(pageName), target->width(), target->height(), room.width(), room.height());
              opened = false;
            }
            // from 1024 x 700 up, text panes wrap rather than scroll sideways (the call page's
            // column did); below, the narrowest pages may scroll
            for (const QTextBrowser* text : target->findChildren<QTextBrowser*>())
              if (room.width() >= 1024 && text->isVisible() && text->horizontalScrollBar()->maximum() > 0) {
                const QString which = text->objectName().isEmpty()
                                          ? QString::fromLatin1(text->parentWidget()->metaObject()->className())
                                          : text->objectName();
                std::fprintf(stderr, "peat-workbench: error: on page '%s' the text of %s scrolls sideways (%d px)\n",
                             qPrintable(pageName), qPrintable(which), text->horizontalScrollBar()->maximum());
                opened = false;
              }
            if (!saved) opened = false;
            (*shootAt)(at + 1);
          });
        });
      });
    };
    auto shoot = [shootAt] { (*shootAt)(0); };
    if (window.runPanel()->running()) {  // the demo is being made, or a SAVE run goes: shoot once it ends
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
