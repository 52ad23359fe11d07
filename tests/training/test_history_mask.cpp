// The history-masking experiment (docs/training.md): mask selections, masked reads renormalise
// what is left, and random masks remove exactly the chosen mask's mass.
#include <gtest/gtest.h>

#include "attnres/depth_layout.hpp"
#include "attnres/error.hpp"
#include "attnres/history_mask.hpp"
#include "model_support.hpp"

namespace attnres {
namespace {

TEST(HistoryMask, SelectionsPickTheNamedSources) {
  const DepthLayout full = make_depth_layout(ResidualMode::full, 4, 1);
  const DepthMask embedding = make_depth_mask(full, parse_mask_selection("embedding", "--drop"));
  EXPECT_EQ(embedding.keep[0], (std::vector<double>{1.0}));  // a single source is never removed
  EXPECT_EQ(embedding.keep[2], (std::vector<double>{0.0, 1.0, 1.0}));
  const DepthMask distant = make_depth_mask(full, parse_mask_selection("distant:2", "--drop"));
  EXPECT_EQ(distant.keep[4], (std::vector<double>{0.0, 0.0, 0.0, 1.0, 1.0}));
  EXPECT_EQ(distant.keep[1], (std::vector<double>{1.0, 1.0}));
  const DepthMask recent = make_depth_mask(full, parse_mask_selection("recent:1", "--drop"));
  const std::vector<double> last_removed = {1.0, 1.0, 1.0, 0.0};
  EXPECT_EQ(recent.keep[3], last_removed);
  for (const char* bad : {"embeddings", "distant:0", "recent:x", "distant:", "recent:-1"}) {
    EXPECT_THROW(parse_mask_selection(bad, "--drop"), Error) << bad;
  }
}

TEST(HistoryMask, MaskedReadsRenormaliseTheRest) {
  const auto model =
      random_model(test::model_config(2, 8, 2, 2, 12, 11), {.seed = 2, .query_std = 0.8});
  ForwardOptions options;
  options.mode = ResidualMode::full;
  const auto plain = forward(model, {1, 2, 3}, options);
  DepthMask all_kept;
  for (const auto& read : plain.trace.reads)
    all_kept.keep.push_back(std::vector<double>(read.sources.size(), 1.0));
  options.mask = &all_kept;
  const auto same = forward(model, {1, 2, 3}, options);
  // Keeping everything changes nothing but the order: a masked read is one-shot, its weights
  // renormalised by their sum (1 to a few u), its h summed again.
  test::expect_tensor_near("everything kept", same.logits, plain.logits,
                           test::kReorderedBound<double>);

  const DepthMask embedding = make_depth_mask(make_depth_layout(ResidualMode::full, 4, 1),
                                              parse_mask_selection("embedding", "x"));
  options.mask = &embedding;
  const auto masked = forward(model, {1, 2, 3}, options);
  const auto& alpha = masked.trace.reads[3].alpha;  // read 3 has sources emb, v1, v2, v3
  EXPECT_EQ(alpha.col(0).cwiseAbs().maxCoeff(), 0.0);
  // The kept weights divided by their sum (3 additions, <= 3 u), each division 1 u, the row's sum
  // 3 more: ~7 u of 1; 16 u.
  for (Eigen::Index t = 0; t < alpha.rows(); ++t)
    EXPECT_TRUE(test::near_relative(alpha.row(t).sum(), 1.0, test::roundoffs<double>(16), 0.0,
                                    "row " + std::to_string(t) + " sum"));
  // Read 0 has only the embedding: unchanged, a softmax over one source is exp(0) / exp(0) = 1
  // exactly, and the mask multiplies and divides it by 1.
  EXPECT_EQ(masked.trace.reads[0].alpha(0, 0), 1.0);
  // Must differ: removing the embedding moves the logits far beyond rounding (~1e-16 of them).
  EXPECT_GT((masked.logits - plain.logits).cwiseAbs().maxCoeff(), 1e-6);
}

TEST(HistoryMask, ExperimentComparesWithRandomMasksOfEqualMass) {
  const auto model =
      random_model(test::model_config(2, 8, 2, 2, 12, 11), {.seed = 4, .query_std = 0.8});
  auto full = model;
  full.config.attn_res.mode = ResidualMode::full;
  const std::vector<std::vector<int>> windows = {{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}};
  const MaskExperiment e =
      history_mask_experiment(full, windows, parse_mask_selection("embedding", "x"), 5, 3);
  EXPECT_EQ(e.reads_masked, 4);  // reads 1 .. 4 (read 0 has only the embedding)
  EXPECT_GT(e.mass_removed, 0.0);
  EXPECT_LT(e.mass_removed, 1.0);
  EXPECT_EQ(e.delta, e.masked_loss - e.base_loss);  // the same subtraction: the same bits
  EXPECT_NE(e.delta, 0.0);
  ASSERT_EQ(e.random_deltas.size(), 5u);
  EXPECT_GT(e.random_std, 0.0);  // different random masks, different losses
  // Same seed, same result.
  const MaskExperiment again =
      history_mask_experiment(full, windows, parse_mask_selection("embedding", "x"), 5, 3);
  EXPECT_EQ(again.random_deltas, e.random_deltas);
  // The standard residual has nothing to mask.
  EXPECT_THROW(history_mask_experiment(model, windows, parse_mask_selection("embedding", "x")),
               Error);
}

}  // namespace
}  // namespace attnres

namespace attnres {
namespace {

// GCC 12.2 with AVX-512 miscompiled this initializer to {1, 1, 1, 1} (its SLP vectoriser; the
// build turns SLP off for GCC < 13, see CMakeLists.txt). Kept as a guard for every build.
TEST(CompilerGuard, SmallVectorInitialisersKeepTheirValues) {
  const std::vector<double> values = {1.0, 1.0, 1.0, 0.0};
  EXPECT_EQ(values[3], 0.0);
  std::vector<double> filled(4, 1.0);
  std::fill(filled.end() - 1, filled.end(), 0.0);
  EXPECT_EQ(filled, values);
}

}  // namespace
}  // namespace attnres
