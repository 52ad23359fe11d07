// The cost engine (docs/math.md §3) against the paper's numbers, brute-force counts and invariants.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "attnres/architecture.hpp"
#include "attnres/cost.hpp"
#include "attnres/time_model.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_cost {

TEST(CostIo, PaperTable1AtL128N8S16M4) {
  const std::int64_t d = 1000;  // results in units of d
  EXPECT_DOUBLE_EQ(io_standard(d).total(), 3.0 * d);
  EXPECT_DOUBLE_EQ(io_standard(d).reads, 2.0 * d);
  EXPECT_DOUBLE_EQ(io_block_two_phase(8, 16, d).total(), 5.5 * d);
  EXPECT_DOUBLE_EQ(io_block_two_phase(8, 16, d).writes, 2.0 * d);
  EXPECT_DOUBLE_EQ(io_full_two_phase(8, 16, d).total(), 24.0 * d);
  EXPECT_DOUBLE_EQ(io_full_two_phase(8, 16, d).reads, 22.0 * d);
  EXPECT_DOUBLE_EQ(io_mhc(4, d).total(), 34.0 * d + 48.0);
  EXPECT_DOUBLE_EQ(io_mhc(4, d).reads, 26.0 * d + 24.0);
  EXPECT_DOUBLE_EQ(io_full_naive_mean(128, d).total(), 128.0 * d);  // ≈ L·d
}

TEST(CostIo, FullNaiveMeanIsTheMeanOfThePerSublayerCosts) {
  const std::int64_t L = 37, d = 8;
  double sum = 0;
  for (std::int64_t l = 1; l <= L; ++l) sum += io_full_naive_at(l, d).total();
  EXPECT_DOUBLE_EQ(io_full_naive_mean(L, d).total(), sum / L);
}

TEST(CostIo, BestFullScheduleIsTheBruteForceMinimumNearSqrtL) {
  for (std::int64_t L : {1, 2, 7, 54, 128, 1000, 4097}) {
    std::int64_t best = INT64_MAX;
    for (std::int64_t s = 1; s <= L; ++s) best = std::min(best, s + block_count(L, s));
    const auto choice = best_full_schedule_block(L, 1);
    EXPECT_EQ(choice.block_size + choice.blocks, best) << "L = " << L;
    EXPECT_EQ(choice.blocks, block_count(L, choice.block_size));
    EXPECT_LE(std::abs(static_cast<double>(choice.block_size) - std::sqrt(L)),
              std::sqrt(L) / 2 + 1);
  }
  EXPECT_EQ(best_full_schedule_block(128, 1).io_elements, 23.0);  // S=11 or 12: 11 + 12 = 23
  EXPECT_EQ(best_full_schedule_block(1'000'000, 1).io_elements, 2000.0);  // 2 sqrt(L)
}

TEST(CostHistory, PaperPrefillExample) {
  // T = 128K, N = 8, d = 7168, bf16: 15.0 GB; 8-way sharding 1.88 GB; 16K chunks 0.235 GB.
  const auto memory = prefill_history_bytes(1, 131072, 8, 7168, 2, 8, 16384);
  EXPECT_EQ(memory.total_bytes, 2LL * 8 * 131072 * 7168);
  // The paper's figures, here to 4 significant digits: within a unit of the last digit.
  EXPECT_NEAR(memory.total_bytes / 1e9, 15.03, 0.01);
  EXPECT_NEAR(memory.per_device_bytes / 1e9, 1.879, 0.001);
  EXPECT_NEAR(memory.per_device_chunked_bytes / 1e9, 0.2349, 0.0001);
  EXPECT_EQ(history_vectors_full(54), 55);
  EXPECT_EQ(history_vectors_block(9), 10);
}

TEST(CostPipeline, PaperFormulasAtP4V2) {
  const auto comm = pipeline_comm_paper(4, 2, 8, 1);  // N_p = 1, d = 1
  EXPECT_DOUBLE_EQ(comm.blocks_per_chunk, 1.0);
  EXPECT_DOUBLE_EQ(comm.naive_elements, 28.0);
  EXPECT_DOUBLE_EQ(comm.cached_elements, 22.0);
  EXPECT_DOUBLE_EQ(comm.peak_naive_elements, 7.0);
  EXPECT_DOUBLE_EQ(comm.peak_cached_elements, 4.0);
  const auto one_stage = pipeline_comm_paper(4, 1, 8, 1);
  EXPECT_DOUBLE_EQ(one_stage.naive_elements, one_stage.cached_elements);  // V = 1
}

