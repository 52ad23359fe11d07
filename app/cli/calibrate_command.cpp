// attnres calibrate: the cost model against every public measurement of AttnRes overhead in the
// calibration table, with its source and the model's error (docs/calibration.md).
#include <nlohmann/json.hpp>
#include <ostream>

#include "attnres/calibration.hpp"
#include "attnres/output_schema.hpp"
#include "attnres/strategy_report.hpp"
#include "cli.hpp"
#include "options.hpp"
#include "table_output.hpp"

namespace attnres::cli {

int calibrate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  std::string table_path;
  TableFormat format;
  po::options_description options = command_options("calibrate");
  options.add_options()(
      "table", po::value(&table_path),
      "a calibration table (TOML, docs/calibration.md) instead of the committed one");
  add_table_format_option(options, format, false);
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
  if (format.format == "json") {
    nlohmann::json root = calibration_to_json(table.source, rows);
    root["schema"] = schema_tag("calibrate");
    out << root.dump(2) << "\n";
    return kExitOk;
  }
  print_in_format(out, {calibration_table(rows)}, format, {"calibrate", {}});
  return kExitOk;
}

}  // namespace attnres::cli
