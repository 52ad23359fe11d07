// Implementation strategies, block layouts, recompute and calibration (docs/math.md §3.6,
// docs/calibration.md): byte and launch counts against the hand counts worked in the docs, the
// growth laws (stack copies ~ L², arena ~ L), the inherent I/O every strategy pays, layouts in
// layers and sublayers, uneven blocks, and the calibration table.
#include <gtest/gtest.h>

#include <cmath>

#include "attnres/block_layout.hpp"
#include "attnres/calibration.hpp"
#include "attnres/cost_input_fields.hpp"
#include "attnres/error.hpp"
#include "attnres/strategy.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_strategy {

struct Hand {
  std::int64_t reads, writes, launches;
};

void expect_counts(const PassCounts& c, Hand h, const char* what) {
  EXPECT_EQ(c.read_vectors, h.reads) << what;
  EXPECT_EQ(c.write_vectors, h.writes) << what;
  EXPECT_EQ(c.launches, h.launches) << what;
}

// Block AttnRes, L = 4, N = 2 (S = 2): reads see 1, 2, 2, 3, 3 sources (sum 11); sublayers 2 and 4
// add to an open partial sum. docs/math.md §3.6 counts every row below by hand.
TEST(Strategy, BlockL4N2MatchesTheHandCounts) {
  const BlockLayout layout = uniform_block_layout(4, 2);
  const auto reads = read_sources(layout);
  ASSERT_EQ(reads.size(), 5u);
  const std::int64_t n[] = {1, 2, 2, 3, 3};
  const bool u[] = {false, false, true, false, true};
  for (std::size_t r = 0; r < 5; ++r) {
    EXPECT_EQ(reads[r].sources(), n[r]) << r;
    EXPECT_EQ(reads[r].accumulates, u[r]) << r;
  }
  const StrategyCost stack = strategy_cost(Strategy::stack, layout);
  expect_counts(stack.forward, {48, 29, 27}, "stack forward");
  expect_counts(stack.backward, {98, 55, 46}, "stack backward");
  EXPECT_EQ(stack.copy_vectors, 11);
  EXPECT_EQ(stack.saved_vectors, 22);
  EXPECT_EQ(stack.forward.temp_vectors, 6);

  const StrategyCost arena = strategy_cost(Strategy::arena, layout);
  expect_counts(arena.forward, {40, 21, 25}, "arena forward");
  expect_counts(arena.backward, {98, 55, 40}, "arena backward");
  EXPECT_EQ(arena.copy_vectors, 5);
  EXPECT_EQ(arena.saved_vectors, 11);
  EXPECT_EQ(arena.forward.temp_vectors, 3);

  const StrategyCost one_shot = strategy_cost(Strategy::fused_one_shot, layout);
  expect_counts(one_shot.forward, {13, 10, 5}, "one-shot forward");
  expect_counts(one_shot.backward, {27, 11, 5}, "one-shot backward");
  EXPECT_EQ(one_shot.saved_vectors, 0);
  EXPECT_EQ(one_shot.forward.temp_vectors, 0);

  const StrategyCost two_phase = strategy_cost(Strategy::fused_two_phase, layout);
  expect_counts(two_phase.forward, {12, 12, 5}, "two-phase forward");
  expect_counts(two_phase.backward, {30, 10, 5}, "two-phase backward");
  EXPECT_EQ(two_phase.saved_vectors, 5);
  EXPECT_EQ(two_phase.forward.temp_vectors, 2);
  for (const auto* cost : {&stack, &arena, &one_shot, &two_phase}) {
    EXPECT_EQ(cost->inherent_read_vectors, 11);
    EXPECT_EQ(cost->history_vectors, 3);
    EXPECT_EQ(cost->reads, 5);
  }
}

