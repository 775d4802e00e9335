// SPDX-License-Identifier: MIT
#pragma once
// Help > Tour: the story of the workbench in a few steps, each with a short text and the page it
// selects (the window supplies the steps). Back, Next and Leave at every step.
#include <QWidget>

#include <functional>
#include <vector>

class QLabel;
class QPushButton;

namespace peat::views {

class TourPanel : public QWidget {
  Q_OBJECT
 public:
  struct Step {
    QString title, text;
    // Selects the step's page; false (with a reason) when this session cannot show it.
    std::function<bool(QString* why)> show;
  };
  explicit TourPanel(QWidget* parent = nullptr);
  void setSteps(std::vector<Step> steps);
  bool goTo(int step);  // shows step `step` and selects its page; false outside the steps
  bool next() { return goTo(at_ + 1); }
  bool back() { return goTo(at_ - 1); }
  void leave();
  int step() const { return at_; }  // -1: not touring
  int steps() const { return int(steps_.size()); }
  QString text() const;  // the step's title and text, as shown

 signals:
  void left();  // Leave was pressed (or the last step's Done)

 private:
  std::vector<Step> steps_;
  int at_ = -1;
  QLabel *counter_, *title_, *body_;
  QPushButton *back_, *next_, *leave_;
};

}  // namespace peat::views
