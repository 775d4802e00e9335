// SPDX-License-Identifier: MIT
#pragma once
#include <QAbstractItemModel>

#include <functional>
#include <memory>
#include <vector>

#include "core/store/session.h"
#include "views/failedcalls.h"
#include "views/jobtracker.h"

namespace peat::views {

// The session as a tree: runs -> iterations -> calls, plus SAVE results. Takes an immutable
// snapshot of a SessionSummary in one step (reset), so it never reads the file itself. The calls a
// user kernel failed in its kernel host (read with the summary) sit among the calls that ran,
// marked, with their outcome.
class SessionTreeModel : public QAbstractItemModel {
  Q_OBJECT
 public:
  enum Column { NameColumn, DetailColumn, ColumnCount };
  enum class NodeKind { Run, Iteration, Call, SaveGroup, SaveResult, SaveLayer };
  // KindRole: the NodeKind (as int); KeyRole: the run name (runs and below), or the SAVE result id.
  // PathRole: a call's path inside its run ("iterations/000010/calls/000003"). OutcomeRole: a call
  // the kernel failed, its outcome ("crash:SIGSEGV"); empty for the others. CallKindRole: a recorded
  // call's op and variant ("layernorm grad_bias"; the phase where no variant is stored), empty for
  // other nodes; the Details column adds its stored parameters, the tooltip all of them and its
  // tensors with each input named by its role.
  enum Role { KindRole = Qt::UserRole + 1, KeyRole, PathRole, OutcomeRole, CallKindRole };

  explicit SessionTreeModel(QObject* parent = nullptr);
  ~SessionTreeModel() override;

  void setSummary(const store::SessionSummary& summary, std::vector<FailedCall> failed = {});
  // The failed call at `index`, or null for any other node.
  const FailedCall* failedCall(const QModelIndex& index) const;
  // A call's tensor list is read when its tooltip is first asked for (a summary made without them
  // opens a large session much faster), in a worker: the lister, called on the GUI thread, gives
  // the read to run there (it must not touch the model). Until it ends the tooltip says the
  // tensors are being read; then the tooltip is whole and toolTipRead tells which node.
  using TensorRead = std::function<std::vector<store::TensorInfo>()>;
  using TensorLister = std::function<TensorRead(const std::string& run, const std::string& call)>;
  void setTensorLister(TensorLister lister) { lister_ = std::move(lister); }
  void clear();
  const store::SessionSummary& summary() const { return summary_; }
  // The node of call `path` of run `run` (a top-level run, any iteration); invalid when none.
  QModelIndex findCall(const std::string& run, const QString& path) const;
  // The nodes of several calls of one run in one pass over it (a layer's hundreds of calls), in the
  // order of `paths`; calls the tree does not list are left out.
  std::vector<QModelIndex> findCalls(const std::string& run, const std::vector<std::string>& paths) const;
  // The node of layer `layer` of SAVE result `analysis`; invalid when none.
  QModelIndex findSaveLayer(const std::string& analysis, const QString& layer) const;
  // The node at a path of display names joined by '/' ("edge/iteration 0/#6 fc1"); invalid when none.
  QModelIndex findPath(const QString& path) const;
  static QString pathOf(const QModelIndex& index);  // the reverse: "" for an invalid index

  QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
  QModelIndex parent(const QModelIndex& child) const override;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 signals:
  // The tooltip of `index` (a call) is whole now: its tensors were read, or their read failed.
  void toolTipRead(const QModelIndex& index);

 private:
  struct Node;
  void rebuild();
  void addFailedCalls(Node* node, const store::RunInfo& run);
  Node* nodeOf(const QModelIndex& index) const;
  QString callToolTipOf(Node* n) const;

  store::SessionSummary summary_;
  std::vector<FailedCall> failed_;
  std::unique_ptr<Node> root_;
  TensorLister lister_;
  JobTracker* tensorReads_;    // one read at a time: the newest hover's
  Node* reading_ = nullptr;    // the node whose tensors are being read
};

}  // namespace peat::views
