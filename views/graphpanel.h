// SPDX-License-Identifier: MIT
#pragma once
// The Graph page (issue 43, item 6): the model as a graph, its ops as boxes (name, op, shape) in
// rows by depth, coloured by what the selected item says of each op: the verdicts of a run's
// analysis (PEAT) or a SAVE analysis's bit classes and reliable tiles. Clicking an op asks for its
// calls or its SAVE layer to be selected (nodeActivated; the selection controller does it). What
// it draws is core/modelgraph's ModelGraph, read in the page's own job tracker off the GUI thread;
// colours from views/palette.h.
#include <QWidget>

#include <functional>
#include <string>

#include "core/modelgraph/model_graph.h"

class QComboBox;
class QGraphicsScene;
class QLabel;
class QPushButton;
class QStackedWidget;

namespace peat::views {

class GraphView;
class JobTracker;

class GraphPanel : public QWidget {
  Q_OBJECT
 public:
  // Reads the graph; runs in a worker (it must hold the reader it reads, not look it up).
  using GraphLoader = std::function<modelgraph::ModelGraph()>;
  // What a node is coloured by (SAVE offers the three; PEAT the verdicts).
  enum class Colour { Verdicts, Type2Share, VulnerableBits, ReliableTiles };

  explicit GraphPanel(QWidget* parent = nullptr);
  // Shows the graph `key` names ("run:bf16", "save:lenet-symbolic"), read by `loader`, unless it is
  // the one shown (or loading) already.
  void show(const QString& key, GraphLoader loader);
  void showMessage(const QString& text);  // no graph: why (cancels a read in flight)
  // Frames the node of that name, or the node holding that call (after a read in flight delivers);
  // an empty name frames none.
  void highlightName(const QString& name);
  void highlightCall(const QString& call);
  bool loading() const;

  const QString& shownKey() const { return key_; }
  const modelgraph::ModelGraph& graph() const { return graph_; }
  bool hasGraph() const { return !graph_.nodes.empty() && !key_.isEmpty(); }
  QString message() const;
  int highlighted() const { return highlighted_; }
  QColor nodeColour(int node) const;
  QPoint nodeViewPos(int node) const;  // the node's centre in the view's viewport, for tests
  QWidget* viewport() const;  // where the graph is drawn (clicks land there)
  void setColour(Colour c);
  Colour colour() const;

 signals:
  void graphShown();  // a read ended: a graph drawn, or why not
  void nodeActivated(const modelgraph::ModelGraph& graph, int node);

 private:
  void draw();
  void fit();
  void showHighlighted();  // scrolls the framed node into view
  QString legendText() const;
  QString nodeTip(int node) const;

  QLabel* title_;
  QComboBox* colourBy_;
  QPushButton* fit_;
  QLabel* legend_;
  QStackedWidget* stack_;
  QLabel* message_;
  GraphView* view_;
  QGraphicsScene* scene_;
  JobTracker* jobs_;
  QString key_;
  QString pendingName_, pendingCall_;
  modelgraph::ModelGraph graph_;
  int highlighted_ = -1;
};

}  // namespace peat::views
