// SPDX-License-Identifier: MIT
#include "views/recentsessions.h"

#include <QAction>
#include <QFileInfo>
#include <QMenu>
#include <QSettings>
#include <QStringList>

namespace peat::views {

namespace {
constexpr int kMaxRecent = 8;
const QString kRecentKey = QStringLiteral("session/recent");
}  // namespace

RecentSessions::RecentSessions(QMenu* menu) : QObject(menu), menu_(menu) { refresh(); }

void RecentSessions::remember(const QString& path) {
  QSettings settings;
  QStringList recent = settings.value(kRecentKey).toStringList();
  recent.removeAll(path);
  recent.prepend(path);
  while (recent.size() > kMaxRecent) recent.removeLast();
  settings.setValue(kRecentKey, recent);
  refresh();
}

void RecentSessions::refresh() {
  menu_->clear();
  const QStringList recent = QSettings().value(kRecentKey).toStringList();
  for (const QString& path : recent)
    menu_->addAction(QFileInfo(path).fileName(), this, [this, path] { emit chosen(path); })->setToolTip(path);
  menu_->setEnabled(!recent.isEmpty());
}

}  // namespace peat::views
