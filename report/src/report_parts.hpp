// Internal to the report layer: the small pieces every table and chart builder of report/src uses
// — the number formats of table cells (format_number, and GB / GiB rounded to 4 decimals), whether
// a scenario asks for a section, and an xy chart with its id, title and axis labels.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "attnres/chart_spec.hpp"
#include "attnres/format.hpp"

namespace attnres::detail {

inline std::string num(double value) {
  return format_number(value);
}
inline std::string num(std::int64_t value) {
  return std::to_string(value);
}
// Bytes as GB (1e9 bytes) and GiB (2^30 bytes), rounded to 4 decimals.
inline std::string gb(double bytes) {
  return format_number(std::round(bytes / 1e9 * 1e4) / 1e4);
}
inline std::string gib(double bytes) {
  return format_number(std::round(bytes / 1073741824.0 * 1e4) / 1e4);
}

// A cell with exactly `decimals` decimals ("-" for NaN, a value that does not exist).
inline std::string fixed(double value, int decimals) {
  if (std::isnan(value)) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}
// fixed() with a "+" in front of values >= 0, built by appending (GCC 12 at -O3 reports a false
// -Wrestrict on "literal" + std::string).
inline std::string signed_fixed(double value, int decimals) {
  std::string text = value >= 0 ? "+" : "";
  text += fixed(value, decimals);
  return text;
}
// A typed cell: the number, or null for NaN.
inline nlohmann::json number_or_null(double value) {
  return std::isnan(value) ? nlohmann::json() : nlohmann::json(value);
}

inline bool wants(const std::vector<std::string>& sections, const std::string& section) {
  return std::find(sections.begin(), sections.end(), section) != sections.end();
}

// A chart with its id (charts/<id>.png and .svg), title and axis labels (with units); everything
// else at ChartSpec's defaults.
inline ChartSpec xy_chart(std::string id, std::string title, std::string x_label,
                          std::string y_label) {
  ChartSpec chart;
  chart.id = std::move(id);
  chart.title = std::move(title);
  chart.x_label = std::move(x_label);
  chart.y_label = std::move(y_label);
  return chart;
}

}  // namespace attnres::detail
