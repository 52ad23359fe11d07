// Building a report from a scenario (build_report), one step per part: the heading, the sections
// computed from the model (cost tables, time, pipeline simulation, the strategy, decode, layout
// and recompute tables), calibration against public measurements (docs/calibration.md), scaling,
// every sweep with its table, chart and claim check, and the provenance of it all.
#include <cmath>

#include "attnres/cancel.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/error.hpp"
#include "attnres/output_schema.hpp"
#include "attnres/published_quality.hpp"
#include "attnres/report.hpp"
#include "attnres/strategy_report.hpp"
#include "attnres/version.hpp"
#include "report_parts.hpp"

namespace attnres {

using detail::num;
using detail::wants;
using nlohmann::json;

namespace {

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

// The tables of cost engine v2 the scenario asks for (docs/math.md §3.6).
void add_strategy_sections(const Scenario& s, Report& report) {
  std::vector<ReportTable> v2;
  for (ResidualMode mode : {ResidualMode::block, ResidualMode::full}) {
    if (!wants(s.sections, "strategies")) continue;
    v2.push_back(strategies_table(mode, s.inputs, *s.hardware));
    AttnResConfig scheme;
    scheme.mode = mode;
    v2.back().chart = "strategies_" + to_string(mode);
    report.charts.push_back(strategies_chart(scheme, s.inputs, *s.hardware));
  }
  for (ResidualMode mode : {ResidualMode::block, ResidualMode::full}) {
    if (wants(s.sections, "decode")) v2.push_back(decode_table(mode, s.inputs, *s.hardware));
  }
  if (wants(s.sections, "layout")) v2.push_back(layout_table(s.inputs));
  if (wants(s.sections, "recompute"))
    v2.push_back(recompute_table(s.strategy_mode, s.strategy, s.inputs));
  if (wants(s.sections, "memory")) {
    // Memory per rank and communication per step (docs/math.md §3.7), with the [pipeline]
    // table's micro-batches and schedule when there is one.
    const MemorySettings memory = scenario_memory_settings(s.scenario_inputs());
    v2.push_back(memory_table(memory_per_rank(s.inputs, memory),
                              memory_assumptions(s.inputs, memory), " on " + s.hardware->name));
    v2.push_back(communication_table(
        step_communication(s.inputs, *s.hardware, memory.microbatches, memory.mode)));
  }
  for (auto& table : v2) report.tables.push_back(std::move(table));
}

// The sections computed from the model: the cost tables, time, the pipeline simulation and v2.
void add_model_sections(const Scenario& s, Report& report) {
  const EvaluatedScenario evaluated =
      evaluate_scenario(s.scenario_inputs(), wants(s.sections, "time"),
                        wants(s.sections, "pipeline_sim"), true, wants(s.sections, "memory"));
  report.json = evaluation_to_json(evaluated.view());
  report.tables = cost_tables(evaluated.cost, s.sections);
  if (const std::string warning = stage_split_warning(s.inputs); !warning.empty())
    report.notes.push_back("pipeline stages: " + warning);
  if (evaluated.prefill)
    report.tables.push_back(
        time_table(s.inputs, *evaluated.prefill, *evaluated.decode, *s.hardware));
  if (evaluated.pipeline) add_pipeline_section(*evaluated.pipeline, report);
  if (wants(s.sections, "step")) {
    // The one step overhead and its parts (docs/math.md §3.8): the simulation's own run when the
    // pipeline section has one, else one here.
    const PipelineReport step =
        evaluated.pipeline
            ? *evaluated.pipeline
            : evaluate_scenario(s.scenario_inputs(), false, true, false).pipeline.value();
    report.tables.push_back(step_table(step));
    report.tables.push_back(reconciliation_table(step));
    report.json["step"] = step_to_json(step);
  }
  add_strategy_sections(s, report);
}

// The decision (docs/math.md §3.9): the [plan] grid against its budgets.
void add_decision_section(const Scenario& s, const Progress& progress, Report& report) {
  PipelineSettings base = *s.pipeline;
  base.model = s.inputs;
  base.hardware = *s.hardware;
  base.strategy = s.strategy;
  base.record_timeline = false;
  const PlanResult plan = make_plan(base, s.plan->grid, s.plan->budgets, progress);
  ReportTable table = plan_table(plan);
  report.conclusions.push_back("**Decision: which N**\n\n" + plan.summary + "\n\n- " + [&] {
    std::string lines;
    for (std::size_t k = 0; k < plan.by_blocks.size(); ++k)
      lines += (k ? "\n- " : "") + plan.by_blocks[k];
    return lines;
  }() + "\n");
  report.json["decision"] = {
      {"summary", plan.summary},
      {"by_blocks", plan.by_blocks},
      {"recommended", plan.recommended ? json(*plan.recommended) : json(nullptr)},
      {"candidates", table_json(table)["rows"]}};
  report.tables.push_back(std::move(table));
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
  report.json["calibration"] = calibration_to_json(table.source, rows);
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
  // Keyed as attnres sweep keys its CSV and JSON: the parameters, then the metric keys.
  // A named axis (strategy, hardware) holds its names, a numeric one its values.
  auto shown = [](const SweepAxis& axis) {
    return axis.names.empty() ? Shown::integer : Shown::text;
  };
  auto axis_value = [](const SweepAxis& axis, std::int64_t v) {
    return axis.names.empty() ? json(v) : json(axis.value_text(v));
  };
  std::vector<TableColumn> columns{{spec.x.parameter, spec.x.parameter, shown(spec.x)}};
  if (spec.y) columns.push_back({spec.y->parameter, spec.y->parameter, shown(*spec.y)});
  for (const auto& key : spec.metrics)
    columns.push_back({key, key + " (" + find_cost_metric(key)->unit + ")", Shown::number});
  ReportTable table = typed_table(spec.name, spec.title.empty() ? "Sweep " + spec.name : spec.title,
                                  columns, spec.name);
  json points = json::array();
  for (const auto& point : result.points) {
    std::vector<json> row{axis_value(spec.x, point.x)};
    if (point.y && spec.y) row.push_back(axis_value(*spec.y, *point.y));
    for (double value : point.values)
      row.push_back(std::isfinite(value) ? json(value) : json(nullptr));
    json entry = json::object();
    for (std::size_t i = 0; i < row.size(); ++i) entry[columns[i].key] = row[i];
    add_row(table, std::move(row));
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
    if (!table.note.empty()) table.note.push_back(' ');
    table.note.append("Claim check:\n\n").append(conclusion);
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
  if (s.has_model && s.plan && wants(s.sections, "decision"))
    add_decision_section(s, progress, report);
  report.json["scenario"] = {
      {"source", s.source}, {"title", report.title}, {"sections", s.sections}};
  if (wants(s.sections, "scaling")) add_scaling_section(s.scaling, report);
  if (s.has_model && wants(s.sections, "quality")) {
    // The published quality band at the model's depth, its N marked (docs/quality.md).
    const CostInputs model = resolve_cost_inputs(s.inputs);
    if (model.sublayers > kMaxQualitySublayers) {
      report.notes.push_back("section quality left out: L = " + std::to_string(model.sublayers) +
                             " is beyond the " + std::to_string(kMaxQualitySublayers) +
                             " sublayers the band is computed for (the published studies reach "
                             "L = 72; docs/quality.md)");
    } else {
      add_quality_section(static_cast<int>(model.sublayers), static_cast<int>(model.blocks),
                          report);
    }
  }

  json sweeps = json::array();
  for (const auto& spec : s.sweeps) {
    check_sweep_name(s, spec, report);
    sweeps.push_back(add_sweep(s, spec, progress, report));
  }
  report.json["sweeps"] = sweeps;
  report.json["schema"] = schema_tag("report");
  report.json["provenance"] = report_provenance(s);
  report.provenance = report.json["provenance"];
  report_progress(progress, 1, 1, "report");  // a Ctrl-C during the sections stops here
  return report;
}

json report_provenance(const Scenario& s) {
  json inputs = inputs_to_json(s.inputs, s.hardware ? &*s.hardware : nullptr,
                               s.pipeline ? &*s.pipeline : nullptr);
  if (!s.has_model) inputs.erase("model");
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
