// The residual-scheme zoo (docs/schemes.md): gradients of every new parameter against central
// finite differences at f64, the invariants the docs state (zero starts, limits, Sinkhorn), the
// semiseparable-rank taxonomy from computed mixing matrices, and clear errors for bad settings.
// Forward values are checked against the NumPy reference in tests/golden.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "attnres/backward.hpp"
#include "attnres/error.hpp"
#include "attnres/gradient_engine.hpp"
#include "attnres/mhc.hpp"
#include "model_support.hpp"
#include "training/training_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_schemes {

using SchemeCase = test::SchemeCase;

AttnResConfig make(ResidualMode mode, int block_size = 0) {
  return test::make_scheme(mode, block_size);
}

std::vector<SchemeCase> scheme_cases() {
  return test::zoo_schemes();
}

ModelConfig small_config(const AttnResConfig& scheme) {
  ModelConfig config = test::model_config(2, 8, 2, 1, 12, 11);  // L = 4 sublayers, d = 8
  config.attn_res = scheme;
  return config;
}

class SchemeGradients : public ::testing::TestWithParam<SchemeCase> {};

TEST_P(SchemeGradients, EveryElementOfEveryTensorMatchesCentralDifferences) {
  ModelWeights<double> model = test::model_with_random_gains(
      small_config(GetParam().scheme), {.seed = 3, .weight_std = 0.4, .query_std = 0.5}, 17);
  const std::vector<std::vector<int>> batch = {{1, 7, 3, 3, 10}, {4, 0, 9}};
  const Gradients<double> analytic = loss_and_gradients(model, batch);
  // The backward pass's own forward sweep against forward(): the same arithmetic, another order.
  EXPECT_TRUE(test::near_relative(analytic.loss, batch_loss(model, batch),
                                  test::kReorderedBound<double>, 0.0, "loss"));
  std::map<std::string, const double*> analytic_by_name;
  visit_tensors(const_cast<ModelWeights<double>&>(analytic.grad),
                [&](const TensorRef<double>& t) { analytic_by_name[t.name] = t.data; });
  const double step = 1e-5;
  int depth_tensors = 0;
  visit_tensors(model, [&](const TensorRef<double>& tensor) {
    if (tensor.attn_res) ++depth_tensors;
    const double* gradient = analytic_by_name.at(tensor.name);
    double largest = 0.0, error = 0.0;
    for (std::int64_t i = 0; i < tensor.element_count(); ++i) {
      const double numeric = test::central_difference(model, batch, {}, tensor.data[i], step);
      largest = std::max(largest, std::abs(numeric));
      error = std::max(error, std::abs(numeric - gradient[i]));
    }
    // Central differences with h = 1e-5: truncation h^2 / 6 |f'''| ~ 2e-11 |f'''|, rounding
    // ~ u |loss| / h = 2^-53 x 2.4 / 1e-5 ~ 3e-11 (a few times that with the forward's own
    // rounding): 1e-6 of the tensor's largest gradient leaves both room. A genuinely tiny
    // gradient is held against a floor of 1e-4, where the bound 1e-10 is still ~3 x u |loss| / h.
    EXPECT_LE(error / std::max(largest, 1e-4), 1e-6)
        << GetParam().name << ": " << tensor.name << " largest " << largest << " error " << error;
  });
  if (GetParam().scheme.mode != ResidualMode::rescaled)
    EXPECT_GT(depth_tensors, 0) << "no depth-mixing tensors checked";
}

INSTANTIATE_TEST_SUITE_P(EveryScheme, SchemeGradients, ::testing::ValuesIn(scheme_cases()),
                         [](const auto& info) { return info.param.name; });

// Forward at f64 of `model` converted to `scheme` (shared weights kept).
ForwardResult<double> run(const ModelWeights<double>& model, const AttnResConfig& scheme,
                          const ForwardOptions& options = {}) {
  return forward(convert_scheme(model, scheme), {3, 1, 4, 1, 5, 9, 2}, options);
}

ModelWeights<double> base_model(double query_std = 0.0) {
  return random_model(small_config(make(ResidualMode::full)),
                      {.seed = 11, .weight_std = 0.3, .query_std = query_std});
}

