// SPDX-License-Identifier: MIT
#include "views/graphpanel.h"

#include <QComboBox>
#include <QFontMetrics>
#include <QGraphicsPathItem>
#include <QGraphicsRectItem>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <QGraphicsView>
#include <QHBoxLayout>
#include <QLabel>
#include <QMouseEvent>
#include <QPainterPath>
#include <QPushButton>
#include <QResizeEvent>
#include <QStackedWidget>
#include <QVBoxLayout>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>

#include "core/detector/detector.h"
#include "views/jobtracker.h"
#include "views/palette.h"

namespace peat::views {

// The view: Ctrl+wheel zooms, a click on a node reports it.
class GraphView : public QGraphicsView {
  Q_OBJECT
 public:
  using QGraphicsView::QGraphicsView;
  bool zoomed = false;  // the user zoomed: a resize keeps the scale
 signals:
  void nodeClicked(int node);
  void resized();

 protected:
  void resizeEvent(QResizeEvent* event) override {
    QGraphicsView::resizeEvent(event);
    if (!zoomed) emit resized();
  }
  void mousePressEvent(QMouseEvent* event) override {
    for (QGraphicsItem* item = itemAt(event->pos()); item; item = item->parentItem())
      if (item->data(0).isValid()) {
        emit nodeClicked(item->data(0).toInt());
        event->accept();
        return;
      }
    QGraphicsView::mousePressEvent(event);
  }
  void wheelEvent(QWheelEvent* event) override {
    if (!(event->modifiers() & Qt::ControlModifier)) {
      QGraphicsView::wheelEvent(event);
      return;
    }
    const double factor = event->angleDelta().y() > 0 ? 1.2 : 1 / 1.2;
    const double now = transform().m11();
    if ((factor > 1 && now < 4) || (factor < 1 && now > 0.05)) scale(factor, factor);
    zoomed = true;
    event->accept();
  }
};

namespace {
constexpr double kBoxWidth = 200, kBoxHeight = 58, kColumn = 240, kRow = 86;

QString shapeText(const std::vector<int64_t>& shape) {
  QStringList parts;
  for (int64_t d : shape) parts << QString::number(d);
  return parts.join(QLatin1Char('x'));
}

// Black or white, whichever reads on `fill`.
QColor textOn(const QColor& fill) {
  const double luminance = 0.2126 * fill.redF() + 0.7152 * fill.greenF() + 0.0722 * fill.blueF();
  return luminance > 0.45 ? QColor(Qt::black) : QColor(Qt::white);
}
}  // namespace

GraphPanel::GraphPanel(QWidget* parent) : QWidget(parent), jobs_(new JobTracker(this)) {
  title_ = new QLabel(this);
  title_->setWordWrap(true);
  title_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  colourBy_ = new QComboBox(this);
  colourBy_->setObjectName(QStringLiteral("GraphColour"));
  colourBy_->setToolTip(tr("What colours each op: the verdicts of its calls (a run), or a SAVE analysis's share of "
                           "values with a vulnerable bit, vulnerable bits per value, or share of its tiles placed in "
                           "reliable memory"));
  colourBy_->setMinimumContentsLength(14);
  colourBy_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  fit_ = new QPushButton(tr("Fit"), this);
  fit_->setToolTip(tr("The whole graph in view (Ctrl+wheel zooms; until then the graph's width fits the page)"));
  legend_ = new QLabel(this);
  legend_->setWordWrap(true);
  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel(tr("Colour:"), this));
  bar->addWidget(colourBy_);
  bar->addWidget(fit_);
  bar->addWidget(legend_, 1);

  scene_ = new QGraphicsScene(this);
  view_ = new GraphView(scene_, this);
  view_->setRenderHint(QPainter::Antialiasing);
  view_->setDragMode(QGraphicsView::ScrollHandDrag);
  view_->setMinimumSize(200, 160);
  message_ = new QLabel(tr("Select a run or a SAVE analysis in the session tree: its model's graph opens here"), this);
  message_->setWordWrap(true);
  message_->setAlignment(Qt::AlignCenter);
  stack_ = new QStackedWidget(this);
  stack_->addWidget(message_);
  stack_->addWidget(view_);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(title_);
  layout->addLayout(bar);
  layout->addWidget(stack_, 1);

  connect(colourBy_, &QComboBox::currentIndexChanged, this, [this] {
    if (hasGraph()) draw();
  });
  connect(fit_, &QPushButton::clicked, this, [this] {  // the whole graph in view
    if (!hasGraph()) return;
    view_->fitInView(scene_->sceneRect(), Qt::KeepAspectRatio);
    if (view_->transform().m11() > 1) view_->resetTransform();
    view_->zoomed = true;
  });
  connect(view_, &GraphView::resized, this, &GraphPanel::fit);
  connect(view_, &GraphView::nodeClicked, this, [this](int node) {
    if (node < 0 || std::size_t(node) >= graph_.nodes.size()) return;
    highlighted_ = node;
    draw();
    emit nodeActivated(graph_, node);
  });
  showMessage(message_->text());
}

