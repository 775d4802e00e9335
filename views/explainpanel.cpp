// SPDX-License-Identifier: MIT
#include "views/explainpanel.h"

#include "core/detector/detector.h"
#include "views/palette.h"

namespace peat::views {

ExplainPanel::ExplainPanel(QWidget* parent) : QTextBrowser(parent) {
  setOpenLinks(false);
  connect(this, &QTextBrowser::anchorClicked, this, [this] { showOverview(); });  // "All verdicts"
  showOverview();
}

void ExplainPanel::showOverview() {
  QString html = tr("<h3>Reading the workbench</h3>"
                    "<p>Select a <b>call</b> of an analysed playback run to see how its output differs from the golden "
                    "kernel: the histogram of log2 |error| (or ULPs) and the bit positions that differ. Ctrl+click more "
                    "calls to overlay them. A <b>verdict</b> names the error model the difference matches:</p><dl>");
  for (const std::string& v : detector::verdictNames())
    html += QStringLiteral("<dt><b>%1</b></dt><dd>%2</dd>").arg(QString::fromStdString(v),
                                                                QString::fromStdString(detector::verdictExplanation(v)).toHtmlEscaped());
  html += tr("</dl><p>Select a <b>SAVE</b> result to see which bits of which tensors need protection, and a SAVE "
             "campaign for accuracy under bit flips. The exact rules are in docs/error-models.md.</p>");
  setHtml(html);
}

void ExplainPanel::showVerdict(const QString& verdict) {
  if (verdict.isEmpty()) {  // a call without a verdict: no other call's stays up
    showOverview();
    return;
  }
  const QString text = QString::fromStdString(detector::verdictExplanation(verdict.toStdString()));
  if (text.isEmpty()) return;
  setHtml(tr("<h3>%1</h3><p>%2</p><p><a href=\"#all\">All verdicts</a> are listed with their exact rules in "
                       "docs/error-models.md.</p>").arg(verdict.toHtmlEscaped(), text.toHtmlEscaped()));
}

void ExplainPanel::showSave() {
  setHtml(tr(
      "<h3>SAVE's bit classes</h3>"
      "<p>The range analysis bounds every value of every tensor for every input in the declared pixel box. From "
      "those ranges each bit of a value falls in one class:</p><dl>"
      "<dt><b style=\"color:%1\">robust</b></dt><dd>a flip moves the value by less than tau (1e-5 by default; "
      "with a relative tolerance, by less than tau + rtol |value|; under the output criterion, it cannot move any logit "
      "by more than epsilon), or the next ReLU hides it: harmless.</dd>"
      "<dt><b style=\"color:%2\">ranging</b></dt><dd>every value of the range shares the bit (the sign, the top "
      "exponent bits): a flip leaves the range and the cheap range check catches it.</dd>"
      "<dt><b style=\"color:%3\">vulnerable</b></dt><dd>neither: a flip can silently change the result. A value "
      "with a vulnerable bit is <i>type 2</i> and is verified by recomputation (or ABFT, or the mixed-precision check).</dd></dl>"
      "<p>The tiles whose type-2 values would cost the most to recompute per byte go to the small reliable memory "
      "(framed in the tile map); the rest stays in unreliable memory, checked after each layer, and only the output "
      "channels that hold type-2 values there are recomputed. On a detection, inference restarts from the "
      "interrupted layer (only the channels whose weights changed, when the weights alone failed).</p>")
              .arg(palette::bitClassText(0), palette::bitClassText(1), palette::bitClassText(2)));
}

}  // namespace peat::views
