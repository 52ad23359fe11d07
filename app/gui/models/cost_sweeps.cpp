// The cost explorer's sweeps and tables (cost_sweeps.hpp).
#include "cost_sweeps.hpp"

#include <algorithm>
#include <functional>

#include "attnres/cost.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/format.hpp"
#include "attnres/published_quality.hpp"
#include "attnres/strategy.hpp"
#include "attnres/sweep.hpp"
#include "model_state.hpp"

namespace attnres::gui {

namespace {

// The io_multiples_of_d metric that draws a named scheme.
std::string scheme_io_metric(const std::string& name) {
  if (name == "full") return "io_multiples_of_d.full_two_phase";
  if (name == "block") return "io_multiples_of_d.block_two_phase";
  return "io_multiples_of_d." + name;
}

}  // namespace

CostSweepResult cost_explorer_sweeps(const CostInputs& in, const Hardware& hw,
                                     const std::string& scheme_a, const std::string& scheme_b,
                                     const std::string& quality, const Progress& progress) {
  // Every N that some equal block size produces.
  std::vector<std::int64_t> ns;
  for (std::int64_t s = in.sublayers; s >= 1; --s) {
    const std::int64_t n = block_count(in.sublayers, s);
    if (ns.empty() || ns.back() != n) ns.push_back(n);
  }
  std::size_t index = 0;
  auto sweep = [&](const std::string& id, const std::string& title,
                   std::vector<std::string> metrics, bool log_y, bool overlay) {
    SweepSpec spec;
    spec.name = id;
    spec.title = title;
    spec.x = {"blocks", ns};
    spec.metrics = std::move(metrics);
    spec.log_x = true;
    spec.log_y = log_y;
    spec.overlay = overlay ? quality : "";
    return sweep_chart(run_sweep(in, spec, step(progress, index++, 4)), in);
  };
  // The I/O chart: the paper's rows, plus schemes A and B when they are others.
  std::vector<std::string> io_metrics = {
      "io_multiples_of_d.standard", "io_multiples_of_d.block_two_phase",
      "io_multiples_of_d.full_two_phase", "io_multiples_of_d.mhc"};
  for (const auto& name : {scheme_a, scheme_b}) {
    const std::string metric = scheme_io_metric(name);
    if (std::find(io_metrics.begin(), io_metrics.end(), metric) == io_metrics.end())
      io_metrics.push_back(metric);
  }
  std::vector<ChartSpec> specs = {
      sweep("cost_io", "Residual I/O per sublayer against N", io_metrics, true, true),
      sweep("cost_history", "Stored depth history against N",
            {"history_vectors_per_token.block", "history_vectors_per_token.full"}, true, true),
      sweep("cost_prefill", "Prefill block history against N",
            {"prefill_history_gb.total", "prefill_history_gb.per_device",
             "prefill_history_gb.per_device_chunked"},
            true, false),
      sweep("cost_pipeline", "Pipeline traffic against N",
            {"pipeline_exact_elements_per_token.naive", "pipeline_exact_elements_per_token.cached",
             "pipeline_exact_elements_per_token.cached_own"},
            false, true)};
  // The current numbers, with units.
  const CostReport report = evaluate_costs(in);
  const StackTime prefill = stack_time(in, Phase::prefill, hw),
                  decode = stack_time(in, Phase::decode, hw);
  const Evaluation evaluation{&report, &prefill, &decode, nullptr};
  std::vector<std::array<std::string, 3>> rows;
  for (const auto& metric : cost_metrics()) {
    if (metric.needs == CostMetric::Needs::pipeline || metric.needs == CostMetric::Needs::memory)
      continue;
    if (metric.key.find("reads_") != std::string::npos ||
        metric.key.find("writes_") != std::string::npos)
      continue;
    rows.push_back({metric.key, format_number(metric.value(evaluation)), metric.unit});
  }
  // Schemes A and B side by side.
  const SchemeCost a = scheme_cost(named_scheme(scheme_a, in), in),
                   b = scheme_cost(named_scheme(scheme_b, in), in);
  const std::vector<std::array<std::string, 3>> compared = scheme_comparison_rows(a, b, in);
  // Under the charts: the Fig. 6 caveat off L = 32, or the band's sources and marks.
  SweepSpec overlay;
  overlay.overlay = quality;
  std::string warning = paper_fig6_warning(overlay, in);
  if (quality == "published_band") {
    std::vector<double> blocks(ns.begin(), ns.end());
    warning = quality_band(static_cast<int>(in.sublayers), blocks).caption;
  }
  return {std::move(specs), std::move(rows), compared, warning};
}

std::vector<std::array<std::string, 3>> scheme_comparison_rows(const SchemeCost& a,
                                                               const SchemeCost& b,
                                                               const CostInputs& in) {
  const double d = static_cast<double>(in.d_model);
  std::vector<std::array<std::string, 3>> rows;
  auto add = [&rows, &a, &b](const std::string& quantity,
                             const std::function<std::string(const SchemeCost&)>& get) {
    rows.push_back({quantity, get(a), get(b)});
  };
  add("scheme", [](const SchemeCost& c) { return c.spec; });
  add("description", [](const SchemeCost& c) { return c.description; });
  add("I/O per sublayer (x d)",
      [d](const SchemeCost& c) { return format_number(c.io.total() / d); });
  add("I/O formula", [](const SchemeCost& c) { return c.io_formula; });
  add("I/O reads / writes (x d)", [d](const SchemeCost& c) {
    return format_number(c.io.reads / d) + " / " + format_number(c.io.writes / d);
  });
  add("I/O schedule", [](const SchemeCost& c) { return c.io_schedule; });
  add("history (vectors/token)", [](const SchemeCost& c) {
    return std::to_string(c.history_vectors) + " = " + c.history_formula;
  });
  add("history (bytes/token)", [](const SchemeCost& c) { return format_number(c.history_bytes); });
  add("params (whole model)", [](const SchemeCost& c) { return format_number(c.params); });
  add("params formula", [](const SchemeCost& c) { return c.params_formula; });
  add("mixing FLOP/token", [](const SchemeCost& c) { return format_number(c.mixing_flops); });
  add("mixing FLOP/token/sublayer",
      [](const SchemeCost& c) { return format_number(c.mixing_flops_per_sublayer); });
  add("mixing FLOPs formula", [](const SchemeCost& c) { return c.flops_formula; });
  add("two-phase", [](const SchemeCost& c) { return std::string(c.two_phase ? "yes" : "no"); });
  add("two-phase reason", [](const SchemeCost& c) { return c.two_phase_reason; });
  return rows;
}

}  // namespace attnres::gui
