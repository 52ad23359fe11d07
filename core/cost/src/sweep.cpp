#include "attnres/sweep.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "attnres/cancel.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/paper_reference.hpp"
#include "attnres/published_quality.hpp"

namespace attnres {

Evaluation EvaluatedScenario::view() const {
  return {&cost, prefill ? &*prefill : nullptr, decode ? &*decode : nullptr,
          pipeline ? &*pipeline : nullptr, memory ? &*memory : nullptr};
}

MemorySettings scenario_memory_settings(const ScenarioInputs& in) {
  MemorySettings s;
  s.schedule = default_pipeline_schedule(in.cost.vpp);
  if (in.pipeline) s = memory_settings(*in.pipeline);
  s.strategy = in.strategy;
  if (in.hardware) s.capacity_bytes = in.hardware->memory_bytes;
  return s;
}

EvaluatedScenario evaluate_scenario(const ScenarioInputs& in, bool time, bool pipeline,
                                    bool timeline, bool memory) {
  EvaluatedScenario out{evaluate_costs(in.cost), std::nullopt, std::nullopt, std::nullopt,
                        std::nullopt};
  if (memory) out.memory = memory_per_rank(in.cost, scenario_memory_settings(in));
  if (time && in.hardware) {
    out.prefill = stack_time(in.cost, Phase::prefill, *in.hardware);
    out.decode = stack_time(in.cost, Phase::decode, *in.hardware);
  }
  if (pipeline && in.pipeline) {
    PipelineSettings settings = *in.pipeline;
    settings.model = in.cost;
    settings.strategy = in.strategy;
    if (in.hardware) settings.hardware = *in.hardware;
    settings.record_timeline = timeline;
    out.pipeline = evaluate_pipeline(settings);
  }
  return out;
}

void set_scenario_input(ScenarioInputs& in, const std::string& parameter, std::int64_t value) {
  if (is_pipeline_sweep_parameter(parameter)) {
    if (!in.pipeline) {
      throw Error("sweep parameter '" + parameter + "' needs a [pipeline] table in the scenario");
    }
    if (parameter == "microbatches") {
      // The pipeline's own bound (kMaxMicrobatches), checked here so that the message shows the
      // value as given (an int conversion first would change it).
      if (value < 1 || value > kMaxMicrobatches) {
        throw Error("microbatches m = " + std::to_string(value) + " is out of range (1 .. " +
                    std::to_string(kMaxMicrobatches) + ")");
      }
      in.pipeline->microbatches = static_cast<int>(value);
    } else {
      in.pipeline->link_bandwidth = static_cast<double>(value) * 1e9;
      in.pipeline->ideal_links = false;
    }
    return;
  }
  set_cost_input(in.cost, parameter, value);
}

std::string SweepAxis::value_text(std::int64_t value) const {
  if (names.empty()) return std::to_string(value);
  return value >= 0 && static_cast<std::size_t>(value) < names.size()
             ? names[static_cast<std::size_t>(value)]
             : std::to_string(value);
}

SweepAxis named_sweep_axis(const std::string& parameter, std::vector<std::string> names,
                           const std::string& where) {
  if (!is_named_sweep_parameter(parameter))
    throw Error(where + ": '" + parameter + "' takes numbers, not names");
  if (names.empty()) throw Error(where + ": no " + parameter + " given");
  for (const std::string& name : names) {
    if (parameter == "strategy") {
      parse_strategy(name, where);
    } else {
      try {
        load_hardware(name);
      } catch (const Error& error) {
        throw Error(where + ": " + error.what());
      }
    }
  }
  SweepAxis axis;
  axis.parameter = parameter;
  for (std::size_t i = 0; i < names.size(); ++i)
    axis.values.push_back(static_cast<std::int64_t>(i));
  axis.names = std::move(names);
  return axis;
}

bool sweeps_hardware(const SweepSpec& spec) {
  return spec.x.parameter == "hardware" || (spec.y && spec.y->parameter == "hardware");
}

void set_scenario_choice(ScenarioInputs& in, const std::string& parameter,
                         const std::string& name) {
  if (parameter == "strategy") {
    in.strategy = parse_strategy(name, "sweep strategy");
  } else if (parameter == "hardware") {
    in.hardware = load_hardware(name);
  } else {
    throw Error("sweep parameter '" + parameter + "' takes numbers, not names");
  }
}

SweepResult run_sweep(const CostInputs& base, const SweepSpec& spec, const Progress& progress) {
  return run_sweep(ScenarioInputs{base, std::nullopt, std::nullopt, Strategy::fused_two_phase},
                   spec, SweepRun{progress, {}, true});
}

SweepResult run_sweep(const ScenarioInputs& base, const SweepSpec& spec, const Progress& progress) {
  return run_sweep(base, spec, SweepRun{progress, {}, true});
}

namespace {

// Indices 0..n-1 spread evenly, at most `keep` of them (first and last included).
std::vector<bool> spread(std::size_t n, std::size_t keep) {
  std::vector<bool> kept(n, n <= keep);
  if (n <= keep) return kept;
  for (std::size_t k = 0; k < keep; ++k) kept[k * (n - 1) / (keep - 1)] = true;
  return kept;
}

constexpr std::size_t kSkippedListed = 1000;

}  // namespace

std::string sweep_parameter_problem(const std::string& parameter, bool has_pipeline) {
  const auto& known = sweep_parameters();
  if (std::find(known.begin(), known.end(), parameter) == known.end()) {
    const std::string hint = did_you_mean(parameter, known);
    return "unknown parameter '" + parameter + "'" +
           (hint.empty() ? "" : " (did you mean '" + hint + "'?)");
  }
  if (is_pipeline_sweep_parameter(parameter) && !has_pipeline) {
    return "'" + parameter + "' belongs to the pipeline simulation and needs a [pipeline] table";
  }
  return "";
}

std::string sweep_metric_problem(const std::string& key, bool has_hardware, bool has_pipeline,
                                 const std::string& first_unit) {
  const CostMetric* metric = find_cost_metric(key);
  if (!metric) {
    const std::string hint = closest_cost_metric(key);
    return "unknown metric '" + key + "'" +
           (hint.empty() ? " (attnres metrics lists the keys)" : " (did you mean '" + hint + "'?)");
  }
  if (metric->needs == CostMetric::Needs::time && !has_hardware)
    return "metric '" + key + "' needs [hardware]";
  if (metric->needs == CostMetric::Needs::pipeline && !has_pipeline) {
    return "metric '" + key + "' needs a [pipeline] table";
  }
  if (!first_unit.empty() && metric->unit != first_unit) {
    return "metric '" + key + "' is in " + metric->unit + " but the chart's first metric is in " +
           first_unit + "; put them in separate sweeps";
  }
  return "";
}

SweepResult run_sweep(const ScenarioInputs& base, const SweepSpec& spec, const SweepRun& run) {
  for (const std::string* parameter : {&spec.x.parameter, spec.y ? &spec.y->parameter : nullptr}) {
    if (!parameter) continue;
    const std::string problem = sweep_parameter_problem(*parameter, base.pipeline.has_value());
    if (!problem.empty()) throw Error("sweep '" + spec.name + "': " + problem);
  }
  std::vector<const CostMetric*> metrics;
  bool needs_time = false, needs_pipeline = false, needs_memory = false;
  const bool has_hardware = base.hardware.has_value() || sweeps_hardware(spec);
  for (const auto& key : spec.metrics) {
    const std::string problem = sweep_metric_problem(key, has_hardware, base.pipeline.has_value(),
                                                     metrics.empty() ? "" : metrics.front()->unit);
    if (!problem.empty()) throw Error("sweep '" + spec.name + "': " + problem);
    const CostMetric* metric = find_cost_metric(key);
    needs_time = needs_time || metric->needs == CostMetric::Needs::time;
    needs_pipeline = needs_pipeline || metric->needs == CostMetric::Needs::pipeline;
    needs_memory = needs_memory || metric->needs == CostMetric::Needs::memory;
    metrics.push_back(metric);
  }
  SweepResult result;
  result.spec = spec;
  const std::vector<std::int64_t> y_values = spec.y ? spec.y->values : std::vector<std::int64_t>{0};
  const std::size_t nx = spec.x.values.size(), ny = y_values.size();
  if (nx != 0 && ny > spec.max_points / nx) {
    throw Error("sweep '" + spec.name + "' has " + std::to_string(nx) +
                (spec.y ? " x " + std::to_string(ny) : "") + " settings, more than the limit of " +
                std::to_string(spec.max_points) +
                "; sweep fewer values or raise the limit (attnres sweep --max-points, a scenario "
                "sweep's max_points)");
  }
  const std::size_t total = nx * ny;
  const std::vector<bool> keep_y = spread(ny, run.keep_points ? ny : SweepRun::kChartSeries);
  const std::vector<bool> keep_x = spread(nx, run.keep_points ? nx : SweepRun::kChartPoints);
  if (!run.keep_points && (nx > SweepRun::kChartPoints || ny > SweepRun::kChartSeries)) {
    result.decimated = "the chart shows " + std::to_string(std::min(ny, SweepRun::kChartSeries)) +
                       " of " + std::to_string(ny) + " series and " +
                       std::to_string(std::min(nx, SweepRun::kChartPoints)) + " of " +
                       std::to_string(nx) +
                       " points per series, evenly spaced; the CSV and JSON have every setting";
  }
  std::size_t done = 0;
  for (std::size_t iy = 0; iy < ny; ++iy) {
    const std::int64_t y = y_values[iy];
    for (std::size_t ix = 0; ix < nx; ++ix) {
      const std::int64_t x = spec.x.values[ix];
      ScenarioInputs in = base;
      std::string setting_problem;  // a value the parameter cannot take (e.g. microbatches = 0)
      auto set = [&](const SweepAxis& axis, std::int64_t value) {
        if (axis.names.empty())
          set_scenario_input(in, axis.parameter, value);
        else
          set_scenario_choice(in, axis.parameter, axis.value_text(value));
      };
      try {
        set(spec.x, x);
        if (spec.y) set(*spec.y, y);
      } catch (const Error& error) {
        setting_problem = error.what();
      }
      auto label = [&] {
        std::string text = spec.x.parameter + " = " + spec.x.value_text(x);
        if (spec.y) text += ", " + spec.y->parameter + " = " + spec.y->value_text(y);
        return text;
      };
      auto skip = [&](const std::string& why) {
        if (result.skipped.size() < kSkippedListed) result.skipped.push_back(label() + ": " + why);
        ++result.skipped_count;
      };
      if (!setting_problem.empty()) {
        skip(setting_problem);
      } else if (auto problem = try_resolve_cost_inputs(in.cost)) {
        skip(problem->message);
      } else {
        try {
          const EvaluatedScenario evaluated =
              evaluate_scenario(in, needs_time, needs_pipeline, false, needs_memory);
          const Evaluation view = evaluated.view();
          SweepPoint point{x, spec.y ? std::optional<std::int64_t>(y) : std::nullopt, {}};
          point.values.reserve(metrics.size());
          for (const auto* metric : metrics) point.values.push_back(metric->value(view));
          ++result.valid_count;
          if (run.on_point) run.on_point(point);
          if (keep_x[ix] && keep_y[iy]) result.points.push_back(std::move(point));
        } catch (const Cancelled&) {
          throw;
        } catch (const Error& error) {  // e.g. a schedule the simulator rejects
          skip(error.what());
        }
      }
      ++done;
      if (run.progress && (done % 64 == 0 || done == total) && !run.progress(done, total)) {
        throw Cancelled("sweep '" + spec.name + "' cancelled after " + std::to_string(done) +
                        " of " + std::to_string(total) + " settings");
      }
    }
  }
  if (result.skipped_count > result.skipped.size()) {
    result.skipped.push_back("... and " +
                             std::to_string(result.skipped_count - result.skipped.size()) +
                             " more settings rejected");
  }
  return result;
}

ChartSpec sweep_chart(const SweepResult& result, const CostInputs& base) {
  return sweep_chart(result,
                     ScenarioInputs{base, std::nullopt, std::nullopt, Strategy::fused_two_phase});
}

ChartSpec sweep_chart(const SweepResult& result, const ScenarioInputs& scenario) {
  const CostInputs& base = scenario.cost;
  const SweepSpec& spec = result.spec;
  ChartSpec chart;
  chart.id = spec.name;
  chart.title = spec.title.empty() ? spec.name : spec.title;
  chart.x_label = spec.x.parameter;
  if (!spec.x.names.empty()) {
    // Named values sit at their index: the label says which is which.
    std::string names;
    for (std::size_t i = 0; i < spec.x.names.size(); ++i)
      names += (i ? ", " : "") + std::to_string(i) + " = " + spec.x.names[i];
    chart.x_label += " (" + names + ")";
  }
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
      if (y) series.name += " @ " + spec.y->parameter + "=" + spec.y->value_text(*y);
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
  std::map<std::string, std::int64_t> current = {
      {"microbatches", scenario.pipeline ? scenario.pipeline->microbatches : 0},
      {"link_bandwidth_gbps",
       scenario.pipeline && scenario.pipeline->link_bandwidth > 0
           ? static_cast<std::int64_t>(scenario.pipeline->link_bandwidth / 1e9)
           : 0}};
  for (const auto& field : cost_input_fields())
    current[std::string(field.key)] = cost_input_value(resolved, field);
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
    const auto [lowest, highest] =
        std::minmax_element(losses.points.begin(), losses.points.end(),
                            [](const auto& a, const auto& b) { return a.first < b.first; });
    baseline.points = {{lowest->first, paper::kFig6Baseline},
                       {highest->first, paper::kFig6Baseline}};
    chart.series.push_back(std::move(losses));
    chart.series.push_back(std::move(baseline));
    chart.y2_label = "validation loss (paper)";
  }
  std::string band_caption;
  if (spec.overlay == "published_band" && resolved.sublayers > kMaxQualitySublayers) {
    band_caption = "No published quality band: L = " + std::to_string(resolved.sublayers) +
                   " is beyond the " + std::to_string(kMaxQualitySublayers) +
                   " sublayers it is computed for (docs/quality.md).";
  } else if (spec.overlay == "published_band" && resolved.sublayers > 0) {
    // The published quality band (docs/quality.md) at the sweep's N (or S) values.
    std::vector<double> blocks;
    for (const auto x : spec.x.values) {
      blocks.push_back(spec.x.parameter == "block_size"
                           ? static_cast<double>(resolved.sublayers) / static_cast<double>(x)
                           : static_cast<double>(x));
    }
    const QualityBand band = quality_band(static_cast<int>(resolved.sublayers), blocks);
    for (auto& series : quality_band_series(band, spec.x.parameter == "block_size"))
      chart.series.push_back(std::move(series));
    chart.y2_label = kQualityBandAxis;
    band_caption = band.caption;
  }
  if (!std::isnan(spec.threshold)) {
    // The claim's own words when it has them ("claim: training overhead < 4%"), else the bound.
    ChartSeries line{
        spec.claim.empty() ? "claim: < " + format_number(spec.threshold) : "claim: " + spec.claim,
        {},
        ChartSeries::Style::line,
        false};
    const auto [lowest, highest] = std::minmax_element(spec.x.values.begin(), spec.x.values.end());
    line.points = {{static_cast<double>(*lowest), spec.threshold},
                   {static_cast<double>(*highest), spec.threshold}};
    chart.series.push_back(std::move(line));
  }
  chart.caption = "Sweep of " + spec.x.parameter +
                  (spec.y ? " x " + spec.y->parameter : std::string()) + "; " +
                  std::to_string(std::max(result.valid_count, result.points.size())) + " settings" +
                  (result.skipped_count == 0
                       ? ""
                       : ", " + std::to_string(result.skipped_count) + " rejected as impossible") +
                  "." + (result.decimated.empty() ? "" : " Decimated: " + result.decimated + ".");
  if (const std::string warning = paper_fig6_warning(spec, base); !warning.empty())
    chart.caption += " " + warning;
  if (!band_caption.empty()) chart.caption += " " + band_caption;
  return chart;
}

