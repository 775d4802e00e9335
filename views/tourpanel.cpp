// SPDX-License-Identifier: MIT
#include "views/tourpanel.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QVBoxLayout>

#include <algorithm>

#include "views/heading.h"

namespace peat::views {

TourPanel::TourPanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  counter_ = new QLabel(this);
  title_ = new QLabel(this);
  makeHeading(title_, 1.25);
  title_->setWordWrap(true);
  body_ = new QLabel(this);
  body_->setWordWrap(true);
  body_->setTextFormat(Qt::RichText);
  body_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  body_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(counter_);
  layout->addWidget(title_);
  auto* scroll = new QScrollArea(this);  // a long step scrolls in a short dock
  scroll->setWidget(body_);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  layout->addWidget(scroll, 1);
  auto* buttons = new QHBoxLayout;
  back_ = new QPushButton(tr("< &Back"), this);
  next_ = new QPushButton(tr("&Next >"), this);
  leave_ = new QPushButton(tr("&Leave"), this);
  leave_->setToolTip(tr("Leave the tour (Help > Tour begins it again)"));
  // The buttons keep their places whatever the dock's width or the step: each as wide as its widest
  // text, all three from the left edge (a click meant for Next never lands on Leave).
  const QFontMetrics metrics = next_->fontMetrics();
  const int pad = next_->sizeHint().width() - metrics.horizontalAdvance(next_->text().remove(QLatin1Char('&')));
  next_->setFixedWidth(pad + std::max(metrics.horizontalAdvance(tr("Next >")), metrics.horizontalAdvance(tr("Done"))));
  back_->setFixedWidth(back_->sizeHint().width());
  leave_->setFixedWidth(leave_->sizeHint().width());
  buttons->addWidget(back_);
  buttons->addWidget(next_);
  buttons->addWidget(leave_);
  buttons->addStretch(1);
  layout->addLayout(buttons);
  connect(back_, &QPushButton::clicked, this, [this] { back(); });
  connect(next_, &QPushButton::clicked, this, [this] {
    if (at_ + 1 >= int(steps_.size())) leave();
    else next();
  });
  connect(leave_, &QPushButton::clicked, this, &TourPanel::leave);
}

void TourPanel::setSteps(std::vector<Step> steps) {
  steps_ = std::move(steps);
  at_ = -1;
}

bool TourPanel::goTo(int step) {
  if (step < 0 || step >= int(steps_.size())) return false;
  at_ = step;
  const Step& s = steps_[std::size_t(step)];
  counter_->setText(tr("Tour: step %1 of %2").arg(step + 1).arg(steps_.size()));
  title_->setText(s.title);
  QString why;
  const bool shown = !s.show || s.show(&why);
  body_->setText(shown ? s.text : s.text + tr("<p><i>This session cannot show it: %1</i></p>").arg(why.toHtmlEscaped()));
  back_->setEnabled(step > 0);
  next_->setText(step + 1 == int(steps_.size()) ? tr("&Done") : tr("&Next >"));
  return true;
}

void TourPanel::leave() {
  at_ = -1;
  emit left();
}

QString TourPanel::text() const { return title_->text() + QLatin1Char('\n') + body_->text(); }

}  // namespace peat::views