TEST(Strategy, FullL4MatchesTheHandCounts) {
  // Full AttnRes: blocks of one sublayer; read r sees r + 1 sources, sum 15, nothing accumulates.
  const BlockLayout layout = uniform_block_layout(4, 1);
  EXPECT_EQ(read_source_pairs(layout), 15);
  expect_counts(strategy_cost(Strategy::stack, layout).forward, {60, 35, 25}, "stack");
  expect_counts(strategy_cost(Strategy::arena, layout).forward, {50, 25, 25}, "arena");
  expect_counts(strategy_cost(Strategy::fused_one_shot, layout).forward, {15, 10, 5}, "one-shot");
  // Two-phase with schedule groups of 2 sublayers: phase 1 of reads {0,1}, {2,3}, {4}.
  const StrategyCost tp =
      strategy_cost(Strategy::fused_two_phase, layout, uniform_block_layout(4, 2));
  // phase1 r0: 1 in, 3 out; merge r1: 1 + 1 in, 2 out; phase1 r2: 3 in, 3 out; merge r3: 2 in,
  // 2 out; final r4: 5 in, 2 out.
  expect_counts(tp.forward, {13, 12, 5}, "two-phase");
}

TEST(Strategy, TheCpuEnginesSplitCallsMatchTheHandCounts) {
  // Block L = 4, S = 2: reads see 1, 2, 2, 3, 3 sources. The engine adds every v_r into its
  // block's slot (4 adds, 2 read + 1 written each), zeroes block 2's slot once, and finishes
  // every read in a call of its own (1 read, 1 written).
  const BlockLayout block = uniform_block_layout(4, 2);
  const ReadOps engine = cpu_engine_read_ops();
  const StrategyCost one_shot =
      strategy_cost(Strategy::fused_one_shot, block, std::nullopt, engine);
  EXPECT_EQ(one_shot.forward.read_vectors, 4 * 2 + 11 + 5);
  EXPECT_EQ(one_shot.forward.write_vectors, 4 + 1 + 5 + 5);
  EXPECT_EQ(one_shot.forward.launches, 4 + 1 + 5 + 5);
  // Two-phase: groups {0, 1} and {2, 3, 4} (the final read joins the last group): 2 phase-1
  // calls, 2 finishes, 3 merge + finish calls, and the same 5 history calls.
  const StrategyCost two_phase =
      strategy_cost(Strategy::fused_two_phase, block, std::nullopt, engine);
  EXPECT_EQ(two_phase.forward.launches, 2 + 2 + 3 + 5);
  EXPECT_EQ(two_phase.forward.read_vectors, (1 + 2) + 2 + (2 + 2 + 2) + 4 * 2);
  EXPECT_EQ(two_phase.forward.write_vectors, (2 + 3) + 2 + 3 * 2 + 5);
  EXPECT_EQ(strategy_cost(Strategy::stack, block, std::nullopt, engine).forward.launches,
            5 * 5 + 5);
  // Full: the sublayers write their slots; one read call and one finish per read.
  const StrategyCost full =
      strategy_cost(Strategy::fused_one_shot, uniform_block_layout(4, 1), std::nullopt, engine);
  EXPECT_EQ(full.forward.launches, 10);
  EXPECT_EQ(full.forward.read_vectors, (1 + 2 + 3 + 4 + 5) + 5);
  // The fused default is unchanged by the new fields.
  EXPECT_EQ(strategy_cost(Strategy::fused_one_shot, block).forward.launches, 5);
}

TEST(Strategy, StackCopiesGrowAsLSquaredAndArenaAsL) {
  for (std::int64_t L : {4, 8, 16, 32, 64}) {
    const BlockLayout full = uniform_block_layout(L, 1);
    EXPECT_EQ(strategy_cost(Strategy::stack, full).copy_vectors, (L + 1) * (L + 2) / 2) << L;
    EXPECT_EQ(strategy_cost(Strategy::arena, full).copy_vectors, L + 1) << L;
    // Launches per forward: stack 5 per read, arena 4 per read + 1 store per source.
    EXPECT_EQ(strategy_cost(Strategy::stack, full).forward.launches, 5 * (L + 1));
    EXPECT_EQ(strategy_cost(Strategy::arena, full).forward.launches, 5 * (L + 1));
  }
  // Quadrupling from L = 16 to 64 multiplies stack copies by about 16 and arena's by about 4.
  const double s16 =
      static_cast<double>(strategy_cost(Strategy::stack, uniform_block_layout(16, 1)).copy_vectors);
  const double s64 =
      static_cast<double>(strategy_cost(Strategy::stack, uniform_block_layout(64, 1)).copy_vectors);
  EXPECT_GT(s64 / s16, 14.0);
}

