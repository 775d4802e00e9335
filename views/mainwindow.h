// SPDX-License-Identifier: MIT
#pragma once
#include <QMainWindow>

#include <memory>

namespace peat::store {
class SessionReader;
}

class QMenu;
class QTableWidget;
class QTreeView;
class QLabel;

namespace peat::views {

class SessionTreeModel;
class OverviewPanel;
class DevicesPanel;
class ErrorPlotPanel;

// The workbench's main window: menus, the session tree, and docks that the views fill.
class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Opens a session; on failure shows the reason and keeps the current session. Returns success.
  bool openSession(const QString& path);
  void closeSession();
  QString sessionPath() const { return sessionPath_; }
  QString lastError() const { return lastError_; }
  SessionTreeModel* sessionModel() const { return model_; }
  // When set, failures go to the status bar only (no dialog): tests and --screenshot use it.
  void setQuietErrors(bool quiet) { quietErrors_ = quiet; }

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void createActions();
  void createDocks();
  void refreshRecentMenu();
  void rememberRecent(const QString& path);
  void showRunVerdicts(const QString& run);
  void reportError(const QString& text);

  std::unique_ptr<store::SessionReader> reader_;
  QString sessionPath_;
  QString lastError_;
  bool quietErrors_ = false;
  SessionTreeModel* model_;
  QTreeView* tree_;
  OverviewPanel* overview_;
  DevicesPanel* devices_;
  ErrorPlotPanel* errorPlot_;
  QTableWidget* verdicts_;
  QMenu* recentMenu_ = nullptr;
  QMenu* viewMenu_ = nullptr;
  QLabel* statusSession_;
};

}  // namespace peat::views
