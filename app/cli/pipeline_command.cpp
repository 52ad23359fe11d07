// attnres pipeline: a pipelined training iteration simulated (1F1B or interleaved) to see whether
// the AttnRes traffic hides behind compute, and the prefill/decode time model beside it.
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>

#include "attnres/cost_metrics.hpp"
#include "attnres/hardware.hpp"
#include "attnres/output_schema.hpp"
#include "attnres/pipeline.hpp"
#include "attnres/pipeline_sim.hpp"
#include "attnres/rank_memory.hpp"
#include "attnres/report.hpp"
#include "attnres/strategy.hpp"
#include "attnres/time_model.hpp"
#include "cli.hpp"
#include "cost_input_flags.hpp"
#include "options.hpp"
#include "pipeline_flags.hpp"
#include "progress.hpp"
#include "table_output.hpp"

namespace attnres::cli {

namespace fs = std::filesystem;

void add_pipeline_options(po::options_description& options, PipelineFlags& flags) {
  PipelineSettings& settings = flags.settings;
  flags.model.add_to(options, true);
  add_allowance_options(options, flags.allowance);
  const std::string microbatches_help =
      "micro-batches m per iteration (1.." + std::to_string(kMaxMicrobatches) +
      "; m x P·V at most " + std::to_string(kMaxPipelinePairs) +
      ", which keeps the simulation under about " +
      std::to_string(kMaxPipelinePairs * kPipelineBytesPerPair / 1'000'000) + " MB)";
  options.add_options()("microbatches", po::value(&settings.microbatches)->default_value(8),
                        microbatches_help.c_str())(
      "schedule", po::value(&flags.schedule),
      "1f1b | interleaved (default: interleaved when --vpp > 1)")(
      "cache", po::value(&flags.cache)->default_value("cached"),
      "AttnRes history policy: naive | cached | cached_own")(
      "mode", po::value(&flags.mode)->default_value("block"),
      "residual: block | full | standard (the comparison run itself: overhead 0)")(
      "hardware", po::value(&flags.hardware)->default_value("h100"), hardware_flag_help().c_str())(
      "link", po::value(&flags.link)->default_value("placed"),
      "pipeline link: placed (NVLink when the t·c·D·P world fits a node, else the scale-out "
      "network) | scale-out | intra-node")("link-bandwidth", po::value(&flags.link_gbps),
                                           "override the link bandwidth, GB/s per direction")(
      "overlap", po::value(&flags.overlap)->default_value("on"),
      "on: transfers overlap compute; off: the sender waits")("ideal-links",
                                                              "transfers cost nothing")(
      "strategy", po::value(&flags.strategy)->default_value("fused_two_phase"),
      "implementation of the depth reads, as in [implementation]: its kernels time the residual "
      "mechanism and its saved tensors count in memory: stack | arena | fused_one_shot | "
      "fused_two_phase")(
      "overlap-comm", po::value(&flags.overlap_comm)->default_value("cp,dp"),
      "parallel groups whose collectives overlap compute (the rest is exposed): a list of tp, cp, "
      "ep, dp, or none | all")("format", po::value(&flags.format)->default_value("table"),
                               "table | json");
}

// --hardware: a preset name is a flag value (exit 2 when unknown); a .toml file is an input file
// (exit 1 when it cannot be read or parsed).
Hardware hardware_flag(const std::string& hardware) {
  const bool hardware_file =
      fs::exists(hardware) || hardware.find('/') != std::string::npos ||
      (hardware.size() > 5 && hardware.substr(hardware.size() - 5) == ".toml");
  if (hardware_file) return load_hardware(hardware);
  return parse_flag_value([&] { return load_hardware(hardware); });
}

namespace {

// --overlap, --link, --ideal-links and --link-bandwidth.
void set_links(const po::variables_map& values, const PipelineFlags& flags,
               PipelineSettings& settings) {
  settings.overlap = on_off("--overlap", flags.overlap);
  if (flags.link != "placed" && flags.link != "scale-out" && flags.link != "intra-node")
    throw UsageError("--link must be placed, scale-out or intra-node, got '" + flags.link + "'");
  settings.link = flags.link == "placed"       ? PipelineLink::placed
                  : flags.link == "intra-node" ? PipelineLink::intra_node
                                               : PipelineLink::scale_out;
  settings.ideal_links = values.count("ideal-links") > 0;
  if (values.count("link-bandwidth")) {
    if (!(flags.link_gbps > 0)) {
      throw UsageError("--link-bandwidth must be > 0 GB/s (use --ideal-links for free transfers)");
    }
    settings.link_bandwidth = flags.link_gbps * 1e9;
  }
}

}  // namespace

// Flags that contradict each other, and the core's rules (pipeline_settings_problem) under the
// flag of the setting they are about.
void check_settings(const po::variables_map& values, const PipelineSettings& settings) {
  if (given(values, "link-bandwidth") && values.count("ideal-links")) {
    throw UsageError(
        "--link-bandwidth and --ideal-links contradict each other (ideal links take no time)");
  }
  if (settings.model.pp == 1) {
    // One rank: every chunk boundary stays on it and nothing crosses a link.
    for (const char* link_flag : {"link", "link-bandwidth", "overlap", "ideal-links"}) {
      if (given(values, link_flag)) {
        throw UsageError(
            std::string("--") + link_flag +
            " describes the links between pipeline ranks; with --pp 1 no transfer "
            "crosses one and it would change nothing: leave it out or give --pp P > 1");
      }
    }
  }
  if (const auto problem = pipeline_settings_problem(settings)) {
    static const std::map<std::string, std::string> setting_flags = {
        {"mode", "--mode"},
        {"microbatches", "--microbatches"},
        {"schedule", "--schedule"},
        {"link_bandwidth", "--link-bandwidth"},
        {"sublayers", "--layers"}};
    throw UsageError(setting_flags.at(problem->field) + ": " + problem->message);
  }
}

// The simulated iteration's settings from the flags, checked.
PipelineSettings pipeline_settings(const po::variables_map& values, PipelineFlags& flags) {
  PipelineSettings settings = flags.settings;
  settings.model = flags.model.resolved();
  parse_flag_value([&] {
    settings.schedule = values.count("schedule")
                            ? parse_pipeline_schedule(flags.schedule, "--schedule")
                            : default_pipeline_schedule(settings.model.vpp);
    settings.cache = parse_cache_policy(flags.cache, "--cache");
    settings.mode = parse_residual_mode(flags.mode, "--mode");
    settings.strategy = parse_strategy(flags.strategy, "--strategy");
    settings.comm_overlap = parse_comm_overlap(flags.overlap_comm, "--overlap-comm");
  });
  settings.hardware = hardware_flag(flags.hardware);
  settings.allowance = allowance_from_flags(flags.allowance);
  set_links(values, flags, settings);
  check_settings(values, settings);
  return settings;
}

namespace {

// --format json: every metric of `attnres metrics` the run gives, under the key it has there
// (cost, time and pipeline groups, as report.json and sweeps), the peak memory of every rank,
// and everything the run was computed from.
nlohmann::json pipeline_json(const PipelineSettings& settings, const PipelineReport& pipeline,
                             const StackTime& prefill, const StackTime& decode) {
  const CostReport cost = evaluate_costs(settings.model);
  nlohmann::json json = evaluation_to_json({&cost, &prefill, &decode, &pipeline});
  json["pipeline"]["peak_memory_bytes_by_rank"] = pipeline.attnres.peak_memory_bytes;
  json["pipeline"]["link_bandwidth_bytes_per_second"] = pipeline.link_bandwidth;
  json["pipeline"]["bubble_denominator"] = "the busiest rank's compute time (ideal time)";
  json["memory"] = memory_to_json(pipeline.memory);
  json["step"] = step_to_json(pipeline);
  json["inputs"] = inputs_to_json(settings.model, &settings.hardware, &settings);
  json["schema"] = schema_tag("pipeline");
  return json;
}

}  // namespace

int pipeline_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  PipelineFlags flags;
  po::options_description options = command_options("pipeline");
  add_pipeline_options(options, flags);
  po::variables_map values;
  if (parse_or_help(
          args, options, values, out,
          "usage: attnres pipeline (--sublayers L | --layers N) (--block-size S | --blocks "
          "N | --block-layers K) --d-model D "
          "[--ffn F] [--seq T] [--dtype bf16] [--micro-batch-size B] [--microbatches m] "
          "[--pp P] [--vpp V] "
          "[--mode block|full|standard] [--schedule 1f1b|interleaved] [--cache naive|cached] "
          "[--hardware h100|FILE.toml] "
          "[--link placed|scale-out|intra-node] [--reserve GB] [--fragmentation F] [--margin GB] "
          "[--link-bandwidth GBPS | --ideal-links] [--overlap "
          "on|off] "
          "[--strategy S] [--overlap-comm tp,cp,ep,dp|none|all] "
          "[--experts E --active-experts K --expert-ffn F [--shared-experts S]] "
          "[--tp t] [--cp c] [--ep e] [--dp D] [--zero 0..3] [--recompute none|selective|full] "
          "[--stage-layers LIST] [model flags] "
          "[--format table|json]")) {
    return kExitOk;
  }
  require_format(flags.format, {"table", "json"});
  PipelineSettings settings = pipeline_settings(values, flags);
  settings.record_timeline = flags.format == "table";
  PipelineReport pipeline;
  {
    // The simulations check Ctrl-C / SIGTERM as they place operations (exit 130).
    ProgressBar progress("pipeline");
    settings.progress = progress.callback();
    parse_flag_value([&] { pipeline = evaluate_pipeline(settings); });
    settings.progress = {};
  }
  throw_if_interrupted("pipeline simulation");
  const StackTime prefill = stack_time(settings.model, Phase::prefill, settings.hardware);
  const StackTime decode = stack_time(settings.model, Phase::decode, settings.hardware);
  warn_stage_split(settings.model, err);
  if (flags.format == "json") {
    const nlohmann::json json = pipeline_json(settings, pipeline, prefill, decode);
    throw_if_interrupted("pipeline simulation");
    out << json.dump(2) << "\n";
    return kExitOk;
  }
  Report report;
  add_pipeline_section(pipeline, report);
  report.tables.push_back(step_table(pipeline));
  report.tables.push_back(reconciliation_table(pipeline));
  report.tables.push_back(time_table(settings.model, prefill, decode, settings.hardware));
  // The section also lays out the schedule's Gantt chart (seconds for thousands of micro-batches):
  // an interrupt meanwhile still ends with 130 and nothing printed.
  throw_if_interrupted("pipeline simulation");
  print_tables(out, report.tables);
  return kExitOk;
}

}  // namespace attnres::cli
