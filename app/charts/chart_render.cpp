#include "chart_render.hpp"

#include <unistd.h>

#include <QApplication>
#include <QBuffer>
#include <QDir>
#include <QFile>
#include <QFontMetricsF>
#include <QGraphicsLayout>
#include <QGraphicsScene>
#include <QGraphicsTextItem>
#include <QPainter>
#include <QPainterPath>
#include <QSvgGenerator>
#include <QTextDocument>
#include <QtCharts/QCategoryAxis>
#include <QtCharts/QChart>
#include <QtCharts/QLegend>
#include <QtCharts/QLegendMarker>
#include <QtCharts/QLineSeries>
#include <QtCharts/QScatterSeries>
#include <QtCharts/QValueAxis>
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <optional>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"

namespace attnres::charts {

QStringList wrap_words(const QString& text, const QFontMetricsF& metrics, double width) {
  QStringList lines;
  QString line;
  for (const QString& word : text.split(' ', Qt::SkipEmptyParts)) {
    const QString candidate = line.isEmpty() ? word : line + ' ' + word;
    if (!line.isEmpty() && metrics.horizontalAdvance(candidate) > width) {
      lines.push_back(line);
      line = word;
    } else {
      line = candidate;
    }
  }
  if (!line.isEmpty() || lines.isEmpty()) lines.push_back(line);
  return lines;
}

namespace {

// Fonts the renderer paints itself are sized in pixels (a point at 96 dpi), so that what it
// measures is what it draws on every device (PNG, SVG at 72 dpi, the screen).
constexpr double kPixelsPerPoint = 96.0 / 72.0;

QFont pixel_font(QFont font) {
  const double points =
      font.pointSizeF() > 0 ? font.pointSizeF() : font.pixelSize() / kPixelsPerPoint;
  font.setPixelSize(std::max(1, static_cast<int>(std::lround(points * kPixelsPerPoint))));
  return font;
}

QFont scaled(QFont font, double points) {
  font.setPointSizeF(std::max(1.0, points));
  return font;
}

// Qt Charts reads titles, axis titles and legend names as rich text: plain text must be escaped.
QString rich(const QString& plain) {
  return plain.toHtmlEscaped();
}

struct Range {
  double low = std::numeric_limits<double>::infinity();
  double high = -std::numeric_limits<double>::infinity();
  void add(double v) {
    low = std::min(low, v);
    high = std::max(high, v);
  }
  bool empty() const { return !(low <= high); }
};

bool usable(double v, bool logarithmic) {
  return std::isfinite(v) && (!logarithmic || v > 0);
}
double to_axis(double v, bool logarithmic) {
  return logarithmic ? std::log10(v) : v;
}
double from_axis(double v, bool logarithmic) {
  return logarithmic ? std::pow(10.0, v) : v;
}

double nice_step(double span, int target_ticks) {
  if (!(span > 0)) return 1.0;
  const double raw = span / std::max(1, target_ticks);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= factor * magnitude * (1 + 1e-9)) return factor * magnitude;
  }
  return 10.0 * magnitude;
}

// Every k-th element so that at most `most` remain (always the first).
std::vector<double> thinned(const std::vector<double>& ticks, std::size_t most) {
  if (ticks.size() <= most) return ticks;
  const std::size_t every = (ticks.size() + most - 1) / most;
  std::vector<double> out;
  for (std::size_t i = 0; i < ticks.size(); i += every) out.push_back(ticks[i]);
  return out;
}

bool power_of_two(double v) {
  if (!(v > 0)) return false;
  const double exponent = std::round(std::log2(v));
  return std::abs(v - std::exp2(exponent)) <= 1e-9 * v;
}

