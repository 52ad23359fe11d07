// The step and decision sections of a report (docs/math.md §3.8–3.9): one simulated training step
// split into its parts, the three overhead numbers of the tool side by side, and the plan — the
// settings of a grid against the user's budgets, the Pareto set and why the others fail.
#include <cmath>

#include "attnres/report.hpp"
#include "report_parts.hpp"

namespace attnres {

using detail::num;

ReportTable step_table(const PipelineReport& p) {
  ReportTable t =
      typed_table("step", "One training step, its parts (busiest rank)",
                  {{"part", "part", Shown::text},
                   {"what", "what", Shown::text},
                   {"attnres_seconds", "AttnRes (s)", Shown::number},
                   {"standard_seconds", "standard (s)", Shown::number},
                   {"difference_fraction", "difference (% of standard step)", Shown::percent}});
  const StepParts& a = p.step_attnres;
  const StepParts& b = p.step_standard;
  const CommOverlap& o = p.settings.comm_overlap;
  const double standard = b.total();
  auto hidden = [&](CommGroup g) {
    return o.of(g) ? " (overlapped: only what exceeds the chunk's compute)" : " (exposed)";
  };
  auto row = [&](const char* part, const std::string& what, double x, double y) {
    add_row(t, {part, what, x, y, standard > 0 ? (x - y) / standard : 0.0});
  };
  row("attention_mlp", "attention and MLP, forward + backward, ÷ t·c", a.attention_mlp,
      b.attention_mlp);
  row("residual",
      "residual mechanism: " + to_string(p.settings.strategy) + " kernels (standard: one add)",
      a.residual, b.residual);
  // The parallel groups the setting has (a degree of 1 moves nothing).
  const CostInputs& in = p.settings.model;
  if (in.tp > 1)
    row("tp", std::string("tensor-parallel collectives") + hidden(CommGroup::tp), a.tp, b.tp);
  if (in.cp > 1) {
    row("cp", std::string("context-parallel key/value exchange") + hidden(CommGroup::cp), a.cp,
        b.cp);
  }
  if (in.ep > 1)
    row("ep", std::string("expert-parallel all-to-all") + hidden(CommGroup::ep), a.ep, b.ep);
  row("bubble", "pipeline bubble (idle with free links)", a.bubble, b.bubble);
  row("pp", "exposed pipeline transfers (AttnRes history included)", a.pp, b.pp);
  if (comm_group_ranks(in, CommGroup::dp) > 1) {
    row("dp",
        std::string("gradient collectives after the last backward") +
            (o.dp ? " (overlapped: only what exceeds the last micro-batch's backward)"
                  : " (exposed)"),
        a.dp, b.dp);
  }
  row("step", "the step (the parts above summed)", a.total(), b.total());
  t.note = "Rank " + num(static_cast<std::int64_t>(a.rank)) +
           " is the busiest (the most compute) in the AttnRes run, rank " +
           num(static_cast<std::int64_t>(b.rank)) +
           " in the standard run; m = " + num(static_cast<std::int64_t>(p.settings.microbatches)) +
           " micro-batches. Recompute " +
           enum_name(kRecomputePolicyNames, p.settings.model.recompute) +
           "; overlapped groups: " + to_string(o) +
           "; groups of one rank move nothing and are left out (docs/math.md §3.8).";
  if (!p.stage_warning.empty()) t.note += " Warning: " + p.stage_warning + ".";
  return t;
}

ReportTable reconciliation_table(const PipelineReport& p) {
  ReportTable t = typed_table("overhead_reconciliation",
                              "What AttnRes adds to a step: three numbers, one answer",
                              {{"source", "source", Shown::text},
                               {"overhead_fraction", "overhead (%)", Shown::percent},
                               {"what_it_counts", "what it counts", Shown::text}});
  const StepReconciliation& r = p.reconciliation;
  add_row(t, {"time_model", r.time_model,
              "attnres cost: forward only, one device, the mechanism as one memory-bound op "
              "(docs/math.md §3.4)"});
  add_row(t, {"strategies", r.strategy,
              "attnres strategies: forward + backward on one device, " +
                  to_string(p.settings.strategy) + " kernels with launch floors, no pipeline"});
  add_row(t, {"step", r.step,
              "attnres pipeline: the simulated step (the answer): per rank, bubbles and "
              "exposed communication"});
  add_row(t, {"step.residual", r.residual, "of which: mechanism kernels on the busiest rank"});
  add_row(t, {"step.pp", r.pp, "of which: exposed pipeline transfers of the AttnRes history"});
  add_row(t, {"step.bubble", r.bubble, "of which: a longer bubble"});
  add_row(t, {"step.dp", r.dp, "of which: exposed gradient collectives"});
  add_row(t, {"step.other", r.other, "of which: the rest (0 unless the busiest rank moved)"});
  t.note =
      "The step's parts sum to its overhead. The time model and the strategies count one device "
      "with the whole micro-batch, so they divide the same mechanism time by a smaller step "
      "without bubbles or communication (docs/math.md §3.8).";
  return t;
}

ReportTable plan_table(const PlanResult& plan) {
  ReportTable t = typed_table("plan", "Settings against the budgets",
                              {{"blocks", "N", Shown::integer},
                               {"tp", "t", Shown::integer},
                               {"cp", "c", Shown::integer},
                               {"ep", "e", Shown::integer},
                               {"pp", "P", Shown::integer},
                               {"vpp", "V", Shown::integer},
                               {"dp", "D", Shown::integer},
                               {"strategy", "strategy", Shown::text},
                               {"hardware", "hardware", Shown::text},
                               {"overhead_fraction", "AttnRes overhead (%)", Shown::percent},
                               {"step_seconds", "step (s)", Shown::number},
                               {"peak_memory_bytes", "peak rank (GB)", Shown::gigabytes},
                               {"pipeline_bytes", "pipeline traffic (GB)", Shown::gigabytes},
                               {"meets", "meets", Shown::yes_no},
                               {"pareto", "Pareto", Shown::yes_no},
                               {"why", "why not", Shown::text}});
  for (const PlanCandidate& c : plan.candidates) {
    std::string why = c.invalid;
    for (std::size_t k = 0; k < c.failures.size(); ++k) why += (k ? "; " : "") + c.failures[k];
    if (!c.stage_warning.empty())
      why += std::string(why.empty() ? "" : "; ") + "stages split layers";
    const bool valid = c.invalid.empty();
    auto value = [&](double v) { return valid ? nlohmann::json(v) : nlohmann::json(nullptr); };
    add_row(t, {c.blocks, c.tp, c.cp, c.ep, c.pp, c.vpp, c.dp, to_string(c.strategy), c.hardware,
                value(c.overhead_fraction), value(c.step_seconds), value(c.peak_memory_bytes),
                value(c.pipeline_bytes), c.meets(), c.pareto, why});
  }
  std::string note = plan.summary;
  for (const auto& line : plan.by_blocks) note += " " + line + ".";
  note +=
      " Pareto: no other setting that meets the budgets has lower overhead, step time and memory "
      "and more blocks at once (docs/math.md §3.9).";
  t.note = note;
  return t;
}

}  // namespace attnres
