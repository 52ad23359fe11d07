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

namespace attnres::gui {

namespace {

double g_font_scale = 1.0;

QFont pixel_font(double pixels) {
  QFont font;
  font.setPixelSize(std::max(5, static_cast<int>(std::lround(pixels))));
  return font;
}

// Greedy word wrap into at most `most` lines, the last one elided.
QStringList wrap_lines(const QString& text, const QFontMetricsF& metrics, double width, int most) {
  if (text.trimmed().isEmpty()) return {};
  QStringList lines = charts::wrap_words(text, metrics, width);
  if (lines.size() > most) {
    QStringList kept = lines.mid(0, most);
    kept.back() = metrics.elidedText(lines.mid(most - 1).join(' '), Qt::ElideRight, width);
    lines = kept;
  }
  for (QString& l : lines) l = metrics.elidedText(l, Qt::ElideRight, width);
  return lines;
}

// A readout box (rounded, white, thin border) with `text` near `anchor`, kept inside `bounds`.
void draw_readout_box(QPainter& painter, const QString& text, QPointF anchor, const QRectF& bounds, const QFont& font) {
  const QFontMetricsF metrics(font);
  const QRectF text_rect =
      metrics.boundingRect(QRectF(0, 0, std::max(60.0, bounds.width() - 16), 1e6), Qt::AlignLeft | Qt::TextWordWrap, text);
  const double pad = 0.35 * metrics.height();
  QRectF box(QPointF(0, 0), QSizeF(text_rect.width() + 2 * pad, text_rect.height() + 2 * pad));
  box.moveBottomLeft(anchor + QPointF(12, -10));
  if (box.right() > bounds.right() - 2) box.moveRight(anchor.x() - 12);
  if (box.top() < bounds.top() + 2) box.moveTop(anchor.y() + 14);
  box.moveLeft(std::clamp(box.left(), bounds.left() + 2, std::max(bounds.left() + 2, bounds.right() - 2 - box.width())));
  box.moveTop(std::clamp(box.top(), bounds.top() + 2, std::max(bounds.top() + 2, bounds.bottom() - 2 - box.height())));
  painter.save();
  painter.setRenderHint(QPainter::Antialiasing);
  painter.setPen(QPen(QColor(90, 90, 90), 1.0));
  painter.setBrush(QColor(255, 255, 240, 245));
  painter.drawRoundedRect(box, 3, 3);
  painter.setFont(font);
  painter.setPen(Qt::black);
  painter.drawText(box.adjusted(pad, pad, -pad + 2, -pad), Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap, text);
  painter.restore();
}

QString number(double v) { return QString::number(v, 'g', 6); }

}  // namespace

void set_chart_font_scale(double scale) { g_font_scale = std::isfinite(scale) ? std::clamp(scale, 0.5, 4.0) : 1.0; }
double chart_font_scale() { return g_font_scale; }

// ----------------------------------------------------------------------------------------------
// HeatmapWidget

struct HeatmapWidget::Plan {
  QFont title_font, label_font, bar_font;
  QStringList title_lines;
  QRectF title_rect;
  QRectF area;  // the cells
  QRectF bar;   // the colour bar
  double label_height = 0;
  std::vector<int> rows, columns;  // labels drawn
  double row_label_width = 0, column_label_length = 0;
};

HeatmapWidget::HeatmapWidget(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setMinimumSize(160, 120);
}

void HeatmapWidget::set_data(std::string title, std::vector<std::vector<double>> values,
                             std::vector<std::string> row_labels, std::vector<std::string> column_labels,
                             double low, double high) {
  title_ = std::move(title);
  values_ = std::move(values);
  rows_ = std::move(row_labels);
  columns_ = std::move(column_labels);
  low_ = low;
  high_ = high > low ? high : low + 1.0;
  update();
}

HeatmapWidget::Plan HeatmapWidget::plan() const {
  Plan plan;
  const double s = chart_font_scale();
  const double w = width(), h = height();
  // Type shrinks a little in small widgets (down to 80 %) before anything is dropped.
  const double fit = std::clamp(std::sqrt(w * h / (420.0 * 340.0)), 0.8, 1.0);
  plan.title_font = pixel_font(12.5 * s * fit);
  plan.bar_font = pixel_font(11 * s * fit);
  const QFontMetricsF title_metrics(plan.title_font), bar_metrics(plan.bar_font);
  const int title_rows = h < 260 ? 2 : 3;
  plan.title_lines = wrap_lines(QString::fromStdString(title_), title_metrics, std::max(40.0, w - 8), title_rows);
  const double title_h = std::max(1.0, static_cast<double>(plan.title_lines.size())) * title_metrics.lineSpacing();
  plan.title_rect = QRectF(4, 3, w - 8, title_h);

  // Labels: as large as the cells allow, between 8 and 11 px (times the scale).
  const auto n_rows = static_cast<double>(std::max<std::size_t>(1, rows_.size()));
  const auto n_cols = static_cast<double>(std::max<std::size_t>(1, columns_.size()));
  const double top = plan.title_rect.bottom() + 0.35 * title_metrics.height();
  const double first_guess_h = std::max(10.0, h - top - 50);
  plan.label_font = pixel_font(std::clamp(first_guess_h / n_rows * 0.85, 8.0, 11.0) * s);
  const QFontMetricsF metrics(plan.label_font);
  plan.label_height = metrics.height();

  double row_w = 0, col_w = 0;
  for (const auto& row : rows_) row_w = std::max(row_w, metrics.horizontalAdvance(QString::fromStdString(row)));
  for (const auto& col : columns_) col_w = std::max(col_w, metrics.horizontalAdvance(QString::fromStdString(col)));
  plan.row_label_width = std::min(row_w, 0.28 * w);
  const double left = std::max(plan.row_label_width + 0.6 * metrics.height(), 6.0);
  // Column labels run at 45 degrees below the cells: their height is their length / sqrt(2).
  plan.column_label_length = std::min(col_w, 0.3 * h * std::sqrt(2.0));
  const double bottom_room = (plan.column_label_length + metrics.height()) / std::sqrt(2.0) + 4;
  const QString high_text = QString::fromStdString(format_number(high_));
  const QString low_text = QString::fromStdString(format_number(low_));
  const double bar_w = std::max(8.0, 0.9 * bar_metrics.height());
  const double right_room = 0.6 * bar_metrics.height() + bar_w + 4 +
                            std::max(bar_metrics.horizontalAdvance(high_text), bar_metrics.horizontalAdvance(low_text)) + 4;
  plan.area = QRectF(QPointF(left, top), QPointF(std::max(left + 10, w - right_room), std::max(top + 10, h - bottom_room)));
  plan.bar = QRectF(plan.area.right() + 0.6 * bar_metrics.height(), plan.area.top(), bar_w, plan.area.height());

  // Every k-th label so that neighbours never overlap: rows need a line height between centres,
  // 45-degree column labels need a line height / sin(45 degrees) horizontally.
  const double cell_h = plan.area.height() / n_rows, cell_w = plan.area.width() / n_cols;
  const int row_every = std::max(1, static_cast<int>(std::ceil(metrics.height() / cell_h - 1e-9)));
  const int col_every = std::max(1, static_cast<int>(std::ceil(metrics.height() * std::sqrt(2.0) / cell_w - 1e-9)));
  for (int r = 0; r < static_cast<int>(rows_.size()); r += row_every) plan.rows.push_back(r);
  for (int c = 0; c < static_cast<int>(columns_.size()); c += col_every) plan.columns.push_back(c);
  return plan;
}

std::vector<int> HeatmapWidget::drawn_row_labels() const { return plan().rows; }
std::vector<int> HeatmapWidget::drawn_column_labels() const { return plan().columns; }
QRectF HeatmapWidget::cells_rect() const { return plan().area; }
QRectF HeatmapWidget::colour_bar_rect() const { return plan().bar; }

QRectF HeatmapWidget::row_label_rect(int row) const {
  const Plan p = plan();
  if (std::find(p.rows.begin(), p.rows.end(), row) == p.rows.end()) return {};
  const double cell_h = p.area.height() / static_cast<double>(rows_.size());
  const double centre = p.area.top() + (row + 0.5) * cell_h;
  return QRectF(p.area.left() - 0.3 * p.label_height - p.row_label_width, centre - p.label_height / 2,
                p.row_label_width, p.label_height);
}

QPointF HeatmapWidget::cell_center(int row, int col) const {
  const QRectF area = plan().area;
  const double cell_w = area.width() / static_cast<double>(columns_.size());
  const double cell_h = area.height() / static_cast<double>(rows_.size());
  return {area.left() + (col + 0.5) * cell_w, area.top() + (row + 0.5) * cell_h};
}

std::pair<int, int> HeatmapWidget::cell_at(QPointF point) const {
  const QRectF area = plan().area;
  if (rows_.empty() || columns_.empty() || !area.contains(point)) return {-1, -1};
  const int col = static_cast<int>((point.x() - area.left()) / area.width() * static_cast<double>(columns_.size()));
  const int row = static_cast<int>((point.y() - area.top()) / area.height() * static_cast<double>(rows_.size()));
  return {std::min(row, static_cast<int>(rows_.size()) - 1), std::min(col, static_cast<int>(columns_.size()) - 1)};
}

void HeatmapWidget::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.fillRect(rect(), Qt::white);
  const Plan p = plan();
  painter.setFont(p.title_font);
  painter.setPen(Qt::black);
  const double title_line = QFontMetricsF(p.title_font).lineSpacing();
  for (qsizetype i = 0; i < p.title_lines.size(); ++i) {
    painter.drawText(QRectF(p.title_rect.left(), p.title_rect.top() + static_cast<double>(i) * title_line,
                            p.title_rect.width(), title_line),
                     Qt::AlignHCenter | Qt::AlignVCenter, p.title_lines[i]);
  }
  if (rows_.empty() || columns_.empty()) {
    painter.drawText(rect(), Qt::AlignCenter, "no data yet");
    return;
  }
  const int n_rows = static_cast<int>(rows_.size()), n_cols = static_cast<int>(columns_.size());
  QImage image(n_cols, n_rows, QImage::Format_RGB32);
  for (int r = 0; r < n_rows; ++r) {
    for (int c = 0; c < n_cols; ++c) {
      const double v = values_[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)];
      const Rgb colour = viridis(std::isnan(v) ? NAN : (v - low_) / (high_ - low_));
      image.setPixel(c, r, qRgb(colour.r, colour.g, colour.b));
    }
  }
  const QRectF& area = p.area;
  painter.drawImage(area, image);  // nearest-neighbour scaling keeps cells flat
  painter.setFont(p.label_font);
  const QFontMetricsF metrics(p.label_font);
  for (int r : p.rows) {
    painter.drawText(row_label_rect(r).adjusted(0, -1, 0, 1), Qt::AlignRight | Qt::AlignVCenter,
                     metrics.elidedText(QString::fromStdString(rows_[static_cast<std::size_t>(r)]), Qt::ElideRight,
                                        p.row_label_width + 1));
  }
  for (int c : p.columns) {
    const QPointF centre = cell_center(0, c);
    painter.save();
    painter.translate(centre.x() - 0.25 * metrics.height(), area.bottom() + 3);
    painter.rotate(45);
    painter.drawText(QPointF(0, metrics.ascent() * 0.5),
                     metrics.elidedText(QString::fromStdString(columns_[static_cast<std::size_t>(c)]), Qt::ElideRight,
                                        p.column_label_length + 1));
    painter.restore();
  }
  // Colour bar.
  const QRectF& bar = p.bar;
  for (int i = 0; i < 64; ++i) {
    const Rgb colour = viridis(1.0 - i / 63.0);
    painter.fillRect(QRectF(bar.left(), bar.top() + bar.height() * i / 64.0, bar.width(), bar.height() / 64.0 + 1),
                     QColor(colour.r, colour.g, colour.b));
  }
  painter.setPen(Qt::black);
  painter.drawRect(bar);
  painter.setFont(p.bar_font);
  const QFontMetricsF bar_metrics(p.bar_font);
  painter.drawText(QPointF(bar.right() + 3, bar.top() + bar_metrics.ascent()), QString::fromStdString(format_number(high_)));
  painter.drawText(QPointF(bar.right() + 3, bar.bottom()), QString::fromStdString(format_number(low_)));
}

