// SPDX-License-Identifier: MIT
// The run panel's kernel plugin: a plugin chosen as the candidate is probed in a child process
// (`peat kernels --probe FILE --json`), its op kinds described under the kernel row, and the op list
// restricted to the slot ops it runs.
#include "views/runpanel.h"

#include <QComboBox>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonParseError>
#include <QLabel>
#include <QStandardItemModel>

namespace peat::views {

// A user kernel chosen as the candidate: `peat kernels --probe FILE --json` (the probe runs it in a
// child process) says which op kinds and dtypes it exports; the op list offers the slot ops it runs.
void RunPanel::describePlugin(const QString& kernel) {
  if (pluginProbe_->state() != QProcess::NotRunning) {
    pluginProbe_->disconnect(this);
    pluginProbe_->kill();
    pluginProbe_->waitForFinished(1000);
    pluginProbe_->deleteLater();
    pluginProbe_ = new QProcess(this);
    connect(pluginProbe_, &QProcess::finished, this, &RunPanel::pluginProbed);
  }
  const QString prefix = QStringLiteral("plugin:path=");
  pluginSlotOps_.clear();
  if (!kernel.startsWith(prefix)) {
    pluginOps_->setVisible(false);
    restrictOps({});
    return;
  }
  const QString path = kernel.mid(prefix.size());
  pluginOps_->setVisible(true);
  if (!QFileInfo(path).isFile()) {
    pluginOps_->setText(tr("no such plugin: %1").arg(path));
    return;
  }
  pluginOps_->setText(tr("probing %1 ...").arg(QFileInfo(path).fileName()));
  pluginProbe_->setProgram(program());
  pluginProbe_->setArguments({QStringLiteral("kernels"), QStringLiteral("--probe"), path, QStringLiteral("--json")});
  pluginProbe_->start();
}

void RunPanel::pluginProbed(int code, QProcess::ExitStatus status) {
  const QByteArray out = pluginProbe_->readAllStandardOutput(), err = pluginProbe_->readAllStandardError();
  QJsonParseError parse{};
  const QJsonDocument doc = QJsonDocument::fromJson(out, &parse);
  if (status != QProcess::NormalExit || code != 0 || !doc.isObject()) {
    const QString line = QString::fromUtf8(err).trimmed().section(QLatin1Char('\n'), -1);
    pluginOps_->setText(tr("refused: %1").arg(line.isEmpty() ? tr("the probe failed") : line));
    restrictOps({});
    return;
  }
  const QJsonObject o = doc.object();
  QStringList kinds;
  for (const QJsonValue& v : o.value(QStringLiteral("ops")).toArray()) {
    const QJsonObject op = v.toObject();
    QStringList variants;
    for (const QJsonValue& x : op.value(QStringLiteral("variants")).toArray()) variants << x.toString();
    const int cases = op.value(QStringLiteral("cases")).toInt(), failed = op.value(QStringLiteral("failed_cases")).toInt();
    kinds << tr("%1 (%2; %3 -> %4%5)")
                 .arg(op.value(QStringLiteral("kind")).toString(), variants.join(QStringLiteral(", ")),
                      op.value(QStringLiteral("input_dtype")).toString(), op.value(QStringLiteral("output_dtype")).toString(),
                      failed ? tr("; probe: %1 of %2 cases wrong").arg(failed).arg(cases) : QString());
  }
  for (const QJsonValue& v : o.value(QStringLiteral("slot_ops")).toArray()) pluginSlotOps_ << v.toString();
  pluginOps_->setText(tr("%1, ABI v%2: %3.\nRuns the slot's %4 calls.")
                          .arg(o.value(QStringLiteral("name")).toString())
                          .arg(o.value(QStringLiteral("abi")).toInt())
                          .arg(kinds.join(QStringLiteral("; ")), pluginSlotOps_.join(QStringLiteral(", "))));
  pluginOps_->setToolTip(o.value(QStringLiteral("warning")).toString());
  restrictOps(pluginSlotOps_);
}

// Only these ops (and "all") can be chosen; every op when `ops` is empty.
void RunPanel::restrictOps(const QStringList& ops) {
  auto* model = qobject_cast<QStandardItemModel*>(op_->model());
  if (!model) return;
  for (int i = 0; i < op_->count(); ++i) {
    const QString op = op_->itemText(i);
    if (QStandardItem* item = model->item(i)) item->setEnabled(ops.isEmpty() || op == QLatin1String("all") || ops.contains(op));
  }
  if (!ops.isEmpty() && op_->currentText() != QLatin1String("all") && !ops.contains(op_->currentText()))
    op_->setCurrentText(ops.first());
}

QStringList RunPanel::pluginOps() const { return pluginSlotOps_; }

}  // namespace peat::views
