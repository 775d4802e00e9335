// SPDX-License-Identifier: MIT
#include "views/bitexplorer.h"

#include <QApplication>
#include <QCheckBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QScreen>
#include <QScrollArea>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

#include "views/palette.h"

namespace peat::views {

namespace {

QString number(double v) { return QString::number(v, 'g', 9); }

QString bitString(const fp::Format& f, uint32_t bits) {
  QString s;
  for (int b = f.width() - 1; b >= 0; --b) {
    s += QLatin1Char((bits >> b) & 1 ? '1' : '0');
    if (b == f.width() - 1 || b == f.manBits) s += QLatin1Char(' ');
  }
  return s;
}

QString classText(fp::FpClass c) { return QString::fromLatin1(fp::className(c)); }

}  // namespace

// The whole explorer's widgets and connections, built once (about 150 lines of set-up, no logic: the
// values and their texts come from core/fp/explain).
BitExplorer::BitExplorer(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("Value:"), this));
  input_ = new QLineEdit(this);
  input_->setToolTip(tr("A number (1.5, -3e-8, inf, nan); Enter shows its bits"));
  top->addWidget(input_, 1);
  layout->addLayout(top);
  context_ = new QLabel(this);
  context_->setWordWrap(true);
  context_->setMinimumHeight(2 * context_->fontMetrics().height() + 6);
  layout->addWidget(context_);
  // the 32 bits as a teacher draws them: numbered above, the fields named below
  auto* grid = new QGridLayout;
  grid->setHorizontalSpacing(1);
  grid->setVerticalSpacing(1);
  auto column = [](int b) { return 31 - b + (b < 31 ? 1 : 0) + (b < 23 ? 1 : 0); };  // a gap after the sign and the exponent
  for (int b = 31; b >= 0; --b) {
    auto* number = new QLabel(QString::number(b), this);
    number->setAlignment(Qt::AlignCenter);
    bitNumbers_[std::size_t(b)] = number;
    grid->addWidget(number, 0, column(b));
    auto* button = new QToolButton(this);
    button->setCheckable(true);
    button->setAutoRaise(false);
    button->setFixedSize(22, 26);
    const char* field = b == 31 ? "sign" : b >= 23 ? "exponent" : "mantissa";
    button->setToolTip(tr("bit %1 (%2): click to toggle").arg(b).arg(QLatin1String(field)));
    connect(button, &QToolButton::clicked, this, [this, b] { toggleBit(b); });
    buttons_[std::size_t(b)] = button;
    grid->addWidget(button, 1, column(b));
  }
  grid->setColumnMinimumWidth(1, 8);
  grid->setColumnMinimumWidth(10, 8);
  const QString fieldNames[3] = {tr("sign"), tr("exponent (8 bits, bias 127)"), tr("mantissa (23 bits; the leading 1 is implicit)")};
  const int spans[3][2] = {{column(31), 1}, {column(30), 8}, {column(22), 23}};
  for (int f = 0; f < 3; ++f) {
    auto* name = new QLabel(fieldNames[f], this);
    name->setAlignment(Qt::AlignCenter);
    name->setStyleSheet(QStringLiteral("border-top: 2px solid %1").arg(palette::bitField(f).name()));
    fieldLabels_[std::size_t(f)] = name;
    grid->addWidget(name, 2, spans[f][0], 1, spans[f][1]);
  }
  grid->setColumnStretch(column(0) + 1, 1);
  layout->addLayout(grid);
  // stepping along the value line, and the reading size
  auto* steps = new QHBoxLayout;
  previous_ = new QPushButton(tr("< Previous float"), this);
  next_ = new QPushButton(tr("Next float >"), this);
  previous_->setToolTip(tr("The largest fp32 value below this one (one ULP down)"));
  next_->setToolTip(tr("The smallest fp32 value above this one (one ULP up)"));
  large_ = new QCheckBox(tr("Large type"), this);
  large_->setToolTip(tr("Bigger digits and bits, for a projector or a classroom"));
  steps->addWidget(previous_);
  steps->addWidget(next_);
  steps->addStretch(1);
  steps->addWidget(large_);
  layout->addLayout(steps);
  connect(previous_, &QPushButton::clicked, this, &BitExplorer::stepPrevious);
  connect(next_, &QPushButton::clicked, this, &BitExplorer::stepNext);
  connect(large_, &QCheckBox::toggled, this, &BitExplorer::setLargeType);
  value_ = new QLabel(this);
  fp64_ = new QLabel(this);
  fp64_->setToolTip(tr("The value typed, in fp64 (sign, 11 exponent bits with bias 1023, 52 mantissa bits): what fp32 rounds from"));
  change_ = new QLabel(this);
  formats_ = new QLabel(this);
  blocks_ = new QLabel(this);
  blocks_->setToolTip(tr("The block this value belongs to in each block-scaled format: the block's largest magnitude,\n"
                         "its shared scale, and what the value becomes. Shown for a value of a tensor (a compared pair)."));
  auto* shown = new QHBoxLayout;
  shown->addWidget(new QLabel(tr("Formats:"), this));
  for (const fp::Format& f : fp::narrowFormats()) {
    auto* box = new QCheckBox(QString::fromLatin1(f.name.data(), int(f.name.size())), this);
    box->setChecked(f.name != fp::kE3M2.name && f.name != fp::kE2M3.name && f.name != fp::kE2M1.name);  // fp6/fp4 on demand
    box->setToolTip(tr("Show this value rounded to %1 (as the candidate kernels round: fp8 saturates)")
                        .arg(QString::fromLatin1(f.name.data(), int(f.name.size()))));
    connect(box, &QCheckBox::toggled, this, [this] { refresh(); });
    formatBoxes_.push_back(box);
    shown->addWidget(box);
  }
  shown->addStretch(1);
  for (QLabel* l : {value_, fp64_, change_}) {
    l->setTextInteractionFlags(Qt::TextSelectableByMouse);
    l->setWordWrap(true);
    l->setMinimumHeight(2 * l->fontMetrics().height() + 4);
    layout->addWidget(l);
  }
  layout->addLayout(shown);
  for (QLabel* l : {formats_, blocks_}) {
    l->setTextInteractionFlags(Qt::TextSelectableByMouse);
    l->setWordWrap(true);
    l->setMinimumHeight(2 * l->fontMetrics().height() + 4);  // a wrapped second line stays visible
    layout->addWidget(l);
  }
  QFont mono = formats_->font();
  mono.setFamily(QStringLiteral("monospace"));
  mono.setStyleHint(QFont::Monospace);
  formats_->setFont(mono);
  blocks_->setFont(mono);
  fp64_->setFont(mono);
  flipRow_ = new QWidget(this);
  auto* flip = new QHBoxLayout(flipRow_);
  flip->setContentsMargins(0, 0, 0, 0);
  flipButton_ = new QPushButton(tr("Flip in the model"), flipRow_);
  flipButton_->setToolTip(tr("Run the network on a test image with the toggled bits flipped in this value: the logits before\n"
                             "and after, whether SAVE's range check or recomputation catches it, whether the prediction changes"));
  flip->addWidget(flipButton_);
  flip->addWidget(new QLabel(tr("on test image"), flipRow_));
  flipImage_ = new QSpinBox(flipRow_);
  flipImage_->setRange(0, 9999);
  flip->addWidget(flipImage_);
  flip->addStretch(1);
  layout->addWidget(flipRow_);
  flipResult_ = new QLabel(this);
  flipResult_->setWordWrap(true);
  flipResult_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(flipResult_);
  connect(flipButton_, &QPushButton::clicked, this, &BitExplorer::requestFlip);
  // Enter in the value field shows the value typed: no button of the dialog the explorer sits in
  // takes it as its default (a dialog's buttons are "auto default": Enter pressed "< Previous float")
  for (QPushButton* button : {previous_, next_, flipButton_}) button->setAutoDefault(false);
  layout->addStretch(1);
  connect(input_, &QLineEdit::returnPressed, this, [this] {
    bool ok = false;
    const QString text = input_->text().trimmed().toLower();
    float v = 0;
    if (text.startsWith(QLatin1String("0x")) || text.startsWith(QLatin1String("0b"))) {
      // a bit pattern, as float.exposed takes it: 0x3f800000 or 0b0011_1111_1000... (32 bits at most)
      QString digits = text.mid(2);
      digits.remove(QLatin1Char('_'));
      const int base = text.startsWith(QLatin1String("0x")) ? 16 : 2;
      const qulonglong pattern = digits.toULongLong(&ok, base);
      ok = ok && !digits.isEmpty() && pattern <= 0xffffffffull;
      const uint32_t bits = uint32_t(pattern);
      std::memcpy(&v, &bits, sizeof v);
    } else if (text == QLatin1String("inf") || text == QLatin1String("+inf") || text == QLatin1String("-inf") ||
               text == QLatin1String("nan")) {
      v = text == QLatin1String("nan") ? NAN : text.startsWith(QLatin1Char('-')) ? -INFINITY : INFINITY;
      ok = true;
    } else {
      v = input_->text().toFloat(&ok);
    }
    if (ok) {
      clearContexts();
      bool decimal = false;
      const double typed = input_->text().trimmed().toDouble(&decimal);
      setValue(v);
      if (decimal && std::isfinite(typed)) typed_ = typed;  // fp64 shows what was typed, before fp32 rounds it
      refresh();
    }
    else change_->setText(tr("'%1' is not a number (a decimal, inf, nan, or bits as 0x3f800000 or 0b...)").arg(input_->text()));
  });
  baseFontSize_ = font().pointSizeF() > 0 ? font().pointSizeF() : 10.0;
  setValue(1.0f);
}

