// Internal to app/charts (not API: the GUI and the CLI include chart_render.hpp): the helpers the
// renderer's files share, declared once. Type and text (pixel-sized fonts, Qt Charts' rich text,
// wrapped titles, drawn title lines; chart_text.cpp), axis scales and ticks (chart_axes.cpp), the
// legend's plan (chart_legend.cpp) and the Overlay, the renderer's own layer on an xy chart that
// draws the legend and the marker readout and fits the axes to the plot (chart_overlay.cpp,
// chart_legend.cpp, chart_axes.cpp); chart_scene.cpp builds the chart and its overlay.
#pragma once

#include <QFont>
#include <QGraphicsItem>
#include <QMargins>
#include <QRectF>
#include <QString>
#include <QStringList>
#include <algorithm>
#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chart_render.hpp"

QT_BEGIN_NAMESPACE
class QAbstractAxis;
class QPainter;
class QCategoryAxis;
class QLegendMarker;
class QValueAxis;
class QXYSeries;
QT_END_NAMESPACE

namespace attnres::charts::detail {

// ---- Type and text (chart_text.cpp) -----------------------------------------------------------

// Fonts the renderer paints itself are sized in pixels (a point at 96 dpi), so that what it
// measures is what it draws on every device (PNG, SVG at 72 dpi, the screen).
constexpr double kPixelsPerPoint = 96.0 / 72.0;

// `font` at its size in pixels (a point is kPixelsPerPoint pixels).
QFont pixel_font(QFont font);
// The default font at `pixels` pixels (rounded, at least `smallest`): Gantt charts and heatmaps.
QFont font_of_pixels(double pixels, int smallest);
// `font` at `points` points (at least one).
QFont scaled(QFont font, double points);

// Qt Charts reads titles, axis titles and legend names as rich text: plain text must be escaped.
QString rich(const QString& plain);

// `text` as rich text wrapped to `width` in at most `most` lines (Qt truncates what still does not
// fit).
QString wrapped_rich(const QString& text, const QFont& font, double width, int most = 3);

// The first `most` of `lines`, the last of them holding the rest of the text, elided to `width`.
QStringList first_lines(const QStringList& lines, const QFontMetricsF& metrics, double width,
                        int most);

// Draws `lines` (a title) in `font`, in black, one line spacing apart from `top`, each centred
// in [left, left + width]: the titles of Gantt charts and heatmaps.
void draw_title_lines(QPainter& painter, const QStringList& lines, const QFont& font, double left,
                      double top, double width);

// The size Qt Charts gives a text (title, axis title, tick label): it lays them out as
// QGraphicsTextItems with a half-pixel document margin, and so is this one.
QSizeF qt_text_size(const QFont& font, const QString& html);

// ---- Axis scales and ticks (chart_axes.cpp) ---------------------------------------------------

struct Range {
  double low = std::numeric_limits<double>::infinity();
  double high = -std::numeric_limits<double>::infinity();
  void add(double v) {
    low = std::min(low, v);
    high = std::max(high, v);
  }
  bool empty() const { return !(low <= high); }
};

// Whether a value can be drawn on an axis (finite, and positive on a log axis), and the value
// in the axis' units (log10 of it on a log axis) and back.
bool usable(double v, bool logarithmic);
double to_axis(double v, bool logarithmic);
double from_axis(double v, bool logarithmic);

// A 1-2-5 step that cuts `span` into about `target_ticks` parts.
double nice_step(double span, int target_ticks);

// How a tick value is labelled; how a readout value is printed (four significant digits).
QString tick_label(double v);
QString plain_number(double v);

// Gives a log axis (a value axis over log10 of the data) labelled ticks for at most `most` labels;
// `keep` may drop some (a label that would stick out of the chart).
void set_log_ticks(QCategoryAxis* axis, const std::vector<double>& data, std::size_t most,
                   const std::function<bool(double, const QString&)>& keep = {});

// A new axis titled `title` over `range` (a log axis: a QCategoryAxis over log10 of the data,
// with ticks chosen for `data`), padded and with nice numbers.
QAbstractAxis* make_axis(const std::string& title, bool logarithmic, Range range,
                         const std::vector<double>& data);

// ---- The overlay (chart_overlay.cpp, chart_legend.cpp, chart_axes.cpp) ------------------------

// The value of a series at x = `at` (spec units): a point exactly there (the last one, for step
// curves), else linear interpolation between the neighbours in the axes' scales (log10 of x on
// a log x axis, of y on a log y axis). Scatter series have values only at their points.
std::optional<double> value_at(const ChartSeries& series, double at, bool log_x, bool log_y);

// A legend sample of a series in `r`: its line (pen, dashes) and point, or its scatter marker.
void draw_swatch(QPainter& painter, const QRectF& r, const QAbstractSeries* series);

struct LegendEntry {
  QLegendMarker* marker;
  QString text;
  QRectF swatch, text_rect;
  bool wrapped = false;  // the text takes several lines
};

struct LegendPlan {
  std::vector<LegendEntry> entries;
  QFont font;
  double height = 0;
};

// Places legend entries under one another from y = 0. columns == 0: a flow, left to right, a new
// row when the next entry does not fit, an entry wider than the whole width wrapped onto several
// lines, rows centred. columns > 0: a grid, row by row, each name elided to its column.
LegendPlan plan_legend(std::vector<LegendEntry> entries, const QFont& font, double left,
                       double available, int columns);

// The renderer's own layer on a chart: the legend under the plot and the marker readout.
class Overlay final : public QGraphicsItem {
 public:
  explicit Overlay(QChart* chart);
  QRectF boundingRect() const override { return bounds_; }
  void paint(QPainter* painter, const QStyleOptionGraphicsItem*, QWidget*) override;

