// attnres plan: which N, at what cost, on which cluster (docs/math.md §3.9). Every setting of a
// grid (block counts, parallel degrees, strategies, hardware) simulated as one training step and
// checked against the budgets typed: the settings that meet them, the Pareto set, the
// recommended N and why the others fail.
#include <cmath>
#include <nlohmann/json.hpp>
#include <ostream>

#include "attnres/cost_input_fields.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/output_schema.hpp"
#include "attnres/plan.hpp"
#include "attnres/report.hpp"
#include "cli.hpp"
#include "options.hpp"
#include "pipeline_flags.hpp"
#include "progress.hpp"
#include "table_output.hpp"

namespace attnres::cli {

namespace {

struct PlanFlags {
  PipelineFlags pipeline;
  std::string blocks, tp, cp, ep, pp, vpp, strategies, hardware, fit;
  std::int64_t gpus = 0;
  double max_overhead_percent = 0, max_pipeline_gb = 0, max_step_seconds = 0;
};

void add_plan_options(po::options_description& options, PlanFlags& flags) {
  add_pipeline_options(options, flags.pipeline);
  po::options_description grid("grid and budgets");
  grid.add_options()("try-blocks", po::value(&flags.blocks),
                     "block counts N to try: a list, divisors or a range FROM:TO[:STEP|:xFACTOR] "
                     "(default: the N equal blocks can make near 1, 2, 4, ... up to L)")(
      "try-tp", po::value(&flags.tp), "tensor-parallel degrees t to try (default: --tp)")(
      "try-cp", po::value(&flags.cp), "context-parallel degrees c to try (default: --cp)")(
      "try-ep", po::value(&flags.ep), "expert-parallel degrees e to try (default: --ep)")(
      "try-pp", po::value(&flags.pp), "pipeline ranks P to try (default: --pp)")(
      "try-vpp", po::value(&flags.vpp), "virtual stages V to try (default: --vpp)")(
      "try-strategy", po::value(&flags.strategies),
      "implementation strategies to try, e.g. arena,fused_two_phase (default: --strategy)")(
      "try-hardware", po::value(&flags.hardware),
      "hardware presets or .toml files to try, e.g. h100,b200 (default: --hardware)")(
      "gpus", po::value(&flags.gpus),
      "fix the world size W: D = W / (t·c·P) for every setting (default: --dp as given)")(
      "max-overhead", po::value(&flags.max_overhead_percent),
      "budget: AttnRes step overhead at most this many percent, e.g. 2")(
      "max-pipeline-gb", po::value(&flags.max_pipeline_gb),
      "budget: pipeline traffic per step (all ranks, both directions) at most this many GB")(
      "max-step-seconds", po::value(&flags.max_step_seconds),
      "budget: training step at most this many seconds")(
      "fit", po::value(&flags.fit)->default_value("on"),
      "budget: on = the peak rank must fit the device memory; off = report it only");
  options.add(grid);
}

std::vector<std::string> names_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

PlanGrid plan_grid(const po::variables_map& values, const PlanFlags& flags,
                   const CostInputs& model) {
  PlanGrid grid;
  auto list = [&](const char* flag, const std::string& text, std::vector<std::int64_t>& into) {
    if (!values.count(flag)) return;
    into = parse_flag_value(
        [&] { return parse_sweep_values(text, std::string("--") + flag, model.sublayers); });
    for (const std::int64_t v : into) {
      if (v < 1)
        throw UsageError(std::string("--") + flag + ": values must be >= 1, got " +
                         std::to_string(v));
    }
  };
  list("try-blocks", flags.blocks, grid.blocks);
  if (grid.blocks.empty()) grid.blocks = plan_default_blocks(model.sublayers);
  list("try-tp", flags.tp, grid.tp);
  list("try-cp", flags.cp, grid.cp);
  list("try-ep", flags.ep, grid.ep);
  list("try-pp", flags.pp, grid.pp);
  list("try-vpp", flags.vpp, grid.vpp);
  if (values.count("try-strategy")) {
    for (const std::string& name : names_of(flags.strategies))
      grid.strategies.push_back(
          parse_flag_value([&] { return parse_strategy(name, "--try-strategy"); }));
  }
  if (values.count("try-hardware")) {
    for (const std::string& name : names_of(flags.hardware))
      grid.hardware.push_back(hardware_flag(name));
  }
  if (values.count("gpus")) {
    if (flags.gpus < 1) throw UsageError("--gpus must be >= 1, got " + std::to_string(flags.gpus));
    grid.gpus = flags.gpus;
  }
  if (const std::string problem = plan_grid_problem(grid); !problem.empty())
    throw UsageError("--try-*: " + problem);
  return grid;
}

PlanBudgets plan_budgets(const po::variables_map& values, const PlanFlags& flags) {
  PlanBudgets budgets;
  auto positive = [&](const char* flag, double value, double scale, double& into) {
    if (!values.count(flag)) return;
    if (!(value > 0) || !std::isfinite(value))
      throw UsageError(std::string("--") + flag + " must be > 0, got " + format_number(value));
    into = value * scale;
  };
  positive("max-overhead", flags.max_overhead_percent, 0.01, budgets.max_overhead_fraction);
  if (!std::isnan(budgets.max_overhead_fraction) && budgets.max_overhead_fraction >= 10)
    throw UsageError("--max-overhead is a percentage below 1000, got " +
                     format_number(flags.max_overhead_percent));
  positive("max-pipeline-gb", flags.max_pipeline_gb, 1e9, budgets.max_pipeline_bytes);
  positive("max-step-seconds", flags.max_step_seconds, 1.0, budgets.max_step_seconds);
  budgets.must_fit = on_off("--fit", flags.fit);
  return budgets;
}

nlohmann::json plan_json(const PipelineSettings& base, const PlanResult& plan,
                         const ReportTable& table) {
  nlohmann::json json;
  json["schema"] = schema_tag("plan");
  json["inputs"] = inputs_to_json(base.model, &base.hardware, &base);
  const PlanBudgets& b = plan.budgets;
  auto budget = [](double v) {
    return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v);
  };
  json["budgets"] = {{"max_overhead_fraction", budget(b.max_overhead_fraction)},
                     {"must_fit", b.must_fit},
                     {"max_pipeline_bytes", budget(b.max_pipeline_bytes)},
                     {"max_step_seconds", budget(b.max_step_seconds)}};
  json["candidates"] = table_json(table)["rows"];
  json["recommended"] = plan.recommended ? nlohmann::json(*plan.recommended) : nullptr;
  json["by_blocks"] = plan.by_blocks;
  json["summary"] = plan.summary;
  return json;
}

}  // namespace

