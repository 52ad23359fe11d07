// The cost explorer's Charts tab, computed off the GUI thread with no widget: the four sweeps
// against N (I/O with schemes A and B, stored history, prefill history, pipeline traffic; the
// quality overlay on the right axis), the current numbers with their units, schemes A and B side
// by side, and the caption under the charts (the Fig. 6 caveat or the published band's sources).
// The cost view shows the result; tests/gui_models/ checks it without a window.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "attnres/cancel.hpp"
#include "attnres/chart_spec.hpp"
#include "attnres/cost.hpp"
#include "attnres/hardware.hpp"

namespace attnres::gui {

struct CostSweepResult {
  std::vector<ChartSpec> charts;  // cost_io, cost_history, cost_prefill, cost_pipeline
  std::vector<std::array<std::string, 3>> rows;      // metric, value, unit
  std::vector<std::array<std::string, 3>> compared;  // schemes A and B
  std::string warning;                               // under the charts ("" for none)
};

// `quality`: the right axis ("published_band", "paper_fig6" or ""); `progress` gets four steps.
CostSweepResult cost_explorer_sweeps(const CostInputs& in, const Hardware& hw,
                                     const std::string& scheme_a, const std::string& scheme_b,
                                     const std::string& quality, const Progress& progress);

// The (quantity, scheme A, scheme B) rows of the explorer's comparison table
// (docs/scheme-costs.md).
std::vector<std::array<std::string, 3>> scheme_comparison_rows(const SchemeCost& a,
                                                               const SchemeCost& b,
                                                               const CostInputs& in);

}  // namespace attnres::gui
