// SPDX-License-Identifier: MIT
#include "views/failedcalls.h"

#include <QDir>
#include <QFileInfo>
#include <QRegularExpression>
#include <QStringList>

#include <cstdio>

#include "core/analysis/session_analysis.h"
#include "core/store/h5.h"
#include "views/calltext.h"

namespace peat::views {

namespace {

QString shellQuoted(const QString& word) {
  static const QRegularExpression plain(QStringLiteral("^[A-Za-z0-9_./:=@%+,-]+$"));
  if (plain.match(word).hasMatch()) return word;
  return QLatin1Char('\'') + QString(word).replace(QLatin1Char('\''), QStringLiteral("'\\''")) + QLatin1Char('\'');
}

std::string attribute(const store::RunInfo& run, const char* key) {
  const auto it = run.attributes.find(key);
  return it == run.attributes.end() ? std::string() : it->second;
}

const store::RunInfo* findRun(const store::SessionSummary& summary, const std::string& name) {
  for (const store::RunInfo& r : summary.runs)
    if (r.name == name) return &r;
  return nullptr;
}

}  // namespace

std::vector<FailedCall> readFailedCalls(const store::SessionReader& reader, const store::SessionSummary& summary) {
  std::vector<FailedCall> out;
  for (const store::RunInfo& run : summary.runs) {
    // runtime FI records no calls to replay; a run without the attribute had no failure
    if (run.spec.kind != "playback" || attribute(run, "kernel_failures").empty()) continue;
    const std::vector<h5::Column> t = reader.table(run.name, "call_errors");
    const h5::Column *outcome = h5::findColumn(t, "outcome"), *iteration = h5::findColumn(t, "iteration"),
                     *index = h5::findColumn(t, "call_index"), *layer = h5::findColumn(t, "layer"),
                     *op = h5::findColumn(t, "op"), *phase = h5::findColumn(t, "phase");
    if (!outcome || !outcome->isText || !iteration || iteration->isText || !index || index->isText || !layer ||
        !layer->isText || !op || !op->isText)
      continue;  // a table written before outcomes were recorded
    for (std::size_t r = 0; r < outcome->size(); ++r) {
      if (outcome->text[r] == "ok" || outcome->text[r].empty()) continue;
      FailedCall f;
      f.run = run.name;
      f.iteration = int64_t(iteration->numbers[r]);
      f.callIndex = int64_t(index->numbers[r]);
      char path[64];
      std::snprintf(path, sizeof path, "iterations/%06lld/calls/%06lld", (long long)f.iteration, (long long)f.callIndex);
      f.call = path;
      f.layer = layer->text[r];
      f.op = op->text[r];
      if (phase && phase->isText) f.phase = phase->text[r];
      f.outcome = outcome->text[r];
      out.push_back(std::move(f));
    }
  }
  return out;
}

QString replayCommand(const QString& sessionPath, const std::string& sourceRun, const std::string& kernel,
                      const std::string& call) {
  const QFileInfo session(sessionPath);
  const QString replay = session.absoluteDir().filePath(session.completeBaseName() + QStringLiteral("-replay.h5"));
  QStringList words{QStringLiteral("peat"), QStringLiteral("playback"), QStringLiteral("-s"), session.absoluteFilePath()};
  if (!sourceRun.empty()) words << QStringLiteral("--run") << QString::fromStdString(sourceRun);
  words << QStringLiteral("-k") << QString::fromStdString(kernel) << QStringLiteral("--call") << QString::fromStdString(call)
        << QStringLiteral("--out") << replay;
  for (QString& w : words) w = shellQuoted(w);
  return words.join(QLatin1Char(' '));
}

FailedCallPage loadFailedCallPage(const store::SessionReader& reader, const store::SessionSummary& summary,
                                  const QString& sessionPath, const FailedCall& failed) {
  FailedCallPage page;
  page.failed = failed;
  const store::RunInfo* run = findRun(summary, failed.run);
  if (!run) throw std::runtime_error("the session has no run " + failed.run);
  page.sourceRun = attribute(*run, "source_run");
  page.kernel = run->spec.kernel.empty() ? attribute(*run, "kernel") : run->spec.kernel;
  if (findRun(summary, page.sourceRun)) page.tensors = reader.callTensors(page.sourceRun, failed.call);
  const store::CallInfo* recorded = findCallInfo(summary, page.sourceRun, failed.call);
  page.description = store::describeCall(failed.op, recorded ? recorded->params : std::map<std::string, int64_t>{});
  // the run keeps the line of its first failure ("it 0 call 4 fc3 linear forward: plugin ... crashed ...")
  const std::string first = attribute(*run, "first_kernel_failure");
  const std::string mine = "it " + std::to_string(failed.iteration) + " call " + std::to_string(failed.callIndex) + " ";
  if (first.rfind(mine, 0) == 0) page.failure = first;
  else page.firstFailure = first;
  page.analysisRun = analyzer::analysisRunOf(summary, failed.run);
  if (!page.analysisRun.empty()) page.verdicts = reader.verdicts(page.analysisRun);
  for (const store::Verdict& v : page.verdicts)
    if (v.call == failed.call) {
      page.verdict = v;
      break;
    }
  page.replay = replayCommand(sessionPath, page.sourceRun, page.kernel, failed.call);
  if (page.analysisRun.empty())
    page.analyze = QStringLiteral("peat analyze --session %1 --run %2")
                       .arg(shellQuoted(QFileInfo(sessionPath).absoluteFilePath()), shellQuoted(QString::fromStdString(failed.run)));
  return page;
}

}  // namespace peat::views
