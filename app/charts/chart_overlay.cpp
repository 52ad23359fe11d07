// The overlay: the renderer's own layer on an xy chart (a QGraphicsItem over Qt's chart, made by
// build_chart). Its style (fonts at the type scale, margins), its layout loop (the legend's room,
// then Qt's layout at once, so that a paint right after a resize draws one layout), its painting
// of the legend, and the readout box at the current-setting marker (spec.marker_x): the marker's
// label and the value of each series there, interpolated in the axes' scales, placed where it
// covers the fewest data points, with a ring where the marker meets each curve. The legend's
// layout steps are in chart_legend.cpp, the axes' fitting in chart_axes.cpp.
#include <QFontMetricsF>
#include <QGraphicsLayout>
#include <QPainter>
#include <QtCharts/QChart>
#include <QtCharts/QLegend>
#include <QtCharts/QLegendMarker>
#include <QtCharts/QScatterSeries>
#include <QtCharts/QXYSeries>
#include <algorithm>
#include <cmath>

#include "chart_render_internal.hpp"

namespace attnres::charts::detail {

std::optional<double> value_at(const ChartSeries& series, double at, bool log_x, bool log_y) {
  std::optional<double> exact;
  for (const auto& [x, y] : series.points) {
    if (usable(x, log_x) && std::isfinite(y) &&
        std::abs(x - at) <= 1e-9 * std::max(1.0, std::abs(at)))
      exact = y;
  }
  if (exact || series.style == ChartSeries::Style::scatter) return exact;
  for (std::size_t i = 0; i + 1 < series.points.size(); ++i) {
    const auto [xa, ya] = series.points[i];
    const auto [xb, yb] = series.points[i + 1];
    if (!usable(xa, log_x) || !usable(xb, log_x) || !std::isfinite(ya) || !std::isfinite(yb))
      continue;
    if ((xa - at) * (xb - at) >= 0) continue;
    const double t =
        (to_axis(at, log_x) - to_axis(xa, log_x)) / (to_axis(xb, log_x) - to_axis(xa, log_x));
    if (log_y && ya > 0 && yb > 0)
      return std::pow(10.0, std::log10(ya) + t * (std::log10(yb) - std::log10(ya)));
    return ya + t * (yb - ya);
  }
  return std::nullopt;
}

Overlay::Overlay(QChart* chart) : QGraphicsItem(chart), chart_(chart) {
  setZValue(1000);
  setAcceptedMouseButtons(Qt::NoButton);
}

std::vector<QLegendMarker*> Overlay::shown_markers() const {
  std::vector<QLegendMarker*> out;
  for (QLegendMarker* marker : chart_->legend()->markers()) {
    if (!marker->isVisible() || !marker->series() || !marker->series()->isVisible()) continue;
    if (marker->series() == marker_series) continue;  // the readout box names the marker
    out.push_back(marker);
  }
  return out;
}

QStringList Overlay::signature() const {
  QStringList out;
  for (QLegendMarker* marker : shown_markers())
    out.push_back(QString::number(reinterpret_cast<quintptr>(marker)) + marker->label());
  out.push_back(QString::number(chart_->size().width()));
  return out;
}

void Overlay::refresh_if_stale() {
  if (signature() != laid_out_) relayout();
}

Overlay* overlay_of(const QChart* chart) {
  if (!chart) return nullptr;
  for (QGraphicsItem* item : chart->childItems()) {
    if (auto* overlay = dynamic_cast<Overlay*>(item)) return overlay;
  }
  return nullptr;
}

void Overlay::apply_style(const ChartStyle& style) {
  font_scale = style.font_scale > 0 ? style.font_scale : 1.0;
  const double s = font_scale;
  auto size_of = [](const QFont& font) {
    return font.pointSizeF() > 0 ? font.pointSizeF() : font.pixelSize() / kPixelsPerPoint;
  };
  // Compact panels: the sizes the GUI always used; files: Qt's theme sizes.
  const double title_pt = style.compact ? 9.0 : size_of(base_title);
  const double axis_title_pt = style.compact ? 8.0 : size_of(base_axis_title);
  const double labels_pt = style.compact ? 7.5 : size_of(base_axis_labels);
  const double legend_pt = style.compact ? 7.5 : size_of(base_legend);
  chart_->setTitleFont(scaled(base_title, title_pt * s));
  for (QAbstractAxis* axis : chart_->axes()) {
    axis->setTitleFont(scaled(base_axis_title, axis_title_pt * s));
    axis->setLabelsFont(scaled(base_axis_labels, labels_pt * s));
  }
  chart_->legend()->setFont(scaled(base_legend, legend_pt * s));
  legend_font = pixel_font(scaled(base_legend, legend_pt * s));
  base_margins = style.compact ? QMargins(4, 2, 6, 2) : QMargins(12, 10, 16, 8);
  if (style.compact) {
    // Panels: the chart's background fills the view (no rounded inset card).
    chart_->setBackgroundRoundness(0);
    if (chart_->layout()) chart_->layout()->setContentsMargins(0, 0, 0, 0);
  }
  relayout();
}

void Overlay::relayout() {
  if (laying_out_) {
    again_ = true;  // e.g. the layout Qt ran resized the chart: once more when this one is done
    return;
  }
  laying_out_ = true;
  for (int pass = 0; pass < 4; ++pass) {
    again_ = false;
    lay_out();
    settle();
    // fit_axes (run by the layout) may have wrapped the x title differently for the new plot
    // width, which changes the room the x axis takes: plan again then.
    const bool title_as_planned = (!x_axis || x_axis->titleText() == planned_x_title_) &&
                                  x_title_fits(chart_->plotArea().width()) == planned_title_fits_;
    if (!again_ && title_as_planned && laid_out_ == signature()) break;
  }
  laying_out_ = false;
  update();
}

void Overlay::settle() {
  // Qt lays charts out on its next event; a paint before that (a screenshot taken right after a
  // resize) would show the plot of the old margins under the legend of the new ones.
  for (int i = 0; i < 3; ++i) {
    QGraphicsLayout* layout = chart_->layout();
    if (!layout || layout->isActivated() || chart_->size().isEmpty()) break;
    layout->activate();
  }
}

Overlay::Readout Overlay::plan_readout() const {
  Readout readout;
  if (!marker_series || !marker_series->isVisible()) return readout;
  const QRectF plot = chart_->plotArea();
  if (plot.width() < 20 || plot.height() < 20) return readout;
  const double marker_pos =
      chart_->mapToPosition(QPointF(to_axis(marker_x, log_x), 0), marker_series).x();
  if (marker_pos < plot.left() - 0.5 || marker_pos > plot.right() + 0.5) return readout;
  const std::optional<QSizeF> size = size_readout(readout, plot);
  if (!size) return Readout{};
  place_readout(readout, *size, marker_pos, plot);
  return readout;
}

std::optional<QSizeF> Overlay::size_readout(Readout& readout, const QRectF& plot) const {
  // The readout's lines and the box's size: one column of values, two when one is too tall,
  // the label alone when the values do not fit the plot; none when not even the label does.
  QFont bold = legend_font;
  bold.setBold(true);
  const QFontMetricsF metrics(legend_font), bold_metrics(bold);
  readout.line_height = metrics.height();
  readout.padding = 0.35 * metrics.height();
  readout.swatch_width = 1.4 * metrics.height();
  readout.lines.push_back(marker_label);
  for (const Value& value : values) {
    if (!value.series->isVisible()) continue;
    readout.values.push_back(&value);
    readout.lines.push_back(value.text);
  }
  double text_w = 0;
  for (const Value* value : readout.values)
    text_w = std::max(text_w, metrics.horizontalAdvance(value->text));
  readout.column_width = readout.swatch_width + 0.3 * metrics.height() + text_w;
  const double header_w = bold_metrics.horizontalAdvance(marker_label);
  const auto n = static_cast<int>(readout.values.size());
  auto size_for = [&](int columns) {
    const int per_column = columns > 0 && n > 0 ? (n + columns - 1) / columns : 0;
    const double w =
        std::max(header_w, columns * readout.column_width + (columns - 1) * 0.8 * metrics.height());
    return QSizeF(w + 2 * readout.padding,
                  (1 + per_column) * readout.line_height + 2 * readout.padding);
  };
  readout.columns = 1;
  QSizeF size = size_for(1);
  if (size.height() > 0.5 * plot.height() && n > 1) size = size_for(++readout.columns);
  if (size.width() > 0.55 * plot.width() || size.height() > 0.5 * plot.height()) {
    // Too small a plot for the values: the label alone (the hover readout still has them).
    readout.values.clear();
    readout.lines = QStringList{marker_label};
    readout.columns = 1;
    size = QSizeF(header_w + 2 * readout.padding, readout.line_height + 2 * readout.padding);
    if (size.width() > plot.width() - 8 || size.height() > plot.height() - 8) return std::nullopt;
  }
  return size;
}

std::vector<QPointF> Overlay::curve_samples() const {
  // The data's points in chart coordinates, and points every ~6 px along the joined curves.
  std::vector<QPointF> samples;
  for (QAbstractSeries* abstract : chart_->series()) {
    auto* series = qobject_cast<QXYSeries*>(abstract);
    if (!series || series == marker_series || !series->isVisible()) continue;
    const QList<QPointF> points = series->points();
    const bool joined = qobject_cast<QScatterSeries*>(series) == nullptr;
    QPointF previous;
    for (qsizetype i = 0; i < points.size(); ++i) {
      const QPointF p = chart_->mapToPosition(points[i], series);
      samples.push_back(p);
      if (joined && i > 0) {
        const double length = std::hypot(p.x() - previous.x(), p.y() - previous.y());
        const int steps = std::min(200, static_cast<int>(length / 6));
        for (int k = 1; k < steps; ++k)
          samples.push_back(previous + (p - previous) * (k / double(steps)));
      }
      previous = p;
    }
  }
  return samples;
}

void Overlay::place_readout(Readout& readout, QSizeF size, double marker_pos,
                            const QRectF& plot) const {
  // Where the box covers the fewest samples of the curves: beside the marker, top or bottom.
  const std::vector<QPointF> samples = curve_samples();
  const double gap = 6;
  const QRectF inner = plot.adjusted(2, 2, -2, -2);
  double best = std::numeric_limits<double>::infinity();
  int preference = 0;
  for (const bool top : {true, false}) {
    for (const bool right_side : {true, false}) {
      QRectF box(QPointF(right_side ? marker_pos + gap : marker_pos - gap - size.width(),
                         top ? inner.top() + 2 : inner.bottom() - 2 - size.height()),
                 size);
      double penalty = 0.1 * preference++;
      if (box.left() < inner.left() || box.right() > inner.right()) {
        box.moveLeft(std::clamp(box.left(), inner.left(), inner.right() - box.width()));
        penalty += 1000;  // over the marker line itself
      }
      double covered = 0;
      for (const QPointF& p : samples) covered += box.adjusted(-3, -3, 3, 3).contains(p) ? 1 : 0;
      if (covered + penalty < best) {
        best = covered + penalty;
        readout.box = box;
      }
    }
  }
}

void Overlay::paint(QPainter* painter, const QStyleOptionGraphicsItem*, QWidget*) {
  const bool stale = signature() != laid_out_;
  if (stale && !relayout_queued_) {
    // Entries were hidden, added or renamed since the layout: lay out again after this paint
    // (the margin changes the chart's layout, which must not happen while painting).
    relayout_queued_ = true;
    QMetaObject::invokeMethod(
        chart_, [this] { relayout(); }, Qt::QueuedConnection);
  }
  painter->save();
  painter->setRenderHint(QPainter::Antialiasing);
  painter->setRenderHint(QPainter::TextAntialiasing);
  painter->setFont(entry_font);
  const QColor text_colour =
      chart_->legend()->labelColor().isValid() ? chart_->legend()->labelColor() : QColor(Qt::black);
  if (!stale) paint_legend(*painter, text_colour);
  const Readout readout = plan_readout();
  if (!readout.box.isEmpty()) paint_readout(*painter, readout, text_colour);
  painter->restore();
}

void Overlay::paint_legend(QPainter& painter, const QColor& text_colour) const {
  for (const LegendEntry& entry : entries) {
    draw_swatch(painter, entry.swatch, entry.marker->series());
    painter.setPen(text_colour);
    if (entry.wrapped) {
      painter.drawText(entry.text_rect, Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap,
                       entry.text);
    } else {
      painter.drawText(entry.text_rect.adjusted(0, 0, 40, 0),
                       Qt::AlignLeft | Qt::AlignTop | Qt::TextSingleLine, entry.text);
    }
  }
}

void Overlay::paint_readout(QPainter& painter, const Readout& readout,
                            const QColor& text_colour) const {
  const QRectF plot = chart_->plotArea();
  // Rings where the marker meets each curve.
  for (const Value& value : values) {
    if (!value.series->isVisible()) continue;
    const bool on_secondary =
        std::find(secondary.begin(), secondary.end(), value.series) != secondary.end();
    const QPointF p = chart_->mapToPosition(
        QPointF(to_axis(marker_x, log_x), on_secondary ? value.value : to_axis(value.value, log_y)),
        value.series);
    if (!plot.adjusted(-1, -1, 1, 1).contains(p)) continue;
    painter.setPen(QPen(value.series->color(), 2.0));
    painter.setBrush(Qt::white);
    painter.drawEllipse(p, 4.5, 4.5);
  }
  painter.setPen(QPen(QColor(120, 120, 120), 1.0));
  painter.setBrush(QColor(255, 255, 255, 235));
  painter.drawRoundedRect(readout.box, 3, 3);
  QFont bold = legend_font;
  bold.setBold(true);
  painter.setFont(bold);
  painter.setPen(text_colour);
  const double x0 = readout.box.left() + readout.padding, y0 = readout.box.top() + readout.padding;
  painter.drawText(QRectF(x0, y0, readout.box.width() - 2 * readout.padding, readout.line_height),
                   Qt::AlignLeft | Qt::AlignVCenter, readout.lines.front());
  painter.setFont(legend_font);
  const int n = static_cast<int>(readout.values.size());
  const int per_column = n > 0 ? (n + readout.columns - 1) / readout.columns : 0;
  for (int i = 0; i < n; ++i) {
    const int column = i / per_column, row = i % per_column;
    const double x = x0 + column * (readout.column_width + 0.8 * readout.line_height);
    const double y = y0 + (1 + row) * readout.line_height;
    draw_swatch(
        painter,
        QRectF(x, y + 0.2 * readout.line_height, readout.swatch_width, 0.6 * readout.line_height),
        readout.values[static_cast<std::size_t>(i)]->series);
    painter.setPen(text_colour);
    painter.drawText(QRectF(x + readout.swatch_width + 0.3 * readout.line_height, y,
                            readout.column_width, readout.line_height),
                     Qt::AlignLeft | Qt::AlignVCenter,
                     readout.values[static_cast<std::size_t>(i)]->text);
  }
}

bool is_secondary(const Overlay* overlay, const QAbstractSeries* series) {
  return overlay && std::find(overlay->secondary.begin(), overlay->secondary.end(), series) !=
                        overlay->secondary.end();
}

}  // namespace attnres::charts::detail

namespace attnres::charts {

using namespace detail;

QStringList marker_readout(const QChart* chart) {
  const Overlay* overlay = overlay_of(chart);
  return overlay ? overlay->plan_readout().lines : QStringList();
}

QRectF marker_readout_rect(const QChart* chart) {
  const Overlay* overlay = overlay_of(chart);
  return overlay ? overlay->plan_readout().box : QRectF();
}

}  // namespace attnres::charts
