// SPDX-License-Identifier: MIT
// The run panel's child process: a run (or a sequence of them) started, its machine-readable events
// read as they come (progress, live points and losses), its end reported, a cancel that interrupts
// and then kills.
#include <QCheckBox>
#include <QComboBox>
#include <QFileInfo>
#include <QDir>
#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonParseError>
#include <QLabel>
#include <QLineEdit>
#include <QProcessEnvironment>
#include <QProgressBar>
#include <QPushButton>
#include <QTimer>

#include <algorithm>
#include <cmath>
#include <csignal>

#include <fcntl.h>
#include <unistd.h>

#include "views/runpanel.h"

namespace peat::views {

bool RunPanel::startSequence(const QList<QStringList>& steps, const QString& session) {
  if (running() || steps.isEmpty()) {
    emit finished(false, running() ? tr("a run is still going") : tr("nothing to run"), session);
    return false;
  }
  session_->setText(session);
  saveRun_ = false;  // the steps write the session
  pythonRun_ = swapRun_ = false;
  workDir_.clear();
  queue_.clear();
  for (int i = 1; i < steps.size(); ++i) queue_ << [args = steps[i]] { return args; };
  steps_ = int(steps.size());
  return launch(steps.front());
}

QString RunPanel::freeSessionPath(const QString& path) {
  if (path.isEmpty() || !QFileInfo::exists(path)) return path;
  const QFileInfo info(path);
  QString base = info.completeBaseName();
  // lenet-2.h5 again gives lenet-3.h5, not lenet-2-2.h5
  const int dash = base.lastIndexOf(QLatin1Char('-'));
  bool numbered = false;
  if (dash > 0) base.mid(dash + 1).toInt(&numbered);
  if (numbered) base.truncate(dash);
  const QString suffix = info.suffix().isEmpty() ? QStringLiteral("h5") : info.suffix();
  for (int n = 2;; ++n) {
    const QString candidate = info.dir().filePath(QStringLiteral("%1-%2.%3").arg(base).arg(n).arg(suffix));
    if (!QFileInfo::exists(candidate)) return candidate;
  }
}

bool RunPanel::start() {
  if (running()) {
    emit finished(false, tr("a run is still going"), session_->text());
    return false;
  }
  note_.clear();
  if ((mode() == Mode::Profile || mode() == Mode::RuntimeFi || mode() == Mode::PythonRecord) && !replace_->isChecked()) {
    const QString wanted = session_->text().trimmed();
    const QString free = freeSessionPath(wanted);
    if (free != wanted) {
      session_->setText(free);
      note_ = tr("%1 exists: writing %2 (tick 'replace' to overwrite it)").arg(QFileInfo(wanted).fileName(), QFileInfo(free).fileName());
    }
  }
  QString error;
  const QStringList args = arguments(&error);
  if (args.isEmpty()) {
    status_->setText(error);
    emit finished(false, error, session_->text());
    return false;
  }
  saveRun_ = mode() == Mode::SaveRun;
  pythonRun_ = mode() == Mode::PythonRecord;
  swapRun_ = pythonRun_ && args.contains(QStringLiteral("--swap"));
  // a script runs in its own folder (its relative paths, a candidate module beside it), with the
  // interpreter chosen even when its name is not python*
  workDir_ = pythonRun_ ? QFileInfo(script_->text().trimmed()).absolutePath() : QString();
  runPython_ = interpreter();
  if (runPython_.contains(QLatin1Char('/'))) runPython_ = QFileInfo(runPython_).absoluteFilePath();
  if (saveRun_) {
    launchedInput_ = input_->text().trimmed();
    launchedOutputs_ = outputsPath();
    ++saveRuns_;
    result_ = QJsonObject();
  }
  queue_.clear();
  steps_ = 1;
  // A playback is followed by the analysis of its calls, for the error views.
  if (mode() == Mode::Playback && analyze_->isChecked()) {
    const QString session = session_->text();
    const QString fallback = QStringLiteral("playback-") + kernel_->currentText().section(QLatin1Char(':'), 0, 0);
    queue_ << [this, session, fallback] {
      return QStringList{QStringLiteral("analyze"), QStringLiteral("--session"), session, QStringLiteral("--run"),
                         runName_.isEmpty() ? fallback : runName_};
    };
    steps_ = 2;
  }
  return launch(args);
}

bool RunPanel::launch(const QStringList& args) {
  cancelled_ = killed_ = false;
  lastError_.clear();
  lastOutput_.clear();
  lastCount_.clear();
  buffer_.clear();
  pass_ = 1;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert(QStringLiteral("PEAT_EVENTS"), QStringLiteral("jsonl"));  // docs/events.md
  if (pythonRun_) env.insert(QStringLiteral("PEAT_PYTHON"), runPython_);  // what peat execs
  process_->setProcessEnvironment(env);
  process_->setWorkingDirectory(workDir_);
  process_->setProgram(program());
  process_->setArguments(args);
  process_->setProcessChannelMode(QProcess::MergedChannels);  // events, errors and the summary
  // The child must not inherit this process's open files: an inherited HDF5 file keeps the
  // workbench's lock on a session the run wants to write. Qt's own pipes are close-on-exec.
  process_->setChildProcessModifier([] {
    ::setpgid(0, 0);  // its own process group: Cancel reaches the helpers it starts (kernel host, probes) too
    // SIGINT as the commands expect it, even when the workbench was started with it ignored (a
    // background job of a shell): Python then raises KeyboardInterrupt, and the run ends cancelled
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGINT, &dfl, nullptr);
    for (int fd = 3; fd < 4096; ++fd) {
      const int flags = ::fcntl(fd, F_GETFD);
      if (flags >= 0 && !(flags & FD_CLOEXEC)) ::close(fd);
    }
  });
  // determinate: nothing done until the first progress event says more; a script alone knows how
  // many iterations it runs (peat record's total is 0), so its bar is busy from the start
  progress_->setRange(0, pythonRun_ ? 0 : 1000);
  progress_->setValue(0);
  estimate_.reset();
  status_->setText((note_.isEmpty() ? QString() : note_ + QStringLiteral("\n")) +
                   tr("Running: peat %1").arg(args.join(QLatin1Char(' '))));
  note_.clear();
  start_->setEnabled(false);
  cancel_->setEnabled(true);
  clock_.start();
  process_->start();
  emit started();
  return true;
}

