// Export: ensure_application (an offscreen QApplication for commands that write charts),
// render_chart_files (an xy chart laid out in a scene of the file's size, or a Gantt chart
// painted directly) and write_png_and_svg, the one encoder of pictures (heatmaps use it too).
#include "chart_export.hpp"

#include <unistd.h>

#include <QApplication>
#include <QBuffer>
#include <QDir>
#include <QFile>
#include <QGraphicsLayout>
#include <QGraphicsScene>
#include <QImage>
#include <QPainter>
#include <QSvgGenerator>
#include <QtCharts/QChart>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "chart_render_internal.hpp"

namespace attnres::charts {

using namespace detail;

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

void require_drawing_memory(std::int64_t pixels) {
  // Out of memory inside Qt's drawing is no exception the command can catch: QtGui is built
  // without exceptions, so a failed allocation there aborts the process (SIGABRT, the staging
  // folder left behind) or leaves a null image. So the memory a drawing needs (the image, the
  // encoded PNG and SVG, Qt's own buffers: three images' bytes and 64 MB) is asked for first; when
  // it is not there, std::bad_alloc: the CLI says "out of memory" and removes the staging folder.
  const auto bytes =
      static_cast<std::size_t>(std::max<std::int64_t>(pixels, 0)) * 4 * 3 + (std::size_t{64} << 20);
  std::unique_ptr<char[]> probe(new (std::nothrow) char[bytes]);
  if (!probe) throw std::bad_alloc();
}

void write_png_and_svg(const std::filesystem::path& png, const std::filesystem::path& svg,
                       QSize size, const std::string& title, const std::string& what,
                       const std::function<void(QPainter&)>& draw, bool antialias) {
  require_drawing_memory(std::int64_t{size.width()} * size.height());
  QImage image(size, QImage::Format_ARGB32);
  if (image.isNull()) throw std::bad_alloc();  // Qt's answer to an allocation that failed
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