TEST(CostPipeline, ExactBoundariesReduceToThePaperWhenBlocksAlignWithChunks) {
  for (std::int64_t P : {1, 2, 4, 8}) {
    for (std::int64_t V : {1, 2, 4}) {
      for (std::int64_t blocks_per_chunk : {1, 2, 3}) {
        const std::int64_t C = P * V, S = 3, N = C * blocks_per_chunk, L = N * S;
        // The paper's accounting splits sublayers evenly (S = 3 cuts layers).
        const auto boundaries =
            pipeline_boundaries(ResidualMode::block, L, S, P, V, chunk_last_sublayers(L, C));
        ASSERT_EQ(static_cast<std::int64_t>(boundaries.size()), C - 1);
        std::int64_t naive = 0, cached = 0, embedding_sends = 0;
        for (const auto& b : boundaries) {
          EXPECT_FALSE(b.partial);
          naive += b.naive_block_vectors;
          cached += b.cached_block_vectors;
          embedding_sends += b.naive_vectors - b.naive_block_vectors;
        }
        const auto paper = pipeline_comm_paper(P, V, N, 1);
        EXPECT_EQ(static_cast<double>(naive), paper.naive_elements) << P << " " << V;
        EXPECT_EQ(static_cast<double>(cached), paper.cached_elements) << P << " " << V;
        EXPECT_EQ(embedding_sends, C - 1);  // the embedding is a source the paper leaves out
      }
    }
  }
}

TEST(CostPipeline, NaiveAndCachedAgreeWithOneVirtualStage) {
  for (const auto& b : pipeline_boundaries(ResidualMode::block, 54, 6, 4, 1)) {
    EXPECT_EQ(b.naive_vectors, b.cached_vectors);
    EXPECT_EQ(b.naive_vectors, b.cached_own_vectors);
  }
}

TEST(CostPipeline, UnalignedBlocksAndChunksCountThePartialSum) {
  // L = 10, S = 4 (blocks {1-4}, {5-8}, {9-10}), P = 3, V = 1: chunks listed to end at 4, 7, 10
  // (the default keeps layers whole: 4, 8, 10).
  const auto boundaries = pipeline_boundaries(ResidualMode::block, 10, 4, 3, 1, {4, 7, 10});
  EXPECT_EQ(pipeline_boundaries(ResidualMode::block, 10, 4, 3, 1)[1].last_sublayer, 8);
  ASSERT_EQ(boundaries.size(), 2u);
  EXPECT_EQ(boundaries[0].last_sublayer, 4);
  EXPECT_EQ(boundaries[0].completed_blocks, 1);
  EXPECT_FALSE(boundaries[0].partial);
  EXPECT_EQ(boundaries[0].naive_vectors, 2);  // emb, b1
  EXPECT_EQ(boundaries[1].last_sublayer, 7);
  EXPECT_EQ(boundaries[1].completed_blocks, 1);
  EXPECT_TRUE(boundaries[1].partial);         // v5..v7 so far
  EXPECT_EQ(boundaries[1].naive_vectors, 3);  // emb, b1, partial
}

TEST(CostPipeline, CachePoliciesMatchAHandCount) {
  // L = 8, S = 1 (every output a block), P = 2, V = 2: chunks end at 2, 4, 6.
  const auto b = pipeline_boundaries(ResidualMode::block, 8, 1, 2, 2);
  ASSERT_EQ(b.size(), 3u);
  // into chunk 1 (rank 1, first visit): emb + v1 v2
  EXPECT_EQ(b[0].cached_vectors, 3);
  // into chunk 2 (rank 0, had received nothing, produced v1 v2): paper cache sends v1..v4,
  // keeping its own output it needs only v3 v4.
  EXPECT_EQ(b[1].naive_vectors, 5);
  EXPECT_EQ(b[1].cached_vectors, 4);
  EXPECT_EQ(b[1].cached_own_vectors, 2);
  // into chunk 3 (rank 1, received emb v1 v2, produced v3 v4): paper sends v3..v6, own v5 v6.
  EXPECT_EQ(b[2].cached_vectors, 4);
  EXPECT_EQ(b[2].cached_own_vectors, 2);
}

