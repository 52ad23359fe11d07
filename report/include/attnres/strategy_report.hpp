// The tables of cost engine v2 (docs/math.md §3.6, docs/calibration.md), one builder per table,
// shared by `attnres strategies`, `layout`, `calibrate` and the report sections "strategies",
// "decode", "recompute", "layout" and "calibration".
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "attnres/calibration.hpp"
#include "attnres/chart_spec.hpp"
#include "attnres/report.hpp"
#include "attnres/strategy.hpp"

namespace attnres {

// Every strategy for `mode` (block or full): bytes and launches per forward and backward of one
// micro-batch (B·T tokens), temporary and saved memory, and the training-step overhead on
// `hardware` against the standard residual (strategy_step).
ReportTable strategies_table(ResidualMode mode, const CostInputs& resolved,
                             const Hardware& hardware);
// The same for any scheme with reads (read_ops_of); a strategy that does not apply to it (the
// two-phase schedule with an input-dependent query) gets a row saying why.
ReportTable strategies_table(const AttnResConfig& scheme, const CostInputs& resolved,
                             const Hardware& hardware);
// The mechanism's forward time per pass against the tokens per call (1 .. 2^20, log-log), one
// line per strategy and one for the standard residual's adds: flat at launches x floor while
// launch-bound, then rising with the bytes (docs/math.md §3.6).
ChartSpec strategies_chart(const AttnResConfig& scheme, const CostInputs& resolved,
                           const Hardware& hardware);
// Decode per call: reads per forward (L + 1), tokens per call (B), each strategy's launches per
// decode step, the mechanism's time, its share of the decode step, and the regime (floor- or
// bandwidth-bound) with the crossover in tokens per call.
ReportTable decode_table(ResidualMode mode, const CostInputs& resolved, const Hardware& hardware);
ReportTable decode_table(const AttnResConfig& scheme, const CostInputs& resolved,
                         const Hardware& hardware);
// Every block: sublayers, layers, sources per read, pipeline chunks and ranks, and whether it
// crosses a stage boundary or splits a transformer layer.
ReportTable layout_table(const CostInputs& resolved);
// Memory per rank and recompute FLOPs per micro-batch for each checkpointing policy.
ReportTable recompute_table(ResidualMode mode, Strategy strategy, const CostInputs& resolved);
// Modelled vs measured for every calibration point, with its source; and the chart (log-log,
// modelled against measured, the y = x line).
ReportTable calibration_table(const std::vector<CalibrationRow>& rows);
// Series: measured (0), fitted (1), claimed bounds (2), the diagonal. `places` (optional) gets,
// per row, its series and point index (series -1: not drawn), for labels beside the points.
struct CalibrationPointPlace {
  int series = -1;
  std::size_t point = 0;
};
ChartSpec calibration_chart(const std::vector<CalibrationRow>& rows,
                            std::vector<CalibrationPointPlace>* places = nullptr);
// One paragraph: the model's error over the measured points (calibration_error).
std::string calibration_summary(const std::vector<CalibrationRow>& rows);
// `calibrate --format json` and report.json's "calibration": the table's source, every point
// (measured and modelled in the point's quantity: a fraction of the step or seconds per call),
// the error summary (docs/json.md §5).
nlohmann::json calibration_to_json(const std::string& table_source,
                                   const std::vector<CalibrationRow>& rows);

}  // namespace attnres
