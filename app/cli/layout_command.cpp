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

int layout_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  InputFlags flags;
  flags.block_list = true;
  TableFormat format;
  po::options_description options = command_options("layout");
  flags.add_to(options);
  add_table_format_option(options, format);
  po::variables_map values;
  if (parse_or_help(
          args, options, values, out,
          "usage: attnres layout (--sublayers L | --layers N) (--blocks N | --block-size S "
          "| --block-layers K | --block-sizes LIST) --d-model D [--pp P] [--vpp V] "
          "[model flags] [--format table|markdown|json|csv [--table ID]]\n"
          "Every block with its sublayers, transformer layers and sources per read, against "
          "the pipeline's stage boundaries, and the exact payload of every boundary "
          "(docs/math.md §3.3, §3.6).")) {
    return kExitOk;
  }
  require_table_format(format);
  flags.refuse_unused(values, "the layout", {"pp", "vpp"});
  const CostInputs inputs = flags.resolved_for_listing("layout");
  warn_stage_split(inputs, err);
  std::vector<ReportTable> tables = {layout_table(inputs)};
  if (inputs.pp * inputs.vpp > 1) {
    tables.push_back(cost_tables(evaluate_costs(inputs), {"boundaries"}).front());
  }
  print_in_format(out, tables, format, {"layout", {{"model", cost_inputs_to_json(inputs)}}});
  return kExitOk;
}

}  // namespace attnres::cli