TEST(CostPipeline, StandardResidualSendsOneHiddenStatePerBoundary) {
  for (const auto& b : pipeline_boundaries(ResidualMode::standard, 16, 0, 4, 2)) {
    EXPECT_EQ(b.naive_vectors, 1);
    EXPECT_EQ(b.cached_vectors, 1);
  }
}

TEST(CostPipeline, RejectsMoreChunksThanSublayers) {
  EXPECT_THROW(pipeline_boundaries(ResidualMode::block, 6, 2, 4, 2), Error);
}

TEST(CostFlops, DepthAttentionIsSmallNextToTheModel) {
  // Kimi-Linear-like: L = 54, S = 6, d = 2304, T = 4096.
  const double depth = depth_attention_flops(ResidualMode::block, 54, 6, 2304);
  CostInputs kimi;
  kimi.sublayers = 54;
  kimi.block_size = 6;
  kimi.d_model = 2304;
  kimi.ffn = 6144;
  kimi.tokens = 4096;
  const double model = model_flops_per_token(resolve_cost_inputs(kimi));
  EXPECT_GT(depth, 0);
  EXPECT_LT(depth / model, 0.01);
  CostInputs tiny;
  tiny.sublayers = 2;
  tiny.d_model = 10;
  tiny.ffn = 20;
  tiny.tokens = 4;
  tiny.blocks = 1;
  EXPECT_DOUBLE_EQ(model_flops_per_token(resolve_cost_inputs(tiny)),
                   (8.0 * 100 + 2 * 4 * 10) + 6.0 * 10 * 20);
}

TEST(CostScaling, BlockNeedsAbout125xLessComputeNearLoss1695) {
  const auto at = scaling_at_loss(1.695);
  EXPECT_NEAR(at.multiplier_block, 1.25, 0.02);  // the paper's "1.25x", read off its fits: 1.253
  EXPECT_GT(at.multiplier_full, at.multiplier_block);
  const auto& fits = paper_scaling_fits();
  // compute_for inverts loss_at.
  // (A / loss)^(1 / a) then A C^-a: the rounding of A / loss and of 1 / a (u each, raised to
  // 1 / a = 17 in C) comes back through ^-a, ~5 u in all; 16 u.
  EXPECT_TRUE(test::near_relative(fits[1].loss_at(fits[1].compute_for(1.7)), 1.7,
                                  test::roundoffs<double>(16), 0.0, "loss_at(compute_for)"));
  EXPECT_THROW(scaling_at_loss(0.0), Error);
}

TEST(CostScaling, ALossWhoseComputeIsNotAFiniteNumberIsRefusedWithTheRange) {
  // Issue 42: 1e308 gave compute 0 and multipliers NaN ("-nan", exit 0).
  for (const double loss : {1e308, 1e30, 1e-300}) {
    try {
      (void)scaling_at_loss(loss);
      ADD_FAILURE() << loss << " was accepted";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("expected a loss between"), std::string::npos)
          << error.what();
    }
  }
  const auto at = scaling_at_loss(1e10);  // far out, but every answer is a finite number
  EXPECT_TRUE(std::isnormal(at.compute_baseline) && std::isnormal(at.multiplier_full));
}

TEST(CostArchitecture, MlaWidthsAreCappedSoByteCountsCannotOverflow) {
  // Issue 42: rope_dim = 2^63 - 1 gave 1e28-byte memory rows.
  CostInputs in;
  in.sublayers = 8;
  in.d_model = 16;
  in.blocks = 2;
  in.attention = AttentionKind::mla;
  in.rope_dim = std::numeric_limits<std::int64_t>::max();
  auto problem = try_resolve_cost_inputs(in);
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->field, "rope_dim");
  EXPECT_NE(problem->message.find("at most 1000000"), std::string::npos) << problem->message;
  in.rope_dim = 1'000'000;
  EXPECT_FALSE(try_resolve_cost_inputs(in).has_value());
}

CostInputs paper_inputs() {
  CostInputs in;
  in.sublayers = 128;
  in.blocks = 8;
  in.d_model = 7168;
  return in;
}

TEST(CostInputsCheck, ResolvesBlocksAndBlockSize) {
  auto in = resolve_cost_inputs(paper_inputs());
  EXPECT_EQ(in.block_size, 16);
  EXPECT_EQ(in.ffn, 7168 * 8 / 3);
  CostInputs by_size = paper_inputs();
  by_size.blocks = 0;
  by_size.block_size = 6;
  by_size.sublayers = 0;
  by_size.layers = 27;
  const auto kimi = resolve_cost_inputs(by_size);
  EXPECT_EQ(kimi.sublayers, 54);
  EXPECT_EQ(kimi.blocks, 9);
}

