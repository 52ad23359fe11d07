// The Scaling law view's state and results (scaling_state.hpp).
#include "scaling_state.hpp"

#include <sstream>

#include "attnres/cost.hpp"

namespace attnres::gui {

ScalingState scaling_state(const Scenario& scenario) {
  return scenario.scaling;
}

void save_scaling_state(const ScalingState& state, Scenario& scenario) {
  scenario.scaling = state;
}

std::string scaling_state_problem(const ScalingState& state) {
  const auto in_range = [](double v) { return v >= kScalingLossMin && v <= kScalingLossMax; };
  if (!in_range(state.target_loss) || !in_range(state.loss_from) || !in_range(state.loss_to)) {
    std::ostringstream text;
    text << "scaling: the target loss and the curve's range must lie in " << kScalingLossMin
         << " .. " << kScalingLossMax << " nats/token";
    return text.str();
  }
  if (!(state.loss_from < state.loss_to)) return "scaling: the curve needs from < to";
  return {};
}

ScalingResult compute_scaling(const ScalingState& state) {
  ScalingResult result;
  result.problem = scaling_state_problem(state);
  if (!result.problem.empty()) return result;
  Report report;
  add_scaling_section(state, report);
  result.charts = report.charts;
  result.fits = report.tables.at(0);
  const ScalingAtLoss at = scaling_at_loss(state.target_loss);
  result.block_multiplier = at.multiplier_block;
  result.full_multiplier = at.multiplier_full;
  return result;
}

nlohmann::json scaling_dump(const ScalingState& state) {
  const ScalingResult result = compute_scaling(state);
  nlohmann::json results;
  if (!result.problem.empty()) {
    results = {{"problem", result.problem}};
  } else {
    results = {{"block_multiplier", result.block_multiplier},
               {"full_multiplier", result.full_multiplier}};
  }
  return {{"state",
           {{"target_loss", state.target_loss},
            {"loss_from", state.loss_from},
            {"loss_to", state.loss_to}}},
          {"results", results}};
}

ViewDump scaling_view_dump(const Scenario& scenario, const Progress&) {
  return {scaling_dump(scaling_state(scenario)), ""};
}

}  // namespace attnres::gui
