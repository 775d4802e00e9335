// SPDX-License-Identifier: MIT
#include "views/callpage.h"

#include <QApplication>
#include <QClipboard>
#include <QHBoxLayout>
#include <QFontDatabase>
#include <QLabel>
#include <QPushButton>
#include <QScrollBar>
#include <QSplitter>
#include <QStackedWidget>
#include <QTextBrowser>
#include <QTextDocument>
#include <QVBoxLayout>

#include <algorithm>

#include "core/detector/detector.h"
#include "views/calltext.h"
#include "views/errorplotpanel.h"
#include "views/failedcalls.h"
#include "views/heading.h"
#include "views/jobtracker.h"
#include "views/pageloads.h"

namespace peat::views {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }
QString number(double v) { return QString::number(v, 'g', 6); }

QString findingHtml(const store::Finding& f) {
  QString s = QStringLiteral("<b>%1</b> %2").arg(qs(f.model).toHtmlEscaped(), number(f.confidence));
  QStringList parts;
  for (const auto& [k, v] : f.labels) parts << QStringLiteral("%1=%2").arg(qs(k).toHtmlEscaped(), qs(v).toHtmlEscaped());
  for (const auto& [k, v] : f.numbers) parts << QStringLiteral("%1=%2").arg(qs(k).toHtmlEscaped(), number(v));
  if (!parts.isEmpty()) s += QStringLiteral("<br><small>%1</small>").arg(parts.join(QStringLiteral(", ")));
  return s;
}

}  // namespace

CallPage::CallPage(QWidget* parent) : QWidget(parent), jobs_(new JobTracker(this)) {
  auto* layout = new QVBoxLayout(this);
  title_ = new QLabel(this);
  title_->setWordWrap(true);
  title_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  makeHeading(title_, 1.2);
  layout->addWidget(title_);
  replayRow_ = new QWidget(this);
  auto* replay = new QHBoxLayout(replayRow_);
  replay->setContentsMargins(0, 0, 0, 0);
  replay->addWidget(new QLabel(tr("Replay it alone:"), replayRow_), 0, Qt::AlignTop);
  replay_ = new QLabel(replayRow_);
  replay_->setWordWrap(true);
  replay_->setTextFormat(Qt::PlainText);
  replay_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  replay_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  replay_->setToolTip(tr("Replays this call alone through the same kernel, in a kernel host, into a session beside this one"));
  replay->addWidget(replay_, 1);
  copy_ = new QPushButton(tr("Copy command"), replayRow_);
  replay->addWidget(copy_, 0, Qt::AlignTop);
  connect(copy_, &QPushButton::clicked, this, [this] { QApplication::clipboard()->setText(replay_->text()); });
  replayRow_->hide();
  layout->addWidget(replayRow_);
  // a stack, not a hidden plot: a plot hidden in the splitter is resized to nothing and redrawn so
  stack_ = new QStackedWidget(this);
  split_ = new QSplitter(Qt::Horizontal, stack_);
  details_ = new QTextBrowser(split_);
  details_->setObjectName(QStringLiteral("CallDetails"));
  details_->setOpenLinks(false);
  details_->setMinimumWidth(details_->fontMetrics().horizontalAdvance(QLatin1Char('x')) * 22);
  // a narrow column (1366 x 768 and less) wraps a value at its spaces ("301053 | (99.999%)",
  // "row 146, | column 568") but never breaks a key (class "key": Qt's rich text ignores the nowrap
  // attribute) or a number, which has none: it does not scroll sideways; a key never runs into its value
  details_->setWordWrapMode(QTextOption::WordWrap);
  details_->document()->setDefaultStyleSheet(
      QStringLiteral("td { padding-right: 6px; } td.key { white-space: nowrap; }"));
  // a value that cannot wrap (a tensor's shape) widens the column, up to half the page (the plots
  // keep the rest), rather than scroll it sideways
  connect(details_->horizontalScrollBar(), &QScrollBar::rangeChanged, this, [this](int, int overflow) {
    const QList<int> sizes = split_->sizes();
    if (overflow <= 0 || sizes.size() != 2) return;
    const int total = sizes[0] + sizes[1], wanted = std::min(sizes[0] + overflow + 2, total / 2);
    if (wanted > sizes[0]) split_->setSizes({wanted, total - wanted});
  });
  plots_ = new ErrorPlotPanel(split_);
  split_->addWidget(details_);
  split_->addWidget(plots_);
  split_->setStretchFactor(0, 2);
  split_->setStretchFactor(1, 5);
  failure_ = new QTextBrowser(stack_);
  failure_->setOpenLinks(false);
  stack_->addWidget(split_);
  stack_->addWidget(failure_);
  layout->addWidget(stack_, 1);
  showMessage(tr("Select an analysed call in the session tree: its page opens here"));
}