TEST(Strategy, EveryStrategyPaysTheInherentIo) {
  for (const BlockLayout& layout : {uniform_block_layout(12, 3), uniform_block_layout(10, 4),
                                    uniform_block_layout(9, 1), BlockLayout{{1, 5, 2, 4}}}) {
    const std::int64_t L = layout.sublayers();
    std::int64_t accumulating = 0;
    for (const auto& read : read_sources(layout)) accumulating += read.accumulates ? 1 : 0;
    for (Strategy s : {Strategy::stack, Strategy::arena, Strategy::fused_one_shot}) {
      const StrategyCost cost = strategy_cost(s, layout);
      EXPECT_GE(cost.forward.read_vectors, cost.inherent_read_vectors) << to_string(s);
      EXPECT_GE(cost.forward.write_vectors, L + 1) << to_string(s);  // every read's output
      EXPECT_GE(cost.backward.read_vectors, cost.forward.read_vectors - 2 * accumulating)
          << to_string(s);
    }
    // The fused one-shot read is the inherent I/O plus the fused store of each new source.
    const StrategyCost fused = strategy_cost(Strategy::fused_one_shot, layout);
    EXPECT_EQ(fused.forward.read_vectors, fused.inherent_read_vectors + accumulating);
    EXPECT_EQ(fused.forward.write_vectors, 2 * (L + 1));
  }
}

TEST(Strategy, TwoPhaseBlockMergeMatchesThePapersPhaseTwo) {
  // Inside a block a merge reads the phase-1 result, the old partial sum and the new output (3d)
  // and writes the output and the partial sum (2d): the paper's Table 1 phase 2.
  const StrategyCost cost = strategy_cost(Strategy::fused_two_phase, uniform_block_layout(128, 16));
  int interior = 0;
  for (const auto& call : cost.forward_calls) {
    if (call.op != "merge" || call.read % 16 == 1) continue;  // first merge: no old partial
    EXPECT_EQ(call.read_vectors, 3) << call.read;
    EXPECT_EQ(call.write_vectors, 2) << call.read;
    ++interior;
  }
  EXPECT_EQ(interior, 8 * 14);
  EXPECT_EQ(cost.forward.launches, 8 + 1 + 8 * 15);  // a phase 1 per block + final, 15 merges
}

TEST(Strategy, TheZoosReadsChangeTheOpsNotTheSources) {
  CostInputs in;
  in.sublayers = 4;
  in.d_model = 64;
  in.block_size = 2;
  const CostInputs r = resolve_cost_inputs(in);
  // Block without key norm: no norm op (n / n, 1 launch) per read: 48 - 11, 29 - 11, 27 - 5.
  AttnResConfig no_norm = named_scheme("block_no_key_norm", r);
  expect_counts(scheme_strategy_cost(Strategy::stack, no_norm, r).forward, {37, 18, 22},
                "no key norm");
  // DenseFormer reads every output with learned scalars: stack n/n and the weighted sum n/1 per
  // read, over n = 1..5 (sum 15).
  const AttnResConfig dense = named_scheme("denseformer", r);
  expect_counts(scheme_strategy_cost(Strategy::stack, dense, r).forward, {30, 20, 10},
                "denseformer");
  // Full with a window of 2: n = 1, 2, 3, 3, 3 (sum 12).
  AttnResConfig window = named_scheme("full", r);
  window.window = 2;
  const StrategyCost windowed = scheme_strategy_cost(Strategy::fused_one_shot, window, r);
  expect_counts(windowed.forward, {12, 10, 5}, "window");
  EXPECT_EQ(windowed.history_vectors, 3);
  // Two-phase with a window: a merge reads the in-window outputs made inside its group (read 3 of
  // the group of reads 0..3 sees emb, v2, v3: two of them new), not n_r minus phase 1's sources.
  in.sublayers = 8;
  const CostInputs eight = resolve_cost_inputs(in);
  AttnResConfig window8 = named_scheme("full", eight);
  window8.window = 2;
  const StrategyCost tp = strategy_cost(Strategy::fused_two_phase, uniform_block_layout(8, 1),
                                        uniform_block_layout(8, 4), read_ops_of(window8));
  for (const auto& call : tp.forward_calls) {
    if (call.op == "merge" && call.read == 3) EXPECT_EQ(call.read_vectors, 1 + 2);
    if (call.op == "merge" && call.read == 6) EXPECT_EQ(call.read_vectors, 1 + 2);
    if (call.op == "merge" && call.read == 5) EXPECT_EQ(call.read_vectors, 1 + 1);
  }
  // An input-dependent query: one projection launch per read, and no two-phase schedule.
  const AttnResConfig query = named_scheme("full_input_query", r);
  EXPECT_EQ(scheme_strategy_cost(Strategy::fused_one_shot, query, r).forward.launches, 10);
  EXPECT_THROW(scheme_strategy_cost(Strategy::fused_two_phase, query, r), Error);
  // A sigmoid gate or several heads move the same bytes in the same launches.
  const auto base = scheme_strategy_cost(Strategy::arena, named_scheme("block", r), r).forward;
  const auto gated = scheme_strategy_cost(Strategy::arena, named_scheme("block_sigmoid", r), r);
  EXPECT_EQ(gated.forward.vectors(), base.vectors());
  EXPECT_EQ(gated.forward.launches, base.launches);
  // Schemes without reads over a history have no strategies.
  EXPECT_THROW(read_ops_of(named_scheme("mhc", r)), Error);
  EXPECT_THROW(read_ops_of(named_scheme("rescaled", r)), Error);
  EXPECT_THROW(read_ops_of(named_scheme("standard", r)), Error);
}

