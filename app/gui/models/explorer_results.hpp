// What the cost views compute from their one state (explorer_state.hpp), without a window: the
// Memory tab's closed-form memory per rank, the Step tab's simulated step, the Decision tab's
// plan and the Pipeline view's simulation. Each is the engine call `attnres report` makes for the
// same scenario, so a view and the CLI cannot disagree (tests/gui_models/). docs/math.md §3.7-§3.9.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnres/cancel.hpp"
#include "attnres/plan.hpp"
#include "attnres/rank_memory.hpp"
#include "attnres/report.hpp"
#include "explorer_state.hpp"
#include "view_dump.hpp"

namespace attnres::gui {

// The two memory figures the views show, each labelled where it is shown: the closed form of
// docs/math.md §3.7 (the Memory tab, `attnres memory`, a report's "memory" section) counts every
// in-flight micro-batch's activations as the schedule's bound; the simulated peak of §3.8 (the
// Pipeline view, the Decision tab, `attnres plan`) is the most the simulated schedule holds live.
inline constexpr const char* kAnalyticMemory = "analytic bound (docs/math.md §3.7)";
inline constexpr const char* kSimulatedMemory = "simulated peak (docs/math.md §3.8)";

// ------------------------------------------------------------------ Memory tab

// Everything the tab shows for one setting, computed off the GUI thread.
struct MemoryResult {
  std::vector<RankMemory> ranks;  // one per pipeline rank
  RankMemory peak;                // the largest total
  std::vector<std::string> assumptions;
  ReportTable table;  // memory_table: the rows as `attnres memory` prints them
  std::string hardware;
};
MemoryResult compute_memory(const ExplorerState& state);

// ------------------------------------------------------------------ Step tab

// One pipeline chunk of the stage layout (stage_last_sublayers): chunk c runs on rank c mod P and
// holds sublayers first..last (1-based, inclusive; layer k is sublayers 2k-1 and 2k).
struct StageChunk {
  std::int64_t chunk = 0, rank = 0;
  std::int64_t first_sublayer = 1, last_sublayer = 0;
  bool splits_layer = false;  // it starts on an MLP or ends on an attention before the last
  std::int64_t sublayers() const { return last_sublayer - first_sublayer + 1; }
};
std::vector<StageChunk> stage_chunks(const CostInputs& resolved);

// "AttnRes adds 0.4 % to the step (mechanism 0.2 %, pipeline traffic 0.19 %, bubble 0.02 %)":
// the step overhead and its split (StepReconciliation), each as the step table shows a percent;
// the gradient collectives and the rest are named only where they are not 0.
std::string step_headline(const PipelineReport& report);
// A fraction as the report tables show a percent, with its unit: "0.404 %".
std::string shown_percent(double fraction);

struct StepResult {
  PipelineReport report;
  ReportTable parts;           // step_table
  ReportTable reconciliation;  // reconciliation_table
  std::vector<StageChunk> chunks;
  std::string headline;  // step_headline
  std::string setting;   // what was simulated, in one line
};
// Throws attnres::Error on settings the simulation refuses (check pipeline_settings_problem
// first) and attnres::Cancelled when settings.progress says stop.
StepResult compute_step(const PipelineSettings& settings);
// simulated_peak_bytes (pipeline.hpp): the largest rank's memory at the simulated schedule's
// peak, what `attnres plan` checks against the device memory.

// ------------------------------------------------------------------ Decision tab

// The plan a state asks for: its [plan] grid and budgets, else N over plan_default_blocks(L) at
// the setting's degrees with the default budgets (what the Decision tab opens with).
PlanGrid plan_grid(const ExplorerState& state);
PlanBudgets plan_budgets(const ExplorerState& state);

// ------------------------------------------------------------------ the dump

// --dump-state (view_dump.hpp).
// The cost explorer's state and headline results: the hardware and its capacity, the Memory tab's
// analytic bound per rank and verdict, the Step tab's step seconds and AttnRes overhead (with the
// simulated peak), and the Decision tab's recommendation.
ViewDump cost_view_dump(const Scenario& scenario, const Progress& progress = {});
// The Pipeline view's: the hardware and the simulated step with its peak memory per rank.
ViewDump pipeline_view_dump(const Scenario& scenario, const Progress& progress = {});
// Both from a state (the dump functions above: explorer_state of the scenario).
nlohmann::json cost_results(const ExplorerState& state, const Progress& progress = {});
nlohmann::json pipeline_results(const ExplorerState& state, const Progress& progress = {});

}  // namespace attnres::gui