TEST(SchemeInvariants, TwoPhaseEqualsOneShotForEverySchemeThatAllowsIt) {
  ModelConfig config =
      test::model_config(3, 8, 2, 1, 12, 11);  // L = 6: schedule groups of round(sqrt(6)) = 2
  for (const auto& c : scheme_cases()) {
    config.attn_res = c.scheme;
    if (c.scheme.mode == ResidualMode::block)
      config.attn_res.block_size = 4;  // an incomplete last block
    const ModelWeights<double> model =
        test::model_with_random_gains(config, {.seed = 8, .weight_std = 0.4, .query_std = 0.6}, 21);
    ForwardOptions one_shot;
    one_shot.two_phase = false;
    const auto reference = forward(model, {5, 1, 9, 2, 6}, one_shot);
    const auto scheduled = forward(model, {5, 1, 9, 2, 6});
    EXPECT_EQ(scheduled.trace.two_phase, c.scheme.two_phase_limit().empty()) << c.name;
    // Two-phase and one-shot: the same arithmetic in another order.
    constexpr double kBound = test::kReorderedBound<double>;
    test::expect_tensor_near(c.name + " logits", scheduled.logits, reference.logits, kBound);
    for (std::size_t r = 0; r < reference.trace.reads.size(); ++r) {
      test::expect_tensor_near(c.name + " alpha." + std::to_string(r),
                               scheduled.trace.reads[r].alpha, reference.trace.reads[r].alpha,
                               kBound);
    }
  }
}

TEST(SchemeInvariants, ZeroStartsGiveTheMeanForSoftmaxNormalisedSigmoidAndScalars) {
  const ModelWeights<double> model = base_model();
  const auto mean = run(model, make(ResidualMode::rescaled));
  // 1 / n rounded once on each side (isApprox is relative): 2 u; 4 u.
  for (const auto& r : mean.trace.reads) {
    EXPECT_TRUE(r.alpha.isApproxToConstant(1.0 / static_cast<double>(r.sources.size()),
                                           test::roundoffs<double>(4)))
        << r.read;
  }
  AttnResConfig normalised = make(ResidualMode::full);
  normalised.gate = DepthGate::sigmoid_normalized;
  AttnResConfig scalars = make(ResidualMode::full);
  scalars.mixing = DepthMixing::scalars;
  // Schemes that reduce to the mean in exact arithmetic: the same sums in another order.
  for (const auto& scheme : {make(ResidualMode::full), normalised, scalars}) {
    test::expect_tensor_near(scheme.describe(), run(model, scheme).hidden_final, mean.hidden_final,
                             test::kReorderedBound<double>);
  }
  AttnResConfig sigmoid = make(ResidualMode::full);
  sigmoid.gate = DepthGate::sigmoid;
  // sigmoid(0) = 1 / (1 + exp(0)): 0.5 to a rounding or two (exactly, as computed); 2 u.
  EXPECT_TRUE(
      run(model, sigmoid).trace.reads[3].alpha.isApproxToConstant(0.5, test::roundoffs<double>(2)));
}

TEST(SchemeInvariants, OneHeadWindowAtLeastLAndZeroProjectionAreTheirLimits) {
  const ModelWeights<double> model = base_model(0.8);  // random queries
  const auto full = run(model, make(ResidualMode::full));
  // Each limit is Full AttnRes in exact arithmetic: the same arithmetic in another order.
  constexpr double kBound = test::kReorderedBound<double>;
  AttnResConfig window = make(ResidualMode::full);
  window.window = model.config.sublayers();
  test::expect_tensor_near("window = L", run(model, window).logits, full.logits, kBound);
  AttnResConfig input = make(ResidualMode::full);
  input.query_source = QuerySource::input;  // zero W: the static query
  test::expect_tensor_near("input query, W = 0", run(model, input).logits, full.logits, kBound);
  ForwardOptions one_shot;
  one_shot.two_phase = false;
  AttnResConfig one_head = make(ResidualMode::full);
  one_head.heads = 1;
  test::expect_tensor_near("heads = 1 one-shot", run(model, one_head, one_shot).logits, full.logits,
                           kBound);
  // A window smaller than L really drops sources.
  window.window = 2;
  EXPECT_EQ(run(model, window).trace.reads.back().sources.size(), 3u);
}

