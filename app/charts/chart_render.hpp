// The one place that turns a ChartSpec (core, Qt-free) into Qt Charts: the CLI's report figures
// and the GUI's views both go through build_chart, so the same scenario gives the same chart.
// This header is the renderer's entry point: it declares the xy charts and includes the Gantt
// charts (gantt_render.hpp) and the export to files (chart_export.hpp).
//
// What the renderer adds to Qt Charts (for files and the GUI alike):
//  - its own legend under the plot: every entry's full name as plain text (Qt's legend reads
//    names as rich text, so "claim: < 0.04" lost its tail, and it truncates long names), wrapped
//    into as many rows as the width needs; the plot area shrinks to make room. In small charts
//    the names get smaller type, then share columns (elided), then the x axis title goes: the
//    legend never takes the room Qt needs for the x axis' labels, and always names the series;
//  - logarithmic axes with at least three labelled ticks whenever the range allows (Qt's
//    QLogValueAxis labels only powers of the base, so a range inside one decade had one label);
//  - a readout box at the current-setting marker (spec.marker_x): the marker's label and the
//    value of each series there, interpolated in the axes' scales, placed where it covers the
//    fewest data points, with a ring where the marker meets each curve.
//
// Where the code is, by job: chart_scene.cpp (build_chart, coordinates, Qt's texts),
// chart_axes.cpp (scales, log ticks, fitting the axes), chart_legend.cpp (the legend),
// chart_overlay.cpp (the overlay's style, layout loop, painting and the marker readout),
// gantt_render.cpp, chart_export.cpp, chart_text.cpp (type and wrapping for every painter), with
// their shared helpers in chart_render_internal.hpp; heatmaps are heatmap_render.hpp.
#pragma once

#include <QColor>
#include <QPointF>
#include <QRectF>
#include <QString>
#include <QStringList>
#include <cstddef>
#include <vector>

#include "attnres/chart_spec.hpp"
#include "chart_export.hpp"
#include "gantt_render.hpp"

QT_BEGIN_NAMESPACE
class QFontMetricsF;
class QChart;
class QAbstractSeries;
QT_END_NAMESPACE

namespace attnres::charts {

// How a chart is dressed. Files use Qt's default type at scale 1; the GUI's panels are compact
// (smaller type, thin margins) and multiply every font by the presentation-mode scale.
struct ChartStyle {
  double font_scale = 1.0;
  bool compact = false;
};

// A new chart (caller owns it): axes with the spec's labels, log axes where asked, series,
// the current-setting marker with its readout, the legend under the plot, no animations.
// Log axes are value axes over log10 of the data (the series hold log10 values on such an axis):
// use chart_position / chart_value below to go between data and chart coordinates.
QChart* build_chart(const ChartSpec& spec);
QChart* build_chart(const ChartSpec& spec, const ChartStyle& style);

// The colour of series `index` of `spec`: one colour per scheme wherever it is drawn (a view, a
// report's PNG or SVG, an export) — the standard residual dark grey, Full AttnRes orange, Block
// AttnRes blue (a second or third Block setting in the same chart a darker blue), the paper's
// Fig. 6 losses red-brown, the published band purple; a series whose name ends in " validation"
// takes its scheme's colour; any other series a colour for its place, apart from the schemes'.
QColor series_colour(const ChartSpec& spec, std::size_t index);

// Applies a style's fonts to a chart made by build_chart (title, axes, legend, readout) and lays
// its legend out again; series colours and axis ranges set since are kept.
void restyle_chart(QChart* chart, const ChartStyle& style);

// Where a data point (in the spec's units) of `series` lies in chart coordinates, and back.
QPointF chart_position(const QChart* chart, QPointF value, const QAbstractSeries* series);
QPointF chart_value(const QChart* chart, QPointF position, const QAbstractSeries* series);
// Point `index` of a series of the chart in the spec's units (the series hold axis units).
QPointF series_point(const QChart* chart, const QAbstractSeries* series, qsizetype index);
// Whether a series is the chart's current-setting marker line (not data).
bool is_marker_series(const QChart* chart, const QAbstractSeries* series);

// What the renderer drew, computed by the code that paints it (for tests and the GUI):
// the legend's entries (full text, in order) and their rectangles, in chart coordinates;
QStringList legend_entries(const QChart* chart);
std::vector<QRectF> legend_entry_rects(const QChart* chart);
// the series of the legend entry at a point (chart coordinates), null if none: the GUI shows
// its full name there, as a small chart may elide it;
QAbstractSeries* legend_series_at(const QChart* chart, QPointF position);
// the marker readout's lines (label first, then one value per series that has one) and its box
// (empty when the chart has no marker or the box does not fit);
QStringList marker_readout(const QChart* chart);
QRectF marker_readout_rect(const QChart* chart);
// the labels of an axis' ticks, low to high (Qt::Horizontal: x; Qt::Vertical: the left y axis).
QStringList axis_tick_labels(const QChart* chart, Qt::Orientation orientation);
// Qt's own text as it is drawn (chart title, axis titles, tick labels; not the legend): the
// plain text (with "..." where Qt elided it) and its rectangle in chart coordinates;
struct DrawnText {
  QString text;
  QRectF rect;
};
std::vector<DrawnText> chart_texts(const QChart* chart);
// where an axis' title is drawn (Qt::Horizontal: x; Qt::Vertical: the left y axis), empty when
// it is not: a chart too short for the legend and the x axis title drops the title first.
QRectF axis_title_rect(const QChart* chart, Qt::Orientation orientation);

// Greedy word wrap of `text` to `width` (a word longer than the width gets a line of its own; an
// empty text one empty line). Titles of charts, heatmaps and Gantt charts wrap with it.
QStringList wrap_words(const QString& text, const QFontMetricsF& metrics, double width);

}  // namespace attnres::charts
