// SPDX-License-Identifier: MIT
#include "views/sessiontreemodel.h"

#include <QStringList>

#include "views/calltext.h"

#include <QBrush>
#include <QHash>
#include <QColor>

#include <algorithm>

namespace peat::views {

struct SessionTreeModel::Node {
  NodeKind kind;
  QString name, detail, tooltip, key, path;
  QString callKind;                       // a recorded call's op and variant
  const store::CallInfo* call = nullptr;  // a recorded call, in summary_
  bool incomplete = false;
  int failed = -1;  // a failed call: its index in failed_
  int64_t order = 0;  // a call's index in its iteration (failed calls are placed by it)
  Node* parent = nullptr;
  int row = 0;
  std::vector<std::unique_ptr<Node>> children;

  Node* add(NodeKind k, QString n, QString d, QString tip = {}) {
    auto child = std::make_unique<Node>();
    child->kind = k;
    child->name = std::move(n);
    child->detail = std::move(d);
    child->tooltip = std::move(tip);
    child->parent = this;
    child->row = int(children.size());
    children.push_back(std::move(child));
    return children.back().get();
  }
};

namespace {
QString qs(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

// The run's failed calls among its calls, in call order (an iteration where every call failed
// gets its node); each iteration says how many of its calls failed.
void SessionTreeModel::addFailedCalls(Node* node, const store::RunInfo& run) {
  for (std::size_t f = 0; f < failed_.size(); ++f) {
    const FailedCall& fc = failed_[f];
    if (fc.run != run.name) continue;
    const QString iterationName = tr("iteration %1").arg(fc.iteration);
    Node* it = nullptr;
    for (const auto& c : node->children)
      if (c->name == iterationName) it = c.get();
    if (!it) it = node->add(NodeKind::Iteration, iterationName, QString());
    Node* call = it->add(NodeKind::Call, tr("#%1 %2").arg(fc.callIndex).arg(qs(fc.layer)),
                         tr("%1 %2: kernel %3").arg(qs(fc.op), qs(fc.phase), qs(fc.outcome)),
                         tr("The kernel failed this call in its kernel host (%1): it has no output. Select it for "
                            "its shapes and the command that replays it.").arg(qs(fc.outcome)));
    call->path = qs(fc.call);
    call->order = fc.callIndex;
    call->failed = int(f);
  }
  for (const auto& it : node->children) {
    auto& calls = it->children;
    const auto failedHere = std::count_if(calls.begin(), calls.end(), [](const auto& c) { return c->failed >= 0; });
    if (failedHere == 0) continue;
    std::stable_sort(calls.begin(), calls.end(), [](const auto& a, const auto& b) { return a->order < b->order; });
    for (std::size_t i = 0; i < calls.size(); ++i) calls[i]->row = int(i);
    it->detail = tr("%n call(s), %1 failed", nullptr, int(calls.size())).arg(failedHere);
  }
  const auto attribute = [&](const char* key) {
    const auto at = run.attributes.find(key);
    return at == run.attributes.end() ? QString() : qs(at->second);
  };
  if (!attribute("kernel_failures").isEmpty())
    node->tooltip += tr("\nThe kernel failed %1 in its kernel host; the first: %2")
                         .arg(attribute("kernel_failures"), attribute("first_kernel_failure"));
}

SessionTreeModel::SessionTreeModel(QObject* parent)
    : QAbstractItemModel(parent), root_(std::make_unique<Node>()), tensorReads_(new JobTracker(this)) {}
SessionTreeModel::~SessionTreeModel() = default;

void SessionTreeModel::setSummary(const store::SessionSummary& summary, std::vector<FailedCall> failed) {
  tensorReads_->cancel();  // a read in flight would fill a node this reset frees
  reading_ = nullptr;
  beginResetModel();
  summary_ = summary;
  failed_ = std::move(failed);
  rebuild();
  endResetModel();
}

void SessionTreeModel::clear() { setSummary({}); }

void SessionTreeModel::rebuild() {
  root_ = std::make_unique<Node>();
  for (const store::RunInfo& run : summary_.runs) {
    Node* r = root_->add(NodeKind::Run, qs(run.name),
                         tr("%1, kernel %2, %3").arg(qs(run.spec.kind), qs(run.spec.kernel), qs(run.status)),
                         tr("%1 of %2 iterations complete, %3 calls, %4 checkpoints, %5 reports, %6 verdicts")
                             .arg(run.completeIterations())
                             .arg(run.iterations.size())
                             .arg(run.callCount())
                             .arg(run.checkpoints.size())
                             .arg(run.reports.size())
                             .arg(run.verdictCount));
    for (const store::IterationInfo& it : run.iterations) {
      Node* i = r->add(NodeKind::Iteration, tr("iteration %1").arg(it.iteration),
                       it.complete ? tr("%n call(s)", nullptr, int(it.calls.size())) : tr("incomplete"),
                       it.complete ? QString() : tr("The writer stopped during this iteration; its data is partial."));
      i->incomplete = !it.complete;
      for (const store::CallInfo& c : it.calls) {
        const store::CallDescription d = store::describeCall(c.id.op, c.params);
        const std::string phase = store::phaseName(c.id.phase);
        // the tooltip (what the call computes, its tensors named) is written when first asked for
        Node* call = i->add(NodeKind::Call, tr("#%1 %2").arg(c.id.callIndex).arg(qs(c.id.layer)), callDetailText(d, phase));
        call->callKind = qs(d.kind(phase));
        call->call = &c;
        call->path = qs(c.path);
        call->order = c.id.callIndex;
      }
    }
    addFailedCalls(r, run);
  }
  if (!summary_.saveResults.empty()) {
    // A result "<id>.<layer>" is a layer of the result "<id>": listed under it, as are the layers a
    // packed record "<id>.packed-layers" holds (the record itself is no layer).
    const auto& packed = summary_.packedSaveLayers;
    std::vector<std::string> tops;
    for (const std::string& id : summary_.saveResults) {
      bool child = packed.count(id) > 0;
      for (const std::string& other : summary_.saveResults)
        child = child || (id.size() > other.size() + 1 && id.compare(0, other.size(), other) == 0 && id[other.size()] == '.');
      if (!child) tops.push_back(id);
    }
    Node* s = root_->add(NodeKind::SaveGroup, tr("SAVE"), tr("%n result(s)", nullptr, int(tops.size())));
    for (const std::string& top : tops) {
      const std::vector<std::string> layers = summary_.saveLayersOf(top);
      Node* t = s->add(NodeKind::SaveResult, qs(top), layers.empty() ? QString() : tr("%n layer(s)", nullptr, int(layers.size())));
      t->key = qs(top);
      for (const std::string& layer : layers) {
        Node* l = t->add(NodeKind::SaveLayer, qs(layer), QString());
        l->key = qs(top + "." + layer);
      }
    }
  }
  // Runs and everything under them carry the run's name.
  for (const auto& run : root_->children) {
    if (run->kind != NodeKind::Run) continue;
    std::vector<Node*> stack{run.get()};
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      n->key = run->name;
      for (const auto& c : n->children) stack.push_back(c.get());
    }
  }
}

SessionTreeModel::Node* SessionTreeModel::nodeOf(const QModelIndex& index) const {
  return index.isValid() ? static_cast<Node*>(index.internalPointer()) : root_.get();
}

QModelIndex SessionTreeModel::index(int row, int column, const QModelIndex& parent) const {
  if (column < 0 || column >= ColumnCount || row < 0) return {};
  if (parent.isValid() && parent.column() != 0) return {};
  const Node* p = nodeOf(parent);
  if (row >= int(p->children.size())) return {};
  return createIndex(row, column, p->children[std::size_t(row)].get());
}

QModelIndex SessionTreeModel::parent(const QModelIndex& child) const {
  if (!child.isValid()) return {};
  const Node* n = nodeOf(child);
  if (!n->parent || n->parent == root_.get()) return {};
  return createIndex(n->parent->row, 0, n->parent);
}

int SessionTreeModel::rowCount(const QModelIndex& parent) const {
  if (parent.isValid() && parent.column() != 0) return 0;
  return int(nodeOf(parent)->children.size());
}

int SessionTreeModel::columnCount(const QModelIndex&) const { return ColumnCount; }

QVariant SessionTreeModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid()) return {};
  const Node* n = nodeOf(index);
  switch (role) {
    case Qt::DisplayRole: return index.column() == NameColumn ? n->name : n->detail;
    case Qt::ToolTipRole:
      if (n->tooltip.isEmpty() && n->call) return callToolTipOf(const_cast<Node*>(n));
      // a run's or a result's Details, cut by a narrow dock, whole on hovering (a call's tooltip holds them)
      if (index.column() == DetailColumn && !n->call && !n->detail.isEmpty())
        return n->tooltip.isEmpty() ? n->detail : n->detail + QLatin1Char('\n') + n->tooltip;
      return n->tooltip.isEmpty() ? QVariant() : QVariant(n->tooltip);
    case KindRole: return int(n->kind);
    case KeyRole: return n->key;
    case PathRole: return n->path;
    case OutcomeRole: return n->failed >= 0 ? qs(failed_[std::size_t(n->failed)].outcome) : QString();
    case CallKindRole: return n->callKind;
    case Qt::ForegroundRole:
      if (n->incomplete || n->failed >= 0) return QBrush(QColor(0xb0, 0x40, 0x20));
      return {};
    default: return {};
  }
}

