// SPDX-License-Identifier: MIT
#pragma once
// The Explain dock: what the workbench shows and what each verdict and SAVE bit class means, in a
// few sentences for people (the words come from core: detector::verdictExplanation).
#include <QTextBrowser>

namespace peat::views {

class ExplainPanel : public QTextBrowser {
  Q_OBJECT
 public:
  explicit ExplainPanel(QWidget* parent = nullptr);
  void showOverview();
  // The overview for "" (a call without a verdict); unchanged for a name the detector does not know.
  void showVerdict(const QString& verdict);
  void showSave();
};

}  // namespace peat::views
