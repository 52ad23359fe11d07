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
  EXPECT_NEAR(analytic.loss, batch_loss(model, batch, options), 1e-12);
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
    // Relative to the tensor's largest gradient, with a floor of 1e-4: central differences carry
    // ~1e-11 of rounding noise, and some gradients are genuinely tiny (a read whose output only
    // feeds an RMSNorm is scale-invariant up to eps, e.g. the zero placeholder's first read).
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
  EXPECT_NEAR(g.loss, expected, 1e-14);
  EXPECT_NEAR(expected, 1.551444713932051, 1e-5);  // log(2e + e^2) - 1 worked out by hand
  // d loss / d lm_head row j = (softmax_j - onehot_j) * RMSNorm(e_0).
  const double z = std::exp(l0) + std::exp(l1) + std::exp(l2);
  EXPECT_NEAR(g.grad.lm_head(1, 0), (std::exp(l1) / z - 1.0) * r, 1e-14);
  EXPECT_NEAR(g.grad.lm_head(2, 1), std::exp(l2) / z * r, 1e-14);
  // Only token 0's embedding row gets a gradient (position 1 predicts nothing).
  EXPECT_EQ(g.grad.embed_tokens.row(2).cwiseAbs().maxCoeff(), 0.0);
}

TEST(Backward, CrossEntropyGradientRowsSumToZero) {
  Matrix<double> logits(3, 4);
  logits << 0.1, 2.0, -1.0, 0.5, 3.0, 3.0, 3.0, 3.0, 9.0, 1.0, 0.0, 0.0;
  Matrix<double> gradient;
  const double sum = next_token_cross_entropy_sum(logits, {0, 1, 2}, &gradient);
  EXPECT_NEAR(sum,
              (std::log(std::exp(0.1) + std::exp(2.0) + std::exp(-1.0) + std::exp(0.5)) - 2.0) +
                  (std::log(4.0) + 3.0 - 3.0),
              1e-12);
  for (int p = 0; p < 2; ++p) EXPECT_NEAR(gradient.row(p).sum(), 0.0, 1e-15);
  EXPECT_EQ(gradient.row(2).cwiseAbs().maxCoeff(), 0.0);  // the last position predicts nothing
}

TEST(Backward, RopeInverseUndoesRope) {
  const auto rope = make_rope_table<double>(5, 4, 10000.0);
  Matrix<double> x = Matrix<double>::Random(5, 8);
  const Matrix<double> original = x;
  apply_rope(x, 2, rope);
  EXPECT_GT((x - original).cwiseAbs().maxCoeff(), 1e-3);
  apply_rope_inverse(x, 2, rope);
  EXPECT_LT((x - original).cwiseAbs().maxCoeff(), 1e-15);
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
