// One step time (docs/math.md §3.8): the simulated step with each implementation strategy against
// hand counts, its parts against the step they sum to, the three overhead numbers against the
// engines that make them, recompute and the overlap of collectives; stage layouts (§3.3) against
// hand layouts and the split-layer warning.
#include <gtest/gtest.h>

#include <cmath>

#include "attnres/cost.hpp"
#include "attnres/cost_input_fields.hpp"
#include "attnres/error.hpp"
#include "attnres/hardware.hpp"
#include "attnres/pipeline.hpp"
#include "attnres/rank_memory.hpp"
#include "attnres/strategy.hpp"
#include "attnres/sweep.hpp"
#include "attnres/time_model.hpp"
#include "published_models.hpp"
#include "test_support.hpp"

namespace attnres {
namespace {

// Bounds (docs/testing.md §2). A step time and its parts are sums of positive op and call times,
// the same terms added in two orders (the simulated path; the parts, rank by rank): up to ~2000
// terms (every op of moe_61's schedule, 2 P V m = 512, each a sum of its calls), n u of the sum
// each: 4096 u relative to the step.
constexpr double kSumsBound = test::roundoffs<double>(4096);

// A device where attention and MLP take no time and every kernel takes its floor (1 ms): a
// chunk's time is then its launches.
Hardware launch_bound() {
  Hardware hw;
  hw.name = "launch-bound";
  hw.peak_flops = 1e30;
  hw.hbm_bandwidth = 1e30;
  hw.intra_node_bandwidth = hw.scale_out_bandwidth = 1e12;
  hw.kernel_floor = 1e-3;
  hw.memory_bytes = 80e9;
  return hw;
}

// One micro-batch of `in` under 1F1B.
PipelineSettings one_micro_batch(const CostInputs& in, ResidualMode mode, Strategy strategy,
                                 const Hardware& hardware) {
  PipelineSettings s;
  s.model = resolve_cost_inputs(in);
  s.mode = mode;
  s.strategy = strategy;
  s.microbatches = 1;
  s.schedule = PipelineSchedule::one_f_one_b;
  s.hardware = hardware;
  return s;
}

PipelineSettings small(ResidualMode mode, Strategy strategy, std::int64_t P = 2) {
  CostInputs in;
  in.sublayers = 4;
  in.block_size = 1;
  in.d_model = 8;
  in.tokens = 16;
  in.pp = P;
  PipelineSettings s = one_micro_batch(in, mode, strategy, launch_bound());
  s.ideal_links = true;
  return s;
}

TEST(Step, ChunkTimesAreTheStrategysLaunchesOfTheReadsEachChunkRuns) {
  // L = 4, P = 2: the chunks hold layers 1 and 2 (sublayers 1-2 and 3-4). Read r forms the input
  // of sublayer r + 1, the output read r = 4 runs on the last chunk: chunk 0 runs reads 0 and 1,
  // chunk 1 reads 2, 3 and 4. Full AttnRes, by hand (docs/math.md §3.6): fused_one_shot is one
  // kernel per read; stack is stack, key norm, score, softmax and weighted sum (5 per read); the
  // standard residual one add per sublayer.
  const double floor = 1e-3;
  const auto one_shot = evaluate_pipeline(small(ResidualMode::full, Strategy::fused_one_shot));
  ASSERT_EQ(one_shot.chunk_forward_seconds.size(), 2u);
  // A sum of at most 15 launches of the floor (1e-3 is not a binary fraction): 15 u; 16 u.
  const double bound = test::roundoffs<double>(16);
  EXPECT_TRUE(test::near_relative(one_shot.chunk_forward_seconds[0], 2 * floor, bound));
  EXPECT_TRUE(test::near_relative(one_shot.chunk_forward_seconds[1], 3 * floor, bound));
  const auto stack = evaluate_pipeline(small(ResidualMode::full, Strategy::stack));
  EXPECT_TRUE(test::near_relative(stack.chunk_forward_seconds[0], 10 * floor, bound));
  EXPECT_TRUE(test::near_relative(stack.chunk_forward_seconds[1], 15 * floor, bound));
  // The standard run: two adds per chunk each way; its busiest rank holds 2 + 2 launches.
  EXPECT_TRUE(test::near_relative(one_shot.step_standard.residual, 4 * floor, bound));
  // The strategy changes the step, as it should (it did not before: issue 27).
  EXPECT_GT(stack.step_time_s, one_shot.step_time_s);
}

TEST(Step, OneRankSumsToTheStrategiesCountOfTheWholeModel) {
  // P = 1 on a real device: the simulated mechanism (forward + backward, one micro-batch) is the
  // strategies engine's forward + backward of the same calls.
  for (const Strategy strategy :
       {Strategy::stack, Strategy::arena, Strategy::fused_one_shot, Strategy::fused_two_phase}) {
    for (const ResidualMode mode : {ResidualMode::block, ResidualMode::full}) {
      CostInputs in;
      in.layers = 8;
      in.blocks = 4;
      in.d_model = 1024;
      in.tokens = 2048;
      const PipelineSettings s = one_micro_batch(in, mode, strategy, load_hardware("h100"));
      const auto report = evaluate_pipeline(s);
      const auto step = strategy_step(strategy, mode, s.model, Phase::prefill, true, s.hardware);
      EXPECT_TRUE(test::near_relative(report.step_attnres.residual,
                                      step.forward.seconds + step.backward.seconds, kSumsBound))
          << to_string(strategy) << " " << to_string(mode);
      EXPECT_TRUE(test::near_relative(
          report.step_standard.residual,
          step.standard_forward.seconds + step.standard_backward.seconds, kSumsBound));
    }
  }
}

// Issue 27's question: DeepSeek-V3's shape at 128k on H100, as scenarios/moe-61-layers-128k.toml.
PipelineSettings moe_61(Strategy strategy = Strategy::fused_two_phase) {
  CostInputs in = test::deepseek_v3_shape();
  in.pp = 8;
  in.vpp = 2;
  in.tokens = 131072;
  in.tp = 8;
  in.cp = 8;
  in.ep = 64;
  in.dp = 8;
  in.zero = 1;
  in.recompute = RecomputePolicy::full;
  PipelineSettings s;
  s.model = resolve_cost_inputs(in);
  s.microbatches = 16;
  s.schedule = PipelineSchedule::interleaved;
  s.strategy = strategy;
  s.hardware = load_hardware("h100");
  return s;
}

TEST(Step, PartsSumToTheStepAndTheOverheadSplitSumsToTheOverhead) {
  for (const PipelineSettings& s :
       {moe_61(), moe_61(Strategy::stack), small(ResidualMode::block, Strategy::arena)}) {
    const auto r = evaluate_pipeline(s);
    const double step = r.step_time_s;
    EXPECT_TRUE(test::near_relative(r.step_attnres.total(), step, kSumsBound, step, "parts"));
    EXPECT_TRUE(test::near_relative(r.step_attnres.total() - r.step_attnres.dp, r.iteration_time_s,
                                    kSumsBound, step, "parts but dp"));
    EXPECT_TRUE(test::near_relative(r.step_standard.total(),
                                    r.standard.iteration_seconds + r.step_standard.dp, kSumsBound,
                                    step, "standard parts"));
    // A ratio of two such sums, minus 1: relative to the ratio, 1 + the fraction.
    const double fraction = r.step_time_s / r.step_standard.total() - 1.0;
    EXPECT_TRUE(test::near_relative(r.attnres_overhead_fraction, fraction, kSumsBound,
                                    1.0 + std::abs(fraction), "overhead fraction"));
    const auto& c = r.reconciliation;
    EXPECT_TRUE(test::near_relative(c.residual + c.pp + c.bubble + c.dp + c.other, c.step,
                                    kSumsBound, 1.0 + std::abs(c.step), "overhead split"));
    EXPECT_DOUBLE_EQ(c.step, r.attnres_overhead_fraction);
    // The busiest rank's compute is the simulation's ideal time.
    EXPECT_TRUE(test::near_relative(r.step_attnres.compute(), r.attnres.ideal_seconds, kSumsBound,
                                    step, "compute"));
  }
}

TEST(Step, TheOtherTwoNumbersAreTheTimeModelsAndTheStrategiesOwn) {
  const PipelineSettings s = moe_61();
  const auto r = evaluate_pipeline(s);
  EXPECT_DOUBLE_EQ(r.reconciliation.time_model,
                   stack_time(s.model, Phase::prefill, s.hardware)
                       .overhead_fraction[static_cast<int>(ResidualScheme::block_two_phase)]);
  EXPECT_DOUBLE_EQ(r.reconciliation.strategy,
                   strategy_step(s.strategy, s.mode, s.model, Phase::prefill, true, s.hardware)
                       .overhead_fraction);
  // The step's overhead is of the order of the other two, not equal: it divides by a step that
  // has bubbles and exposed communication, and adds the history's pipeline traffic.
  EXPECT_GT(r.reconciliation.step, 0);
  EXPECT_LT(r.reconciliation.step, 0.05);
  EXPECT_GT(r.reconciliation.pp, 0);
}

TEST(Step, FullRecomputeRunsTheForwardAgain) {
  PipelineSettings none = small(ResidualMode::block, Strategy::fused_one_shot, 1);
  none.hardware = load_hardware("h100");
  CostInputs in = none.model;
  in.d_model = 1024;
  in.tokens = 4096;
  in.recompute = RecomputePolicy::none;
  none.model = resolve_cost_inputs(in);
  PipelineSettings full = none;
  in.recompute = RecomputePolicy::full;
  full.model = resolve_cost_inputs(in);
  const auto a = evaluate_pipeline(none), b = evaluate_pipeline(full);
  // Forward + 2 x forward, against forward + (forward + 2 x forward).
  EXPECT_TRUE(test::near_relative(b.step_attnres.attention_mlp / a.step_attnres.attention_mlp,
                                  4.0 / 3.0, kSumsBound));
  // Selective recompute adds the attention scores only: between the two.
  PipelineSettings selective = none;
  in.recompute = RecomputePolicy::selective;
  selective.model = resolve_cost_inputs(in);
  const auto c = evaluate_pipeline(selective);
  EXPECT_GT(c.step_attnres.attention_mlp, a.step_attnres.attention_mlp);
  EXPECT_LT(c.step_attnres.attention_mlp, b.step_attnres.attention_mlp);
}

TEST(Step, ExposedCollectivesAddTheirTimeAndHiddenOnesOnlyTheExcess) {
  // Every rank alike (64 MoE layers, 4 per chunk), so the simulation's busiest rank is the one
  // step_communication reports.
  PipelineSettings s = moe_61();
  CostInputs in = s.model;
  in.sublayers = 0;
  in.layers = 64;
  in.dense_layers = 0;
  in.block_size = 0;
  s.model = resolve_cost_inputs(in);
  s.comm_overlap = CommOverlap{false, false, false, false};
  const auto exposed = evaluate_pipeline(s);
  // Exposed: the chunk collectives of the busiest rank are the step_communication bytes at the
  // link (tp and ep per micro-batch, m of them).
  double tp = 0, ep = 0;
  for (const CommTerm& term : step_communication(s.model, s.hardware, s.microbatches, s.mode)) {
    if (term.group == "tp") tp = term.seconds;
    if (term.group == "ep") ep = term.seconds;
  }
  EXPECT_TRUE(test::near_relative(exposed.step_attnres.tp, tp, kSumsBound, 0.0, "tp"));
  EXPECT_TRUE(test::near_relative(exposed.step_attnres.ep, ep, kSumsBound, 0.0, "ep"));
  s.comm_overlap = CommOverlap{true, true, true, true};
  const auto hidden = evaluate_pipeline(s);
  EXPECT_LT(hidden.step_attnres.tp, exposed.step_attnres.tp);
  EXPECT_LT(hidden.step_time_s, exposed.step_time_s);
  EXPECT_GE(hidden.step_attnres.tp, 0.0);
  EXPECT_EQ(to_string(CommOverlap{}), "cp,dp");
  EXPECT_EQ(to_string(parse_comm_overlap("tp,ep", "x")), "tp,ep");
  EXPECT_EQ(to_string(parse_comm_overlap("none", "x")), "none");
  EXPECT_THROW(parse_comm_overlap("tp,xx", "--overlap-comm"), Error);
}

// ------------------------------------------------------------------ stage layouts
TEST(StageLayout, WholeLayersSplitEvenlyByDefault) {
  // 61 layers over 16 chunks: 13 chunks of 4 layers, then 3 of 3.
  const auto last = layer_aligned_chunks(122, 16);
  ASSERT_EQ(last.size(), 16u);
  std::int64_t end = 0;
  for (std::size_t c = 0; c < 16; ++c) {
    end += 2 * (c < 13 ? 4 : 3);
    EXPECT_EQ(last[c], end) << c;
  }
  EXPECT_TRUE(split_layers(last).empty());
  EXPECT_EQ(layer_aligned_chunks(10, 3), (std::vector<std::int64_t>{4, 8, 10}));
  // L odd: the last layer is attention only.
  EXPECT_EQ(layer_aligned_chunks(7, 2), (std::vector<std::int64_t>{4, 7}));
}

TEST(StageLayout, ListedLayersGiveTheirBoundariesAndTheSimulationUsesThem) {
  CostInputs in;
  in.layers = 13;
  in.blocks = 4;
  in.d_model = 64;
  in.pp = 4;
  in.stage_layers = {3, 4, 4, 2};  // first and last stages lighter, as production splits are
  const CostInputs r = resolve_cost_inputs(in);
  EXPECT_EQ(stage_last_sublayers(r), (std::vector<std::int64_t>{6, 14, 22, 26}));
  const auto listed = pipeline_boundaries(r, ResidualMode::block);
  const auto by_hand =
      pipeline_boundaries(ResidualMode::block, 26, r.block_size, 4, 1, {6, 14, 22, 26});
  ASSERT_EQ(listed.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(listed[i].last_sublayer, by_hand[i].last_sublayer);
    EXPECT_EQ(listed[i].cached_vectors, by_hand[i].cached_vectors);
  }
  PipelineSettings s;
  s.model = r;
  s.microbatches = 4;
  s.schedule = PipelineSchedule::one_f_one_b;
  s.hardware = load_hardware("h100");
  const auto report = evaluate_pipeline(s);
  // Chunk times follow the layers: 3, 4, 4, 2 layers of one kind.
  const auto& f = report.chunk_forward_seconds;
  EXPECT_GT(f[1], f[0]);
  EXPECT_GT(f[0], f[3]);
  EXPECT_TRUE(report.stage_warning.empty());
}

TEST(StageLayout, MoreChunksThanLayersSplitLayersAndSaySo) {
  CostInputs in;
  in.layers = 4;
  in.blocks = 2;
  in.d_model = 64;
  in.pp = 8;
  const CostInputs r = resolve_cost_inputs(in);
  EXPECT_EQ(split_layers(stage_last_sublayers(r)), (std::vector<std::int64_t>{1, 2, 3, 4}));
  const std::string warning = stage_split_warning(r);
  EXPECT_NE(warning.find("split layers 1, 2, 3 and 4"), std::string::npos) << warning;
  EXPECT_NE(warning.find("P·V = 8 chunks exceed the 4 layers"), std::string::npos) << warning;
  in.pp = 4;
  EXPECT_EQ(stage_split_warning(resolve_cost_inputs(in)), "");
}

TEST(StageLayout, BadListsAreRefusedNamingTheList) {
  CostInputs in;
  in.layers = 8;
  in.blocks = 2;
  in.d_model = 64;
  in.pp = 2;
  in.vpp = 2;
  auto problem = [&](std::vector<std::int64_t> list) {
    CostInputs x = in;
    x.stage_layers = std::move(list);
    const auto p = try_resolve_cost_inputs(x);
    EXPECT_TRUE(p.has_value());
    if (!p) return std::string();
    EXPECT_EQ(p->field, "stage_layers");
    return p->message;
  };
  EXPECT_NE(problem({4, 4}).find("2 entries; P·V = 2 x 2 = 4 chunks expected"), std::string::npos);
  EXPECT_NE(problem({2, 2, 4, 0}).find("chunk 3 has 0 layers"), std::string::npos);
  EXPECT_NE(problem({2, 2, 2, 3}).find("sums to 9 layers; the model has 8"), std::string::npos);
  CostInputs ok = in;
  ok.stage_layers = {1, 3, 3, 1};
  EXPECT_FALSE(try_resolve_cost_inputs(ok).has_value());
  EXPECT_NE(find_cost_input_list("stage_layers"), nullptr);
  EXPECT_EQ(cost_input_section("stage_layers"), "parallel");
}

}  // namespace
}  // namespace attnres