void RunPanel::readOutput() {
  buffer_ += QString::fromUtf8(process_->readAllStandardOutput());
  int end;
  while ((end = int(buffer_.indexOf(QLatin1Char('\n')))) >= 0) {
    const QByteArray line = buffer_.left(end).trimmed().toUtf8();
    buffer_.remove(0, end + 1);
    if (line.startsWith('{')) handleEvent(line);  // the rest is the human output
    else if (line.startsWith("peat: error: ")) lastError_ = QString::fromUtf8(line);  // an event says more, if one comes
    else if (!line.isEmpty() && !line.startsWith("peat: ")) lastOutput_ = QString::fromUtf8(line);
  }
}

// One line of the event stream (docs/events.md); unknown events and fields are ignored, as the
// schema's rule for extending it asks.
void RunPanel::handleEvent(const QByteArray& line) {
  QJsonParseError error{};
  const QJsonObject e = QJsonDocument::fromJson(line, &error).object();
  if (error.error != QJsonParseError::NoError) return;
  if (!e.contains(QLatin1String("event"))) {  // a command's --json summary, not an event
    if (saveRun_ && e.contains(QLatin1String("output_shape"))) result_ = e;
    return;
  }
  if (e.value(QLatin1String("v")).toInt() < 1) return;
  const QString type = e.value(QLatin1String("event")).toString();
  if (type == QLatin1String("progress")) {
    const qint64 done = e.value(QLatin1String("done")).toInteger(), total = e.value(QLatin1String("total")).toInteger();
    if (cancelled_) return;  // "Cancelling" stays until the run has ended
    const double elapsed = double(clock_.elapsed()) / 1000;
    const QString what = e.contains(QLatin1String("status")) ? e.value(QLatin1String("status")).toString()
                                                            : e.value(QLatin1String("stage")).toString();
    if (total <= 0) {  // no end known (a script decides how many iterations it runs): a busy bar, the count, the time
      progress_->setRange(0, 0);
      const QString pass = !swapRun_ ? QString()
                           : pass_ == 1 ? tr("golden pass: ")
                                        : tr("pass with the candidate: ");
      status_->setText(tr("%1%2, %3 s elapsed").arg(pass, what).arg(elapsed, 0, 'f', 1));
      lastCount_ = what;
      emit progressed(done, total);
      return;
    }
    progress_->setRange(0, 1000);
    progress_->setValue(int(1000 * done / total));
    estimate_.update(done, total, elapsed);
    const double left = estimate_.secondsLeft();
    status_->setText(tr("%1 of %2 %3, %4 s elapsed, %5")
                         .arg(done).arg(total).arg(what)
                         .arg(elapsed, 0, 'f', 1)
                         .arg(left < 0 ? tr("estimating the time left") : tr("about %1 s left at this rate").arg(left, 0, 'f', left < 10 ? 1 : 0)));
    emit progressed(done, total);
  } else if (type == QLatin1String("point")) {
    emit livePoint(e.value(QLatin1String("scheme")).toString(), e.value(QLatin1String("flips")).toDouble(),
                   e.value(QLatin1String("accuracy")).toDouble());
  } else if (type == QLatin1String("loss")) {
    const QJsonValue candidate = e.value(QLatin1String("candidate_loss"));
    // the event's iteration is 0-based; the signal counts finished iterations
    const QJsonValue loss = e.value(QLatin1String("loss"));  // null: not finite, or no golden loss that far
    emit liveLoss(e.value(QLatin1String("iteration")).toDouble() + 1, loss.isDouble() ? loss.toDouble() : std::nan(""),
                  candidate.isDouble() ? candidate.toDouble() : std::nan(""));
  } else if (type == QLatin1String("error")) {
    lastError_ = QStringLiteral("peat: error: ") + e.value(QLatin1String("message")).toString();
  } else if (type == QLatin1String("stored") && e.value(QLatin1String("kind")).toString() == QLatin1String("run")) {
    runName_ = e.value(QLatin1String("name")).toString();
    ++pass_;  // peat record --swap: the golden pass is stored, the one with the candidate follows
  }
}