TEST(BlockLayout, LayersAndSublayersConvertBothWays) {
  for (std::int64_t K = 1; K <= 8; ++K) {
    EXPECT_EQ(block_size_from_layers(K), 2 * K);
    EXPECT_EQ(layers_per_block(block_size_from_layers(K)), K);
  }
  EXPECT_EQ(layers_per_block(3), std::nullopt);  // an odd S splits a layer
  // Kimi Linear 48B: 27 layers, 3 layers per block = 6 sublayers, 9 blocks of 10 sources at the
  // end.
  CostInputs in;
  in.layers = 27;
  in.d_model = 2304;
  in.block_layers = 3;
  const CostInputs r = resolve_cost_inputs(in);
  EXPECT_EQ(r.block_size, 6);
  EXPECT_EQ(r.blocks, 9);
  EXPECT_EQ(r.block_layers, 0);  // converted
  EXPECT_EQ(cost_input_value(r, *find_cost_input_field("block_layers")), 3);
  EXPECT_EQ(read_sources(block_layout_of(r)).back().sources(), 10);
  in.block_size = 4;
  EXPECT_THROW(resolve_cost_inputs(in), CostInputError);  // K = 3 says S = 6
  // Setting one of N, S, K replaces the others.
  CostInputs s = r;
  set_cost_input(s, "block_layers", 9);
  EXPECT_EQ(resolve_cost_inputs(s).blocks, 3);
}

