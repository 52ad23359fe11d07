// Which N, at what cost, on which cluster (docs/math.md §3.9): every setting of a grid — block
// counts N, parallel degrees, virtual stages, implementation strategies, hardware — simulated as
// one training step (pipeline.hpp), checked against the budgets the user gives (AttnRes step
// overhead, memory per rank, pipeline traffic, step time), with the settings that meet them, the
// Pareto set among those, and in words why the others fail.
//
//   PlanGrid grid;  grid.blocks = {1, 2, 4, 8, 16};  grid.tp = {4, 8};
//   PlanBudgets budgets;  budgets.max_overhead_fraction = 0.02;
//   PlanResult plan = make_plan(base_settings, grid, budgets);
//   plan.recommended;  // index of the largest N that meets every budget (fastest step among them)
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "attnres/cancel.hpp"
#include "attnres/hardware.hpp"
#include "attnres/pipeline.hpp"
#include "attnres/strategy.hpp"

namespace attnres {

// What a setting must meet. NaN: no such budget.
struct PlanBudgets {
  double max_overhead_fraction = std::numeric_limits<double>::quiet_NaN();  // 0.02 = 2 %
  bool must_fit = true;  // the peak rank's memory within the device memory (when known)
  double max_pipeline_bytes = std::numeric_limits<double>::quiet_NaN();  // per step, all ranks
  double max_step_seconds = std::numeric_limits<double>::quiet_NaN();
};
// The budgets' own rules ("" when they are fine): finite, > 0 and, for the overhead, < 10 (1000 %).
std::string plan_budgets_problem(const PlanBudgets& budgets);

// The values to try; an empty list keeps the base setting's value. With `gpus` > 0 the world size
// t·c·P·D is fixed and D = gpus / (t·c·P) (settings it does not divide are skipped with why).
struct PlanGrid {
  std::vector<std::int64_t> blocks, tp, cp, ep, pp, vpp;
  std::vector<Strategy> strategies;
  std::vector<Hardware> hardware;
  std::int64_t gpus = 0;
  std::size_t size() const;  // settings in the grid
};
// The block counts a plan tries when none are given: those equal blocks can make near 1, 2, 4, ...
// up to L (for each power of two n, N = ceil(L / ceil(L / n))): L = 122 gives 1, 2, 4, 8, 16, 31,
// 61, 122. None when L < 1.
std::vector<std::int64_t> plan_default_blocks(std::int64_t sublayers);
// Most settings one plan evaluates (each is four pipeline simulations).
inline constexpr std::size_t kMaxPlanSettings = 20'000;
// The grid's own rules ("" when fine): values >= 1, at most kMaxPlanSettings settings.
std::string plan_grid_problem(const PlanGrid& grid);

struct PlanCandidate {
  // The setting.
  std::int64_t blocks = 0, tp = 1, cp = 1, ep = 1, pp = 1, vpp = 1, dp = 1;
  Strategy strategy = Strategy::fused_two_phase;
  std::string hardware;
  // "" when the engine took it; else why not (the setting is impossible, not over budget).
  std::string invalid;
  // Its step (valid settings only).
  double overhead_fraction = 0;  // AttnRes step / standard step - 1
  double step_seconds = 0;
  double peak_memory_bytes = 0, capacity_bytes = 0;  // the peak rank; capacity 0 = unknown
  // The peak rank's verdict (fit_verdict, rank_memory.hpp: its reserve and margin counted), as
  // `attnres memory` and `attnres pipeline` print it for the same setting.
  bool fits = true;
  std::string fit;
  double pipeline_bytes = 0;          // AttnRes transfers per step, all ranks
  std::string stage_warning;          // stage_split_warning
  std::vector<std::string> failures;  // the budgets it misses, in words
  bool meets() const { return invalid.empty() && failures.empty(); }
  bool pareto = false;  // meets, and no other that meets is at least as good in every objective
};

struct PlanResult {
  PlanBudgets budgets;
  std::vector<PlanCandidate> candidates;   // in grid order (hardware, strategy, pp, vpp, tp, cp,
                                           // ep, blocks; blocks innermost)
  std::optional<std::size_t> recommended;  // the largest N that meets every budget, fastest step
  // One line per N tried: "N = 8: meets every budget (best: t = 8, ... 1.2 %, 61 GB of 80 GB)" or
  // "N = 16: no setting meets the budgets; closest: ... (overhead 2.4 % > 2 %)".
  std::vector<std::string> by_blocks;
  std::string summary;  // the recommendation in one sentence
};

// The Pareto objectives: lower overhead, lower step time, lower peak memory, more blocks (closer
// to Full AttnRes in quality, the paper's Fig. 6). `a` dominates `b` when it is at least as good
// in all four and better in one.
bool plan_dominates(const PlanCandidate& a, const PlanCandidate& b);

// Every setting of the grid applied to `base` (its model resolved; a listed stage layout is kept
// only where P and V are the base's), simulated without timeline. `progress` (done, total) may
// cancel (attnres::Cancelled). Throws attnres::Error on a bad grid or budget.
PlanResult make_plan(const PipelineSettings& base, const PlanGrid& grid, const PlanBudgets& budgets,
                     const Progress& progress = {});

}  // namespace attnres
