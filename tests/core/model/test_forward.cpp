// Forward-pass invariants of docs/math.md §2: zero queries give means, S = 1 equals Full, two-phase
// equals one-shot, N = 1 is not the standard residual, the zero placeholder, the mixing matrix.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "attnres/error.hpp"
#include "attnres/forward.hpp"
#include "attnres/forward_steps.hpp"
#include "attnres/mixing_analysis.hpp"
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

// The weights of one read against an identity (they sum to 1, or equal 1/n at zero queries):
// n <= 9 weights exp(s - m) / l, each within ~4 u of its value (an exp, which a vectorised path
// may round to a few u, a merge's scale and a division), summed in n u: 4n + n <= 45 u. 64 u.
constexpr double kSoftmaxIdentity = test::roundoffs<double>(64);

// f32 rounding through the network (weights rounded to f32, every product and sum in f32)
// against the f64 pass: the old 1e-5 relative, 168 u of f32, on logits of magnitude ~3.
constexpr double kF32Network = test::roundoffs<float>(168);

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
      EXPECT_TRUE(test::near_relative(read.alpha.maxCoeff(), uniform, kSoftmaxIdentity, 0.0,
                                      read.target + " largest weight"));
      EXPECT_TRUE(test::near_relative(read.alpha.minCoeff(), uniform, kSoftmaxIdentity, 0.0,
                                      read.target + " smallest weight"));
    }
  }
}

TEST(Forward, ZeroQueryFirstReadIsTheEmbeddingNotASum) {
  // The mean of one source is the embedding itself; at sublayer 2 of Full AttnRes the input is
  // (v0 + v1) / 2, not v0 + v1 as with the standard residual.
  const auto model = small_model(0.0);
  const auto full = forward(model, kTokens, with(ResidualMode::full));
  const auto standard = forward(model, kTokens, with(ResidualMode::standard));
  // The first read is v_0 times its one weight exp(0) / exp(0): the same RMS within the weight's
  // few u (8 u: an exp and a division, and the RMS's own rounding of the scaled values).
  EXPECT_TRUE(test::near_relative(full.trace.sublayer_input_rms[0],
                                  standard.trace.sublayer_input_rms[0], test::roundoffs<double>(8),
                                  0.0, "first input rms"));
  // Must differ: the RMS (of order 0.3) of (v0 + v1) / 2 is about half that of v0 + v1, far
  // more than 1e-6 apart.
  EXPECT_GT(std::abs(full.trace.sublayer_input_rms[1] - standard.trace.sublayer_input_rms[1]),
            1e-6);
}

