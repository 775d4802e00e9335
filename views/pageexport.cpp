// SPDX-License-Identifier: MIT
#include "views/qcustomplot_include.h"  // first: see the header

#include "views/pageexport.h"

#include <QAbstractScrollArea>
#include <QEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QImage>
#include <QPainter>
#include <QPdfWriter>
#include <QSvgGenerator>
#include <QTabWidget>
#include <QWidget>

#include "core/util/files.h"
#include "views/comparepanel.h"
#include "views/curvepanel.h"
#include "views/errorplotpanel.h"
#include "views/numericspanel.h"
#include "views/savepanel.h"
#include "views/verdicttablemodel.h"

namespace peat::views {

PageExport::PageExport(QTabWidget* central, SavePanel* save, CurvePanel* curves, NumericsPanel* numerics,
                       ComparePanel* compare, ErrorPlotPanel* dock, VerdictTableModel* verdicts)
    : central_(central), save_(save), curves_(curves), numerics_(numerics), compare_(compare), dock_(dock), verdicts_(verdicts) {}

void PageExport::noteUsed(QWidget* widget) { lastUsed_ = widget; }

void PageExport::watch(QWidget* window, QWidget* table) {
  for (QCustomPlot* plot : window->findChildren<QCustomPlot*>()) plot->installEventFilter(this);
  table_ = table;
  if (auto* view = qobject_cast<QAbstractScrollArea*>(table)) view->viewport()->installEventFilter(this);
}

bool PageExport::eventFilter(QObject* watched, QEvent* event) {
  const QEvent::Type type = event->type();
  if (type == QEvent::MouseButtonPress || type == QEvent::Wheel || type == QEvent::FocusIn) {
    if (auto* plot = qobject_cast<QCustomPlot*>(watched)) noteUsed(plot);
    else if (table_ && watched == qobject_cast<QAbstractScrollArea*>(table_)->viewport()) noteUsed(table_);
  }
  return QObject::eventFilter(watched, event);
}

QString PageExport::description() const {
  const Shown s = shown_ ? shown_() : Shown{};
  if (s.session.isEmpty()) return {};
  QString text = QStringLiteral("PEAT Workbench: session %1").arg(QFileInfo(s.session).fileName());
  if (!s.item.isEmpty()) text += QStringLiteral(", ") + s.item;  // run/iteration/call as the tree names them
  if (!s.call.isEmpty()) text += QStringLiteral(" (call %1)").arg(s.call);
  return text;
}

QString PageExport::suggestedName() const {
  const Shown s = shown_ ? shown_() : Shown{};
  QString name = QFileInfo(s.session).completeBaseName();
  if (!s.item.isEmpty()) name += QLatin1Char('-') + s.item;
  QString slug;
  for (const QChar c : name) {
    const QChar k = c.isLetterOrNumber() || c == QLatin1Char('.') || c == QLatin1Char('_') ? c : QLatin1Char('-');
    if (!(k == QLatin1Char('-') && (slug.isEmpty() || slug.endsWith(QLatin1Char('-'))))) slug += k;
  }
  while (slug.endsWith(QLatin1Char('-'))) slug.chop(1);
  return slug.isEmpty() ? QStringLiteral("peat-export") : slug;
}

QWidget* PageExport::usedInView() const {
  return lastUsed_ && lastUsed_->isVisible() && !lastUsed_->visibleRegion().isEmpty() ? lastUsed_.data() : nullptr;
}

namespace {
// The error panel (the dock's or a page's) a widget belongs to.
ErrorPlotPanel* errorPanelOf(QWidget* w) {
  for (; w; w = w->parentWidget())
    if (auto* panel = qobject_cast<ErrorPlotPanel*>(w)) return panel;
  return nullptr;
}
}  // namespace

QCustomPlot* PageExport::currentPlot() const {
  if (auto* used = qobject_cast<QCustomPlot*>(usedInView())) return used;
  if (central_->currentWidget() == save_) return save_->currentPlot();
  if (central_->currentWidget() == curves_) return curves_->plot();
  if (central_->currentWidget() == numerics_) return numerics_->plot();
  if (central_->currentWidget() == compare_) return compare_->left()->plot();
  return dock_->plot();
}

QString PageExport::currentCsv() const {
  const QString described = description();
  const QString head = described.isEmpty() ? QString() : QStringLiteral("# %1\n").arg(described);
  if (QWidget* used = usedInView()) {
    if (ErrorPlotPanel* panel = errorPanelOf(used)) return head + panel->csv();  // the histograms of the plot used
    if (used == table_) return head + verdicts_->csv();
  }
  return head + pageCsv();
}

QString PageExport::pageCsv() const {
  if (central_->currentWidget() == save_) return save_->currentCsv();
  if (central_->currentWidget() == curves_) return curves_->csv();
  if (central_->currentWidget() == numerics_) return numerics_->csv();
  if (central_->currentWidget() == compare_) return compare_->csv();
  return verdicts_->csv();
}

QWidget* PageExport::currentPicture() const { return save_->currentPicture(); }

bool PageExport::exportPlot(const QString& path, QString* error) const {
  QCustomPlot* plot = currentPlot();
  return plot ? views::exportPlot(plot, path, error, description()) : exportWidget(currentPicture(), path, error, description());
}

bool PageExport::exportTable(const QString& path, QString* error) const {
  try {  // a fresh file renamed over PATH: a link planted there is refused, never written through
    util::writeFileAtomically(path.toStdString(), true, currentCsv().toStdString());
    return true;
  } catch (const util::FileRefused& e) {
    *error = QString::fromStdString(e.what());
    return false;
  }
}

bool PageExport::exportByDialog(QWidget* parent, bool table, QString* message) const {
  const QString path =
      table ? QFileDialog::getSaveFileName(parent, tr("Export table"), suggestedName() + QStringLiteral(".csv"), tr("CSV (*.csv)"))
            : QFileDialog::getSaveFileName(parent, tr("Export plot"), suggestedName() + QStringLiteral(".png"),
                                           tr("PNG image (*.png);;SVG drawing (*.svg);;PDF document (*.pdf)"));
  message->clear();
  if (path.isEmpty()) return false;
  if (!(table ? exportTable(path, message) : exportPlot(path, message))) return false;
  *message = tr("Wrote %1").arg(path);
  return true;
}

namespace {
// An export goes through util::writeFileAtomically: a fresh file beside PATH, renamed over it (the
// file dialog has asked before replacing), so a link planted at PATH is refused, never written
// through. WRITE renders into the fresh file's name.
bool exportThroughFreshFile(const QString& path, QString* error, const std::function<bool(const QString&)>& write) {
  const QString suffix = QFileInfo(path).suffix().toLower();
  if (suffix != QLatin1String("png") && suffix != QLatin1String("svg") && suffix != QLatin1String("pdf")) {
    if (error) *error = QObject::tr("unknown image type '%1': use .png, .svg or .pdf").arg(suffix);
    return false;
  }
  try {
    util::writeFileAtomically(path.toStdString(), true,
                              [&](int, const std::string& fresh) { return write(QString::fromStdString(fresh)); });
    return true;
  } catch (const util::FileRefused& e) {
    if (error) *error = QString::fromStdString(e.what());
    return false;
  }
}

bool renderInto(QWidget* widget, QPaintDevice* device) {
  QPainter painter;
  if (!painter.begin(device)) return false;
  widget->render(&painter);
  return painter.end();
}
}  // namespace

bool exportWidget(QWidget* widget, const QString& path, QString* error, const QString& description) {
  const QString suffix = QFileInfo(path).suffix().toLower();
  return exportThroughFreshFile(path, error, [&](const QString& fresh) {
    if (suffix == QLatin1String("png")) {
      QImage image = widget->grab().toImage();
      if (!description.isEmpty()) image.setText(QStringLiteral("Description"), description);
      return image.save(fresh, "PNG");
    }
    if (suffix == QLatin1String("svg")) {
      QSvgGenerator svg;
      svg.setFileName(fresh);
      svg.setDescription(description);
      svg.setSize(widget->size());
      svg.setViewBox(QRect(QPoint(0, 0), widget->size()));
      return renderInto(widget, &svg);
    }
    QPdfWriter pdf(fresh);
    pdf.setTitle(description);
    pdf.setPageSize(QPageSize(QSizeF(widget->size()), QPageSize::Point));
    pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
    pdf.setResolution(72);
    return renderInto(widget, &pdf);
  });
}

bool exportPlot(QCustomPlot* plot, const QString& path, QString* error, const QString& description) {
  const QString suffix = QFileInfo(path).suffix().toLower();
  return exportThroughFreshFile(path, error, [&](const QString& fresh) {
    if (suffix == QLatin1String("png")) {  // what the plot shows, in the PNG's Description text
      QImage image = plot->toPixmap(plot->width(), plot->height(), 2.0).toImage();
      if (!description.isEmpty()) image.setText(QStringLiteral("Description"), description);
      return image.save(fresh, "PNG");
    }
    if (suffix == QLatin1String("pdf"))
      return plot->savePdf(fresh, 0, 0, QCP::epAllowCosmetic, QStringLiteral("PEAT Workbench"), description);
    QSvgGenerator svg;
    svg.setFileName(fresh);
    svg.setDescription(description);
    svg.setSize(plot->size());
    svg.setViewBox(QRect(QPoint(0, 0), plot->size()));
    QCPPainter painter;
    if (!painter.begin(&svg)) return false;
    plot->toPainter(&painter, plot->width(), plot->height());
    return painter.end();
  });
}

}  // namespace peat::views
