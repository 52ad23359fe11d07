// attnres metrics: every metric key of the cost engine (the JSON paths, CSV rows and sweep
// metrics) with its unit, what it needs and what it means.
#include <nlohmann/json.hpp>
#include <ostream>

#include "attnres/cost_metrics.hpp"
#include "attnres/output_schema.hpp"
#include "cli.hpp"
#include "options.hpp"
#include "text_table.hpp"

namespace attnres::cli {

int metrics_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  std::string format;
  po::options_description options = command_options("metrics");
  options.add_options()("format", po::value(&format)->default_value("table"),
                        "table | markdown | json");
  po::variables_map values;
  if (parse_or_help(args, options, values, out,
                    "usage: attnres metrics [--format table|markdown|json]")) {
    return kExitOk;
  }
  require_format(format, {"table", "markdown", "json"});
  auto needs = [](const CostMetric& metric) {
    switch (metric.needs) {
      case CostMetric::Needs::cost:
        return "model";
      case CostMetric::Needs::time:
        return "[hardware]";
      case CostMetric::Needs::pipeline:
        return "[pipeline]";
      case CostMetric::Needs::memory:
        return "model ([hardware] for the capacity)";
    }
    return "";
  };
  if (format == "json") {
    // Every metric key with its unit, what it needs and what it is (docs/json.md §6).
    nlohmann::json metrics = nlohmann::json::array();
    for (const auto& metric : cost_metrics()) {
      metrics.push_back({{"key", metric.key},
                         {"unit", metric.unit},
                         {"needs", needs(metric)},
                         {"description", metric.description}});
    }
    out << nlohmann::json{{"schema", schema_tag("metrics")}, {"metrics", metrics}}.dump(2) << "\n";
    return kExitOk;
  }
  if (format == "markdown") {
    out << "| key | unit | needs | meaning |\n|---|---|---|---|\n";
    for (const auto& metric : cost_metrics()) {
      out << "| `" << metric.key << "` | " << metric.unit << " | " << needs(metric) << " | "
          << metric.description << " |\n";
    }
    return kExitOk;
  }
  TextTable table({"key", "unit", "needs", "meaning"});
  for (const auto& metric : cost_metrics())
    table.add_row({metric.key, metric.unit, needs(metric), metric.description});
  table.print(out);
  return kExitOk;
}

}  // namespace attnres::cli
