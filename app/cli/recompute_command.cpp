// attnres recompute: memory per pipeline rank and recompute FLOPs with and without activation
// checkpointing, block summaries kept or recomputed (docs/math.md §3.6).
#include <ostream>

#include "attnres/strategy.hpp"
#include "attnres/strategy_report.hpp"
#include "cli.hpp"
#include "cost_input_flags.hpp"
#include "options.hpp"
#include "table_output.hpp"

namespace attnres::cli {

int recompute_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  InputFlags flags;
  flags.block_list = true;
  std::string mode, strategy;
  TableFormat format;
  po::options_description options = command_options("recompute");
  flags.add_to(options);
  options.add_options()("mode", po::value(&mode)->default_value("block"),
                        "AttnRes variant: block | full")(
      "strategy", po::value(&strategy)->default_value("fused_one_shot"),
      "stack | arena | fused_one_shot | fused_two_phase (its saved tensors)");
  add_table_format_option(options, format);
  po::variables_map values;
  if (parse_or_help(
          args, options, values, out,
          "usage: attnres recompute (--sublayers L | --layers N) (--blocks N | --block-size "
          "S | --block-layers K | --block-sizes LIST) --d-model D [--pp P] [--vpp V] "
          "[model flags] [--mode block|full] [--strategy S] "
          "[--format table|markdown|json|csv [--table ID]]\n"
          "Memory per pipeline rank and recompute FLOPs with and without activation "
          "checkpointing, block summaries kept or recomputed (docs/math.md §3.6).")) {
    return kExitOk;
  }
  require_table_format(format);
  flags.refuse_unused(values, "the recompute table",
                      {"ffn", "tokens", "batch", "dtype", "pp", "vpp", "architecture"});
  const ResidualMode residual = strategy_mode(mode);
  const Strategy picked = parse_flag_value([&] { return parse_strategy(strategy, "--strategy"); });
  const CostInputs inputs = flags.resolved_for_listing("recompute");
  warn_stage_split(inputs, err);
  const nlohmann::json inputs_json = {{"model", cost_inputs_to_json(inputs)},
                                      {"mode", to_string(residual)},
                                      {"strategy", to_string(picked)}};
  print_in_format(out, {recompute_table(residual, picked, inputs)}, format,
                  {"recompute", inputs_json});
  return kExitOk;
}

}  // namespace attnres::cli
