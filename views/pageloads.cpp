// SPDX-License-Identifier: MIT
#include "views/pageloads.h"

#include <QStringList>

#include <algorithm>


namespace peat::views {

namespace {

// The call's op and parameters as its run stored them (else as the recorded call did), and the
// recorded call's tensors: a playback stores only outputs, its inputs are the source run's.
CallOp callOp(const store::SessionReader& reader, const store::SessionSummary& summary, const analyzer::CallView& view) {
  CallOp op;
  std::string source;
  for (const store::RunInfo& r : summary.runs)
    if (r.name == view.run) {
      const auto it = r.attributes.find("source_run");
      if (it != r.attributes.end()) source = it->second;
    }
  const store::CallInfo* info = findCallInfo(summary, view.run, view.call);
  const store::CallInfo* recorded = source.empty() ? nullptr : findCallInfo(summary, source, view.call);
  if (!info) info = recorded;
  if (info) {
    op.description = store::describeCall(info->id.op, info->params);
    op.phase = store::phaseName(info->id.phase);
  }
  // the same call only (a run recorded with other ops may hold another call at that path)
  if (recorded && info && recorded->id.op == info->id.op && recorded->id.layer == info->id.layer) {
    try {
      op.recorded = recorded->tensors.empty() ? reader.callTensors(source, view.call) : recorded->tensors;
      op.recordedRun = source;
    } catch (const std::exception&) {
      op.recorded.clear();  // the page shows the call without them
    }
  }
  return op;
}
}  // namespace

SelectedCalls loadSelectedCalls(const store::SessionReader& reader, const store::SessionSummary& summary,
                                const std::vector<CallRequest>& requests) {
  SelectedCalls out;
  for (const CallRequest& r : requests) {
    try {
      out.calls.push_back(analyzer::loadCallView(reader, summary, r.run, r.call));
      out.ops.push_back(callOp(reader, summary, out.calls.back()));
    } catch (const std::exception& e) {
      if (out.missing.isEmpty()) out.missing = r.title + QStringLiteral(": ") + QString::fromStdString(e.what());
    }
  }
  if (!out.calls.empty()) {
    out.verdictRun = out.calls.front().analysisRun;
    out.verdicts = reader.verdicts(out.verdictRun);
  }
  return out;
}

QString tensorListText(const std::vector<store::TensorInfo>& tensors) {
  QStringList lines;
  for (const store::TensorInfo& t : tensors) {
    QStringList dims;
    for (uint64_t d : t.shape) dims << QString::number(d);
    lines << QString::fromStdString(t.name) + QLatin1Char(' ') + QString::fromStdString(t.dtype) + QLatin1Char('[') +
                 dims.join(QLatin1Char('x')) + QLatin1Char(']');
  }
  return lines.join(QLatin1Char('\n'));
}

}  // namespace peat::views
