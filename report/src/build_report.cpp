// Building a report from a scenario (build_report), one step per part: the heading, the sections
// computed from the model (cost tables, time, pipeline simulation, the strategy, decode, layout
// and recompute tables), calibration against public measurements (docs/calibration.md), scaling,
// every sweep with its table, chart and claim check, and the provenance of it all.
#include "attnres/cancel.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/error.hpp"
#include "attnres/report.hpp"
#include "attnres/strategy_report.hpp"
#include "attnres/version.hpp"
#include "report_parts.hpp"

namespace attnres {

using detail::num;
using detail::wants;
using nlohmann::json;

namespace {

// A table's rows as JSON objects keyed by the header (the v2 sections' report.json entries).
json table_rows_json(const ReportTable& t) {
  json rows = json::array();
  for (const auto& row : t.rows) {
    json entry = json::object();
    for (std::size_t i = 0; i < row.size() && i < t.header.size(); ++i) entry[t.header[i]] = row[i];
    rows.push_back(std::move(entry));
  }
  return rows;
}

// Title, description (with the model's source) and the scenario file.
Report report_heading(const Scenario& s) {
  Report report;
  report.title = s.title.empty() ? s.source : s.title;
  report.description = s.description;
  if (!s.model_source.empty()) {
    report.description +=
        (report.description.empty() ? "" : "\n\n") + std::string("Model source: ") + s.model_source;
  }
  report.source = s.source;
  return report;
}

// The tables of cost engine v2 the scenario asks for (docs/math.md §3.6), each also in report.json.
void add_strategy_sections(const Scenario& s, Report& report) {
  std::vector<ReportTable> v2;
  for (ResidualMode mode : {ResidualMode::block, ResidualMode::full}) {
    if (!wants(s.sections, "strategies")) continue;
    v2.push_back(strategies_table(mode, s.inputs, s.moe, *s.hardware));
    AttnResConfig scheme;
    scheme.mode = mode;
    v2.back().chart = "strategies_" + to_string(mode);
    report.charts.push_back(strategies_chart(scheme, s.inputs, *s.hardware));
  }
  for (ResidualMode mode : {ResidualMode::block, ResidualMode::full}) {
    if (wants(s.sections, "decode")) v2.push_back(decode_table(mode, s.inputs, s.moe, *s.hardware));
  }
  if (wants(s.sections, "layout")) v2.push_back(layout_table(s.inputs));
  if (wants(s.sections, "recompute"))
    v2.push_back(recompute_table(s.strategy_mode, s.strategy, s.inputs));
  for (auto& table : v2) {
    report.json[table.id] = table_rows_json(table);
    report.tables.push_back(std::move(table));
  }
}

// The sections computed from the model: the cost tables, time, the pipeline simulation and v2.
void add_model_sections(const Scenario& s, Report& report) {
  const EvaluatedScenario evaluated = evaluate_scenario(
      s.scenario_inputs(), wants(s.sections, "time"), wants(s.sections, "pipeline_sim"), true);
  report.json = evaluation_to_json(evaluated.view());
  report.tables = cost_tables(evaluated.cost, s.sections);
  if (evaluated.prefill)
    report.tables.push_back(
        time_table(s.inputs, *evaluated.prefill, *evaluated.decode, *s.hardware));
  if (evaluated.pipeline) add_pipeline_section(*evaluated.pipeline, report);
  add_strategy_sections(s, report);
}

// Modelled against measured for every point of the calibration table (docs/calibration.md).
void add_calibration_section(const Scenario& s, Report& report) {
  const CalibrationTable table = s.calibration_table.empty()
                                     ? builtin_calibration()
                                     : load_calibration(s.calibration_table.string());
  const auto rows = evaluate_calibration(table);
  report.tables.push_back(calibration_table(rows));
  report.charts.push_back(calibration_chart(rows));
  report.conclusions.push_back("**Calibration against public measurements**\n\n" +
                               calibration_summary(rows) + "\n");
  json points = json::array();
  for (const auto& row : rows) {
    points.push_back({{"id", row.point.id},
                      {"source", row.point.source},
                      {"url", row.point.url},
                      {"quantity", to_string(row.point.quantity)},
                      {"measured", row.point.measured},
                      {"modelled", row.modelled},
                      {"ratio", row.ratio},
                      {"bound", row.bound},
                      {"within_bound", row.within},
                      {"fitted", row.point.fitted}});
  }
  const CalibrationError error = calibration_error(rows);
  report.json["calibration"] = {{"table", table.source},
                                {"points", points},
                                {"typical_factor", error.typical_factor},
                                {"worst_factor", error.worst_factor},
                                {"worst", error.worst_id},
                                {"measured_points", error.points}};
}

// A sweep must not overwrite one of the report's own tables or charts.
void check_sweep_name(const Scenario& s, const SweepSpec& spec, const Report& report) {
  for (const auto& table : report.tables) {
    if (table.id == spec.name) {
      throw Error(s.source + ": sweep '" + spec.name +
                  "' has the name of the report's own table '" + table.id + "' (tables/" +
                  table.id + ".csv); give the sweep another name");
    }
  }
  for (const auto& chart : report.charts) {
    if (chart.id == spec.name) {
      throw Error(s.source + ": sweep '" + spec.name +
                  "' has the name of the report's own chart '" + chart.id + "' (charts/" +
                  chart.id + ".png); give the sweep another name");
    }
  }
}

// One sweep: its table (and claim check), chart and notes; returns its report.json entry.
json add_sweep(const Scenario& s, const SweepSpec& spec, const Progress& progress, Report& report) {
  const SweepResult result = run_sweep(s.scenario_inputs(), spec, progress);
  ReportTable table{spec.name, spec.title.empty() ? "Sweep " + spec.name : spec.title, {}, {}, "",
                    spec.name};
  table.header.push_back(spec.x.parameter);
  if (spec.y) table.header.push_back(spec.y->parameter);
  for (const auto& key : spec.metrics)
    table.header.push_back(key + " (" + find_cost_metric(key)->unit + ")");
  json points = json::array();
  for (const auto& point : result.points) {
    std::vector<std::string> row{num(point.x)};
    json entry = {{spec.x.parameter, point.x}};
    if (point.y) {
      row.push_back(num(*point.y));
      entry[spec.y->parameter] = *point.y;
    }
    for (std::size_t m = 0; m < point.values.size(); ++m) {
      row.push_back(num(point.values[m]));
      entry[spec.metrics[m]] = point.values[m];
    }
    table.rows.push_back(std::move(row));
    points.push_back(std::move(entry));
  }
  if (!result.skipped.empty()) {
    table.note = std::to_string(result.skipped_count) + " settings rejected as impossible, e.g. " +
                 result.skipped.front() + ".";
    report.notes.push_back("sweep " + spec.name + ": " + table.note);
  }
  json sweep_entry = {{"name", spec.name},
                      {"x", spec.x.parameter},
                      {"y", spec.y ? json(spec.y->parameter) : json(nullptr)},
                      {"metrics", spec.metrics},
                      {"points", points},
                      {"skipped", result.skipped},
                      {"conclusion", sweep_conclusion(result)}};
  report.charts.push_back(sweep_chart(result, s.scenario_inputs()));
  if (const std::string warning = paper_fig6_warning(spec, s.scenario_inputs().cost);
      !warning.empty()) {
    report.notes.push_back("sweep " + spec.name + ": " + warning);
  }
  if (const std::string conclusion = sweep_conclusion(result); !conclusion.empty()) {
    table.note += (table.note.empty() ? "" : " ") + std::string("Claim check:\n\n") + conclusion;
    report.conclusions.push_back("**" + (spec.title.empty() ? spec.name : spec.title) + "**\n\n" +
                                 conclusion);
  }
  report.tables.push_back(std::move(table));
  return sweep_entry;
}

}  // namespace

Report build_report(const Scenario& s, const Progress& progress) {
  Report report = report_heading(s);
  if (s.has_model) add_model_sections(s, report);
  if (wants(s.sections, "calibration")) add_calibration_section(s, report);
  report.json["scenario"] = {
      {"source", s.source}, {"title", report.title}, {"sections", s.sections}};
  if (wants(s.sections, "scaling")) add_scaling_section(s.scaling, report);

  json sweeps = json::array();
  for (const auto& spec : s.sweeps) {
    check_sweep_name(s, spec, report);
    sweeps.push_back(add_sweep(s, spec, progress, report));
  }
  report.json["sweeps"] = sweeps;
  report.json["provenance"] = report_provenance(s);
  report.provenance = report.json["provenance"];
  report_progress(progress, 1, 1, "report");  // a Ctrl-C during the sections stops here
  return report;
}

json report_provenance(const Scenario& s) {
  json inputs;
  if (s.has_model) inputs["model"] = cost_inputs_to_json(s.inputs);
  if (s.hardware) {
    const Hardware& h = *s.hardware;
    inputs["hardware"] = {{"name", h.name},
                          {"source", h.source},
                          {"peak_flops", h.peak_flops},
                          {"hbm_bandwidth_bytes_per_s", h.hbm_bandwidth},
                          {"intra_node_bandwidth_bytes_per_s", h.intra_node_bandwidth},
                          {"scale_out_bandwidth_bytes_per_s", h.scale_out_bandwidth},
                          {"link_latency_s", h.link_latency},
                          {"gpus_per_node", h.gpus_per_node},
                          {"efficiency",
                           {{"compute", h.compute_efficiency},
                            {"memory", h.memory_efficiency},
                            {"link", h.link_efficiency}}}};
  }
  if (s.moe.experts > 0) {
    inputs["moe"] = {{"experts", s.moe.experts},
                     {"active", s.moe.active},
                     {"shared", s.moe.shared},
                     {"expert_ffn", s.moe.expert_ffn}};
  }
  if (s.pipeline) {
    const PipelineSettings& p = *s.pipeline;
    inputs["pipeline"] = {{"mode", to_string(p.mode)},
                          {"microbatches", p.microbatches},
                          {"schedule", to_string(p.schedule)},
                          {"cache", to_string(p.cache)},
                          {"link", p.intra_node_link ? "intra_node" : "scale_out"},
                          {"link_bandwidth_bytes_per_s",
                           p.link_bandwidth > 0 ? json(p.link_bandwidth) : json(nullptr)},
                          {"overlap", p.overlap},
                          {"ideal_links", p.ideal_links}};
  }
  if (wants(s.sections, "scaling")) {
    inputs["scaling"] = {{"target_loss", s.scaling.target_loss},
                         {"loss_from", s.scaling.loss_from},
                         {"loss_to", s.scaling.loss_to}};
  }
  return {{"tool", "attnres"},         {"version", kVersion},     {"command", "attnres report"},
          {"scenario_file", s.source}, {"scenario_text", s.text}, {"sections", s.sections},
          {"inputs", inputs}};
}

}  // namespace attnres
