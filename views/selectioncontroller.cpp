// SPDX-License-Identifier: MIT
#include "views/selectioncontroller.h"

#include <QDockWidget>
#include <QTabWidget>
#include <QTreeView>

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "core/analysis/call_view.h"
#include "core/analysis/numerics_record.h"
#include "core/modelgraph/model_graph.h"
#include "core/save/analysis_record.h"
#include "core/save/campaign_record.h"
#include "core/store/curves.h"
#include "views/callpage.h"
#include "views/curvepanel.h"
#include "views/errorplotpanel.h"
#include "views/explainpanel.h"
#include "views/failedcalls.h"
#include "views/graphpanel.h"
#include "views/jobtracker.h"
#include "views/numericspanel.h"
#include "views/overviewpanel.h"
#include "views/pageloads.h"
#include "views/paircontroller.h"
#include "views/savepanel.h"
#include "views/sessiontreemodel.h"
#include "views/verdictcontroller.h"

namespace peat::views {

namespace {
bool hasTable(const store::RunInfo& r, const char* name) {
  return std::find(r.tables.begin(), r.tables.end(), name) != r.tables.end();
}

void raiseDockOf(QWidget* content) {  // the dock holding it, through a scroll area if there is one
  for (QWidget* w = content->parentWidget(); w; w = w->parentWidget())
    if (auto* d = qobject_cast<QDockWidget*>(w)) {
      d->raise();
      return;
    }
}
}  // namespace

SelectionController::SelectionController(const SessionState* session, SessionTreeModel* model, QTreeView* tree,
                                         const Pages& pages, VerdictController* verdicts, PairController* pairs,
                                         QObject* parent)
    : QObject(parent),
      session_(session),
      model_(model),
      tree_(tree),
      pages_(pages),
      verdicts_(verdicts),
      pairs_(pairs),
      tellJobs_(new JobTracker(this)) {
  // what the item's pages read (each in its own job), once it arrives
  connect(pages_.curves, &CurvePanel::curvesShown, this, [this](bool trained) {
    if (trained) pages_.central->setCurrentWidget(pages_.curves);
    emit pageShown();
  });
  connect(pages_.save, &SavePanel::analysisShown, this, [this] {
    shownAnalysis_ = loadingAnalysis_;
    showSaveItem(pendingLayer_);
    emit pageShown();
  });
  connect(pages_.save, &SavePanel::campaignShown, this, [this] {
    pages_.save->setCurrentTab(SavePanel::CampaignTab);
    pages_.central->setCurrentWidget(pages_.save);
    pages_.explain->showSave();
    emit pageShown();
  });
  connect(verdicts_, &VerdictController::loaded, this, &SelectionController::pageShown);
  connect(pages_.curves, &CurvePanel::readFailed, this, &SelectionController::itemReadFailed);
  connect(pages_.save, &SavePanel::readFailed, this, [this](const QString& why) {
    shownAnalysis_.clear();  // the page says why instead of any analysis
    itemReadFailed(why);
  });
  connect(verdicts_, &VerdictController::readFailed, this, &SelectionController::itemReadFailed);
  connect(pages_.call, &CallPage::callsRead, this, &SelectionController::applySelectedCalls);
  connect(pages_.call, &CallPage::failedCallRead, this, &SelectionController::applyFailedCall);
  connect(pages_.call, &CallPage::readFailed, this, [this](const QString& why) {
    pages_.call->showMessage(tr("The call could not be read: %1").arg(why));
    pages_.dock->showMessage(tr("The call could not be read: %1").arg(why));
    emit errorRaised(why);
    emit pageShown();
  });
}

void SelectionController::itemReadFailed(const QString& why) {  // the page says why already
  emit errorRaised(why);
  emit pageShown();
}

void SelectionController::reset(const QString& why, bool keepLive, const QString& saveWhy) {
  tellJobs_->cancel();  // the pages' own reads: by their messages below, or dropped
  pages_.curves->dropLoad();
  pages_.save->dropLoads();
  pages_.numerics->dropLoad();
  pairs_->reset();  // a pair read from the old session (a dropped pair goes too)
  shownAnalysis_.clear();
  verdicts_->clear();
  pages_.call->showMessage(why);
  pages_.dock->showMessage(why);
  pages_.graph->showMessage(why);
  if (keepLive) return;
  pages_.curves->showMessage(why);
  pages_.save->showMessage(saveWhy.isEmpty() ? why : saveWhy);
  pages_.central->setCurrentWidget(pages_.overview);
}

bool SelectionController::loading() const {
  // the SAVE and numerics pages' reads are counted by the window, which asks them
  return pages_.call->loading() || pages_.curves->loading() || verdicts_->loading() || tellJobs_->pending();
}

// A run's or an iteration's page: each page reads its part in its own job (the verdict table its
// analysis's verdicts, the curves page the run's curves, the numerics and SAVE pages theirs); what
// to read is decided from the summary in memory, so nothing is read here.
void SelectionController::showItem(const QModelIndex& current) {
  // the previous item's reads still in flight are not shown (the call page's: by its own request)
  pages_.curves->dropLoad();
  pages_.save->dropLoads();
  pages_.numerics->dropLoad();
  verdicts_->dropLoad();
  startItemLoads(current);
  emit pageShown();  // a wait for the pages asks them again (nothing may be left to read)
}

void SelectionController::startItemLoads(const QModelIndex& current) {
  if (!session_->reader || !current.isValid()) return;
  showGraphOf(current);
  using Kind = SessionTreeModel::NodeKind;
  const auto kind = Kind(current.data(SessionTreeModel::KindRole).toInt());
  const std::string key = current.data(SessionTreeModel::KeyRole).toString().toStdString();
  if (key.empty() || kind == Kind::Call || kind == Kind::SaveGroup) return;
  std::string id = key;
  QString layer;
  if (kind == Kind::SaveLayer) {
    id = current.parent().data(SessionTreeModel::KeyRole).toString().toStdString();
    layer = current.sibling(current.row(), SessionTreeModel::NameColumn).data().toString();
  }
  const bool save = kind == Kind::SaveResult || kind == Kind::SaveLayer;
  if (save && id == shownAnalysis_) {  // that analysis is on its page already
    showSaveItem(layer);
    return;
  }
  const QString name = current.data().toString();
  std::shared_ptr<const store::SessionReader> reader = session_->reader;
  if (save) {
    shownAnalysis_.clear();
    loadingAnalysis_ = id;
    pendingLayer_ = layer;
    pages_.save->loadAnalysis(name, [reader, id] { return save::loadAnalysis(*reader, id); });
    return;
  }
  const std::shared_ptr<const store::SessionSummary> summary = session_->summary;
  const store::RunInfo* run = nullptr;
  for (const store::RunInfo& r : summary->runs)
    if (r.name == id) run = &r;
  if (!run) {
    emit errorRaised(tr("The session has no run %1").arg(QString::fromStdString(id)));
    return;
  }
  // the verdicts of the run's newest analysis (or of the run itself, when it is one)
  const std::string analysis = run->spec.kind == "analysis" ? id : analyzer::analysisRunOf(*summary, id);
  verdicts_->load(QString::fromStdString(analysis), [reader, analysis] { return reader->verdicts(analysis); });
  if (kind != Kind::Run) return;
  const QString about = QString::fromStdString(analyzer::describeRun(*run));
  if (hasTable(*run, "curve")) {
    pages_.curves->load(name, [reader, id, about] {
      RunCurves c;
      c.about = about;
      c.curve = store::loadTrainingCurve(*reader, id);
      c.golden = c.curve->goldenRun.empty() ? store::TrainingCurve{} : store::loadTrainingCurve(*reader, c.curve->goldenRun);
      return c;
    });
  } else {
    pages_.curves->showMessage(tr("%1: no training curve (profile and runtime-FI runs train)").arg(about));
  }
  if (hasTable(*run, "numerics"))
    pages_.numerics->loadRun(
        QString::fromStdString(id), [reader, id] { return analyzer::numericsQuantities(reader->table(id, "numerics")); },
        [reader, id](const std::string& quantity) { return analyzer::loadNumericsGrid(*reader, id, quantity); });
  if (run->spec.kind == "save_campaign" && hasTable(*run, "points"))
    pages_.save->loadCampaign(name, [reader, id] { return save::loadCampaign(*reader, id); });
}

void SelectionController::showGraphOf(const QModelIndex& current) {
  using Kind = SessionTreeModel::NodeKind;
  const auto kind = Kind(current.data(SessionTreeModel::KindRole).toInt());
  const QString key = current.data(SessionTreeModel::KeyRole).toString();
  auto reader = session_->reader;
  auto summary = session_->summary;
  if (key.isEmpty() || kind == Kind::SaveGroup) return;
  if (kind == Kind::SaveResult || kind == Kind::SaveLayer) {
    const QString id = kind == Kind::SaveLayer ? current.parent().data(SessionTreeModel::KeyRole).toString() : key;
    pages_.graph->show(QStringLiteral("save:") + id, [reader, id = id.toStdString()] {
      return modelgraph::saveAnalysisGraph(*reader, id);
    });
    pages_.graph->highlightName(kind == Kind::SaveLayer ? current.siblingAtColumn(SessionTreeModel::NameColumn).data().toString()
                                                        : QString());
    return;
  }
  pages_.graph->show(QStringLiteral("run:") + key, [reader, summary, run = key.toStdString()] {
    return modelgraph::runGraph(*reader, *summary, run);
  });
  if (kind == Kind::Call) pages_.graph->highlightCall(current.data(SessionTreeModel::PathRole).toString());
  else pages_.graph->highlightName(QString());
}

void SelectionController::selectGraphNode(const modelgraph::ModelGraph& graph, int node) {
  const modelgraph::GraphNode& n = graph.nodes[std::size_t(node)];
  if (graph.overlay == "save") {
    const QModelIndex layer = model_->findSaveLayer(graph.overlayRun, QString::fromStdString(n.name));
    if (!layer.isValid()) {
      emit errorRaised(tr("SAVE analysis %1 stored no layer %2 (the input, or an op it does not record)")
                           .arg(QString::fromStdString(graph.overlayRun), QString::fromStdString(n.name)));
      return;
    }
    tree_->scrollTo(layer);
    tree_->selectionModel()->setCurrentIndex(layer, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    return;
  }
  // the op's calls, the one with its most serious verdict first (the dock overlays the first six)
  std::vector<std::string> paths;
  if (!n.worstCall.empty()) paths.push_back(n.worstCall);
  for (const std::string& p : n.calls)
    if (p != n.worstCall) paths.push_back(p);
  const std::vector<QModelIndex> nodes = model_->findCalls(graph.callRun, paths);
  if (nodes.empty()) {
    emit errorRaised(tr("Run %1 holds no call of %2").arg(QString::fromStdString(graph.callRun), QString::fromStdString(n.name)));
    return;
  }
  QItemSelection selection;
  for (const QModelIndex& at : nodes)
    selection.select(at.siblingAtColumn(SessionTreeModel::NameColumn), at.siblingAtColumn(SessionTreeModel::ColumnCount - 1));
  tree_->scrollTo(nodes.front());
  tree_->selectionModel()->setCurrentIndex(nodes.front(), QItemSelectionModel::NoUpdate);
  tree_->selectionModel()->select(selection, QItemSelectionModel::ClearAndSelect);
}

void SelectionController::showSaveItem(const QString& layer) {
  if (!layer.isEmpty()) {
    pages_.save->selectLayerNamed(layer);
    pages_.save->setCurrentTab(SavePanel::MapTab);
  } else {
    pages_.save->setCurrentTab(SavePanel::BitsTab);
  }
  pages_.central->setCurrentWidget(pages_.save);
  pages_.explain->showSave();
}

void SelectionController::showSelectedCalls() {
  pairs_->cancelReads();  // the statistics of a call shown before are not this one's
  using Kind = SessionTreeModel::NodeKind;
  std::vector<CallRequest> requests;
  const FailedCall* failed = nullptr;  // the first selected call the kernel failed: no output to overlay
  QString failedTitle;
  for (const QModelIndex& index : tree_->selectionModel()->selectedRows(SessionTreeModel::NameColumn)) {
    if (Kind(index.data(SessionTreeModel::KindRole).toInt()) != Kind::Call) continue;
    // a recorded call by its op and variant (its parameters are on its page); a failed one as the tree says
    const QString kind = index.data(SessionTreeModel::CallKindRole).toString();
    const QString detail = kind.isEmpty() ? index.siblingAtColumn(SessionTreeModel::DetailColumn).data().toString() : kind;
    const QString run = index.data(SessionTreeModel::KeyRole).toString();
    const QString title = tr("%1 %2 (run %3, %4)").arg(index.data().toString(), detail, run,
                                                       index.data(SessionTreeModel::PathRole).toString());
    if (const FailedCall* f = model_->failedCall(index)) {
      if (!failed) {
        failed = f;
        failedTitle = title;
      }
      continue;
    }
    requests.push_back({run.toStdString(), index.data(SessionTreeModel::PathRole).toString().toStdString(), title});
    if (requests.size() >= 6) break;  // a readable overlay
  }
  if (requests.empty() && failed && session_->reader) {
    showFailedCall(*failed, failedTitle);
    return;
  }
  if (requests.empty() || !session_->reader) {
    // no call selected (a run, an iteration, an analysis or a SAVE item): no dock keeps a call
    // shown before
    pages_.call->showMessage(tr("Select an analysed call in the session tree: its page opens here"));
    pages_.dock->showMessage(tr("No call is selected: select an analysed call in the session tree"));
    verdicts_->highlight({});
    const auto kind = Kind(tree_->currentIndex().data(SessionTreeModel::KindRole).toInt());
    if (kind != Kind::SaveResult && kind != Kind::SaveLayer && kind != Kind::SaveGroup) pages_.explain->showOverview();
    return;
  }
  const QString loading = tr("Loading %1 ...").arg(requests.front().title);
  pages_.dock->showMessage(loading);
  callRequests_ = requests;
  auto reader = session_->reader;
  auto summary = session_->summary;
  pages_.call->load(loading, [reader, summary, requests] { return loadSelectedCalls(*reader, *summary, requests); });
}

void SelectionController::applySelectedCalls(const SelectedCalls& selected) {
  const std::vector<CallRequest>& requests = callRequests_;
  if (selected.calls.empty()) {
    pages_.call->showMessage(selected.missing);
    pages_.dock->showMessage(selected.missing);
    pages_.central->setCurrentWidget(pages_.call);
    emit pageShown();
    return;
  }
  if (QString::fromStdString(selected.verdictRun) != verdicts_->shownRun())
    verdicts_->show(QString::fromStdString(selected.verdictRun), selected.verdicts);
  std::vector<analyzer::StoredCallReport> reports;
  for (const analyzer::CallView& c : selected.calls) {
    reports.push_back(c.report);
    if (c.verdict) reports.back().verdict = c.verdict->model;  // the verdict this call's analysis stored
  }
  pages_.dock->showReports(reports);
  if (reports.size() > 1) raiseDockOf(pages_.dock);  // an overlay of several calls: the dock shows it
  pages_.explain->showVerdict(QString::fromStdString(reports.front().verdict));
  verdicts_->highlight(reports);
  if (requests.size() == 1) {
    const analyzer::CallView& c = selected.calls.front();
    const store::Verdict* verdict = c.verdict ? &*c.verdict : nullptr;
    pages_.call->showCall(reports.front(), requests.front().title, selected.ops.front(), c.tensors, verdict);
    pages_.central->setCurrentWidget(pages_.call);
    if (verdict && !verdict->findings.empty()) {  // the evidence, where the plots can show it
      pages_.dock->showFinding(verdict->findings.front());
      pages_.call->plots()->showFinding(verdict->findings.front());
    }
    pairs_->requestStats(reports.front());  // the two outputs side by side, when the session holds them
  } else {
    pages_.call->showMessage(tr("%n calls selected: their errors overlay in the Error distribution dock", nullptr,
                                int(reports.size())) +
                             (selected.missing.isEmpty() ? QString() : QStringLiteral("; ") + selected.missing));
  }
  emit pageShown();
}

void SelectionController::showFailedCall(const FailedCall& failed, const QString& title) {
  pages_.dock->showMessage(tr("%1: the kernel failed this call in its kernel host, so it has no output to plot").arg(title));
  failedTitle_ = title;
  auto reader = session_->reader;
  auto summary = session_->summary;
  const QString path = session_->path;
  pages_.call->loadFailed(tr("Loading %1 ...").arg(title), [reader, summary, path, failed] {
    return loadFailedCallPage(*reader, *summary, path, failed);
  });
}

void SelectionController::applyFailedCall(const FailedCallPage& page) {
  if (!page.analysisRun.empty() && QString::fromStdString(page.analysisRun) != verdicts_->shownRun())
    verdicts_->show(QString::fromStdString(page.analysisRun), page.verdicts);
  analyzer::StoredCallReport shown;
  shown.call = page.failed.call;
  verdicts_->highlight({shown});
  pages_.call->showKernelFailure(page, failedTitle_);
  pages_.central->setCurrentWidget(pages_.call);
  if (page.verdict) pages_.explain->showVerdict(QString::fromStdString(page.verdict->model));
  emit pageShown();
}

bool SelectionController::showTellingCall() {
  if (!session_->reader) return false;
  bool any = false;
  for (const store::RunInfo& r : model_->summary().runs) any = any || (r.spec.kind == "analysis" && r.verdictCount > 0);
  if (!any) return false;
  auto reader = session_->reader;
  auto summary = session_->summary;
  tellJobs_->start<analyzer::TellingVerdict>(
      [reader, summary] { return analyzer::tellingVerdict(*reader, *summary); },
      [this](const analyzer::TellingVerdict& telling) {
        if (telling.best < 0) return;
        verdicts_->show(QString::fromStdString(telling.analysisRun), telling.verdicts);
        verdicts_->choose(telling.best);
        pages_.central->setCurrentWidget(pages_.call);
        raiseDockOf(pages_.explain);  // what the verdict means
      },
      [this](const QString& why) { emit errorRaised(why); });
  return true;
}

}  // namespace peat::views