void BitExplorer::setFlipAvailable(bool available) {
  flipAvailable_ = available;
  flipResult_->clear();
  refresh();
}

void BitExplorer::setFlipImage(int image) { flipImage_->setValue(image); }

void BitExplorer::requestFlip() {
  const uint32_t mask = bits_ ^ fp::bitsOf(reference_);
  if (mask == 0) {
    flipResult_->setText(tr("Toggle the bits to flip first."));
    return;
  }
  flipButton_->setEnabled(false);
  flipResult_->setText(tr("Running the network on test image %1 ...").arg(flipImage_->value()));
  emit flipRequested(mask, flipImage_->value());
}

void BitExplorer::showFlipError(const QString& text) {
  flipButton_->setEnabled(true);
  flipResult_->setText(tr("Flip in the model failed: %1").arg(text));
}

QString BitExplorer::flipText() const { return flipResult_->text(); }

void BitExplorer::showFlip(const save::ModelFlip& f) {
  flipButton_->setEnabled(true);
  QStringList bits, classes;
  for (int b = 31; b >= 0; --b)
    if ((f.mask >> b) & 1) {
      bits << QString::number(b);
      classes << ((f.rangingMask >> b) & 1 ? tr("ranging") : (f.robustMask >> b) & 1 ? tr("robust") : tr("vulnerable"));
    }
  QString caught;
  if (f.outOfRange) caught = tr("<b>caught by the range check</b>: %1 lies outside [%2, %3]").arg(number(f.after), number(f.lo), number(f.hi));
  else if (f.recomputeCatches) caught = tr("<b>caught by recomputation</b> (a type-2 value in unreliable memory; a bit it compares changed)");
  else if (f.violations > 0) caught = tr("<b>caught by the range check of %1</b> (%2 values computed from it leave their ranges)").arg(QString::fromStdString(f.firstViolation)).arg(f.violations);
  else caught = tr("<b>not caught</b>: inside its range%1").arg(f.recomputed ? tr(", and only robust bits changed") : tr(", and SAVE does not recompute this value"));
  // the logits, a row per class (a number never broken across lines): every class of a model with
  // up to 12, else the two predicted classes and those that moved most (in bold where they moved)
  const std::size_t outputs = std::min(f.logitsBefore.size(), f.logitsAfter.size());
  std::vector<std::size_t> shown(outputs);
  std::iota(shown.begin(), shown.end(), std::size_t(0));
  constexpr std::size_t kAllUpTo = 12, kMostMoved = 8;
  if (outputs > kAllUpTo) {
    const auto moved = [&](std::size_t i) {
      const double d = std::fabs(double(f.logitsAfter[i]) - double(f.logitsBefore[i]));
      return std::isnan(d) ? HUGE_VAL : d;  // a NaN logit first
    };
    std::stable_sort(shown.begin(), shown.end(), [&](std::size_t x, std::size_t y) { return moved(x) > moved(y); });
    shown.resize(kMostMoved);
    for (int c : {f.classBefore, f.classAfter})
      if (c >= 0 && std::size_t(c) < outputs && std::find(shown.begin(), shown.end(), std::size_t(c)) == shown.end())
        shown.push_back(std::size_t(c));
    std::sort(shown.begin(), shown.end());
  }
  // in two groups side by side (class, before, after twice): half as tall
  const std::size_t rows = (shown.size() + 1) / 2;
  const QString headCells = tr("<td>class</td><td align=right>before</td><td align=right>after</td>");
  QString logits = QStringLiteral("<tr>") + headCells + (shown.size() > 1 ? QStringLiteral("<td width=16></td>") + headCells : QString()) +
                   QStringLiteral("</tr>");
  const auto cells = [&](std::size_t i) {
    const bool moved = fp::bitsOf(f.logitsBefore[i]) != fp::bitsOf(f.logitsAfter[i]);
    return QStringLiteral("<td>%1</td><td align=right style=\"white-space:nowrap\">%2</td>"
                          "<td align=right style=\"white-space:nowrap\">%3%4%5</td>")
        .arg(i)
        .arg(number(f.logitsBefore[i]), moved ? QStringLiteral("<b>") : QString(), number(f.logitsAfter[i]),
             moved ? QStringLiteral("</b>") : QString());
  };
  for (std::size_t r = 0; r < rows; ++r)
    logits += QStringLiteral("<tr>") + cells(shown[r]) +
              (r + rows < shown.size() ? QStringLiteral("<td></td>") + cells(shown[r + rows]) : QString()) +
              QStringLiteral("</tr>");
  if (shown.size() < outputs)
    logits += tr("<tr><td colspan=7>%1 other classes (those that moved least) not shown</td></tr>").arg(outputs - shown.size());
  const auto cls = [this](int c) { return c < 0 ? tr("none (a logit is NaN or infinite)") : QString::number(c); };
  const QString prediction =
      f.classAfter == f.classBefore
          ? tr("The prediction is unchanged (class %1)").arg(cls(f.classBefore))
          : tr("<b>The prediction changed</b> from class %1 to %2").arg(cls(f.classBefore), cls(f.classAfter));
  flipResult_->setText(
      tr("<p>Test image %1 (label %2), %3[%4]: %5 -> %6 (shown above), bit(s) %7 (%8). %9%10. %11.</p>"
         "<table cellspacing=0 cellpadding=3>%12</table>")
          .arg(f.image)
          .arg(f.label)
          .arg(QString::fromStdString(f.layer))
          .arg(f.element)
          .arg(number(f.before), number(f.after), bits.join(QLatin1Char(' ')), classes.join(QStringLiteral(", ")), caught,
               f.reliable ? tr(" (this value sits in reliable memory: a memory fault cannot reach it)") : QString(), prediction,
               logits));
  // the explorer now holds this image's value (not the range's bound it opened on) and its flip
  reference_ = f.before;
  bits_ = fp::bitsOf(f.after);
  toggle_ = fp::change(fp::kFp32, fp::bitsOf(reference_), bits_);
  input_->setText(number(f.before));
  refresh();
  layout()->activate();  // the outcome's lines laid out now, not at the next event
  // the outcome stays in view: the window grows to show it (within the screen), else it is scrolled to
  QScrollArea* scroll = nullptr;
  for (QWidget* p = parentWidget(); p && !scroll; p = p->parentWidget()) scroll = qobject_cast<QScrollArea*>(p);
  if (QWidget* w = window(); scroll && w != this) {
    const int wanted = w->height() + sizeHint().height() - scroll->viewport()->height();
    const QScreen* screen = w->screen();
    const int room = screen ? screen->availableGeometry().height() - (w->frameGeometry().height() - w->height()) : wanted;
    if (wanted > w->height() && w->height() < room) {
      w->resize(w->width(), std::min(wanted, room));
      emit windowResized();
    }
    scroll->ensureWidgetVisible(flipResult_);
  }
}