TEST(Forward, BlockSizeOneEqualsFullAttnRes) {
  const auto model = small_model(0.7);
  for (bool two_phase : {false, true}) {
    const auto block = forward(model, kTokens, with(ResidualMode::block, 1, two_phase));
    const auto full = forward(model, kTokens, with(ResidualMode::full, 0, two_phase));
    // The same reads in another order of operations (block sums of one member).
    test::expect_tensor_near("S=1 vs Full logits", block.logits, full.logits,
                             test::kReorderedBound<double>);
    test::expect_tensor_near("S=1 vs Full hidden", block.hidden_final, full.hidden_final,
                             test::kReorderedBound<double>);
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
    test::expect_tensor_near(name + " logits", b.logits, a.logits, test::kReorderedBound<double>);
    ASSERT_EQ(a.trace.reads.size(), b.trace.reads.size());
    for (std::size_t r = 0; r < a.trace.reads.size(); ++r) {
      // Relative to the read's largest weight (docs/testing.md §2), as in the fast zoo.
      test::expect_tensor_near(name + " read " + std::to_string(r) + " alpha",
                               b.trace.reads[r].alpha, a.trace.reads[r].alpha,
                               test::kReorderedBound<double>);
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
  // The embedding keeps half the mass: exp(0) / (exp(0) + exp(0)), its mean over the tokens.
  EXPECT_TRUE(test::near_relative(final_read.alpha_mean(0), 0.5, kSoftmaxIdentity, 0.0,
                                  "embedding weight"));
  const Matrix<double> half_standard = standard.hidden_final / 2.0;
  // The same sums in another order: (v0 + (v1 + ... + vl)) / 2 against (v0 + v1 + ... + vl) / 2.
  test::expect_tensor_near("N=1, w=0: half the standard sum", one_block.hidden_final, half_standard,
                           test::kReorderedBound<double>);
  // Learned queries move the 2-way weights away from 1/2: now the models differ.
  const auto queried = small_model(1.0);
  const auto a = forward(queried, kTokens, with(ResidualMode::block, 6));
  const auto b = forward(queried, kTokens, with(ResidualMode::standard));
  // Must differ: by more than 1e-3 of a weight of 1/2, and of the logits' magnitude (~3).
  EXPECT_GT(std::abs(a.trace.reads.back().alpha_mean(0) - 0.5), 1e-3);
  EXPECT_GT(test::relative_difference(a.logits, b.logits), 1e-3);
}

TEST(Forward, ZeroPlaceholderHalvesTheEmbeddingAtTheFirstSublayer) {
  const auto model = small_model(0.0);
  auto options = with(ResidualMode::block, 2);
  const auto plain = forward(model, kTokens, options);
  options.zero_placeholder = true;
  const auto placeholder = forward(model, kTokens, options);
  // With w = 0 the zero source takes half the softmax mass: h_1 = v_0 / 2. The weight is
  // exp(0) / 2 within a few u and halving is exact, so the RMS is half within 8 u.
  EXPECT_TRUE(test::near_relative(placeholder.trace.sublayer_input_rms[0],
                                  plain.trace.sublayer_input_rms[0] / 2, test::roundoffs<double>(8),
                                  0.0, "first input rms"));
  EXPECT_EQ(plain.trace.reads[0].sources.size(), 1u);
  EXPECT_EQ(placeholder.trace.reads[0].sources.size(), 2u);
  // Two-phase and one-shot agree with the placeholder too.
  options.two_phase = false;
  const auto one_shot = forward(model, kTokens, options);
  test::expect_tensor_near("placeholder two-phase vs one-shot", placeholder.logits, one_shot.logits,
                           test::kReorderedBound<double>);
}

TEST(Forward, Float32TracksFloat64) {
  const auto model = small_model(0.8);
  for (auto mode : {ResidualMode::standard, ResidualMode::full, ResidualMode::block}) {
    const auto f64 = forward(model, kTokens, with(mode, 4));
    const auto f32 = forward(model.cast<float>(), kTokens, with(mode, 4));
    test::expect_tensor_near("f32 vs f64 " + to_string(mode), f32.logits, f64.logits, kF32Network);
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
      EXPECT_TRUE(test::near_relative(mixing.row(l).sum(), 1.0, kSoftmaxIdentity, 0.0,
                                      "row " + std::to_string(l) + " sum"));
      EXPECT_GE(mixing.row(l).minCoeff(), 0.0);
      EXPECT_EQ(mixing.row(l).tail(mixing.cols() - l - 1).cwiseAbs().sum(), 0.0);  // causal
    }
  }
}

TEST(Forward, MixingMatrixGivesEveryBlockMemberTheBlockWeight) {
  const auto result = forward(small_model(0.8), kTokens, with(ResidualMode::block, 4));
  for (const auto& mixing : result.trace.mixing_per_token) {
    // Every member of a source gets a copy of the source's weight: the same bits.
    EXPECT_EQ(mixing(6, 1), mixing(6, 4));  // final read, block {1..4}
    EXPECT_EQ(mixing(6, 5), mixing(6, 6));  // final read, incomplete block {5, 6}
    EXPECT_EQ(mixing(3, 1), mixing(3, 2));  // sublayer 4 reads partial {1..3}
    EXPECT_EQ(mixing(3, 3 + 1), 0.0);
    // Per-source weights (not per member) sum to one: emb + b1 + b2 at the final read.
    EXPECT_TRUE(test::near_relative(mixing(6, 0) + mixing(6, 1) + mixing(6, 5), 1.0,
                                    kSoftmaxIdentity, 0.0, "final read's sum"));
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
  // Jacobi SVD of a block of at most 4 x 4: Eigen iterates until the off-diagonal is below
  // 2 eps of the diagonal, a handful of sweeps of a few rotations each, every rotation within a
  // few u: 64 u of the largest singular value (the scale of every one).
  constexpr double kSvd = test::roundoffs<double>(64);
  const std::vector<int> ranks = semiseparable_ranks(ones, 1e-6);
  for (int k = 1; k < n; ++k) {
    const Eigen::VectorXd sigma = cut_singular_values(ones, k);
    ASSERT_EQ(sigma.size(), std::min(k, n - k));
    EXPECT_TRUE(test::near_relative(sigma(0), std::sqrt(double(k) * (n - k)), kSvd, 0.0,
                                    "sigma at cut " + std::to_string(k)));
    EXPECT_EQ(numerical_rank(sigma, 1e-6), 1) << k;
    EXPECT_EQ(ranks[static_cast<std::size_t>(k - 1)], 1) << k;
  }
  EXPECT_EQ(numerical_rank(cut_singular_values(Eigen::MatrixXd::Identity(n, n), 3), 1e-6), 0);
  Eigen::MatrixXd two = Eigen::MatrixXd::Identity(n, n);
  two(5, 0) = 2.0;  // rows 3.., columns ..2: two independent entries
  two(4, 1) = 3.0;
  const Eigen::VectorXd sigma = cut_singular_values(two, 3);
  EXPECT_EQ(numerical_rank(sigma, 1e-6), 2);
  EXPECT_TRUE(test::near_relative(sigma(0), 3.0, kSvd, 0.0, "sigma 0"));
  EXPECT_TRUE(test::near_relative(sigma(1), 2.0, kSvd, 3.0, "sigma 1"));
  EXPECT_THROW(cut_singular_values(ones, 0), Error);
  EXPECT_THROW(cut_singular_values(ones, n), Error);
}

// Issue 42: the mixing analysis of a deep Full AttnRes pass grew as O(T L^2) in memory and
// O(T L^4) in time (850 s at 4,000 layers); above its bounds it is skipped, with a note.
TEST(MixingAnalysis, BoundsSkipWhatADeepPassCannotAffordAndSaySo) {
  const MixingAnalysisPlan small = plan_mixing_analysis(16, 8);
  EXPECT_TRUE(small.per_token_matrices && small.mean_ranks && small.token_ranks);
  const MixingAnalysisPlan deep = plan_mixing_analysis(8000, 4);
  EXPECT_FALSE(deep.per_token_matrices);
  EXPECT_FALSE(deep.mean_ranks);
  EXPECT_FALSE(deep.token_ranks);
  // L = 300: the mean's ranks fit the bound, 8 tokens' do not.
  const MixingAnalysisPlan middle = plan_mixing_analysis(300, 8);
  EXPECT_TRUE(middle.mean_ranks);
  EXPECT_FALSE(middle.token_ranks);
  EXPECT_NEAR(rank_analysis_work(101), 0.052 * 101.0 * 101 * 101 * 101, 0.01 * 101e6);
  ForwardTrace trace;
  trace.sublayers = 8000;
  trace.tokens = 4;
  EXPECT_NE(mixing_analysis_note(trace).find("skipped the per-token mixing matrices M_t and the "
                                             "semiseparable ranks"),
            std::string::npos)
      << mixing_analysis_note(trace);
  trace.sublayers = 16;
  EXPECT_EQ(mixing_analysis_note(trace), "");
}

TEST(MixingAnalysis, RecordMixingChecksCancellation) {
  ForwardTrace trace;
  trace.mode = ResidualMode::standard;
  trace.sublayers = 8;
  trace.tokens = 2;
  ForwardOptions options;
  const CancelToken token;
  options.progress = token.progress();
  record_mixing(trace, options);
  EXPECT_EQ(trace.semiseparable_rank, std::vector<int>(8, 1));
  token.cancel();
  EXPECT_THROW(record_mixing(trace, options), Cancelled);
}

}  // namespace test_forward
}  // namespace attnres