void CallPage::load(const QString& loading, std::function<SelectedCalls()> read) {
  showMessage(loading);
  jobs_->start<SelectedCalls>(
      std::move(read), [this](const SelectedCalls& selected) { emit callsRead(selected); },
      [this](const QString& why) { emit readFailed(why); });
}

void CallPage::loadFailed(const QString& loading, std::function<FailedCallPage()> read) {
  showMessage(loading);
  jobs_->start<FailedCallPage>(
      std::move(read), [this](const FailedCallPage& page) { emit failedCallRead(page); },
      [this](const QString& why) { emit readFailed(why); });
}

bool CallPage::loading() const { return jobs_->pending(); }

void CallPage::showMessage(const QString& text) {
  jobs_->cancel();
  title_->setText(text);
  details_->clear();
  replay_->clear();
  replayRow_->hide();
  stack_->setCurrentWidget(split_);
  plots_->showMessage(text);
}

void CallPage::showKernelFailure(const FailedCallPage& page, const QString& title) {
  const FailedCall& f = page.failed;
  title_->setText(title);
  QString html = tr("<h3>Call</h3><p>%1 %2 %3, iteration %4, call %5 (%6)</p>")
                     .arg(qs(f.layer).toHtmlEscaped(), qs(f.op).toHtmlEscaped(), qs(f.phase).toHtmlEscaped())
                     .arg(f.iteration)
                     .arg(f.callIndex)
                     .arg(qs(f.call).toHtmlEscaped());
  const store::CallDescription& d = page.description;
  if (d.knownOp) {
    const std::string parameters = d.parameterLine(true);
    html += QStringLiteral("<p>%1%2</p>").arg(qs(d.kind(f.phase) + ": " + d.text()).toHtmlEscaped(),
                                              parameters.empty() ? QString() : QStringLiteral("<br>") + qs(parameters).toHtmlEscaped());
  }
  html += page.tensors.empty()
              ? tr("<p>The recorded call's tensors are not in the session (run %1).</p>").arg(qs(page.sourceRun).toHtmlEscaped())
              : tr("<p>As recorded in run %1:<br>%2</p>")
                    .arg(qs(page.sourceRun).toHtmlEscaped(),
                         namedTensorText(page.tensors, d).toHtmlEscaped().replace(QLatin1Char('\n'), QStringLiteral("<br>")));
  html += tr("<h3>Kernel failure: %1</h3>").arg(qs(f.outcome).toHtmlEscaped());
  if (!page.failure.empty())
    html += QStringLiteral("<p>%1</p>").arg(qs(page.failure).toHtmlEscaped());
  else
    html += tr("<p>The kernel failed this call in its kernel host; the run keeps the line of its first failure "
               "only: %1</p>").arg(qs(page.firstFailure).toHtmlEscaped());
  html += tr("<p>Kernel: %1</p>").arg(qs(page.kernel).toHtmlEscaped());
  if (page.verdict) {
    const store::Verdict& v = *page.verdict;
    html += tr("<h3>Verdict: %1 (%2)</h3><p>%3</p>").arg(qs(v.model).toHtmlEscaped(), number(v.confidence),
                                                       qs(v.evidence).toHtmlEscaped());
    const std::string why = detector::verdictExplanation(v.model);
    if (!why.empty()) html += QStringLiteral("<p><i>%1</i></p>").arg(qs(why).toHtmlEscaped());
  } else if (page.analysisRun.empty()) {
    html += tr("<h3>Verdict</h3><p>The run has no analysis yet: <tt>%1</tt> gives each failed call its verdict "
               "(kernel_crash, kernel_hang, kernel_out_of_bounds, kernel_out_of_memory).</p>").arg(page.analyze.toHtmlEscaped());
  } else {
    html += tr("<h3>Verdict</h3><p>Analysis %1 gave this call no verdict (it was made before the failure was "
               "recorded, or for other calls).</p>").arg(qs(page.analysisRun).toHtmlEscaped());
  }
  failure_->setHtml(html);
  replay_->setText(page.replay);
  replayRow_->show();
  stack_->setCurrentWidget(failure_);  // no output to plot: the failure takes the page
}