void BitExplorer::stepNext() {
  const fp::Explained e = fp::explain(fp::kFp32, bits_);
  if (!e.above) return;
  clearContexts();
  setValue(*e.above);
}

void BitExplorer::stepPrevious() {
  const fp::Explained e = fp::explain(fp::kFp32, bits_);
  if (!e.below) return;
  clearContexts();
  setValue(*e.below);
}

void BitExplorer::setFormatShown(const QString& name, bool shown) {
  for (QCheckBox* box : formatBoxes_)
    if (box->text() == name) box->setChecked(shown);
}

void BitExplorer::setLargeType(bool large) {
  {
    const QSignalBlocker block(large_);
    large_->setChecked(large);
  }
  QFont f = QWidget::font();
  f.setPointSizeF(large ? 1.6 * baseFontSize_ : baseFontSize_);
  for (QWidget* w : findChildren<QWidget*>()) {
    QFont wf = w->font();
    wf.setPointSizeF(f.pointSizeF());
    w->setFont(wf);
  }
  // large bits, but never wider than the screen: 32 bits and the gaps between the fields fit
  const QScreen* screen = window()->screen() ? window()->screen() : QGuiApplication::primaryScreen();
  const int room = (screen ? screen->availableGeometry().width() : 1920) - 80;
  const int bit = std::clamp(room / 34, 26, 36);
  for (QToolButton* b : buttons_) b->setFixedSize(large ? bit : 22, large ? 42 : 26);
  adjustSize();
  if (window() != this) {  // the explorer's window takes the size the larger type needs, within the screen
    // (the explorer's own hint: its window holds it in a scroll area, whose hint is small; the rest
    // scrolls)
    const QSize want = sizeHint() + QSize(24, 24);
    const int tall = screen ? screen->availableGeometry().height() - 40 : 1000;
    window()->resize(std::min(std::max(window()->width(), want.width()), room + 60),
                     std::min(std::max(window()->height(), want.height()), tall));
    emit windowResized();
  }
}

