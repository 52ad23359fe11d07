// The plan (docs/math.md §3.9): its choices against a brute-force scan of the same grid, the
// world size, the default block counts, and bad budgets and grids.
#include <gtest/gtest.h>

#include <cmath>

#include "attnres/cost_input_fields.hpp"
#include "attnres/error.hpp"
#include "attnres/plan.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_plan {

PipelineSettings base_setting() {
  CostInputs in;
  in.layers = 16;
  in.blocks = 4;
  in.d_model = 2048;
  in.tokens = 8192;
  in.heads = 16;
  in.pp = 4;
  in.dp = 2;
  PipelineSettings s;
  s.model = resolve_cost_inputs(in);
  s.microbatches = 8;
  s.schedule = PipelineSchedule::one_f_one_b;
  s.hardware = load_hardware("h100");
  return s;
}

TEST(Plan, ChoicesMatchABruteForceScanOfTheSameGrid) {
  const PipelineSettings base = base_setting();
  PlanGrid grid;
  grid.blocks = {1, 2, 4, 8, 16, 32};
  grid.tp = {1, 2, 4};
  grid.strategies = {Strategy::stack, Strategy::fused_two_phase};
  PlanBudgets budgets;
  budgets.max_overhead_fraction = 0.10;
  budgets.max_pipeline_bytes = 40e9;
  const PlanResult plan = make_plan(base, grid, budgets);
  ASSERT_EQ(plan.candidates.size(), grid.size());

  // The scan: every setting by hand, the budgets by hand, dominance by hand.
  struct Row {
    std::int64_t n, t;
    Strategy strategy;
    double overhead, step, memory, traffic;
    bool meets;
  };
  std::vector<Row> rows;
  for (const Strategy strategy : grid.strategies) {
    for (const std::int64_t t : grid.tp) {
      for (const std::int64_t n : grid.blocks) {
        PipelineSettings s = base;
        CostInputs in = base.model;
        in.block_size = 0;
        in.blocks = n;
        in.tp = t;
        s.model = resolve_cost_inputs(in);
        s.strategy = strategy;
        s.record_timeline = false;
        const PipelineReport r = evaluate_pipeline(s);
        double memory = 0;
        for (const auto& rank : r.memory) memory = std::max(memory, rank.total());
        const bool meets = r.attnres_overhead_fraction <= 0.10 && memory <= 80e9 &&
                           r.attnres.transferred_bytes <= 40e9;
        rows.push_back({n, t, strategy, r.attnres_overhead_fraction, r.step_time_s, memory,
                        r.attnres.transferred_bytes, meets});
      }
    }
  }
  ASSERT_EQ(rows.size(), plan.candidates.size());
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const PlanCandidate& c = plan.candidates[i];
    EXPECT_EQ(c.blocks, rows[i].n);
    EXPECT_EQ(c.tp, rows[i].t);
    EXPECT_EQ(c.strategy, rows[i].strategy);
    EXPECT_DOUBLE_EQ(c.overhead_fraction, rows[i].overhead);
    EXPECT_DOUBLE_EQ(c.step_seconds, rows[i].step);
    EXPECT_DOUBLE_EQ(c.pipeline_bytes, rows[i].traffic);
    EXPECT_EQ(c.meets(), rows[i].meets) << i;
    bool dominated = false;
    for (const Row& o : rows) {
      if (!o.meets) continue;
      const bool no_worse = o.overhead <= rows[i].overhead && o.step <= rows[i].step &&
                            o.memory <= rows[i].memory && o.n >= rows[i].n;
      const bool better = o.overhead < rows[i].overhead || o.step < rows[i].step ||
                          o.memory < rows[i].memory || o.n > rows[i].n;
      dominated = dominated || (no_worse && better);
    }
    EXPECT_EQ(c.pareto, rows[i].meets && !dominated) << i;
    if (rows[i].meets && (!best || rows[i].n > rows[*best].n ||
                          (rows[i].n == rows[*best].n && rows[i].step < rows[*best].step)))
      best = i;
  }
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(plan.recommended, best);
  // Some settings fail (the scan is not trivial) and say why.
  std::size_t failing = 0;
  for (const auto& c : plan.candidates) {
    if (!c.meets()) {
      ++failing;
      EXPECT_FALSE(c.failures.empty() && c.invalid.empty());
    }
  }
  EXPECT_GT(failing, 0u);
  EXPECT_NE(plan.summary.find("recommended N = " + std::to_string(rows[*best].n)),
            std::string::npos)
      << plan.summary;
}

