// Forward-pass invariants of docs/math.md §2: zero queries give means, S = 1 equals Full, two-phase
// equals one-shot, N = 1 is not the standard residual, the zero placeholder, the mixing matrix.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "attnres/error.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"
#include "model_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_forward {

ModelConfig small_config(int layers = 3) {
  ModelConfig config;
  config.hidden_size = 16;
  config.num_hidden_layers = layers;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  config.intermediate_size = 24;
  config.vocab_size = 40;
  return config;
}

ModelWeights<double> small_model(double query_std, int layers = 3, std::uint64_t seed = 7) {
  return random_model(small_config(layers),
                      {.seed = seed, .weight_std = 0.3, .query_std = query_std});
}

const std::vector<int> kTokens = {1, 5, 9, 2, 33, 7};

ForwardOptions with(ResidualMode mode, int block_size = 0, bool two_phase = true) {
  ForwardOptions options;
  options.mode = mode;
  if (block_size) options.block_size = block_size;
  options.two_phase = two_phase;
  return options;
}

TEST(Forward, ZeroQueriesMakeEveryReadAUniformMean) {
  const auto model = small_model(0.0);
  for (auto mode : {ResidualMode::full, ResidualMode::block}) {
    const auto result = forward(model, kTokens, with(mode, 2));
    for (const auto& read : result.trace.reads) {
      const double uniform = 1.0 / static_cast<double>(read.sources.size());
      EXPECT_NEAR(read.alpha.maxCoeff(), uniform, 1e-14) << read.target;
      EXPECT_NEAR(read.alpha.minCoeff(), uniform, 1e-14) << read.target;
    }
  }
}

TEST(Forward, ZeroQueryFirstReadIsTheEmbeddingNotASum) {
  // The mean of one source is the embedding itself; at sublayer 2 of Full AttnRes the input is
  // (v0 + v1) / 2, not v0 + v1 as with the standard residual.
  const auto model = small_model(0.0);
  const auto full = forward(model, kTokens, with(ResidualMode::full));
  const auto standard = forward(model, kTokens, with(ResidualMode::standard));
  EXPECT_NEAR(full.trace.sublayer_input_rms[0], standard.trace.sublayer_input_rms[0], 1e-15);
  EXPECT_GT(std::abs(full.trace.sublayer_input_rms[1] - standard.trace.sublayer_input_rms[1]),
            1e-6);
}

TEST(Forward, BlockSizeOneEqualsFullAttnRes) {
  const auto model = small_model(0.7);
  for (bool two_phase : {false, true}) {
    const auto block = forward(model, kTokens, with(ResidualMode::block, 1, two_phase));
    const auto full = forward(model, kTokens, with(ResidualMode::full, 0, two_phase));
    test::expect_tensor_near("S=1 vs Full logits", block.logits, full.logits, 1e-12);
    test::expect_tensor_near("S=1 vs Full hidden", block.hidden_final, full.hidden_final, 1e-12);
  }
}

TEST(Forward, TwoPhaseEqualsOneShotAtFloat64) {
  const auto model = small_model(0.9, 4);  // L = 8
  struct Case {
    ResidualMode mode;
    int block_size;
    int schedule_block;
  };
  // Block with S dividing L, an incomplete last block (8 = 3 + 3 + 2), S = L; Full with several
  // schedule blocks (auto = round(sqrt 8) = 3, an incomplete last schedule block).
  for (const Case& c : {Case{ResidualMode::block, 2, 0}, Case{ResidualMode::block, 3, 0},
                        Case{ResidualMode::block, 8, 0}, Case{ResidualMode::full, 0, 0},
                        Case{ResidualMode::full, 0, 1}, Case{ResidualMode::full, 0, 5},
                        Case{ResidualMode::full, 0, 8}}) {
    auto one_shot = with(c.mode, c.block_size, false);
    auto two_phase = with(c.mode, c.block_size, true);
    two_phase.full_schedule_block = c.schedule_block;
    const auto a = forward(model, kTokens, one_shot);
    const auto b = forward(model, kTokens, two_phase);
    const std::string name = to_string(c.mode) + " S=" + std::to_string(c.block_size) +
                             " schedule=" + std::to_string(c.schedule_block);
    test::expect_tensor_near(name + " logits", b.logits, a.logits, 1e-12);
    ASSERT_EQ(a.trace.reads.size(), b.trace.reads.size());
    for (std::size_t r = 0; r < a.trace.reads.size(); ++r) {
      EXPECT_LE(test::max_scaled_difference(b.trace.reads[r].alpha, a.trace.reads[r].alpha), 1e-12)
          << name << " read " << r;
    }
  }
}

