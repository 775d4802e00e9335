// SPDX-License-Identifier: MIT
#include "views/overviewpanel.h"

#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>

#include "views/heading.h"

namespace peat::views {

namespace {
QString qs(const std::string& s) { return s.empty() ? QStringLiteral("-") : QString::fromStdString(s); }
}  // namespace

OverviewPanel::OverviewPanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  title_ = new QLabel(this);
  makeHeading(title_, 1.4);
  title_->setWordWrap(true);
  table_ = new QTableWidget(0, 2, this);
  table_->setHorizontalHeaderLabels({tr("Property"), tr("Value")});
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setAlternatingRowColors(true);
  layout->addWidget(title_);
  layout->addWidget(table_, 1);
  showNothing(firstStartHint());
}

QString OverviewPanel::firstStartHint() {
  return tr("Open a session (Ctrl+O), or start with the demo: Run > Open Demo Session (or peat-workbench --demo), or Help > Tour (F1).");
}

void OverviewPanel::showNothing(const QString& hint) {
  title_->setText(hint);
  table_->setRowCount(0);
}

void OverviewPanel::showSummary(const store::SessionSummary& s) {
  const store::Provenance& p = s.provenance;
  title_->setText(tr("Session %1").arg(QFileInfo(QString::fromStdString(s.path)).fileName()));
  int64_t calls = 0, complete = 0, iterations = 0;
  for (const store::RunInfo& r : s.runs) {
    calls += r.callCount();
    complete += r.completeIterations();
    iterations += int64_t(r.iterations.size());
  }
  // A model file's digest and its data, as its first training run recorded them (docs/models.md).
  QString modelDigest, data, routing;
  for (const store::RunInfo& r : s.runs) {
    auto attribute = [&r](const char* key) {
      auto it = r.attributes.find(key);
      return it == r.attributes.end() ? QString() : qs(it->second);
    };
    if (modelDigest.isEmpty() && !attribute("model_sha256").isEmpty()) {
      modelDigest = attribute("model_sha256");
      data = attribute("data");
      routing = attribute("routing");
    }
  }
  std::vector<std::pair<QString, QString>> rows{
      {tr("File"), qs(s.path)},
      {tr("Schema version"), QString::number(s.schemaVersion)},
      {tr("Created"), qs(s.created)},
      {tr("Tool"), tr("peat %1 (commit %2)").arg(qs(p.toolVersion), qs(p.gitCommit))},
      {tr("Seed"), QString::number(p.seed)},
      {tr("Model"), modelDigest.isEmpty() ? qs(p.model) : QFileInfo(qs(p.model)).fileName()},
      {tr("Dataset"), qs(p.dataset)},
      {tr("Backend"), tr("%1 on %2").arg(qs(p.backend), qs(p.device))},
      {tr("LibTorch"), qs(p.libtorchVersion)},
      {tr("HDF5"), qs(p.hdf5Version)},
      {tr("Host"), qs(p.hostname)},
      {tr("Command"), qs(p.commandLine)},
      {tr("Runs"), QString::number(s.runs.size())},
      {tr("Iterations"), tr("%1 complete of %2").arg(complete).arg(iterations)},
      {tr("Recorded calls"), QString::number(calls)},
      {tr("SAVE results"), QString::number(s.saveResults.size())},
  };
  if (!modelDigest.isEmpty()) {
    const auto at = rows.begin() + 6;  // after Model
    rows.insert(at, {{tr("Model file"), qs(p.model)}, {tr("Model SHA-256"), modelDigest},
                     {tr("Model GEMMs"), routing}, {tr("Data"), data}});
  }
  table_->setRowCount(int(rows.size()));
  for (int i = 0; i < int(rows.size()); ++i) {
    table_->setItem(i, 0, new QTableWidgetItem(rows[std::size_t(i)].first));
    table_->setItem(i, 1, new QTableWidgetItem(rows[std::size_t(i)].second));
  }
  table_->resizeColumnToContents(0);
}

}  // namespace peat::views
