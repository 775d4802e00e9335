// SPDX-License-Identifier: MIT
#pragma once
#include <QString>
#include <QWidget>

#include <functional>

#include "core/save/analysis_record.h"
#include "core/save/campaign_record.h"

class QCustomPlot;
class QCPTextElement;
class QCPColorScale;
class QMouseEvent;
class QComboBox;
class QLabel;
class QTabWidget;
class QStackedWidget;

namespace peat::views {

class JobTracker;
class LayerMapView;
class SaveRunView;

// SAVE's results: per-layer stacked bars of robust, ranging and vulnerable bits; the per-tile
// share of type-2 values of one layer as a heatmap with the reliable-memory placement overlaid;
// a campaign's accuracy against faults per inference, one line per protection scheme, log x; and the
// selected layer's map, value by value (LayerMapView); and the outputs of a model run on the user's
// inputs (SaveRunView). It only draws what core::save's records read; hovering a plot shows the
// values under the mouse.
class SavePanel : public QWidget {
  Q_OBJECT
 public:
  enum Tab { BitsTab, TilesTab, CampaignTab, MapTab, RunTab };
  // One layer of the analysis shown, value by value: the loader, called on the GUI thread, returns
  // the read (it holds the session reader it will use) that the page runs off the GUI thread in its
  // own job tracker; without a loader the map tab says it has no data.
  using LayerMapRead = std::function<save::LayerMap()>;
  using LayerMapLoader = std::function<LayerMapRead(const std::string& analysis, const std::string& layer)>;

  explicit SavePanel(QWidget* parent = nullptr);
  void setLayerMapLoader(LayerMapLoader loader) { loadMap_ = std::move(loader); }
  bool loading() const;  // an analysis, a campaign or a layer's map is being read
  void showAnalysis(const save::StoredAnalysis& analysis);  // drops an analysis load in flight
  void showCampaign(const save::StoredCampaign& campaign);  // drops a campaign load in flight
  // Reads a stored analysis (or campaign) off the GUI thread in the page's own job (`read` holds the
  // session reader it reads); an analysis says "Loading TITLE ..." until it delivers, then it is
  // shown (a campaign keeps the analysis shown until then).
  void loadAnalysis(const QString& title, std::function<save::StoredAnalysis()> read);
  void loadCampaign(const QString& title, std::function<save::StoredCampaign()> read);
  void dropLoads();  // an analysis or campaign load in flight will not be shown (what is shown stays)
  // No analysis: `text` (loading, or why it could not be read) on the bits and tiles tabs; drops
  // every load in flight.
  void showMessage(const QString& text);
  void selectLayer(int layer);  // of the analysis shown
  bool selectLayerNamed(const QString& name);
  void setCurrentTab(Tab tab);
  Tab currentTab() const;

  QCustomPlot* bitsPlot() const { return bits_; }
  QCustomPlot* tilesPlot() const { return tiles_; }
  QCPColorScale* tilesScale() const { return scale_; }
  QString bitsEmptyText() const;  // why the Bit classes tab is empty ("" when it shows a plot)
  QCustomPlot* tilePlot() const { return tiles_; }
  QCustomPlot* campaignPlot() const { return campaign_; }
  LayerMapView* layerMap() const { return map_; }
  SaveRunView* runView() const { return run_; }
  QCustomPlot* currentPlot() const;  // null on the map and run tabs
  QWidget* currentPicture() const;    // the current tab's plot, map or run outputs
  int layerCount() const { return int(analysis_.layers.size()); }
  int currentLayer() const { return layer_; }
  // The values behind the current tab's plot (or map), as CSV (header line first).
  QString currentCsv() const;

 signals:
  void layerMapShown();  // a layer's map was read and drawn (or why not)
  void analysisShown();  // a load delivered its analysis, now shown
  void campaignShown();  // ... its campaign
  void readFailed(const QString& why);  // a load failed; the page says why

 private:
  void drawBits();
  void drawTiles();
  void showLayerMap();
  void hoverBits(QMouseEvent* event);
  void hoverTiles(QMouseEvent* event);
  void hoverCampaign(QMouseEvent* event);

  QTabWidget* tabs_;
  QCustomPlot *bits_, *tiles_, *campaign_;
  QCPTextElement* bitsTitle_;
  QCPColorScale* scale_ = nullptr;
  void showBitsEmpty(const QString& why);
  std::function<void(const QString&)> loadFailed(const QString& title);  // a load's failure: said, signalled
  QStackedWidget* bitsStack_;
  QLabel* bitsEmpty_;
  QComboBox *layerBox_, *tileMeasure_;
  QLabel* tileInfo_;
  LayerMapView* map_;
  SaveRunView* run_;
  LayerMapLoader loadMap_;
  JobTracker* mapJobs_;  // the page's own reads: a layer's map,
  JobTracker* analysisJobs_;  // a stored analysis
  JobTracker* campaignJobs_;  // and a stored campaign
  save::StoredAnalysis analysis_;
  save::StoredCampaign campaignData_;
  int layer_ = -1;
};

}  // namespace peat::views