// Ticks for a logarithmic axis over [low, high] (both > 0), at most `most` of them: powers of two
// when every data value is one (block counts, ranks); else the finest "nice" set that gives at
// least three and at most `most` ticks among decades, 1-3, 1-2-5 and 1..9 per decade, and, for a
// range narrower than about a factor of two, evenly spaced nice values (placed logarithmically).
// When the axis is too short for three of any set: the decades, or the coarsest set thinned.
// Ticks `keep` rejects (a label that would stick out of the chart) are left out before choosing.
std::vector<double> log_ticks(double low, double high, const std::vector<double>& data,
                              std::size_t most, const std::function<bool(double)>& keep = {}) {
  most = std::max<std::size_t>(most, 2);
  auto within = [&](double v) {
    return v >= low * (1 - 1e-9) && v <= high * (1 + 1e-9) && (!keep || keep(v));
  };
  const int first_decade = static_cast<int>(std::floor(std::log10(low))) - 1;
  const int last_decade = static_cast<int>(std::ceil(std::log10(high))) + 1;
  auto per_decade = [&](std::initializer_list<double> mantissas) {
    std::vector<double> out;
    for (int k = first_decade; k <= last_decade; ++k) {
      for (double m : mantissas) {
        const double v = m * std::pow(10.0, k);
        if (within(v)) out.push_back(v);
      }
    }
    return out;
  };
  if (data.size() >= 2 && std::all_of(data.begin(), data.end(), power_of_two)) {
    std::vector<double> out;
    for (int k = static_cast<int>(std::floor(std::log2(low)));
         k <= static_cast<int>(std::ceil(std::log2(high))); ++k) {
      if (within(std::exp2(k))) out.push_back(std::exp2(k));
    }
    if (out.size() >= 3) return thinned(out, most);
  }
  std::vector<double> linear;
  for (int target = 4; target <= 12 && linear.size() < 3; ++target) {
    linear.clear();
    const double step = nice_step(high - low, target);
    for (double v = std::ceil(low / step) * step; v <= high * (1 + 1e-12); v += step) {
      if (!keep || keep(v)) linear.push_back(v);
    }
  }
  const std::vector<std::vector<double>> sets = {
      per_decade({1.0}), per_decade({1.0, 3.0}), per_decade({1.0, 2.0, 5.0}),
      per_decade({1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0})};
  for (auto set = sets.rbegin(); set != sets.rend(); ++set) {
    if (set->size() >= 3 && set->size() <= most) return *set;
  }
  if (sets.front().size() >= 2) return thinned(sets.front(), most);
  for (const auto& set : sets) {
    if (set.size() >= 3) return thinned(set, most);
  }
  return thinned(linear, most);
}

QString tick_label(double v) {
  return QString::number(v, 'g', 6);
}

QString plain_number(double v) {
  // Four significant digits without an exponent between 0.001 and 10^7 ("35840", "1.746",
  // "0.04123"), else 'g' notation.
  const double a = std::abs(v);
  if (v == 0 || !std::isfinite(v)) return QString::number(v);
  if (a < 1e-3 || a >= 1e7) return QString::number(v, 'g', 4);
  QString text =
      QString::number(v, 'f', std::clamp(3 - static_cast<int>(std::floor(std::log10(a))), 0, 6));
  if (text.contains('.')) {
    while (text.endsWith('0')) text.chop(1);
    if (text.endsWith('.')) text.chop(1);
  }
  return text;
}

// Gives a log axis (a value axis over log10 of the data) labelled ticks for at most `most` labels;
// `keep` may drop some (a label that would stick out of the chart).
void set_log_ticks(QCategoryAxis* axis, const std::vector<double>& data, std::size_t most,
                   const std::function<bool(double, const QString&)>& keep = {}) {
  QStringList labels;
  std::vector<double> at;
  std::function<bool(double)> keep_tick;
  if (keep) keep_tick = [&keep](double tick) { return keep(tick, tick_label(tick)); };
  for (double tick :
       log_ticks(std::pow(10.0, axis->min()), std::pow(10.0, axis->max()), data, most, keep_tick)) {
    const QString label = tick_label(tick);
    if (labels.contains(label)) continue;
    labels.push_back(label);
    at.push_back(std::log10(tick));
  }
  if (labels == axis->categoriesLabels()) return;
  for (const QString& old : axis->categoriesLabels()) axis->remove(old);
  for (qsizetype i = 0; i < labels.size(); ++i)
    axis->append(labels[i], at[static_cast<std::size_t>(i)]);
}

QAbstractAxis* make_axis(const std::string& title, bool logarithmic, Range range,
                         const std::vector<double>& data) {
  if (range.empty()) range = logarithmic ? Range{1.0, 10.0} : Range{0.0, 1.0};
  if (logarithmic) {
    // A value axis over log10 of the data with labels at chosen ticks: logarithmic placement,
    // readable labels whatever the range (QLogValueAxis labels only powers of its base).
    double low = std::log10(range.low), high = std::log10(range.high);
    const double pad = high > low ? std::max(0.04 * (high - low), 0.01) : 0.1;
    low -= pad;
    high += pad;
    auto* axis = new QCategoryAxis;
    axis->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
    axis->setStartValue(low - 1.0);
    axis->setRange(low, high);
    set_log_ticks(axis, data, 8);  // fitted to the plot's size once it is laid out
    axis->setTitleText(rich(QString::fromStdString(title)));
    return axis;
  }
  auto* axis = new QValueAxis;
  axis->setLabelFormat("%g");
  double span = range.high - range.low;
  if (span <= 0) span = std::max(1.0, std::abs(range.high));
  // Non-negative data keeps zero as the floor instead of padding below it.
  const double low =
      range.low >= 0 ? std::max(0.0, range.low - 0.05 * span) : range.low - 0.05 * span;
  axis->setRange(low, range.high + 0.05 * span);
  axis->applyNiceNumbers();
  axis->setTitleText(rich(QString::fromStdString(title)));
  return axis;
}

// The value of a series at x = `at` (spec units): a point exactly there (the last one, for step
// curves), else linear interpolation between the neighbours in the axes' scales (log10 of x on
// a log x axis, of y on a log y axis). Scatter series have values only at their points.
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