void expect_field_error(CostInputs in, const std::string& field, const std::string& needle) {
  try {
    resolve_cost_inputs(in);
    ADD_FAILURE() << "accepted; expected an error on " << field;
  } catch (const CostInputError& error) {
    EXPECT_EQ(error.field, field) << error.what();
    EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
  }
}

TEST(CostInputsCheck, RejectsImpossibleConfigurations) {
  auto in = paper_inputs();
  in.blocks = 200;
  expect_field_error(in, "blocks", "exceeds L = 128");
  in = paper_inputs();
  in.blocks = 0;
  expect_field_error(in, "blocks", "give the number of blocks");
  in = paper_inputs();
  in.d_model = -5;
  expect_field_error(in, "d_model", "must be >= 1");
  in = paper_inputs();
  in.block_size = 10;
  expect_field_error(in, "blocks", "disagrees");
  in = paper_inputs();
  in.pp = 16;
  in.vpp = 16;
  expect_field_error(in, "pp", "exceed L = 128");
  in = paper_inputs();
  in.sublayers = 10;
  in.blocks = 6;
  expect_field_error(in, "blocks", "cannot cover");
  in = paper_inputs();
  in.tokens = 1'000'000'000;
  in.batch = 1'000'000'000;
  expect_field_error(in, "tokens", "overflows");
  in = paper_inputs();
  in.chunk = 5000;
  expect_field_error(in, "chunk", "exceeds T");
}

