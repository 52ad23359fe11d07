// Gantt charts (ChartSpec::Kind::gantt: a pipeline schedule), painted by the renderer itself
// rather than Qt Charts: one lane per entry of spec.lanes, boxes coloured by category (with their
// tag inside when it fits), a time axis, a legend of the categories and an optional note. The CLI
// writes them to files (render_chart_files), the GUI paints and zooms them (GanttView). Included
// by chart_render.hpp, the renderer's entry point.
#pragma once

#include <QRectF>
#include <QString>

#include "attnres/chart_spec.hpp"

QT_BEGIN_NAMESPACE
class QPainter;
QT_END_NAMESPACE

namespace attnres::charts {

// Gantt charts (ChartSpec::Kind::gantt). A view selects the visible time window (the whole
// chart when end <= start), the type scale and an optional note line under the legend; the GUI
// zooms through it. Boxes narrower than a few pixels are drawn without separators and snapped
// to whole pixels, so a schedule with thousands of boxes keeps its colours instead of turning grey.
struct GanttView {
  double start = 0, end = 0;
  double font_scale = 1.0;
  QString note;
  int highlight = -1;  // index into spec.boxes of a box to outline (hover)
};

// The geometry paint_gantt uses: the lanes' rectangle and the time <-> x mapping.
struct GanttLayout {
  QRectF plot;
  double start = 0, end = 1;  // the visible time window
  int lanes = 1;
  double lane_height() const { return plot.height() / lanes; }
  double x_of(double time) const {
    return plot.left() + plot.width() * (time - start) / (end - start);
  }
  double time_at(double x) const {
    return start + (x - plot.left()) / plot.width() * (end - start);
  }
  // The box's rectangle, unclipped and before the one-pixel minimum the painter applies.
  QRectF box_rect(const ChartBox& box) const;
  // The lane under a y coordinate (-1 outside the lanes).
  int lane_at(double y) const;
};

// The last box's end (1 when there are none): the time axis of the whole chart is [0, extent].
double gantt_extent(const ChartSpec& spec);
GanttLayout gantt_layout(const ChartSpec& spec, const QRectF& area,
                         const GanttView& view = GanttView());

// Paints a Gantt chart into `area`: one lane per entry of spec.lanes, boxes coloured by category
// (with their tag inside when it fits), a time axis and a legend. Used for files and by the GUI.
void paint_gantt(QPainter& painter, const ChartSpec& spec, const QRectF& area);
void paint_gantt(QPainter& painter, const ChartSpec& spec, const QRectF& area,
                 const GanttView& view);

}  // namespace attnres::charts