// ------------------------------------------------------------------ named sweep parameters
namespace attnres {
namespace {

TEST(NamedSweeps, StrategyAndHardwareAxesGiveEverySettingItsOwnStep) {
  const PipelineSettings setting = moe_61();
  const ScenarioInputs base{setting.model, setting.hardware, setting, Strategy::fused_two_phase};
  SweepSpec spec;
  spec.name = "named";
  spec.x = named_sweep_axis("strategy", {"stack", "fused_two_phase"}, "x");
  spec.y = named_sweep_axis("hardware", {"h100", "b200"}, "y");
  spec.metrics = {"pipeline.step_seconds", "pipeline.standard_step_seconds"};
  spec.threshold = 30;
  const SweepResult result = run_sweep(base, spec);
  ASSERT_EQ(result.points.size(), 4u);
  for (const SweepPoint& point : result.points) {
    PipelineSettings s = moe_61(parse_strategy(spec.x.value_text(point.x), "x"));
    s.hardware = load_hardware(spec.y->value_text(*point.y));
    s.record_timeline = false;
    const PipelineReport r = evaluate_pipeline(s);
    EXPECT_DOUBLE_EQ(point.values[0], r.step_time_s);
    EXPECT_DOUBLE_EQ(point.values[1], r.step_standard.total());
  }
  // B200 is faster than H100, stack slower than fused two-phase.
  EXPECT_LT(result.points[2].values[0], result.points[0].values[0]);
  EXPECT_GT(result.points[0].values[0], result.points[1].values[0]);
  // The outputs write the names.
  EXPECT_EQ(sweep_csv_row(spec, result.points[0]).rfind("stack,h100,", 0), 0u);
  EXPECT_NE(sweep_point_json(spec, result.points[3]).find("\"strategy\": \"fused_two_phase\""),
            std::string::npos);
  EXPECT_NE(sweep_chart(result, base).x_label.find("0 = stack, 1 = fused_two_phase"),
            std::string::npos);
  const std::string conclusion = sweep_conclusion(result);
  EXPECT_NE(conclusion.find("strategy swept (stack, fused_two_phase)"), std::string::npos)
      << conclusion;
  EXPECT_NE(conclusion.find("at hardware = b200"), std::string::npos) << conclusion;
  // Names are checked before any work.
  EXPECT_THROW(named_sweep_axis("strategy", {"fused"}, "--values"), Error);
  EXPECT_THROW(named_sweep_axis("hardware", {"h1000"}, "--values"), Error);
  EXPECT_THROW(named_sweep_axis("tp", {"8"}, "--values"), Error);
}

}  // namespace
}  // namespace attnres
