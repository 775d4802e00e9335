// SPDX-License-Identifier: MIT
#pragma once
// Help > Tour's script and driver, and the demo session it runs on: the demo opened (or made first
// with the run panel), then the steps, each selecting its page through the window's public API, as
// a user (or a test) would.
#include <QObject>

#include <memory>
#include <vector>

#include "views/sessionstate.h"
#include "views/tourpanel.h"

class QDockWidget;
class QLockFile;
class QTimer;

namespace peat::views {

class MainWindow;

class TourController : public QObject {
  Q_OBJECT
 public:
  TourController(MainWindow* window, const SessionState* session);
  ~TourController() override;
  // Opens the demo session unless it is the one shown (making it first when it is missing);
  // `ready` follows once it is open.
  void start();
  // Opens the demo session on its most telling page, making it first when it is missing (or, when
  // another window is making it, opening it once that one is done); false only when an existing one
  // does not open.
  bool openDemo(bool forTour = false);  // forTour: the tour's first step chooses the page, not the telling call
  std::vector<TourPanel::Step> steps();
  // The Tour dock (made on first use, beside the Devices dock), at the first step.
  void show();
  TourPanel* panel() const { return panel_; }  // null until first shown
  static QString demoPath();  // in the application data directory
  // The tree items the steps select; a session holding them all (the demo, or a copy) is toured as
  // it is; for any other open session the demo opens in its place, and Leave opens it again on the
  // item it showed.
  static QStringList neededItems();
  bool sessionHasTourItems() const;

 signals:
  void ready();  // the demo session is open: the tour can begin

 private:
  void returnToSession();  // after Leave: the session the tour replaced, on its item
  // Moves a window a step opens (the Bit Explorer) beside the tour's panel, within the screen, so
  // that it covers neither the panel's text nor its buttons (it opened over them at 1024 x 700).
  void placeBesideTour(QWidget* opened) const;
  void keepExplorerBesideTour();  // the explorer grew its window: beside the panel again
  QString returnTo_, returnItem_;
  std::unique_ptr<QLockFile> makingDemo_;  // held while this window's run panel makes the demo
  QTimer* waitingForDemo_ = nullptr;       // while another window makes it: polls its lock
  bool waitingForTour_ = false;  // the demo waited for (another window makes it) is for the tour
  TourPanel* panel_ = nullptr;
  QDockWidget* dock_ = nullptr;
  MainWindow* window_;
  const SessionState* session_;
};

}  // namespace peat::views
