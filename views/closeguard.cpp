// SPDX-License-Identifier: MIT
#include "views/closeguard.h"

#include <QMainWindow>
#include <QMessageBox>
#include <QPushButton>
#include <QStatusBar>
#include <QTimer>

#include <memory>

#include "views/runpanel.h"

namespace peat::views {

CloseGuard::CloseGuard(QMainWindow* window, RunPanel* run) : QObject(window), window_(window), run_(run) {}

bool CloseGuard::allowClose() {
  if (!run_->running()) return true;
  if (prompt_) {
    prompt_->raise();
    return false;
  }
  prompt_ = new QMessageBox(QMessageBox::Question, tr("PEAT Workbench"),
                            tr("A run is in progress: %1\n\nStop it (what it finished is kept, the run marked "
                               "cancelled) and close the window?")
                                .arg(run_->statusText()),
                            QMessageBox::NoButton, window_);
  prompt_->setObjectName(QStringLiteral("ClosePrompt"));
  QPushButton* stop = prompt_->addButton(tr("Stop the Run and Close"), QMessageBox::AcceptRole);
  prompt_->addButton(tr("Keep Running"), QMessageBox::RejectRole);
  prompt_->setDefaultButton(stop);
  prompt_->setAttribute(Qt::WA_DeleteOnClose);
  connect(prompt_, &QMessageBox::buttonClicked, this, [this, stop](QAbstractButton* clicked) {
    if (clicked != stop || !run_->running()) return;
    auto once = std::make_shared<QMetaObject::Connection>();
    *once = connect(run_, &RunPanel::finished, this, [this, once] {
      disconnect(*once);
      QTimer::singleShot(0, window_, &QWidget::close);
    });
    window_->statusBar()->showMessage(tr("Stopping the run; the window closes when it has ended"));
    run_->cancel(RunPanel::kRecordCancelGraceMs);
  });
  prompt_->open();  // not exec(): the run's events keep coming
  return false;
}

}  // namespace peat::views
