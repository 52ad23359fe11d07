// Sweeps of the cost engine over one parameter or a grid of two (e.g. N over the divisors of L,
// an L x N grid, P x V), recording any metric of the catalogue (cost_metrics.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "attnres/chart_spec.hpp"
#include "attnres/cost.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/hardware.hpp"
#include "attnres/pipeline.hpp"
#include "attnres/time_model.hpp"

namespace attnres {

// Everything a scenario evaluates: the cost inputs always; hardware (and MoE) for the time model;
// pipeline settings for the schedule simulation (their model, hardware and MoE are taken from
// the fields here at evaluation).
struct ScenarioInputs {
  CostInputs cost;
  std::optional<Hardware> hardware;
  MoeShape moe;
  std::optional<PipelineSettings> pipeline;
};

// The results the metrics read.
struct EvaluatedScenario {
  CostReport cost;
  std::optional<StackTime> prefill, decode;
  std::optional<PipelineReport> pipeline;
  Evaluation view() const;
};
// `inputs.cost` must be resolved. Time and pipeline parts are evaluated when asked for and
// available; the pipeline timeline is recorded when `timeline` is set.
EvaluatedScenario evaluate_scenario(const ScenarioInputs& inputs, bool time, bool pipeline, bool timeline);

// Names of the parameters a sweep may vary: the CostInputs fields, plus microbatches and
// link_bandwidth_gbps of the pipeline.
const std::vector<std::string>& sweep_parameters();
// Sets one field; setting blocks clears block_size (and the reverse), sublayers clears layers.
// Throws attnres::Error on an unknown name.
void set_cost_input(CostInputs& inputs, const std::string& parameter, std::int64_t value);
void set_scenario_input(ScenarioInputs& inputs, const std::string& parameter, std::int64_t value);

struct SweepAxis {
  std::string parameter;
  std::vector<std::int64_t> values;
};

struct SweepSpec {
  std::string name;  // used for file names: tables/<name>.csv, charts/<name>.png
  std::string title;
  SweepAxis x;
  std::optional<SweepAxis> y;
  std::vector<std::string> metrics;  // cost metric keys, all with the same unit
  bool log_x = false, log_y = false;
  std::string overlay;  // "" or "paper_fig6" (the paper's block-size sweep losses)
  double threshold = std::numeric_limits<double>::quiet_NaN();  // a claim "metric < threshold"
  std::string claim;    // its words, e.g. "training overhead < 4%"
};

struct SweepPoint {
  std::int64_t x = 0;
  std::optional<std::int64_t> y;
  std::vector<double> values;  // one per metric
};

struct SweepResult {
  SweepSpec spec;
  std::vector<SweepPoint> points;             // the valid settings, in sweep order
  std::vector<std::string> skipped;           // "blocks = 200: blocks N = 200 exceeds L = 128"
};

// Evaluates every setting; settings the engine rejects are listed in `skipped`. `progress`
// (done, total) is called now and then; returning false cancels (throws attnres::Error).
SweepResult run_sweep(const ScenarioInputs& base, const SweepSpec& spec,
                      const std::function<bool(std::size_t, std::size_t)>& progress = {});
SweepResult run_sweep(const CostInputs& base, const SweepSpec& spec,
                      const std::function<bool(std::size_t, std::size_t)>& progress = {});

// Divisors of n in increasing order.
std::vector<std::int64_t> divisors(std::int64_t n);

// A line chart of the sweep: one series per metric (per y value for a grid); the base setting
// marked; with overlay "paper_fig6", the paper's Fig. 6 losses on the right-hand axis.
ChartSpec sweep_chart(const SweepResult& result, const ScenarioInputs& base);
ChartSpec sweep_chart(const SweepResult& result, const CostInputs& base);

// In words, where the sweep's claim (metric < threshold) holds and where it fails, per series;
// empty when the sweep states no claim.
std::string sweep_conclusion(const SweepResult& result);

// Comma-separated table of the sweep (header: x, [y,] metric keys).
std::string sweep_csv(const SweepResult& result);

}  // namespace attnres