void RunPanel::processEnded(int code, QProcess::ExitStatus status) {
  readOutput();
  const bool ok = status == QProcess::NormalExit && code == 0;
  if (ok && !cancelled_ && !queue_.isEmpty()) {  // the next step of a sequence
    launch(queue_.takeFirst()());
    status_->setText(tr("Step %1 of %2: %3").arg(steps_ - queue_.size()).arg(steps_).arg(status_->text()));
    return;
  }
  queue_.clear();
  start_->setEnabled(true);
  cancel_->setEnabled(false);
  progress_->setRange(0, 1);
  progress_->setValue(ok ? 1 : 0);
  QString message;
  // a quick run in milliseconds ("Finished in 0.0 s" said nothing)
  const qint64 ms = clock_.elapsed();
  if (ok) message = ms < 1000 ? tr("Finished in %1 ms").arg(ms) : tr("Finished in %1 s").arg(double(ms) / 1000, 0, 'f', 1);
  if (ok && !lastCount_.isEmpty()) message += QStringLiteral(": ") + lastCount_;  // e.g. "iteration 6, 90 calls recorded"
  else if (cancelled_ && pythonRun_ && killed_)
    message = tr("Cancelled; the recorder did not end within %1 s and was killed: the session keeps the iterations "
                 "written before, its run not marked cancelled").arg(kRecordCancelGraceMs / 1000);
  else if (cancelled_ && pythonRun_) message = tr("Cancelled; the session keeps what was recorded, the run marked cancelled");
  else if (cancelled_) message = saveRun_ ? tr("Cancelled") : tr("Cancelled; the session keeps what was finished");
  else if (!lastError_.isEmpty()) message = lastError_;
  else if (pythonRun_ && status == QProcess::NormalExit && !lastOutput_.isEmpty())
    message = tr("the script ended with exit code %1: %2").arg(code).arg(lastOutput_);
  else if (process_->error() == QProcess::FailedToStart) message = tr("could not start %1").arg(program());
  else message = tr("peat ended with exit code %1").arg(code);
  status_->setText(message);
  emit finished(ok, message, saveRun_ ? QString() : session_->text());
  if (saveRun_) {
    const bool summarised = ok && !result_.isEmpty();
    emit saveRunEnded(summarised, ok && !summarised ? tr("peat save run printed no summary") : message, result_,
                      launchedInput_, launchedOutputs_);
  }
}

void RunPanel::cancel(int graceMs) {
  if (!running()) return;
  cancelled_ = true;
  queue_.clear();
  cancel_->setEnabled(false);
  status_->setText(pythonRun_ ? tr("Cancelling ... (the script stops at its next Python line; the recorder writes the "
                                   "iteration in flight and closes the session)")
                              : tr("Cancelling ... (the run ends its point or iteration and marks itself cancelled)"));
  const pid_t group = pid_t(process_->processId());
  if (group > 0) ::kill(-group, SIGINT);  // the commands end their run cleanly
  // A command finishing its point or iteration may take seconds: a training or replay run is given
  // kTrainCancelGraceMs to mark its run cancelled, SAVE's commands kCancelGraceMs (a campaign keeps
  // its finished points); the session's journal keeps its last commit whole (docs/architecture.md,
  // Trust), so the kill after that loses only the work in flight.
  // A Python recording is given longer: the script may be inside a long op, and the recorder marks
  // the run cancelled only once it has written the iteration in flight.
  if (graceMs < 0)
    graceMs = pythonRun_                                                     ? kRecordCancelGraceMs
              : process_->arguments().value(0) == QLatin1String("save") ? kCancelGraceMs
                                                                         : kTrainCancelGraceMs;
  QTimer::singleShot(graceMs, process_, [this, group] {
    // the run cancelled, not one started since it ended (the grace is seconds long)
    if (!running() || pid_t(process_->processId()) != group) return;
    killed_ = true;
    if (group > 0) ::kill(-group, SIGKILL);
    process_->kill();
  });
}

QString RunPanel::statusText() const { return status_->text(); }


}  // namespace peat::views
