// The cost engine (SPEC §3) against the paper's numbers, brute-force counts and invariants.
#include <gtest/gtest.h>

#include <cmath>

#include "attnres/cost.hpp"
#include "attnres/depth_layout.hpp"

namespace attnres {
namespace {

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
    EXPECT_LE(std::abs(static_cast<double>(choice.block_size) - std::sqrt(L)), std::sqrt(L) / 2 + 1);
  }
  EXPECT_EQ(best_full_schedule_block(128, 1).io_elements, 23.0);  // S=11 or 12: 11 + 12 = 23
  EXPECT_EQ(best_full_schedule_block(1'000'000, 1).io_elements, 2000.0);  // 2 sqrt(L)
}

TEST(CostHistory, PaperPrefillExample) {
  // T = 128K, N = 8, d = 7168, bf16: 15.0 GB; 8-way sharding 1.88 GB; 16K chunks 0.235 GB.
  const auto memory = prefill_history_bytes(1, 131072, 8, 7168, 2, 8, 16384);
  EXPECT_EQ(memory.total_bytes, 2LL * 8 * 131072 * 7168);
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
        const auto boundaries = pipeline_boundaries(ResidualMode::block, L, S, P, V);
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
  // L = 10, S = 4 (blocks {1-4}, {5-8}, {9-10}), P = 3, V = 1: chunks end at 4, 7, 10.
  const auto boundaries = pipeline_boundaries(ResidualMode::block, 10, 4, 3, 1);
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

TEST(CostFlops, SourcePairCountsMatchTheLayouts) {
  for (std::int64_t L : {1, 2, 5, 8, 13}) {
    for (std::int64_t S = 1; S <= L; ++S) {
      const auto layout = make_depth_layout(ResidualMode::block, static_cast<int>(L), static_cast<int>(S));
      std::int64_t pairs = 0;
      for (const auto& read : layout.reads) pairs += static_cast<std::int64_t>(read.size());
      EXPECT_EQ(depth_read_source_pairs(ResidualMode::block, L, S), pairs) << L << " " << S;
    }
    const auto full = make_depth_layout(ResidualMode::full, static_cast<int>(L), 0);
    std::int64_t pairs = 0;
    for (const auto& read : full.reads) pairs += static_cast<std::int64_t>(read.size());
    EXPECT_EQ(depth_read_source_pairs(ResidualMode::full, L, 1), pairs);
  }
}

TEST(CostFlops, DepthAttentionIsSmallNextToTheModel) {
  // Kimi-Linear-like: L = 54, S = 6, d = 2304, T = 4096.
  const double depth = depth_attention_flops(ResidualMode::block, 54, 6, 2304);
  const double model = model_flops_per_token(54, 2304, 6144, 4096);
  EXPECT_GT(depth, 0);
  EXPECT_LT(depth / model, 0.01);
  EXPECT_DOUBLE_EQ(model_flops_per_token(2, 10, 20, 4), (8.0 * 100 + 2 * 4 * 10) + 6.0 * 10 * 20);
}

TEST(CostScaling, BlockNeedsAbout125xLessComputeNearLoss1695) {
  const auto at = scaling_at_loss(1.695);
  EXPECT_NEAR(at.multiplier_block, 1.25, 0.02);
  EXPECT_GT(at.multiplier_full, at.multiplier_block);
  const auto& fits = paper_scaling_fits();
  // compute_for inverts loss_at.
  EXPECT_NEAR(fits[1].loss_at(fits[1].compute_for(1.7)), 1.7, 1e-12);
  EXPECT_THROW(scaling_at_loss(0.0), Error);
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

}  // namespace
}  // namespace attnres
