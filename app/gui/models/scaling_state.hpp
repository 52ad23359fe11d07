// The Scaling law view's state and results, with no widget (docs/architecture.md "The GUI's
// models"): the state is the scenario's [scaling] table (docs/scenarios.md) — the loss at which
// the compute multipliers are read and the loss range of the curves — and the results are the
// scaling section of `attnres report` (add_scaling_section: the paper's Fig. 4 fits), so the view
// and the CLI cannot disagree.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnres/report.hpp"
#include "attnres/scenario.hpp"
#include "view_dump.hpp"

namespace attnres::gui {

// The view's inputs: the [scaling] table itself (one type, so a scenario round-trips unchanged).
using ScalingState = ScenarioScaling;

// The ranges the view's fields accept (nats/token, the paper's scale); the view's spin boxes take
// them from here.
inline constexpr double kScalingLossMin = 0.5, kScalingLossMax = 3.0;

// The state of a scenario, and back.
ScalingState scaling_state(const Scenario& scenario);
void save_scaling_state(const ScalingState& state, Scenario& scenario);

// What is wrong with `state`, worded for the view's banner; empty when it computes.
std::string scaling_state_problem(const ScalingState& state);

struct ScalingResult {
  std::string problem;            // non-empty: nothing below was computed
  std::vector<ChartSpec> charts;  // loss against compute; the multiplier against the loss
  ReportTable fits;               // the fits and each scheme's compute to the target
  double block_multiplier = 0.0;  // baseline compute / Block AttnRes compute at the target
  double full_multiplier = 0.0;   // the same for Full AttnRes
};

// The scaling section of `attnres report` for `state`.
ScalingResult compute_scaling(const ScalingState& state);

// The state and headline results for attnres-lab --dump-state (view_dump.hpp): the [scaling]
// table and the multipliers at its target.
nlohmann::json scaling_dump(const ScalingState& state);
ViewDump scaling_view_dump(const Scenario& scenario, const Progress& progress = {});

}  // namespace attnres::gui