bool GraphPanel::loading() const { return jobs_->pending(); }
QString GraphPanel::message() const { return stack_->currentWidget() == message_ ? message_->text() : QString(); }

void GraphPanel::showMessage(const QString& text) {
  jobs_->cancel();
  key_.clear();
  graph_ = modelgraph::ModelGraph();
  highlighted_ = -1;
  scene_->clear();
  title_->setText(QString());
  legend_->setText(QString());
  colourBy_->clear();
  colourBy_->setEnabled(false);
  fit_->setEnabled(false);
  message_->setText(text);
  stack_->setCurrentWidget(message_);
}

void GraphPanel::show(const QString& key, GraphLoader loader) {
  if (key == key_ && (hasGraph() || jobs_->pending())) return;
  showMessage(tr("Reading the graph of %1 ...").arg(key.section(QLatin1Char(':'), 1)));
  key_ = key;
  jobs_->start<modelgraph::ModelGraph>(
      std::move(loader),
      [this](const modelgraph::ModelGraph& g) {
        graph_ = g;
        const QSignalBlocker block(colourBy_);
        colourBy_->clear();
        if (g.overlay == "save") {
          // vulnerable bits first: they vary where nearly every value is type 2
          colourBy_->addItem(tr("Vulnerable bits"), int(Colour::VulnerableBits));
          colourBy_->addItem(tr("Type-2 share"), int(Colour::Type2Share));
          colourBy_->addItem(tr("Reliable tiles"), int(Colour::ReliableTiles));
        } else {
          colourBy_->addItem(g.overlay == "verdicts" ? tr("Verdicts") : tr("No analysis"), int(Colour::Verdicts));
        }
        colourBy_->setEnabled(colourBy_->count() > 1);
        fit_->setEnabled(true);
        highlighted_ = -1;
        if (!pendingName_.isEmpty()) highlightName(pendingName_);
        else if (!pendingCall_.isEmpty()) highlightCall(pendingCall_);
        stack_->setCurrentWidget(view_);
        view_->zoomed = false;
        draw();
        fit();
        emit graphShown();
      },
      [this, key](const QString& why) {
        showMessage(tr("No graph of %1: %2").arg(key.section(QLatin1Char(':'), 1), why));
        emit graphShown();
      });
}

void GraphPanel::highlightName(const QString& name) {
  pendingName_ = name;
  pendingCall_.clear();
  if (!hasGraph()) return;
  highlighted_ = name.isEmpty() ? -1 : graph_.findNode(name.toStdString());
  draw();
  showHighlighted();
}

void GraphPanel::highlightCall(const QString& call) {
  pendingCall_ = call;
  pendingName_.clear();
  if (!hasGraph()) return;
  highlighted_ = -1;
  const std::string path = call.toStdString();
  for (std::size_t i = 0; i < graph_.nodes.size() && highlighted_ < 0; ++i)
    if (std::find(graph_.nodes[i].calls.begin(), graph_.nodes[i].calls.end(), path) != graph_.nodes[i].calls.end())
      highlighted_ = int(i);
  draw();
  showHighlighted();
}

GraphPanel::Colour GraphPanel::colour() const {
  return colourBy_->count() ? Colour(colourBy_->currentData().toInt()) : Colour::Verdicts;
}

void GraphPanel::setColour(Colour c) {
  const int at = colourBy_->findData(int(c));
  if (at >= 0) colourBy_->setCurrentIndex(at);
}

QColor GraphPanel::nodeColour(int i) const {
  const modelgraph::GraphNode& n = graph_.nodes[std::size_t(i)];
  const QColor none(0xee, 0xee, 0xee);
  if (graph_.overlay == "verdicts") {
    if (n.worst.empty()) return none;
    return palette::verdictClass(detector::verdictClass(n.worst));
  }
  if (graph_.overlay != "save" || !n.saved) return none;
  switch (colour()) {
    case Colour::Type2Share: return palette::viridis(n.type2Share());
    case Colour::VulnerableBits: return palette::viridis(n.meanVulnerableBits / 32.0);
    case Colour::ReliableTiles: return palette::viridis(n.tiles ? double(n.reliableTiles) / double(n.tiles) : 0);
    case Colour::Verdicts: break;
  }
  return none;
}

