// Gantt charts: the plan of everything paint_gantt places (type, title, lanes, legend keys, time
// ticks), computed once for painting and for the GUI's geometry (gantt_layout), and the painting
// in steps: title, lanes, boxes, then the frame, the time axis, the legend and the note.
#include "gantt_render.hpp"

#include <QFontMetricsF>
#include <QPainter>
#include <algorithm>
#include <cmath>

#include "chart_render_internal.hpp"

namespace attnres::charts {

using namespace detail;

namespace {

// Indexed by GanttCategory.
const QColor kGanttColours[] = {QColor(76, 114, 176), QColor(221, 132, 82), QColor(85, 168, 104),
                                QColor(196, 78, 82)};
static_assert(std::size(kGanttColours) == kGanttCategoryNames.size());

QColor gantt_colour(GanttCategory category) {
  return kGanttColours[static_cast<std::size_t>(category)];
}

// Everything paint_gantt places, computed once for painting and for the GUI's geometry.
struct GanttPlan {
  GanttLayout layout;
  QFont font, title_font;
  double line = 0;
  QStringList title_lines;
  double title_top = 0;
  double tick_top = 0, x_label_top = 0, legend_top = 0, note_top = 0;
  bool show_x_label = true;
  struct Key {
    QRectF swatch;
    QPointF text;
    QString name;
    GanttCategory category;
  };
  std::vector<Key> keys;
  std::vector<double> ticks;
  int decimals = 0;
  int lane_label_every = 1;
};

// The legend keys flow left to right in [left, right] (from y = 0), in as many rows as the width
// needs; returns the number of rows.
double plan_gantt_keys(GanttPlan& plan, const QFontMetricsF& metrics, double left, double right) {
  const double swatch = 0.8 * plan.line;
  double x = left, row = 0;
  for (const auto& [category, category_name] : kGanttCategoryNames) {
    const QString name = QString::fromStdString(std::string(category_name));
    const double w = swatch + 0.4 * plan.line + metrics.horizontalAdvance(name);
    if (x > left && x + w > right) {
      x = left;
      row += 1;
    }
    plan.keys.push_back({QRectF(x, row * plan.line + (plan.line - swatch) / 2, swatch, swatch),
                         QPointF(x + swatch + 0.4 * plan.line, row * plan.line), name, category});
    x += w + 1.5 * plan.line;
  }
  return row + 1;
}

// Time ticks: about one per label width and a half; and every k-th lane named when lanes are
// thinner than a line.
void plan_gantt_ticks(GanttPlan& plan, const QFontMetricsF& metrics) {
  const GanttLayout& layout = plan.layout;
  const double label_w = metrics.horizontalAdvance(QStringLiteral("0000.00")) * 1.5;
  const int target = std::max(2, static_cast<int>(layout.plot.width() / label_w));
  const double step = nice_step(layout.end - layout.start, target);
  plan.decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  for (double t = std::ceil(layout.start / step - 1e-9) * step; t <= layout.end + 1e-9 * step;
       t += step) {
    plan.ticks.push_back(t);
  }
  plan.lane_label_every = std::max(
      1, static_cast<int>(std::ceil(0.95 * plan.line / std::max(1.0, layout.lane_height()))));
}

GanttPlan plan_gantt(const ChartSpec& spec, const QRectF& area, const GanttView& view) {
  GanttPlan plan;
  // Type: the view's scale, and down to 75 % in a small area (a 1024x700 window).
  const double fit =
      std::clamp(std::sqrt(area.width() * area.height() / (640.0 * 260.0)), 0.75, 1.0);
  const double s = (view.font_scale > 0 ? view.font_scale : 1.0) * fit;
  plan.font = font_of_pixels(12 * s, 6);
  plan.title_font = font_of_pixels(14 * s, 7);
  plan.title_font.setBold(true);
  const QFontMetricsF metrics(plan.font), title_metrics(plan.title_font);
  plan.line = metrics.height();
  const bool tight = area.height() < 200 * std::max(1.0, s * 0.8);  // one title line

  // Title: wrapped to two lines at most (one when the area is tight), the last elided.
  plan.title_lines =
      first_lines(wrap_words(QString::fromStdString(spec.title), title_metrics, area.width() - 16),
                  title_metrics, area.width() - 16, tight ? 1 : 2);
  plan.title_top = area.top() + 0.4 * plan.line;
  const double top = plan.title_top +
                     static_cast<double>(plan.title_lines.size()) * title_metrics.lineSpacing() +
                     0.5 * plan.line;

  double lane_w = 0;
  for (const auto& lane : spec.lanes)
    lane_w = std::max(lane_w, metrics.horizontalAdvance(QString::fromStdString(lane)));
  lane_w = std::min(lane_w, 0.3 * area.width());
  const double left = area.left() + lane_w + 0.9 * plan.line;
  const double right = area.right() - 0.9 * plan.line;

  // Legend keys flow left to right under the axis, in as many rows as the width needs.
  double legend_rows = plan_gantt_keys(plan, metrics, left, right);
  plan.show_x_label = !spec.x_label.empty();
  auto below = [&] {
    return 0.3 * plan.line + plan.line                                          // tick labels
           + (plan.show_x_label ? plan.line : 0)                                // axis title
           + (legend_rows > 0 ? 0.4 * plan.line + legend_rows * plan.line : 0)  // legend
           + (view.note.isEmpty() ? 0 : 1.1 * plan.line)                        // note
           + 0.4 * plan.line;
  };
  // In a small area the lanes keep at least ~45 % of the height: the axis title goes first,
  // then the legend (the hover readout names a box's category).
  if (area.bottom() - below() - top < 0.45 * area.height()) plan.show_x_label = false;
  if (area.bottom() - below() - top < 0.45 * area.height()) {
    legend_rows = 0;
    plan.keys.clear();
  }
  const double bottom = std::max(top + 8, area.bottom() - below());

  GanttLayout& layout = plan.layout;
  layout.plot = QRectF(QPointF(left, top), QPointF(std::max(left + 8, right), bottom));
  layout.lanes = std::max(1, static_cast<int>(spec.lanes.size()));
  const double extent = gantt_extent(spec);
  layout.start = 0;
  layout.end = extent;
  if (view.end > view.start) {
    layout.start = view.start;
    layout.end = view.end;
  }
  plan.tick_top = bottom + 0.3 * plan.line;
  plan.x_label_top = plan.tick_top + plan.line;
  plan.legend_top = plan.x_label_top + (plan.show_x_label ? plan.line : 0) + 0.4 * plan.line;
  for (auto& key : plan.keys) {
    key.swatch.translate(0, plan.legend_top);
    key.text += QPointF(0, plan.legend_top);
  }
  plan.note_top = plan.legend_top + legend_rows * plan.line + 0.1 * plan.line;
  plan_gantt_ticks(plan, metrics);
  return plan;
}

// Lanes: alternate shading, names on the left (every k-th when lanes are thinner than a line),
// and the ticks' grid lines.
void paint_gantt_lanes(QPainter& painter, const ChartSpec& spec, const QRectF& area,
                       const GanttPlan& plan) {
  const GanttLayout& layout = plan.layout;
  const QRectF& plot = layout.plot;
  const QFontMetricsF metrics(plan.font);
  for (int lane = 0; lane < layout.lanes; ++lane) {
    const QRectF band(plot.left(), plot.top() + lane * layout.lane_height(), plot.width(),
                      layout.lane_height());
    if (lane % 2 == 1) painter.fillRect(band, QColor(244, 245, 248));
    if (lane % plan.lane_label_every == 0 && static_cast<std::size_t>(lane) < spec.lanes.size()) {
      const QRectF label(area.left() + 2, band.top(), plot.left() - area.left() - 0.4 * plan.line,
                         band.height());
      painter.setPen(Qt::black);
      painter.drawText(
          QRectF(label.left(), band.center().y() - plan.line, label.width(), 2 * plan.line),
          Qt::AlignVCenter | Qt::AlignRight,
          metrics.elidedText(QString::fromStdString(spec.lanes[static_cast<std::size_t>(lane)]),
                             Qt::ElideRight, label.width()));
    }
  }
  painter.setPen(QPen(QColor(215, 215, 215), 1.0));
  for (double t : plan.ticks)
    painter.drawLine(QPointF(layout.x_of(t), plot.top()), QPointF(layout.x_of(t), plot.bottom()));
}

// Boxes. Wide ones get a white separator (back-to-back boxes stay apart) and their tag; narrow
// ones (thousands of micro-batches) are filled on whole pixels without separators or
// antialiasing, so the band keeps the categories' colours instead of turning grey. Then the
// outline of the view's highlighted box.
void paint_gantt_boxes(QPainter& painter, const ChartSpec& spec, const GanttPlan& plan,
                       const GanttView& view) {
  const GanttLayout& layout = plan.layout;
  const QFontMetricsF metrics(plan.font);
  painter.save();
  painter.setClipRect(layout.plot, Qt::IntersectClip);
  for (std::size_t i = 0; i < spec.boxes.size(); ++i) {
    const ChartBox& box = spec.boxes[i];
    if (box.x1 < layout.start || box.x0 > layout.end || box.lane < 0 || box.lane >= layout.lanes)
      continue;
    const QRectF rect = layout.box_rect(box);
    const QColor colour = gantt_colour(box.category);
    if (rect.width() >= 6) {
      painter.setRenderHint(QPainter::Antialiasing, true);
      painter.setPen(QPen(Qt::white, 1.0));
      painter.setBrush(colour);
      painter.drawRect(rect);
      if (!box.tag.empty() && rect.height() >= 0.8 * plan.line) {
        const QString tag = QString::fromStdString(box.tag);
        if (metrics.horizontalAdvance(tag) + 4 <= rect.width()) {
          painter.setPen(Qt::white);
          painter.drawText(rect, Qt::AlignCenter, tag);
        }
      }
    } else {
      painter.setRenderHint(QPainter::Antialiasing, false);
      const double x0 = std::floor(rect.left());
      const double x1 = std::max(x0 + 1, std::round(rect.right()));
      painter.fillRect(
          QRectF(QPointF(x0, std::round(rect.top())), QPointF(x1, std::round(rect.bottom()))),
          colour);
    }
  }
  if (view.highlight >= 0 && static_cast<std::size_t>(view.highlight) < spec.boxes.size()) {
    QRectF rect = layout.box_rect(spec.boxes[static_cast<std::size_t>(view.highlight)]);
    if (rect.width() < 3) rect.adjust(-(3 - rect.width()) / 2, 0, (3 - rect.width()) / 2, 0);
    painter.setRenderHint(QPainter::Antialiasing, true);
    painter.setPen(QPen(Qt::black, 2.0));
    painter.setBrush(Qt::NoBrush);
    painter.drawRect(rect.adjusted(-1, -1, 1, 1));
  }
  painter.restore();
}

// The plot's frame, the time axis (ticks, labels, title), the legend keys and the note.
void paint_gantt_axis_and_legend(QPainter& painter, const ChartSpec& spec, const QRectF& area,
                                 const GanttPlan& plan, const GanttView& view) {
  const GanttLayout& layout = plan.layout;
  const QRectF& plot = layout.plot;
  painter.setRenderHint(QPainter::Antialiasing, false);
  painter.setPen(Qt::black);
  painter.setBrush(Qt::NoBrush);
  painter.drawRect(plot);
  for (double t : plan.ticks) {
    const double x = layout.x_of(t);
    painter.drawLine(QPointF(x, plot.bottom()), QPointF(x, plot.bottom() + 4));
    painter.drawText(QRectF(x - 60, plan.tick_top, 120, plan.line), Qt::AlignHCenter | Qt::AlignTop,
                     QString::number(t, 'f', plan.decimals));
  }
  if (plan.show_x_label) {
    painter.drawText(QRectF(plot.left(), plan.x_label_top, plot.width(), plan.line),
                     Qt::AlignHCenter | Qt::AlignTop, QString::fromStdString(spec.x_label));
  }
  for (const auto& key : plan.keys) {
    painter.fillRect(key.swatch, gantt_colour(key.category));
    painter.drawText(QRectF(key.text, QSizeF(area.right() - key.text.x(), plan.line)),
                     Qt::AlignLeft | Qt::AlignVCenter, key.name);
  }
  if (!view.note.isEmpty()) {
    painter.setPen(QColor(70, 70, 70));
    painter.drawText(QRectF(plot.left(), plan.note_top, plot.width(), plan.line),
                     Qt::AlignLeft | Qt::AlignVCenter,
                     QFontMetricsF(plan.font).elidedText(view.note, Qt::ElideRight, plot.width()));
  }
}

}  // namespace

QRectF GanttLayout::box_rect(const ChartBox& box) const {
  const double y = plot.top() + lane_height() * box.lane;
  const bool transfer = is_transfer(box.category);
  return QRectF(QPointF(x_of(box.x0), y + (transfer ? 0.72 : 0.08) * lane_height()),
                QPointF(x_of(box.x1), y + (transfer ? 0.92 : 0.68) * lane_height()));
}

int GanttLayout::lane_at(double y) const {
  if (y < plot.top() || y >= plot.bottom()) return -1;
  return std::clamp(static_cast<int>((y - plot.top()) / lane_height()), 0, lanes - 1);
}

double gantt_extent(const ChartSpec& spec) {
  double end = 0;
  for (const auto& box : spec.boxes) end = std::max(end, box.x1);
  return end > 0 ? end : 1.0;
}

GanttLayout gantt_layout(const ChartSpec& spec, const QRectF& area, const GanttView& view) {
  return plan_gantt(spec, area, view).layout;
}

void paint_gantt(QPainter& painter, const ChartSpec& spec, const QRectF& area) {
  paint_gantt(painter, spec, area, GanttView());
}

void paint_gantt(QPainter& painter, const ChartSpec& spec, const QRectF& area,
                 const GanttView& view) {
  const GanttPlan plan = plan_gantt(spec, area, view);
  painter.save();
  painter.setClipRect(area);
  painter.fillRect(area, Qt::white);
  draw_title_lines(painter, plan.title_lines, plan.title_font, area.left(), plan.title_top,
                   area.width());
  painter.setFont(plan.font);
  paint_gantt_lanes(painter, spec, area, plan);
  paint_gantt_boxes(painter, spec, plan, view);
  paint_gantt_axis_and_legend(painter, spec, area, plan, view);
  painter.restore();
}

}  // namespace attnres::charts
