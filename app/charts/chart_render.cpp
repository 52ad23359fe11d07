#include "chart_render.hpp"

#include <QApplication>
#include <QBuffer>
#include <QDir>
#include <QFile>
#include <QGraphicsScene>
#include <QFontMetricsF>
#include <QPainter>
#include <QSvgGenerator>
#include <QtCharts/QChart>
#include <QtCharts/QLegend>
#include <QtCharts/QLineSeries>
#include <QtCharts/QLogValueAxis>
#include <QtCharts/QScatterSeries>
#include <QtCharts/QValueAxis>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"

namespace attnres::charts {

namespace {

struct Range {
  double low = std::numeric_limits<double>::infinity();
  double high = -std::numeric_limits<double>::infinity();
  void add(double v) {
    low = std::min(low, v);
    high = std::max(high, v);
  }
  bool empty() const { return !(low <= high); }
};

QAbstractAxis* make_axis(const std::string& title, bool logarithmic, Range range) {
  if (range.empty()) range = {0.0, 1.0};
  if (logarithmic) {
    auto* axis = new QLogValueAxis;
    axis->setBase(10.0);
    axis->setLabelFormat("%g");
    axis->setMinorTickCount(-1);
    axis->setRange(range.low / 1.3, range.high * 1.3);
    axis->setTitleText(QString::fromStdString(title));
    return axis;
  }
  auto* axis = new QValueAxis;
  axis->setLabelFormat("%g");
  double span = range.high - range.low;
  if (span <= 0) span = std::max(1.0, std::abs(range.high));
  // Non-negative data keeps zero as the floor instead of padding below it.
  const double low = range.low >= 0 ? std::max(0.0, range.low - 0.05 * span) : range.low - 0.05 * span;
  axis->setRange(low, range.high + 0.05 * span);
  axis->applyNiceNumbers();
  axis->setTitleText(QString::fromStdString(title));
  return axis;
}

bool usable(double v, bool logarithmic) { return std::isfinite(v) && (!logarithmic || v > 0); }

}  // namespace

void ensure_application() {
  if (QCoreApplication::instance()) return;
  // Charts are drawn into images only: the offscreen platform always works, whatever
  // QT_QPA_PLATFORM says (an xcb platform without a display would abort the process).
  qputenv("QT_QPA_PLATFORM", "offscreen");
  if (qEnvironmentVariableIsEmpty("XDG_RUNTIME_DIR")) {
    // Qt warns on stderr without one; a private directory keeps the CLI's output clean.
    const QByteArray runtime = QDir::tempPath().toUtf8() + "/attnres-runtime-" + QByteArray::number(getuid());
    QDir().mkpath(QString::fromUtf8(runtime));
    QFile::setPermissions(QString::fromUtf8(runtime), QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
    qputenv("XDG_RUNTIME_DIR", runtime);
  }
  static int argc = 1;
  static char name[] = "attnres";
  static char* argv[] = {name, nullptr};
  static QApplication application(argc, argv);
}

QChart* build_chart(const ChartSpec& spec) {
  auto chart = std::make_unique<QChart>();
  chart->setTitle(QString::fromStdString(spec.title));
  chart->setAnimationOptions(QChart::NoAnimation);
  chart->legend()->setAlignment(Qt::AlignBottom);
  chart->setBackgroundBrush(Qt::white);

  Range x_range, y_range, y2_range;
  bool secondary = false;
  for (const auto& series : spec.series) {
    for (const auto& [x, y] : series.points) {
      if (!usable(x, spec.log_x)) continue;
      x_range.add(x);
      if (series.secondary_axis) {
        y2_range.add(y);
      } else if (usable(y, spec.log_y)) {
        y_range.add(y);
      }
    }
    secondary = secondary || series.secondary_axis;
  }
  QAbstractAxis* x_axis = make_axis(spec.x_label, spec.log_x, x_range);
  QAbstractAxis* y_axis = make_axis(spec.y_label, spec.log_y, y_range);
  chart->addAxis(x_axis, Qt::AlignBottom);
  chart->addAxis(y_axis, Qt::AlignLeft);
  QAbstractAxis* y2_axis = nullptr;
  if (secondary) {
    y2_axis = make_axis(spec.y2_label, false, y2_range);
    chart->addAxis(y2_axis, Qt::AlignRight);
  }

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
      if (usable(x, spec.log_x) && (series.secondary_axis || usable(y, spec.log_y))) qt_series->append(x, y);
    }
    chart->addSeries(qt_series);
    qt_series->attachAxis(x_axis);
    qt_series->attachAxis(series.secondary_axis ? y2_axis : y_axis);
  }
  if (spec.marker_x && usable(*spec.marker_x, spec.log_x) && !y_range.empty()) {
    auto* marker = new QLineSeries;
    marker->setName(QString::fromStdString(spec.marker_label));
    QPen pen(Qt::gray);
    pen.setStyle(Qt::DashLine);
    pen.setWidthF(1.5);
    marker->setPen(pen);
    const double low = spec.log_y ? y_range.low : std::min(0.0, y_range.low);
    marker->append(*spec.marker_x, low);
    marker->append(*spec.marker_x, y_range.high);
    chart->addSeries(marker);
    marker->attachAxis(x_axis);
    marker->attachAxis(y_axis);
  }
  return chart.release();
}