std::string sweep_conclusion(const SweepResult& result) {
  const SweepSpec& spec = result.spec;
  if (std::isnan(spec.threshold) || result.points.empty()) return "";
  std::ostringstream out;
  const std::string claim =
      spec.claim.empty() ? "metric < " + format_number(spec.threshold) : spec.claim;
  std::vector<std::optional<std::int64_t>> ys;
  for (const auto& point : result.points) {
    if (std::find(ys.begin(), ys.end(), point.y) == ys.end()) ys.push_back(point.y);
  }
  for (std::size_t m = 0; m < spec.metrics.size(); ++m) {
    for (const auto& y : ys) {
      std::vector<std::int64_t> holds, fails;
      double worst = -std::numeric_limits<double>::infinity();
      std::int64_t worst_x = 0;
      for (const auto& point : result.points) {
        if (point.y != y) continue;
        (point.values[m] < spec.threshold ? holds : fails).push_back(point.x);
        if (point.values[m] > worst) {
          worst = point.values[m];
          worst_x = point.x;
        }
      }
      auto list = [&](const std::vector<std::int64_t>& xs) {
        std::string text;
        for (auto v : xs) text += (text.empty() ? "" : ", ") + spec.x.value_text(v);
        return text;
      };
      // Named values have no order: the claim lists where it holds.
      const bool ordered = spec.x.names.empty();
      out << "- " << cost_metric_label(spec.metrics[m]);
      if (y) out << " at " << spec.y->parameter << " = " << spec.y->value_text(*y);
      out << ": \"" << claim << "\" ";
      if (fails.empty()) {
        out << "holds for every " << spec.x.parameter << " swept (" << list(holds) << ")";
      } else if (holds.empty()) {
        out << "fails for every " << spec.x.parameter << " swept (" << list(fails) << ")";
      } else if (ordered && holds.front() > fails.back()) {
        out << "holds for " << spec.x.parameter << " >= " << holds.front() << " and fails below";
      } else if (ordered && holds.back() < fails.front()) {
        out << "holds for " << spec.x.parameter << " <= " << holds.back() << " and fails above";
      } else {
        out << "holds for " << spec.x.parameter << " in {" << list(holds) << "}, fails for {"
            << list(fails) << "}";
      }
      out << "; largest value " << format_number(worst) << " at " << spec.x.parameter << " = "
          << spec.x.value_text(worst_x) << ".\n";
    }
  }
  return out.str();
}

