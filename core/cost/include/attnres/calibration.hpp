// Calibration against public measurements (docs/calibration.md): a committed table of measured
// AttnRes overheads — each with its source, hardware, model shape, implementation strategy and the
// figure as published — and the engine's modelled value for each, with the ratio.
//
//   CalibrationTable table = builtin_calibration();      // resources/calibration/*.toml
//   for (const CalibrationRow& row : evaluate_calibration(table))
//     std::cout << row.point.id << " " << row.modelled << " vs " << row.point.measured;
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "attnres/cost.hpp"
#include "attnres/enum_names.hpp"
#include "attnres/hardware.hpp"
#include "attnres/strategy.hpp"
#include "attnres/time_model.hpp"

namespace attnres {

enum class CalibrationQuantity {
  step_overhead,        // training step time with AttnRes / without - 1
  throughput_change,    // training tokens/s with / without - 1
  call_seconds,         // one kernel call, seconds
  step_overhead_max,    // a claimed bound on step_overhead
  decode_overhead_max,  // a claimed bound on the decode-step overhead
};
inline constexpr EnumNames<CalibrationQuantity, 5> kCalibrationQuantityNames{
    {{CalibrationQuantity::step_overhead, "step_overhead"},
     {CalibrationQuantity::throughput_change, "throughput_change"},
     {CalibrationQuantity::call_seconds, "call_seconds"},
     {CalibrationQuantity::step_overhead_max, "step_overhead_max"},
     {CalibrationQuantity::decode_overhead_max, "decode_overhead_max"}}};
std::string to_string(CalibrationQuantity quantity);

struct CalibrationPoint {
  std::string id, title, source, url, measured_text, assumptions;
  CalibrationQuantity quantity = CalibrationQuantity::step_overhead;
  double measured = 0;  // a fraction, or seconds for call_seconds
  std::string hardware_name;
  Hardware hardware;
  ResidualMode mode = ResidualMode::block;
  Strategy strategy = Strategy::fused_one_shot;
  Phase phase = Phase::prefill;
  CostInputs inputs;         // resolved (call_seconds: d, batch and tokens only)
  std::string call;          // call_seconds: "fused_read" or "merge"
  std::int64_t sources = 0;  // call_seconds: sources per read
  bool fitted = false;       // a model parameter was set from this point
  std::string location;      // file:line:column of the [[point]]
};

struct CalibrationTable {
  std::string source;  // file name, for messages
  std::vector<CalibrationPoint> points;
};

// Parses and validates a table; every error names source:line:column and what was expected
// (unknown keys, a missing id/source/measured, an unknown quantity, strategy or hardware preset,
// an impossible shape).
CalibrationTable parse_calibration(const std::string& text, const std::string& source);
CalibrationTable load_calibration(const std::string& path);
// The committed table (resources/calibration/public-measurements.toml, compiled in).
const std::string& builtin_calibration_text();
CalibrationTable builtin_calibration();

struct CalibrationRow {
  CalibrationPoint point;
  double modelled = 0;  // same quantity as point.measured
  double ratio = 0;     // modelled / measured (bounds: modelled / bound)
  bool bound = false;   // the point is a claimed upper bound
  bool within = false;  // bound: modelled <= bound
  std::string regime;   // "floor-bound", "bandwidth-bound", or the step's launches/bytes
  std::string detail;   // what the modelled figure is made of
};
std::vector<CalibrationRow> evaluate_calibration(const CalibrationTable& table);

// The model's error over the measured (not bound, not fitted) points: the geometric mean of
// max(ratio, 1/ratio) and the worst such factor, and how many points they cover.
struct CalibrationError {
  int points = 0;
  double typical_factor = 0;
  double worst_factor = 0;
  std::string worst_id;
};
CalibrationError calibration_error(const std::vector<CalibrationRow>& rows);

}  // namespace attnres
