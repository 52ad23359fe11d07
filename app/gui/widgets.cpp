#include "widgets.hpp"

#include <QBuffer>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QSvgGenerator>
#include <QToolTip>
#include <QWheelEvent>
#include <QtCharts/QAbstractAxis>
#include <QtCharts/QChart>
#include <QtCharts/QLegend>
#include <QtCharts/QLegendMarker>
#include <QtCharts/QXYSeries>
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "attnres/atomic_file.hpp"
#include "attnres/colormap.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "chart_render.hpp"
#include "heatmap_render.hpp"

namespace attnres::gui {

namespace {

double g_font_scale = 1.0;

QFont pixel_font(double pixels) {
  QFont font;
  font.setPixelSize(std::max(5, static_cast<int>(std::lround(pixels))));
  return font;
}

using charts::wrap_lines;

// A readout box (rounded, white, thin border) with `text` near `anchor`, kept inside `bounds`.
void draw_readout_box(QPainter& painter, const QString& text, QPointF anchor, const QRectF& bounds,
                      const QFont& font) {
  const QFontMetricsF metrics(font);
  const QRectF text_rect =
      metrics.boundingRect(QRectF(0, 0, std::max(60.0, bounds.width() - 16), 1e6),
                           Qt::AlignLeft | Qt::TextWordWrap, text);
  const double pad = 0.35 * metrics.height();
  QRectF box(QPointF(0, 0), QSizeF(text_rect.width() + 2 * pad, text_rect.height() + 2 * pad));
  box.moveBottomLeft(anchor + QPointF(12, -10));
  if (box.right() > bounds.right() - 2) box.moveRight(anchor.x() - 12);
  if (box.top() < bounds.top() + 2) box.moveTop(anchor.y() + 14);
  box.moveLeft(std::clamp(box.left(), bounds.left() + 2,
                          std::max(bounds.left() + 2, bounds.right() - 2 - box.width())));
  box.moveTop(std::clamp(box.top(), bounds.top() + 2,
                         std::max(bounds.top() + 2, bounds.bottom() - 2 - box.height())));
  painter.save();
  painter.setRenderHint(QPainter::Antialiasing);
  painter.setPen(QPen(QColor(90, 90, 90), 1.0));
  painter.setBrush(QColor(255, 255, 240, 245));
  painter.drawRoundedRect(box, 3, 3);
  painter.setFont(font);
  painter.setPen(Qt::black);
  painter.drawText(box.adjusted(pad, pad, -pad + 2, -pad),
                   Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap, text);
  painter.restore();
}

QString number(double v) {
  return QString::number(v, 'g', 6);
}

}  // namespace

void set_chart_font_scale(double scale) {
  g_font_scale = std::isfinite(scale) ? std::clamp(scale, 0.5, 4.0) : 1.0;
}
double chart_font_scale() {
  return g_font_scale;
}

// ----------------------------------------------------------------------------------------------
// HeatmapWidget

HeatmapWidget::HeatmapWidget(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setMinimumSize(160, 120);
}

void HeatmapWidget::set_data(std::string title, std::vector<std::vector<double>> values,
                             std::vector<std::string> row_labels,
                             std::vector<std::string> column_labels, double low, double high) {
  HeatmapSpec spec;
  spec.title = std::move(title);
  spec.values = std::move(values);
  spec.row_labels = std::move(row_labels);
  spec.column_labels = std::move(column_labels);
  spec.low = low;
  spec.high = high;
  set_spec(std::move(spec));
}

void HeatmapWidget::set_spec(HeatmapSpec spec) {
  spec_ = std::move(spec);
  if (!(spec_.high > spec_.low)) spec_.high = spec_.low + 1.0;
  update();
}

charts::HeatmapLayout HeatmapWidget::plan() const {
  return charts::heatmap_layout(spec_, QSizeF(size()), chart_font_scale());
}

std::vector<int> HeatmapWidget::drawn_row_labels() const {
  return plan().rows;
}
std::vector<int> HeatmapWidget::drawn_column_labels() const {
  return plan().columns;
}
QRectF HeatmapWidget::cells_rect() const {
  return plan().area;
}
QRectF HeatmapWidget::colour_bar_rect() const {
  return plan().bar;
}
QRectF HeatmapWidget::row_label_rect(int row) const {
  return plan().row_label_rect(row);
}
QPointF HeatmapWidget::cell_center(int row, int col) const {
  return plan().cell_center(row, col);
}
std::pair<int, int> HeatmapWidget::cell_at(QPointF point) const {
  return plan().cell_at(point);
}

void HeatmapWidget::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  const charts::HeatmapLayout layout = plan();
  charts::paint_heatmap(painter, spec_, layout);
  if (marked_.first >= 0 && marked_.first < layout.row_count && marked_.second >= 0 &&
      marked_.second < layout.column_count) {
    const double w = layout.area.width() / layout.column_count;
    const double h = layout.area.height() / layout.row_count;
    const QPointF centre = layout.cell_center(marked_.first, marked_.second);
    painter.setBrush(Qt::NoBrush);
    painter.setPen(QPen(Qt::white, 3.0));
    painter.drawEllipse(centre, 0.45 * w, 0.45 * h);
    painter.setPen(QPen(Qt::black, 1.5));
    painter.drawEllipse(centre, 0.45 * w, 0.45 * h);
  }
}