QString CallPage::replayCommand() const { return replayRow_->isHidden() ? QString() : replay_->text(); }

void CallPage::showCall(const analyzer::StoredCallReport& r, const QString& title, const QString& description,
                        const store::Verdict* verdict) {
  showReport(r, title,
             description.isEmpty() ? QString()
                                   : tr("<h3>Call</h3><p>%1</p>")
                                         .arg(description.toHtmlEscaped().replace(QLatin1Char('\n'), QStringLiteral("<br>"))),
             verdict);
}

void CallPage::showCall(const analyzer::StoredCallReport& r, const QString& title, const CallOp& op,
                        const std::vector<store::TensorInfo>& tensors, const store::Verdict* verdict) {
  showReport(r, title, callSectionHtml(op, tensors), verdict);
}

void CallPage::showReport(const analyzer::StoredCallReport& r, const QString& title, const QString& callHtml,
                          const store::Verdict* verdict) {
  title_->setText(title.isEmpty() ? qs(r.call) : title);
  replay_->clear();
  replayRow_->hide();
  stack_->setCurrentWidget(split_);
  QString html = callHtml;
  html += tr("<h3>Error</h3><table cellspacing=2>"
             "<tr><td class=key>elements</td><td>%1</td></tr><tr><td class=key>mismatched</td><td>%2 (%3%)</td></tr>"
             "<tr><td class=key>max |error|</td><td>%4</td></tr><tr><td class=key>mean |error|</td><td>%5</td></tr>"
             "<tr><td class=key>p99 |error|</td><td>%6</td></tr><tr><td class=key>output seen as</td><td>%7 x %8</td></tr>")
              .arg(number(r.elements), number(r.mismatched), number(r.elements > 0 ? 100 * r.mismatched / r.elements : 0),
                   number(r.maxAbs), number(r.meanAbs), number(r.p99))
              .arg(r.rows)
              .arg(r.cols);
  if (r.worstRow >= 0) html += tr("<tr><td class=key>largest error at</td><td>row %1, column %2</td></tr>").arg(r.worstRow).arg(r.worstCol);
  html += QStringLiteral("</table>");
  if (r.hasCriteria) {  // what users already apply beside a verdict (computed by the core, shown here)
    const analyzer::Criteria& k = r.criteria;
    html += tr("<h3>Criteria</h3><table cellspacing=2>"
               "<tr><td class=key>cosine</td><td>%1</td></tr>"
               "<tr><td class=key>max rel. error</td><td>%2</td></tr>"
               "<tr><td class=key>rel. error &gt; 1e-2</td><td>%3%</td></tr>"
               "<tr><td class=key>rel. error &gt; 1e-3</td><td>%4%</td></tr>"
               "<tr><td class=key>rel. error &gt; 1e-4</td><td>%5%</td></tr>"
               "<tr><td class=key>max ULP error</td><td>%6</td></tr>")
                .arg(QString::number(k.cosine, 'f', 7), number(k.maxRel), number(100 * k.relAbove2),
                     number(100 * k.relAbove3), number(100 * k.relAbove4), number(k.maxUlp));
    if (k.ruleEvaluated)
      html += tr("<tr><td class=key>2x rule</td><td style=\"white-space: normal\"><b>%1</b>: max error against float64 %2, at most 2 x %3 + 1e-5 "
                 "(FlashAttention's rule; reference: %4)</td></tr>")
                  .arg(k.rulePasses() ? tr("pass") : tr("fail"), number(k.candidateError), number(k.referenceError),
                       qs(k.reference).toHtmlEscaped());
    else
      html += tr("<tr><td class=key>2x rule</td><td style=\"white-space: normal\">not evaluated: no float64 recomputation of this call "
                 "(FlashAttention's rule)</td></tr>");
    html += QStringLiteral("</table>");
  }
  if (verdict) {
    html += tr("<h3>Verdict: %1 (%2)</h3>").arg(qs(verdict->model).toHtmlEscaped(), number(verdict->confidence));
    html += QStringLiteral("<p>%1</p>").arg(qs(verdict->evidence).toHtmlEscaped());
    const std::string why = detector::verdictExplanation(verdict->model);
    if (!why.empty()) html += QStringLiteral("<p><i>%1</i></p>").arg(qs(why).toHtmlEscaped());
    if (!verdict->findings.empty()) {
      html += tr("<p>Evidence and parameters: %1</p>").arg(findingHtml(verdict->findings.front()));
      if (verdict->findings.size() > 1) {
        html += tr("<h4>Other readings</h4><ul>");
        for (std::size_t i = 1; i < verdict->findings.size(); ++i)
          html += QStringLiteral("<li>%1</li>").arg(findingHtml(verdict->findings[i]));
        html += QStringLiteral("</ul>");
      }
    }
  } else if (!r.verdict.empty()) {
    html += tr("<h3>Verdict: %1</h3>").arg(qs(r.verdict).toHtmlEscaped());
  }
  html_ = html;
  details_->setHtml(html);
  plots_->showReports({r});
}

