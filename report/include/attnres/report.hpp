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
#include "attnres/plan.hpp"
#include "attnres/scenario.hpp"
#include "attnres/time_model.hpp"
#include "attnres/validation.hpp"

namespace attnres {

// How a typed column shows its value in the terminal table, Markdown and report.md. The typed
// form (JSON, CSV) always holds the value itself: bytes, seconds, flop and fractions, at full
// precision (docs/json.md §2).
enum class Shown {
  text,          // a string as it is
  integer,       // an integer
  number,        // a real number, 6 significant digits
  decimals3,     // a real number rounded to 3 decimals
  megabytes,     // bytes in MB (1e6 bytes), 3 decimals
  gigabytes,     // bytes in GB (1e9 bytes), 4 decimals
  gibibytes,     // bytes in GiB (2^30 bytes), 4 decimals
  milliseconds,  // seconds in ms, 4 decimals
  microseconds,  // seconds in us, 3 decimals
  percent,       // a fraction in %, 3 decimals
  teraflop,      // flop in TFLOP (1e12), 3 decimals
  yes_no,        // a boolean as yes | no
};

// One column of a typed table: the key of JSON and CSV (snake_case, the unit in the name:
// forward_read_bytes, step_overhead_fraction) and the displayed header with the displayed unit
// ("forward read (MB)", "step overhead (%)").
struct TableColumn {
  std::string key;
  std::string header;
  Shown shown = Shown::number;
};

struct ReportTable {
  std::string id;  // tables/<id>.csv
  std::string title;
  std::vector<std::string> header;  // with units
  std::vector<std::vector<std::string>> rows;
  std::string note;   // conventions stated under the table
  std::string chart;  // id of the chart drawn from it, if any
  // A typed table (typed_table, add_row) also has its columns and one value per cell: a number
  // (an integer where it counts), a boolean, a string, or null where it does not apply ("n/a").
  std::vector<TableColumn> columns = {};
  std::vector<std::vector<nlohmann::json>> values = {};
};

// A typed table with these columns (header made from them) and no rows yet.
ReportTable typed_table(std::string id, std::string title, std::vector<TableColumn> columns,
                        std::string chart = "");
// Adds a row of a typed table: one value per column (null: n/a), shown as its column says or,
// where `shown_as` has a non-empty cell, as that text (a value whose displayed unit varies by row).
void add_row(ReportTable& table, std::vector<nlohmann::json> values,
             std::vector<std::string> shown_as = {});
// A name as a key: lower case, every run of other characters one '_' ("block N=1" -> block_n_1).
std::string snake_case_key(const std::string& text);
// A value as its column shows it ("n/a" for null).
std::string shown_value(const nlohmann::json& value, Shown shown);
// The typed form of a table for JSON output (docs/json.md §2): id, title, note, its columns
// (key, header) and its rows as objects keyed by the columns' keys. An untyped table is typed
// from its displayed cells first (typed_from_display).
nlohmann::json table_json(const ReportTable& table);
// An untyped table made typed from its displayed cells: keys from the headers (snake_case, the
// displayed unit turned into the SI one: "(MB)" -> _bytes, "(%)" -> _fraction, "(ms)" ->
// _seconds, ...), numbers, booleans (yes | no) and null (n/a) from the cells, at the precision
// shown. A typed table is returned as it is.
ReportTable typed_from_display(const ReportTable& table);

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
// The published quality evidence and its band at L = `sublayers` over N = the divisors of L, the
// model's own N (`current_blocks`, 0: none) marked (docs/quality.md): tables quality_studies,
// quality_sources and quality_band, chart quality_band, a conclusion and json["quality"].
void add_quality_section(int sublayers, int current_blocks, Report& report);
// The validation suite (validation.hpp, docs/validation.md): tables validation_summary (error by
// regime), validation_runs (predicted vs measured per run) and validation_not_expressible.
void add_validation_section(const std::vector<ValidationResult>& results, Report& report);

// The time-model table (prefill and decode, every scheme) and the pipeline tables and charts.
ReportTable time_table(const CostInputs& inputs, const StackTime& prefill, const StackTime& decode,
                       const Hardware& hardware);
void add_pipeline_section(const PipelineReport& pipeline, Report& report);
// The step's parts (AttnRes and standard, busiest rank) and the three overhead numbers side by
// side with the step's split (docs/math.md §3.8): the report's "step" section.
ReportTable step_table(const PipelineReport& pipeline);
ReportTable reconciliation_table(const PipelineReport& pipeline);
// Every setting of a plan against the budgets, with the recommendation and why per N in the note
// (docs/math.md §3.9): `attnres plan` and the report's "decision" section.
ReportTable plan_table(const PlanResult& plan);
// Memory per rank (rank_memory.hpp): the breakdown, the device capacity and whether it fits, one
// row per pipeline rank; the note names the largest rank's verdict and the assumptions. `where`
// is added to the title (" (simulated peak)").
ReportTable memory_table(const std::vector<RankMemory>& ranks,
                         const std::vector<std::string>& assumptions,
                         const std::string& where = "");
// Bytes and unoverlapped time of each parallel group's communication per step.
ReportTable communication_table(const std::vector<CommTerm>& terms);
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
// One table as CSV (RFC 4180): a header of the typed keys, then one line per row with every
// number at full precision (the shortest text that reads back as the same double), booleans as
// true | false, empty cells for null. Units are in the keys only (docs/json.md §3).
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
