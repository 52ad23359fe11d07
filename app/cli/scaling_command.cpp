// attnres scaling: the paper's scaling-law fits, the compute each scheme needs to reach a
// validation loss and the multipliers between them.
#include <cmath>
#include <nlohmann/json.hpp>
#include <ostream>

#include "attnres/cost.hpp"
#include "attnres/format.hpp"
#include "attnres/output_schema.hpp"
#include "attnres/report.hpp"
#include "cli.hpp"
#include "options.hpp"
#include "table_output.hpp"

namespace attnres::cli {

int scaling_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  double target_loss = 1.695;
  std::string format;
  po::options_description options = command_options("scaling");
  options.add_options()("target-loss", po::value(&target_loss)->default_value(1.695),
                        "validation loss to reach")(
      "format", po::value(&format)->default_value("table"), "table | json | csv");
  po::variables_map values;
  if (parse_or_help(args, options, values, out,
                    "usage: attnres scaling [--target-loss x] [--format table|json|csv]")) {
    return kExitOk;
  }
  require_format(format, {"table", "json", "csv"});
  if (!(target_loss > 0.0 && std::isfinite(target_loss))) {
    throw UsageError("--target-loss must be a finite number > 0, got " +
                     format_number(target_loss));
  }
  try {
    (void)scaling_at_loss(target_loss);  // a loss whose compute is not a finite number: refused
  } catch (const Error& error) {
    throw UsageError(std::string("--target-loss: ") + error.what());
  }
  Report report;
  add_scaling_section({target_loss, target_loss - 0.1, target_loss + 0.1}, report);
  if (format == "json") {
    nlohmann::json fits = nlohmann::json::array();
    for (const auto& fit : paper_scaling_fits())
      fits.push_back({{"name", fit.name}, {"coefficient", fit.A}, {"exponent", fit.a}});
    nlohmann::json json = report.json["scaling"];
    json["schema"] = schema_tag("scaling");
    json["fits"] = fits;
    json["units"] = "compute in PFLOP/s-days; multiplier = baseline compute / scheme compute";
    out << json.dump(2) << "\n";
  } else if (format == "csv") {
    out << table_csv(report.tables.front());
  } else {
    print_tables(out, {report.tables.front()});
  }
  return kExitOk;
}

}  // namespace attnres::cli
