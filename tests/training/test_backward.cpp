// The reference backward pass against central finite differences at f64 (every element of every
// parameter tensor, every residual mode), a 2-token loss worked by hand, and the per-op
// identities (docs/training.md).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "attnres/backward.hpp"
#include "attnres/error.hpp"
#include "attnres/layers.hpp"
#include "model_support.hpp"
#include "training/training_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_backward {

// A small random model whose gains and queries are not at their initial values, so that every
// gradient path is exercised.
ModelWeights<double> gradient_test_model(std::uint64_t seed) {
  return test::model_with_random_gains(test::model_config(2, 8, 2, 1, 12, 11),
                                       {.seed = seed, .weight_std = 0.4, .query_std = 0.7},
                                       seed + 99);
}

using test::ModeCase;
using test::options_for;

class FiniteDifferences : public ::testing::TestWithParam<ModeCase> {};

TEST_P(FiniteDifferences, EveryElementOfEveryTensorMatchesCentralDifferences) {
  ModelWeights<double> model = gradient_test_model(5);
  const std::vector<std::vector<int>> batch = {{1, 7, 3, 3, 10}, {4, 0, 9}};
  const ForwardOptions options = options_for(GetParam());
  Gradients<double> analytic = loss_and_gradients(model, batch, options);
  // The backward pass's own forward sweep against forward(): the same arithmetic, another order.
  EXPECT_TRUE(test::near_relative(analytic.loss, batch_loss(model, batch, options),
                                  test::kReorderedBound<double>, 0.0, "loss"));
  EXPECT_EQ(analytic.predicted, 6);

  std::map<std::string, const double*> analytic_by_name;
  visit_tensors(analytic.grad,
                [&](const TensorRef<double>& t) { analytic_by_name[t.name] = t.data; });
  const double step = 1e-5;
  double worst = 0.0;
  std::string worst_tensor;
  visit_tensors(model, [&](const TensorRef<double>& tensor) {
    const double* gradient = analytic_by_name.at(tensor.name);
    double largest = 0.0;
    double error = 0.0;
    for (std::int64_t i = 0; i < tensor.element_count(); ++i) {
      const double numeric = test::central_difference(model, batch, options, tensor.data[i], step);
      largest = std::max(largest, std::abs(numeric));
      error = std::max(error, std::abs(numeric - gradient[i]));
    }
    if (largest == 0.0) {
      EXPECT_EQ(error, 0.0) << tensor.name << " should have an exactly zero gradient";
      return;
    }
    // Relative to the tensor's largest gradient. Central differences with h = 1e-5: truncation
    // h^2 / 6 |f'''| ~ 2e-11 |f'''|; rounding ~ u |loss| / h = 2^-53 x 2.4 / 1e-5 ~ 3e-11 (a few
    // times that with the forward's own rounding). 1e-6 of the largest gradient leaves both room.
    // Some gradients are genuinely tiny (a read whose output only feeds an RMSNorm is
    // scale-invariant up to eps, e.g. the zero placeholder's first read): their magnitude is
    // floored at 1e-4, where the bound, 1e-10, is still ~3 x the rounding term u |loss| / h.
    const double relative = error / std::max(largest, 1e-4);
    EXPECT_LE(relative, 1e-6) << GetParam().name << ": " << tensor.name << " largest " << largest
                              << " error " << error;
    if (relative > worst) worst = relative, worst_tensor = tensor.name;
  });
  std::cout << "[ " << GetParam().name << " ] worst relative gradient error " << worst << " ("
            << worst_tensor << ")\n";
}

INSTANTIATE_TEST_SUITE_P(EveryMode, FiniteDifferences, ::testing::ValuesIn(test::gradient_modes()),
                         [](const auto& info) { return info.param.name; });

TEST(Backward, StandardResidualLeavesDepthTensorsWithZeroGradient) {
  const ModelWeights<double> model = gradient_test_model(3);
  ForwardOptions options;
  options.mode = ResidualMode::standard;
  const auto g = loss_and_gradients(model, {{1, 2, 3}}, options);
  for (int r = 0; r <= model.config.sublayers(); ++r) {
    EXPECT_EQ(g.grad.depth_read(r).query.cwiseAbs().maxCoeff(), 0.0);
    EXPECT_EQ(g.grad.depth_read(r).key_norm_gain.cwiseAbs().maxCoeff(), 0.0);
  }
  EXPECT_GT(g.grad.lm_head.cwiseAbs().maxCoeff(), 0.0);
}