TEST(Forward, OneBlockIsATwoWaySoftmaxNotTheStandardResidual) {
  // Zero queries: every read is (v_0 + partial) / 2, exactly half the standard residual's sum,
  // and the PreNorm RMSNorm removes that factor — so hidden_final is half, logits agree.
  auto zero_query = small_model(0.0);       // L = 6
  zero_query.config.rms_norm_eps = 1e-300;  // RMSNorm then exactly scale-invariant
  const auto one_block = forward(zero_query, kTokens, with(ResidualMode::block, 6));
  const auto standard = forward(zero_query, kTokens, with(ResidualMode::standard));
  const auto& final_read = one_block.trace.reads.back();
  EXPECT_EQ(final_read.sources.size(), 2u);
  EXPECT_NEAR(final_read.alpha_mean(0), 0.5, 1e-14);  // the embedding keeps half the mass
  const Matrix<double> half_standard = standard.hidden_final / 2.0;
  test::expect_tensor_near("N=1, w=0: half the standard sum", one_block.hidden_final, half_standard,
                           1e-12);
  // Learned queries move the 2-way weights away from 1/2: now the models differ.
  const auto queried = small_model(1.0);
  const auto a = forward(queried, kTokens, with(ResidualMode::block, 6));
  const auto b = forward(queried, kTokens, with(ResidualMode::standard));
  EXPECT_GT(std::abs(a.trace.reads.back().alpha_mean(0) - 0.5), 1e-3);
  EXPECT_GT(test::max_scaled_difference(a.logits, b.logits), 1e-3);
}

TEST(Forward, ZeroPlaceholderHalvesTheEmbeddingAtTheFirstSublayer) {
  const auto model = small_model(0.0);
  auto options = with(ResidualMode::block, 2);
  const auto plain = forward(model, kTokens, options);
  options.zero_placeholder = true;
  const auto placeholder = forward(model, kTokens, options);
  // With w = 0 the zero source takes half the softmax mass: h_1 = v_0 / 2.
  EXPECT_NEAR(placeholder.trace.sublayer_input_rms[0], plain.trace.sublayer_input_rms[0] / 2,
              1e-14);
  EXPECT_EQ(plain.trace.reads[0].sources.size(), 1u);
  EXPECT_EQ(placeholder.trace.reads[0].sources.size(), 2u);
  // Two-phase and one-shot agree with the placeholder too.
  options.two_phase = false;
  const auto one_shot = forward(model, kTokens, options);
  test::expect_tensor_near("placeholder two-phase vs one-shot", placeholder.logits, one_shot.logits,
                           1e-12);
}

TEST(Forward, Float32TracksFloat64) {
  const auto model = small_model(0.8);
  for (auto mode : {ResidualMode::standard, ResidualMode::full, ResidualMode::block}) {
    const auto f64 = forward(model, kTokens, with(mode, 4));
    const auto f32 = forward(model.cast<float>(), kTokens, with(mode, 4));
    test::expect_tensor_near("f32 vs f64 " + to_string(mode), f32.logits, f64.logits, 1e-5);
  }
}

TEST(Forward, SameInputsGiveBitIdenticalOutputs) {
  const auto model = small_model(0.8);
  const auto a = forward(model.cast<float>(), kTokens, with(ResidualMode::block, 2));
  const auto b = forward(model.cast<float>(), kTokens, with(ResidualMode::block, 2));
  EXPECT_TRUE((a.logits.array() == b.logits.array()).all());
}

TEST(Forward, MixingMatrixOfTheStandardResidualIsAllOnesWithRankOne) {
  const auto result = forward(small_model(0.5), kTokens, with(ResidualMode::standard));
  const auto& mixing = result.trace.mixing_mean;
  ASSERT_EQ(mixing.rows(), 7);
  for (Eigen::Index l = 0; l < 7; ++l) {
    for (Eigen::Index i = 0; i < 7; ++i) EXPECT_EQ(mixing(l, i), i <= l ? 1.0 : 0.0);
  }
  for (int rank : result.trace.semiseparable_rank) EXPECT_EQ(rank, 1);
}

TEST(Forward, MixingMatrixOfFullAttnResHasSoftmaxRows) {
  const auto result = forward(small_model(0.8), kTokens, with(ResidualMode::full));
  for (const auto& mixing : result.trace.mixing_per_token) {
    for (Eigen::Index l = 0; l < mixing.rows(); ++l) {
      EXPECT_NEAR(mixing.row(l).sum(), 1.0, 1e-13);
      EXPECT_GE(mixing.row(l).minCoeff(), 0.0);
      EXPECT_EQ(mixing.row(l).tail(mixing.cols() - l - 1).cwiseAbs().sum(), 0.0);  // causal
    }
  }
}

