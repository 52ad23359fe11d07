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

// The worked example's closed forms against about a dozen roundings (a log, up to five exps,
// products, two sums and a division), each within 1 u of the result's magnitude; an exp through
// Eigen's vectorised path may take a few u. 32 u leaves room for both.
constexpr double kWorkedExample = test::roundoffs<double>(32);

TEST(DepthAttention, WorkedExampleGivesTwentyThirds) {
  // Sources with scores 0, ln2 and values 2, 5: o = 1*2 + 2*5 = 12, l = 1 + 2 = 3.
  const Vec score0 = Vec::Constant(1, 0.0), score1 = Vec::Constant(1, std::log(2.0));
  const auto first_two = merge_stats(single_source_stats<double>(constant(2.0), score0),
                                     single_source_stats<double>(constant(5.0), score1));
  EXPECT_TRUE(test::near_relative(first_two.o(0, 0) * std::exp(first_two.m(0)), 12.0,
                                  kWorkedExample, 0.0, "o"));
  EXPECT_TRUE(test::near_relative(first_two.l(0) * std::exp(first_two.m(0)), 3.0, kWorkedExample,
                                  0.0, "l"));
  // Adding value 8 with score ln6: (12 + 48) / (3 + 6) = 20/3.
  const auto all = merge_stats(
      first_two, single_source_stats<double>(constant(8.0), Vec(Vec::Constant(1, std::log(6.0)))));
  EXPECT_TRUE(test::near_relative(all.finish()(0, 0), 20.0 / 3.0, kWorkedExample, 0.0, "h"));
  // Averaging the two local means (4 and 8) would give 6: the merge must not do that (a miss of
  // 2/3, a tenth of the result, not a rounding).
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
  // Every weight is exp(0) / 4: the read is a sum of 4 terms v_i / 4, within 4 u of the sum of
  // their |terms|, at most the largest |v| (which is the scale: the mean of random values can
  // cancel). The weights: exp(0) (a few u through a vectorised exp), a 4-term sum, a division.
  double largest = 0.0;
  for (const auto& v : values) largest = std::max(largest, v.cwiseAbs().maxCoeff());
  test::expect_tensor_near("zero-query read", h, mean, test::roundoffs<double>(4), largest);
  EXPECT_TRUE(test::near_relative(alpha.maxCoeff(), 0.25, test::roundoffs<double>(8)));
  EXPECT_TRUE(test::near_relative(alpha.minCoeff(), 0.25, test::roundoffs<double>(8)));
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
  // Not rounding alone: eps = 1e-12 is not scaled with the source, so a's scores move by about
  // eps / (2 mean(a^2)) |z|, up to ~1e-11 of the weights for rows of mean square ~0.2 and scores
  // ~5; rounding (6-term dot products, a sqrt) is ~100 u ~ 1e-14. 1e-9 of the largest weight
  // (at least 1/2 with two sources) is the eps term's bound with two orders of room.
  test::expect_tensor_near("alpha under source scaling", alpha_scaled, alpha, 1e-9);
  // The values are not normalised: the output moves with the scaled source (by 36.5 alpha_a a,
  // of order 10; a rounding would be ~1e-14).
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
  test::expect_tensor_near("two-phase vs one-shot", stats.finish(), reference,
                           test::kReorderedBound<double>);
}

TEST(DepthAttention, HugeScoresStayFinite) {
  // Scores around +-1e4 must not overflow exp(): both paths subtract the running max.
  const Mat a = constant(1.0, 2, 4), b = constant(-1.0, 2, 4);
  DepthReadWeights<double> read{Vec::Constant(4, 5e3), Vec::Ones(4)};
  Mat h, alpha;
  depth_attention_one_shot<double>({&a, &b}, read, 1e-6, &h, &alpha);
  EXPECT_TRUE(h.allFinite());
  // z_a = 4 x 5e3 / sqrt(1 + 1e-6) ~ +2e4, z_b ~ -2e4: alpha_a = exp(0) / (exp(0) + exp(-4e4)),
  // three roundings with exp(-4e4) = 0; 8 u leaves room for a vectorised exp's few u.
  EXPECT_TRUE(test::near_relative(alpha(0, 0), 1.0, test::roundoffs<double>(8)));
  const auto merged = merge_stats(single_source_stats<double>(a, Vec(Vec::Constant(2, 1e4))),
                                  single_source_stats<double>(b, Vec(Vec::Constant(2, -1e4))));
  EXPECT_TRUE(merged.finish().allFinite());
  // o / l = (1 exp(0) + (-1) exp(-2e4)) / (exp(0) + exp(-2e4)): as above, 8 u.
  EXPECT_TRUE(test::near_relative(merged.finish()(0, 0), 1.0, test::roundoffs<double>(8)));
}

}  // namespace test_depth_attention
}  // namespace attnres
