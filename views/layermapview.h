// SPDX-License-Identifier: MIT
#pragma once
#include <QImage>
#include <QWidget>

#include <vector>

#include "core/save/analysis_record.h"
#include "core/save/layer_map.h"

class QComboBox;
class QLabel;
class QSpinBox;

namespace peat::views {

class LayerMapCanvas;

// One SAVE layer as maps a person can read (issue 17, item 5): one heatmap per channel in its
// spatial layout (a linear layer: one strip, wrapped in rows of whole tiles), coloured by a quantity that varies from element to
// element (vulnerable bits per value, interval width, type 1/2, or the class of one bit
// position), with the tile grid drawn over it and the tiles in reliable memory hatched. A second
// view shows, per bit position and channel, the share of values whose bit is vulnerable.
// Hovering an element shows its range, its 32 bits coloured by class, and its tile. The summary
// gives the reliable bytes against the budget and the recomputation work the placement avoids.
// Everything it draws comes from core::save::LayerMap; colours from views/palette.h.
class LayerMapView : public QWidget {
  Q_OBJECT
 public:
  enum class View { VulnerableBits, Width, Type, BitClass, BitsByChannel };

  explicit LayerMapView(QWidget* parent = nullptr);
  // The layer to show and the analysis it belongs to (for the summary line).
  void showLayer(const save::StoredAnalysis& analysis, save::LayerMap map);
  void clear(const QString& message);
  void setView(View view);
  View view() const;
  void setBit(int bit);  // the bit position of View::BitClass (0-31)
  // Tiled (the default): the layer as SAVE tiles it, [rows, cols] in bands of whole tiles, so the
  // grid lines fall on tile edges; otherwise one spatial picture per channel, without a grid.
  bool tiled() const;
  void setTiled(bool tiled);

  const save::LayerMap& layerMap() const { return map_; }
  // The element under a point of the canvas (canvas coordinates), -1 if none; for the bits-by-
  // channel view, -1 always.
  int64_t elementAt(const QPoint& canvasPoint) const;
  QPoint canvasPointOf(int64_t element) const;  // the centre of an element's cell
  QWidget* canvas() const;
  QString summaryText() const;
  QString hoverText() const;  // what hovering last showed (plain text)
  // The values behind the current view, as CSV (header line first).
  QString csv() const;
  // Shows what hovering element `element` shows (the canvas does this on mouse moves).
  void hoverElement(int64_t element);

 signals:
  void elementHovered(qint64 element);
  void elementClicked(qint64 element);  // opens it in the bit explorer (MainWindow)

 private:
  friend class LayerMapCanvas;
  void recompute();
  void hoverBitChannel(int bit, int64_t channel);

  LayerMapCanvas* canvas_;
  QComboBox* viewBox_;
  QComboBox* arrangeBox_;
  QSpinBox* bitBox_;
  QLabel *summary_, *hover_;
  save::StoredAnalysis analysis_;
  save::LayerMap map_;
  bool hasMap_ = false;
  std::vector<float> values_;  // per element, or [32 * channels] for BitsByChannel
  double valueLo_ = 0, valueHi_ = 1;
  bool categorical_ = false;  // Type and BitClass: three colours, not a scale
  QString hoverText_;
};

}  // namespace peat::views
