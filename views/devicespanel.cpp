// SPDX-License-Identifier: MIT
#include "views/devicespanel.h"

#include <QHeaderView>
#include <QTreeWidget>
#include <QVBoxLayout>

namespace peat::views {

DevicesPanel::DevicesPanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  tree_ = new QTreeWidget(this);
  tree_->setHeaderLabels({tr("Backend / device"), tr("Status")});
  tree_->header()->setStretchLastSection(true);
  tree_->setRootIsDecorated(true);
  layout->addWidget(tree_);
}

void DevicesPanel::showBackends(const std::vector<gpu::BackendProbe>& backends) {
  tree_->clear();
  for (const gpu::BackendProbe& b : backends) {
    // the word in the column (a dock's width cut the sentence after it), the sentence on hovering
    const QString said = (b.usable ? tr("usable: ") : tr("unavailable: ")) + QString::fromStdString(b.status);
    auto* item = new QTreeWidgetItem(tree_, {QString::fromStdString(b.name), b.usable ? tr("usable") : tr("unavailable")});
    item->setToolTip(0, said);
    item->setToolTip(1, said);
    for (const gpu::DeviceInfo& d : b.devices) {
      auto* dev = new QTreeWidgetItem(item, {QStringLiteral("%1:%2").arg(QString::fromStdString(b.name)).arg(d.index),
                                             tr("%1, %2, %3 MiB")
                                                 .arg(QString::fromStdString(d.name), QString::fromStdString(d.arch))
                                                 .arg(d.totalMemory >> 20)});
      dev->setToolTip(1, dev->text(1));
    }
  }
  tree_->expandAll();
  tree_->resizeColumnToContents(0);
}

}  // namespace peat::views