bool BitExplorer::largeType() const { return large_->isChecked(); }
QString BitExplorer::fp64Text() const { return fp64_->text(); }

void BitExplorer::setValue(float value) {
  reference_ = value;
  typed_ = double(value);
  bits_ = fp::bitsOf(value);
  typedBits_ = bits_;
  toggle_.reset();
  input_->setText(number(value));
  refresh();
}

void BitExplorer::setSaveContext(const QString& where, double lo, double hi, uint32_t robustMask, uint32_t rangingMask) {
  pair_ = false;
  places_.clear();
  save_ = true;
  where_ = where;
  lo_ = lo;
  hi_ = hi;
  robust_ = robustMask;
  ranging_ = rangingMask;
  refresh();
}

void BitExplorer::clearSaveContext() {
  save_ = false;
  refresh();
}

void BitExplorer::setPairContext(const QString& where, float golden, float candidate) {
  save_ = false;
  pair_ = true;
  where_ = where;
  golden_ = golden;
  candidate_ = candidate;
  places_.clear();
  setValue(golden);
}

void BitExplorer::setBlockContext(const std::vector<fp::BlockPlace>& places) {
  places_ = places;
  refresh();
}

void BitExplorer::clearContexts() {
  save_ = false;
  pair_ = false;
  places_.clear();
  refresh();
}

