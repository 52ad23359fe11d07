#include "widgets.hpp"

#include <QBuffer>
#include <QMouseEvent>
#include <QPainter>
#include <QSvgGenerator>
#include <QToolTip>
#include <QtCharts/QAbstractAxis>
#include <QtCharts/QChart>
#include <QtCharts/QLegend>
#include <QtCharts/QLegendMarker>
#include <cmath>
#include <sstream>

#include "attnres/atomic_file.hpp"
#include "attnres/colormap.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "chart_render.hpp"

namespace attnres::gui {

HeatmapWidget::HeatmapWidget(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setMinimumSize(260, 220);
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

int HeatmapWidget::title_height() const {
  const QRect bounds = fontMetrics().boundingRect(QRect(0, 0, std::max(40, width() - 8), 1000),
                                                  Qt::AlignHCenter | Qt::TextWordWrap, QString::fromStdString(title_));
  return std::clamp(bounds.height(), fontMetrics().height(), 3 * fontMetrics().lineSpacing());
}

QRectF HeatmapWidget::plot_rect() const {
  // Room for the title, row labels on the left (as wide as the longest, at most 110 px), column
  // labels below, the colour bar right.
  int labels = 0;
  for (const auto& row : rows_) labels = std::max(labels, fontMetrics().horizontalAdvance(QString::fromStdString(row)));
  const double left = std::clamp(labels + 12, 40, 110);
  return QRectF(QPointF(left, 10 + title_height()), QPointF(width() - 70, height() - 56));
}

QPointF HeatmapWidget::cell_center(int row, int col) const {
  const QRectF area = plot_rect();
  const double cell_w = area.width() / static_cast<double>(columns_.size());
  const double cell_h = area.height() / static_cast<double>(rows_.size());
  return {area.left() + (col + 0.5) * cell_w, area.top() + (row + 0.5) * cell_h};
}

std::pair<int, int> HeatmapWidget::cell_at(QPointF point) const {
  const QRectF area = plot_rect();
  if (rows_.empty() || columns_.empty() || !area.contains(point)) return {-1, -1};
  const int col = static_cast<int>((point.x() - area.left()) / area.width() * static_cast<double>(columns_.size()));
  const int row = static_cast<int>((point.y() - area.top()) / area.height() * static_cast<double>(rows_.size()));
  return {std::min(row, static_cast<int>(rows_.size()) - 1), std::min(col, static_cast<int>(columns_.size()) - 1)};
}

void HeatmapWidget::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.fillRect(rect(), Qt::white);
  painter.drawText(QRectF(4, 4, width() - 8, title_height() + 2), Qt::AlignHCenter | Qt::TextWordWrap,
                   QString::fromStdString(title_));
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
  const QRectF area = plot_rect();
  painter.drawImage(area, image);  // nearest-neighbour scaling keeps cells flat
  QFont font = painter.font();
  font.setPointSizeF(std::clamp(area.height() / n_rows * 0.6, 5.0, 9.0));
  painter.setFont(font);
  // Many small cells (a long sequence): label every few rows and columns so labels do not overlap.
  const int row_every = std::max(1, static_cast<int>(std::ceil(11.0 / (area.height() / n_rows))));
  const int col_every = std::max(1, static_cast<int>(std::ceil(12.0 / (area.width() / n_cols))));
  for (int r = 0; r < n_rows; r += row_every) {
    const QPointF centre = cell_center(r, 0);
    painter.drawText(QRectF(2, centre.y() - 8, area.left() - 6, 16), Qt::AlignRight | Qt::AlignVCenter,
                     QString::fromStdString(rows_[static_cast<std::size_t>(r)]));
  }
  for (int c = 0; c < n_cols; c += col_every) {
    const QPointF centre = cell_center(0, c);
    painter.save();
    painter.translate(centre.x(), area.bottom() + 4);
    painter.rotate(45);
    painter.drawText(QPointF(0, 8), QString::fromStdString(columns_[static_cast<std::size_t>(c)]));
    painter.restore();
  }
  // Colour bar.
  const QRectF bar(area.right() + 14, area.top(), 14, area.height());
  for (int i = 0; i < 64; ++i) {
    const Rgb colour = viridis(1.0 - i / 63.0);
    painter.fillRect(QRectF(bar.left(), bar.top() + bar.height() * i / 64.0, bar.width(), bar.height() / 64.0 + 1),
                     QColor(colour.r, colour.g, colour.b));
  }
  painter.setPen(Qt::black);
  painter.drawRect(bar);
  painter.drawText(QPointF(bar.right() + 3, bar.top() + 8), QString::fromStdString(format_number(high_)));
  painter.drawText(QPointF(bar.right() + 3, bar.bottom()), QString::fromStdString(format_number(low_)));
}

void HeatmapWidget::mouseMoveEvent(QMouseEvent* event) {
  const auto [row, col] = cell_at(event->position());
  if (row < 0) {
    QToolTip::hideText();
    return;
  }
  const double v = values_[static_cast<std::size_t>(row)][static_cast<std::size_t>(col)];
  QToolTip::showText(event->globalPosition().toPoint(),
                     QString::fromStdString(rows_[static_cast<std::size_t>(row)] + " <- " +
                                            columns_[static_cast<std::size_t>(col)] + ": " +
                                            (std::isnan(v) ? std::string("not a source") : format_number(v))),
                     this);
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

void GanttWidget::set_spec(ChartSpec spec) {
  spec_ = std::move(spec);
  setMinimumHeight(std::clamp(120 + 30 * static_cast<int>(spec_.lanes.size()), 220, 900));
  update();
}

void GanttWidget::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.setRenderHint(QPainter::Antialiasing);
  charts::paint_gantt(painter, spec_, QRectF(rect()));
}

ChartPanel::ChartPanel(QWidget* parent) : QChartView(parent) {
  setRenderHint(QPainter::Antialiasing);
  setMinimumSize(320, 240);
}

void ChartPanel::set_spec(ChartSpec spec) {
  spec_ = std::move(spec);
  QChart* old = chart();
  QChart* fresh = charts::build_chart(spec_);
  // Panels are small: smaller type so legends and axis titles fit.
  QFont legend = fresh->legend()->font();
  legend.setPointSizeF(7.5);
  fresh->legend()->setFont(legend);
  for (QAbstractAxis* axis : fresh->axes()) {
    QFont title = axis->titleFont();
    title.setPointSizeF(8);
    axis->setTitleFont(title);
    QFont labels = axis->labelsFont();
    labels.setPointSizeF(7.5);
    axis->setLabelsFont(labels);
  }
  QFont heading = fresh->titleFont();
  heading.setPointSizeF(9);
  fresh->setTitleFont(heading);
  fresh->setMargins(QMargins(2, 2, 2, 2));
  for (QLegendMarker* marker : fresh->legend()->markers()) {
    if (marker->label().startsWith("scenario:")) marker->setVisible(false);  // the dashed line explains itself
  }
  setChart(fresh);
  if (old) old->deleteLater();
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