QString HeatmapWidget::readout_at(QPointF point) const {
  const auto [row, col] = cell_at(point);
  if (row < 0) return {};
  const double v = values_[static_cast<std::size_t>(row)][static_cast<std::size_t>(col)];
  return QString::fromStdString(rows_[static_cast<std::size_t>(row)] + " <- " + columns_[static_cast<std::size_t>(col)] +
                                ": " + (std::isnan(v) ? std::string("not a source") : format_number(v)));
}

void HeatmapWidget::mouseMoveEvent(QMouseEvent* event) {
  const QString text = readout_at(event->position());
  if (text.isEmpty()) {
    QToolTip::hideText();
    return;
  }
  QToolTip::showText(event->globalPosition().toPoint(), text, this);
}

std::string HeatmapWidget::csv() const {
  std::ostringstream out;
  out.precision(12);
  out << "row";
  for (const auto& c : columns_) out << "," << c;
  out << "\n";
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    out << rows_[r];
    for (double v : values_[r]) out << "," << (std::isnan(v) ? std::string() : format_number(v));
    out << "\n";
  }
  return out.str();
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
  write_file_atomically(path, std::string_view(bytes.constData(), static_cast<std::size_t>(bytes.size())));
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

void GanttWidget::reset_zoom() { set_window(0, charts::gantt_extent(spec_)); }