// A call's tooltip: whole when the summary holds its tensors; else what the summary says, its
// tensors read in a worker (not on the GUI thread as the pointer moves over a large session).
QString SessionTreeModel::callToolTipOf(Node* n) const {
  const store::CallInfo& c = *n->call;
  const store::CallDescription description = store::describeCall(c.id.op, c.params);
  if (!c.tensors.empty() || !lister_) {
    n->tooltip = callToolTip(description, c.tensors);
    return n->tooltip;
  }
  const QString partial = callToolTip(description, {});
  if (reading_ != n) {
    auto* self = const_cast<SessionTreeModel*>(this);
    self->reading_ = n;
    const QModelIndex index = createIndex(n->row, 0, n);
    const auto finish = [self, n, index](QString tooltip) {
      n->tooltip = std::move(tooltip);
      self->reading_ = nullptr;
      emit self->dataChanged(index, index, {Qt::ToolTipRole});
      emit self->toolTipRead(index);
    };
    try {
      tensorReads_->start<std::vector<store::TensorInfo>>(
          lister_(n->key.toStdString(), n->path.toStdString()),
          [finish, description](const std::vector<store::TensorInfo>& tensors) { finish(callToolTip(description, tensors)); },
          [finish, partial](const QString& message) {
            finish(partial + tr("\nIts tensors could not be read: %1").arg(message));
          });
    } catch (const std::exception& e) {
      self->reading_ = nullptr;
      return partial + tr("\nIts tensors could not be read: %1").arg(QString::fromStdString(e.what()));
    }
  }
  return partial + tr("\nReading its tensors...");
}

