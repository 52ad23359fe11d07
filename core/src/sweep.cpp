#include "attnres/sweep.hpp"

#include <cmath>
#include <algorithm>
#include <map>
#include <sstream>

#include "attnres/cost_metrics.hpp"
#include "attnres/error.hpp"
#include "attnres/paper_reference.hpp"

namespace attnres {

const std::vector<std::string>& sweep_parameters() {
  static const std::vector<std::string> names = {"sublayers", "layers", "blocks", "block_size",
                                                 "d_model", "streams", "ffn", "tokens", "batch",
                                                 "seq_shards", "chunk", "pp", "vpp"};
  return names;
}

void set_cost_input(CostInputs& in, const std::string& parameter, std::int64_t value) {
  if (parameter == "sublayers") {
    in.sublayers = value;
    in.layers = 0;
  } else if (parameter == "layers") {
    in.layers = value;
    in.sublayers = 0;
  } else if (parameter == "blocks") {
    in.blocks = value;
    in.block_size = 0;
  } else if (parameter == "block_size") {
    in.block_size = value;
    in.blocks = 0;
  } else if (parameter == "d_model") {
    in.d_model = value;
  } else if (parameter == "streams") {
    in.streams = value;
  } else if (parameter == "ffn") {
    in.ffn = value;
  } else if (parameter == "tokens") {
    in.tokens = value;
  } else if (parameter == "batch") {
    in.batch = value;
  } else if (parameter == "seq_shards") {
    in.seq_shards = value;
  } else if (parameter == "chunk") {
    in.chunk = value;
  } else if (parameter == "pp") {
    in.pp = value;
  } else if (parameter == "vpp") {
    in.vpp = value;
  } else {
    const std::string hint = did_you_mean(parameter, sweep_parameters());
    throw Error("unknown sweep parameter '" + parameter + "'" +
                (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
  }
}

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> small, large;
  for (std::int64_t k = 1; k * k <= n; ++k) {
    if (n % k == 0) {
      small.push_back(k);
      if (k != n / k) large.push_back(n / k);
    }
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

SweepResult run_sweep(const CostInputs& base, const SweepSpec& spec,
                      const std::function<bool(std::size_t, std::size_t)>& progress) {
  std::vector<const CostMetric*> metrics;
  for (const auto& key : spec.metrics) {
    const CostMetric* metric = find_cost_metric(key);
    if (!metric) {
      const std::string hint = closest_cost_metric(key);
      throw Error("sweep '" + spec.name + "': unknown metric '" + key + "'" +
                  (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
    }
    metrics.push_back(metric);
  }
  SweepResult result;
  result.spec = spec;
  const std::vector<std::int64_t> y_values =
      spec.y ? spec.y->values : std::vector<std::int64_t>{0};
  const std::size_t total = spec.x.values.size() * y_values.size();
  std::size_t done = 0;
  for (std::int64_t y : y_values) {
    for (std::int64_t x : spec.x.values) {
      CostInputs in = base;
      set_cost_input(in, spec.x.parameter, x);
      if (spec.y) set_cost_input(in, spec.y->parameter, y);
      auto label = [&] {
        std::string text = spec.x.parameter + " = " + std::to_string(x);
        if (spec.y) text += ", " + spec.y->parameter + " = " + std::to_string(y);
        return text;
      };
      if (auto problem = try_resolve_cost_inputs(in)) {
        result.skipped.push_back(label() + ": " + problem->message);
      } else {
        const CostReport report = evaluate_costs(in);
        SweepPoint point{x, spec.y ? std::optional<std::int64_t>(y) : std::nullopt, {}};
        for (const auto* metric : metrics) point.values.push_back(metric->value(report));
        result.points.push_back(std::move(point));
      }
      ++done;
      if (progress && (done % 1024 == 0 || done == total) && !progress(done, total)) {
        throw Error("sweep '" + spec.name + "' cancelled after " + std::to_string(done) + " of " +
                    std::to_string(total) + " settings");
      }
    }
  }
  return result;
}

ChartSpec sweep_chart(const SweepResult& result, const CostInputs& base) {
  const SweepSpec& spec = result.spec;
  ChartSpec chart;
  chart.id = spec.name;
  chart.title = spec.title.empty() ? spec.name : spec.title;
  chart.x_label = spec.x.parameter;
  chart.y_label = spec.metrics.empty() ? "" : cost_metric_axis(spec.metrics.front());
  chart.log_x = spec.log_x;
  chart.log_y = spec.log_y;
  const std::vector<std::optional<std::int64_t>> ys = [&] {
    std::vector<std::optional<std::int64_t>> out;
    if (!spec.y) return std::vector<std::optional<std::int64_t>>{std::nullopt};
    for (auto v : spec.y->values) out.emplace_back(v);
    return out;
  }();
  for (std::size_t m = 0; m < spec.metrics.size(); ++m) {
    for (const auto& y : ys) {
      ChartSeries series;
      series.name = cost_metric_label(spec.metrics[m]);
      if (y) series.name += " @ " + spec.y->parameter + "=" + std::to_string(*y);
      for (const auto& point : result.points) {
        if (point.y == y) {
          series.points.emplace_back(static_cast<double>(point.x), point.values[m]);
        }
      }
      if (!series.points.empty()) chart.series.push_back(std::move(series));
    }
  }
  // Mark the scenario's own setting of the swept parameter.
  CostInputs resolved = base;
  try {
    resolved = resolve_cost_inputs(base);
  } catch (const Error&) {
  }
  const std::map<std::string, std::int64_t> current = {
      {"sublayers", resolved.sublayers}, {"layers", resolved.sublayers / 2},
      {"blocks", resolved.blocks},       {"block_size", resolved.block_size},
      {"d_model", resolved.d_model},     {"streams", resolved.streams},
      {"ffn", resolved.ffn},             {"tokens", resolved.tokens},
      {"batch", resolved.batch},         {"seq_shards", resolved.seq_shards},
      {"chunk", resolved.chunk},         {"pp", resolved.pp},
      {"vpp", resolved.vpp}};
  if (auto it = current.find(spec.x.parameter); it != current.end() && it->second > 0) {
    chart.marker_x = static_cast<double>(it->second);
    chart.marker_label = "scenario: " + spec.x.parameter + " = " + std::to_string(it->second);
  }
  if (spec.overlay == "paper_fig6") {
    ChartSeries losses{"paper Fig. 6 loss (L = 32)", {}, ChartSeries::Style::scatter, true};
    for (const auto& point : paper::kFig6BlockSweep) {
      const double x = spec.x.parameter == "block_size"
                           ? point.block_size
                           : static_cast<double>(paper::kFig6Sublayers / point.block_size);
      losses.points.emplace_back(x, point.loss);
    }
    ChartSeries baseline{"paper baseline loss 1.766", {}, ChartSeries::Style::line, true};
    const auto [lowest, highest] = std::minmax_element(
        losses.points.begin(), losses.points.end(),
        [](const auto& a, const auto& b) { return a.first < b.first; });
    baseline.points = {{lowest->first, paper::kFig6Baseline}, {highest->first, paper::kFig6Baseline}};
    chart.series.push_back(std::move(losses));
    chart.series.push_back(std::move(baseline));
    chart.y2_label = "validation loss (paper)";
  }
  chart.caption = "Sweep of " + spec.x.parameter +
                  (spec.y ? " x " + spec.y->parameter : std::string()) + "; " +
                  std::to_string(result.points.size()) + " settings" +
                  (result.skipped.empty() ? "" : ", " + std::to_string(result.skipped.size()) +
                                                     " rejected as impossible") + ".";
  return chart;
}

std::string sweep_csv(const SweepResult& result) {
  std::ostringstream out;
  out.precision(12);
  out << result.spec.x.parameter;
  if (result.spec.y) out << "," << result.spec.y->parameter;
  for (const auto& key : result.spec.metrics) out << "," << key;
  out << "\n";
  for (const auto& point : result.points) {
    out << point.x;
    if (point.y) out << "," << *point.y;
    for (double value : point.values) out << "," << value;
    out << "\n";
  }
  return out.str();
}

}  // namespace attnres
