// Typed tables (report.hpp): each cell's value once, shown in the terminal table, Markdown and
// report.md as its column says, written to JSON and CSV as the value itself (docs/json.md §2,
// §3); and the typed form of a table that was built from displayed text only.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/report.hpp"

namespace attnres {

using nlohmann::json;

namespace {

std::string rounded(double value, double scale) {
  return format_number(std::round(value * scale) / scale);
}

}  // namespace

std::string shown_value(const json& value, Shown shown) {
  if (value.is_null()) return "n/a";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "yes" : "no";
  if (value.is_number_integer() && (shown == Shown::integer || shown == Shown::number ||
                                    shown == Shown::text || shown == Shown::decimals3))
    return std::to_string(value.get<std::int64_t>());
  const double v = value.get<double>();
  switch (shown) {
    case Shown::text:
    case Shown::number:
    case Shown::integer:
    case Shown::yes_no:
      return format_number(v);
    case Shown::decimals3:
      return rounded(v, 1e3);
    case Shown::megabytes:
      return rounded(v / 1e6, 1e3);
    case Shown::gigabytes:
      return rounded(v / 1e9, 1e4);
    case Shown::gibibytes:
      return rounded(v / 1073741824.0, 1e4);
    case Shown::milliseconds:
      return rounded(v * 1e3, 1e4);
    case Shown::microseconds:
      return rounded(v * 1e6, 1e3);
    case Shown::percent:
      return rounded(v * 100, 1e3);
    case Shown::teraflop:
      return rounded(v / 1e12, 1e3);
  }
  return format_number(v);
}

std::string snake_case_key(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c)) {
      out.push_back(static_cast<char>(std::tolower(c)));
    } else if (!out.empty() && out.back() != '_') {
      out.push_back('_');
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

ReportTable typed_table(std::string id, std::string title, std::vector<TableColumn> columns,
                        std::string chart) {
  ReportTable table;
  table.id = std::move(id);
  table.title = std::move(title);
  table.chart = std::move(chart);
  for (const auto& column : columns) table.header.push_back(column.header);
  table.columns = std::move(columns);
  return table;
}

void add_row(ReportTable& table, std::vector<json> values, std::vector<std::string> shown_as) {
  if (values.size() != table.columns.size())
    throw Error("table " + table.id + ": a row of " + std::to_string(values.size()) +
                " values for " + std::to_string(table.columns.size()) + " columns");
  std::vector<std::string> shown;
  for (std::size_t i = 0; i < values.size(); ++i) {
    shown.push_back(i < shown_as.size() && !shown_as[i].empty()
                        ? shown_as[i]
                        : shown_value(values[i], table.columns[i].shown));
  }
  table.rows.push_back(std::move(shown));
  table.values.push_back(std::move(values));
}

namespace {

// "forward read (MB)" -> {"forward_read", "MB"}; "FLOP/token" -> {"", "FLOP/token"} when the
// whole header is a unit.
struct HeaderParts {
  std::string name, unit;
};

HeaderParts split_header(const std::string& header) {
  const auto open = header.rfind(" (");
  if (open != std::string::npos && header.back() == ')')
    return {header.substr(0, open), header.substr(open + 2, header.size() - open - 3)};
  return {header, ""};
}

// A displayed unit: the key's suffix and the factor from the shown number to the SI value.
struct UnitOf {
  const char* shown;
  const char* suffix;
  double factor;
};
constexpr UnitOf kUnits[] = {
    {"MB", "bytes", 1e6},
    {"GB", "bytes", 1e9},
    {"GiB", "bytes", 1073741824.0},
    {"bytes", "bytes", 1},
    {"bytes/token", "bytes_per_token", 1},
    {"%", "fraction", 0.01},
    {"s", "seconds", 1},
    {"ms", "seconds", 1e-3},
    {"us", "seconds", 1e-6},
    {"TFLOP", "flop", 1e12},
    {"FLOP/token", "flop_per_token", 1},
    {"elements/token", "elements_per_token", 1},
    {"x d", "multiples_of_d", 1},
    {"x N_p·d", "multiples_of_np_d", 1},
    {"vectors", "vectors", 1},
    {"PFLOP/s-days", "pflop_s_days", 1},
    {"tokens/s", "tokens_per_second", 1},
};

json cell_value(const std::string& cell, double factor) {
  if (cell == "n/a" || cell == "-" || cell.empty()) return nullptr;
  if (cell == "yes") return true;
  if (cell == "no") return false;
  char* end = nullptr;
  const double v = std::strtod(cell.c_str(), &end);
  if (end == cell.c_str() || *end != '\0') return cell;
  if (factor == 1 && cell.find_first_of(".eE") == std::string::npos && std::abs(v) < 9e15)
    return static_cast<std::int64_t>(v);
  return v * factor;
}

}  // namespace

ReportTable typed_from_display(const ReportTable& table) {
  if (!table.columns.empty()) return table;
  ReportTable typed = table;
  std::vector<double> factors;
  std::vector<bool> keep;
  std::vector<std::string> seen;
  for (const auto& header : table.header) {
    const HeaderParts parts = split_header(header);
    std::string key = snake_case_key(parts.name);
    double factor = 1;
    std::string unit = parts.unit;
    if (unit.empty()) {
      for (const auto& u : kUnits)
        if (parts.name == u.shown || snake_case_key(parts.name) == snake_case_key(u.shown))
          unit = u.shown, key = "";
    }
    for (const auto& u : kUnits) {
      if (unit == u.shown) {
        key += (key.empty() ? "" : "_") + std::string(u.suffix);
        factor = u.factor;
        unit.clear();
        break;
      }
    }
    if (!unit.empty()) key += "_" + snake_case_key(unit);
    if (key.empty()) key = "value";
    // The same quantity in another unit (GB beside bytes): kept once, the first time.
    const bool repeated = std::find(seen.begin(), seen.end(), key) != seen.end();
    keep.push_back(!repeated);
    seen.push_back(key);
    factors.push_back(factor);
    if (!repeated) typed.columns.push_back({key, header, Shown::text});
  }
  for (const auto& row : table.rows) {
    std::vector<json> values;
    for (std::size_t i = 0; i < row.size() && i < keep.size(); ++i)
      if (keep[i]) values.push_back(cell_value(row[i], factors[i]));
    while (values.size() < typed.columns.size()) values.emplace_back(nullptr);
    typed.values.push_back(std::move(values));
  }
  return typed;
}

namespace {

// The columns of a typed table with a key of their own: a quantity shown twice (GB and GiB) is
// one column of the typed form.
std::vector<std::size_t> distinct_columns(const ReportTable& typed) {
  std::vector<std::size_t> columns;
  for (std::size_t i = 0; i < typed.columns.size(); ++i) {
    bool seen = false;
    for (std::size_t j : columns) seen = seen || typed.columns[j].key == typed.columns[i].key;
    if (!seen) columns.push_back(i);
  }
  return columns;
}

}  // namespace

json table_json(const ReportTable& table) {
  // A typed table as it is (no copy: a sweep's table can hold millions of rows).
  const ReportTable converted = table.columns.empty() ? typed_from_display(table) : ReportTable{};
  const ReportTable& typed = table.columns.empty() ? converted : table;
  const auto distinct = distinct_columns(typed);
  json columns = json::array();
  for (std::size_t i : distinct)
    columns.push_back({{"key", typed.columns[i].key}, {"header", typed.columns[i].header}});
  json rows = json::array();
  for (const auto& values : typed.values) {
    json row = json::object();
    for (std::size_t i : distinct) row[typed.columns[i].key] = values[i];
    rows.push_back(std::move(row));
  }
  return {{"id", typed.id},     {"title", typed.title},
          {"note", typed.note}, {"typed_from_display", table.columns.empty()},
          {"columns", columns}, {"rows", rows}};
}

std::string table_csv(const ReportTable& table) {
  // A typed table as it is (no copy: a sweep's table can hold millions of rows).
  const ReportTable converted = table.columns.empty() ? typed_from_display(table) : ReportTable{};
  const ReportTable& typed = table.columns.empty() ? converted : table;
  auto quote = [](const std::string& cell) {
    if (cell.find_first_of(",\"\n\r") == std::string::npos) return cell;
    std::string out = "\"";
    for (char c : cell) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
  };
  const auto distinct = distinct_columns(typed);
  std::ostringstream out;
  for (std::size_t i : distinct) out << (i ? "," : "") << quote(typed.columns[i].key);
  out << "\n";
  for (const auto& values : typed.values) {
    for (std::size_t i : distinct) {
      const json& v = values[i];
      out << (i ? "," : "");
      if (v.is_string()) {
        out << quote(v.get<std::string>());
      } else if (v.is_number_float()) {
        // The shortest text that reads back as the same double ("30", "0.1").
        char buffer[64];
        const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, v.get<double>());
        if (error == std::errc() && std::isfinite(v.get<double>())) out.write(buffer, end - buffer);
      } else if (!v.is_null()) {
        out << v.dump();
      }
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace attnres