TEST(CostInputsCheck, HandlesAMillionSublayersAndABillionTokens) {
  CostInputs in;
  in.sublayers = 1'000'000;
  in.blocks = 1000;
  in.d_model = 8192;
  in.tokens = 1'000'000'000;
  const auto report = evaluate_costs(resolve_cost_inputs(in));
  EXPECT_EQ(report.history_full_vectors, 1'000'001);
  EXPECT_EQ(report.prefill.total_bytes, 2LL * 1000 * 1'000'000'000 * 8192);
}

// Past kMaxSublayers, L is refused with the bound before any count is formed (2^63 - 1 sublayers
// in 8 blocks printed "S = -1152921504606846975 gives -7 blocks").
TEST(CostInputsCheck, RefusesMoreSublayersThanTheBound) {
  auto in = paper_inputs();
  in.sublayers = std::numeric_limits<std::int64_t>::max();
  in.blocks = 8;
  expect_field_error(in, "sublayers",
                     "sublayers L must be at most " + std::to_string(kMaxSublayers) + ", got " +
                         std::to_string(std::numeric_limits<std::int64_t>::max()));
  in = paper_inputs();
  in.sublayers = kMaxSublayers + 1;
  expect_field_error(in, "sublayers", "at most 3000000000");
  in = paper_inputs();
  in.sublayers = 0;
  in.layers = std::numeric_limits<std::int64_t>::max() / 2;
  expect_field_error(in, "layers", "transformer layers must be at most 1500000000");
  // At the bound, N and S are what they should be.
  in = paper_inputs();
  in.sublayers = kMaxSublayers;
  in.blocks = 8;
  in.d_model = 1;
  const CostInputs resolved = resolve_cost_inputs(in);
  EXPECT_EQ(resolved.block_size, kMaxSublayers / 8);
  EXPECT_EQ(resolved.blocks, 8);
}

TEST(CostReportAll, EvaluatesThePaperSetting) {
  auto in = paper_inputs();
  in.pp = 4;
  in.vpp = 2;
  const auto report = evaluate_costs(resolve_cost_inputs(in));
  EXPECT_DOUBLE_EQ(report.io.block_two_phase.total(), 5.5 * 7168);
  EXPECT_DOUBLE_EQ(report.pipeline_paper.naive_elements, 28.0 * 7168);
  EXPECT_DOUBLE_EQ(report.pipeline_paper.cached_elements, 22.0 * 7168);
  EXPECT_EQ(report.boundaries.size(), 7u);
  // Blocks align with chunks here: exact block totals + one embedding per first-stage boundary.
  EXPECT_EQ(report.boundary_naive_elements, (28 + 7) * 7168);
  EXPECT_EQ(report.boundary_cached_elements, (22 + 3) * 7168);
}

// ---------------------------------------------------------------- every residual scheme
// (docs/scheme-costs.md). Small sizes with the arithmetic written out: L = 8 sublayers, N = 2
// blocks of S = 4, d = 16, m = 2 streams, 20 Sinkhorn iterations, bf16 (b = 2).

CostInputs small_inputs() {
  CostInputs in;
  in.sublayers = 8;
  in.blocks = 2;
  in.d_model = 16;
  in.streams = 2;
  return resolve_cost_inputs(in);
}

SchemeCost cost_of(const std::string& spec, const CostInputs& in) {
  return scheme_cost(parse_scheme_spec(spec, in), in);
}

TEST(SchemeCost, PaperTable1RowsAtL128N8S16M4) {
  CostInputs in = paper_inputs();
  in.d_model = 1000;
  in = resolve_cost_inputs(in);
  const double d = 1000;
  EXPECT_DOUBLE_EQ(cost_of("standard", in).io.total(), 3.0 * d);
  EXPECT_DOUBLE_EQ(cost_of("block", in).io.total(), 5.5 * d);
  EXPECT_DOUBLE_EQ(cost_of("full", in).io.total(), 24.0 * d);
  EXPECT_DOUBLE_EQ(cost_of("mhc", in).io.total(), 34.0 * d + 48.0);
  EXPECT_DOUBLE_EQ(cost_of("full", in).io_one_shot.total(), 128.0 * d);  // the naive row, L·d
  EXPECT_EQ(cost_of("block", in).io_formula, "(N/S + 5)d");
  EXPECT_EQ(cost_of("full", in).io_formula, "(S + N)d");
  EXPECT_EQ(cost_of("mhc", in).io_formula, "(8m + 2)d + 2m^2 + 4m");
  EXPECT_EQ(cost_of("standard", in).io_formula, "3d");
  // The paper's defaults reuse the depth-attention FLOPs of docs/math.md §3.
  EXPECT_DOUBLE_EQ(cost_of("full", in).mixing_flops,
                   depth_attention_flops(ResidualMode::full, 128, 1, 1000));
  EXPECT_DOUBLE_EQ(cost_of("block", in).mixing_flops,
                   depth_attention_flops(ResidualMode::block, 128, 16, 1000));
}

TEST(SchemeCost, IoRowsByHandAtL8N2S4D16M2) {
  const CostInputs in = small_inputs();
  // standard and rescaled: read h and v, write h = 2d + d = 48.
  EXPECT_DOUBLE_EQ(cost_of("standard", in).io.total(), 48);
  EXPECT_DOUBLE_EQ(cost_of("rescaled", in).io.total(), 48);
  // Full two-phase (S + N - 2)d + 2d = 4·16 + 32 = 96 = 6d; every static-query variant the same.
  for (const char* name : {"full", "full_sigmoid", "full_sigmoid_normalized", "full_no_key_norm",
                           "full_multihead", "full_scalars", "denseformer"}) {
    EXPECT_DOUBLE_EQ(cost_of(name, in).io.total(), 96) << name;
    EXPECT_TRUE(cost_of(name, in).two_phase) << name;
  }
  // Block two-phase (N/S + 3)d + 2d = (0.5 + 5)·16 = 88.
  for (const char* name : {"block", "block_sigmoid", "block_sigmoid_normalized",
                           "block_no_key_norm", "block_multihead", "block_scalars"}) {
    EXPECT_DOUBLE_EQ(cost_of(name, in).io.total(), 88) << name;
  }
  // Full naive: mean over l of 2(l-1)d + d = (L-1)d + d = 7·16 + 16 = 128.
  EXPECT_DOUBLE_EQ(cost_of("full", in).io_one_shot.total(), 128);
  // Input-dependent query: one-shot plus reading u: 128 + 16 = 144.
  const SchemeCost input = cost_of("full_input_query", in);
  EXPECT_DOUBLE_EQ(input.io.reads, 112 + 16);
  EXPECT_DOUBLE_EQ(input.io.writes, 16);
  EXPECT_FALSE(input.two_phase);
  EXPECT_NE(input.two_phase_reason.find("input-dependent query"), std::string::npos);
  // DenseFormer one-shot, values only: mean of (l-1)d reads = 3.5·16 = 56, + 16 written = 72.
  EXPECT_DOUBLE_EQ(cost_of("denseformer", in).io_one_shot.total(), 72);
  // Window W = 2: reads 2·min(l-1, 2)·16 summed over l = 1..8: 32·(0+1+2+2+2+2+2+2) = 416, mean 52;
  // + 16 written = 68 = 4.25d (closed form W(2L - W - 1)/L = 2·13/8 = 3.25).
  const SchemeCost window = cost_of("full:window=2", in);
  EXPECT_DOUBLE_EQ(window.io.reads, 52);
  EXPECT_DOUBLE_EQ(window.io.total(), 68);
  EXPECT_EQ(window.history_vectors, 3);  // v_0 and the last 2 outputs
  // Block one-shot: 21 (read, source) pairs over 9 reads (1+2+2+2 | 2+3+3+3 | 3), keys and values:
  // 2·21/9·16 + 16; with the input query + 16.
  EXPECT_DOUBLE_EQ(cost_of("block", in).io_one_shot.total(), 2.0 * 21 / 9 * 16 + 16);
  EXPECT_DOUBLE_EQ(cost_of("block_input_query", in).io.total(), 2.0 * 21 / 9 * 16 + 32);
  // mHC: (8m + 2)d + 2m² + 4m = 18·16 + 8 + 8 = 304; reads (6m + 2)d + m² + 2m = 224 + 8.
  EXPECT_DOUBLE_EQ(cost_of("mhc", in).io.total(), 304);
  EXPECT_DOUBLE_EQ(cost_of("mhc", in).io.reads, 232);
  EXPECT_DOUBLE_EQ(cost_of("mhc_static", in).io.total(), 304);
}

TEST(SchemeCost, HistoryParamsAndFlopsByHand) {
  const CostInputs in = small_inputs();
  // Full: 9 vectors (v_0..v_8), 9·16·2 = 288 bytes; query + gain per read: 9·2·16 = 288 params;
  // 45 (read, source) pairs ((L+1)(L+2)/2) at 6d plus 9 reads at 2d: 45·96 + 9·32 = 4608 FLOPs.
  const SchemeCost full = cost_of("full", in);
  EXPECT_EQ(full.history_vectors, 9);
  EXPECT_DOUBLE_EQ(full.history_bytes, 288);
  EXPECT_DOUBLE_EQ(full.params, 288);
  EXPECT_DOUBLE_EQ(full.mixing_flops, 4608);
  EXPECT_DOUBLE_EQ(full.mixing_flops_per_sublayer, 4608.0 / 8);
  // Block S = 4: 3 vectors (emb, b1, b2); 21 pairs: 21·96 + 9·32 = 2304; same parameters.
  const SchemeCost block = cost_of("block", in);
  EXPECT_EQ(block.history_vectors, 3);
  EXPECT_DOUBLE_EQ(block.params, 288);
  EXPECT_DOUBLE_EQ(block.mixing_flops, 2304);
  // No key norm: 4d per pair, d per read (the division): 45·64 + 9·16 = 3024; query only: 144.
  EXPECT_DOUBLE_EQ(cost_of("full_no_key_norm", in).mixing_flops, 3024);
  EXPECT_DOUBLE_EQ(cost_of("full_no_key_norm", in).params, 144);
  // Sigmoid: no division, w ⊙ g stays: 45·96 + 9·16 = 4464. Normalised sigmoid divides: 4608.
  EXPECT_DOUBLE_EQ(cost_of("full_sigmoid", in).mixing_flops, 4464);
  EXPECT_DOUBLE_EQ(cost_of("full_sigmoid_normalized", in).mixing_flops, 4608);
  // Heads only split the same d-wide work: as Full.
  EXPECT_DOUBLE_EQ(cost_of("full_multihead", in).mixing_flops, 4608);
  EXPECT_EQ(cost_of("full_multihead", in).scheme.heads, 16);
  // Input query: + (2d² + 4d) per read = 9·(512 + 64) = 5184 → 9792; params + 9·d² = 2304 → 2592.
  EXPECT_DOUBLE_EQ(cost_of("full_input_query", in).mixing_flops, 9792);
  EXPECT_DOUBLE_EQ(cost_of("full_input_query", in).params, 2592);
  // Scalars: one logit per pair (45), 2d per pair + d per read: 1440 + 144 = 1584.
  EXPECT_DOUBLE_EQ(cost_of("full_scalars", in).params, 45);
  EXPECT_DOUBLE_EQ(cost_of("full_scalars", in).mixing_flops, 1584);
  EXPECT_DOUBLE_EQ(cost_of("block_scalars", in).params, 21);
  EXPECT_DOUBLE_EQ(cost_of("block_scalars", in).mixing_flops, 21 * 32 + 9 * 16);
  // DenseFormer: (L+1)(L+2)/2 = 45 weights, 2d per pair, no division: 1440.
  EXPECT_DOUBLE_EQ(cost_of("denseformer", in).params, 45);
  EXPECT_DOUBLE_EQ(cost_of("denseformer", in).mixing_flops, 1440);
  EXPECT_EQ(cost_of("denseformer", in).history_vectors, 9);
  // Window W = 2: pairs 1 + 2 + 3·7 = 24 (closed form 9 + 3 + 6·2); 24·96 + 9·32 = 2592.
  EXPECT_EQ(depth_read_source_pairs_window(8, 2), 24);
  EXPECT_DOUBLE_EQ(cost_of("full:window=2", in).mixing_flops, 2592);
  // Standard: one add per sublayer, 8·16 = 128; rescaled: three, 384; neither has parameters.
  EXPECT_DOUBLE_EQ(cost_of("standard", in).mixing_flops, 128);
  EXPECT_DOUBLE_EQ(cost_of("rescaled", in).mixing_flops, 384);
  EXPECT_DOUBLE_EQ(cost_of("rescaled", in).params, 0);
  EXPECT_EQ(cost_of("rescaled", in).history_vectors, 1);
  // mHC, m = 2, d = 16, 20 iterations. Per sublayer: RMS 2md = 64, projections 2md(2m + m²) = 512,
  // Sinkhorn 4·20·m² = 320, pre-mix 2md = 64, update 2m²d + 2md = 192: 1152; × 8 + final mean md
  // = 32 → 9248. Parameters: 8·(2m + m²) = 64 biases + 64·md = 2048 projections = 2112.
  const SchemeCost mhc = cost_of("mhc", in);
  EXPECT_EQ(mhc.history_vectors, 2);
  EXPECT_DOUBLE_EQ(mhc.params, 2112);
  EXPECT_DOUBLE_EQ(mhc.mixing_flops, 9248);
  EXPECT_FALSE(mhc.two_phase);
  // Static mHC: pre-mix and update only, (64 + 192)·8 + 32 = 2080; biases only, 64.
  EXPECT_DOUBLE_EQ(cost_of("mhc_static", in).mixing_flops, 2080);
  EXPECT_DOUBLE_EQ(cost_of("mhc_static", in).params, 64);
  EXPECT_DOUBLE_EQ(cost_of("mhc:sinkhorn_iterations=3", in).mixing_flops, 9248 - 8 * 4 * 17 * 4);
}

TEST(SchemeCost, OneSourceOfTruthWithTheOtherRows) {
  for (std::int64_t L : {2, 8, 37, 128}) {
    for (std::int64_t W : std::initializer_list<std::int64_t>{1, 2, 7, L - 2, L - 1, L, L + 5}) {
      if (W < 1) continue;
      // The window row is the naive row with l - 1 capped at W: brute force.
      double reads = 0;
      for (std::int64_t l = 1; l <= L; ++l) reads += 2.0 * static_cast<double>(std::min(l - 1, W));
      EXPECT_DOUBLE_EQ(io_full_window_mean(L, W, 1).reads, reads / static_cast<double>(L))
          << L << " " << W;
      std::int64_t pairs = 0;
      for (std::int64_t r = 0; r <= L; ++r) pairs += 1 + std::min(r, W);
      EXPECT_EQ(depth_read_source_pairs_window(L, W), pairs) << L << " " << W;
    }
    EXPECT_DOUBLE_EQ(io_full_window_mean(L, L - 1, 3).total(), io_full_naive_mean(L, 3).total());
  }
  // Block one-shot is the time model's row.
  CostInputs in = paper_inputs();
  in = resolve_cost_inputs(in);
  EXPECT_DOUBLE_EQ(io_block_one_shot(128, 16, 7168).total(),
                   residual_io_elements(in, ResidualScheme::block_one_shot));
  // evaluate_costs carries every extra row, equal to scheme_cost's.
  const CostReport report = evaluate_costs(in);
  for (std::size_t i = 0; i < kSchemeIoKeyCount; ++i) {
    const SchemeCost cost = scheme_cost(named_scheme(kSchemeIoKeys[i].scheme, in), in);
    const ResidualIo& expected = kSchemeIoKeys[i].one_shot ? cost.io_one_shot : cost.io;
    EXPECT_DOUBLE_EQ(report.scheme_io[i].total(), expected.total()) << kSchemeIoKeys[i].key;
  }
  EXPECT_DOUBLE_EQ(scheme_io(named_scheme("full", in), in).total(),
                   report.io.full_two_phase.total());
  EXPECT_DOUBLE_EQ(scheme_io(named_scheme("full", in), in, true).total(),
                   report.io.full_naive.total());
  // A window of at least L is Full AttnRes.
  EXPECT_DOUBLE_EQ(cost_of("full:window=128", in).io.total(), report.io.full_two_phase.total());
  // Rescaled equals the standard row; DenseFormer's two-phase row is Full's.
  EXPECT_DOUBLE_EQ(report.scheme_io[2].total(), report.io.standard.total());
  EXPECT_DOUBLE_EQ(report.scheme_io[0].total(), report.io.full_two_phase.total());
}

TEST(SchemeCost, EveryNamedSchemeIsValidAtOddSizes) {
  CostInputs in;
  in.sublayers = 7;
  in.block_size = 3;
  in.d_model = 15;
  in.streams = 1;
  in = resolve_cost_inputs(in);
  for (const auto& name : scheme_names()) {
    const SchemeCost cost = scheme_cost(named_scheme(name, in), in);
    EXPECT_GT(cost.io.total(), 0) << name;
    EXPECT_FALSE(cost.io_formula.empty()) << name;
    EXPECT_FALSE(cost.two_phase_reason.empty()) << name;
    EXPECT_EQ(cost.two_phase, cost.scheme.two_phase_limit().empty()) << name;
    // The canonical spec parses back to the same scheme.
    EXPECT_EQ(parse_scheme_spec(cost.spec, in), cost.scheme) << name << " " << cost.spec;
  }
  EXPECT_EQ(named_scheme("full_multihead", in).heads, 15);  // the largest divisor of 15 up to 16
  EXPECT_EQ(named_scheme("block", in).block_size, 3);
  EXPECT_EQ(scheme_cost(named_scheme("block", in), in).description, "Block AttnRes (S = 3)");
}

TEST(SchemeCost, SpecsAndProblemsNameTheKey) {
  const CostInputs in = small_inputs();
  const AttnResConfig c = parse_scheme_spec("block:block_size=4,gate=sigmoid,key_norm=off", in);
  EXPECT_EQ(c.mode, ResidualMode::block);
  EXPECT_EQ(c.gate, DepthGate::sigmoid);
  EXPECT_FALSE(c.key_norm);
  EXPECT_EQ(scheme_spec(c), "block:block_size=4,gate=sigmoid,key_norm=false");
  auto expect_error = [&](const std::string& spec, const std::string& field,
                          const std::string& needle) {
    try {
      scheme_cost(parse_scheme_spec(spec, in), in);
      ADD_FAILURE() << spec << " accepted";
    } catch (const CostInputError& error) {
      EXPECT_EQ(error.field, field) << error.what();
      EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
    }
  };
  expect_error("blok", "scheme", "unknown scheme 'blok' (did you mean 'block'?)");
  expect_error("block:gat=sigmoid", "scheme", "unknown key 'gat'");
  expect_error("block:gate", "scheme", "not key=value");
  expect_error("block:gate=relu", "gate", "unknown gate 'relu'");
  expect_error("block:window=4", "window",
               "window applies to Full AttnRes (mode full) only, not to mode block");
  expect_error("full:heads=3", "heads", "positive divisor of d = 16");
  expect_error("full:block_size=2", "block_size", "applies to Block AttnRes");
  expect_error("block:block_size=9", "block_size", "between 1 and L = 8");
  // 0 is not "the default S" when typed: it is refused, naming the key and the range.
  expect_error("block:block_size=0", "block_size",
               "block_size must be between 1 and L = 8 sublayers, got 0");
  expect_error("block:block_size=-3", "block_size", "between 1 and L = 8");
  expect_error("mhc:streams=0", "streams", "at least 1");
  expect_error("full:mixing=scalars,key_norm=false", "key_norm", "mixing = attention");
  expect_error("full:window=x", "window", "must be an integer");
  expect_error("full:gate=sigmoid,gate=softmax", "gate", "twice");
}

}  // namespace test_cost
}  // namespace attnres