// `text` as rich text wrapped to `width` in at most `most` lines (Qt truncates what still does not
// fit).
QString wrapped_rich(const QString& text, const QFont& font, double width, int most = 3) {
  const QFontMetricsF metrics(font);
  if (width <= 20 || metrics.horizontalAdvance(text) <= width) return rich(text);
  QStringList lines = wrap_words(text, metrics, width);
  if (lines.size() > most) {
    const QString tail = lines.mid(most - 1).join(' ');
    lines = lines.mid(0, most - 1);
    lines.push_back(tail);
  }
  for (QString& line : lines) line = rich(line);
  return lines.join("<br>");
}

// The size Qt Charts gives a text (title, axis title, tick label): it lays them out as
// QGraphicsTextItems with a half-pixel document margin, and so is this one.
QSizeF qt_text_size(const QFont& font, const QString& html) {
  static QGraphicsTextItem* const item = [] {
    auto* text = new QGraphicsTextItem;  // never in a scene; lives as long as the process
    text->document()->setDocumentMargin(0.5);
    return text;
  }();
  item->setFont(font);
  item->setHtml(html);
  return item->boundingRect().size();
}

// A legend sample of a series in `r`: its line (pen, dashes) and point, or its scatter marker.
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
class Overlay final : public QGraphicsItem {
 public:
  explicit Overlay(QChart* chart) : QGraphicsItem(chart), chart_(chart) {
    setZValue(1000);
    setAcceptedMouseButtons(Qt::NoButton);
  }
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
  std::vector<QLegendMarker*> shown_markers() const {
    std::vector<QLegendMarker*> out;
    for (QLegendMarker* marker : chart_->legend()->markers()) {
      if (!marker->isVisible() || !marker->series() || !marker->series()->isVisible()) continue;
      if (marker->series() == marker_series) continue;  // the readout box names the marker
      out.push_back(marker);
    }
    return out;
  }
  QStringList signature() const {
    QStringList out;
    for (QLegendMarker* marker : shown_markers())
      out.push_back(QString::number(reinterpret_cast<quintptr>(marker)) + marker->label());
    out.push_back(QString::number(chart_->size().width()));
    return out;
  }
  // Lays out again now if what the legend shows changed since the last layout.
  void refresh_if_stale() {
    if (signature() != laid_out_) relayout();
  }
  void apply_style(const ChartStyle& style);

  struct Entry {
    QLegendMarker* marker;
    QString text;
    QRectF swatch, text_rect;
    bool wrapped = false;  // the text takes several lines
  };
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
  std::vector<Entry> entries;
  QRectF bounds_;
  bool laying_out_ = false;
  bool again_ = false;  // a relayout was asked for while laying out
  QStringList laid_out_;
  bool relayout_queued_ = false;
  QString planned_x_title_;  // the x title text the last layout planned the room for
  bool planned_title_fits_ = true;

 private:
  void lay_out();
  void settle();
};

struct LegendPlan {
  std::vector<Overlay::Entry> entries;
  QFont font;
  double height = 0;
};

