// SPDX-License-Identifier: MIT
#include "views/saverunview.h"

#include <QComboBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QStringList>
#include <QTableView>
#include <QTextDocument>
#include <QVBoxLayout>

#include "views/heading.h"
#include "views/saveruntablemodel.h"

namespace peat::views {

namespace {
QString number(double v) { return QString::number(v, 'g', 6); }

QString shapeText(const std::vector<int64_t>& shape) {
  QStringList dims;
  for (int64_t d : shape) dims << QString::number(d);
  return dims.isEmpty() ? QStringLiteral("scalar") : dims.join(QLatin1Char('x'));
}

QString row(const QString& name, const QString& value) {
  return QStringLiteral("<tr><td nowrap valign=top><b>%1</b></td><td>%2</td></tr>").arg(name, value);
}
}  // namespace

SaveRunView::SaveRunView(QWidget* parent) : QWidget(parent), model_(new SaveRunTableModel(this)) {
  auto* layout = new QVBoxLayout(this);
  title_ = new QLabel(this);
  title_->setWordWrap(true);
  title_->setAlignment(Qt::AlignLeft | Qt::AlignTop);  // a message alone stays at the top
  title_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  makeHeading(title_, 1.2);
  layout->addWidget(title_);
  details_ = new QLabel(this);
  details_->setWordWrap(true);
  details_->setTextFormat(Qt::RichText);
  details_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(details_);
  chooserRow_ = new QWidget(this);
  chooser_ = new QComboBox(chooserRow_);
  chooser_->setToolTip(tr("The model has several outputs: the one the lines above and the table show"));
  chooser_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  chooser_->setMinimumContentsLength(12);
  auto* choose = new QHBoxLayout(chooserRow_);
  choose->setContentsMargins(0, 0, 0, 0);
  auto* label = new QLabel(tr("&Output:"), chooserRow_);
  label->setBuddy(chooser_);
  choose->addWidget(label);
  choose->addWidget(chooser_, 1);
  layout->addWidget(chooserRow_);
  connect(chooser_, &QComboBox::currentIndexChanged, this, [this](int part) {
    if (part >= 0 && part < int(run_.parts.size())) showPart(part);
  });
  table_ = new QTableView(this);
  table_->setModel(model_);
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setAlternatingRowColors(true);
  table_->horizontalHeader()->setStretchLastSection(true);
  layout->addWidget(table_, 1);
  showMessage(tr("No model has run here yet. Run > New Run (Ctrl+R), mode SAVE run: choose an ONNX model and its "
                 "input (.npy or .h5), optionally a protection with faults and the outputs you expect; the outputs "
                 "appear here."));
}

void SaveRunView::showMessage(const QString& text) {
  run_ = SaveRunOutputs();
  chooser_->clear();
  chooserRow_->hide();
  title_->setText(text);
  details_->clear();
  details_->hide();
  model_->clear();
  table_->hide();
}

void SaveRunView::showOutputs(const SaveRunOutputs& r) {
  run_ = r;
  const QSignalBlocker quiet(chooser_);
  chooser_->clear();
  for (const SaveRunOutputPart& p : r.parts)
    chooser_->addItem(QStringLiteral("%1 [%2]").arg(p.name, shapeText(p.summary.sampleShape)));
  chooserRow_->setVisible(!r.parts.empty());
  showPart(r.parts.empty() ? -1 : 0);
}

void SaveRunView::showPart(int part) {
  const SaveRunOutputs& r = run_;
  const save::OutputSummary& s = part < 0 ? r.summary : r.parts[std::size_t(part)].summary;
  QStringList inputs;  // the files of one input each (';' between them, as the run form takes them)
  for (const QString& e : r.input.split(QLatin1Char(';')))
    if (!e.trimmed().isEmpty()) inputs << QFileInfo(e.trimmed()).fileName();
  const QString model = QFileInfo(r.model).fileName(), input = inputs.join(QStringLiteral(", "));
  title_->setText(tr("%1 on %n sample(s) of %2", nullptr, int(s.samples)).arg(model, input));
  QString html = QStringLiteral("<table cellspacing=3>");
  if (part < 0) {
    html += row(tr("Outputs"), tr("%1 x [%2], written to %3")
                                   .arg(s.samples)
                                   .arg(shapeText(s.sampleShape), r.outputs.toHtmlEscaped()));
  } else {
    QStringList each;
    for (const SaveRunOutputPart& p : r.parts)
      each << tr("%1 [%2] written to %3").arg(p.name.toHtmlEscaped(), shapeText(p.summary.sampleShape), p.file.toHtmlEscaped());
    html += row(tr("Outputs"), tr("%n output(s) of %1 sample(s): %2; top-1 is taken over the first", nullptr, int(r.parts.size()))
                                   .arg(s.samples)
                                   .arg(each.join(QStringLiteral("; "))));
  }
  const bool plain = r.protection == QLatin1String("none") && r.flips == 0;
  html += row(tr("Inference"), tr("%1 ms, %2").arg(1000 * r.seconds, 0, 'f', 2)
                                   .arg(plain ? tr("SAVE's plain fp32 engine (no protection, no faults)")
                                              : tr("protected by <b>%1</b>, %n bit flip(s) asked", nullptr, int(r.flips))
                                                    .arg(r.protection.toHtmlEscaped())));
  if (!plain) {
    html += row(tr("Protection"),
                tr("%1 fault(s) injected, %2 detected, %3 recovered; %4")
                    .arg(r.faults)
                    .arg(r.detections)
                    .arg(r.recoveries)
                    .arg(r.unrecovered > 0 ? tr("<b>some layers were not recovered</b>") : tr("every detection recovered")));
  }
  const QString values = part < 0 ? tr("All values") : tr("All values of %1").arg(r.parts[std::size_t(part)].name.toHtmlEscaped());
  html += row(values, s.stats.finite == 0 ? tr("no finite value")
                                                     : tr("min %1, max %2, mean %3, std %4")
                                                           .arg(number(s.stats.min), number(s.stats.max), number(s.stats.mean),
                                                                number(s.stats.stddev)) +
                                                           (s.stats.nan || s.stats.inf
                                                                ? tr("; <b>%1 NaN, %2 Inf</b>").arg(s.stats.nan).arg(s.stats.inf)
                                                                : QString()));
  // the comparison of the output shown (a model with several: its own, from the command's list)
  const SaveRunComparison& c = part < 0 ? r.comparison : r.parts[std::size_t(part)].comparison;
  if (c.given) {
    html += row(tr("Against %1").arg(QFileInfo(c.reference).fileName().toHtmlEscaped()),
                tr("largest |difference| <b>%1</b> (sample %2, element %3), largest relative %4; top-1 agrees on %5 of "
                   "%6 samples; %7 element(s) finite on one side only")
                    .arg(number(c.maxAbs))
                    .arg(c.worstSample)
                    .arg(c.worstElement)
                    .arg(number(c.maxRel))
                    .arg(c.top1Agree)
                    .arg(s.samples)
                    .arg(c.nonFinite));
  }
  const QString table = s.scoreVector ? tr("the %n largest outputs of each sample: class (output)", nullptr,
                                           s.shown.empty() ? 0 : int(s.shown.front().classes.size()))
                                      : tr("each sample's smallest, largest and mean output and its first values");
  const QString shown = qint64(s.shown.size()) < s.samples
                            ? tr(", the first %1 of %2 samples").arg(s.shown.size()).arg(s.samples)
                            : QString();
  html += row(tr("Table"), table + shown);
  html += QStringLiteral("</table>");
  details_->setText(html);
  details_->show();
  model_->setSummary(s);
  table_->show();
  table_->resizeColumnsToContents();
}

QString SaveRunView::titleText() const { return title_->text(); }

QString SaveRunView::detailsText() const {
  QTextDocument doc;
  doc.setHtml(details_->text());
  return doc.toPlainText();
}

QString SaveRunView::csv() const { return model_->csv(); }

}  // namespace peat::views
