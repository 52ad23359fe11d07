// Widgets shared by the attnres-lab views: a heatmap (QImage through viridis, colour bar, axis
// labels, hover values), a Gantt chart (the report's painter, with zoom, pan and hover readouts),
// and a chart panel that keeps the core ChartSpec it shows so that exports match the CLI's
// figures exactly (plus hover readouts). All three shrink to small sizes (a 1024x700 window with
// several of them) by scaling their content, and follow the presentation-mode type scale.
#pragma once

#include <QLabel>
#include <QWidget>
#include <QtCharts/QChartView>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "attnres/chart_spec.hpp"
#include "chart_render.hpp"
#include "heatmap_render.hpp"

namespace attnres::gui {

// Presentation mode: one factor (default 1, clamped to [0.5, 4]) for the type of every chart
// panel, heatmap and Gantt widget. Panels made afterwards use it; existing ones pick it up through
// ChartPanel::refresh(), heatmaps and Gantt charts when they next paint (update()).
void set_chart_font_scale(double scale);
double chart_font_scale();

class HeatmapWidget : public QWidget {
 public:
  explicit HeatmapWidget(QWidget* parent = nullptr);
  // values (rows x cols), NaN = no value (grey); colours scale from `low` to `high`.
  void set_data(std::string title, std::vector<std::vector<double>> values,
                std::vector<std::string> row_labels, std::vector<std::string> column_labels,
                double low = 0.0, double high = 1.0);
  // The whole map as core data (the builders of core/model_charts.hpp make these).
  void set_spec(HeatmapSpec spec);
  const HeatmapSpec& spec() const { return spec_; }
  const std::vector<std::vector<double>>& values() const { return spec_.values; }
  const std::string& title() const { return spec_.title; }
  // Centre of cell (row, col) in widget coordinates, and the cell under a point (-1 if none).
  QPointF cell_center(int row, int col) const;
  std::pair<int, int> cell_at(QPointF point) const;
  // The labels the paint draws, by index: every k-th row / column, k chosen so that none overlap
  // at the current size and type scale. Computed by the code the paint uses.
  std::vector<int> drawn_row_labels() const;
  std::vector<int> drawn_column_labels() const;
  // Where the paint puts a row label's text (widget coordinates), the cells and the colour bar.
  QRectF row_label_rect(int row) const;
  QRectF cells_rect() const;
  QRectF colour_bar_rect() const;
  // The hover text at a point ("row <- column: value", with the spec's row and column notes),
  // empty outside the cells.
  QString readout_at(QPointF point) const;
  // Linked hover: `listener` hears the cell under the mouse ((-1, -1) when it leaves the cells);
  // a marked cell gets a ring (the twin map's hovered cell; (-1, -1): none).
  void set_hover_listener(std::function<void(int, int)> listener);
  void set_marked_cell(int row, int col);
  std::pair<int, int> marked_cell() const { return marked_; }
  std::string csv() const;
  // PNG or SVG by extension.
  void export_image(const std::filesystem::path& path);
  QSize sizeHint() const override { return {460, 380}; }
  QSize minimumSizeHint() const override { return {200, 150}; }

 protected:
  void paintEvent(QPaintEvent*) override;
  void mouseMoveEvent(QMouseEvent* event) override;

 private:
  charts::HeatmapLayout plan() const;  // the shared painter's layout at this size and type scale
  void leaveEvent(QEvent*) override;
  HeatmapSpec spec_;
  std::function<void(int, int)> hover_listener_;
  std::pair<int, int> marked_{-1, -1};
};

class GanttWidget : public QWidget {
 public:
  explicit GanttWidget(QWidget* parent = nullptr);
  // A new chart; the zoom is kept only when the new chart spans the same time.
  void set_spec(ChartSpec spec);
  const ChartSpec& spec() const { return spec_; }

  // The visible time window (the whole chart until zoomed). Mouse wheel or +/- keys zoom around
  // the cursor, dragging or Shift+wheel (horizontal wheel) and the arrow keys pan, a
  // double-click or 0 shows the whole chart again.
  std::pair<double, double> visible_range() const;
  void zoom_at(double factor,
               double widget_x);  // factor > 1 zooms in, keeping widget_x's time in place
  void pan_by_pixels(double dx);  // dx > 0 shows later times
  void reset_zoom();
  // Where box `index` of spec().boxes is drawn (widget coordinates, before the painter's
  // one-pixel minimum), and the box under a point (-1 if none).
  QRectF box_rect(std::size_t index) const;
  int box_at(QPointF pos) const;
  // The hover text at a point: lane, category, the box's label, start and end; empty if no box.
  QString readout_at(QPointF pos) const;
  QString current_readout() const { return hover_text_; }
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override { return {220, 150}; }

 protected:
  void paintEvent(QPaintEvent*) override;
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  void leaveEvent(QEvent* event) override;

 private:
  QString window_note() const;
  // The visible window, the type scale and the note under the legend: how the chart is laid out
  // now.
  charts::GanttView current_view() const;
  void set_window(double start, double end);
  void hover(QPointF pos);
  ChartSpec spec_;
  double start_ = 0, end_ = 0;  // end <= start: the whole chart
  int hover_box_ = -1;
  QPointF hover_pos_;
  QString hover_text_;
  bool dragging_ = false;
  bool pointer_inside_ = false;  // keys zoom around the pointer when it is over the widget
  double drag_x_ = 0;
};

class ChartPanel : public QChartView {
 public:
  explicit ChartPanel(QWidget* parent = nullptr);
  void set_spec(ChartSpec spec);
  const ChartSpec& spec() const { return spec_; }
  // Applies the current type scale (presentation mode) to the chart shown, keeping the series'
  // colours and the axes' ranges that a view may have set after set_spec.
  void refresh();
  // The hover readout at a point in the viewport's coordinates (what mouse events report; the
  // panel has no frame, so they are the panel's too): over a legend entry, its series' full name
  // (a small panel may elide it); else the nearest data point's series, x and y; empty when
  // none is within reach.
  QString readout_at(QPointF pos) const;
  QString current_readout() const { return hover_text_; }
  // Where point `point` of spec().series[series] is drawn, in viewport coordinates.
  QPointF point_position(std::size_t series, std::size_t point) const;
  QSize minimumSizeHint() const override { return {200, 150}; }

 protected:
  void mouseMoveEvent(QMouseEvent* event) override;
  void leaveEvent(QEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  void drawForeground(QPainter* painter, const QRectF& rect) override;

 private:
  struct Hit {
    QString text;
    QPointF scene_position;
    QColor colour;
    bool ring = true;  // a data point (ringed), not a legend entry
  };
  Hit hit_at(QPointF pos) const;
  double effective_scale() const;
  ChartSpec spec_;
  QString hover_text_;
  QPointF hover_point_;
  QColor hover_colour_;
  bool hover_ring_ = true;
  double applied_scale_ = 0;
};

// Long-format CSV of a chart's data (series, x, y): attnres::chart_csv in core.
using attnres::chart_csv;

}  // namespace attnres::gui