// Places legend entries under one another from y = 0. columns == 0: a flow, left to right, a new
// row when the next entry does not fit, an entry wider than the whole width wrapped onto several
// lines, rows centred. columns > 0: a grid, row by row, each name elided to its column.
LegendPlan plan_legend(std::vector<Overlay::Entry> entries, const QFont& font, double left,
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
      Overlay::Entry& entry = entries[static_cast<std::size_t>(i)];
      entry.text = metrics.elidedText(entry.text, Qt::ElideRight, column_w - swatch_w - gap);
      used = std::max(used, (i % columns) * (column_w + spacing) + swatch_w + gap +
                                metrics.horizontalAdvance(entry.text));
    }
    const double x0 = left + std::max(0.0, (available - used) / 2);
    for (int i = 0; i < count; ++i) {
      Overlay::Entry& entry = entries[static_cast<std::size_t>(i)];
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
      Overlay::Entry& entry = entries[i];
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

QString Overlay::x_title_text(double plot_width) const {
  if (!x_axis || x_title.isEmpty()) return QString();
  return wrapped_rich(x_title, x_axis->titleFont(), 0.85 * plot_width, 2);
}

bool Overlay::x_title_fits(double plot_width) const {
  if (!x_axis || x_title.isEmpty() || plot_width <= 0) return true;
  for (const QString& word : x_title.split(' ', Qt::SkipEmptyParts)) {
    if (qt_text_size(x_axis->titleFont(), rich(word)).width() - 1 > plot_width) return false;
  }
  return true;
}

double Overlay::x_axis_height(const QString& title_text, bool with_title) const {
  if (!x_axis) return 0;
  // Qt Charts: the tick labels' height, a 4 px label padding, 1 px, and the title with a 2 px
  // padding above and below it. One pixel more for rounding.
  double height =
      qt_text_size(x_axis->labelsFont(), QStringLiteral("0123456789")).height() + 4 + 1 + 1;
  if (with_title && !title_text.isEmpty())
    height += qt_text_size(x_axis->titleFont(), title_text).height() + 2 * 2;
  return height;
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
    Entry entry;
    entry.marker = marker;
    entry.text = marker->label();
    entries.push_back(entry);
  }
  laid_out_ = signature();
  relayout_queued_ = false;

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
  auto gap_of = [](const LegendPlan& plan) {
    return plan.height > 0 ? 0.3 * QFontMetricsF(plan.font).height() : 0.0;
  };
  auto choose = [&](double limit, double min_text_em) -> std::optional<LegendPlan> {
    LegendPlan plan;
    for (const double factor : {1.0, 0.9, 0.8}) {
      QFont font = legend_font;
      font.setPixelSize(
          std::max(7, static_cast<int>(std::lround(legend_font.pixelSize() * factor))));
      plan = plan_legend(entries, font, left, available, 0);
      if (plan.height + gap_of(plan) <= limit) return plan;
    }
    const QFont font = plan.font;
    const double em = QFontMetricsF(font).height();
    for (int columns = 1; columns <= static_cast<int>(entries.size()); ++columns) {
      // A column: swatch (2 em), gap (0.4 em), the text; columns 1.3 em apart.
      const double text_w = (available - (columns - 1) * 1.3 * em) / columns - 2.4 * em;
      if (text_w < min_text_em * em) break;
      plan = plan_legend(entries, font, left, available, columns);
      if (plan.height + gap_of(plan) <= limit) return plan;
    }
    return std::nullopt;
  };
  std::optional<LegendPlan> chosen;
  bool with_title = true;
  if (entries.empty()) {
    chosen = LegendPlan{};
    with_title = planned_title_fits_;
  } else if (planned_title_fits_ && (chosen = choose(std::min(most, budget(true)), 6.0))) {
    with_title = true;
  } else if ((chosen = choose(std::min(most, budget(false)), 6.0)) ||
             (chosen = choose(budget(false), 3.0))) {
    with_title = false;
  } else {
    // No room even so: the fewest rows of names that keep two characters each, at 80 % type
    // (the plot and the x axis' labels get what is left).
    with_title = false;
    QFont font = legend_font;
    font.setPixelSize(std::max(7, static_cast<int>(std::lround(legend_font.pixelSize() * 0.8))));
    const double em = QFontMetricsF(font).height();
    int columns = 1;
    while (columns < static_cast<int>(entries.size()) &&
           (available - columns * 1.3 * em) / (columns + 1) - 2.4 * em >= 2.0 * em) {
      ++columns;
    }
    chosen = plan_legend(entries, font, left, available, columns);
  }
  if (x_axis && !x_title.isEmpty() && x_axis->isTitleVisible() != with_title)
    x_axis->setTitleVisible(with_title);

  const LegendPlan& plan = *chosen;
  entries = plan.entries;
  entry_font = plan.font;
  const double legend_height = plan.height;
  const double legend_top = area.bottom() - base_margins.bottom() - legend_height;
  for (Entry& entry : entries) {
    entry.swatch.translate(0, legend_top);
    entry.text_rect.translate(0, legend_top);
  }
  const int bottom_margin =
      base_margins.bottom() + static_cast<int>(std::ceil(legend_height + gap_of(plan)));
  const QMargins margins(base_margins.left(), base_margins.top(), base_margins.right(),
                         bottom_margin);
  if (chart_->margins() != margins) chart_->setMargins(margins);
  fit_axes();
}