void HeatmapWidget::set_hover_listener(std::function<void(int, int)> listener) {
  hover_listener_ = std::move(listener);
}

void HeatmapWidget::set_marked_cell(int row, int col) {
  if (marked_ == std::make_pair(row, col)) return;
  marked_ = {row, col};
  update();
}

void HeatmapWidget::leaveEvent(QEvent* event) {
  QWidget::leaveEvent(event);
  if (hover_listener_) hover_listener_(-1, -1);
}

QString HeatmapWidget::readout_at(QPointF point) const {
  const auto [row, col] = cell_at(point);
  if (row < 0) return {};
  const auto r = static_cast<std::size_t>(row), c = static_cast<std::size_t>(col);
  const double v = spec_.values[r][c];
  std::string text = spec_.row_labels[r];
  if (r < spec_.row_notes.size() && !spec_.row_notes[r].empty()) {
    text += " (";
    text += spec_.row_notes[r];
    text += ")";
  }
  text += " <- ";
  text += spec_.column_labels[c];
  if (c < spec_.column_notes.size() && !spec_.column_notes[c].empty()) {
    text += " (";
    text += spec_.column_notes[c];
    text += ")";
  }
  text += ": ";
  text += std::isnan(v) ? std::string("not a source") : format_number(v);
  return QString::fromStdString(text);
}

void HeatmapWidget::mouseMoveEvent(QMouseEvent* event) {
  if (hover_listener_) {
    const auto [row, col] = cell_at(event->position());
    hover_listener_(row, col);
  }
  const QString text = readout_at(event->position());
  if (text.isEmpty()) {
    QToolTip::hideText();
    return;
  }
  QToolTip::showText(event->globalPosition().toPoint(), text, this);
}

std::string HeatmapWidget::csv() const {
  return heatmap_csv(spec_);
}

void HeatmapWidget::export_image(const std::filesystem::path& path) {
  QByteArray bytes;
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  if (path.extension() == ".svg") {
    QSvgGenerator generator;
    generator.setOutputDevice(&buffer);
    generator.setSize(size());
    generator.setViewBox(rect());
    QPainter painter(&generator);
    render(&painter);
  } else {
    grab().toImage().save(&buffer, "PNG");
  }
  write_file_atomically(
      path, std::string_view(bytes.constData(), static_cast<std::size_t>(bytes.size())));
}

// ----------------------------------------------------------------------------------------------
// GanttWidget

namespace {

// "ms" from "time (ms)".
QString unit_of(const std::string& label) {
  const auto open = label.rfind('('), close = label.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return {};
  return QString::fromStdString(label.substr(open + 1, close - open - 1));
}

int decimals_for(double span) {
  if (!(span > 0)) return 0;
  return std::clamp(2 - static_cast<int>(std::floor(std::log10(span))), 0, 6);
}

}  // namespace

