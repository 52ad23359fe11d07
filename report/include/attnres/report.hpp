// Reports: the tables, charts and JSON a scenario produces, and writing them as a directory
//   report.md  report.json  tables/<id>.csv  charts/<id>.png  charts/<id>.svg
// Building is Qt-free; drawing the charts is a callback (the Qt Charts renderer in app/charts).
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnres/chart_spec.hpp"
#include "attnres/format.hpp"
#include "attnres/output_dir.hpp"
#include "attnres/scenario.hpp"
#include "attnres/time_model.hpp"

namespace attnres {

struct ReportTable {
  std::string id;  // tables/<id>.csv
  std::string title;
  std::vector<std::string> header;  // with units
  std::vector<std::vector<std::string>> rows;
  std::string note;   // conventions stated under the table
  std::string chart;  // id of the chart drawn from it, if any
};

struct Report {
  std::string title, description, source;
  std::vector<ReportTable> tables;
  std::vector<ChartSpec> charts;
  std::vector<std::string> notes;        // e.g. sweep settings rejected as impossible
  std::vector<std::string> conclusions;  // claims checked by sweeps, in words
  nlohmann::json json;
  nlohmann::json
      provenance;  // tool, version, scenario file and text, inputs (also json["provenance"])
  // Further files (relative path, bytes), e.g. trained models under models/ (docs/training.md).
  std::vector<std::pair<std::string, std::string>> files;
};

// The tables of the cost sections, in this order where asked for: io, history, prefill,
// pipeline, boundaries, flops. `attnres cost` prints these; reports embed them.
std::vector<ReportTable> cost_tables(const CostReport& costs,
                                     const std::vector<std::string>& sections);
// The scaling-law tables and charts at a target loss (loss_from..loss_to for the curve).
void add_scaling_section(const ScenarioScaling& scaling, Report& report);

// The time-model table (prefill and decode, every scheme) and the pipeline tables and charts.
ReportTable time_table(const CostInputs& inputs, const StackTime& prefill, const StackTime& decode,
                       const Hardware& hardware);
void add_pipeline_section(const PipelineReport& pipeline, Report& report);
// Gantt chart (one lane per rank: forward and backward boxes, transfers) and memory timeline.
ChartSpec pipeline_gantt_chart(const PipelineReport& pipeline);
ChartSpec pipeline_memory_chart(const PipelineReport& pipeline);

// Evaluates the scenario: every section's table, every sweep (progress as in run_sweep; false
// stops with attnres::Cancelled, also checked once at the end). Throws attnres::Error when a
// sweep has the name of one of the report's own tables or charts.
Report build_report(const Scenario& scenario, const Progress& progress = {});

// What produced a report: tool and version, the scenario file's name and text, and the
// structured inputs that change results (model, hardware preset with its efficiencies, MoE
// shape, pipeline schedule, cache policy, link, overlap, scaling targets).
nlohmann::json report_provenance(const Scenario& scenario);

std::string report_markdown(const Report& report);
std::string table_csv(const ReportTable& table);

// Draws one chart into a PNG and an SVG file.
using ChartRenderer = std::function<void(const ChartSpec&, const std::filesystem::path& png,
                                         const std::filesystem::path& svg)>;
// Writes the report into `directory` under the output-directory rules of output_dir.hpp: a new,
// empty or attnres-written directory only (unless options.force); everything is built in a
// staging folder first, so a failure or Ctrl-C leaves the previous report as it was.
// `options.owner` is set to "report". `progress` is called after each file (false stops with
// attnres::Cancelled; nothing is written).
OutputDirectoryResult write_report(const Report& report, const std::filesystem::path& directory,
                                   const ChartRenderer& render_chart,
                                   OutputDirectoryOptions options = {});

}  // namespace attnres