TEST(BlockLayout, UnevenListsReduceToEvenOnesAndAreValidated) {
  const BlockLayout even = uniform_block_layout(12, 4);
  const BlockLayout listed{{4, 4, 4}};
  EXPECT_TRUE(listed.equal());
  for (Strategy s :
       {Strategy::stack, Strategy::arena, Strategy::fused_one_shot, Strategy::fused_two_phase}) {
    const StrategyCost a = strategy_cost(s, even), b = strategy_cost(s, listed);
    EXPECT_EQ(a.forward.read_vectors, b.forward.read_vectors);
    EXPECT_EQ(a.backward.write_vectors, b.backward.write_vectors);
  }
  CostInputs in;
  in.sublayers = 12;
  in.d_model = 64;
  in.block_sizes = {4, 4, 4};
  in.pp = 3;
  const CostInputs r = resolve_cost_inputs(in);
  EXPECT_EQ(r.blocks, 3);
  EXPECT_EQ(r.block_size, 4);
  const auto listed_boundaries = pipeline_boundaries(block_layout_of(r), 3, 1);
  const auto even_boundaries = pipeline_boundaries(ResidualMode::block, 12, 4, 3, 1);
  ASSERT_EQ(listed_boundaries.size(), even_boundaries.size());
  for (std::size_t i = 0; i < even_boundaries.size(); ++i) {
    EXPECT_EQ(listed_boundaries[i].naive_vectors, even_boundaries[i].naive_vectors);
    EXPECT_EQ(listed_boundaries[i].cached_vectors, even_boundaries[i].cached_vectors);
  }
  // An uneven list: blocks 2, 6, 4 over 3 stages of 4 sublayers; block 2 crosses a stage.
  in.block_sizes = {2, 6, 4};
  const CostInputs u = resolve_cost_inputs(in);
  const auto rows = layout_rows(block_layout_of(u), 3, 1);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].first_sublayer, 3);
  EXPECT_EQ(rows[1].last_sublayer, 8);
  EXPECT_TRUE(rows[1].crosses_stage);
  EXPECT_FALSE(rows[2].crosses_stage);
  EXPECT_TRUE(rows[1].splits_layer == false);  // sublayers 3..8 = layers 2..4 whole
  EXPECT_EQ(rows[2].sources_min, 3);           // sublayer 9 sees emb, b1, b2
  EXPECT_EQ(rows[2].sources_max, 4);           // ... later ones the partial sum as well
  // The boundary after sublayer 4 has block 1 done and block 2 open.
  const auto boundaries = pipeline_boundaries(block_layout_of(u), 3, 1);
  EXPECT_EQ(boundaries[0].completed_blocks, 1);
  EXPECT_TRUE(boundaries[0].partial);
  EXPECT_EQ(boundaries[0].naive_vectors, 3);
  // Bad lists: wrong sum, a zero, text that is not a list.
  in.block_sizes = {2, 6, 5};
  try {
    resolve_cost_inputs(in);
    FAIL();
  } catch (const CostInputError& e) {
    EXPECT_EQ(e.field, "block_sizes");
    EXPECT_NE(std::string(e.what()).find("sum to 13"), std::string::npos) << e.what();
  }
  in.block_sizes = {0, 12};
  EXPECT_THROW(resolve_cost_inputs(in), CostInputError);
  in.block_sizes = {4, 4, 4};
  in.blocks = 2;
  EXPECT_THROW(resolve_cost_inputs(in), CostInputError);  // the list says N = 3
  EXPECT_EQ(parse_block_list("6, 6,4", "--block-sizes"), (std::vector<std::int64_t>{6, 6, 4}));
  EXPECT_THROW(parse_block_list("6,,4", "--block-sizes"), Error);
  // An empty last item is an empty entry too (getline alone would drop it).
  for (const char* text : {"4,4,", "4,4, ", ",4"}) {
    const std::string message =
        test::error_message([&] { parse_block_list(text, "--block-sizes"); });
    EXPECT_NE(message.find("--block-sizes: an empty entry"), std::string::npos)
        << text << ": " << message;
  }
  EXPECT_THROW(parse_block_list("6,x", "--block-sizes"), Error);
  EXPECT_THROW(parse_block_list("6,-2", "--block-sizes"), Error);
}