// A 2-token example by hand: with every projection zero, every sublayer outputs zero, so with the
// standard residual the final hidden state is the embedding e of token 0. The logits are
// lm_head . RMSNorm(e), and the loss is log-sum-exp(logits) - logits[t_1].
TEST(Backward, TwoTokenLossByHand) {
  ModelConfig config = test::model_config(1, 2, 1, 1, 2, 3);
  ModelWeights<double> model = allocate_model<double>(config);
  model.embed_tokens << 1.0, 1.0,  //
      3.0, -1.0,                   //
      0.0, 2.0;
  model.lm_head << 1.0, 0.0,  //
      0.0, 1.0,               //
      1.0, 1.0;
  // Standard residual: h_final = e_0 = (1, 1); RMSNorm (eps 1e-6) ~ (1, 1); logits (1, 1, 2).
  ForwardOptions options;
  options.mode = ResidualMode::standard;
  const double r = 1.0 / std::sqrt(1.0 + 1e-6);
  const double l0 = r, l1 = r, l2 = 2 * r;
  const double expected =
      std::log(std::exp(l0) + std::exp(l1) + std::exp(l2)) - l1;  // target t_1 = 1
  const auto g = loss_and_gradients(model, {{0, 1}}, options);
  // A closed form in double against the model's path: on each side the norm (a sum of squares, a
  // square root, a division), three exp, their sum and a log, ~10 roundings of values up to the
  // log-sum-exp's 2.55, the magnitude of the terms the loss log-sum-exp - l1 is made of.
  const double log_sum_exp = std::log(std::exp(l0) + std::exp(l1) + std::exp(l2));
  EXPECT_TRUE(
      test::near_relative(g.loss, expected, test::roundoffs<double>(32), log_sum_exp, "loss"));
  // log(2e + e^2) - 1 worked out by hand at r = 1: eps = 1e-6 moves r by 5e-7 and the loss by
  // e / (2 + e) x 5e-7 ~ 3e-7 = 1.9e-7 of it, inside the bound 1e-6.
  EXPECT_TRUE(test::near_relative(expected, 1.551444713932051, 1e-6, 0.0, "loss at r = 1"));
  // d loss / d lm_head row j = (softmax_j - onehot_j) * RMSNorm(e_0): relative to the one-hot's 1,
  // the magnitude of the terms (the softmax carries the log-sum-exp's ~10 u of 2.55 as well).
  const double z = std::exp(l0) + std::exp(l1) + std::exp(l2);
  EXPECT_TRUE(test::near_relative(g.grad.lm_head(1, 0), (std::exp(l1) / z - 1.0) * r,
                                  test::roundoffs<double>(64), 1.0, "lm_head(1, 0)"));
  EXPECT_TRUE(test::near_relative(g.grad.lm_head(2, 1), std::exp(l2) / z * r,
                                  test::roundoffs<double>(64), 1.0, "lm_head(2, 1)"));
  // Only token 0's embedding row gets a gradient (position 1 predicts nothing).
  EXPECT_EQ(g.grad.embed_tokens.row(2).cwiseAbs().maxCoeff(), 0.0);
}

TEST(Backward, CrossEntropyGradientRowsSumToZero) {
  Matrix<double> logits(3, 4);
  logits << 0.1, 2.0, -1.0, 0.5, 3.0, 3.0, 3.0, 3.0, 9.0, 1.0, 0.0, 0.0;
  Matrix<double> gradient;
  const double sum = next_token_cross_entropy_sum(logits, {0, 1, 2}, &gradient);
  // Two rows of log-sum-exp minus the target's logit, each ~8 roundings (4 exp, their sum, a
  // log, the max added back, the target subtracted) on each side: 32 u relative to the sum of
  // |terms|, the two log-sum-exps 2.35 + 4.39.
  const double lse0 = std::log(std::exp(0.1) + std::exp(2.0) + std::exp(-1.0) + std::exp(0.5));
  const double lse1 = std::log(4.0) + 3.0;
  EXPECT_TRUE(test::near_relative(sum, (lse0 - 2.0) + (lse1 - 3.0), test::roundoffs<double>(32),
                                  lse0 + lse1, "cross-entropy sum"));
  // Each row is softmax - one-hot, so it sums to 0 from terms of magnitude 1 (the softmax sums to
  // 1, the one-hot is 1): 4 additions, each entry's exp (1 ulp) and the log-sum-exp's rounding
  // (~u x 4.4) that scales the whole softmax, ~12 u; 16 u of 1.
  for (int p = 0; p < 2; ++p)
    EXPECT_TRUE(test::near_relative(gradient.row(p).sum(), 0.0, test::roundoffs<double>(16), 1.0,
                                    "gradient row " + std::to_string(p) + " sum"));
  EXPECT_EQ(gradient.row(2).cwiseAbs().maxCoeff(), 0.0);  // the last position predicts nothing
}

TEST(Backward, RopeInverseUndoesRope) {
  const auto rope = make_rope_table<double>(5, 4, 10000.0);
  Matrix<double> x = Matrix<double>::Random(5, 8);
  const Matrix<double> original = x;
  apply_rope(x, 2, rope);
  EXPECT_GT((x - original).cwiseAbs().maxCoeff(), 1e-3);  // it moved: values of magnitude ~1
  apply_rope_inverse(x, 2, rope);
  // Two rotations of a pair (x1, x2), each 2 products and a sum of (|x1| + |x2|) <= 2 max|x|,
  // and cos^2 + sin^2 = 1 to a few u: ~14 u of the largest |x|; 16 u.
  test::expect_tensor_near("rope inverse", x, original, test::roundoffs<double>(16));
}

TEST(Backward, BadBatchesAreClearErrors) {
  const ModelWeights<double> model = gradient_test_model(1);
  EXPECT_THROW(loss_and_gradients(model, {}), Error);
  try {
    loss_and_gradients(model, {{1, 2}, {3}});
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("sequence 1 has 1 token(s)"), std::string::npos)
        << error.what();
  }
  EXPECT_THROW(loss_and_gradients(model, {{1, 11}}), Error);
}

}  // namespace test_backward
}  // namespace attnres
