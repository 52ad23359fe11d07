// Routing statistics of the depth reads (docs/interop.md, attnres inspect), the page "routing
// statistics" of the Depth attention view: for the view's first scheme on the lesson model and its
// tokens, per read the normalised entropy, the effective number of sources, the top-1 mass and the
// weights on the embedding and on the most recent source (routing_stats.hpp, computed on the trace
// the view's map shows), the core's routing chart and the cosine similarity of the reads'
// pseudo-queries, and where the model's weights came from (its checkpoint's layout and dtypes).
// Internal to app/gui: the view computes a RoutingResult on its worker and hands it over.
#pragma once

#include <QWidget>
#include <optional>
#include <string>
#include <vector>

#include "attnres/forward.hpp"
#include "attnres/model.hpp"
#include "attnres/routing_stats.hpp"
#include "model_results.hpp"

QT_BEGIN_NAMESPACE
class QLabel;
class QTableWidget;
QT_END_NAMESPACE

namespace attnres::gui {

class ChartPanel;
class HeatmapWidget;

class RoutingPanel : public QWidget {
 public:
  explicit RoutingPanel(QWidget* parent = nullptr);
  void set_result(RoutingResult result);
  const RoutingResult& result() const { return result_; }
  // The table (one row per read; each number cell holds its full value as Qt::UserRole data),
  // the routing chart and the cosine map (hidden when the scheme has none).
  QTableWidget* table() const { return table_; }
  ChartPanel* chart() const { return chart_; }
  HeatmapWidget* cosines() const { return cosines_; }
  bool has_chart() const { return !result_.routing.empty(); }
  bool has_cosines() const { return result_.cosines.has_value(); }

 private:
  QLabel *title_, *origin_, *legend_, *empty_;
  QTableWidget* table_;
  ChartPanel* chart_;
  HeatmapWidget* cosines_;
  RoutingResult result_;
};

}  // namespace attnres::gui