GanttWidget::GanttWidget(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setFocusPolicy(Qt::WheelFocus);
  setMinimumSize(160, 120);
}

QSize GanttWidget::sizeHint() const {
  return {640, std::clamp(130 + 30 * static_cast<int>(spec_.lanes.size()), 220, 900)};
}

void GanttWidget::set_spec(ChartSpec spec) {
  const double old_extent = charts::gantt_extent(spec_);
  spec_ = std::move(spec);
  if (std::abs(charts::gantt_extent(spec_) - old_extent) > 1e-9 * old_extent) {
    start_ = end_ = 0;
  }
  hover_box_ = -1;
  hover_text_.clear();
  updateGeometry();
  update();
}

std::pair<double, double> GanttWidget::visible_range() const {
  if (end_ > start_) return {start_, end_};
  return {0.0, charts::gantt_extent(spec_)};
}

void GanttWidget::set_window(double start, double end) {
  const double extent = charts::gantt_extent(spec_);
  const double span = std::clamp(end - start, extent * 1e-4, extent);
  if (span >= extent * (1 - 1e-12)) {
    start_ = end_ = 0;
  } else {
    start_ = std::clamp(start, 0.0, extent - span);
    end_ = start_ + span;
  }
  if (hover_box_ >= 0) hover(hover_pos_);
  update();
}

charts::GanttView GanttWidget::current_view() const {
  const auto [start, end] = visible_range();
  charts::GanttView view;
  view.start = start;
  view.end = end;
  view.font_scale = chart_font_scale();
  view.note = window_note();
  return view;
}

void GanttWidget::zoom_at(double factor, double widget_x) {
  if (!(factor > 0)) return;
  const charts::GanttView view = current_view();
  const double start = view.start, end = view.end;
  const charts::GanttLayout layout = charts::gantt_layout(spec_, QRectF(rect()), view);
  const double anchor = std::clamp(layout.time_at(widget_x), start, end);
  const double span = (end - start) / factor;
  set_window(anchor - (anchor - start) / factor, anchor - (anchor - start) / factor + span);
}

void GanttWidget::pan_by_pixels(double dx) {
  const charts::GanttView view = current_view();
  const double start = view.start, end = view.end;
  const charts::GanttLayout layout = charts::gantt_layout(spec_, QRectF(rect()), view);
  if (end_ <= start_ || layout.plot.width() <= 0) return;  // the whole chart: nothing to pan
  const double dt = dx / layout.plot.width() * (end - start);
  set_window(start + dt, end + dt);
}

void GanttWidget::reset_zoom() {
  set_window(0, charts::gantt_extent(spec_));
}

QString GanttWidget::window_note() const {
  const double extent = charts::gantt_extent(spec_);
  const QString unit = unit_of(spec_.x_label);
  const QString suffix = unit.isEmpty() ? QString() : " " + unit;
  if (spec_.boxes.empty()) return {};
  const bool narrow = width() < 560;  // the window alone, without the hints
  if (end_ <= start_) {
    const QString whole =
        "whole chart, 0-" + QString::number(extent, 'f', decimals_for(extent)) + suffix;
    return narrow ? whole : whole + " - wheel or +/- zooms around the cursor, drag pans";
  }
  const int d = decimals_for(end_ - start_);
  const QString window = "showing " + QString::number(start_, 'f', d) + "-" +
                         QString::number(end_, 'f', d) + suffix + " of 0-" +
                         QString::number(extent, 'f', decimals_for(extent)) + suffix + " (x" +
                         QString::number(extent / (end_ - start_), 'f', 1) + ")";
  return narrow ? window : window + " - drag or arrows pan, 0 or double-click: whole chart";
}

QRectF GanttWidget::box_rect(std::size_t index) const {
  if (index >= spec_.boxes.size()) return {};
  const charts::GanttView view = current_view();
  return charts::gantt_layout(spec_, QRectF(rect()), view).box_rect(spec_.boxes[index]);
}