QString GanttWidget::window_note() const {
  const double extent = charts::gantt_extent(spec_);
  const QString unit = unit_of(spec_.x_label);
  const QString suffix = unit.isEmpty() ? QString() : " " + unit;
  if (spec_.boxes.empty()) return {};
  const bool narrow = width() < 560;  // the window alone, without the hints
  if (end_ <= start_) {
    const QString whole = "whole chart, 0-" + QString::number(extent, 'f', decimals_for(extent)) + suffix;
    return narrow ? whole : whole + " - wheel or +/- zooms around the cursor, drag pans";
  }
  const int d = decimals_for(end_ - start_);
  const QString window = "showing " + QString::number(start_, 'f', d) + "-" + QString::number(end_, 'f', d) + suffix +
                         " of 0-" + QString::number(extent, 'f', decimals_for(extent)) + suffix + " (x" +
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
    if (box.lane != lane || (box.category >= 2) != transfers) continue;
    const QRectF r = layout.box_rect(box);
    const double distance = pos.x() < r.left() ? r.left() - pos.x() : (pos.x() > r.right() ? pos.x() - r.right() : 0.0);
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
  const QString category = box.category >= 0 && static_cast<std::size_t>(box.category) < spec_.categories.size()
                               ? QString::fromStdString(spec_.categories[static_cast<std::size_t>(box.category)])
                               : "category " + QString::number(box.category);
  const QString unit = unit_of(spec_.x_label);
  const QString suffix = unit.isEmpty() ? QString() : " " + unit;
  const int d = std::max(decimals_for(box.x1 - box.x0), decimals_for(box.x1));
  QString text = lane + " - " + category;
  if (!box.label.empty()) text += "\n" + QString::fromStdString(box.label);
  text += "\n" + QString::number(box.x0, 'f', d) + " to " + QString::number(box.x1, 'f', d) + suffix + " (" +
          QString::number(box.x1 - box.x0, 'g', 4) + suffix + ")";
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
    const double fit = std::clamp(std::sqrt(width() * height() / (640.0 * 260.0)), 0.75, 1.0);  // as the chart's type
    draw_readout_box(painter, hover_text_, hover_pos_, QRectF(rect()), pixel_font(12 * chart_font_scale() * fit));
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
      const double d2 = (at.x() - pos.x()) * (at.x() - pos.x()) + (at.y() - pos.y()) * (at.y() - pos.y());
      if (d2 > best) continue;
      best = d2;
      const QPointF value = charts::series_point(shown, series, i);
      const bool secondary = static_cast<std::size_t>(s) < spec_.series.size() && spec_.series[static_cast<std::size_t>(s)].secondary_axis;
      const std::string& y_label = secondary ? spec_.y2_label : spec_.y_label;
      hit.text = series->name() + "\n" + (spec_.x_label.empty() ? QString("x") : QString::fromStdString(spec_.x_label)) +
                 ": " + number(value.x()) + "\n" + (y_label.empty() ? QString("y") : QString::fromStdString(y_label)) +
                 ": " + number(value.y());
      hit.scene_position = scene;
      hit.colour = series->color();
    }
  }
  return hit;
}

QString ChartPanel::readout_at(QPointF pos) const { return hit_at(pos).text; }

QPointF ChartPanel::point_position(std::size_t series, std::size_t point) const {
  QChart* shown = chart();
  if (!shown || series >= spec_.series.size() || point >= spec_.series[series].points.size()) return {};
  const QList<QAbstractSeries*> all = shown->series();
  if (static_cast<qsizetype>(series) >= all.size()) return {};
  const auto [x, y] = spec_.series[series].points[point];
  const QPointF position = charts::chart_position(shown, QPointF(x, y), all[static_cast<qsizetype>(series)]);
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

std::string chart_csv(const ChartSpec& spec) {
  std::ostringstream out;
  out.precision(12);
  out << "series,x,y\n";
  for (const auto& series : spec.series) {
    for (const auto& [x, y] : series.points) out << '"' << series.name << "\"," << x << "," << y << "\n";
  }
  return out.str();
}

}  // namespace attnres::gui
