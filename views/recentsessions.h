// SPDX-License-Identifier: MIT
#pragma once
// File > Open Recent: the sessions opened last (QSettings), newest first, at most eight.
#include <QObject>
#include <QString>

class QMenu;

namespace peat::views {

class RecentSessions : public QObject {
  Q_OBJECT
 public:
  explicit RecentSessions(QMenu* menu);  // fills `menu`, and refills it as sessions open
  void remember(const QString& path);

 signals:
  void chosen(const QString& path);

 private:
  void refresh();
  QMenu* menu_;
};

}  // namespace peat::views