QString GraphPanel::legendText() const {
  auto swatch = [](const QColor& c, const QString& what) {
    return QStringLiteral("<span style=\"background-color:%1\">&nbsp;&nbsp;&nbsp;</span>&nbsp;%2").arg(c.name(), what);
  };
  if (graph_.overlay == "verdicts")
    return swatch(palette::verdictClass("error"), tr("error")) + QStringLiteral("&nbsp; ") +
           swatch(palette::verdictClass("unknown"), tr("unknown")) + QStringLiteral("&nbsp; ") +
           swatch(palette::verdictClass("legitimate"), tr("legitimate")) + QStringLiteral("&nbsp; ") +
           QStringLiteral("<span style=\"color:#808080\">&#9633;</span>&nbsp;") + tr("no verdict");
  if (graph_.overlay == "save") {
    const QString what = colour() == Colour::Type2Share       ? tr("values with a vulnerable bit, 0% to 100%")
                         : colour() == Colour::VulnerableBits ? tr("vulnerable bits per value, 0 to 32")
                                                              : tr("tiles in reliable memory, 0% to 100%");
    return swatch(palette::viridis(0), QString()) + swatch(palette::viridis(0.5), QString()) +
           swatch(palette::viridis(1), what);
  }
  return tr("This run has no analysis: run <tt>peat analyze --session</tt> on a playback to colour its ops");
}

QString GraphPanel::nodeTip(int i) const {
  const modelgraph::GraphNode& n = graph_.nodes[std::size_t(i)];
  QString tip = QStringLiteral("<b>%1</b><br>%2 %3").arg(QString::fromStdString(n.name).toHtmlEscaped(),
                                                         QString::fromStdString(n.op).toHtmlEscaped(), shapeText(n.shape));
  QStringList inputs;
  for (int in : n.inputs) inputs << QString::fromStdString(graph_.nodes[std::size_t(in)].name).toHtmlEscaped();
  if (!inputs.isEmpty()) tip += tr("<br>from %1").arg(inputs.join(QStringLiteral(", ")));
  if (graph_.overlay == "verdicts" || !graph_.callRun.empty()) {
    tip += tr("<br>%n calls in run %1", nullptr, int(n.calls.size())).arg(QString::fromStdString(graph_.callRun).toHtmlEscaped());
    if (!n.worst.empty())
      tip += tr("<br>verdicts: %1 error, %2 unknown, %3 legitimate; the most serious: %4")
                 .arg(n.errors).arg(n.unknown).arg(n.legitimate).arg(QString::fromStdString(n.worst));
    if (!n.calls.empty()) tip += tr("<br>Click: select its calls in the session tree");
  } else if (graph_.overlay == "save" && n.saved) {
    tip += tr("<br>%1 values, %2% with a vulnerable bit (type 2), %3 vulnerable bits per value<br>%4 of %5 tiles in "
              "reliable memory<br>Click: open its map")
               .arg(n.elements)
               .arg(100.0 * n.type2Share(), 0, 'f', 1)
               .arg(n.meanVulnerableBits, 0, 'f', 2)
               .arg(n.reliableTiles)
               .arg(n.tiles);
  }
  return tip;
}