QString BitExplorer::contextText() const { return context_->text(); }
QString BitExplorer::blocksText() const { return blocks_->text(); }

void BitExplorer::toggleBit(int bit) {
  if (bit < 0 || bit > 31) return;
  bits_ ^= uint32_t(1) << bit;
  toggle_ = fp::change(fp::kFp32, fp::bitsOf(reference_), bits_);  // against the value opened
  refresh();
}

QString BitExplorer::valueText() const { return value_->text(); }
QString BitExplorer::toggleText() const { return change_->text(); }
QString BitExplorer::formatsText() const { return formats_->text(); }

void BitExplorer::refresh() {
  const fp::Explained e = fp::explain(fp::kFp32, bits_);
  for (int b = 0; b < 32; ++b) {
    QToolButton* button = buttons_[std::size_t(b)];
    const bool set = (bits_ >> b) & 1;
    button->setText(set ? QStringLiteral("1") : QStringLiteral("0"));
    const QSignalBlocker block(button);
    button->setChecked(set);
    QColor background = b == 31 ? QColor(0xe8, 0xe8, 0xe8) : b >= 23 ? QColor(0xd6, 0xe4, 0xf0) : QColor(0xf4, 0xf4, 0xf4);
    if (save_) background = palette::bitClass((ranging_ >> b) & 1 ? 1 : (robust_ >> b) & 1 ? 0 : 2);
    const QColor text = background.lightnessF() < 0.55 ? QColor(Qt::white) : QColor(Qt::black);
    const bool differs = (differingBits() >> b) & 1;  // the candidate's bit is the other one: framed
    button->setStyleSheet(QStringLiteral("QToolButton{background:%1;color:%2;border:%3;font-weight:%4}")
                              .arg(background.name(), text.name(),
                                   differs ? QStringLiteral("3px solid %1").arg(palette::bitClass(2).name()) : QStringLiteral("1px solid #888"),
                                   set ? QStringLiteral("bold") : QStringLiteral("normal")));
  }
  // the exponent field as it reads: all ones is no power of two (Inf or NaN), zero is the
  // subnormals' 2^-126 without the implicit 1
  const QString exponent = e.fields.exponent == 255 ? tr("all ones: Inf or NaN")
                           : e.fields.exponent == 0 ? tr("0: zero or subnormal, 2^-126 without the implicit 1")
                                                    : QStringLiteral("2^%1").arg(e.fields.unbiasedExponent);
  QString v = tr("%1 = %2 (%3): sign %4, exponent %5 (%6), mantissa 0x%7")
                  .arg(QStringLiteral("0x%1").arg(bits_, 8, 16, QLatin1Char('0')), number(e.value), classText(e.fields.cls))
                  .arg(e.fields.sign ? QStringLiteral("-") : QStringLiteral("+"))
                  .arg(e.fields.exponent)
                  .arg(exponent)
                  .arg(e.fields.mantissa, 6, 16, QLatin1Char('0'));
  if (std::isfinite(e.value)) {
    // exact: a float is a dyadic rational, and glibc prints every digit it has
    char exact[256];
    std::snprintf(exact, sizeof exact, "%.120g", double(e.value));
    const bool subnormal = e.fields.exponent == 0;
    const double significand = (subnormal ? 0.0 : 1.0) + double(e.fields.mantissa) / 8388608.0;
    char sig[64];
    std::snprintf(sig, sizeof sig, "%.17g", significand);
    v += tr("; exactly %1 = %2%3 x 2^%4").arg(QString::fromLatin1(exact), e.fields.sign ? QStringLiteral("-") : QString(),
                                             QString::fromLatin1(sig))
             .arg(subnormal ? -126 : e.fields.unbiasedExponent);
  }
  if (e.ulp > 0) v += tr("; one ULP here is %1").arg(number(e.ulp));
  if (e.below || e.above)
    v += tr("; neighbours %1 and %2").arg(e.below ? number(*e.below) : tr("none"), e.above ? number(*e.above) : tr("none"));
  value_->setText(v);
  if (save_) {
    const bool inside = e.value >= lo_ && e.value <= hi_;  // false for NaN
    context_->setText(tr("%1: sound range [%2, %3]; bits coloured robust (blue), ranging (yellow), vulnerable (vermillion). "
                         "This value is %4.")
                          .arg(where_, number(lo_), number(hi_),
                               inside ? tr("inside the range") : tr("outside the range: a range check catches it")));
  } else if (pair_) {
    const fp::Toggle d = fp::change(fp::kFp32, fp::bitsOf(golden_), fp::bitsOf(candidate_));
    QStringList differing;
    for (int b = 31; b >= 0; --b)
      if ((differingBits() >> b) & 1) differing << QString::number(b);
    context_->setText(tr("%1: golden %2, candidate %3; error %4 absolute, %5 relative, %6 ULP; bits that differ "
                         "(framed): %7")
                          .arg(where_, number(golden_), number(candidate_), number(d.absoluteChange), number(d.relativeChange),
                               d.ulpChange ? QString::number(*d.ulpChange) : tr("no"),
                               differing.isEmpty() ? tr("none") : differing.join(QLatin1Char(' '))));
  } else {
    context_->clear();
  }
  if (toggle_) {
    const fp::Toggle& t = *toggle_;
    change_->setText(tr("After toggling: %1; against the value opened (%5): %2 absolute, %3 relative, %4 ULP")
                         .arg(number(t.after.value), number(t.absoluteChange), number(t.relativeChange),
                              t.ulpChange ? QString::number(*t.ulpChange) : tr("no"), number(reference_)));
  } else {
    change_->setText(tr("Click a bit to toggle it."));
  }
  // what was typed while the bits are its fp32 rounding; after a toggle, a step or a flip, the fp32
  // value the bits now hold (the fp64 line never shows a value the explorer has left)
  float now = 0;
  std::memcpy(&now, &bits_, sizeof now);
  const fp::Explained64 d = fp::explain64(bits_ == typedBits_ ? typed_ : double(now));
  QString bits64 = QString::number(d.bits, 2).rightJustified(64, QLatin1Char('0'));
  bits64.insert(12, QLatin1Char(' ')).insert(1, QLatin1Char(' '));
  fp64_->setText(tr("fp64  %1\n      = %2%3").arg(bits64, d.exact.empty() ? number(d.value) : QString::fromStdString(d.exact),
                                              d.exact.empty() ? QString()
                                                              : tr("  = %1%2 x 2^%3").arg(d.sign ? QStringLiteral("-") : QString(),
                                                                                          QString::fromStdString(d.significand))
                                                                    .arg(d.unbiasedExponent)));
  QStringList rows;
  const std::vector<fp::Format> formats = fp::narrowFormats();
  for (std::size_t k = 0; k < formats.size(); ++k) {
    if (!formatBoxes_[k]->isChecked()) continue;
    const fp::Format& f = formats[k];
    const fp::Narrowed n = fp::narrowAsCandidate(f, e.value);
    rows << QStringLiteral("%1  %2  = %3  (rounding error %4)%5")
                .arg(QString::fromLatin1(f.name.data(), int(f.name.size())).leftJustified(5), bitString(f, n.code).leftJustified(21),
                     number(n.value), std::isfinite(n.value) && std::isfinite(e.value) ? number(double(n.value) - double(e.value)) : tr("-"),
                     n.saturated ? tr(", saturated to its largest value as the fp8 candidate does") : QString());
  }
  formats_->setText(rows.join(QLatin1Char('\n')));
  QStringList blocks;
  for (const fp::BlockPlace& p : places_) {
    const QString scale = p.tensorScale != 1 ? tr("%1 (E4M3) x %2 (tensor)").arg(number(p.scale), number(p.tensorScale))
                          : p.scale > 0      ? QStringLiteral("2^%1").arg(int(std::lround(std::log2(p.scale))))
                                             : number(p.scale);
    blocks << tr("%1 block %2 (columns %3-%4): amax %5, scale %6 -> %7%8")
                  .arg(QString::fromStdString(p.format).leftJustified(11))
                  .arg(p.block)
                  .arg(p.first)
                  .arg(p.last - 1)
                  .arg(number(p.amax), scale, number(p.quantized),
                       p.flushed ? tr(" (flushed to zero)") : p.saturated ? tr(" (saturated)") : QString());
  }
  blocks_->setText(blocks.join(QLatin1Char('\n')));
  blocks_->setVisible(!places_.empty());
  flipRow_->setVisible(save_ && flipAvailable_);
  flipResult_->setVisible(save_ && flipAvailable_);
}

}  // namespace peat::views
