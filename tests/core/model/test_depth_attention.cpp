// Depth attention primitives (docs/math.md §2.2, §2.4): worked example, mean at zero query,
// key-norm scale invariance, exact merging, stability.
#include <gtest/gtest.h>

#include <cmath>

#include "attnres/depth_attention.hpp"
#include "model_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_depth_attention {

using Mat = Matrix<double>;
using Vec = Vector<double>;

Mat constant(double value, Eigen::Index T = 1, Eigen::Index d = 1) {
  return Mat::Constant(T, d, value);
}

TEST(DepthAttention, WorkedExampleGivesTwentyThirds) {
  // Sources with scores 0, ln2 and values 2, 5: o = 1*2 + 2*5 = 12, l = 1 + 2 = 3.
  const Vec score0 = Vec::Constant(1, 0.0), score1 = Vec::Constant(1, std::log(2.0));
  const auto first_two = merge_stats(single_source_stats<double>(constant(2.0), score0),
                                     single_source_stats<double>(constant(5.0), score1));
  EXPECT_NEAR(first_two.o(0, 0) * std::exp(first_two.m(0)), 12.0, 1e-12);
  EXPECT_NEAR(first_two.l(0) * std::exp(first_two.m(0)), 3.0, 1e-12);
  // Adding value 8 with score ln6: (12 + 48) / (3 + 6) = 20/3.
  const auto all = merge_stats(
      first_two, single_source_stats<double>(constant(8.0), Vec(Vec::Constant(1, std::log(6.0)))));
  EXPECT_NEAR(all.finish()(0, 0), 20.0 / 3.0, 1e-12);
  // Averaging the two local means (4 and 8) would give 6: the merge must not do that.
  EXPECT_GT(std::abs(all.finish()(0, 0) - 6.0), 0.5);
}

TEST(DepthAttention, ZeroQueryGivesTheMeanOfTheSources) {
  std::mt19937 rng(3);
  std::normal_distribution<double> normal;
  std::vector<Mat> values(4, Mat(5, 8));
  for (auto& v : values) v = v.unaryExpr([&](double) { return normal(rng); });
  std::vector<const Mat*> sources;
  for (const auto& v : values) sources.push_back(&v);
  DepthReadWeights<double> read{Vec::Zero(8), Vec::Ones(8)};
  Mat h, alpha;
  depth_attention_one_shot(sources, read, 1e-6, &h, &alpha);
  const Mat mean = (values[0] + values[1] + values[2] + values[3]) / 4.0;
  test::expect_tensor_near("zero-query read", h, mean, 1e-14);
  EXPECT_NEAR(alpha.maxCoeff(), 0.25, 1e-15);
  EXPECT_NEAR(alpha.minCoeff(), 0.25, 1e-15);
}

TEST(DepthAttention, KeyNormMakesScoresInvariantToSourceScale) {
  std::mt19937 rng(5);
  std::normal_distribution<double> normal;
  auto random = [&](Eigen::Index rows, Eigen::Index cols) {
    return Mat(rows, cols).unaryExpr([&](double) { return normal(rng); }).eval();
  };
  const Mat a = random(3, 6), b = random(3, 6);
  const Mat a_scaled = 37.5 * a;  // same direction, much larger magnitude
  DepthReadWeights<double> read{random(6, 1), random(6, 1)};
  Mat h, alpha, h_scaled, alpha_scaled;
  depth_attention_one_shot<double>({&a, &b}, read, 1e-12, &h, &alpha);
  depth_attention_one_shot<double>({&a_scaled, &b}, read, 1e-12, &h_scaled, &alpha_scaled);
  test::expect_tensor_near("alpha under source scaling", alpha_scaled, alpha, 1e-9);
  // The values are not normalised: the output moves with the scaled source.
  EXPECT_GT((h_scaled - h).norm(), 1.0);
}

TEST(DepthAttention, PhaseOnePlusMergesEqualsOneShotAtFloat64) {
  std::mt19937 rng(11);
  std::normal_distribution<double> normal;
  auto random = [&](Eigen::Index rows, Eigen::Index cols) {
    return Mat(rows, cols).unaryExpr([&](double) { return normal(rng); }).eval();
  };
  const Eigen::Index T = 4, d = 8;
  std::vector<Mat> values;
  for (int i = 0; i < 6; ++i) values.push_back(random(T, d));
  DepthReadWeights<double> read{random(d, 1), (random(d, 1).array() + 2.0).matrix()};
  const double eps = 1e-6;
  std::vector<const Mat*> all;
  for (const auto& v : values) all.push_back(&v);
  Mat reference, alpha;
  depth_attention_one_shot(all, read, eps, &reference, &alpha);

  // History = first 4 sources in phase 1; the last two merged one at a time.
  std::vector<const Mat*> history(all.begin(), all.begin() + 4);
  std::vector<Vec> inv_rms;
  for (auto* v : history) inv_rms.push_back(key_inverse_rms(*v, eps));
  const Mat query = read.query.cwiseProduct(read.key_norm_gain).transpose();  // (1, d)
  auto stats = phase_one_stats<double>(history, inv_rms, query, nullptr).front();
  for (std::size_t i = 4; i < values.size(); ++i) {
    const Vec z = depth_scores(values[i], key_inverse_rms(values[i], eps), Vec(query.transpose()));
    stats = merge_stats(stats, single_source_stats<double>(values[i], z));
  }
  test::expect_tensor_near("two-phase vs one-shot", stats.finish(), reference, 1e-12);
}

TEST(DepthAttention, HugeScoresStayFinite) {
  // Scores around +-1e4 must not overflow exp(): both paths subtract the running max.
  const Mat a = constant(1.0, 2, 4), b = constant(-1.0, 2, 4);
  DepthReadWeights<double> read{Vec::Constant(4, 5e3), Vec::Ones(4)};
  Mat h, alpha;
  depth_attention_one_shot<double>({&a, &b}, read, 1e-6, &h, &alpha);
  EXPECT_TRUE(h.allFinite());
  EXPECT_NEAR(alpha(0, 0), 1.0, 1e-12);  // z_a = +1e4, z_b = -1e4
  const auto merged = merge_stats(single_source_stats<double>(a, Vec(Vec::Constant(2, 1e4))),
                                  single_source_stats<double>(b, Vec(Vec::Constant(2, -1e4))));
  EXPECT_TRUE(merged.finish().allFinite());
  EXPECT_NEAR(merged.finish()(0, 0), 1.0, 1e-12);
}

}  // namespace test_depth_attention
}  // namespace attnres