TEST(Plan, AWorldSizeFixesTheDataParallelDegree) {
  PlanGrid grid;
  grid.blocks = {4};
  grid.tp = {1, 2, 3, 4};
  grid.gpus = 32;
  const PlanResult plan = make_plan(base_setting(), grid, PlanBudgets{});
  ASSERT_EQ(plan.candidates.size(), 4u);
  EXPECT_EQ(plan.candidates[0].dp, 8);  // 32 / (1 x 1 x 4)
  EXPECT_EQ(plan.candidates[1].dp, 4);
  EXPECT_NE(plan.candidates[2].invalid.find("t·c·P = 12 does not divide the 32 GPUs"),
            std::string::npos);
  EXPECT_EQ(plan.candidates[3].dp, 2);
}

TEST(Plan, ImpossibleSettingsAndOverBudgetOnesSayWhy) {
  PlanGrid grid;
  grid.blocks = {4, 64};  // 64 blocks of 32 sublayers cannot be equal
  PlanBudgets budgets;
  budgets.max_step_seconds = 1e-6;
  const PlanResult plan = make_plan(base_setting(), grid, budgets);
  EXPECT_NE(plan.candidates[1].invalid.find("blocks"), std::string::npos)
      << plan.candidates[1].invalid;
  ASSERT_EQ(plan.candidates[0].failures.size(), 1u);
  EXPECT_NE(plan.candidates[0].failures[0].find("step"), std::string::npos);
  EXPECT_FALSE(plan.recommended.has_value());
  EXPECT_NE(plan.summary.find("No setting"), std::string::npos);
  EXPECT_NE(plan.by_blocks[1].find("N = 64: no setting is possible"), std::string::npos)
      << plan.by_blocks[1];
}

TEST(Plan, DefaultBlockCountsAreThoseEqualBlocksCanMake) {
  EXPECT_EQ(plan_default_blocks(122), (std::vector<std::int64_t>{1, 2, 4, 8, 16, 31, 61, 122}));
  EXPECT_EQ(plan_default_blocks(8), (std::vector<std::int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(plan_default_blocks(1), (std::vector<std::int64_t>{1}));
  EXPECT_TRUE(plan_default_blocks(0).empty());  // a scenario without [model] (it crashed the GUI)
  for (const std::int64_t n : plan_default_blocks(122)) {
    CostInputs in;
    in.sublayers = 122;
    in.blocks = n;
    in.d_model = 64;
    EXPECT_FALSE(try_resolve_cost_inputs(in).has_value()) << n;
  }
}

TEST(Plan, BadBudgetsAndGridsAreRefused) {
  PlanBudgets b;
  b.max_overhead_fraction = -0.01;
  EXPECT_NE(plan_budgets_problem(b), "");
  b.max_overhead_fraction = 0.02;
  EXPECT_EQ(plan_budgets_problem(b), "");
  b.max_pipeline_bytes = 0;
  EXPECT_NE(plan_budgets_problem(b).find("pipeline traffic"), std::string::npos);
  PlanGrid g;
  g.tp = {2, 0};
  EXPECT_NE(plan_grid_problem(g).find("tp values must be >= 1, got 0"), std::string::npos);
  g.tp.clear();
  for (std::int64_t i = 1; i <= 200; ++i) g.blocks.push_back(i), g.tp.push_back(i);
  EXPECT_NE(plan_grid_problem(g).find("40000 settings"), std::string::npos) << plan_grid_problem(g);
  EXPECT_THROW(make_plan(base_setting(), g, PlanBudgets{}), Error);
}

}  // namespace test_plan
}  // namespace attnres
