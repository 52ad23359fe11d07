#include "heatmap_render.hpp"

#include <QFontMetricsF>
#include <QImage>
#include <QPainter>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <new>

#include "attnres/colormap.hpp"
#include "attnres/format.hpp"
#include "chart_render_internal.hpp"

namespace attnres::charts {

using namespace detail;

QStringList wrap_lines(const QString& text, const QFontMetricsF& metrics, double width, int most) {
  if (text.trimmed().isEmpty()) return {};
  QStringList lines = first_lines(wrap_words(text, metrics, width), metrics, width, most);
  for (QString& l : lines) l = metrics.elidedText(l, Qt::ElideRight, width);
  return lines;
}

QRectF HeatmapLayout::row_label_rect(int row) const {
  if (std::find(rows.begin(), rows.end(), row) == rows.end() || row_count == 0) return {};
  const double cell_h = area.height() / static_cast<double>(row_count);
  const double centre = area.top() + (row + 0.5) * cell_h;
  return QRectF(area.left() - 0.3 * label_height - row_label_width, centre - label_height / 2,
                row_label_width, label_height);
}

QPointF HeatmapLayout::cell_center(int row, int col) const {
  const double cell_w = area.width() / static_cast<double>(std::max(1, column_count));
  const double cell_h = area.height() / static_cast<double>(std::max(1, row_count));
  return {area.left() + (col + 0.5) * cell_w, area.top() + (row + 0.5) * cell_h};
}

std::pair<int, int> HeatmapLayout::cell_at(QPointF point) const {
  if (row_count == 0 || column_count == 0 || !area.contains(point)) return {-1, -1};
  const int col = static_cast<int>((point.x() - area.left()) / area.width() *
                                   static_cast<double>(column_count));
  const int row =
      static_cast<int>((point.y() - area.top()) / area.height() * static_cast<double>(row_count));
  return {std::min(row, row_count - 1), std::min(col, column_count - 1)};
}

HeatmapLayout heatmap_layout(const HeatmapSpec& spec, QSizeF size, double font_scale) {
  HeatmapLayout plan;
  plan.size = size;
  const double s = font_scale;
  const double w = size.width(), h = size.height();
  plan.row_count = static_cast<int>(spec.row_labels.size());
  plan.column_count = static_cast<int>(spec.column_labels.size());
  // Type shrinks a little in small areas (down to 80 %) before anything is dropped.
  const double fit = std::clamp(std::sqrt(w * h / (420.0 * 340.0)), 0.8, 1.0);
  plan.title_font = font_of_pixels(12.5 * s * fit, 5);
  plan.bar_font = font_of_pixels(11 * s * fit, 5);
  const QFontMetricsF title_metrics(plan.title_font), bar_metrics(plan.bar_font);
  const int title_rows = h < 260 ? 2 : 3;
  plan.title_lines = wrap_lines(QString::fromStdString(spec.title), title_metrics,
                                std::max(40.0, w - 8), title_rows);
  const double title_h =
      std::max(1.0, static_cast<double>(plan.title_lines.size())) * title_metrics.lineSpacing();
  plan.title_rect = QRectF(4, 3, w - 8, title_h);

  // Labels: as large as the cells allow, between 8 and 11 px (times the scale).
  const auto n_rows = static_cast<double>(std::max<std::size_t>(1, spec.row_labels.size()));
  const auto n_cols = static_cast<double>(std::max<std::size_t>(1, spec.column_labels.size()));
  const double top = plan.title_rect.bottom() + 0.35 * title_metrics.height();
  const double first_guess_h = std::max(10.0, h - top - 50);
  plan.label_font = font_of_pixels(std::clamp(first_guess_h / n_rows * 0.85, 8.0, 11.0) * s, 5);
  const QFontMetricsF metrics(plan.label_font);
  plan.label_height = metrics.height();

  double row_w = 0, col_w = 0;
  for (const auto& row : spec.row_labels)
    row_w = std::max(row_w, metrics.horizontalAdvance(QString::fromStdString(row)));
  for (const auto& col : spec.column_labels)
    col_w = std::max(col_w, metrics.horizontalAdvance(QString::fromStdString(col)));
  plan.row_label_width = std::min(row_w, 0.28 * w);
  const double left = std::max(plan.row_label_width + 0.6 * metrics.height(), 6.0);
  // Column labels run at 45 degrees below the cells: their height is their length / sqrt(2).
  plan.column_label_length = std::min(col_w, 0.3 * h * std::sqrt(2.0));
  const double bottom_room = (plan.column_label_length + metrics.height()) / std::sqrt(2.0) + 4;
  const QString high_text = QString::fromStdString(format_number(spec.high));
  const QString low_text = QString::fromStdString(format_number(spec.low));
  const double bar_w = std::max(8.0, 0.9 * bar_metrics.height());
  const double right_room =
      0.6 * bar_metrics.height() + bar_w + 4 +
      std::max(bar_metrics.horizontalAdvance(high_text), bar_metrics.horizontalAdvance(low_text)) +
      4;
  plan.area = QRectF(QPointF(left, top), QPointF(std::max(left + 10, w - right_room),
                                                 std::max(top + 10, h - bottom_room)));
  plan.bar = QRectF(plan.area.right() + 0.6 * bar_metrics.height(), plan.area.top(), bar_w,
                    plan.area.height());

  // Every k-th label so that neighbours never overlap: rows need a line height between centres,
  // 45-degree column labels need a line height / sin(45 degrees) horizontally.
  const double cell_h = plan.area.height() / n_rows, cell_w = plan.area.width() / n_cols;
  const int row_every = std::max(1, static_cast<int>(std::ceil(metrics.height() / cell_h - 1e-9)));
  const int col_every =
      std::max(1, static_cast<int>(std::ceil(metrics.height() * std::sqrt(2.0) / cell_w - 1e-9)));
  for (int r = 0; r < plan.row_count; r += row_every) plan.rows.push_back(r);
  for (int c = 0; c < plan.column_count; c += col_every) plan.columns.push_back(c);
  return plan;
}

void paint_heatmap(QPainter& painter, const HeatmapSpec& spec, const HeatmapLayout& p) {
  const double high = spec.high > spec.low ? spec.high : spec.low + 1.0;
  painter.fillRect(QRectF(QPointF(0, 0), p.size), Qt::white);
  draw_title_lines(painter, p.title_lines, p.title_font, p.title_rect.left(), p.title_rect.top(),
                   p.title_rect.width());
  if (p.row_count == 0 || p.column_count == 0) {
    painter.drawText(QRectF(QPointF(0, 0), p.size), Qt::AlignCenter, "no data yet");
    return;
  }
  require_drawing_memory(std::int64_t{p.column_count} * p.row_count);
  QImage image(p.column_count, p.row_count, QImage::Format_RGB32);
  if (image.isNull()) throw std::bad_alloc();  // Qt's answer to an allocation that failed
  for (int r = 0; r < p.row_count; ++r) {
    static const std::vector<double> none;
    const auto& row = static_cast<std::size_t>(r) < spec.values.size()
                          ? spec.values[static_cast<std::size_t>(r)]
                          : none;
    for (int c = 0; c < p.column_count; ++c) {
      const double v =
          static_cast<std::size_t>(c) < row.size() ? row[static_cast<std::size_t>(c)] : NAN;
      const Rgb colour = viridis(std::isnan(v) ? NAN : (v - spec.low) / (high - spec.low));
      image.setPixel(c, r, qRgb(colour.r, colour.g, colour.b));
    }
  }
  const QRectF& area = p.area;
  painter.drawImage(area, image);  // nearest-neighbour scaling keeps cells flat
  painter.setFont(p.label_font);
  const QFontMetricsF metrics(p.label_font);
  for (int r : p.rows) {
    painter.drawText(
        p.row_label_rect(r).adjusted(0, -1, 0, 1), Qt::AlignRight | Qt::AlignVCenter,
        metrics.elidedText(QString::fromStdString(spec.row_labels[static_cast<std::size_t>(r)]),
                           Qt::ElideRight, p.row_label_width + 1));
  }
  for (int c : p.columns) {
    const QPointF centre = p.cell_center(0, c);
    painter.save();
    painter.translate(centre.x() - 0.25 * metrics.height(), area.bottom() + 3);
    painter.rotate(45);
    painter.drawText(
        QPointF(0, metrics.ascent() * 0.5),
        metrics.elidedText(QString::fromStdString(spec.column_labels[static_cast<std::size_t>(c)]),
                           Qt::ElideRight, p.column_label_length + 1));
    painter.restore();
  }
  // Boxes over the cells (a cut): white under red, so that they show on every viridis colour;
  // the label in a white box at the box's top right, kept inside the cells.
  for (const HeatmapBox& box : spec.boxes) {
    if (box.rows <= 0 || box.columns <= 0) continue;
    const double cell_w = area.width() / p.column_count, cell_h = area.height() / p.row_count;
    const QRectF frame(area.left() + box.first_column * cell_w, area.top() + box.first_row * cell_h,
                       box.columns * cell_w, box.rows * cell_h);
    painter.save();
    painter.setBrush(Qt::NoBrush);
    painter.setPen(QPen(Qt::white, 4.0));
    painter.drawRect(frame);
    painter.setPen(QPen(QColor(200, 30, 30), 2.0));
    painter.drawRect(frame);
    if (!box.label.empty()) {
      const QString text = QString::fromStdString(box.label);
      const QSizeF text_size = metrics.size(0, text) + QSizeF(6, 2);
      QPointF corner(frame.right() + 3, frame.top());
      if (corner.x() + text_size.width() > area.right())
        corner.setX(std::max(area.left(), area.right() - text_size.width()));
      if (frame.top() - text_size.height() - 2 >= area.top() &&
          corner.x() + text_size.width() > frame.left() && corner.x() < frame.right() + 3)
        corner.setY(frame.top() - text_size.height() - 2);
      const QRectF label(corner, text_size);
      painter.fillRect(label, QColor(255, 255, 255, 225));
      painter.setPen(QColor(150, 20, 20));
      painter.drawText(label, Qt::AlignCenter, text);
    }
    painter.restore();
  }
  // Colour bar.
  const QRectF& bar = p.bar;
  for (int i = 0; i < 64; ++i) {
    const Rgb colour = viridis(1.0 - i / 63.0);
    painter.fillRect(QRectF(bar.left(), bar.top() + bar.height() * i / 64.0, bar.width(),
                            bar.height() / 64.0 + 1),
                     QColor(colour.r, colour.g, colour.b));
  }
  painter.setPen(Qt::black);
  painter.drawRect(bar);
  painter.setFont(p.bar_font);
  const QFontMetricsF bar_metrics(p.bar_font);
  painter.drawText(QPointF(bar.right() + 3, bar.top() + bar_metrics.ascent()),
                   QString::fromStdString(format_number(high)));
  painter.drawText(QPointF(bar.right() + 3, bar.bottom()),
                   QString::fromStdString(format_number(spec.low)));
}

void render_heatmap_files(const HeatmapSpec& spec, const std::filesystem::path& png,
                          const std::filesystem::path& svg, QSize size) {
  ensure_application();
  const HeatmapLayout layout = heatmap_layout(spec, QSizeF(size));
  write_png_and_svg(
      png, svg, size, spec.title, "heatmap '" + spec.id + "'",
      [&](QPainter& painter) { paint_heatmap(painter, spec, layout); }, /*antialias=*/false);
}

}  // namespace attnres::charts
