// SPDX-License-Identifier: MIT
// The main window's menus: what each does is a call to the window or one of its controllers.
#include "views/qcustomplot_include.h"  // first: see the header

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QDockWidget>
#include <QFileDialog>
#include <QMenuBar>
#include <QMessageBox>
#include <QStatusBar>

#include "core/version.h"
#include "views/comparecontroller.h"
#include "views/historycontroller.h"
#include "views/mainwindow.h"
#include "views/pageexport.h"
#include "views/recentsessions.h"

namespace peat::views {

void MainWindow::createActions() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  const auto askForSession = [this](const QString& title) {
    return QFileDialog::getOpenFileName(this, title, QString(), tr("PEAT sessions (*.h5 *.hdf5);;All files (*)"));
  };
  QAction* open = file->addAction(tr("&Open Session..."), this, [this, askForSession] {
    if (const QString path = askForSession(tr("Open session")); !path.isEmpty()) startOpeningSession(path);
  });
  open->setShortcut(QKeySequence::Open);
  QAction* newWindow = file->addAction(tr("&New Window"), this, [] {
    auto* other = new MainWindow;  // another session (or another view of this one) side by side
    other->setAttribute(Qt::WA_DeleteOnClose);
    other->show();
  });
  newWindow->setShortcut(QKeySequence::New);
  recent_ = new RecentSessions(file->addMenu(tr("Open &Recent")));
  connect(recent_, &RecentSessions::chosen, this, &MainWindow::startOpeningSession);
  QAction* close = file->addAction(tr("&Close Session"), this, &MainWindow::closeSession);
  close->setShortcut(QKeySequence::Close);
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), qApp, &QApplication::closeAllWindows);
  quit->setShortcut(QKeySequence::Quit);

  file->addSeparator();
  QAction* exportPlot = file->addAction(tr("&Export Plot..."), this, [this] { exportCurrent(false); });
  exportPlot->setShortcut(QKeySequence(tr("Ctrl+E")));
  QAction* exportTable = file->addAction(tr("Export &Table as CSV..."), this, [this] { exportCurrent(true); });
  exportTable->setShortcut(QKeySequence(tr("Ctrl+Shift+E")));
  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  QAction* copy = edit->addAction(tr("&Copy Plot"), this, [this] {
    QCustomPlot* plot = currentPlot();
    QApplication::clipboard()->setPixmap(plot ? plot->toPixmap() : exports_->currentPicture()->grab());
    statusBar()->showMessage(tr("Plot copied"), 3000);
  });
  copy->setShortcut(QKeySequence(tr("Ctrl+Shift+C")));

  QMenu* compare = menuBar()->addMenu(tr("&Compare"));
  QAction* compareSelection = compare->addAction(tr("Compare &Selected"), this, &MainWindow::compareSelected);
  compareSelection->setShortcut(QKeySequence(tr("Ctrl+D")));
  compareSelection->setToolTip(tr("Two selected calls side by side, or the selected call here and in the compared session"));
  compare->addAction(tr("Compare With &Session..."), this, [this, askForSession] {
    if (const QString path = askForSession(tr("Compare with session")); !path.isEmpty()) openCompareSession(path);
  });
  compare->addAction(tr("Stop Comparing Sessions"), comparisons_, &CompareController::closeSession);

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  QAction* showRun = run->addAction(tr("&New Run..."), this, &MainWindow::showRunPanel);
  showRun->setShortcut(QKeySequence(tr("Ctrl+R")));
  run->addAction(tr("Open &Demo Session"), this, &MainWindow::openDemo);

  QMenu* tools = menuBar()->addMenu(tr("&Tools"));
  QAction* explorer = tools->addAction(tr("&Bit Explorer"), this, [this] { showBitExplorer(); });
  explorer->setShortcut(QKeySequence(tr("Ctrl+B")));

  // Go: back and forward through the calls selected, as in a browser (Alt+Left, Alt+Right)
  QMenu* go = menuBar()->addMenu(tr("&Go"));
  go->addAction(history_->backAction());
  go->addAction(history_->forwardAction());

  QMenu* view = menuBar()->addMenu(tr("&View"));
  for (QDockWidget* d : findChildren<QDockWidget*>()) view->addAction(d->toggleViewAction());

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  QAction* tour = help->addAction(tr("&Tour"), this, &MainWindow::startTour);
  tour->setShortcut(QKeySequence(Qt::Key_F1));
  tour->setToolTip(tr("The story in a few steps, on the demo session (made first when it is missing, about 10 s)"));
  help->addAction(tr("&About PEAT Workbench"), this, [this] {
    QMessageBox::about(this, tr("About PEAT Workbench"),
                       tr("<b>PEAT Workbench %1</b> (commit %2)<br>"
                          "Pseudo-error assessment of GPU kernels in DNN training (PEAT) and software fault "
                          "tolerance of inference against GPU memory bit flips (SAVE).<br>HDF5 %3")
                           .arg(QString::fromLatin1(toolVersion()), QString::fromLatin1(gitCommit()),
                                QString::fromStdString(hdf5Version())));
  });
}

}  // namespace peat::views
