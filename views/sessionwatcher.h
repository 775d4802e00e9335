// SPDX-License-Identifier: MIT
#pragma once
// The session file shown, watched on disk: replaced (a rename over it, another program's write) or
// removed while the window shows it. `changed` comes once the file has been quiet for a moment, and
// only when it is no longer the file that was opened (its inode, size or modification time moved),
// so a window never goes on showing pages of a file that is gone.
#include <QObject>
#include <QString>

#include <sys/types.h>

class QFileSystemWatcher;
class QTimer;

namespace peat::views {

class SessionWatcher : public QObject {
  Q_OBJECT
 public:
  explicit SessionWatcher(QObject* parent);
  void watch(const QString& path);  // the file as it is now is the one opened
  void stop();
  void pause(bool paused) { paused_ = paused; }  // our own run writes it: its end reopens it

 signals:
  void changed(const QString& path);  // replaced or rewritten
  void removed(const QString& path);

 private:
  struct Identity {
    bool exists = false;
    dev_t device = 0;
    ino_t inode = 0;
    off_t size = 0;
    long long modifiedNs = 0;
    bool operator==(const Identity& o) const {
      return exists == o.exists && device == o.device && inode == o.inode && size == o.size && modifiedNs == o.modifiedNs;
    }
  };
  static Identity identityOf(const QString& path);
  void check();
  QFileSystemWatcher* watcher_;
  QTimer* quiet_;
  QString path_;
  Identity opened_;
  bool paused_ = false;
};

}  // namespace peat::views