TEST(Strategy, HugeModelsAreRefusedNotListed) {
  // The closed forms stay O(P·V) for any L: a billion one-sublayer blocks evaluate at once.
  CostInputs in;
  in.sublayers = 1'000'000'000;
  in.blocks = 1'000'000'000;
  in.d_model = 1;
  in.pp = 4;
  const CostReport report = evaluate_costs(resolve_cost_inputs(in));
  EXPECT_EQ(report.boundaries.size(), 3u);
  EXPECT_EQ(report.boundaries[0].completed_blocks, 250'000'000);
  // Per-read counts and listed layouts have limits, with a message.
  EXPECT_THROW(uniform_block_layout(1'000'000'000, 1), Error);
  const std::string message = test::error_message(
      [] { strategy_cost(Strategy::stack, uniform_block_layout(200'000, 1000)); });
  EXPECT_NE(message.find("exceeds 100000"), std::string::npos) << message;
  // At the limit, stack's O(L^2) fan-in is one row per read, not one per source.
  const StrategyCost full = strategy_cost(Strategy::stack, uniform_block_layout(2000, 1));
  EXPECT_LT(full.backward_calls.size(), 10u * 2001);
  EXPECT_EQ(full.backward.launches, 7 * 2001 + 2001 * 2002 / 2);
}

TEST(Strategy, CallTimeIsTheFloorOrTheBandwidthTime) {
  Hardware hw;
  hw.hbm_bandwidth = 1e12;
  hw.memory_efficiency = 0.5;
  hw.kernel_floor = 4e-6;
  // 10 vectors x d = 1000 x 1 token x 2 B = 20 kB: 40 ns of bandwidth, so the floor.
  const std::vector<KernelCall> calls = {{"a", 0, 8, 2}};
  CallTime t = calls_time(calls, 1000, 1, 2, hw);
  EXPECT_DOUBLE_EQ(t.seconds, 4e-6);
  EXPECT_EQ(t.floor_bound, 1);
  // 1e5 tokens: 2 GB / 0.5 TB/s = 4 ms.
  t = calls_time(calls, 1000, 1e5, 2, hw);
  EXPECT_DOUBLE_EQ(t.seconds, 2e9 / 0.5e12);
  EXPECT_EQ(t.floor_bound, 0);
  // The crossover: floor · bw · eff / bytes per token = 4e-6 · 0.5e12 / 20000 = 100 tokens.
  EXPECT_DOUBLE_EQ(crossover_tokens(10, 1000, 2, hw), 100);
}

TEST(Strategy, DecodeIsLaunchBoundAndFusingHelps) {
  CostInputs in;
  in.layers = 27;
  in.d_model = 2304;
  in.block_size = 6;
  in.batch = 1;
  const CostInputs r = resolve_cost_inputs(in);
  const Hardware h100 = load_hardware("h100");
  const StrategyStep stack =
      strategy_step(Strategy::stack, ResidualMode::block, r, Phase::decode, false, h100);
  const StrategyStep fused =
      strategy_step(Strategy::fused_one_shot, ResidualMode::block, r, Phase::decode, false, h100);
  EXPECT_EQ(stack.forward.floor_bound, stack.forward.launches);  // one token: all at the floor
  EXPECT_EQ(fused.forward.launches, 55);                         // L + 1 reads
  // A sum of 55 launches at the floor: 55 u of it; 64 u.
  EXPECT_TRUE(test::near_relative(fused.forward.seconds, 55 * h100.kernel_floor,
                                  test::roundoffs<double>(64), 0.0, "55 launches"));
  EXPECT_GT(stack.overhead_seconds, 4 * fused.overhead_seconds);
  EXPECT_LT(fused.overhead_seconds, fused.forward.seconds);  // minus the standard adds
}

TEST(Recompute, CheckpointingTradesMemoryForRecompute) {
  CostInputs in;
  in.sublayers = 32;
  in.d_model = 1024;
  in.block_size = 4;
  in.tokens = 2048;
  in.pp = 4;
  const CostInputs r = resolve_cost_inputs(in);
  const auto none =
      recompute_report(Checkpointing::none, ResidualMode::block, Strategy::fused_one_shot, r);
  const auto layers =
      recompute_report(Checkpointing::layers, ResidualMode::block, Strategy::fused_one_shot, r);
  const auto chunk =
      recompute_report(Checkpointing::chunk, ResidualMode::block, Strategy::fused_one_shot, r);
  ASSERT_EQ(none.ranks.size(), 4u);
  double recompute = 0;
  for (std::size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(none.ranks[k].recompute_flops, 0);
    EXPECT_LT(layers.ranks[k].total_bytes(), none.ranks[k].total_bytes());
    EXPECT_LT(chunk.ranks[k].total_bytes(), layers.ranks[k].total_bytes());
    EXPECT_EQ(none.ranks[k].sublayers, 8);
    // No checkpointing (scores recomputed, flash-style): per layer, bf16 (2 bytes), of the
    // SwiGLU layer (docs/math.md §3.7): norm and projection inputs 2h + 2h, Q K V and the
    // out-projection input 4h, gate, up and down inputs 3F with F = floor(8h/3) = 2730; 4 layers
    // per rank of 2048 tokens.
    EXPECT_DOUBLE_EQ(none.ranks[k].activation_bytes, 4 * 2.0 * (8 * 1024 + 3 * 2730) * 2048);
    recompute += layers.ranks[k].recompute_flops;
  }
  // Rank 1's chunk (sublayers 9..16) received emb + b1, b2 and produced b3, b4.
  EXPECT_DOUBLE_EQ(none.ranks[1].history_bytes, 5.0 * 1024 * 2048 * 2);
  EXPECT_DOUBLE_EQ(chunk.ranks[1].history_bytes, 3.0 * 1024 * 2048 * 2);
  // Recomputing every layer once costs one forward of the model plus its depth attention.
  // The final read (9 sources: emb and 8 blocks) belongs to no chunk.
  const double depth =
      depth_attention_flops(ResidualMode::block, 32, 4, 1024) * 2048 - (6.0 * 9 + 2) * 1024 * 2048;
  // Flop counts (integers below 2^53, mostly exact) summed over 4 ranks of 8 sublayers and over
  // the model: ~40 additions on each side; 128 u of the total.
  EXPECT_TRUE(test::near_relative(recompute, layers.forward_flops + depth,
                                  test::roundoffs<double>(128), 0.0, "recompute flops"));
  // The stack strategy's saved tensors dominate its memory without checkpointing.
  const auto stack = recompute_report(Checkpointing::none, ResidualMode::full, Strategy::stack, r);
  EXPECT_GT(stack.ranks[3].saved_bytes, stack.ranks[3].activation_bytes);
}

TEST(Calibration, TheCommittedTableParsesAndEveryPointIsModelled) {
  const CalibrationTable table = builtin_calibration();
  ASSERT_GE(table.points.size(), 8u);
  const auto rows = evaluate_calibration(table);
  ASSERT_EQ(rows.size(), table.points.size());
  for (const auto& row : rows) {
    EXPECT_FALSE(row.point.source.empty()) << row.point.id;
    EXPECT_TRUE(std::isfinite(row.modelled) && row.modelled != 0) << row.point.id;
    EXPECT_GT(row.ratio, 0) << row.point.id;
  }
  // The fitted floor reproduces its own point exactly.
  for (const auto& row : rows) {
    if (row.point.id == "vllm-50185-1tok") {
      EXPECT_TRUE(row.point.fitted);
      EXPECT_DOUBLE_EQ(row.modelled, 4.16e-6);
      EXPECT_EQ(row.regime, "floor-bound");
    }
    if (row.point.id == "vllm-50185-8192tok") EXPECT_EQ(row.regime, "bandwidth-bound");
  }
  const CalibrationError error = calibration_error(rows);
  EXPECT_GE(error.points, 4);
  EXPECT_GE(error.worst_factor, error.typical_factor);
}

TEST(Calibration, BadTablesNameTheLineAndWhatWasExpected) {
  const std::string good = R"(
[[point]]
id = "a"
source = "s"
measured_text = "1 us"
quantity = "call_seconds"
measured = 1e-6
hardware = "h100"
call = "fused_read"
sources = 3
d_model = 64
batch = 1
phase = "decode"
)";
  EXPECT_EQ(parse_calibration(good, "t.toml").points.size(), 1u);
  auto message = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    try {
      parse_calibration(text, "t.toml");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message("quantity = \"call_seconds\"", "quantity = \"speed\"").find("t.toml:6:"),
            std::string::npos);
  EXPECT_NE(message("hardware = \"h100\"", "hardware = \"h1000\"").find("did you mean 'h100'"),
            std::string::npos);
  EXPECT_NE(message("sources = 3", "sourcez = 3").find("sourcez"), std::string::npos);
  EXPECT_NE(message("measured = 1e-6", "measured = -1").find("positive"), std::string::npos);
  EXPECT_NE(message("call = \"fused_read\"", "call = \"fused\"").find("t.toml:9:"),
            std::string::npos);
  const std::string step = R"(
[[point]]
id = "b"
source = "s"
measured_text = "+10 %"
quantity = "step_overhead"
measured = 0.1
hardware = "h100"
strategy = "stak"
layers = 4
d_model = 64
blocks = 2
)";
  try {
    parse_calibration(step, "u.toml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("u.toml:9:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("stack"), std::string::npos) << e.what();
  }
}

}  // namespace test_strategy
}  // namespace attnres
