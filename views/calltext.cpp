// SPDX-License-Identifier: MIT
#include "views/calltext.h"

#include <QObject>
#include <QStringList>

namespace peat::views {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

QString tensorLine(const store::TensorInfo& t) {
  QStringList dims;
  for (uint64_t d : t.shape) dims << QString::number(d);
  return qs(t.name) + QLatin1Char(' ') + qs(t.dtype) + QLatin1Char('[') + dims.join(QLatin1Char('x')) + QLatin1Char(']');
}

bool isInput(const store::TensorInfo& t) { return t.name.rfind("input_", 0) == 0; }

// "1 (with gamma, default)", "1e-05 (default)", "0.1"
QString parameterValue(const store::CallParameter& p) {
  QStringList notes;
  if (!p.meaning.empty()) notes << qs(p.meaning);
  if (p.byDefault) notes << QStringLiteral("default");
  return notes.isEmpty() ? qs(p.text) : qs(p.text) + QStringLiteral(" (") + notes.join(QStringLiteral(", ")) + QLatin1Char(')');
}

const store::CallInput* inputOf(const store::CallDescription& d, const std::string& tensor) {
  const std::string role = d.roleOf(tensor);
  for (const store::CallInput& in : d.inputs)
    if (!role.empty() && in.name == role) return &in;
  return nullptr;
}

}  // namespace

const store::CallInfo* findCallInfo(const store::SessionSummary& summary, const std::string& run, const std::string& path) {
  for (const store::RunInfo& r : summary.runs) {
    if (r.name != run) continue;
    for (const store::IterationInfo& it : r.iterations)
      for (const store::CallInfo& c : it.calls)
        if (c.path == path) return &c;
  }
  return nullptr;
}

QString callDetailText(const store::CallDescription& d, const std::string& phase) {
  QString text = qs(d.kind(phase));
  for (const store::CallParameter& p : d.parameters) {
    if (p.byDefault || p.geometry) continue;  // the tooltip and the page have them
    text += QStringLiteral(", ") + qs(p.name) + QLatin1Char(' ') + qs(p.text);
    if (!p.meaning.empty()) text += QStringLiteral(" (") + qs(p.meaning) + QLatin1Char(')');
  }
  return text;
}

QString namedTensorText(const std::vector<store::TensorInfo>& tensors, const store::CallDescription& d) {
  QStringList lines;
  for (const store::TensorInfo& t : tensors) {
    const std::string role = d.roleOf(t.name);
    QString line = role.empty() ? tensorLine(t) : qs(role) + QStringLiteral(": ") + tensorLine(t);
    if (t.name == "output" && d.knownVariant && !d.output.empty()) line += QStringLiteral(": ") + qs(d.output);
    lines << line;
  }
  return lines.join(QLatin1Char('\n'));
}

QString callToolTip(const store::CallDescription& d, const std::vector<store::TensorInfo>& tensors) {
  QStringList lines{qs(d.text())};
  QStringList parameters;
  for (const store::CallParameter& p : d.parameters) parameters << qs(p.name) + QLatin1Char(' ') + parameterValue(p);
  if (!parameters.isEmpty()) lines << parameters.join(QStringLiteral(", "));
  const QStringList named = namedTensorText(tensors, d).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
  for (std::size_t i = 0; i < tensors.size() && i < std::size_t(named.size()); ++i) {
    const store::CallInput* in = inputOf(d, tensors[i].name);
    lines << (in ? named[qsizetype(i)] + QStringLiteral(" (") + qs(in->meaning) + QLatin1Char(')') : named[qsizetype(i)]);
  }
  return lines.join(QLatin1Char('\n'));
}

QString callSectionHtml(const CallOp& op, const std::vector<store::TensorInfo>& tensors) {
  const store::CallDescription& d = op.description;
  // one paragraph (the error statistics and the verdict stay near the top): kind, what it
  // computes, the stored parameters, then those the op took by default
  QString head = QStringLiteral("<b>%1</b>").arg(qs(d.kind(op.phase)).toHtmlEscaped());
  if (d.text() != d.op) head += QStringLiteral(": ") + qs(d.text()).toHtmlEscaped();
  QStringList stored, defaults;
  for (const store::CallParameter& p : d.parameters) {
    const QString text = qs(p.name) + QLatin1Char(' ') + qs(p.text) +
                         (p.meaning.empty() ? QString() : QStringLiteral(" (") + qs(p.meaning) + QLatin1Char(')'));
    (p.byDefault ? defaults : stored) << text.toHtmlEscaped();
  }
  QString parameters = stored.join(QStringLiteral(", "));
  if (!defaults.isEmpty())
    parameters += (parameters.isEmpty() ? QString() : QStringLiteral("; ")) +
                  QObject::tr("defaults: %1").arg(defaults.join(QStringLiteral(", ")));
  QString html = QStringLiteral("<h3>%1</h3><p>%2%3</p>")
                     .arg(QObject::tr("Call"), head, parameters.isEmpty() ? QString() : QStringLiteral("<br>") + parameters);
  // a playback keeps only its outputs: the inputs are those of the call it replayed
  bool ownInputs = false;
  for (const store::TensorInfo& t : tensors) ownInputs = ownInputs || isInput(t);
  std::vector<store::TensorInfo> shown;
  if (!ownInputs)
    for (const store::TensorInfo& t : op.recorded)
      if (isInput(t)) shown.push_back(t);
  const bool borrowed = !shown.empty();
  shown.insert(shown.end(), tensors.begin(), tensors.end());
  // each tensor by its role (bold) beside its shape; by its dataset where no role is known (the
  // tree's tooltip pairs roles and datasets)
  QString rows;
  for (const store::TensorInfo& t : shown) {
    std::string role = d.roleOf(t.name);
    if (t.name == "output" && d.knownVariant) role = d.output;
    const QString name = role.empty() ? qs(t.name).toHtmlEscaped() : QStringLiteral("<b>%1</b>").arg(qs(role).toHtmlEscaped());
    rows += QStringLiteral("<tr><td class=key>%1</td><td>%2</td></tr>").arg(name, tensorLine(t).section(QLatin1Char(' '), 1).toHtmlEscaped());
  }
  if (!rows.isEmpty()) html += QStringLiteral("<table cellspacing=2>") + rows + QStringLiteral("</table>");
  if (borrowed)
    html += QStringLiteral("<p><small>%1</small></p>")
                .arg(QObject::tr("Inputs as run %1 recorded them").arg(qs(op.recordedRun).toHtmlEscaped()));
  return html;
}

}  // namespace peat::views
