// attnres layout: every block with its sublayers, transformer layers and sources per read against
// the pipeline's stage boundaries, and the payload of every boundary (docs/math.md §3.3, §3.6).
#include <ostream>

#include "attnres/cost.hpp"
#include "attnres/report.hpp"
#include "attnres/strategy_report.hpp"
#include "cli.hpp"
#include "cost_input_flags.hpp"
#include "options.hpp"
#include "table_output.hpp"

namespace attnres::cli {

int layout_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  InputFlags flags;
  flags.block_list = true;
  std::string format;
  po::options_description options("attnres layout options");
  options.add_options()("help,h", "show this help");
  flags.add_to(options);
  options.add_options()("format", po::value(&format)->default_value("table"),
                        "table | markdown | json | csv");
  auto values = parse_options(args, options);
  if (wants_help(values,
                 "usage: attnres layout (--sublayers L | --layers N) (--blocks N | --block-size S "
                 "| --block-layers K | --block-sizes LIST) --d-model D [--pp P] [--vpp V] "
                 "[model flags] [--format table|markdown|json|csv]\n"
                 "Every block with its sublayers, transformer layers and sources per read, against "
                 "the pipeline's stage boundaries, and the exact payload of every boundary "
                 "(docs/math.md §3.3, §3.6).",
                 options, out)) {
    return kExitOk;
  }
  po::notify(values);
  require_format(format, {"table", "markdown", "json", "csv"});
  const CostInputs inputs = flags.resolved();
  std::vector<ReportTable> tables = {layout_table(inputs)};
  if (inputs.pp * inputs.vpp > 1) {
    tables.push_back(cost_tables(evaluate_costs(inputs), {"boundaries"}).front());
  }
  print_in_format(out, tables, format);
  return kExitOk;
}

}  // namespace attnres::cli