TEST(SchemeInvariants, DenseFormerAndMhcStartAsTheStandardResidual) {
  const ModelWeights<double> model = base_model();
  const auto standard = run(model, make(ResidualMode::standard));
  // Both start as the standard residual in exact arithmetic: the same sums in another order.
  constexpr double kBound = test::kReorderedBound<double>;
  test::expect_tensor_near("denseformer", run(model, make(ResidualMode::denseformer)).hidden_final,
                           standard.hidden_final, kBound);
  for (int m : {1, 2, 4}) {
    for (bool dynamic : {true, false}) {
      AttnResConfig mhc = make(ResidualMode::mhc);
      mhc.streams = m;
      mhc.dynamic = dynamic;
      const auto result = run(model, mhc);
      test::expect_tensor_near("mhc m = " + std::to_string(m), result.hidden_final,
                               standard.hidden_final, kBound);
      // Its mixing matrix is the standard residual's all-ones lower triangle, rank 1 at every cut.
      for (int rank : result.trace.semiseparable_rank) EXPECT_EQ(rank, 1);
    }
  }
}

TEST(SchemeInvariants, SinkhornIsDoublyStochasticAndItsGradientMatchesDifferences) {
  for (int m : {2, 4, 6}) {
    Eigen::MatrixXd start = 4.0 * Eigen::MatrixXd::Identity(m, m);
    const Matrix<double> h = sinkhorn(Matrix<double>(start), 20);
    // exp(4 I - 4) is symmetric with equal row sums, so the first row step makes it doubly
    // stochastic in exact arithmetic: what is left is rounding, not convergence. The last column
    // step divides each column by its sum (m - 1 additions, then 1 u per division): its columns
    // sum to 1 within ~2m u; the rows move by as much again plus their own m - 1 additions, ~3m u.
    // Positive terms summing to 1: relative to 1. 4m u for both.
    const double bound = test::roundoffs<double>(4.0 * m);
    for (Eigen::Index i = 0; i < m; ++i) {
      EXPECT_TRUE(test::near_relative(h.row(i).sum(), 1.0, bound, 0.0, "row sum"));
      EXPECT_TRUE(test::near_relative(h.col(i).sum(), 1.0, bound, 0.0, "column sum"));
    }
  }
  Matrix<double> logits(3, 3);
  logits << 0.3, -1.2, 0.5, 0.9, 0.1, -0.4, -0.7, 1.1, 0.2;
  Matrix<double> weight(3, 3);
  weight << 1, -2, 0.5, 0.3, 0.7, -1, 2, 0.1, -0.6;
  const Matrix<double> analytic = sinkhorn_backward(logits, 7, weight);
  // Central differences with h = 1e-6 of f = sum(sinkhorn . weight) (sum of |terms| ~1.8): rounding
  // u x 1.8 / 2h ~ 1e-10 per rounding of f (7 iterations: a few 1e-10), truncation
  // h^2 / 6 |f'''| ~ 2e-13. The bound, 5e-8 of the largest gradient (~0.22): ~1e-8, the rounding
  // term's ~10 x room.
  const double largest = analytic.cwiseAbs().maxCoeff();
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      Matrix<double> up = logits, down = logits;
      up(i, j) += 1e-6;
      down(i, j) -= 1e-6;
      const double numeric = ((sinkhorn(up, 7).array() * weight.array()).sum() -
                              (sinkhorn(down, 7).array() * weight.array()).sum()) /
                             2e-6;
      EXPECT_TRUE(
          test::near_relative(analytic(i, j), numeric, 5e-8, largest,
                              "d/dlogits(" + std::to_string(i) + ", " + std::to_string(j) + ")"));
    }
  }
}

TEST(SchemeInvariants, SemiseparableRanksFollowTheTaxonomy) {
  // Trained-like weights: random queries and mHC coefficients.
  ModelConfig config = test::model_config(4, 16, 2, 1, 24, 11);  // L = 8
  config.attn_res = make(ResidualMode::mhc);
  config.attn_res.streams = 2;
  const ModelWeights<double> mhc_model =
      random_model(config, {.seed = 4, .weight_std = 0.3, .query_std = 0.5});
  const auto mhc = forward(mhc_model, {1, 2, 3, 4, 5});
  int largest = 0;
  for (int rank : mhc.trace.semiseparable_rank_max) largest = std::max(largest, rank);
  EXPECT_LE(largest, 2) << "mHC with m = 2 streams has rank <= 2 at every cut";
  EXPECT_EQ(largest, 2) << "and reaches it with random coefficients";
  config.attn_res = make(ResidualMode::full);
  const auto full = forward(random_model(config, {.seed = 4, .weight_std = 0.3, .query_std = 0.5}),
                            {1, 2, 3, 4, 5});
  EXPECT_EQ(full.trace.semiseparable_rank_max[4], 4)
      << "Full AttnRes is dense: min(k, L + 1 - k) at k = 5";
}

