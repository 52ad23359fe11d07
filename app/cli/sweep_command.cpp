// attnres sweep: the cost engine over one parameter or a grid of two, from the model flags or a
// scenario file; the points printed as CSV or JSON, or written with their chart to a directory.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>

#include "attnres/block_layout.hpp"
#include "attnres/cost_input_fields.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/output_dir.hpp"
#include "attnres/scenario.hpp"
#include "attnres/sweep.hpp"
#include "chart_render.hpp"
#include "cli.hpp"
#include "cost_input_flags.hpp"
#include "options.hpp"
#include "progress.hpp"

namespace attnres::cli {

namespace fs = std::filesystem;

namespace {

std::ofstream open_output(const fs::path& path) {
  std::ofstream stream(path, std::ios::binary | std::ios::trunc);
  if (!stream)
    throw Error("cannot write '" + path.filename().string() + "': cannot create the file");
  return stream;
}

void close_output(std::ofstream& stream, const fs::path& path) {
  stream.flush();
  if (!stream)
    throw Error("cannot write '" + path.filename().string() + "': write failed (disk full?)");
  stream.close();
}

// Flags given on the command line (not defaults) override a --scenario's inputs.
void override_from_flags(const InputFlags& flags, const po::variables_map& values, CostInputs& in) {
  for (const auto& field : cost_input_fields()) {
    const std::string name = InputFlags::flag_name(field, flags.pipeline);
    if (values.count(name) && !values[name].defaulted())
      set_cost_input(in, std::string(field.key), flags.inputs.*field.member);
  }
  for (const auto& choice : cost_input_choices()) {
    const std::string flag(choice.flag);
    if (values.count(flag) && !values[flag].defaulted()) {
      parse_flag_value(
          [&] { choice.set(in, flags.choices.at(std::string(choice.key)), "--" + flag); });
    }
  }
  flags.set_lists(in);
}

// The flags of attnres sweep as typed; `spec` gets its axes and metrics once they are checked.
struct SweepFlags {
  InputFlags model;
  SweepSpec spec;
  std::string x_values, y_values, y_parameter, format, out_dir, scenario_path;
  std::vector<fs::path> scenario_files;  // what the scenario reads (kept by --out --force)
  std::vector<std::string> metrics;
};

void add_sweep_options(po::options_description& options, SweepFlags& flags) {
  flags.model.d_model_required = false;  // checked by base_setting: a --scenario gives it too
  SweepSpec& spec = flags.spec;
  options.add_options()(
      "scenario", po::value(&flags.scenario_path),
      "take the model, [hardware], [moe] and [pipeline] of this scenario file as the base setting "
      "(model flags given as well override it); needed for time and pipeline metrics and for the "
      "microbatches and link_bandwidth_gbps parameters");
  flags.model.add_to(options);
  std::string parameters;
  for (const auto& name : sweep_parameters()) parameters += (parameters.empty() ? "" : ", ") + name;
  options.add_options()("x", po::value(&spec.x.parameter)->required(),
                        ("parameter to sweep: " + parameters).c_str())(
      "values", po::value(&flags.x_values)->required(),
      "1,2,4 | divisors | FROM:TO[:STEP] | FROM:TO:xFACTOR; strategy and hardware take names, "
      "e.g. stack,fused_two_phase or h100,b200,my-gpu.toml")("y", po::value(&flags.y_parameter),
                                                             "second parameter for a grid")(
      "y-values", po::value(&flags.y_values), "values of the second parameter")(
      "metric", po::value(&flags.metrics)->required(),
      "metric key (repeat; attnres metrics lists them, all in one unit)")(
      "name", po::value(&spec.name)->default_value("sweep"), "name of the output files")(
      "log-x", "logarithmic x axis")("log-y", "logarithmic y axis")(
      "overlay", po::value(&spec.overlay),
      "quality on the chart's right-hand axis (x = blocks or block_size): published_band (the "
      "published share of Full AttnRes's gain, any L; docs/quality.md) | paper_fig6")(
      "format", po::value(&flags.format)->default_value("csv"),
      "csv | json, printed (without --out)")(
      "out", po::value(&flags.out_dir),
      "directory for NAME.csv, NAME.json and the chart NAME.png/.svg "
      "(new, empty, or written by attnres; other sweeps' files are kept)")(
      "force", "replace the contents of an --out directory that holds other files")(
      "max-points", po::value(&spec.max_points)->default_value(SweepSpec::kDefaultMaxSweepPoints),
      "refuse sweeps with more settings than this");
}

// --format, --out, --force, --name and --max-points, before any work.
void check_output_flags(const po::variables_map& values, const SweepFlags& flags) {
  const SweepSpec& spec = flags.spec;
  require_format(flags.format, {"csv", "json"});
  if (given(values, "format") && !flags.out_dir.empty()) {
    throw UsageError("--format " + flags.format + " prints the sweep; with --out both " +
                     spec.name + ".csv and " + spec.name +
                     ".json are written (drop one of the two flags)");
  }
  if (values.count("force") && flags.out_dir.empty()) throw UsageError("--force applies to --out");
  for (const char* axis : {"log-x", "log-y"}) {
    if (values.count(axis) && flags.out_dir.empty()) {
      throw UsageError(std::string("--") + axis +
                       " sets an axis of the chart, which only --out DIR draws; printed points "
                       "have no axes: leave it out or give --out DIR");
    }
  }
  if (values.count("overlay")) {
    if (spec.overlay != "published_band" && spec.overlay != "paper_fig6") {
      throw UsageError("--overlay must be published_band or paper_fig6, got '" + spec.overlay +
                       "'");
    }
    if (flags.out_dir.empty()) {
      throw UsageError(
          "--overlay draws on the chart, which only --out DIR writes: leave it out "
          "or give --out DIR");
    }
    if (spec.x.parameter != "blocks" && spec.x.parameter != "block_size") {
      throw UsageError("--overlay " + spec.overlay +
                       " needs --x blocks or --x block_size, got --x " + spec.x.parameter);
    }
  }
  if (given(values, "name") && flags.out_dir.empty() && flags.format == "csv") {
    throw UsageError(
        "--name names the files of --out DIR (and the JSON's \"name\"); the printed CSV has no "
        "name and it would change nothing: leave it out, give --out DIR or --format json");
  }
  try {
    validate_output_name(spec.name, "--name");
  } catch (const Error& error) {
    throw UsageError(error.what());
  }
  if (spec.max_points < 1) throw UsageError("--max-points must be >= 1");
}

// The setting every point starts from: the model flags, or the --scenario's inputs overridden by
// the model flags given as well.
ScenarioInputs base_setting(const po::variables_map& values, SweepFlags& flags) {
  ScenarioInputs base;
  if (flags.scenario_path.empty()) {
    if (!values.count("d-model"))
      throw UsageError("the option '--d-model' is required but missing (or give --scenario)");
    base.cost = flags.model.resolved();
    return base;
  }
  const std::string& scenario_path = flags.scenario_path;
  const Scenario scenario = load_scenario(scenario_path);
  if (!scenario.has_model)
    throw UsageError("--scenario: " + scenario_path + " has no [model] table");
  flags.scenario_files = scenario.files_read();
  base = scenario.scenario_inputs();
  override_from_flags(flags.model, values, base.cost);
  try {
    base.cost = resolve_cost_inputs(base.cost);
  } catch (const CostInputError& error) {
    throw UsageError(flags.model.flag_for_field(error.field) + ": " + error.what() +
                     " (with the inputs of " + scenario_path + ")");
  }
  if (base.pipeline) base.pipeline->model = base.cost;
  return base;
}

// --x/--values and --y/--y-values into spec.x and spec.y, within --max-points.
void set_axes(const po::variables_map& values, SweepFlags& flags, const ScenarioInputs& base) {
  SweepSpec& spec = flags.spec;
  const std::string& y_parameter = flags.y_parameter;
  auto axis_values = [&](const std::string& text, const std::string& flag,
                         const std::string& parameter) {
    std::vector<std::int64_t> parsed;
    try {
      parsed = parse_sweep_values(text, flag, base.cost.sublayers);
    } catch (const Error& error) {
      throw UsageError(error.what());
    }
    // A value no setting can take (below the input's minimum: 0 blocks, a negative length) is
    // refused here; values impossible only with the other inputs are skipped and counted.
    if (const CostInputField* field = find_cost_input_field(parameter)) {
      for (const std::int64_t value : parsed) {
        if (value < field->input_min) {
          throw UsageError(flag + ": " + std::to_string(value) + " is out of range for " +
                           parameter + " (" + std::string(field->label) +
                           " must be >= " + std::to_string(field->input_min) + ")");
        }
      }
    }
    return parsed;
  };
  for (const auto& [flag, parameter] :
       {std::pair<std::string, std::string>{"--x", spec.x.parameter}, {"--y", y_parameter}}) {
    if (parameter.empty()) continue;
    // A flag of the swept input is replaced by the swept values at every point. The model's
    // shape flags stay allowed: the base setting needs them to be resolved at all.
    const CostInputField* swept = find_cost_input_field(parameter);
    if (swept && (swept->section != "model" || swept->key == "streams" || swept->key == "ffn")) {
      const std::string name = InputFlags::flag_name(*swept, flags.model.pipeline);
      if (given(values, name.c_str())) {
        throw UsageError("--" + name + " sets " + parameter + ", which " + flag +
                         " sweeps: every point takes its value from the sweep and --" + name +
                         " would change nothing; leave it out");
      }
    }
    const std::string problem = sweep_parameter_problem(parameter, base.pipeline.has_value());
    if (!problem.empty()) {
      const bool missing_table =
          is_pipeline_sweep_parameter(parameter) && flags.scenario_path.empty();
      throw UsageError(flag + ": " + problem +
                       (missing_table ? " (give --scenario with one)" : ""));
    }
  }
  // A named parameter (strategy, hardware) takes names separated by commas.
  auto axis = [&](const std::string& text, const std::string& flag, const std::string& parameter) {
    if (!is_named_sweep_parameter(parameter)) {
      SweepAxis out;
      out.parameter = parameter;
      out.values = axis_values(text, flag, parameter);
      return out;
    }
    std::vector<std::string> names;
    std::size_t start = 0;
    while (start <= text.size()) {
      const std::size_t comma = std::min(text.find(',', start), text.size());
      names.push_back(text.substr(start, comma - start));
      start = comma + 1;
    }
    return parse_flag_value([&] { return named_sweep_axis(parameter, names, flag); });
  };
  const std::string x_parameter = spec.x.parameter;
  spec.x = axis(flags.x_values, "--values", x_parameter);
  if (!y_parameter.empty()) {
    if (flags.y_values.empty()) throw UsageError("--y needs --y-values");
    if (y_parameter == spec.x.parameter) throw UsageError("--y must differ from --x");
    spec.y = axis(flags.y_values, "--y-values", y_parameter);
  } else if (!flags.y_values.empty()) {
    throw UsageError("--y-values needs --y (the second parameter of the grid)");
  }
  if (!spec.x.values.empty() && spec.y &&
      spec.y->values.size() > spec.max_points / spec.x.values.size()) {
    throw UsageError("--values x --y-values give " + std::to_string(spec.x.values.size()) + " x " +
                     std::to_string(spec.y->values.size()) + " settings, more than --max-points " +
                     std::to_string(spec.max_points) + " (raise --max-points to run it)");
  }
  if (spec.x.values.size() > spec.max_points) {
    throw UsageError("--values gives " + std::to_string(spec.x.values.size()) +
                     " settings, more than --max-points " + std::to_string(spec.max_points) +
                     " (raise --max-points to run it)");
  }
}

// --metric into spec.metrics: known keys, computable from `base`, all in one unit.
void set_metrics(SweepFlags& flags, const ScenarioInputs& base) {
  std::string unit;
  for (const auto& key : flags.metrics) {
    const std::string problem =
        sweep_metric_problem(key, base.hardware.has_value() || sweeps_hardware(flags.spec),
                             base.pipeline.has_value(), unit);
    if (!problem.empty()) {
      const bool missing_table = problem.find(" needs ") != std::string::npos;
      throw UsageError(
          "--metric: " + problem +
          (missing_table && flags.scenario_path.empty() ? " (give --scenario with it)" : ""));
    }
    if (unit.empty()) unit = find_cost_metric(key)->unit;
  }
  flags.spec.metrics = flags.metrics;
}

// The sweep's base setting as its JSON's "inputs" (docs/json.md §4).
nlohmann::json sweep_inputs_json(const ScenarioInputs& base) {
  return inputs_to_json(base.cost, base.hardware ? &*base.hardware : nullptr,
                        base.pipeline ? &*base.pipeline : nullptr);
}

// Without --out: the points printed as CSV or JSON, streamed row by row.
void print_sweep(std::ostream& out, const ScenarioInputs& base, const SweepFlags& flags,
                 SweepRun& run) {
  const SweepSpec& spec = flags.spec;
  run.keep_points = false;
  if (flags.format == "json") {
    SweepJsonWriter writer(out, spec, sweep_inputs_json(base));
    run.on_point = [&](const SweepPoint& point) { writer.point(point); };
    writer.end(run_sweep(base, spec, run));
  } else {
    out << sweep_csv_header(spec);
    run.on_point = [&](const SweepPoint& point) { out << sweep_csv_row(spec, point); };
    run_sweep(base, spec, run);
  }
}

// With --out: NAME.csv, NAME.json and the chart NAME.png/.svg written into the directory, and a
// summary of what was written.
void write_sweep(std::ostream& out, const ScenarioInputs& base, const SweepFlags& flags, bool force,
                 ProgressBar& progress, SweepRun& run) {
  const SweepSpec& spec = flags.spec;
  OutputDirectoryOptions output;
  output.owner = "sweep:" + spec.name;
  output.force = force;
  output.progress = write_phase_progress(progress);
  if (!flags.scenario_path.empty()) output.inputs = {fs::path(flags.scenario_path)};
  output.inputs.insert(output.inputs.end(), flags.scenario_files.begin(),
                       flags.scenario_files.end());
  const fs::path target = clean_output_path(flags.out_dir, "--out");
  std::vector<std::string> notes =
      check_output_directory(target, output);  // refuse before the work, not after
  charts::ensure_application();                // before any staging folder exists
  SweepResult result;
  const OutputDirectoryResult written =
      write_output_directory(target, output, [&](const fs::path& dir) {
        std::ofstream csv = open_output(dir / (spec.name + ".csv"));
        std::ofstream json_file = open_output(dir / (spec.name + ".json"));
        SweepJsonWriter writer(json_file, spec, sweep_inputs_json(base));
        csv << sweep_csv_header(spec);
        run.keep_points = false;
        run.on_point = [&](const SweepPoint& point) {
          csv << sweep_csv_row(spec, point);
          writer.point(point);
        };
        result = run_sweep(base, spec, run);
        writer.end(result);
        close_output(csv, dir / (spec.name + ".csv"));
        close_output(json_file, dir / (spec.name + ".json"));
        progress.set_label("chart");
        charts::render_chart_files(sweep_chart(result, base), dir / (spec.name + ".png"),
                                   dir / (spec.name + ".svg"));
        output.progress(1, 1);
      });
  out << "swept " << spec.x.parameter << (spec.y ? " x " + spec.y->parameter : "") << ": "
      << result.valid_count << " settings (" << result.skipped_count
      << " rejected as impossible); wrote " << printable_text((target / spec.name).string())
      << ".{csv,json,png,svg}\n";
  if (!result.decimated.empty()) out << "note: " << result.decimated << "\n";
  for (const auto& note : output_directory_notes(written)) notes.push_back(note);
  for (const auto& note : notes) out << "note: " << printable_text(note) << "\n";
}

}  // namespace

int sweep_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  SweepFlags flags;
  po::options_description options = command_options("sweep");
  add_sweep_options(options, flags);
  po::variables_map values;
  if (parse_or_help(
          args, options, values, out,
          "usage: attnres sweep (--d-model D [model flags] | --scenario FILE [model flags]) "
          "--x PARAM --values V [--y PARAM --y-values V] --metric KEY [--metric KEY ...] "
          "[--name NAME] "
          "[--log-x] [--log-y] [--overlay published_band|paper_fig6] [--max-points N] "
          "[--out DIR [--force] | --format csv|json]")) {
    return kExitOk;
  }
  check_output_flags(values, flags);
  const ScenarioInputs base = base_setting(values, flags);
  set_axes(values, flags, base);
  set_metrics(flags, base);
  flags.spec.log_x = values.count("log-x") > 0;
  flags.spec.log_y = values.count("log-y") > 0;
  ProgressBar progress("sweep");
  SweepRun run;
  run.progress = progress.callback();
  if (flags.out_dir.empty()) {
    print_sweep(out, base, flags, run);
  } else {
    write_sweep(out, base, flags, values.count("force") > 0, progress, run);
  }
  return kExitOk;
}

}  // namespace attnres::cli
