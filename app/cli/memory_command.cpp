// attnres memory: memory per rank of a parallel training (or inference) run — weights,
// gradients, optimizer states, activations, AttnRes history, KV cache — against the device's
// capacity with a fits / does-not-fit verdict, and the communication per step of every parallel
// group (docs/math.md §3.7).
#include <filesystem>
#include <ostream>

#include "attnres/cost_metrics.hpp"
#include "attnres/hardware.hpp"
#include "attnres/output_schema.hpp"
#include "attnres/rank_memory.hpp"
#include "attnres/report.hpp"
#include "cli.hpp"
#include "cost_input_flags.hpp"
#include "options.hpp"
#include "table_output.hpp"

namespace attnres::cli {

int memory_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  InputFlags flags;
  flags.block_list = true;
  std::string workload, mode, strategy, schedule, hardware;
  int microbatches = 8;
  double capacity_gb = 0;
  TableFormat format;
  AllowanceFlags allowance;
  po::options_description options = command_options("memory");
  flags.add_to(options, true);
  add_allowance_options(options, allowance);
  options.add_options()("workload", po::value(&workload)->default_value("training"),
                        "training | inference (weights and the KV cache)")(
      "microbatches", po::value(&microbatches)->default_value(8),
      "micro-batches m per step (how many the schedule keeps in flight)")(
      "schedule", po::value(&schedule), "1f1b | interleaved (default: interleaved when --vpp > 1)")(
      "mode", po::value(&mode)->default_value("block"),
      "residual: block | full | standard (no AttnRes history)")(
      "strategy", po::value(&strategy)->default_value("fused_two_phase"),
      "implementation strategy whose saved tensors count: stack | arena | fused_one_shot | "
      "fused_two_phase")("hardware", po::value(&hardware)->default_value("h100"),
                         hardware_flag_help().c_str())(
      "capacity", po::value(&capacity_gb), "device memory in GB, instead of the hardware preset's");
  add_table_format_option(options, format);
  po::variables_map values;
  if (parse_or_help(
          args, options, values, out,
          "usage: attnres memory (--sublayers L | --layers N) (--blocks N | --block-size S | "
          "--block-layers K | --block-sizes LIST) --d-model D [model flags] [--tp t] [--cp c] "
          "[--ep e] [--dp D] [--pp P] [--vpp V] [--zero 0..3] [--recompute none|selective|full] "
          "[--workload training|inference] [--microbatches m] [--hardware NAME|FILE.toml] "
          "[--capacity GB] [--reserve GB] [--fragmentation F] [--margin GB] [--format "
          "table|markdown|json|csv [--table ID]]\n"
          "Memory per rank against the device capacity, with a fits / does-not-fit verdict, and "
          "the communication per step of every parallel group (docs/math.md §3.7).")) {
    return kExitOk;
  }
  require_table_format(format);
  flags.refuse_unused(values, "memory per rank",
                      {"ffn", "tokens", "batch", "dtype", "pp", "vpp", "architecture", "parallel"});
  MemorySettings settings;
  parse_flag_value([&] {
    settings.workload = parse_enum(kWorkloadNames, workload, "--workload", "unknown workload");
    settings.mode = parse_residual_mode(mode, "--mode");
    settings.strategy = parse_strategy(strategy, "--strategy");
  });
  if (microbatches < 1 || microbatches > kMaxMicrobatches)
    throw UsageError("--microbatches must be between 1 and " + std::to_string(kMaxMicrobatches));
  if (values.count("capacity") && !(capacity_gb > 0)) throw UsageError("--capacity must be > 0 GB");
  if (settings.workload == Workload::inference) {
    for (const char* flag : {"microbatches", "schedule", "strategy", "zero", "optimizer-bytes"}) {
      if (given(values, flag))
        throw UsageError(std::string("--") + flag +
                         " describes training; inference memory holds weights and the KV cache "
                         "(leave it out or use --workload training)");
    }
  }
  const CostInputs inputs = flags.resolved();
  warn_stage_split(inputs, err);
  settings.microbatches = microbatches;
  settings.schedule = parse_flag_value([&] {
    return values.count("schedule") ? parse_pipeline_schedule(schedule, "--schedule")
                                    : default_pipeline_schedule(inputs.vpp);
  });
  if (settings.schedule == PipelineSchedule::one_f_one_b && inputs.vpp > 1)
    throw UsageError("--schedule: the 1f1b schedule runs one stage per rank (V = 1)");
  const Hardware hw = parse_flag_value([&] { return load_hardware(hardware); });
  settings.capacity_bytes = values.count("capacity") ? capacity_gb * 1e9 : hw.memory_bytes;
  settings.allowance = allowance_from_flags(allowance);
  const std::vector<RankMemory> ranks = memory_per_rank(inputs, settings);
  const std::vector<std::string> assumptions = memory_assumptions(inputs, settings);
  std::vector<ReportTable> tables = {memory_table(ranks, assumptions, " on " + hw.name)};
  if (settings.workload == Workload::training)
    tables.push_back(
        communication_table(step_communication(inputs, hw, settings.microbatches, settings.mode)));
  nlohmann::json inputs_json = inputs_to_json(inputs, &hw, nullptr);
  inputs_json["workload"] = enum_name(kWorkloadNames, settings.workload);
  inputs_json["microbatches"] = settings.microbatches;
  inputs_json["schedule"] = to_string(settings.schedule);
  inputs_json["mode"] = to_string(settings.mode);
  inputs_json["strategy"] = to_string(settings.strategy);
  inputs_json["capacity_bytes"] = settings.capacity_bytes;
  inputs_json["reserve_bytes"] = settings.allowance.runtime_bytes;
  inputs_json["fragmentation"] = settings.allowance.fragmentation;
  inputs_json["margin_bytes"] = settings.allowance.margin_bytes;
  if (format.format == "json") {
    nlohmann::json root = {{"schema", schema_tag("memory")}, {"inputs", inputs_json}};
    root["memory"] = memory_to_json(ranks, assumptions);
    nlohmann::json typed = nlohmann::json::array();
    for (const auto& t : tables) typed.push_back(table_json(t));
    root["tables"] = typed;
    out << root.dump(2) << "\n";
    return kExitOk;
  }
  print_in_format(out, tables, format, {"memory", inputs_json});
  return kExitOk;
}

}  // namespace attnres::cli