TEST(SchemeInvariants, BadSettingsAreRejectedWithTheKeyNamed) {
  auto message = [](AttnResConfig scheme) {
    try {
      small_config(scheme).validate("config.json");
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  AttnResConfig s = make(ResidualMode::block, 2);
  s.window = 4;
  EXPECT_EQ(
      message(s),
      "config.json: attn_res.window applies to Full AttnRes (mode full) only, not to mode block");
  s = make(ResidualMode::full);
  s.heads = 3;
  EXPECT_EQ(message(s),
            "config.json: attn_res.heads (3) must be a positive divisor of hidden_size (8)");
  s = make(ResidualMode::mhc);
  s.streams = 0;
  EXPECT_EQ(message(s),
            "config.json: attn_res.streams must be at least 1 (mHC needs a stream), got 0");
  s = make(ResidualMode::denseformer);
  s.gate = DepthGate::sigmoid;
  EXPECT_EQ(
      message(s),
      "config.json: attn_res.gate applies to Full and Block AttnRes only, not to mode denseformer");
}

TEST(SchemeFiles, EverySchemeSavesAndLoadsExactly) {
  for (const auto& c : scheme_cases()) {
    const ModelWeights<double> model =
        random_model(small_config(c.scheme), {.seed = 2, .weight_std = 0.3, .query_std = 0.4});
    const test::TempDir temp;
    const auto dir = temp / c.name;
    save_model(model, dir);
    const ModelWeights<double> loaded = load_model(dir);
    EXPECT_EQ(loaded.config.attn_res, c.scheme) << c.name;
    test::expect_tensor_near(c.name, forward(loaded, {1, 2, 3}).logits,
                             forward(model, {1, 2, 3}).logits, 0.0);
  }
}

// The gradient engine's fast kind runs every scheme (tests/training/test_fast_zoo.cpp holds each
// to the reordering bound); here mHC through the public interface, two threads, at f32: the same
// arithmetic as the reference in another order (docs/testing.md §2).
TEST(SchemeEngines, TheFastGradientEngineGivesTheReferenceResultForMhc) {
  AttnResConfig scheme = make(ResidualMode::mhc);
  scheme.streams = 2;
  const ModelWeights<float> model =
      random_model(small_config(scheme), {.seed = 5, .weight_std = 0.3, .query_std = 0.5})
          .cast<float>();
  const std::vector<std::vector<int>> batch = {{1, 2, 3, 4}, {5, 6, 7}, {8, 9, 10, 1, 2}};
  const Gradients<float> reference = loss_and_gradients(model, batch);
  GradientEngine<float> engine(model.config, {.engine = EngineKind::fast, .threads = 2});
  Gradients<float> split;
  engine.compute(model, batch, {}, split);
  constexpr double kBound = test::kReorderedBound<float>;
  EXPECT_TRUE(test::near_relative(split.loss, reference.loss, kBound, 0.0, "loss"));
  // A gradient tensor's rounding is relative to the whole gradient's largest element, the scale
  // of the backward signals its sums are made of (test::gradient_scale).
  const double scale = test::gradient_scale(reference);
  test::expect_tensor_near("lm_head grad", split.grad.lm_head, reference.grad.lm_head, kBound,
                           scale);
  test::expect_tensor_near("first mHC projection grad", split.grad.layers[0].attn_res.pre_proj,
                           reference.grad.layers[0].attn_res.pre_proj, kBound, scale);
  // An RMS is the root of a sum of squares (no cancellation): relative to its own value.
  for (std::size_t l = 0; l < reference.sublayer_output_grad_rms.size(); ++l) {
    EXPECT_TRUE(test::near_relative(split.sublayer_output_grad_rms[l],
                                    reference.sublayer_output_grad_rms[l], kBound, 0.0,
                                    "grad rms " + std::to_string(l)));
    EXPECT_TRUE(test::near_relative(split.sublayer_output_rms[l], reference.sublayer_output_rms[l],
                                    kBound, 0.0, "output rms " + std::to_string(l)));
  }
}

}  // namespace test_schemes
}  // namespace attnres