void Overlay::fit_axes() {
  // To the plot's size from the last layout (a change of the plot area calls this again): axis
  // titles wrap onto two lines when longer than the plot's side, log axes get as many labelled
  // ticks as fit, short linear y axes fewer ticks. Wrapping or relabelling the x axis changes
  // only the plot's height and the y axes only its width, so this settles.
  const QRectF plot = chart_->plotArea();
  if (plot.width() <= 0 || plot.height() <= 0) return;
  for (const LogAxis& log : log_axes) {
    const QFontMetricsF metrics(log.axis->labelsFont());
    const bool vertical = log.orientation == Qt::Vertical;
    const double room =
        vertical ? plot.height() / (1.9 * metrics.height())
                 : plot.width() / (metrics.horizontalAdvance("00000") + metrics.height());
    const double low = log.axis->min(), high = log.axis->max();
    const double width = chart_->size().width();
    // An x label centred on a tick near the plot's ends must not stick out of the chart.
    auto inside = [&](double tick, const QString& label) {
      if (vertical || high <= low) return true;
      const double x = plot.left() + (std::log10(tick) - low) / (high - low) * plot.width();
      const double half = metrics.horizontalAdvance(label) / 2;
      return x - half >= 1 && x + half <= width - 1;
    };
    set_log_ticks(log.axis, log.data,
                  static_cast<std::size_t>(std::clamp(room, 2.0, vertical ? 8.0 : 10.0)), inside);
  }
  for (const auto& [axis, nice_ticks] : linear_y_axes) {
    // Keep the nice grid of applyNiceNumbers: every k-th of its ticks, as many as fit.
    const double room = plot.height() / (1.9 * QFontMetricsF(axis->labelsFont()).height());
    int ticks = nice_ticks;
    for (int count = nice_ticks; count >= 2; --count) {
      if ((nice_ticks - 1) % std::max(1, count - 1) == 0 && count <= std::max(2.0, room)) {
        ticks = count;
        break;
      }
    }
    if (axis->tickCount() != ticks) axis->setTickCount(ticks);
  }
  if (x_axis && !x_title.isEmpty()) {
    const QString text = x_title_text(plot.width());
    if (x_axis->titleText() != text) x_axis->setTitleText(text);
  }
  if (y_axis && !y_title.isEmpty()) {
    // Qt truncates a vertical title well before the plot's full height.
    const QString text = wrapped_rich(y_title, y_axis->titleFont(), 0.72 * plot.height(), 2);
    if (y_axis->titleText() != text) y_axis->setTitleText(text);
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
    if (size.width() > plot.width() - 8 || size.height() > plot.height() - 8) return Readout{};
  }
  // Where the box covers the fewest samples of the curves: beside the marker, top or bottom.
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
  return readout;
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
  for (const Entry& entry : stale ? std::vector<Entry>() : entries) {
    draw_swatch(*painter, entry.swatch, entry.marker->series());
    painter->setPen(text_colour);
    if (entry.wrapped) {
      painter->drawText(entry.text_rect, Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap,
                        entry.text);
    } else {
      painter->drawText(entry.text_rect.adjusted(0, 0, 40, 0),
                        Qt::AlignLeft | Qt::AlignTop | Qt::TextSingleLine, entry.text);
    }
  }

  const Readout readout = plan_readout();
  if (!readout.box.isEmpty()) {
    const QRectF plot = chart_->plotArea();
    // Rings where the marker meets each curve.
    for (const Value& value : values) {
      if (!value.series->isVisible()) continue;
      const bool on_secondary =
          std::find(secondary.begin(), secondary.end(), value.series) != secondary.end();
      const QPointF p =
          chart_->mapToPosition(QPointF(to_axis(marker_x, log_x),
                                        on_secondary ? value.value : to_axis(value.value, log_y)),
                                value.series);
      if (!plot.adjusted(-1, -1, 1, 1).contains(p)) continue;
      painter->setPen(QPen(value.series->color(), 2.0));
      painter->setBrush(Qt::white);
      painter->drawEllipse(p, 4.5, 4.5);
    }
    painter->setPen(QPen(QColor(120, 120, 120), 1.0));
    painter->setBrush(QColor(255, 255, 255, 235));
    painter->drawRoundedRect(readout.box, 3, 3);
    QFont bold = legend_font;
    bold.setBold(true);
    painter->setFont(bold);
    painter->setPen(text_colour);
    const double x0 = readout.box.left() + readout.padding,
                 y0 = readout.box.top() + readout.padding;
    painter->drawText(
        QRectF(x0, y0, readout.box.width() - 2 * readout.padding, readout.line_height),
        Qt::AlignLeft | Qt::AlignVCenter, readout.lines.front());
    painter->setFont(legend_font);
    const int n = static_cast<int>(readout.values.size());
    const int per_column = n > 0 ? (n + readout.columns - 1) / readout.columns : 0;
    for (int i = 0; i < n; ++i) {
      const int column = i / per_column, row = i % per_column;
      const double x = x0 + column * (readout.column_width + 0.8 * readout.line_height);
      const double y = y0 + (1 + row) * readout.line_height;
      draw_swatch(
          *painter,
          QRectF(x, y + 0.2 * readout.line_height, readout.swatch_width, 0.6 * readout.line_height),
          readout.values[static_cast<std::size_t>(i)]->series);
      painter->setPen(text_colour);
      painter->drawText(QRectF(x + readout.swatch_width + 0.3 * readout.line_height, y,
                               readout.column_width, readout.line_height),
                        Qt::AlignLeft | Qt::AlignVCenter,
                        readout.values[static_cast<std::size_t>(i)]->text);
    }
  }
  painter->restore();
}

bool is_secondary(const Overlay* overlay, const QAbstractSeries* series) {
  return overlay && std::find(overlay->secondary.begin(), overlay->secondary.end(), series) !=
                        overlay->secondary.end();
}

}  // namespace

