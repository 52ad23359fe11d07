// The plan: a grid of settings against budgets (plan.hpp, docs/math.md §3.9).
#include "attnres/plan.hpp"

#include <algorithm>
#include <cmath>

#include "attnres/cost_input_fields.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"

namespace attnres {

namespace {

// The block count the paper recommends (N ≈ 8 recovers most of Full AttnRes's gain).
constexpr std::int64_t kPaperBlocks = 8;

std::string percent(double fraction) {
  return format_number(std::round(fraction * 1e4) / 1e2) + " %";
}

std::string gigabytes(double bytes) {
  return format_number(std::round(bytes / 1e8) / 10) + " GB";
}

template <typename T>
std::vector<T> or_base(const std::vector<T>& values, T base) {
  return values.empty() ? std::vector<T>{base} : values;
}

// "t = 8, c = 1, e = 8, P = 8, V = 2, D = 4, fused_two_phase on h100"
std::string describe(const PlanCandidate& c) {
  return "t = " + std::to_string(c.tp) + ", c = " + std::to_string(c.cp) +
         ", e = " + std::to_string(c.ep) + ", P = " + std::to_string(c.pp) +
         ", V = " + std::to_string(c.vpp) + ", D = " + std::to_string(c.dp) + ", " +
         to_string(c.strategy) + " on " + c.hardware;
}

std::string measures(const PlanCandidate& c) {
  std::string out = "overhead " + percent(c.overhead_fraction) + ", step " +
                    format_number(std::round(c.step_seconds * 1e4) / 1e4) + " s, " +
                    gigabytes(c.peak_memory_bytes);
  if (c.capacity_bytes > 0) out += " of " + gigabytes(c.capacity_bytes);
  return out + " per rank";
}

void check_budgets(PlanCandidate& c, const PlanBudgets& b) {
  if (!std::isnan(b.max_overhead_fraction) && c.overhead_fraction > b.max_overhead_fraction) {
    c.failures.push_back("AttnRes overhead " + percent(c.overhead_fraction) + " > " +
                         percent(b.max_overhead_fraction));
  }
  if (b.must_fit && !c.fits) c.failures.push_back(c.fit + " on the peak rank");
  if (!std::isnan(b.max_pipeline_bytes) && c.pipeline_bytes > b.max_pipeline_bytes) {
    c.failures.push_back("pipeline traffic " + gigabytes(c.pipeline_bytes) + " per step > " +
                         gigabytes(b.max_pipeline_bytes));
  }
  if (!std::isnan(b.max_step_seconds) && c.step_seconds > b.max_step_seconds) {
    c.failures.push_back("step " + format_number(c.step_seconds) + " s > " +
                         format_number(b.max_step_seconds) + " s");
  }
}

// Evaluates one setting into `c` (c.invalid says why the engine refused it).
void evaluate_candidate(const PipelineSettings& base, const Hardware& hardware, PlanCandidate& c) {
  PipelineSettings s = base;
  s.record_timeline = false;
  s.progress = {};
  s.hardware = hardware;
  s.strategy = c.strategy;
  CostInputs in = base.model;
  if (c.pp != in.pp || c.vpp != in.vpp) in.stage_layers.clear();  // listed for other chunks
  if (c.blocks != in.blocks) {
    in.block_sizes.clear();  // a listed layout fixes its own N
    set_cost_input(in, "blocks", c.blocks);
  }
  in.tp = c.tp;
  in.cp = c.cp;
  in.ep = c.ep;
  in.pp = c.pp;
  in.vpp = c.vpp;
  in.dp = c.dp;
  if (auto problem = try_resolve_cost_inputs(in)) {
    c.invalid = problem->field + ": " + problem->message;
    return;
  }
  s.model = in;
  if (in.vpp != base.model.vpp) s.schedule = default_pipeline_schedule(in.vpp);
  if (auto problem = pipeline_settings_problem(s)) {
    c.invalid = problem->field + ": " + problem->message;
    return;
  }
  try {
    const PipelineReport report = evaluate_pipeline(s);
    c.overhead_fraction = report.attnres_overhead_fraction;
    c.step_seconds = report.step_time_s;
    c.peak_memory_bytes = simulated_peak_bytes(report);
    c.capacity_bytes = hardware.memory_bytes;
    const RankMemory& peak = largest_rank(report.memory);
    c.fits = peak.fits();
    c.fit = fit_verdict(peak);
    c.pipeline_bytes = report.attnres.transferred_bytes;
    c.stage_warning = report.stage_warning;
  } catch (const Cancelled&) {
    throw;
  } catch (const Error& error) {
    c.invalid = error.what();
  }
}

// The index among `indices` that is best for one N: the fastest that meets the budgets, else the
// one with the fewest failures (then the lowest overhead).
std::size_t best_of(const std::vector<PlanCandidate>& all,
                    const std::vector<std::size_t>& indices) {
  return *std::min_element(indices.begin(), indices.end(), [&](std::size_t a, std::size_t b) {
    const PlanCandidate &x = all[a], &y = all[b];
    if (x.meets() != y.meets()) return x.meets();
    if (!x.meets() && x.failures.size() != y.failures.size())
      return x.failures.size() < y.failures.size();
    if (x.meets()) return x.step_seconds < y.step_seconds;
    return x.overhead_fraction < y.overhead_fraction;
  });
}

}  // namespace

std::vector<std::int64_t> plan_default_blocks(std::int64_t sublayers) {
  std::vector<std::int64_t> out;
  if (sublayers < 1) return out;  // no model (a scenario without [model])
  for (std::int64_t n = 1; n <= sublayers; n *= 2) {
    const std::int64_t size = (sublayers + n - 1) / n;
    const std::int64_t blocks = (sublayers + size - 1) / size;
    if (out.empty() || out.back() != blocks) out.push_back(blocks);
    if (n > sublayers / 2) break;
  }
  if (out.back() != sublayers) out.push_back(sublayers);
  return out;
}

std::size_t PlanGrid::size() const {
  auto n = [](std::size_t count) { return std::max<std::size_t>(count, 1); };
  return n(blocks.size()) * n(tp.size()) * n(cp.size()) * n(ep.size()) * n(pp.size()) *
         n(vpp.size()) * n(strategies.size()) * n(hardware.size());
}

std::string plan_budgets_problem(const PlanBudgets& b) {
  auto bad = [](double v) { return !std::isnan(v) && !(v > 0 && std::isfinite(v)); };
  if (bad(b.max_overhead_fraction) || b.max_overhead_fraction >= 10)
    return "the overhead budget must be a percentage > 0 and below 1000";
  if (bad(b.max_pipeline_bytes)) return "the pipeline traffic budget must be > 0";
  if (bad(b.max_step_seconds)) return "the step time budget must be > 0 seconds";
  return "";
}

std::string plan_grid_problem(const PlanGrid& grid) {
  for (const auto& [values, name] :
       {std::pair{&grid.blocks, "blocks"}, std::pair{&grid.tp, "tp"}, std::pair{&grid.cp, "cp"},
        std::pair{&grid.ep, "ep"}, std::pair{&grid.pp, "pp"}, std::pair{&grid.vpp, "vpp"}}) {
    for (const std::int64_t v : *values) {
      if (v < 1) return std::string(name) + " values must be >= 1, got " + std::to_string(v);
    }
  }
  if (grid.gpus < 0) return "gpus must be >= 1, got " + std::to_string(grid.gpus);
  // Counted in double: a product of lists could overflow size_t.
  double settings = 1;
  for (std::size_t count :
       {grid.blocks.size(), grid.tp.size(), grid.cp.size(), grid.ep.size(), grid.pp.size(),
        grid.vpp.size(), grid.strategies.size(), grid.hardware.size()})
    settings *= static_cast<double>(std::max<std::size_t>(count, 1));
  if (settings > static_cast<double>(kMaxPlanSettings)) {
    return "the grid has " + format_number(settings) + " settings; at most " +
           std::to_string(kMaxPlanSettings) + " (each is four pipeline simulations)";
  }
  return "";
}

bool plan_dominates(const PlanCandidate& a, const PlanCandidate& b) {
  const bool no_worse = a.overhead_fraction <= b.overhead_fraction &&
                        a.step_seconds <= b.step_seconds &&
                        a.peak_memory_bytes <= b.peak_memory_bytes && a.blocks >= b.blocks;
  const bool better = a.overhead_fraction < b.overhead_fraction ||
                      a.step_seconds < b.step_seconds ||
                      a.peak_memory_bytes < b.peak_memory_bytes || a.blocks > b.blocks;
  return no_worse && better;
}

PlanResult make_plan(const PipelineSettings& base, const PlanGrid& grid, const PlanBudgets& budgets,
                     const Progress& progress) {
  if (const std::string problem = plan_grid_problem(grid); !problem.empty())
    throw Error("plan: " + problem);
  if (const std::string problem = plan_budgets_problem(budgets); !problem.empty())
    throw Error("plan: " + problem);
  PlanResult result;
  result.budgets = budgets;
  const CostInputs& m = base.model;
  const auto hardware = or_base(grid.hardware, base.hardware);
  const auto strategies = or_base(grid.strategies, base.strategy);
  const auto pps = or_base(grid.pp, m.pp), vpps = or_base(grid.vpp, m.vpp);
  const auto tps = or_base(grid.tp, m.tp), cps = or_base(grid.cp, m.cp),
             eps = or_base(grid.ep, m.ep);
  const auto blocks = or_base(grid.blocks, m.blocks);
  const std::size_t total = grid.size();
  for (const Hardware& hw : hardware)
    for (const Strategy strategy : strategies)
      for (const std::int64_t pp : pps)
        for (const std::int64_t vpp : vpps)
          for (const std::int64_t tp : tps)
            for (const std::int64_t cp : cps)
              for (const std::int64_t ep : eps)
                for (const std::int64_t n : blocks) {
                  PlanCandidate c;
                  c.blocks = n;
                  c.tp = tp;
                  c.cp = cp;
                  c.ep = ep;
                  c.pp = pp;
                  c.vpp = vpp;
                  c.dp = m.dp;
                  c.strategy = strategy;
                  c.hardware = hw.name;
                  if (grid.gpus > 0) {
                    const std::int64_t stage = tp * cp * pp;
                    if (grid.gpus % stage != 0) {
                      c.invalid = "t·c·P = " + std::to_string(stage) + " does not divide the " +
                                  std::to_string(grid.gpus) + " GPUs";
                    } else {
                      c.dp = grid.gpus / stage;
                    }
                  }
                  if (c.invalid.empty()) evaluate_candidate(base, hw, c);
                  if (c.invalid.empty()) check_budgets(c, budgets);
                  result.candidates.push_back(std::move(c));
                  if (progress && !progress(result.candidates.size(), total))
                    throw Cancelled("plan cancelled");
                }
  auto& all = result.candidates;
  for (auto& c : all) {
    if (!c.meets()) continue;
    c.pareto = std::none_of(all.begin(), all.end(), [&](const PlanCandidate& other) {
      return other.meets() && plan_dominates(other, c);
    });
  }
  // Per N: the best setting and what it shows.
  std::vector<std::int64_t> ns;
  for (const auto& c : all) {
    if (std::find(ns.begin(), ns.end(), c.blocks) == ns.end()) ns.push_back(c.blocks);
  }
  std::sort(ns.begin(), ns.end());
  std::vector<std::int64_t> meeting;
  for (const std::int64_t n : ns) {
    std::vector<std::size_t> valid;
    std::string invalid;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (all[i].blocks != n) continue;
      if (all[i].invalid.empty())
        valid.push_back(i);
      else if (invalid.empty())
        invalid = all[i].invalid;
    }
    const std::string head = "N = " + std::to_string(n) + ": ";
    if (valid.empty()) {
      result.by_blocks.push_back(head + "no setting is possible (" + invalid + ")");
      continue;
    }
    const std::size_t best = best_of(all, valid);
    const PlanCandidate& c = all[best];
    if (c.meets()) {
      meeting.push_back(n);
      if (!result.recommended || all[*result.recommended].blocks < n ||
          (all[*result.recommended].blocks == n &&
           all[*result.recommended].step_seconds > c.step_seconds))
        result.recommended = best;
      result.by_blocks.push_back(head + "meets every budget; fastest " + describe(c) + ": " +
                                 measures(c));
    } else {
      std::string why;
      for (std::size_t k = 0; k < c.failures.size(); ++k) why += (k ? "; " : "") + c.failures[k];
      result.by_blocks.push_back(head + "no setting meets the budgets; closest " + describe(c) +
                                 ": " + why);
    }
  }
  if (result.recommended) {
    const PlanCandidate& c = all[*result.recommended];
    std::string list;
    for (std::size_t k = 0; k < meeting.size(); ++k)
      list += (k ? ", " : "") + std::to_string(meeting[k]);
    result.summary = "N = " + list + " meet" + (meeting.size() == 1 ? "s" : "") +
                     " every budget; recommended N = " + std::to_string(c.blocks) +
                     " (the most blocks, closest to Full AttnRes) with " + describe(c) + ": " +
                     measures(c) + ".";
    // Quality per block is not modelled: say what the paper's choice costs beside it.
    if (c.blocks > kPaperBlocks &&
        std::find(meeting.begin(), meeting.end(), kPaperBlocks) != meeting.end()) {
      std::vector<std::size_t> eight;
      for (std::size_t i = 0; i < all.size(); ++i)
        if (all[i].blocks == kPaperBlocks && all[i].meets()) eight.push_back(i);
      result.summary += " The paper finds N = 8 recovers most of Full AttnRes's gain; it costs " +
                        percent(all[best_of(all, eight)].overhead_fraction) + " here.";
    }
  } else {
    result.summary = "No setting of the grid meets every budget; see why per N below.";
  }
  return result;
}

}  // namespace attnres