namespace {

double nice_step(double span, int target_ticks) {
  const double raw = span / target_ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= factor * magnitude) return factor * magnitude;
  }
  return 10.0 * magnitude;
}

}  // namespace

void paint_gantt(QPainter& painter, const ChartSpec& spec, const QRectF& area) {
  static const QColor colours[] = {QColor(76, 114, 176), QColor(221, 132, 82), QColor(85, 168, 104),
                                   QColor(196, 78, 82)};
  painter.save();
  painter.fillRect(area, Qt::white);
  QFont font = painter.font();
  font.setPointSizeF(9);
  painter.setFont(font);
  const QFontMetricsF metrics(font);
  const double left = area.left() + 70, right = area.right() - 20;
  const double top = area.top() + 40, bottom = area.bottom() - 70;
  QFont title_font = font;
  title_font.setPointSizeF(11);
  title_font.setBold(true);
  painter.setFont(title_font);
  painter.drawText(QRectF(area.left(), area.top() + 8, area.width(), 24), Qt::AlignCenter,
                   QString::fromStdString(spec.title));
  painter.setFont(font);

  double end = 0;
  for (const auto& box : spec.boxes) end = std::max(end, box.x1);
  if (end <= 0) end = 1;
  const auto lanes = static_cast<double>(std::max<std::size_t>(1, spec.lanes.size()));
  const double lane_height = (bottom - top) / lanes;
  auto x_of = [&](double x) { return left + (right - left) * x / end; };

  const double step = nice_step(end, 8);
  painter.setPen(QColor(225, 225, 225));
  for (double x = 0; x <= end + 1e-12; x += step) painter.drawLine(QPointF(x_of(x), top), QPointF(x_of(x), bottom));
  painter.setPen(Qt::black);
  for (std::size_t lane = 0; lane < spec.lanes.size(); ++lane) {
    const double y = top + lane_height * static_cast<double>(lane);
    painter.drawText(QRectF(area.left() + 4, y, 62, lane_height), Qt::AlignVCenter | Qt::AlignRight,
                     QString::fromStdString(spec.lanes[lane]));
  }
  painter.setPen(QPen(Qt::white, 0.8));  // separates back-to-back boxes
  for (const auto& box : spec.boxes) {
    const double y = top + lane_height * box.lane;
    const bool transfer = box.category >= 2;
    const QRectF rect(QPointF(x_of(box.x0), y + (transfer ? 0.72 : 0.08) * lane_height),
                      QPointF(std::max(x_of(box.x1), x_of(box.x0) + 0.6), y + (transfer ? 0.92 : 0.68) * lane_height));
    painter.setBrush(colours[std::clamp(box.category, 0, 3)]);
    painter.drawRect(rect);
  }
  painter.setPen(Qt::black);
  painter.setBrush(Qt::NoBrush);
  painter.drawRect(QRectF(QPointF(left, top), QPointF(right, bottom)));
  for (double x = 0; x <= end + 1e-12; x += step) {
    painter.drawLine(QPointF(x_of(x), bottom), QPointF(x_of(x), bottom + 4));
    painter.drawText(QRectF(x_of(x) - 40, bottom + 6, 80, 16), Qt::AlignHCenter,
                     QString::number(x, 'g', 4));
  }
  painter.drawText(QRectF(left, bottom + 22, right - left, 16), Qt::AlignHCenter,
                   QString::fromStdString(spec.x_label));
  double legend_x = left;
  for (std::size_t i = 0; i < spec.categories.size() && i < 4; ++i) {
    painter.fillRect(QRectF(legend_x, bottom + 46, 12, 12), colours[i]);
    const QString name = QString::fromStdString(spec.categories[i]);
    painter.drawText(QPointF(legend_x + 16, bottom + 56), name);
    legend_x += 32 + metrics.horizontalAdvance(name);
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
  }
  scene.setSceneRect(QRectF(QPointF(0, 0), QSizeF(size)));
  auto draw = [&](QPainter& painter) {
    if (spec.kind == ChartSpec::Kind::gantt) {
      paint_gantt(painter, spec, QRectF(QPointF(0, 0), QSizeF(size)));
    } else {
      scene.render(&painter);
    }
  };

  QImage image(size, QImage::Format_ARGB32);
  image.fill(Qt::white);
  {
    QPainter painter(&image);
    painter.setRenderHint(QPainter::Antialiasing);
    draw(painter);
  }
  QByteArray png_bytes;
  {
    QBuffer buffer(&png_bytes);
    buffer.open(QIODevice::WriteOnly);
    if (!image.save(&buffer, "PNG")) throw Error("cannot encode chart '" + spec.id + "' as PNG");
  }
  write_file_atomically(png, std::string_view(png_bytes.constData(), static_cast<std::size_t>(png_bytes.size())));

  QByteArray svg_bytes;
  {
    QBuffer buffer(&svg_bytes);
    buffer.open(QIODevice::WriteOnly);
    QSvgGenerator generator;
    generator.setOutputDevice(&buffer);
    generator.setSize(size);
    generator.setViewBox(QRect(QPoint(0, 0), size));
    generator.setTitle(QString::fromStdString(spec.title));
    QPainter painter(&generator);
    draw(painter);
  }
  write_file_atomically(svg, std::string_view(svg_bytes.constData(), static_cast<std::size_t>(svg_bytes.size())));
}

}  // namespace attnres::charts