  // Lays the legend out for the chart's size, reserves room for it under the plot (the bottom
  // margin), wraps the title and axis titles to the space they have, and has Qt lay the chart out
  // at once (not at its next event), so that a paint right after a resize or a restyle (a
  // screenshot) draws the plot, the axes and the legend of one and the same layout.
  void relayout();
  void fit_axes();
  // The x axis title as Qt gets it: wrapped onto two lines when longer than the plot's width.
  QString x_title_text(double plot_width) const;
  // Whether each word of the x title fits the plot's width (Qt elides a longer one).
  bool x_title_fits(double plot_width) const;
  // The height Qt gives the x axis under the plot (tick labels, their padding and, when shown,
  // the title), as Qt Charts computes it; Qt squeezes (elides) the axis past 40 % of the height
  // left for the plot and its axes.
  double x_axis_height(const QString& title_text, bool with_title) const;
  // The legend's entries: the markers shown (a view may hide some after building the chart;
  // QLegendMarker has no reliable signal for that, so paint and the queries compare signatures).
  std::vector<QLegendMarker*> shown_markers() const;
  QStringList signature() const;
  // Lays out again now if what the legend shows changed since the last layout.
  void refresh_if_stale();
  void apply_style(const ChartStyle& style);

  struct Value {
    QXYSeries* series;
    double value;  // spec units
    QString text;
  };
  struct Readout {
    QRectF box;
    QStringList lines;  // label, then one per value shown
    std::vector<const Value*> values;
    int columns = 1;
    double line_height = 0, swatch_width = 0, column_width = 0, padding = 0;
  };
  Readout plan_readout() const;

  QChart* chart_;
  bool log_x = false, log_y = false;
  QString title, x_title, y_title;
  QAbstractAxis *x_axis = nullptr, *y_axis = nullptr;
  struct LogAxis {
    QCategoryAxis* axis;
    Qt::Orientation orientation;
    std::vector<double> data;  // the values drawn against it (powers of two get their own ticks)
  };
  std::vector<LogAxis> log_axes;
  std::vector<std::pair<QValueAxis*, int>>
      linear_y_axes;  // with the tick count applyNiceNumbers chose
  std::vector<const QAbstractSeries*> secondary;
  QFont base_title, base_axis_title, base_axis_labels, base_legend;
  QFont legend_font;  // the readout's; the legend's own may be smaller (entry_font)
  QFont entry_font;
  double font_scale = 1.0;
  QMargins base_margins;
  QXYSeries* marker_series = nullptr;
  double marker_x = 0;  // spec units
  QString marker_label;
  std::vector<Value> values;
  std::vector<LegendEntry> entries;
  QRectF bounds_;
  bool laying_out_ = false;
  bool again_ = false;  // a relayout was asked for while laying out
  QStringList laid_out_;
  bool relayout_queued_ = false;
  QString planned_x_title_;  // the x title text the last layout planned the room for
  bool planned_title_fits_ = true;

 private:
  // chart_legend.cpp: the layout's steps.
  void lay_out();
  QString lay_out_title(const QRectF& area);
  std::optional<LegendPlan> fit_legend(double limit, double min_text_em, double left,
                                       double available) const;
  LegendPlan crowded_legend(double left, double available) const;
  void place_legend(const LegendPlan& plan, const QRectF& area);
  // chart_overlay.cpp.
  void settle();
  std::optional<QSizeF> size_readout(Readout& readout, const QRectF& plot) const;
  std::vector<QPointF> curve_samples() const;
  void place_readout(Readout& readout, QSizeF size, double marker_pos, const QRectF& plot) const;
  void paint_legend(QPainter& painter, const QColor& text_colour) const;
  void paint_readout(QPainter& painter, const Readout& readout, const QColor& text_colour) const;
};

// The gap between the plot and a legend of this plan.
double legend_gap(const LegendPlan& plan);

// The chart's overlay (null for a chart build_chart did not make), and whether `series` is drawn
// against the secondary (right, linear) y axis.
Overlay* overlay_of(const QChart* chart);
bool is_secondary(const Overlay* overlay, const QAbstractSeries* series);

}  // namespace attnres::charts::detail
