// The one place that turns a ChartSpec (core, Qt-free) into Qt Charts: the CLI's report figures
// and the GUI's views both go through build_chart, so the same scenario gives the same chart.
#pragma once

#include <QSize>
#include <filesystem>

#include "attnres/chart_spec.hpp"

QT_BEGIN_NAMESPACE
class QChart;
class QPainter;
class QRectF;
QT_END_NAMESPACE

namespace attnres::charts {

// A new chart (caller owns it): axes with the spec's labels, log axes where asked, series,
// the current-setting marker, no animations.
QChart* build_chart(const ChartSpec& spec);

// Paints a Gantt chart (ChartSpec::Kind::gantt) into `area`: one lane per entry of spec.lanes,
// boxes coloured by category, a time axis and a legend. Used for files and by GUI widgets.
void paint_gantt(QPainter& painter, const ChartSpec& spec, const QRectF& area);

// Renders the chart headlessly into a PNG and an SVG (each written atomically). Needs a
// QApplication; ensure_application() makes one on the offscreen platform when none exists.
void render_chart_files(const ChartSpec& spec, const std::filesystem::path& png,
                        const std::filesystem::path& svg, QSize size = QSize(960, 600));

// Creates a QApplication on the offscreen platform if there is none. Commands that write charts
// call it before they stage any output, so a Qt start-up failure cannot leave a staging folder.
void ensure_application();

}  // namespace attnres::charts
