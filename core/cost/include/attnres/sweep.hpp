// Sweeps of the cost engine over one parameter or a grid of two (e.g. N over the divisors of L,
// an L x N grid, P x V), recording any metric of the catalogue (cost_metrics.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "attnres/cancel.hpp"
#include "attnres/chart_spec.hpp"
#include "attnres/cost.hpp"
#include "attnres/cost_input_fields.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/hardware.hpp"
#include "attnres/output_schema.hpp"
#include "attnres/pipeline.hpp"
#include "attnres/time_model.hpp"

namespace attnres {

// Everything a scenario evaluates: the cost inputs always; hardware (and MoE) for the time model;
// pipeline settings for the schedule simulation (their model, hardware and MoE are taken from
// the fields here at evaluation).
struct ScenarioInputs {
  CostInputs cost;
  std::optional<Hardware> hardware;
  std::optional<PipelineSettings> pipeline;
  // The implementation strategy ([implementation]): the pipeline simulation times its kernels,
  // and memory counts its saved tensors.
  Strategy strategy = Strategy::fused_two_phase;
};

// The results the metrics read.
struct EvaluatedScenario {
  CostReport cost;
  std::optional<StackTime> prefill, decode;
  std::optional<PipelineReport> pipeline;
  std::optional<std::vector<RankMemory>> memory;
  Evaluation view() const;
};
// `inputs.cost` must be resolved. Time, pipeline and memory parts are evaluated when asked for
// and available; the pipeline timeline is recorded when `timeline` is set.
EvaluatedScenario evaluate_scenario(const ScenarioInputs& inputs, bool time, bool pipeline,
                                    bool timeline, bool memory = false);
// The memory settings of a scenario (docs/math.md §3.7): the [pipeline] table's micro-batches,
// schedule and mode when there is one (else 8, the default schedule for V, block), the
// scenario's strategy, and the hardware's device memory.
MemorySettings scenario_memory_settings(const ScenarioInputs& inputs);

// Sets one field of the scenario: a CostInputs field (set_cost_input, cost_input_fields.hpp) or a
// pipeline-simulation setting (microbatches, link_bandwidth_gbps; needs inputs.pipeline).
void set_scenario_input(ScenarioInputs& inputs, const std::string& parameter, std::int64_t value);

// The rules of a sweep's parameters and metrics, one place for scenario files, `attnres sweep`,
// the GUI and run_sweep. Each returns what is wrong, without a location ("" when nothing is);
// callers prefix file:line:column or the flag.
//   A parameter: one of sweep_parameters(); microbatches and link_bandwidth_gbps need a pipeline.
std::string sweep_parameter_problem(const std::string& parameter, bool has_pipeline);
//   A metric: a key of the catalogue, available (time metrics need hardware, pipeline metrics a
//   pipeline) and in the unit of the chart's first metric (`first_unit`, "" for the first).
std::string sweep_metric_problem(const std::string& key, bool has_hardware, bool has_pipeline,
                                 const std::string& first_unit);

struct SweepAxis {
  std::string parameter;
  std::vector<std::int64_t> values;
  // A named parameter's values (is_named_sweep_parameter: "fused_two_phase", "h100" or a .toml
  // file); `values` are then their indices 0, 1, ...
  std::vector<std::string> names = {};
  // A value as the outputs write it: the name, or the number.
  std::string value_text(std::int64_t value) const;
};
// The axis of a named parameter over `names`, each checked (a strategy's name, a hardware preset
// or file that loads); throws attnres::Error naming `where`.
SweepAxis named_sweep_axis(const std::string& parameter, std::vector<std::string> names,
                           const std::string& where);
// Sets a named parameter of the scenario: the strategy ([implementation]) or the hardware.
void set_scenario_choice(ScenarioInputs& inputs, const std::string& parameter,
                         const std::string& name);

struct SweepSpec {
  std::string name;  // used for file names: tables/<name>.csv, charts/<name>.png
  std::string title;
  SweepAxis x;
  std::optional<SweepAxis> y;
  std::vector<std::string> metrics;  // cost metric keys, all with the same unit
  bool log_x = false, log_y = false;
  std::string overlay;  // "" or "paper_fig6" (the paper's block-size sweep losses)
  double threshold = std::numeric_limits<double>::quiet_NaN();  // a claim "metric < threshold"
  std::string claim;  // its words, e.g. "training overhead < 4%"
  // Settings (x values times y values) a sweep may have; more is refused with a message that
  // names the override (`attnres sweep --max-points`, a scenario sweep's `max_points`).
  std::size_t max_points = kDefaultMaxSweepPoints;
  static constexpr std::size_t kDefaultMaxSweepPoints = 2'000'000;
};

// Whether an axis of the sweep is the hardware (every setting then has hardware: the time
// metrics are available without a [hardware] table).
bool sweeps_hardware(const SweepSpec& spec);

struct SweepPoint {
  std::int64_t x = 0;
  std::optional<std::int64_t> y;
  std::vector<double> values;  // one per metric
};

struct SweepResult {
  SweepSpec spec;
  // The valid settings in sweep order; with SweepRun::keep_points off, only those a chart can
  // show (see `decimated`).
  std::vector<SweepPoint> points;
  std::vector<std::string> skipped;  // "blocks = 200: blocks N = 200 exceeds L = 128"
  std::size_t valid_count = 0;       // valid settings (all of them, kept or not)
  std::size_t skipped_count = 0;     // rejected settings (skipped lists the first 1000)
  std::string decimated;             // "" or what the kept points leave out, in words
};

// How a sweep runs: `progress` (done, total) is called now and then and returning false
// cancels (throws attnres::Cancelled); `on_point` sees every valid setting as it is evaluated
// (streamed output); with `keep_points` off, the result keeps only the points a chart can show
// (at most kChartSeries y values and kChartPoints x values per series).
struct SweepRun {
  Progress progress;
  std::function<void(const SweepPoint&)> on_point;
  bool keep_points = true;
  static constexpr std::size_t kChartSeries = 16;
  static constexpr std::size_t kChartPoints = 2000;
};

// Evaluates every setting; settings the engine rejects are listed in `skipped`. Throws
// attnres::Error when the sweep has more than spec.max_points settings.
SweepResult run_sweep(const ScenarioInputs& base, const SweepSpec& spec, const SweepRun& run);
SweepResult run_sweep(const ScenarioInputs& base, const SweepSpec& spec,
                      const Progress& progress = {});
SweepResult run_sweep(const CostInputs& base, const SweepSpec& spec, const Progress& progress = {});

// A line chart of the sweep: one series per metric (per y value for a grid); the base setting
// marked; with overlay "paper_fig6", the paper's Fig. 6 losses on the right-hand axis.
ChartSpec sweep_chart(const SweepResult& result, const ScenarioInputs& base);
ChartSpec sweep_chart(const SweepResult& result, const CostInputs& base);

// Overlay "paper_fig6" draws the paper's Fig. 6 losses, measured on its 32-sublayer ablation model
// (N = 32 / S). On a sweep of a model with another L they are not that model's losses: this
// warning says so (empty without the overlay or at L = 32). The chart's caption, the CLI's output
// and the GUI's cost explorer carry it.
std::string paper_fig6_warning(const SweepSpec& spec, const CostInputs& base);

// In words, where the sweep's claim (metric < threshold) holds and where it fails, per series;
// empty when the sweep states no claim.
std::string sweep_conclusion(const SweepResult& result);

// Comma-separated table of the sweep (header: x, [y,] metric keys): the header, one row.
std::string sweep_csv(const SweepResult& result);
std::string sweep_csv_header(const SweepSpec& spec);
std::string sweep_csv_row(const SweepSpec& spec, const SweepPoint& point);
// One point as a JSON object text {"x": .., "y": .., "metric": value, ...} (shortest round-trip
// numbers; non-finite values as null), for streamed JSON output.
std::string sweep_point_json(const SweepSpec& spec, const SweepPoint& point);

// A sweep as one JSON object, written while it runs (attnres sweep --format json and NAME.json):
// the schema (attnres.sweep), name, inputs (inputs_to_json: model, hardware, MoE, pipeline),
// axes and metrics, then one point at a time (sweep_point_json), then the counts and the
// rejected settings.
class SweepJsonWriter {
 public:
  SweepJsonWriter(std::ostream& out, const SweepSpec& spec, const nlohmann::json& inputs)
      : out_(out), spec_(spec) {
    out_ << "{\n  \"schema\": " << schema_tag("sweep").dump()
         << ",\n  \"name\": " << nlohmann::json(spec.name).dump()
         << ",\n  \"inputs\": " << inputs.dump()
         << ",\n  \"x\": " << nlohmann::json(spec.x.parameter).dump() << ",\n  \"y\": "
         << (spec.y ? nlohmann::json(spec.y->parameter) : nlohmann::json(nullptr)).dump()
         << ",\n  \"metrics\": " << nlohmann::json(spec.metrics).dump() << ",\n  \"points\": [";
  }
  void point(const SweepPoint& point) {
    out_ << (first_ ? "\n    " : ",\n    ") << sweep_point_json(spec_, point);
    first_ = false;
  }
  void end(const SweepResult& result) {
    out_ << (first_ ? "]" : "\n  ]") << ",\n  \"valid_count\": " << result.valid_count
         << ",\n  \"skipped_count\": " << result.skipped_count
         << ",\n  \"skipped\": " << nlohmann::json(result.skipped).dump() << "\n}\n";
  }

 private:
  std::ostream& out_;
  const SweepSpec& spec_;
  bool first_ = true;
};

}  // namespace attnres
