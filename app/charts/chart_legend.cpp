// The legend of xy charts, drawn by the overlay under the plot (Qt's own legend stays attached
// but takes no room and paints nothing, see build_chart): every entry's full name as plain text,
// wrapped into as many rows as the width needs, the plot area shrunk to make room. In small
// charts the names get smaller type, then share columns (elided), then the x axis title goes:
// the legend never takes the room Qt needs for the x axis' labels, and always names the series.
// Here: the swatches, the plan of the entries, the overlay's layout steps that choose the plan
// and reserve its room, and the queries of what the legend shows.
#include <QFontMetricsF>
#include <QGraphicsLayout>
#include <QPainter>
#include <QPainterPath>
#include <QtCharts/QChart>
#include <QtCharts/QLegend>
#include <QtCharts/QLegendMarker>
#include <QtCharts/QScatterSeries>
#include <QtCharts/QXYSeries>
#include <algorithm>
#include <cmath>

#include "chart_render_internal.hpp"

namespace attnres::charts::detail {

void draw_swatch(QPainter& painter, const QRectF& r, const QAbstractSeries* series) {
  painter.save();
  painter.setRenderHint(QPainter::Antialiasing);
  const QPointF centre = r.center();
  if (const auto* scatter = qobject_cast<const QScatterSeries*>(series)) {
    const double size = std::min(r.height(), 10.0 * r.height() / 12.0);
    QRectF shape(centre.x() - size / 2, centre.y() - size / 2, size, size);
    painter.setPen(QPen(scatter->borderColor(), 1.0));
    painter.setBrush(scatter->color());
    switch (scatter->markerShape()) {
      case QScatterSeries::MarkerShapeRectangle:
        painter.drawRect(shape);
        break;
      case QScatterSeries::MarkerShapeTriangle: {
        QPainterPath path;
        path.moveTo(shape.center().x(), shape.top());
        path.lineTo(shape.bottomRight());
        path.lineTo(shape.bottomLeft());
        path.closeSubpath();
        painter.drawPath(path);
        break;
      }
      default:
        painter.drawEllipse(shape);
    }
  } else if (const auto* xy = qobject_cast<const QXYSeries*>(series)) {
    QPen pen = xy->pen();
    pen.setWidthF(std::clamp(pen.widthF(), 1.5, 3.0));
    pen.setCapStyle(Qt::FlatCap);
    painter.setPen(pen);
    painter.drawLine(QPointF(r.left(), centre.y()), QPointF(r.right(), centre.y()));
    if (xy->pointsVisible()) {
      painter.setPen(Qt::NoPen);
      painter.setBrush(xy->color());
      const double dot = std::max(3.0, r.height() * 0.4);
      painter.drawEllipse(centre, dot / 2, dot / 2);
    }
  }
  painter.restore();
}

// The renderer's own layer on a chart: the legend under the plot and the marker readout.
LegendPlan plan_legend(std::vector<LegendEntry> entries, const QFont& font, double left,
                       double available, int columns) {
  LegendPlan plan;
  plan.font = font;
  const QFontMetricsF metrics(font);
  const double em = metrics.height();
  const double swatch_w = 2.0 * em, gap = 0.4 * em, spacing = 1.3 * em, row_gap = 0.25 * em;
  if (columns > 0) {
    const double column_w = (available - (columns - 1) * spacing) / columns;
    const int count = static_cast<int>(entries.size());
    double used = 0;
    for (int i = 0; i < count; ++i) {
      LegendEntry& entry = entries[static_cast<std::size_t>(i)];
      entry.text = metrics.elidedText(entry.text, Qt::ElideRight, column_w - swatch_w - gap);
      used = std::max(used, (i % columns) * (column_w + spacing) + swatch_w + gap +
                                metrics.horizontalAdvance(entry.text));
    }
    const double x0 = left + std::max(0.0, (available - used) / 2);
    for (int i = 0; i < count; ++i) {
      LegendEntry& entry = entries[static_cast<std::size_t>(i)];
      const double x = x0 + (i % columns) * (column_w + spacing),
                   y = (i / columns) * (em + row_gap);
      entry.swatch = QRectF(x, y + 0.125 * em, swatch_w, 0.75 * em);
      entry.text_rect = QRectF(x + swatch_w + gap, y, column_w - swatch_w - gap + 1, em);
    }
    const int rows = (count + columns - 1) / columns;
    plan.height = rows * (em + row_gap);
    plan.entries = std::move(entries);
    return plan;
  }
  struct Row {
    std::vector<std::size_t> items;
    double width = 0, height = 0;
  };
  std::vector<Row> rows(1);
  std::vector<QSizeF> sizes;
  for (const auto& entry : entries) {
    QSizeF size(swatch_w + gap + metrics.horizontalAdvance(entry.text), em);
    if (size.width() > available) {
      const QRectF bounds = metrics.boundingRect(QRectF(0, 0, available - swatch_w - gap, 1e6),
                                                 Qt::TextWordWrap, entry.text);
      size = QSizeF(available, std::max(em, bounds.height()));
      entries[sizes.size()].wrapped = true;  // sizes holds the entries before this one
    }
    sizes.push_back(size);
    Row& row = rows.back();
    const double needed = row.items.empty() ? size.width() : row.width + spacing + size.width();
    if (!row.items.empty() && needed > available) {
      Row next;
      next.items.push_back(sizes.size() - 1);
      next.width = size.width();
      next.height = size.height();
      rows.push_back(next);
    } else {
      row.items.push_back(sizes.size() - 1);
      row.width = needed;
      row.height = std::max(row.height, size.height());
    }
  }
  double y = 0;
  for (const Row& row : rows) {
    if (row.items.empty()) continue;
    double x = left + std::max(0.0, (available - row.width) / 2);
    for (std::size_t i : row.items) {
      LegendEntry& entry = entries[i];
      entry.swatch = QRectF(x, y + 0.125 * em, swatch_w, 0.75 * em);
      entry.text_rect =
          QRectF(x + swatch_w + gap, y, sizes[i].width() - swatch_w - gap + 1, sizes[i].height());
      x += sizes[i].width() + spacing;
    }
    y += row.height + row_gap;
  }
  plan.height = y;
  plan.entries = std::move(entries);
  return plan;
}

double legend_gap(const LegendPlan& plan) {
  return plan.height > 0 ? 0.3 * QFontMetricsF(plan.font).height() : 0.0;
}

void Overlay::lay_out() {
  // QLegend::setFont hides the legend's items until its layout runs again, and a hidden item
  // reads as an entry a view hid: show them now (the legend itself is transparent).
  if (QGraphicsLayout* legend_layout = chart_->legend()->layout();
      legend_layout && !legend_layout->isActivated()) {
    legend_layout->activate();
  }
  const QRectF area(QPointF(0, 0), chart_->size());
  if (area != bounds_) {
    prepareGeometryChange();
    bounds_ = area;
  }
  const double left = area.left() + base_margins.left() + 4,
               right = area.right() - base_margins.right() - 4;
  const double available = std::max(40.0, right - left);
  entries.clear();
  for (QLegendMarker* marker : shown_markers()) {
    LegendEntry entry;
    entry.marker = marker;
    entry.text = marker->label();
    entries.push_back(entry);
  }
  laid_out_ = signature();
  relayout_queued_ = false;
  const QString wrapped_title = lay_out_title(area);

  // The room under the plot. Top to bottom Qt stacks the title, the plot and the x axis (tick
  // labels, then its title) above the bottom margin, which holds the legend; it gives the x
  // axis at most 40 % of the height left after the title and the margins and elides its labels
  // and title past that. So the legend may take what leaves the x axis its room
  // (`budget`), and by choice at most ~40 % of the chart's height (`most`).
  qreal layout_left = 0, layout_top = 0, layout_right = 0, layout_bottom = 0;
  if (chart_->layout())
    chart_->layout()->getContentsMargins(&layout_left, &layout_top, &layout_right, &layout_bottom);
  const double title_height =
      wrapped_title.isEmpty() ? 0.0 : qt_text_size(chart_->titleFont(), wrapped_title).height() + 1;
  const double plot_width =
      chart_->plotArea().width() > 0 ? chart_->plotArea().width() : 0.75 * area.width();
  planned_x_title_ = x_title_text(plot_width);
  planned_title_fits_ = x_title_fits(plot_width);
  const double fixed =
      layout_top + layout_bottom + base_margins.top() + base_margins.bottom() + title_height;
  auto budget = [&](bool with_title) {
    return area.height() - fixed - x_axis_height(planned_x_title_, with_title) / 0.4 - 2;
  };
  const double most = area.height() > 0 ? (area.height() < 260 ? 0.3 : 0.4) * area.height() : 1e9;

  // Every name in full, wrapped into rows, in the legend's type or down to 80 % of it; past that
  // (many long names in a small chart) the names share columns and are elided to them (the
  // GUI's hover readout has them in full), as long as each keeps a few characters. If even that
  // leaves the x axis too little room, the x axis title goes first, then the names get narrower
  // columns: the legend always names its series. (The title also goes when a word of it is wider
  // than the plot: Qt would elide it, and squeeze the tick labels with it.)
  std::optional<LegendPlan> chosen;
  bool with_title = true;
  if (entries.empty()) {
    chosen = LegendPlan{};
    with_title = planned_title_fits_;
  } else if (planned_title_fits_ &&
             (chosen = fit_legend(std::min(most, budget(true)), 6.0, left, available))) {
    with_title = true;
  } else if ((chosen = fit_legend(std::min(most, budget(false)), 6.0, left, available)) ||
             (chosen = fit_legend(budget(false), 3.0, left, available))) {
    with_title = false;
  } else {
    with_title = false;
    chosen = crowded_legend(left, available);
  }
  if (x_axis && !x_title.isEmpty() && x_axis->isTitleVisible() != with_title)
    x_axis->setTitleVisible(with_title);
  place_legend(*chosen, area);
  fit_axes();
}

QString Overlay::lay_out_title(const QRectF& area) {
  // The chart title: Qt truncates it to the width with "..."; wrap it onto lines instead (one
  // in a small panel, elided).
  QString wrapped_title;
  if (area.width() > 0) {
    const int lines = area.height() < 220 ? 1 : (area.height() < 400 ? 2 : 3);
    wrapped_title =
        wrapped_rich(title, chart_->titleFont(),
                     area.width() - base_margins.left() - base_margins.right() - 8, lines);
    if (wrapped_title.contains("<br>")) wrapped_title = "<center>" + wrapped_title + "</center>";
    if (chart_->title() != wrapped_title) chart_->setTitle(wrapped_title);
  }
  return wrapped_title;
}

std::optional<LegendPlan> Overlay::fit_legend(double limit, double min_text_em, double left,
                                              double available) const {
  // The full names in rows at 100, 90 or 80 % type; then that type in 1, 2, ... columns while
  // each column keeps `min_text_em` of text; the first plan (and its gap) within `limit`.
  LegendPlan plan;
  for (const double factor : {1.0, 0.9, 0.8}) {
    QFont font = legend_font;
    font.setPixelSize(std::max(7, static_cast<int>(std::lround(legend_font.pixelSize() * factor))));
    plan = plan_legend(entries, font, left, available, 0);
    if (plan.height + legend_gap(plan) <= limit) return plan;
  }
  const QFont font = plan.font;
  const double em = QFontMetricsF(font).height();
  for (int columns = 1; columns <= static_cast<int>(entries.size()); ++columns) {
    // A column: swatch (2 em), gap (0.4 em), the text; columns 1.3 em apart.
    const double text_w = (available - (columns - 1) * 1.3 * em) / columns - 2.4 * em;
    if (text_w < min_text_em * em) break;
    plan = plan_legend(entries, font, left, available, columns);
    if (plan.height + legend_gap(plan) <= limit) return plan;
  }
  return std::nullopt;
}

LegendPlan Overlay::crowded_legend(double left, double available) const {
  // No room even so: the fewest rows of names that keep two characters each, at 80 % type
  // (the plot and the x axis' labels get what is left).
  QFont font = legend_font;
  font.setPixelSize(std::max(7, static_cast<int>(std::lround(legend_font.pixelSize() * 0.8))));
  const double em = QFontMetricsF(font).height();
  int columns = 1;
  while (columns < static_cast<int>(entries.size()) &&
         (available - columns * 1.3 * em) / (columns + 1) - 2.4 * em >= 2.0 * em) {
    ++columns;
  }
  return plan_legend(entries, font, left, available, columns);
}

void Overlay::place_legend(const LegendPlan& plan, const QRectF& area) {
  // The plan's entries at the bottom of the chart, and the bottom margin that keeps the plot
  // (and its x axis) above them.
  entries = plan.entries;
  entry_font = plan.font;
  const double legend_height = plan.height;
  const double legend_top = area.bottom() - base_margins.bottom() - legend_height;
  for (LegendEntry& entry : entries) {
    entry.swatch.translate(0, legend_top);
    entry.text_rect.translate(0, legend_top);
  }
  const int bottom_margin =
      base_margins.bottom() + static_cast<int>(std::ceil(legend_height + legend_gap(plan)));
  const QMargins margins(base_margins.left(), base_margins.top(), base_margins.right(),
                         bottom_margin);
  if (chart_->margins() != margins) chart_->setMargins(margins);
}

}  // namespace attnres::charts::detail

namespace attnres::charts {

using namespace detail;

QStringList legend_entries(const QChart* chart) {
  QStringList out;
  if (Overlay* overlay = overlay_of(chart)) {
    overlay->refresh_if_stale();
    for (const auto& entry : overlay->entries) out.push_back(entry.text);
  }
  return out;
}

std::vector<QRectF> legend_entry_rects(const QChart* chart) {
  std::vector<QRectF> out;
  if (Overlay* overlay = overlay_of(chart)) {
    overlay->refresh_if_stale();
    for (const auto& entry : overlay->entries) out.push_back(entry.swatch.united(entry.text_rect));
  }
  return out;
}

QAbstractSeries* legend_series_at(const QChart* chart, QPointF position) {
  if (Overlay* overlay = overlay_of(chart)) {
    overlay->refresh_if_stale();
    for (const auto& entry : overlay->entries) {
      if (entry.swatch.united(entry.text_rect).contains(position)) return entry.marker->series();
    }
  }
  return nullptr;
}

}  // namespace attnres::charts
