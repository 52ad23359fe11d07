// What the cost views compute (explorer_results.hpp).
#include "explorer_results.hpp"

#include <algorithm>

#include "attnres/cost_metrics.hpp"
#include "attnres/format.hpp"
#include "attnres/output_schema.hpp"
#include "attnres/pipeline.hpp"

namespace attnres::gui {

MemoryResult compute_memory(const ExplorerState& state) {
  const MemorySettings settings = memory_settings(state);
  MemoryResult result;
  result.ranks = memory_per_rank(state.model, settings);
  const auto peak = std::max_element(
      result.ranks.begin(), result.ranks.end(),
      [](const RankMemory& a, const RankMemory& b) { return a.total() < b.total(); });
  if (peak != result.ranks.end()) result.peak = *peak;
  result.assumptions = memory_assumptions(state.model, settings);
  result.hardware = state.hardware.name;
  result.table = memory_table(result.ranks, result.assumptions, " on " + state.hardware.name);
  return result;
}

std::vector<StageChunk> stage_chunks(const CostInputs& resolved) {
  std::vector<StageChunk> chunks;
  const std::vector<std::int64_t> last = stage_last_sublayers(resolved);
  const std::int64_t ranks = std::max<std::int64_t>(resolved.pp, 1);
  std::int64_t end = 0;
  for (std::size_t c = 0; c < last.size(); ++c) {
    StageChunk chunk;
    chunk.chunk = static_cast<std::int64_t>(c);
    chunk.rank = chunk.chunk % ranks;
    chunk.first_sublayer = end + 1;
    chunk.last_sublayer = last[c];
    chunk.splits_layer = chunk.first_sublayer % 2 == 0 ||
                         (chunk.last_sublayer % 2 == 1 && chunk.last_sublayer < resolved.sublayers);
    end = last[c];
    chunks.push_back(chunk);
  }
  return chunks;
}

std::string shown_percent(double fraction) {
  return shown_value(nlohmann::json(fraction), Shown::percent) + " %";
}

std::string step_headline(const PipelineReport& report) {
  const StepReconciliation& r = report.reconciliation;
  const double overhead = report.attnres_overhead_fraction;
  std::string text = (overhead >= 0 ? "AttnRes adds " : "AttnRes changes the step by ") +
                     shown_percent(overhead) + (overhead >= 0 ? " to the step" : "") +
                     " (mechanism " + shown_percent(r.residual) + ", pipeline traffic " +
                     shown_percent(r.pp) + ", bubble " + shown_percent(r.bubble);
  // The parts that are usually 0, only when they show.
  auto shows = [](double fraction) {
    const std::string shown = shown_value(nlohmann::json(fraction), Shown::percent);
    return shown != "0" && shown != "-0";
  };
  if (shows(r.dp)) text += ", gradient collectives " + shown_percent(r.dp);
  if (shows(r.other)) text += ", other " + shown_percent(r.other);
  return text + ")";
}

StepResult compute_step(const PipelineSettings& settings) {
  StepResult result;
  result.report = evaluate_pipeline(settings);
  const PipelineReport& p = result.report;
  result.parts = step_table(p);
  result.reconciliation = reconciliation_table(p);
  result.chunks = stage_chunks(settings.model);
  result.headline = step_headline(p);
  const PipelineSettings& s = p.settings;
  const CostInputs& in = s.model;
  std::string links = s.model.pp == 1 ? "one rank, no pipeline links"
                      : s.ideal_links
                          ? "ideal (free) links"
                          : std::string(pipeline_link_intra_node(s) ? "NVLink" : "scale-out") +
                                " links " + format_number(p.link_bandwidth / 1e9) + " GB/s";
  result.setting =
      (s.mode == ResidualMode::full ? std::string("Full AttnRes")
                                    : "Block AttnRes N = " + std::to_string(in.blocks)) +
      " on " + s.hardware.name + ", " + to_string(s.schedule) +
      " schedule, m = " + std::to_string(s.microbatches) +
      " micro-batches, P = " + std::to_string(in.pp) + ", V = " + std::to_string(in.vpp) + ", " +
      to_string(s.strategy) + " kernels, " + to_string(s.cache) + " history, " + links + "; step " +
      format_number(p.step_attnres.total()) + " s against " +
      format_number(p.step_standard.total()) + " s standard (busiest rank " +
      std::to_string(p.step_attnres.rank) + ")";
  return result;
}

PlanGrid plan_grid(const ExplorerState& state) {
  PlanGrid grid = state.plan ? state.plan->grid : PlanGrid{};
  if (grid.blocks.empty()) grid.blocks = plan_default_blocks(state.model.sublayers);
  return grid;
}

PlanBudgets plan_budgets(const ExplorerState& state) {
  return state.plan ? state.plan->budgets : PlanBudgets{};
}

namespace {

nlohmann::json capacity_json(const Hardware& hardware) {
  return hardware.memory_bytes > 0 ? nlohmann::json(hardware.memory_bytes) : nlohmann::json();
}

// The simulated step's headline: what the Step tab and the Pipeline view show.
nlohmann::json step_json(const PipelineReport& report, const Hardware& hardware) {
  const double capacity = hardware.memory_bytes;
  const double peak = simulated_peak_bytes(report);
  return {{"step_seconds", report.step_time_s},
          {"standard_step_seconds", report.step_standard.total()},
          {"iteration_seconds", report.iteration_time_s},
          {"attnres_overhead_fraction", report.attnres_overhead_fraction},
          {"bubble_fraction", report.bubble_fraction},
          {"peak_memory_per_rank_bytes", peak},
          {"peak_memory_kind", kSimulatedMemory},
          {"fits", capacity > 0 ? nlohmann::json(peak <= capacity) : nlohmann::json()},
          {"headline", step_headline(report)}};
}

}  // namespace

namespace {

nlohmann::json hardware_json(const ExplorerState& state) {
  return {{"name", state.hardware.name},
          {"origin", state.hardware_origin},
          {"capacity_bytes", capacity_json(state.hardware)}};
}

PipelineSettings dump_settings(const ExplorerState& state, const Progress& progress) {
  PipelineSettings s = step_settings(state);
  s.progress = progress;
  return s;
}

// The simulated step, or the problem that stops it.
std::optional<PipelineReport> dump_step(const PipelineSettings& settings, nlohmann::json& out,
                                        const Hardware& hardware) {
  if (const auto problem = pipeline_settings_problem(settings)) {
    out = {{"problem", problem->message}};
    return std::nullopt;
  }
  PipelineReport report = evaluate_pipeline(settings);
  out = step_json(report, hardware);
  return report;
}

ViewDump explorer_dump(const Scenario& scenario, const Progress& progress,
                       nlohmann::json (*results)(const ExplorerState&, const Progress&)) {
  if (!scenario.has_model) return {nullptr, "the scenario has no [model] table"};
  const ExplorerState state = explorer_state(scenario);
  return {{{"state", explorer_state_json(state)}, {"results", results(state, progress)}}, ""};
}

}  // namespace

nlohmann::json cost_results(const ExplorerState& state, const Progress& progress) {
  const PipelineSettings settings = dump_settings(state, progress);
  nlohmann::json step_results;
  const std::optional<PipelineReport> step = dump_step(settings, step_results, state.hardware);
  const MemoryResult memory = compute_memory(state);
  nlohmann::json decision = step_results;
  if (step) {
    const PlanResult plan = make_plan(settings, plan_grid(state), plan_budgets(state), progress);
    nlohmann::json recommended;
    if (plan.recommended) {
      const PlanCandidate& c = plan.candidates[*plan.recommended];
      recommended = {{"blocks", c.blocks},
                     {"tp", c.tp},
                     {"cp", c.cp},
                     {"ep", c.ep},
                     {"pp", c.pp},
                     {"vpp", c.vpp},
                     {"dp", c.dp},
                     {"step_seconds", c.step_seconds},
                     {"overhead_fraction", c.overhead_fraction},
                     {"peak_memory_bytes", c.peak_memory_bytes},
                     {"peak_memory_kind", kSimulatedMemory}};
    }
    decision = {{"grid", state.plan ? "scenario [plan]" : "defaults"},
                {"summary", plan.summary},
                {"recommended", recommended}};
  }
  return {{"hardware", hardware_json(state)},
          {"memory", memory_to_json(memory.ranks, memory.assumptions)},
          {"memory_kind", kAnalyticMemory},
          {"step", step_results},
          {"decision", decision}};
}

nlohmann::json pipeline_results(const ExplorerState& state, const Progress& progress) {
  nlohmann::json step_results;
  dump_step(dump_settings(state, progress), step_results, state.hardware);
  return {{"hardware", hardware_json(state)}, {"step", step_results}};
}

ViewDump cost_view_dump(const Scenario& scenario, const Progress& progress) {
  return explorer_dump(scenario, progress, cost_results);
}

ViewDump pipeline_view_dump(const Scenario& scenario, const Progress& progress) {
  return explorer_dump(scenario, progress, pipeline_results);
}

}  // namespace attnres::gui