int plan_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  PlanFlags flags;
  po::options_description options = command_options("plan");
  add_plan_options(options, flags);
  po::variables_map values;
  if (parse_or_help(args, options, values, out,
                    "usage: attnres plan (--layers N | --sublayers L) --d-model D [model flags] "
                    "[pipeline flags as in attnres pipeline] [--try-blocks LIST] [--try-tp LIST] "
                    "[--try-cp LIST] [--try-ep LIST] [--try-pp LIST] [--try-vpp LIST] "
                    "[--try-strategy LIST] [--try-hardware LIST] [--gpus W] [--max-overhead PCT] "
                    "[--max-pipeline-gb GB] [--max-step-seconds S] [--fit on|off] "
                    "[--format table|json|csv]")) {
    return kExitOk;
  }
  require_format(flags.pipeline.format, {"table", "json", "csv"});
  PipelineSettings base = pipeline_settings(values, flags.pipeline);
  base.record_timeline = false;
  const PlanGrid grid = plan_grid(values, flags, base.model);
  const PlanBudgets budgets = plan_budgets(values, flags);
  PlanResult plan;
  {
    ProgressBar progress("plan");
    parse_flag_value([&] { plan = make_plan(base, grid, budgets, progress.callback()); });
  }
  // Settings whose stages split a layer (P·V above the layers) say so in the table's why column.
  std::size_t split = 0;
  for (const PlanCandidate& c : plan.candidates) split += c.stage_warning.empty() ? 0 : 1;
  if (split > 0) {
    err << "warning: in " << split << " of the " << plan.candidates.size()
        << " settings the stage boundaries split layers (P·V chunks above the layers)\n";
  }
  const ReportTable table = plan_table(plan);
  if (flags.pipeline.format == "json") {
    out << plan_json(base, plan, table).dump(2) << "\n";
    return kExitOk;
  }
  if (flags.pipeline.format == "csv") {
    out << table_csv(table);  // one row per setting: the sweep over the whole grid
    return kExitOk;
  }
  out << plan.summary << "\n\n";
  for (const auto& line : plan.by_blocks) out << "  " << line << "\n";
  out << "\n";
  ReportTable shown = table;
  shown.note.clear();
  print_tables(out, {shown});
  return kExitOk;
}

}  // namespace attnres::cli
