// attnres calibrate: the cost model against every public measurement of AttnRes overhead in the
// calibration table, with its source and the model's error (docs/calibration.md).
#include <nlohmann/json.hpp>
#include <ostream>

#include "attnres/calibration.hpp"
#include "attnres/strategy_report.hpp"
#include "cli.hpp"
#include "options.hpp"
#include "table_output.hpp"

namespace attnres::cli {

namespace {

// --format json: every point with its source, the model's value and error, and the summary.
nlohmann::json calibration_json(const CalibrationTable& table,
                                const std::vector<CalibrationRow>& rows) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& row : rows) {
    const auto& p = row.point;
    points.push_back({{"id", p.id},
                      {"title", p.title},
                      {"source", p.source},
                      {"url", p.url},
                      {"hardware", p.hardware_name},
                      {"quantity", to_string(p.quantity)},
                      {"measured", p.measured},
                      {"measured_text", p.measured_text},
                      {"modelled", row.modelled},
                      {"ratio", row.ratio},
                      {"bound", row.bound},
                      {"within_bound", row.within},
                      {"fitted", p.fitted},
                      {"regime", row.regime},
                      {"detail", row.detail},
                      {"assumptions", p.assumptions}});
  }
  const CalibrationError error = calibration_error(rows);
  return {{"table", table.source},
          {"points", points},
          {"error",
           {{"points", error.points},
            {"typical_factor", error.typical_factor},
            {"worst_factor", error.worst_factor},
            {"worst", error.worst_id}}},
          {"summary", calibration_summary(rows)}};
}

}  // namespace

int calibrate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  std::string table_path, format;
  po::options_description options = command_options("calibrate");
  options.add_options()(
      "table", po::value(&table_path),
      "a calibration table (TOML, docs/calibration.md) instead of the committed one");
  add_table_format_option(options, format);
  po::variables_map values;
  if (parse_or_help(
          args, options, values, out,
          "usage: attnres calibrate [--table FILE.toml] [--format table|markdown|json|csv]\n"
          "Modelled vs measured for every public measurement of AttnRes overhead in the "
          "calibration table, with its source and the model's error (docs/calibration.md).")) {
    return kExitOk;
  }
  require_table_format(format);
  const CalibrationTable table =
      table_path.empty() ? builtin_calibration() : load_calibration(table_path);
  const auto rows = evaluate_calibration(table);
  if (format == "json") {
    out << calibration_json(table, rows).dump(2) << "\n";
    return kExitOk;
  }
  print_in_format(out, {calibration_table(rows)}, format);
  return kExitOk;
}

}  // namespace attnres::cli