std::string sweep_csv_header(const SweepSpec& spec) {
  std::string text = spec.x.parameter;
  if (spec.y) text += "," + spec.y->parameter;
  for (const auto& key : spec.metrics) text += "," + key;
  return text + "\n";
}

namespace {

// The shortest text that reads back as the same double; non-finite values as `missing`.
std::string shortest(double value, const char* missing) {
  if (!std::isfinite(value)) return missing;
  char buffer[64];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return error == std::errc() ? std::string(buffer, end) : std::string(missing);
}

}  // namespace

std::string sweep_csv_row(const SweepSpec& spec, const SweepPoint& point) {
  std::string text = spec.x.value_text(point.x);
  if (point.y && spec.y) text.append(",").append(spec.y->value_text(*point.y));
  for (double value : point.values) text.append(",").append(shortest(value, ""));
  text.push_back('\n');
  return text;
}

std::string sweep_csv(const SweepResult& result) {
  std::string text = sweep_csv_header(result.spec);
  for (const auto& point : result.points) text += sweep_csv_row(result.spec, point);
  return text;
}

std::string sweep_point_json(const SweepSpec& spec, const SweepPoint& point) {
  auto number = [](double value) { return shortest(value, "null"); };
  // A named value as a JSON string, a number as itself.
  auto value = [](const SweepAxis& axis, std::int64_t v) {
    return axis.names.empty() ? std::to_string(v) : nlohmann::json(axis.value_text(v)).dump();
  };
  std::string text = "{" + nlohmann::json(spec.x.parameter).dump() + ": " + value(spec.x, point.x);
  if (point.y && spec.y)
    text += ", " + nlohmann::json(spec.y->parameter).dump() + ": " + value(*spec.y, *point.y);
  for (std::size_t m = 0; m < point.values.size() && m < spec.metrics.size(); ++m) {
    text += ", " + nlohmann::json(spec.metrics[m]).dump() + ": " + number(point.values[m]);
  }
  return text + "}";
}

}  // namespace attnres