QVariant SessionTreeModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  return section == NameColumn ? tr("Item") : tr("Details");
}

const FailedCall* SessionTreeModel::failedCall(const QModelIndex& index) const {
  const Node* n = index.isValid() ? nodeOf(index) : nullptr;
  return n && n->failed >= 0 ? &failed_[std::size_t(n->failed)] : nullptr;
}

QModelIndex SessionTreeModel::findCall(const std::string& run, const QString& path) const {
  const std::vector<QModelIndex> found = findCalls(run, {path.toStdString()});
  return found.empty() ? QModelIndex() : found.front();
}

std::vector<QModelIndex> SessionTreeModel::findCalls(const std::string& run, const std::vector<std::string>& paths) const {
  QHash<QString, QModelIndex> byPath;
  for (int i = 0; i < rowCount(); ++i) {
    const QModelIndex top = index(i, 0);
    if (top.data().toString().toStdString() != run) continue;
    for (int it = 0; it < rowCount(top); ++it) {
      const QModelIndex iteration = index(it, 0, top);
      for (int c = 0; c < rowCount(iteration); ++c) {
        const QModelIndex node = index(c, 0, iteration);
        byPath.insert(node.data(PathRole).toString(), node);
      }
    }
  }
  std::vector<QModelIndex> out;
  for (const std::string& p : paths)
    if (const auto at = byPath.constFind(QString::fromStdString(p)); at != byPath.constEnd()) out.push_back(*at);
  return out;
}

QModelIndex SessionTreeModel::findSaveLayer(const std::string& analysis, const QString& layer) const {
  for (int i = 0; i < rowCount(); ++i) {
    const QModelIndex group = index(i, 0);
    if (NodeKind(group.data(KindRole).toInt()) != NodeKind::SaveGroup) continue;
    for (int r = 0; r < rowCount(group); ++r) {
      const QModelIndex result = index(r, 0, group);
      if (result.data(KeyRole).toString().toStdString() != analysis) continue;
      for (int l = 0; l < rowCount(result); ++l)
        if (index(l, 0, result).data().toString() == layer) return index(l, 0, result);
    }
  }
  return {};
}

QModelIndex SessionTreeModel::findPath(const QString& path) const {
  QModelIndex at;
  for (const QString& name : path.split(QLatin1Char('/'), Qt::SkipEmptyParts)) {
    QModelIndex found;
    for (int r = 0; r < rowCount(at) && !found.isValid(); ++r)
      if (index(r, 0, at).data().toString() == name) found = index(r, 0, at);
    if (!found.isValid()) return {};
    at = found;
  }
  return at;
}

QString SessionTreeModel::pathOf(const QModelIndex& index) {
  QStringList names;
  for (QModelIndex at = index.siblingAtColumn(0); at.isValid(); at = at.parent()) names.prepend(at.data().toString());
  return names.join(QLatin1Char('/'));
}

}  // namespace peat::views