void ensure_application() {
  if (QCoreApplication::instance()) return;
  // Charts are drawn into images only: the offscreen platform always works, whatever
  // QT_QPA_PLATFORM says (an xcb platform without a display would abort the process).
  qputenv("QT_QPA_PLATFORM", "offscreen");
  if (qEnvironmentVariableIsEmpty("XDG_RUNTIME_DIR")) {
    // Qt warns on stderr without one; a private directory keeps the CLI's output clean.
    const QByteArray runtime =
        QDir::tempPath().toUtf8() + "/attnres-runtime-" + QByteArray::number(getuid());
    QDir().mkpath(QString::fromUtf8(runtime));
    QFile::setPermissions(QString::fromUtf8(runtime),
                          QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
    qputenv("XDG_RUNTIME_DIR", runtime);
  }
  static int argc = 1;
  static char name[] = "attnres";
  static char* argv[] = {name, nullptr};
  static QApplication application(argc, argv);
}

QChart* build_chart(const ChartSpec& spec) {
  return build_chart(spec, ChartStyle());
}

QChart* build_chart(const ChartSpec& spec, const ChartStyle& style) {
  auto chart = std::make_unique<QChart>();
  chart->setAnimationOptions(QChart::NoAnimation);
  chart->setBackgroundBrush(Qt::white);
  chart->legend()->setAlignment(Qt::AlignBottom);
  // The overlay draws the legend (full names, plain text, wrapped). Qt's legend stays visible and
  // attached (a hidden or detached one reports its markers hidden, so a view's
  // marker->setVisible(false) could not be told apart) but has no height and is transparent: it
  // takes no room and paints nothing.
  chart->legend()->setMaximumHeight(0);
  chart->legend()->setOpacity(0.0);
  chart->legend()->setShowToolTips(false);
  chart->legend()->setAcceptedMouseButtons(Qt::NoButton);
  chart->setTitle(rich(QString::fromStdString(spec.title)));

  Range x_range, y_range, y2_range;
  std::vector<double> xs, ys;
  bool secondary = false;
  for (const auto& series : spec.series) {
    for (const auto& [x, y] : series.points) {
      if (!usable(x, spec.log_x)) continue;
      if (series.secondary_axis) {
        x_range.add(x);
        xs.push_back(x);
        if (std::isfinite(y)) y2_range.add(y);
      } else if (usable(y, spec.log_y)) {
        x_range.add(x);
        xs.push_back(x);
        y_range.add(y);
        ys.push_back(y);
      }
    }
    secondary = secondary || series.secondary_axis;
  }
  const bool has_marker = spec.marker_x && usable(*spec.marker_x, spec.log_x) && !y_range.empty();
  if (has_marker) x_range.add(*spec.marker_x);  // the current setting is always in view
  QAbstractAxis* x_axis = make_axis(spec.x_label, spec.log_x, x_range, xs);
  QAbstractAxis* y_axis = make_axis(spec.y_label, spec.log_y, y_range, ys);
  chart->addAxis(x_axis, Qt::AlignBottom);
  chart->addAxis(y_axis, Qt::AlignLeft);
  QAbstractAxis* y2_axis = nullptr;
  if (secondary) {
    y2_axis = make_axis(spec.y2_label, false, y2_range, {});
    chart->addAxis(y2_axis, Qt::AlignRight);
  }

  auto* overlay = new Overlay(chart.get());  // owned by the chart
  overlay->log_x = spec.log_x;
  overlay->log_y = spec.log_y;
  overlay->title = QString::fromStdString(spec.title);
  overlay->x_title = QString::fromStdString(spec.x_label);
  overlay->y_title = QString::fromStdString(spec.y_label);
  overlay->x_axis = x_axis;
  overlay->y_axis = y_axis;
  if (spec.log_x)
    overlay->log_axes.push_back({qobject_cast<QCategoryAxis*>(x_axis), Qt::Horizontal, xs});
  if (spec.log_y)
    overlay->log_axes.push_back({qobject_cast<QCategoryAxis*>(y_axis), Qt::Vertical, ys});
  for (QAbstractAxis* axis : {y_axis, y2_axis}) {
    auto* value = qobject_cast<QValueAxis*>(axis);
    if (value && !qobject_cast<QCategoryAxis*>(axis))
      overlay->linear_y_axes.emplace_back(value, value->tickCount());
  }
  overlay->base_title = chart->titleFont();
  overlay->base_axis_title = x_axis->titleFont();
  overlay->base_axis_labels = x_axis->labelsFont();
  overlay->base_legend = chart->legend()->font();

  for (const auto& series : spec.series) {
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
    // Qt's theme has five colours and then repeats them; more series get colours of their own.
    static const QColor more[] = {QColor(23, 190, 207),  QColor(227, 119, 194),
                                  QColor(127, 127, 127), QColor(188, 189, 34),
                                  QColor(31, 58, 147),   QColor(140, 86, 75)};
    const auto index = static_cast<std::size_t>(&series - spec.series.data());
    if (index >= 5) qt_series->setColor(more[(index - 5) % std::size(more)]);
    qt_series->attachAxis(x_axis);
    qt_series->attachAxis(series.secondary_axis ? y2_axis : y_axis);
    if (series.secondary_axis) overlay->secondary.push_back(qt_series);
    if (has_marker) {
      if (auto value =
              value_at(series, *spec.marker_x, spec.log_x, spec.log_y && !series.secondary_axis)) {
        overlay->values.push_back({qt_series, *value, plain_number(*value)});
      }
    }
  }
  if (has_marker) {
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
  QChart* raw = chart.get();
  QObject::connect(raw, &QGraphicsWidget::geometryChanged, raw, [overlay] { overlay->relayout(); });
  QObject::connect(raw->legend(), &QLegend::fontChanged, raw, [overlay] { overlay->relayout(); });
  QObject::connect(raw, &QChart::plotAreaChanged, raw, [overlay] { overlay->fit_axes(); });
  for (QLegendMarker* legend_marker : raw->legend()->markers()) {
    QObject::connect(legend_marker, &QLegendMarker::visibleChanged, raw,
                     [overlay] { overlay->relayout(); });
    QObject::connect(legend_marker, &QLegendMarker::labelChanged, raw,
                     [overlay] { overlay->relayout(); });
  }
  for (QAbstractSeries* series : raw->series()) {
    QObject::connect(series, &QAbstractSeries::visibleChanged, raw,
                     [overlay] { overlay->relayout(); });
  }
  overlay->apply_style(style);
  return chart.release();
}

void restyle_chart(QChart* chart, const ChartStyle& style) {
  if (Overlay* overlay = overlay_of(chart)) overlay->apply_style(style);
}

QPointF chart_position(const QChart* chart, QPointF value, const QAbstractSeries* series) {
  const Overlay* overlay = overlay_of(chart);
  const bool log_x = overlay && overlay->log_x;
  const bool log_y = overlay && overlay->log_y && !is_secondary(overlay, series);
  auto* mutable_chart = const_cast<QChart*>(chart);
  return mutable_chart->mapToPosition(
      QPointF(log_x && value.x() > 0 ? std::log10(value.x()) : value.x(),
              log_y && value.y() > 0 ? std::log10(value.y()) : value.y()),
      const_cast<QAbstractSeries*>(series));
}

QPointF chart_value(const QChart* chart, QPointF position, const QAbstractSeries* series) {
  const Overlay* overlay = overlay_of(chart);
  const bool log_x = overlay && overlay->log_x;
  const bool log_y = overlay && overlay->log_y && !is_secondary(overlay, series);
  const QPointF raw =
      const_cast<QChart*>(chart)->mapToValue(position, const_cast<QAbstractSeries*>(series));
  return {from_axis(raw.x(), log_x), from_axis(raw.y(), log_y)};
}

QPointF series_point(const QChart* chart, const QAbstractSeries* series, qsizetype index) {
  const auto* xy = qobject_cast<const QXYSeries*>(series);
  if (!xy || index < 0 || index >= xy->count()) return {};
  const Overlay* overlay = overlay_of(chart);
  const QPointF p = xy->at(static_cast<int>(index));
  return {from_axis(p.x(), overlay && overlay->log_x),
          from_axis(p.y(), overlay && overlay->log_y && !is_secondary(overlay, series))};
}

bool is_marker_series(const QChart* chart, const QAbstractSeries* series) {
  const Overlay* overlay = overlay_of(chart);
  return overlay && series && overlay->marker_series == series;
}

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

QStringList marker_readout(const QChart* chart) {
  const Overlay* overlay = overlay_of(chart);
  return overlay ? overlay->plan_readout().lines : QStringList();
}

QRectF marker_readout_rect(const QChart* chart) {
  const Overlay* overlay = overlay_of(chart);
  return overlay ? overlay->plan_readout().box : QRectF();
}

QStringList axis_tick_labels(const QChart* chart, Qt::Orientation orientation) {
  QStringList out;
  const Overlay* overlay = overlay_of(chart);
  QAbstractAxis* axis =
      overlay ? (orientation == Qt::Horizontal ? overlay->x_axis : overlay->y_axis) : nullptr;
  if (auto* category = qobject_cast<QCategoryAxis*>(axis)) {
    for (const QString& label : category->categoriesLabels()) {
      const double at = category->endValue(label);
      if (at >= category->min() - 1e-12 && at <= category->max() + 1e-12) out.push_back(label);
    }
  } else if (auto* value = qobject_cast<QValueAxis*>(axis)) {
    const int count = std::max(2, value->tickCount());
    for (int i = 0; i < count; ++i)
      out.push_back(tick_label(value->min() + (value->max() - value->min()) * i / (count - 1)));
  }
  return out;
}

namespace {

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

// ----------------------------------------------------------------------------------------------
// Gantt charts.

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

GanttPlan plan_gantt(const ChartSpec& spec, const QRectF& area, const GanttView& view) {
  GanttPlan plan;
  // Type: the view's scale, and down to 75 % in a small area (a 1024x700 window).
  const double fit =
      std::clamp(std::sqrt(area.width() * area.height() / (640.0 * 260.0)), 0.75, 1.0);
  const double s = (view.font_scale > 0 ? view.font_scale : 1.0) * fit;
  plan.font = QFont();
  plan.font.setPixelSize(std::max(6, static_cast<int>(std::lround(12 * s))));
  plan.title_font = plan.font;
  plan.title_font.setPixelSize(std::max(7, static_cast<int>(std::lround(14 * s))));
  plan.title_font.setBold(true);
  const QFontMetricsF metrics(plan.font), title_metrics(plan.title_font);
  plan.line = metrics.height();
  const bool tight = area.height() < 200 * std::max(1.0, s * 0.8);  // one title line

  // Title: wrapped to two lines at most (one when the area is tight), the last elided.
  plan.title_lines =
      wrap_words(QString::fromStdString(spec.title), title_metrics, area.width() - 16);
  const int title_rows = tight ? 1 : 2;
  if (plan.title_lines.size() > title_rows) {
    QStringList kept = plan.title_lines.mid(0, title_rows);
    kept.back() = title_metrics.elidedText(plan.title_lines.mid(title_rows - 1).join(' '),
                                           Qt::ElideRight, area.width() - 16);
    plan.title_lines = kept;
  }
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
  double legend_rows = row + 1;
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

  // Time ticks: about one per label width and a half.
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
  return plan;
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
  const GanttLayout& layout = plan.layout;
  const QRectF& plot = layout.plot;
  const QFontMetricsF metrics(plan.font);
  painter.save();
  painter.setClipRect(area);
  painter.fillRect(area, Qt::white);

  painter.setFont(plan.title_font);
  painter.setPen(Qt::black);
  const double title_line = QFontMetricsF(plan.title_font).lineSpacing();
  for (qsizetype i = 0; i < plan.title_lines.size(); ++i) {
    painter.drawText(QRectF(area.left(), plan.title_top + static_cast<double>(i) * title_line,
                            area.width(), title_line),
                     Qt::AlignCenter, plan.title_lines[i]);
  }
  painter.setFont(plan.font);

  // Lanes: alternate shading, names on the left (every k-th when lanes are thinner than a line).
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

  // Boxes. Wide ones get a white separator (back-to-back boxes stay apart) and their tag; narrow
  // ones (thousands of micro-batches) are filled on whole pixels without separators or
  // antialiasing, so the band keeps the categories' colours instead of turning grey.
  painter.save();
  painter.setClipRect(plot, Qt::IntersectClip);
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
                     metrics.elidedText(view.note, Qt::ElideRight, plot.width()));
  }
  painter.restore();
}

void render_chart_files(const ChartSpec& spec, const std::filesystem::path& png,
                        const std::filesystem::path& svg, QSize size) {
  ensure_application();
  if (spec.kind == ChartSpec::Kind::gantt) {
    size = QSize(1200, std::clamp(150 + 34 * static_cast<int>(spec.lanes.size()), 300, 2400));
  }
  QGraphicsScene scene;
  if (spec.kind == ChartSpec::Kind::xy) {
    QChart* chart = build_chart(spec);
    scene.addItem(chart);  // the scene owns the chart now
    chart->setGeometry(QRectF(QPointF(0, 0), QSizeF(size)));
    // The legend's room is a margin set after the geometry: lay the chart out again now.
    if (Overlay* overlay = overlay_of(chart)) overlay->relayout();
    if (chart->layout()) chart->layout()->activate();
  }
  scene.setSceneRect(QRectF(QPointF(0, 0), QSizeF(size)));
  auto draw = [&](QPainter& painter) {
    if (spec.kind == ChartSpec::Kind::gantt) {
      paint_gantt(painter, spec, QRectF(QPointF(0, 0), QSizeF(size)));
    } else {
      scene.render(&painter);
    }
  };

  write_png_and_svg(png, svg, size, spec.title, "chart '" + spec.id + "'", draw,
                    /*antialias=*/true);
}

void write_png_and_svg(const std::filesystem::path& png, const std::filesystem::path& svg,
                       QSize size, const std::string& title, const std::string& what,
                       const std::function<void(QPainter&)>& draw, bool antialias) {
  QImage image(size, QImage::Format_ARGB32);
  image.fill(Qt::white);
  {
    QPainter painter(&image);
    if (antialias) painter.setRenderHint(QPainter::Antialiasing);
    draw(painter);
  }
  QByteArray png_bytes;
  {
    QBuffer buffer(&png_bytes);
    buffer.open(QIODevice::WriteOnly);
    if (!image.save(&buffer, "PNG")) throw Error("cannot encode " + what + " as PNG");
  }
  write_file_atomically(
      png, std::string_view(png_bytes.constData(), static_cast<std::size_t>(png_bytes.size())));

  QByteArray svg_bytes;
  {
    QBuffer buffer(&svg_bytes);
    buffer.open(QIODevice::WriteOnly);
    QSvgGenerator generator;
    generator.setOutputDevice(&buffer);
    generator.setSize(size);
    generator.setViewBox(QRect(QPoint(0, 0), size));
    generator.setTitle(QString::fromStdString(title));
    QPainter painter(&generator);
    draw(painter);
  }
  write_file_atomically(
      svg, std::string_view(svg_bytes.constData(), static_cast<std::size_t>(svg_bytes.size())));
}

}  // namespace attnres::charts
