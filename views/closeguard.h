// SPDX-License-Identifier: MIT
#pragma once
// Closing a window while a run goes: asked first, never a silent kill. Keep Running keeps both;
// Stop the Run and Close interrupts the command as Cancel does, with a longer grace (the commands
// end their point or iteration and mark the run cancelled), and closes the window once it has ended.
#include <QObject>
#include <QPointer>

class QMainWindow;
class QMessageBox;

namespace peat::views {

class RunPanel;

class CloseGuard : public QObject {
  Q_OBJECT
 public:
  CloseGuard(QMainWindow* window, RunPanel* run);
  // True when nothing runs; otherwise false, with the question on screen (once).
  bool allowClose();

 private:
  QMainWindow* window_;
  RunPanel* run_;
  QPointer<QMessageBox> prompt_;
};

}  // namespace peat::views