void CallPage::showPairStats(const analyzer::ValueStats& g, const analyzer::ValueStats& c) {
  const auto row = [](const QString& name, const QString& a, const QString& b) {
    const bool differ = a != b;
    return QStringLiteral("<tr><td class=key>%1</td><td align=right>%2</td><td align=right>%3%4%5</td></tr>")
        .arg(name, a, differ ? QStringLiteral("<b>") : QString(), b, differ ? QStringLiteral("</b>") : QString());
  };
  const auto count = [](uint64_t v) { return QString::number(v); };
  QString html = tr("<h3>Golden and candidate</h3><table cellspacing=2><tr><th></th><th>golden</th><th>candidate</th></tr>");
  html += row(tr("min"), number(g.min), number(c.min));
  html += row(tr("max"), number(g.max), number(c.max));
  html += row(tr("mean"), number(g.mean), number(c.mean));
  html += row(tr("std"), number(g.stddev), number(c.stddev));
  html += row(tr("max |x|"), number(g.amax), number(c.amax));
  html += row(tr("zeros"), count(g.zeros), count(c.zeros));
  html += row(tr("NaN"), count(g.nan), count(c.nan));
  html += row(tr("Inf"), count(g.inf), count(c.inf));
  html += tr("</table><p><small>Over the finite values; a candidate column in bold differs from the golden.</small></p>");
  details_->setHtml(html_ + html);
}

void CallPage::showNoPairStats(const QString& why) {
  details_->setHtml(html_ + tr("<h3>Golden and candidate</h3><p><small>%1</small></p>").arg(why.toHtmlEscaped()));
}

QString CallPage::titleText() const { return title_->text(); }
QString CallPage::detailsText() const {
  return (stack_->currentWidget() == failure_ ? failure_ : details_)->toPlainText();
}

}  // namespace peat::views
