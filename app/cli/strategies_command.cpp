// attnres strategies: bytes, launches, temporary and saved memory of each implementation strategy
// (stack, arena, fused one-shot, fused two-phase), forward and backward, what each adds to a
// training step and a decode step, and with --calls every kernel call of one strategy
// (docs/math.md §3.6).
#include <cmath>
#include <ostream>

#include "attnres/calibration.hpp"
#include "attnres/cost.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/hardware.hpp"
#include "attnres/strategy.hpp"
#include "attnres/strategy_report.hpp"
#include "cli.hpp"
#include "cost_input_flags.hpp"
#include "options.hpp"
#include "table_output.hpp"

namespace attnres::cli {

namespace {

// --scheme SPEC (any scheme with depth reads), else --mode block|full.
AttnResConfig strategies_scheme(const po::variables_map& values, const std::string& mode,
                                const std::string& scheme_text, const CostInputs& inputs) {
  AttnResConfig scheme;
  if (values.count("scheme")) {
    scheme = parse_flag_value([&] {
      AttnResConfig parsed = parse_scheme_spec(scheme_text, inputs);
      if (auto problem = scheme_problem(parsed, inputs))
        throw Error("--scheme: " + problem->message);
      try {
        read_ops_of(parsed);
      } catch (const Error& error) {
        throw Error(std::string("--scheme: ") + error.what());
      }
      return parsed;
    });
  } else {
    scheme.mode = strategy_mode(mode);
  }
  return scheme;
}

// --calls STRATEGY: every kernel call of one strategy for one micro-batch, its bytes and time.
ReportTable calls_table(Strategy picked, const AttnResConfig& scheme, const CostInputs& inputs,
                        const Hardware& hw) {
  const StrategyCost cost =
      parse_flag_value([&] { return scheme_strategy_cost(picked, scheme, inputs); });
  const double tokens = static_cast<double>(inputs.batch) * static_cast<double>(inputs.tokens);
  const int b = bytes_per_element(inputs.dtype);
  ReportTable calls =
      typed_table("calls_" + to_string(picked),
                  "Every kernel call of " + to_string(picked) + " for one micro-batch",
                  {{"pass", "pass", Shown::text},
                   {"op", "op", Shown::text},
                   {"read", "read r", Shown::integer},
                   {"launches", "launches", Shown::integer},
                   {"read_vectors", "read (vectors)", Shown::integer},
                   {"write_vectors", "write (vectors)", Shown::integer},
                   {"bytes", "bytes", Shown::number},
                   {"seconds", "time (us)", Shown::microseconds},
                   {"at_kernel_floor", "at the floor", Shown::yes_no}});
  auto add = [&](const char* pass, const std::vector<KernelCall>& list) {
    for (const auto& call : list) {
      const double bytes =
          static_cast<double>(call.vectors()) * static_cast<double>(inputs.d_model) * tokens * b;
      const double seconds = call_seconds(bytes, hw);
      add_row(calls, {pass, call.op, call.read, call.count, call.read_vectors, call.write_vectors,
                      bytes, seconds, seconds <= hw.kernel_floor});
    }
  };
  add("forward", cost.forward_calls);
  add("backward", cost.backward_calls);
  calls.note =
      "Each row is `launches` calls of one shape (per launch: vectors, bytes, time). Vectors are "
      "d-wide per token; bytes = vectors x d x B·T x b; time = max(floor, "
      "bytes / (bandwidth x efficiency)).";
  return calls;
}

}  // namespace

int strategies_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  InputFlags flags;
  flags.block_list = true;
  std::string mode, hardware, strategy, scheme_text;
  TableFormat format;
  po::options_description options = command_options("strategies");
  flags.add_to(options);
  options.add_options()("mode", po::value(&mode)->default_value("block"),
                        "AttnRes variant: block | full")(
      "scheme", po::value(&scheme_text),
      "any scheme with depth reads instead of --mode, e.g. full_window, block:key_norm=off, "
      "denseformer (docs/schemes.md)")("hardware", po::value(&hardware)->default_value("h100"),
                                       hardware_flag_help().c_str())(
      "calls", po::value(&strategy),
      "also list every kernel call of one strategy (stack | arena | fused_one_shot | "
      "fused_two_phase) with its bytes and time for one micro-batch");
  add_table_format_option(options, format);
  po::variables_map values;
  if (parse_or_help(
          args, options, values, out,
          "usage: attnres strategies (--sublayers L | --layers N) (--blocks N | --block-size "
          "S | --block-layers K | --block-sizes LIST) --d-model D [model flags] "
          "[--mode block|full | --scheme SPEC] [--hardware h100|FILE.toml] [--calls STRATEGY] "
          "[--format table|markdown|json|csv [--table ID]]\n"
          "Bytes, launches, temporary and saved memory of each implementation strategy "
          "(stack, arena, fused one-shot, fused two-phase), forward and backward, and what "
          "each adds to a training step and a decode step (docs/math.md §3.6).")) {
    return kExitOk;
  }
  require_table_format(format);
  flags.refuse_unused(values, "the strategy costs",
                      {"ffn", "tokens", "batch", "dtype", "architecture"});
  if (given(values, "mode") && values.count("scheme"))
    throw UsageError("--mode and --scheme both choose the scheme; give one");
  const CostInputs inputs = flags.resolved_for_listing("strategies");
  const AttnResConfig scheme = strategies_scheme(values, mode, scheme_text, inputs);
  const Hardware hw = parse_flag_value([&] { return load_hardware(hardware); });
  std::vector<ReportTable> tables = {strategies_table(scheme, inputs, hw),
                                     decode_table(scheme, inputs, hw)};
  if (values.count("calls")) {
    const Strategy picked = parse_flag_value([&] { return parse_strategy(strategy, "--calls"); });
    tables.push_back(calls_table(picked, scheme, inputs, hw));
  }
  const nlohmann::json inputs_json = {{"model", cost_inputs_to_json(inputs)},
                                      {"hardware", hardware_to_json(hw)},
                                      {"scheme", scheme_spec(scheme)}};
  print_in_format(out, tables, format, {"strategies", inputs_json});
  return kExitOk;
}

}  // namespace attnres::cli