void GraphPanel::draw() {
  scene_->clear();
  const modelgraph::ModelGraph& g = graph_;
  QString title = tr("<b>%1</b>: %n ops, %2", nullptr, int(g.nodes.size()))
                      .arg(QString::fromStdString(g.model).toHtmlEscaped(), QString::fromStdString(g.structure));
  if (g.overlay == "verdicts")
    title += tr("; coloured by the verdicts of %1 on run %2")
                 .arg(QString::fromStdString(g.overlayRun).toHtmlEscaped(), QString::fromStdString(g.callRun).toHtmlEscaped());
  else if (g.overlay == "save")
    title += tr("; coloured by SAVE analysis %1").arg(QString::fromStdString(g.overlayRun).toHtmlEscaped());
  else if (!g.callRun.empty())
    title += tr("; calls of run %1").arg(QString::fromStdString(g.callRun).toHtmlEscaped());
  title += QStringLiteral("<br><small>%1</small>").arg(QString::fromStdString(g.note).toHtmlEscaped());
  if (g.unplacedCalls || g.unplacedVerdicts)
    title += tr("<br><small>%1 calls and %2 verdicts belong to no op drawn</small>").arg(g.unplacedCalls).arg(g.unplacedVerdicts);
  title_->setText(title);
  legend_->setText(legendText());

  // rows centred on the widest
  auto centre = [&](const modelgraph::GraphNode& n) {
    return QPointF(n.slot * kColumn + kBoxWidth / 2, n.rank * kRow + kBoxHeight / 2);
  };
  const QPen edgePen(QColor(0x70, 0x70, 0x70), 1.2);
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    for (int in : g.nodes[i].inputs) {
      const QPointF from = centre(g.nodes[std::size_t(in)]) + QPointF(0, kBoxHeight / 2);
      const QPointF to = centre(g.nodes[i]) - QPointF(0, kBoxHeight / 2);
      QPainterPath path(from);
      if (g.nodes[i].rank - g.nodes[std::size_t(in)].rank > 1) {  // a skip: around the ops between, on the right
        const double side = std::max(from.x(), to.x()) + kBoxWidth / 2 + 16;
        path.cubicTo(QPointF(side, from.y() + kRow / 2), QPointF(side, to.y() - kRow / 2), to);
      } else {
        path.cubicTo(QPointF(from.x(), from.y() + kRow / 3), QPointF(to.x(), to.y() - kRow / 3), to);
      }
      scene_->addPath(path, edgePen);
      QPainterPath head;  // the arrow's head, pointing down into the box
      head.moveTo(to);
      head.lineTo(to + QPointF(-4, -7));
      head.lineTo(to + QPointF(4, -7));
      head.closeSubpath();
      scene_->addPath(head, Qt::NoPen, QBrush(edgePen.color()));
    }
  QFont bold = font();
  bold.setBold(true);
  const QFontMetrics boldMetrics(bold), plainMetrics(font());
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const modelgraph::GraphNode& n = g.nodes[i];
    const QPointF c = centre(n);
    const QRectF box(c.x() - kBoxWidth / 2, c.y() - kBoxHeight / 2, kBoxWidth, kBoxHeight);
    const QColor fill = nodeColour(int(i));
    const bool framed = int(i) == highlighted_;
    auto* rect = scene_->addRect(box, QPen(framed ? QColor(Qt::black) : QColor(0x50, 0x50, 0x50), framed ? 4 : 1),
                                 QBrush(fill));
    rect->setData(0, int(i));
    rect->setToolTip(nodeTip(int(i)));
    QString third;
    if (g.overlay == "verdicts" && !n.worst.empty()) third = tr("%1 · %n calls", nullptr, int(n.calls.size())).arg(QString::fromStdString(n.worst));
    else if (!g.callRun.empty() && !n.calls.empty()) third = tr("%n calls", nullptr, int(n.calls.size()));
    else if (g.overlay == "save" && n.saved && colour() == Colour::VulnerableBits)
      third = tr("%1 vulnerable bits · %2/%3 reliable").arg(n.meanVulnerableBits, 0, 'f', 1).arg(n.reliableTiles).arg(n.tiles);
    else if (g.overlay == "save" && n.saved)
      third = tr("type-2 %1% · %2/%3 reliable").arg(100.0 * n.type2Share(), 0, 'f', 0).arg(n.reliableTiles).arg(n.tiles);
    const QStringList lines{QString::fromStdString(n.name), QString::fromStdString(n.op) + QStringLiteral("  ") + shapeText(n.shape), third};
    double y = box.top() + 4;
    for (int l = 0; l < lines.size(); ++l) {
      if (lines[l].isEmpty()) continue;
      const QFontMetrics& m = l == 0 ? boldMetrics : plainMetrics;
      auto* text = new QGraphicsSimpleTextItem(m.elidedText(lines[l], Qt::ElideMiddle, int(kBoxWidth - 10)), rect);
      text->setFont(l == 0 ? bold : font());
      text->setBrush(textOn(fill));
      text->setPos(box.left() + 5, y);
      y += m.height();
    }
  }
  scene_->setSceneRect(scene_->itemsBoundingRect().adjusted(-20, -20, 20, 20));
}

void GraphPanel::fit() {
  if (!hasGraph() || view_->zoomed) return;
  // the whole width in view (never larger than 1:1); a tall graph scrolls from its top
  const QRectF r = scene_->sceneRect();
  const double s = std::min(1.0, std::max(0.1, double(view_->viewport()->width()) / r.width()));
  view_->resetTransform();
  view_->scale(s, s);
  view_->centerOn(r.center().x(), r.top() + view_->viewport()->height() / (2 * s));
  showHighlighted();
}

void GraphPanel::showHighlighted() {
  if (highlighted_ < 0 || !hasGraph()) return;
  const modelgraph::GraphNode& n = graph_.nodes[std::size_t(highlighted_)];
  view_->ensureVisible(QRectF(n.slot * kColumn, n.rank * kRow, kBoxWidth, kBoxHeight), 20, 20);
}

QWidget* GraphPanel::viewport() const { return view_->viewport(); }

QPoint GraphPanel::nodeViewPos(int i) const {
  const modelgraph::GraphNode& n = graph_.nodes[std::size_t(i)];
  const QPointF c(n.slot * kColumn + kBoxWidth / 2, n.rank * kRow + kBoxHeight / 2);
  view_->ensureVisible(QRectF(c - QPointF(10, 10), QSizeF(20, 20)));
  return view_->mapFromScene(c);
}

}  // namespace peat::views

#include "graphpanel.moc"
