// Paired intervals, t quantiles and the seeds-to-resolve line (docs/training.md#statistics),
// against published table values, closed forms written here independently of the library's
// Boost.Math route, and hand-worked examples.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "attnres/format.hpp"
#include "attnres/paired_stats.hpp"
#include "test_support.hpp"

namespace attnres {
namespace {

// Closed-form t quantiles for 1, 2 and 4 degrees of freedom (Hill 1970; Shaw 2006).
double t_quantile_closed_form(double p, int dof) {
  const double sign = p < 0.5 ? -1.0 : 1.0;
  switch (dof) {
    case 1:
      return std::tan(std::numbers::pi * (p - 0.5));
    case 2:
      return (2.0 * p - 1.0) / std::sqrt(2.0 * p * (1.0 - p));
    case 4: {
      const double alpha = 4.0 * p * (1.0 - p);
      const double q = std::cos(std::acos(std::sqrt(alpha)) / 3.0) / std::sqrt(alpha);
      return sign * 2.0 * std::sqrt(q - 1.0);
    }
  }
  return std::nan("");
}

TEST(StudentT, QuantilesMatchThePublishedTable) {
  // Two-sided 95 % (p = 0.975) and one-sided 80 % (p = 0.80), as printed in standard tables
  // (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2), to the table's 3 decimals: within half a unit of
  // the third.
  const std::vector<std::pair<int, double>> t975{{1, 12.706}, {2, 4.303},  {3, 3.182},  {4, 2.776},
                                                 {5, 2.571},  {8, 2.306},  {9, 2.262},  {10, 2.228},
                                                 {20, 2.086}, {30, 2.042}, {100, 1.984}};
  for (const auto& [dof, value] : t975)
    EXPECT_NEAR(student_t_quantile(0.975, dof), value, 5e-4) << "dof " << dof;
  const std::vector<std::pair<int, double>> t80{{1, 1.376}, {2, 1.061}, {5, 0.920},
                                                {8, 0.889}, {9, 0.883}, {30, 0.854}};
  for (const auto& [dof, value] : t80)
    EXPECT_NEAR(student_t_quantile(0.80, dof), value, 5e-4) << "dof " << dof;
  EXPECT_NEAR(student_t_quantile(0.995, 2), 9.925, 5e-4);
}

TEST(StudentT, QuantilesMatchClosedForms) {
  for (int dof : {1, 2, 4}) {
    for (double p : {0.51, 0.6, 0.8, 0.9, 0.975, 0.995, 0.9995, 0.2, 0.025}) {
      const double expected = t_quantile_closed_form(p, dof);
      // Boost's quantile is within ~2 u of the exact t here (checked against 40-digit values);
      // the closed forms lose digits to their conditioning: q - 1 cancels near p = 1/2 at
      // dof 4 (~3400 u of t at p = 0.51), tan near pi / 2 at p = 0.9995 (~800 u). Relative to
      // |t|: 16384 u.
      EXPECT_TRUE(
          test::near_relative(student_t_quantile(p, dof), expected, test::roundoffs<double>(16384)))
          << "dof " << dof << " p " << p;
      // That error of t moves the cdf by pdf(t) t x it, at most ~70 u of p; the cdf's own a few:
      // 256 u of p.
      EXPECT_TRUE(
          test::near_relative(student_t_cdf(expected, dof), p, test::roundoffs<double>(256)))
          << "dof " << dof << " p " << p;
    }
  }
}

// A mean of differences: 2 additions and a division, and the inputs' own rounding (u each),
// relative to the largest |difference| (the sum may cancel): ~5 u; 8 u. Their standard deviation:
// the deviations carry that, then squares, a sum, a division and a root: ~8 u; 16 u.
constexpr double kMeanBound = test::roundoffs<double>(8);
constexpr double kSpreadBound = test::roundoffs<double>(16);

TEST(PairedInterval, HandWorkedExample) {
  // d = {-0.10, -0.14, -0.12}: mean -0.12, s = 0.02, half width 4.302653 * 0.02 / sqrt 3.
  const PairedInterval interval = paired_interval({-0.10, -0.14, -0.12});
  EXPECT_EQ(interval.pairs, 3);
  EXPECT_TRUE(test::near_relative(interval.mean, -0.12, kMeanBound, 0.14, "mean"));
  EXPECT_TRUE(test::near_relative(interval.spread, 0.02, kSpreadBound, 0.14, "spread"));
  // t printed to 7 digits (4.302653): a unit of its last digit, through s / sqrt(3).
  EXPECT_NEAR(interval.half_width, 4.302653 * 0.02 / std::sqrt(3.0), 1e-6 * 0.02 / std::sqrt(3.0));
  // Printed to 6 decimals: half a unit of the last.
  EXPECT_NEAR(interval.low, -0.169683, 5e-7);
  EXPECT_NEAR(interval.high, -0.070317, 5e-7);
  EXPECT_TRUE(interval.resolved);
}

TEST(PairedInterval, AnIntervalAcrossZeroIsNotResolved) {
  // d = {0.01, -0.03, 0.05}: mean 0.01, s = 0.04, half width 4.3027 * 0.04 / sqrt 3 = 0.0994.
  const PairedInterval interval = paired_interval({0.01, -0.03, 0.05});
  EXPECT_TRUE(test::near_relative(interval.mean, 0.01, kMeanBound, 0.05, "mean"));
  EXPECT_TRUE(test::near_relative(interval.spread, 0.04, kSpreadBound, 0.05, "spread"));
  // 0.0993655... cut at the 6th decimal (not rounded): within a unit of the last.
  EXPECT_NEAR(interval.half_width, 0.099365, 1e-6);
  EXPECT_FALSE(interval.resolved);
  // s / gap = 4: n >= (t_.975 + t_.80)^2 * 16 -> about 128 seeds (normal approximation 125.6).
  EXPECT_EQ(interval.seeds_to_resolve, seeds_to_resolve(0.01, 0.04));
  EXPECT_GE(interval.seeds_to_resolve, 126);
  EXPECT_LE(interval.seeds_to_resolve, 130);
}

TEST(PairedInterval, OnePairHasNoInterval) {
  const PairedInterval interval = paired_interval({-0.2});
  EXPECT_EQ(interval.mean, -0.2);  // one value over 1: exact
  EXPECT_TRUE(std::isnan(interval.half_width));
  EXPECT_FALSE(interval.resolved);
  EXPECT_TRUE(std::isnan(paired_interval({}).mean));
}

// The iteration written out with the table's own values: s / gap = 1 -> n = 10
// ((2.262 + 0.883)^2 = 9.89 <= 10 while (2.306 + 0.889)^2 = 10.21 > 9).
TEST(SeedsToResolve, HandWorkedFromTheTable) {
  EXPECT_EQ(seeds_to_resolve(0.05, 0.05), 10);
  EXPECT_EQ(seeds_to_resolve(-0.05, 0.05), 10);
  EXPECT_EQ(seeds_to_resolve(0.05, 0.0), 2);
  EXPECT_EQ(seeds_to_resolve(0.0, 0.05), 0);
}

// An independent implementation: the same criterion with the test's own quantiles (the closed
// form for small dof would not cover these, so a Cornish-Fisher expansion of the t quantile
// around the normal one, accurate to ~1e-4 for dof >= 5).
double t_quantile_cornish_fisher(double z, double dof) {
  const double z3 = z * z * z, z5 = z3 * z * z, z7 = z5 * z * z;
  return z + (z3 + z) / (4 * dof) + (5 * z5 + 16 * z3 + 3 * z) / (96 * dof * dof) +
         (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * dof * dof * dof);
}

TEST(SeedsToResolve, AgreesWithAnIndependentIteration) {
  for (double ratio : {0.8, 1.5, 2.0, 3.0, 5.0}) {
    int expected = 0;
    for (int n = 6; n < 10000; ++n) {
      const double t =
          t_quantile_cornish_fisher(1.959964, n - 1) + t_quantile_cornish_fisher(0.841621, n - 1);
      if (n >= t * t * ratio * ratio) {
        expected = n;
        break;
      }
    }
    EXPECT_NEAR(seeds_to_resolve(1.0, ratio), expected, 1) << "s / gap " << ratio;
  }
}

// An interval bound that rounds to zero at the table's decimals keeps its sign and its first
// digits (before: "+0.000" beside "resolved" for a bound of -0.0004 on one CPU and +0.0003 on
// another); ordinary bounds keep their decimals.
TEST(IntervalBound, ABoundThatRoundsToZeroShowsItsSign) {
  EXPECT_EQ(format_signed_bound(-0.00042, 3), "-0.00042");
  EXPECT_EQ(format_signed_bound(0.00003, 3), "+0.000030");
  EXPECT_EQ(format_signed_bound(-0.00042, 4), "-0.0004");
  EXPECT_EQ(format_signed_bound(4.2e-11, 3), "+4.2e-11");
  for (const double bound : {-0.00042, 0.00003, -4.9e-4, 4.9e-5, -1e-9}) {
    const std::string text = format_signed_bound(bound, 3);
    EXPECT_EQ(text.front(), bound < 0 ? '-' : '+') << text;
    EXPECT_NE(text.find_first_of("123456789"), std::string::npos) << text;
    EXPECT_NEAR(std::stod(text), bound, std::abs(bound) * 0.06) << text;
  }
  EXPECT_EQ(format_signed_bound(-0.158, 3), "-0.158");
  EXPECT_EQ(format_signed_bound(0.057, 3), "+0.057");
  EXPECT_EQ(format_signed_bound(-0.0095, 3), "-0.009");  // as printf rounds it: 3 decimals kept
  EXPECT_EQ(format_signed_bound(0.0, 3), "+0.000");
  EXPECT_EQ(format_signed_bound(-0.0, 3), "+0.000");
  EXPECT_EQ(format_signed_bound(std::nan(""), 3), "-");
}

}  // namespace
}  // namespace attnres
