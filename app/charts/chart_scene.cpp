// The scene of an xy chart: build_chart turns a ChartSpec (core, Qt-free) into a QChart with its
// axes, series, current-setting marker and overlay (the legend and the readout), in named steps;
// restyle_chart; the mappings between data and chart coordinates; and the queries of Qt's own
// text on the chart (titles, tick labels) that tests and the GUI use.
#include <QGraphicsTextItem>
#include <QtCharts/QCategoryAxis>
#include <QtCharts/QChart>
#include <QtCharts/QLegend>
#include <QtCharts/QLegendMarker>
#include <QtCharts/QLineSeries>
#include <QtCharts/QScatterSeries>
#include <QtCharts/QValueAxis>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <memory>
#include <string>
#include <utility>

#include "chart_render_internal.hpp"

namespace attnres::charts {

using namespace detail;

namespace {

// A new chart titled as the spec says, white, without animations. The overlay draws the legend
// (full names, plain text, wrapped). Qt's legend stays visible and attached (a hidden or detached
// one reports its markers hidden, so a view's marker->setVisible(false) could not be told apart)
// but has no height and is transparent: it takes no room and paints nothing.
std::unique_ptr<QChart> new_chart(const ChartSpec& spec) {
  auto chart = std::make_unique<QChart>();
  chart->setAnimationOptions(QChart::NoAnimation);
  chart->setBackgroundBrush(Qt::white);
  chart->legend()->setAlignment(Qt::AlignBottom);
  chart->legend()->setMaximumHeight(0);
  chart->legend()->setOpacity(0.0);
  chart->legend()->setShowToolTips(false);
  chart->legend()->setAcceptedMouseButtons(Qt::NoButton);
  chart->setTitle(rich(QString::fromStdString(spec.title)));
  return chart;
}

// The data's extent on each axis, and the values drawn against the x and the left y axis.
struct ChartData {
  Range x_range, y_range, y2_range;
  std::vector<double> xs, ys;
  bool secondary = false;  // some series is drawn against the right y axis
};

ChartData chart_data(const ChartSpec& spec) {
  ChartData data;
  for (const auto& series : spec.series) {
    for (const auto& [x, y] : series.points) {
      if (!usable(x, spec.log_x)) continue;
      if (series.secondary_axis) {
        data.x_range.add(x);
        data.xs.push_back(x);
        if (std::isfinite(y)) data.y2_range.add(y);
      } else if (usable(y, spec.log_y)) {
        data.x_range.add(x);
        data.xs.push_back(x);
        data.y_range.add(y);
        data.ys.push_back(y);
      }
    }
    data.secondary = data.secondary || series.secondary_axis;
  }
  return data;
}

// The chart's overlay (owned by the chart), told the spec's titles, the axes and the chart's
// base fonts.
Overlay* add_overlay(QChart* chart, const ChartSpec& spec, const ChartData& data,
                     QAbstractAxis* x_axis, QAbstractAxis* y_axis, QAbstractAxis* y2_axis) {
  auto* overlay = new Overlay(chart);
  overlay->log_x = spec.log_x;
  overlay->log_y = spec.log_y;
  overlay->title = QString::fromStdString(spec.title);
  overlay->x_title = QString::fromStdString(spec.x_label);
  overlay->y_title = QString::fromStdString(spec.y_label);
  overlay->x_axis = x_axis;
  overlay->y_axis = y_axis;
  if (spec.log_x)
    overlay->log_axes.push_back({qobject_cast<QCategoryAxis*>(x_axis), Qt::Horizontal, data.xs});
  if (spec.log_y)
    overlay->log_axes.push_back({qobject_cast<QCategoryAxis*>(y_axis), Qt::Vertical, data.ys});
  for (QAbstractAxis* axis : {y_axis, y2_axis}) {
    auto* value = qobject_cast<QValueAxis*>(axis);
    if (value && !qobject_cast<QCategoryAxis*>(axis))
      overlay->linear_y_axes.emplace_back(value, value->tickCount());
  }
  overlay->base_title = chart->titleFont();
  overlay->base_axis_title = x_axis->titleFont();
  overlay->base_axis_labels = x_axis->labelsFont();
  overlay->base_legend = chart->legend()->font();
  return overlay;
}

// The Qt series of one of spec.series (a scatter, a line, or a line with points; in axis units),
// added to the chart and attached to the x axis and `value_axis`.
// A scheme's colour family from a series name ("" when it names no scheme), lower case.
std::string colour_family(std::string name) {
  const std::string suffix = " validation";
  if (name.size() > suffix.size() &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    name.resize(name.size() - suffix.size());
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto starts = [&](const char* prefix) { return name.rfind(prefix, 0) == 0; };
  if (name.find("fig. 6") != std::string::npos) return "fig6";
  if (starts("published")) return "published";
  if (starts("standard")) return "standard";
  if (starts("full attnres") || starts("full ") || name == "full") return "full";
  if (starts("block attnres") || starts("block ") || starts("block_") || name == "block")
    return "block";
  return "";
}

QXYSeries* add_series(QChart* chart, const ChartSpec& spec, const ChartSeries& series,
                      QAbstractAxis* x_axis, QAbstractAxis* value_axis) {
  QXYSeries* qt_series = nullptr;
  if (series.style == ChartSeries::Style::scatter) {
    auto* scatter = new QScatterSeries;
    scatter->setMarkerSize(10.0);
    qt_series = scatter;
  } else {
    auto* line = new QLineSeries;
    line->setPointsVisible(series.style == ChartSeries::Style::line_and_points);
    qt_series = line;
  }
  qt_series->setName(QString::fromStdString(series.name));
  for (const auto& [x, y] : series.points) {
    if (!usable(x, spec.log_x)) continue;
    if (series.secondary_axis) {
      if (std::isfinite(y)) qt_series->append(to_axis(x, spec.log_x), y);
    } else if (usable(y, spec.log_y)) {
      qt_series->append(to_axis(x, spec.log_x), to_axis(y, spec.log_y));
    }
  }
  chart->addSeries(qt_series);
  qt_series->setColor(series_colour(spec, static_cast<std::size_t>(&series - spec.series.data())));
  qt_series->attachAxis(x_axis);
  qt_series->attachAxis(value_axis);
  return qt_series;
}

// The current-setting marker: a dashed vertical line over the y axis' range at spec.marker_x,
// out of the legend (the readout box names it).
void add_marker(QChart* chart, const ChartSpec& spec, Overlay* overlay, QAbstractAxis* x_axis,
                QAbstractAxis* y_axis) {
  auto* marker = new QLineSeries;
  marker->setName(QString::fromStdString(spec.marker_label));
  QPen pen(Qt::gray);
  pen.setStyle(Qt::DashLine);
  pen.setWidthF(1.5);
  marker->setPen(pen);
  const auto* range = qobject_cast<QValueAxis*>(y_axis);  // QCategoryAxis is one too
  const double x = to_axis(*spec.marker_x, spec.log_x);
  marker->append(x, range->min());
  marker->append(x, range->max());
  chart->addSeries(marker);
  marker->attachAxis(x_axis);
  marker->attachAxis(y_axis);
  overlay->marker_series = marker;
  overlay->marker_x = *spec.marker_x;
  overlay->marker_label = QString::fromStdString(spec.marker_label);
  if (overlay->marker_label.isEmpty())
    overlay->marker_label =
        QString::fromStdString(spec.x_label) + " = " + tick_label(*spec.marker_x);
  for (QLegendMarker* legend_marker : chart->legend()->markers(marker))
    legend_marker->setVisible(false);
}

// Keep the legend right when the chart is resized or a caller hides entries, renames series or
// changes the legend's font after building it.
void keep_laid_out(QChart* chart, Overlay* overlay) {
  QObject::connect(chart, &QGraphicsWidget::geometryChanged, chart,
                   [overlay] { overlay->relayout(); });
  QObject::connect(chart->legend(), &QLegend::fontChanged, chart,
                   [overlay] { overlay->relayout(); });
  QObject::connect(chart, &QChart::plotAreaChanged, chart, [overlay] { overlay->fit_axes(); });
  for (QLegendMarker* legend_marker : chart->legend()->markers()) {
    QObject::connect(legend_marker, &QLegendMarker::visibleChanged, chart,
                     [overlay] { overlay->relayout(); });
    QObject::connect(legend_marker, &QLegendMarker::labelChanged, chart,
                     [overlay] { overlay->relayout(); });
  }
  for (QAbstractSeries* series : chart->series()) {
    QObject::connect(series, &QAbstractSeries::visibleChanged, chart,
                     [overlay] { overlay->relayout(); });
  }
}

// Whether the x axis, and the y axis `series` is drawn against, are log axes.
std::pair<bool, bool> log_scales(const QChart* chart, const QAbstractSeries* series) {
  const Overlay* overlay = overlay_of(chart);
  return {overlay && overlay->log_x, overlay && overlay->log_y && !is_secondary(overlay, series)};
}

// Qt's text items on the chart (its axes' and the title's), with the legend's left out.
void collect_texts(const QChart* chart, const QGraphicsItem* item,
                   std::vector<const QGraphicsTextItem*>& out) {
  for (const QGraphicsItem* child : item->childItems()) {
    if (child == chart->legend() || dynamic_cast<const Overlay*>(child)) continue;
    if (const auto* text = dynamic_cast<const QGraphicsTextItem*>(child)) {
      if (text->isVisible() && !text->toPlainText().isEmpty()) out.push_back(text);
    }
    collect_texts(chart, child, out);
  }
}

QRectF rect_in_chart(const QChart* chart, const QGraphicsItem* item) {
  return item->mapRectToItem(chart, item->boundingRect());
}

}  // namespace

QChart* build_chart(const ChartSpec& spec) {
  return build_chart(spec, ChartStyle());
}

QChart* build_chart(const ChartSpec& spec, const ChartStyle& style) {
  std::unique_ptr<QChart> chart = new_chart(spec);
  const ChartData data = chart_data(spec);
  Range x_range = data.x_range;
  const bool has_marker =
      spec.marker_x && usable(*spec.marker_x, spec.log_x) && !data.y_range.empty();
  if (has_marker) x_range.add(*spec.marker_x);  // the current setting is always in view
  QAbstractAxis* x_axis = make_axis(spec.x_label, spec.log_x, x_range, data.xs);
  QAbstractAxis* y_axis = make_axis(spec.y_label, spec.log_y, data.y_range, data.ys);
  chart->addAxis(x_axis, Qt::AlignBottom);
  chart->addAxis(y_axis, Qt::AlignLeft);
  QAbstractAxis* y2_axis = nullptr;
  if (data.secondary) {
    y2_axis = make_axis(spec.y2_label, false, data.y2_range, {});
    chart->addAxis(y2_axis, Qt::AlignRight);
  }
  Overlay* overlay = add_overlay(chart.get(), spec, data, x_axis, y_axis, y2_axis);
  for (const auto& series : spec.series) {
    QXYSeries* qt_series =
        add_series(chart.get(), spec, series, x_axis, series.secondary_axis ? y2_axis : y_axis);
    if (series.secondary_axis) overlay->secondary.push_back(qt_series);
    if (has_marker) {
      if (auto value =
              value_at(series, *spec.marker_x, spec.log_x, spec.log_y && !series.secondary_axis)) {
        overlay->values.push_back({qt_series, *value, plain_number(*value)});
      }
    }
  }
  if (has_marker) add_marker(chart.get(), spec, overlay, x_axis, y_axis);
  keep_laid_out(chart.get(), overlay);
  overlay->apply_style(style);
  return chart.release();
}

void restyle_chart(QChart* chart, const ChartStyle& style) {
  if (Overlay* overlay = overlay_of(chart)) overlay->apply_style(style);
}

QPointF chart_position(const QChart* chart, QPointF value, const QAbstractSeries* series) {
  const auto [log_x, log_y] = log_scales(chart, series);
  auto* mutable_chart = const_cast<QChart*>(chart);
  return mutable_chart->mapToPosition(
      QPointF(log_x && value.x() > 0 ? std::log10(value.x()) : value.x(),
              log_y && value.y() > 0 ? std::log10(value.y()) : value.y()),
      const_cast<QAbstractSeries*>(series));
}

QPointF chart_value(const QChart* chart, QPointF position, const QAbstractSeries* series) {
  const auto [log_x, log_y] = log_scales(chart, series);
  const QPointF raw =
      const_cast<QChart*>(chart)->mapToValue(position, const_cast<QAbstractSeries*>(series));
  return {from_axis(raw.x(), log_x), from_axis(raw.y(), log_y)};
}

QPointF series_point(const QChart* chart, const QAbstractSeries* series, qsizetype index) {
  const auto* xy = qobject_cast<const QXYSeries*>(series);
  if (!xy || index < 0 || index >= xy->count()) return {};
  const auto [log_x, log_y] = log_scales(chart, series);
  const QPointF p = xy->at(static_cast<int>(index));
  return {from_axis(p.x(), log_x), from_axis(p.y(), log_y)};
}

bool is_marker_series(const QChart* chart, const QAbstractSeries* series) {
  const Overlay* overlay = overlay_of(chart);
  return overlay && series && overlay->marker_series == series;
}

std::vector<DrawnText> chart_texts(const QChart* chart) {
  std::vector<DrawnText> out;
  if (!chart) return out;
  if (Overlay* overlay = overlay_of(chart)) overlay->refresh_if_stale();
  std::vector<const QGraphicsTextItem*> items;
  collect_texts(chart, chart, items);
  for (const QGraphicsTextItem* item : items)
    out.push_back({item->toPlainText(), rect_in_chart(chart, item)});
  return out;
}

QRectF axis_title_rect(const QChart* chart, Qt::Orientation orientation) {
  Overlay* overlay = overlay_of(chart);
  if (!overlay) return {};
  overlay->refresh_if_stale();
  QAbstractAxis* axis = orientation == Qt::Horizontal ? overlay->x_axis : overlay->y_axis;
  if (!axis || !axis->isTitleVisible() || axis->titleText().isEmpty()) return {};
  // The axis' title item: in the axis' title font, under the plot (x) or left of it (y).
  const QRectF plot = chart->plotArea();
  std::vector<const QGraphicsTextItem*> items;
  collect_texts(chart, chart, items);
  for (const QGraphicsTextItem* item : items) {
    if (item->font() != axis->titleFont()) continue;
    const QRectF rect = rect_in_chart(chart, item);
    if (orientation == Qt::Horizontal ? rect.center().y() > plot.bottom()
                                      : rect.center().x() < plot.left())
      return rect;
  }
  return {};
}

QColor series_colour(const ChartSpec& spec, std::size_t index) {
  // For series that name no scheme: colours apart from the schemes' (below), so that a
  // "baseline" never looks like Block AttnRes; neighbours far apart (the light green of the first
  // and the olive of the fifth were next to each other once, and four series looked like three).
  static const QColor palette[] = {
      QColor(153, 202, 83), QColor(23, 190, 207), QColor(227, 119, 194),
      QColor(31, 58, 147),  QColor(188, 189, 34), QColor(140, 86, 75),
      QColor(44, 160, 44),  QColor(214, 39, 40),  QColor(127, 127, 127)};
  if (index >= spec.series.size()) return palette[index % std::size(palette)];
  const std::string family = colour_family(spec.series[index].name);
  if (family.empty()) return palette[index % std::size(palette)];
  const QColor base = family == "standard" ? QColor(90, 90, 90)
                      : family == "full"   ? QColor(246, 166, 37)
                      : family == "block"  ? QColor(32, 159, 223)
                      : family == "fig6"   ? QColor(191, 89, 62)
                                           : QColor(109, 95, 213);  // published
  // Other settings of the same scheme earlier in the chart (Block N = 2 before N = 4): darker.
  auto stem = [](std::string name) {
    const std::string suffix = " validation";
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      name.resize(name.size() - suffix.size());
    return name;
  };
  const std::string own = stem(spec.series[index].name);
  std::vector<std::string> earlier;
  for (std::size_t i = 0; i < index; ++i) {
    const std::string name = stem(spec.series[i].name);
    if (name != own && colour_family(name) == family &&
        std::find(earlier.begin(), earlier.end(), name) == earlier.end())
      earlier.push_back(name);
  }
  return earlier.empty() ? base : base.darker(100 + 45 * static_cast<int>(earlier.size()));
}

}  // namespace attnres::charts
