// SPDX-License-Identifier: MIT
#pragma once
#include <QWidget>

#include <vector>

#include "gpu/backend.h"

class QTreeWidget;

namespace peat::views {

// The compute backends this copy was built with and the devices each one found.
class DevicesPanel : public QWidget {
  Q_OBJECT
 public:
  explicit DevicesPanel(QWidget* parent = nullptr);
  void showBackends(const std::vector<gpu::BackendProbe>& backends);

 private:
  QTreeWidget* tree_;
};

}  // namespace peat::views
