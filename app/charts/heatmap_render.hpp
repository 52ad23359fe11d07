// The one painter of heatmaps (core HeatmapSpec, viridis from core/colormap): the GUI's
// HeatmapWidget paints with it on screen and `attnres forward --chart` into PNG and SVG files, so
// a map looks the same in both. Title wrapped over the cells, row labels on the left, column
// labels at 45 degrees below, a colour bar with the scale's ends on the right; every k-th label
// only where they would overlap; NaN cells grey.
#pragma once

#include <QFont>
#include <QPointF>
#include <QRectF>
#include <QSize>
#include <QStringList>
#include <filesystem>
#include <vector>

#include "attnres/chart_spec.hpp"

QT_BEGIN_NAMESPACE
class QPainter;
class QFontMetricsF;
QT_END_NAMESPACE

namespace attnres::charts {

// Where everything of a heatmap goes in a `size` area (origin at 0, 0) at a type scale.
struct HeatmapLayout {
  QSizeF size;  // the whole area
  QFont title_font, label_font, bar_font;
  QStringList title_lines;
  QRectF title_rect;
  QRectF area;  // the cells
  QRectF bar;   // the colour bar
  double label_height = 0;
  std::vector<int> rows, columns;  // the labels drawn (indices)
  double row_label_width = 0, column_label_length = 0;
  int row_count = 0, column_count = 0;
  // The rectangle of row label `row`'s text (empty when that label is not drawn).
  QRectF row_label_rect(int row) const;
  QPointF cell_center(int row, int col) const;
  // The cell under a point, (-1, -1) outside the cells.
  std::pair<int, int> cell_at(QPointF point) const;
};

HeatmapLayout heatmap_layout(const HeatmapSpec& spec, QSizeF size, double font_scale = 1.0);
// Paints the heatmap (white background included) with the layout heatmap_layout gave for it.
void paint_heatmap(QPainter& painter, const HeatmapSpec& spec, const HeatmapLayout& layout);

// Renders the heatmap headlessly into a PNG and an SVG (each written atomically); makes an
// offscreen QApplication when there is none.
void render_heatmap_files(const HeatmapSpec& spec, const std::filesystem::path& png,
                          const std::filesystem::path& svg, QSize size = QSize(720, 600));

// Greedy word wrap into at most `most` lines, the last one elided (titles of heatmaps and charts).
QStringList wrap_lines(const QString& text, const QFontMetricsF& metrics, double width, int most);

}  // namespace attnres::charts
