// SPDX-License-Identifier: MIT
#pragma once
// What tst_runpanel and tst_runpanel_record share: peat's answers about a session, and the widgets
// a layout squeezes.
#include <QAbstractSpinBox>
#include <QComboBox>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QStringList>
#include <QWidget>

namespace peat::testsupport {

inline QString writeFile(const QString& path, const char* text) {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly)) return {};
  f.write(text);
  return path;
}

// `peat ARGS`: its exit code, and its standard output in `out`.
inline int runPeat(const QStringList& args, QByteArray* out = nullptr) {
  QProcess p;
  p.start(qEnvironmentVariable("PEAT_CLI"), args);
  if (!p.waitForFinished(60000)) return -1;
  if (out) *out = p.readAllStandardOutput();
  return p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
}

// The runs of a session as `peat info --json` gives them.
inline QJsonArray sessionRuns(const QString& session) {
  QByteArray out;
  if (runPeat({QStringLiteral("info"), QStringLiteral("--json"), session}, &out) != 0) return {};
  return QJsonDocument::fromJson(out).object().value(QStringLiteral("runs")).toArray();
}

// The widgets of `root` that are shown smaller than they need (as tst_mainwindow.fitsSmallScreens).
inline QStringList squeezed(QWidget* root) {
  QStringList found;
  for (QWidget* c : root->findChildren<QWidget*>()) {
    if (!c->isVisible() || c->isWindow()) continue;
    if (qobject_cast<QAbstractSpinBox*>(c->parentWidget()) || qobject_cast<QComboBox*>(c->parentWidget())) continue;
    QSize need = c->minimumSizeHint();
    if (!need.isValid()) continue;
    if (c->sizeHint().isValid()) need = need.boundedTo(c->sizeHint());
    if (c->width() < need.width() || c->height() < need.height())
      found << QStringLiteral("%1 %2: %3x%4 < %5x%6")
                   .arg(QString::fromLatin1(c->metaObject()->className()), c->objectName())
                   .arg(c->width()).arg(c->height()).arg(need.width()).arg(need.height());
  }
  return found;
}

}  // namespace peat::testsupport
