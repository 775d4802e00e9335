// SPDX-License-Identifier: MIT
#include "views/sessionwatcher.h"

#include <QFileInfo>
#include <QFileSystemWatcher>
#include <QTimer>

#include <sys/stat.h>

namespace peat::views {

SessionWatcher::SessionWatcher(QObject* parent)
    : QObject(parent), watcher_(new QFileSystemWatcher(this)), quiet_(new QTimer(this)) {
  quiet_->setSingleShot(true);
  quiet_->setInterval(600);  // a writer's burst, or a copy in progress, ends first
  connect(quiet_, &QTimer::timeout, this, &SessionWatcher::check);
  // the file itself (written in place) and its folder (a rename over it drops the file's watch)
  connect(watcher_, &QFileSystemWatcher::fileChanged, quiet_, qOverload<>(&QTimer::start));
  connect(watcher_, &QFileSystemWatcher::directoryChanged, quiet_, qOverload<>(&QTimer::start));
}

SessionWatcher::Identity SessionWatcher::identityOf(const QString& path) {
  Identity id;
  struct stat st {};
  if (::stat(QFile::encodeName(path).constData(), &st) != 0) return id;
  id.exists = true;
  id.device = st.st_dev;
  id.inode = st.st_ino;
  id.size = st.st_size;
  id.modifiedNs = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
  return id;
}

void SessionWatcher::watch(const QString& path) {
  stop();
  path_ = QFileInfo(path).absoluteFilePath();
  opened_ = identityOf(path_);
  watcher_->addPath(path_);
  watcher_->addPath(QFileInfo(path_).absolutePath());
}

void SessionWatcher::stop() {
  quiet_->stop();
  if (!watcher_->files().isEmpty()) watcher_->removePaths(watcher_->files());
  if (!watcher_->directories().isEmpty()) watcher_->removePaths(watcher_->directories());
  path_.clear();
}

void SessionWatcher::check() {
  if (path_.isEmpty() || paused_) return;
  const Identity now = identityOf(path_);
  if (now == opened_) return;
  if (!watcher_->files().contains(path_) && now.exists) watcher_->addPath(path_);  // a new file under the name
  opened_ = now;  // said once per change
  if (now.exists) emit changed(path_);
  else emit removed(path_);
}

}  // namespace peat::views
