#include "attnres/chart_spec.hpp"

#include <cmath>
#include <sstream>

#include "attnres/format.hpp"

namespace attnres {

std::string chart_csv(const ChartSpec& spec) {
  std::ostringstream out;
  out.precision(12);
  out << "series,x,y\n";
  for (const auto& series : spec.series) {
    for (const auto& [x, y] : series.points)
      out << '"' << series.name << "\"," << x << "," << y << "\n";
  }
  return out.str();
}

std::string heatmap_csv(const HeatmapSpec& spec) {
  std::ostringstream out;
  out << "row";
  for (const auto& c : spec.column_labels) out << "," << c;
  out << "\n";
  for (std::size_t r = 0; r < spec.row_labels.size() && r < spec.values.size(); ++r) {
    out << spec.row_labels[r];
    for (double v : spec.values[r])
      out << "," << (std::isnan(v) ? std::string() : format_number(v));
    out << "\n";
  }
  return out.str();
}

bool same_heatmap(const HeatmapSpec& a, const HeatmapSpec& b) {
  if (a.id != b.id || a.title != b.title || a.row_labels != b.row_labels ||
      a.column_labels != b.column_labels || a.low != b.low || a.high != b.high ||
      a.caption != b.caption || a.values.size() != b.values.size()) {
    return false;
  }
  for (std::size_t r = 0; r < a.values.size(); ++r) {
    if (a.values[r].size() != b.values[r].size()) return false;
    for (std::size_t c = 0; c < a.values[r].size(); ++c) {
      const double x = a.values[r][c], y = b.values[r][c];
      if (!(x == y || (std::isnan(x) && std::isnan(y)))) return false;
    }
  }
  return true;
}

}  // namespace attnres