int GanttWidget::box_at(QPointF pos) const {
  const charts::GanttView view = current_view();
  const charts::GanttLayout layout = charts::gantt_layout(spec_, QRectF(rect()), view);
  const int lane = layout.lane_at(pos.y());
  if (lane < 0 || pos.x() < layout.plot.left() || pos.x() > layout.plot.right()) return -1;
  // The band under the pointer: compute boxes (upper part of a lane) or transfers (lower part).
  const double within = (pos.y() - layout.plot.top()) / layout.lane_height() - lane;
  const bool transfers = within >= 0.70;
  // Boxes under the pointer win (the one whose centre is nearest); thin boxes are hit from up to
  // 3 pixels beside them.
  int best = -1;
  double best_score = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < spec_.boxes.size(); ++i) {
    const ChartBox& box = spec_.boxes[i];
    if (box.lane != lane || is_transfer(box.category) != transfers) continue;
    const QRectF r = layout.box_rect(box);
    const double distance =
        pos.x() < r.left() ? r.left() - pos.x() : (pos.x() > r.right() ? pos.x() - r.right() : 0.0);
    if (distance > 3.0) continue;
    const double score = 1e6 * distance + std::abs(pos.x() - r.center().x());
    if (score < best_score) {
      best_score = score;
      best = static_cast<int>(i);
    }
  }
  return best;
}

QString GanttWidget::readout_at(QPointF pos) const {
  const int index = box_at(pos);
  if (index < 0) return {};
  const ChartBox& box = spec_.boxes[static_cast<std::size_t>(index)];
  const QString lane = box.lane >= 0 && static_cast<std::size_t>(box.lane) < spec_.lanes.size()
                           ? QString::fromStdString(spec_.lanes[static_cast<std::size_t>(box.lane)])
                           : "lane " + QString::number(box.lane);
  const QString category = QString::fromStdString(enum_name(kGanttCategoryNames, box.category));
  const QString unit = unit_of(spec_.x_label);
  const QString suffix = unit.isEmpty() ? QString() : " " + unit;
  const int d = std::max(decimals_for(box.x1 - box.x0), decimals_for(box.x1));
  QString text = lane + " - " + category;
  if (!box.label.empty()) text += "\n" + QString::fromStdString(box.label);
  text += "\n" + QString::number(box.x0, 'f', d) + " to " + QString::number(box.x1, 'f', d) +
          suffix + " (" + QString::number(box.x1 - box.x0, 'g', 4) + suffix + ")";
  return text;
}

void GanttWidget::hover(QPointF pos) {
  hover_pos_ = pos;
  const int index = box_at(pos);
  const QString text = index >= 0 ? readout_at(pos) : QString();
  if (index != hover_box_ || text != hover_text_) {
    hover_box_ = index;
    hover_text_ = text;
    update();
  }
}

void GanttWidget::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.setRenderHint(QPainter::Antialiasing);
  charts::GanttView view = current_view();
  view.highlight = hover_box_;
  charts::paint_gantt(painter, spec_, QRectF(rect()), view);
  if (!hover_text_.isEmpty() && !dragging_) {
    const double fit = std::clamp(std::sqrt(width() * height() / (640.0 * 260.0)), 0.75,
                                  1.0);  // as the chart's type
    draw_readout_box(painter, hover_text_, hover_pos_, QRectF(rect()),
                     pixel_font(12 * chart_font_scale() * fit));
  }
}

void GanttWidget::wheelEvent(QWheelEvent* event) {
  const QPoint delta = event->angleDelta();
  if ((event->modifiers() & Qt::ShiftModifier) || std::abs(delta.x()) > std::abs(delta.y())) {
    const int amount = std::abs(delta.x()) > std::abs(delta.y()) ? delta.x() : delta.y();
    pan_by_pixels(-amount / 2.0);
  } else {
    zoom_at(std::pow(1.0015, delta.y()), event->position().x());  // one notch (120): x1.2
  }
  event->accept();
}

