// Export: charts, Gantt charts and heatmaps into PNG and SVG files, drawn headlessly. The one
// place pictures are encoded (write_png_and_svg), and the offscreen QApplication that commands
// writing charts make first. Included by chart_render.hpp, the renderer's entry point.
#pragma once

#include <QSize>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "attnres/chart_spec.hpp"

QT_BEGIN_NAMESPACE
class QPainter;
QT_END_NAMESPACE

namespace attnres::charts {

// Throws std::bad_alloc unless the memory of drawing an image of `pixels` (with its encodings and
// Qt's buffers) can be had now: QtGui aborts on an allocation that fails, so it is asked first.
void require_drawing_memory(std::int64_t pixels);

// Draws `draw` into a PNG (on white) and into an SVG, both of `size`, each written atomically;
// `what` names the picture in an encoding error ("chart 'io'"). The one place pictures are encoded.
void write_png_and_svg(const std::filesystem::path& png, const std::filesystem::path& svg,
                       QSize size, const std::string& title, const std::string& what,
                       const std::function<void(QPainter&)>& draw, bool antialias);

// Renders the chart headlessly into a PNG and an SVG (each written atomically; a Gantt chart at
// 1200 px wide and a height for its lanes). Needs a QApplication; ensure_application() makes one
// on the offscreen platform when none exists.
void render_chart_files(const ChartSpec& spec, const std::filesystem::path& png,
                        const std::filesystem::path& svg, QSize size = QSize(960, 600));

// Creates a QApplication on the offscreen platform if there is none. Commands that write charts
// call it before they stage any output, so a Qt start-up failure cannot leave a staging folder.
void ensure_application();

}  // namespace attnres::charts
