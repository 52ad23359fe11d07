// Sweeps of the cost engine over one parameter or a grid of two (e.g. N over the divisors of L,
// an L x N grid, P x V), recording any metric of the catalogue (cost_metrics.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "attnres/chart_spec.hpp"
#include "attnres/cost.hpp"

namespace attnres {

// Names of the CostInputs fields a sweep may vary.
const std::vector<std::string>& sweep_parameters();
// Sets one field; setting blocks clears block_size (and the reverse), sublayers clears layers.
// Throws attnres::Error on an unknown name.
void set_cost_input(CostInputs& inputs, const std::string& parameter, std::int64_t value);

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
SweepResult run_sweep(const CostInputs& base, const SweepSpec& spec,
                      const std::function<bool(std::size_t, std::size_t)>& progress = {});

// Divisors of n in increasing order.
std::vector<std::int64_t> divisors(std::int64_t n);

// A line chart of the sweep: one series per metric (per y value for a grid); the base setting
// marked; with overlay "paper_fig6", the paper's Fig. 6 losses on the right-hand axis.
ChartSpec sweep_chart(const SweepResult& result, const CostInputs& base);

// Comma-separated table of the sweep (header: x, [y,] metric keys).
std::string sweep_csv(const SweepResult& result);

}  // namespace attnres