void GanttWidget::mousePressEvent(QMouseEvent* event) {
  if (event->button() == Qt::LeftButton) {
    dragging_ = true;
    drag_x_ = event->position().x();
    setCursor(Qt::ClosedHandCursor);
  }
  QWidget::mousePressEvent(event);
}

void GanttWidget::mouseMoveEvent(QMouseEvent* event) {
  pointer_inside_ = true;
  if (dragging_) {
    pan_by_pixels(drag_x_ - event->position().x());
    drag_x_ = event->position().x();
    return;
  }
  hover(event->position());
}

void GanttWidget::mouseReleaseEvent(QMouseEvent* event) {
  if (event->button() == Qt::LeftButton && dragging_) {
    dragging_ = false;
    unsetCursor();
    hover(event->position());
  }
  QWidget::mouseReleaseEvent(event);
}

void GanttWidget::mouseDoubleClickEvent(QMouseEvent* event) {
  dragging_ = false;
  unsetCursor();
  reset_zoom();
  event->accept();
}

void GanttWidget::keyPressEvent(QKeyEvent* event) {
  const double x = pointer_inside_ ? hover_pos_.x() : width() / 2.0;
  switch (event->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal:
      zoom_at(1.5, x);
      break;
    case Qt::Key_Minus:
    case Qt::Key_Underscore:
      zoom_at(1 / 1.5, x);
      break;
    case Qt::Key_0:
    case Qt::Key_Home:
      reset_zoom();
      break;
    case Qt::Key_Left:
      pan_by_pixels(-width() / 8.0);
      break;
    case Qt::Key_Right:
      pan_by_pixels(width() / 8.0);
      break;
    default:
      QWidget::keyPressEvent(event);
      return;
  }
  event->accept();
}

void GanttWidget::leaveEvent(QEvent* event) {
  pointer_inside_ = false;
  hover_box_ = -1;
  hover_text_.clear();
  update();
  QWidget::leaveEvent(event);
}

// ----------------------------------------------------------------------------------------------
// ChartPanel

ChartPanel::ChartPanel(QWidget* parent) : QChartView(parent) {
  setRenderHint(QPainter::Antialiasing);
  setFrameShape(QFrame::NoFrame);  // viewport coordinates are the panel's
  setMinimumSize(160, 120);
  setMouseTracking(true);
  viewport()->setMouseTracking(true);
}

double ChartPanel::effective_scale() const {
  // Small panels (a 1024x700 window holding several) get slightly smaller type, down to 80 %.
  // By area (a wide, short panel keeps its type).
  const double fit = std::clamp(std::sqrt(width() * height() / (380.0 * 280.0)), 0.8, 1.0);
  return chart_font_scale() * fit;
}

void ChartPanel::set_spec(ChartSpec spec) {
  spec_ = std::move(spec);
  QChart* old = chart();
  applied_scale_ = effective_scale();
  charts::ChartStyle style;
  style.font_scale = applied_scale_;
  style.compact = true;
  QChart* fresh = charts::build_chart(spec_, style);
  hover_text_.clear();
  setChart(fresh);
  if (old) old->deleteLater();
}

void ChartPanel::refresh() {
  if (!chart()) return;
  applied_scale_ = effective_scale();
  charts::ChartStyle style;
  style.font_scale = applied_scale_;
  style.compact = true;
  charts::restyle_chart(chart(), style);
  viewport()->update();
}

void ChartPanel::resizeEvent(QResizeEvent* event) {
  QChartView::resizeEvent(event);
  if (chart() && std::abs(effective_scale() - applied_scale_) > 0.02) refresh();
}

