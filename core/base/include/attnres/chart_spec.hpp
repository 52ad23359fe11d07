// A chart described in plain data (no Qt): the core builds these from engine results; the one
// Qt Charts renderer in app/charts draws them for the CLI's reports and for the GUI alike.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attnres/enum_names.hpp"

namespace attnres {

struct ChartSeries {
  enum class Style { line, scatter, line_and_points };
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y)
  Style style = Style::line_and_points;
  bool secondary_axis = false;  // drawn against the right-hand y axis
};

// What a box of a pipeline Gantt chart is: a compute op, drawn in the upper part of its lane, or a
// transfer to the next stage, drawn in the lower part. The names are the legend's.
enum class GanttCategory { forward, backward, send_forward, send_backward };
inline constexpr EnumNames<GanttCategory, 4> kGanttCategoryNames{
    {{GanttCategory::forward, "forward"},
     {GanttCategory::backward, "backward"},
     {GanttCategory::send_forward, "send (forward)"},
     {GanttCategory::send_backward, "send (backward)"}}};
inline bool is_transfer(GanttCategory category) {
  return category == GanttCategory::send_forward || category == GanttCategory::send_backward;
}

// A box of a Gantt chart: [x0, x1] on lane `lane`, coloured by `category`.
struct ChartBox {
  double x0, x1;
  int lane;
  GanttCategory category;
  std::string label;  // what the box is, for hover readouts ("F mb 3, chunk 1"); may be empty
  std::string tag;    // short text drawn inside the box when it is wide enough ("3"); may be empty
};

struct ChartSpec {
  enum class Kind { xy, gantt };
  std::string id;  // file stem: charts/<id>.png and .svg
  std::string title;
  std::string x_label, y_label, y2_label;  // with units
  bool log_x = false, log_y = false;
  std::vector<ChartSeries> series;
  std::optional<double> marker_x;  // a vertical line at the current setting
  std::string marker_label;
  std::string caption;  // one sentence under the chart in report.md
  // Gantt charts: lanes top to bottom and the boxes (the legend names every GanttCategory).
  std::vector<std::string> lanes;
  std::vector<ChartBox> boxes;
  Kind kind = Kind::xy;
};

// A heatmap described in plain data: a matrix with row and column labels, coloured by viridis
// (colormap.hpp) from `low` to `high`; NaN cells have no value (grey: "not a source"). The
// renderer in app/charts draws it for the CLI's files and for the GUI's HeatmapWidget alike.
// A rectangle of cells drawn over a heatmap with its label (the Duality view's cut k: the block
// M[k:, :k] whose rank is the state a recurrence must carry past k).
struct HeatmapBox {
  int first_row = 0, rows = 0, first_column = 0, columns = 0;
  std::string label;  // drawn beside the box: "cut k = 3: rank 1"
};

struct HeatmapSpec {
  std::string id;  // file stem: <id>.png, .svg, .csv
  std::string title;
  std::vector<std::string> row_labels, column_labels;
  std::vector<std::vector<double>> values;  // rows x columns
  double low = 0.0, high = 1.0;             // the colour scale (high > low)
  std::string caption;                      // one sentence: what the map shows
  std::vector<HeatmapBox> boxes;            // drawn over the cells (not part of the CSV)
  // What a cell's hover adds about its column / row (a source's norm, a token), when given.
  std::vector<std::string> column_notes, row_notes;
};

// The data behind a chart as CSV: "series,x,y" with one row per point.
std::string chart_csv(const ChartSpec& spec);
// A heatmap's matrix as CSV: a header "row,<column labels>", then one line per row (empty: NaN).
std::string heatmap_csv(const HeatmapSpec& spec);
// Whether two heatmaps hold the same labels, scale and values (NaN equal to NaN); boxes and notes
// are decoration and not compared.
bool same_heatmap(const HeatmapSpec& a, const HeatmapSpec& b);

}  // namespace attnres
