// SPDX-License-Identifier: MIT
#pragma once
#include <QWidget>

#include <climits>
#include <optional>
#include <utility>
#include <vector>

#include "core/analysis/session_analysis.h"

class QCustomPlot;
class QComboBox;
class QCPItemRect;
class QCPBars;
class QCPColorScale;
class QMouseEvent;
class QPointF;

namespace peat::views {

// Error distributions of analysed calls (from the analyzer's stored reports): a histogram of
// log2 |candidate - golden| or of log2 ULP distance, several calls overlaid, and the mismatch count
// per bit position, coloured by field (sign, exponent, mantissa). Hovering reads the values out.
class ErrorPlotPanel : public QWidget {
  Q_OBJECT
 public:
  enum class Scale { Log2Abs, Log2Ulp };
  explicit ErrorPlotPanel(QWidget* parent = nullptr);
  void showMessage(const QString& text);
  void showReports(const std::vector<analyzer::StoredCallReport>& reports);
  void setScale(Scale scale);
  // Frames bit `bit`'s bar: the evidence of a bit-flip or stuck-at verdict. -1 clears.
  void highlightBit(int bit);
  int highlightedBit() const { return highlighted_; }
  // Shades bits lowest..highest of the Bits plot with a label: the evidence of a precision-loss
  // verdict (the fp32 mantissa bits its format does not keep). The Bits tab comes to the front.
  void highlightBitSpan(int lowest, int highest, const QString& label);
  QString bitSpanLabel() const { return spanLabel_; }
  // Marks an index_error's evidence on the Where map, for the first call: with `stride` > 0, the
  // elements at that distance from the worst one (where a periodic indexing bug strikes); with 0,
  // a frame round every tile that holds mismatches (errors confined to some rows or columns). The
  // Where tab comes to the front. Returns the number of marks; clearing: -1.
  int highlightPattern(int stride);
  // index_error confined to some columns or rows: a band over each range (in the output's element
  // columns and rows) on the Where map; the bands drawn.
  int highlightConfinement(const std::vector<std::pair<uint64_t, uint64_t>>& columns,
                           const std::vector<std::pair<uint64_t, uint64_t>>& rows, bool truncated);
  QString evidenceText() const { return evidenceText_; }  // the Where map's evidence note
  int patternMarks() const { return marks_; }
  void showBitsTab();
  // A verdict's finding drawn where it shows (core's findingEvidence): its bit framed, its stride
  // or confinement marked, or the mantissa bits its format drops shaded.
  void showFinding(const store::Finding& finding);
  void requestGrouping(int index);
  // The Where map shows `counts` per tile instead of all mismatches (what: its title, e.g. "bit 27
  // differs"), until the next report; the bit's bar is framed.
  void showMapCounts(const std::vector<uint64_t>& counts, int bit);
  // The same for the elements of one bar of the error histogram, [2^bin, 2^(bin + 1)).
  // With lastBin > bin: the bars bin..lastBin (a range shift-clicked), shaded on the histogram.
  void showMapCountsOfBin(const std::vector<uint64_t>& counts, int bin, int lastBin = INT_MIN);
  int mapBin() const { return mapBin_; }  // the (first) histogram bar the Where map shows, or INT_MIN
  int mapBinLast() const { return mapBinLast_; }  // the last bar of that range
  // The bit positions of the selected bars' elements, drawn over the Bits plot (empty: none).
  void showSelectionBits(const std::vector<uint64_t>& counts);
  const std::vector<uint64_t>& selectionBits() const { return selectionBits_; }
  int mapBit() const { return mapBit_; }  // the bit the Where map shows, -1: all mismatches
  const std::vector<uint64_t>& mapCounts() const { return mapCounts_; }  // as choosing entry `index` of the grouping box does: 0 tiles 16x16, 1 blocks of 32, 2 of 16
  QCustomPlot* plot() const { return plot_; }
  QCustomPlot* bitPlot() const { return bits_; }
  QCustomPlot* mapPlot() const { return map_; }
  QCPColorScale* mapScale() const;  // the Where map's colour scale (the data's own range)
  // What hovering tile (row, column) of the Where map reads out; empty outside the map.
  QString mapHoverText(qint64 tileRow, qint64 tileCol) const;
  QString hoverText() const { return hover_; }  // what hovering last showed  // where the first call's mismatches are, per tile
  int reportCount() const { return int(reports_.size()); }
  const analyzer::StoredCallReport* firstReport() const { return reports_.empty() ? nullptr : &reports_.front(); }
  QString csv() const;  // the histograms shown, one row per bin and call

 signals:
  void scaleChanged(Scale scale);
  // A tile of the Where map was clicked: its row and column of tiles (the first call's).
  void tileClicked(qint64 tileRow, qint64 tileCol);
  // The user chose how the Where map groups elements: tiles of rows x cols (1 x 32: the blocks of
  // a block-scaled format along the rows). Whoever holds the tensors recomputes the report.
  void groupingRequested(qint64 rows, qint64 cols);
  // A bar of the bit-position plot was clicked: whoever holds the tensors can show where it differs.
  void bitClicked(int bit);
  // A bar of the error histogram (log2 |error| scale) was clicked: where those elements sit.
  // A bar of the error histogram was clicked: [2^bin, 2^(bin + 1)); shift-clicking another bar
  // extends the selection to the range bin..lastBin.
  void binClicked(int bin, int lastBin = INT_MIN);

 private:
  void draw();
  void hoverHistogram(QMouseEvent* event);
  void hoverBits(QMouseEvent* event);
  QCustomPlot* plot_;
  QCustomPlot* bits_;
  QCustomPlot* map_;
  void drawMap();
  void shadeBins();
  void hoverMap(QMouseEvent* event);
  std::optional<std::pair<qint64, qint64>> tileAt(const QPointF& pixel) const;
  QComboBox* scaleBox_;
  QComboBox* groupBox_;
  class QTabWidget* lower_;
  int marks_ = 0;
  std::vector<analyzer::StoredCallReport> reports_;
  Scale scale_ = Scale::Log2Abs;
  int highlighted_ = -1;
  QString spanLabel_;
  QString evidenceText_;
  int mapBinLast_ = INT_MIN;
  QCPItemRect* binSpan_ = nullptr;
  std::vector<uint64_t> selectionBits_;
  QCPBars* selectionBars_ = nullptr;  // the selected bars, shaded on the histogram
  std::vector<uint64_t> mapCounts_;  // the Where map's counts when one bit is shown
  int mapBit_ = -1;
  int mapBin_ = INT_MIN;
  QString hover_;
};

}  // namespace peat::views