ChartPanel::Hit ChartPanel::hit_at(QPointF pos) const {
  Hit hit;
  QChart* shown = chart();
  if (!shown) return hit;
  const QTransform to_view = viewportTransform();
  if (to_view.isInvertible()) {
    // Over a legend entry: its series' full name (a small panel elides long names).
    const QPointF at_chart = shown->mapFromScene(to_view.inverted().map(pos));
    if (QAbstractSeries* series = charts::legend_series_at(shown, at_chart)) {
      hit.text = series->name();
      hit.scene_position = to_view.inverted().map(pos);
      if (auto* xy = qobject_cast<QXYSeries*>(series)) hit.colour = xy->color();
      hit.ring = false;
      return hit;
    }
  }
  const double reach = 24.0 * std::max(1.0, chart_font_scale());
  double best = reach * reach;
  const QList<QAbstractSeries*> all = shown->series();
  for (qsizetype s = 0; s < all.size(); ++s) {
    auto* series = qobject_cast<QXYSeries*>(all[s]);
    if (!series || !series->isVisible() || charts::is_marker_series(shown, series)) continue;
    const QList<QPointF> points = series->points();
    for (qsizetype i = 0; i < points.size(); ++i) {
      const QPointF scene = shown->mapToScene(shown->mapToPosition(points[i], series));
      const QPointF at = to_view.map(scene);
      const double d2 =
          (at.x() - pos.x()) * (at.x() - pos.x()) + (at.y() - pos.y()) * (at.y() - pos.y());
      if (d2 > best) continue;
      best = d2;
      const QPointF value = charts::series_point(shown, series, i);
      const bool secondary = static_cast<std::size_t>(s) < spec_.series.size() &&
                             spec_.series[static_cast<std::size_t>(s)].secondary_axis;
      const std::string& y_label = secondary ? spec_.y2_label : spec_.y_label;
      hit.text = series->name() + "\n" +
                 (spec_.x_label.empty() ? QString("x") : QString::fromStdString(spec_.x_label)) +
                 ": " + number(value.x()) + "\n" +
                 (y_label.empty() ? QString("y") : QString::fromStdString(y_label)) + ": " +
                 number(value.y());
      hit.scene_position = scene;
      hit.colour = series->color();
    }
  }
  return hit;
}

QString ChartPanel::readout_at(QPointF pos) const {
  return hit_at(pos).text;
}

QPointF ChartPanel::point_position(std::size_t series, std::size_t point) const {
  QChart* shown = chart();
  if (!shown || series >= spec_.series.size() || point >= spec_.series[series].points.size())
    return {};
  const QList<QAbstractSeries*> all = shown->series();
  if (static_cast<qsizetype>(series) >= all.size()) return {};
  const auto [x, y] = spec_.series[series].points[point];
  const QPointF position =
      charts::chart_position(shown, QPointF(x, y), all[static_cast<qsizetype>(series)]);
  return viewportTransform().map(shown->mapToScene(position));
}

void ChartPanel::mouseMoveEvent(QMouseEvent* event) {
  QChartView::mouseMoveEvent(event);
  const Hit hit = hit_at(event->position());
  if (hit.text != hover_text_ || hit.scene_position != hover_point_) {
    hover_text_ = hit.text;
    hover_point_ = hit.scene_position;
    hover_colour_ = hit.colour;
    hover_ring_ = hit.ring;
    viewport()->update();
  }
}

void ChartPanel::leaveEvent(QEvent* event) {
  if (!hover_text_.isEmpty()) {
    hover_text_.clear();
    viewport()->update();
  }
  QChartView::leaveEvent(event);
}

void ChartPanel::drawForeground(QPainter* painter, const QRectF& rect) {
  QChartView::drawForeground(painter, rect);
  if (hover_text_.isEmpty() || !chart()) return;
  if (hover_ring_) {
    painter->save();
    painter->setRenderHint(QPainter::Antialiasing);
    painter->setPen(QPen(hover_colour_.isValid() ? hover_colour_ : QColor(Qt::black), 2.5));
    painter->setBrush(Qt::NoBrush);
    painter->drawEllipse(hover_point_, 6.5, 6.5);
    painter->restore();
  }
  const QRectF bounds = mapToScene(viewport()->rect()).boundingRect();
  draw_readout_box(*painter, hover_text_, hover_point_, bounds, pixel_font(11 * effective_scale()));
}

}  // namespace attnres::gui