TEST(Forward, MixingMatrixGivesEveryBlockMemberTheBlockWeight) {
  const auto result = forward(small_model(0.8), kTokens, with(ResidualMode::block, 4));
  for (const auto& mixing : result.trace.mixing_per_token) {
    EXPECT_NEAR(mixing(6, 1), mixing(6, 4), 1e-15);  // final read, block {1..4}
    EXPECT_NEAR(mixing(6, 5), mixing(6, 6), 1e-15);  // final read, incomplete block {5, 6}
    EXPECT_NEAR(mixing(3, 1), mixing(3, 2), 1e-15);  // sublayer 4 reads partial {1..3}
    EXPECT_EQ(mixing(3, 3 + 1), 0.0);
    // Per-source weights (not per member) sum to one: emb + b1 + b2 at the final read.
    EXPECT_NEAR(mixing(6, 0) + mixing(6, 1) + mixing(6, 5), 1.0, 1e-13);
  }
}

TEST(Forward, SemiseparableRanksFollowTheScheme) {
  const auto model = small_model(1.0, 4);  // L = 8, M is 9 x 9
  const auto full = forward(model, kTokens, with(ResidualMode::full));
  const auto& full_ranks = full.trace.semiseparable_rank_max;
  int largest = 0;
  for (std::size_t k = 1; k <= full_ranks.size(); ++k) {
    EXPECT_LE(full_ranks[k - 1], std::min<int>(static_cast<int>(k), 9 - static_cast<int>(k)));
    largest = std::max(largest, full_ranks[k - 1]);
  }
  EXPECT_GE(largest, 3) << "random pseudo-queries should give Full AttnRes a rank above 1";
  // Block, S = 4: at the cut after block 1 (columns v0..v4) the columns collapse to b0 and b1,
  // so the rank is at most 2.
  const auto block = forward(model, kTokens, with(ResidualMode::block, 4));
  EXPECT_LE(block.trace.semiseparable_rank_max[4], 2);
}

TEST(Forward, RejectsBadTokensAndSizes) {
  const auto model = small_model(0.0);
  EXPECT_THROW(forward(model, {}, with(ResidualMode::full)), Error);
  EXPECT_THROW(forward(model, {1, 40}, with(ResidualMode::full)), Error);
  EXPECT_THROW(forward(model, {-1}, with(ResidualMode::full)), Error);
  EXPECT_THROW(forward(model, {1}, with(ResidualMode::block, 7)), Error);
  EXPECT_THROW(forward(model, {1}, with(ResidualMode::block, 0)), Error);  // block mode, no S
  EXPECT_NE(test::error_message([&] {
              forward(model, {1, 40}, with(ResidualMode::full));
            }).find("token id 40 at position 1"),
            std::string::npos);
}

// The singular values at one cut (the Duality view's box): a lower triangle of ones has one,
// sqrt(k (n - k)), at every cut; a diagonal matrix has none below its diagonal; an identity plus
// a known rank-2 block gets rank 2; semiseparable_ranks counts the same at every cut.
TEST(CutSingularValues, ClosedFormsAndTheRanksAgree) {
  const int n = 7;
  const Eigen::MatrixXd ones = Eigen::MatrixXd::Ones(n, n).triangularView<Eigen::Lower>();
  const std::vector<int> ranks = semiseparable_ranks(ones, 1e-6);
  for (int k = 1; k < n; ++k) {
    const Eigen::VectorXd sigma = cut_singular_values(ones, k);
    ASSERT_EQ(sigma.size(), std::min(k, n - k));
    EXPECT_NEAR(sigma(0), std::sqrt(double(k) * (n - k)), 1e-12) << k;
    EXPECT_EQ(numerical_rank(sigma, 1e-6), 1) << k;
    EXPECT_EQ(ranks[static_cast<std::size_t>(k - 1)], 1) << k;
  }
  EXPECT_EQ(numerical_rank(cut_singular_values(Eigen::MatrixXd::Identity(n, n), 3), 1e-6), 0);
  Eigen::MatrixXd two = Eigen::MatrixXd::Identity(n, n);
  two(5, 0) = 2.0;  // rows 3.., columns ..2: two independent entries
  two(4, 1) = 3.0;
  const Eigen::VectorXd sigma = cut_singular_values(two, 3);
  EXPECT_EQ(numerical_rank(sigma, 1e-6), 2);
  EXPECT_NEAR(sigma(0), 3.0, 1e-12);
  EXPECT_NEAR(sigma(1), 2.0, 1e-12);
  EXPECT_THROW(cut_singular_values(ones, 0), Error);
  EXPECT_THROW(cut_singular_values(ones, n), Error);
}

}  // namespace test_forward
}  // namespace attnres
