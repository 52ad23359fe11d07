// attnres report: a scenario file run into a report directory (report.md, report.json, CSV tables,
// PNG/SVG charts), with the scenario's [train] runs trained first when it asks for them.
#include <algorithm>
#include <filesystem>
#include <ostream>

#include "attnres/format.hpp"
#include "attnres/output_dir.hpp"
#include "attnres/report.hpp"
#include "attnres/scenario.hpp"
#include "attnres/train_report.hpp"
#include "chart_render.hpp"
#include "cli.hpp"
#include "options.hpp"
#include "progress.hpp"

namespace attnres::cli {

namespace fs = std::filesystem;

int report_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  std::string scenario_path, out_dir;
  int train_steps = 0;
  po::options_description options = command_options("report");
  options.add_options()("scenario", po::value(&scenario_path)->required(),
                        "scenario TOML file (or the first argument)")(
      "out", po::value(&out_dir)->required(),
      "report directory: new, empty, or written by attnres (its previous report is replaced)")(
      "force",
      "replace the contents of an --out directory that holds other files (never the scenario)")(
      "train-steps", po::value(&train_steps)->default_value(0),
      "train every [train] run for this many steps instead of the scenario's (a quick look; 0: as "
      "written)");
  po::positional_options_description positional;
  positional.add("scenario", 1);
  po::variables_map values;
  if (parse_or_help(args, options, values, out,
                    "usage: attnres report (SCENARIO.toml | --scenario SCENARIO.toml) --out DIR "
                    "[--force] [--train-steps N]",
                    &positional)) {
    return kExitOk;
  }
  if (train_steps < 0)
    throw UsageError("--train-steps must be >= 0 (0: the scenario's steps), got " +
                     std::to_string(train_steps));
  OutputDirectoryOptions output;
  output.force = values.count("force") > 0;
  output.inputs = {fs::path(scenario_path)};
  output.owner = "report";
  const fs::path target = clean_output_path(out_dir, "--out");
  const Scenario scenario = load_scenario(scenario_path);
  if (given(values, "train-steps") && !scenario.training) {
    throw UsageError("--train-steps applies to scenarios with a [train] table; " + scenario_path +
                     " has none");
  }
  const bool train = scenario.training &&
                     std::find(scenario.sections.begin(), scenario.sections.end(), "training") !=
                         scenario.sections.end();
  if (given(values, "train-steps") && !train) {
    throw UsageError("--train-steps applies to the training section; the sections of " +
                     scenario_path +
                     " leave \"training\" out, so nothing would be trained: leave it out or add "
                     "\"training\" to sections");
  }
  for (const auto& file : scenario.files_read()) output.inputs.push_back(file);
  std::vector<std::string> notes =
      check_output_directory(target, output);  // refuse before the work, not after
  charts::ensure_application();                // before any staging folder exists
  ProgressBar progress("report");
  Report report = build_report(scenario, progress.callback());
  if (train) {
    // Tiny models trained on the scenario's data (docs/training.md): measured losses beside the
    // costs.
    progress.set_label("training");
    const auto runs = run_scenario_training(*scenario.training, progress.callback(), train_steps);
    add_training_section(*scenario.training, runs, report);
  }
  progress.set_label("writing");
  output.progress = write_phase_progress(progress);
  const OutputDirectoryResult written = write_report(
      report, target,
      [](const ChartSpec& chart, const fs::path& png, const fs::path& svg) {
        charts::render_chart_files(chart, png, svg);
      },
      output);
  out << "wrote " << printable_text((target / "report.md").string()) << ": " << report.tables.size()
      << " tables, " << report.charts.size() << " charts (PNG + SVG), report.json\n";
  if (report.json.contains("training")) {
    // What the training resolves at 95 %, paired by seed (docs/training.md#statistics).
    for (const auto& row : report.json["training"]["paired_differences"]) {
      out << "training: " << printable_text(row["sentence"].get<std::string>()) << "\n";
    }
  }
  for (const auto& note : report.notes) out << "note: " << printable_text(note) << "\n";
  for (const auto& note : output_directory_notes(written)) notes.push_back(note);
  for (const auto& note : notes) out << "note: " << printable_text(note) << "\n";
  return kExitOk;
}

}  // namespace attnres::cli
