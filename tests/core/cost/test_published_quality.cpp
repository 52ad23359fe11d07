// The published quality evidence and its band (docs/quality.md): the normalisation against the
// table's own numbers worked by hand, the interpolation, coverage and the outside-the-evidence
// marks.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "attnres/published_quality.hpp"
#include "test_support.hpp"

namespace attnres {
namespace test_published_quality {

// Bounds (docs/testing.md §2). A fraction f = (standard - Block) / (standard - Full) is made of
// losses (~1.7 to 3.7, given to 3 or 4 decimals) whose binary rounding (u of each) survives the
// cancellation of differences as small as 0.009: such a difference carries 2 u x 1.766 / 0.009
// ~ 400 u of itself, a quotient of two ~520 u, an interpolation between two no more. Against the
// quotient of the printed differences, relative to 1, the fractions' scale: 1024 u.
constexpr double kFractionBound = test::roundoffs<double>(1024);
::testing::AssertionResult near_fraction(double actual, double expected) {
  return test::near_relative(actual, expected, kFractionBound, 1.0, "recovered fraction");
}

const PublishedStudy& study(const std::string& id) {
  for (const auto& s : published_studies()) {
    if (s.id == id) return s;
  }
  throw std::runtime_error("no study " + id);
}

TEST(PublishedQuality, EveryStudyIsSourcedAndConsistent) {
  std::set<std::string> ids;
  for (const auto& s : published_studies()) {
    SCOPED_TRACE(s.id);
    EXPECT_TRUE(ids.insert(s.id).second) << "duplicate id";
    EXPECT_FALSE(s.source.empty());
    EXPECT_NE(s.url.find("https://"), std::string::npos);
    EXPECT_FALSE(s.model.empty());
    EXPECT_FALSE(s.data.empty());
    EXPECT_FALSE(s.tokens.empty());
    EXPECT_FALSE(s.obtained.empty());
    EXPECT_EQ(s.sublayers, 2 * s.layers);
    EXPECT_TRUE(s.loss_kind == "validation" || s.loss_kind == "training");
    EXPECT_FALSE(std::isnan(s.baseline));
    for (const auto& p : s.block) {
      EXPECT_GE(p.blocks, 1);
      EXPECT_LT(p.blocks, s.sublayers);  // N = L is Full, stored as `full`
      EXPECT_GT(p.loss, 0.0);
    }
  }
  // The paper's Fig. 6 as the paper-numbers table has it: L = 32, S = 1 taken as Full.
  const PublishedStudy& fig6 = study("kimi_fig6");
  EXPECT_EQ(fig6.sublayers, 32);
  EXPECT_DOUBLE_EQ(fig6.baseline, 1.766);
  EXPECT_DOUBLE_EQ(fig6.full, 1.737);
  ASSERT_EQ(fig6.block.size(), 5u);
  EXPECT_EQ(fig6.block.front().blocks, 1);
  EXPECT_EQ(fig6.block.back().blocks, 16);
}

TEST(PublishedQuality, RecoveredFractionByHand) {
  // LR-AttnRes n = 8: (3.0009 - 2.9778) / (3.0009 - 2.9752) = 0.0231 / 0.0257.
  EXPECT_TRUE(near_fraction(recovered_fraction(study("lr_attnres"), 2.9778), 0.0231 / 0.0257));
  // The paper at N = 8 (S = 4): (1.766 - 1.746) / (1.766 - 1.737) = 0.02 / 0.029.
  EXPECT_TRUE(near_fraction(study_fraction_at(study("kimi_fig6"), 8), 0.02 / 0.029));
  // Block beating Full gives f > 1 (LR-AttnRes n = 16: 0.0336 / 0.0257).
  EXPECT_TRUE(near_fraction(study_fraction_at(study("lr_attnres"), 16), 0.0336 / 0.0257));
  // No Full run, or Full above the baseline: no normalisation.
  EXPECT_TRUE(std::isnan(recovered_fraction(study("qiu023_torchtitan"), 3.6)));
  EXPECT_TRUE(std::isnan(recovered_fraction(study("delta_1044m"), 3.458)));
  EXPECT_FALSE(normalisable(study("delta_1044m")));
  EXPECT_FALSE(normalisable(study("mhar_1b")));  // no Block point
  EXPECT_TRUE(normalisable(study("atinching_30m")));
}

TEST(PublishedQuality, CurveIsLogLinearInNUpToFullAtL) {
  const PublishedStudy& fig6 = study("kimi_fig6");
  const double f2 = (1.766 - 1.753) / 0.029, f4 = (1.766 - 1.748) / 0.029;
  const double t = std::log(3.0 / 2.0) / std::log(2.0);  // N = 3 between 2 and 4
  EXPECT_TRUE(near_fraction(study_fraction_at(fig6, 3), f2 + t * (f4 - f2)));
  const double f16 = (1.766 - 1.746) / 0.029;
  EXPECT_TRUE(near_fraction(study_fraction_at(fig6, 24),
                            f16 + std::log(24.0 / 16.0) / std::log(2.0) * (1 - f16)));
  // The last knot (L, 1) itself: f0 + 1 x (1 - f0), two roundings of 1; 4 u.
  EXPECT_TRUE(test::near_relative(study_fraction_at(fig6, 32), 1.0, test::roundoffs<double>(4)));
  EXPECT_TRUE(std::isnan(study_fraction_at(fig6, 33)));
  // Below a study's smallest measured N there is no value (no extrapolation).
  EXPECT_TRUE(std::isnan(study_fraction_at(study("lr_attnres"), 2)));
}

TEST(PublishedQuality, BandCoversWhatWasMeasured) {
  const QualityBand band = quality_band(32, {1, 4, 32});
  ASSERT_EQ(band.points.size(), 3u);
  // N = 1: only the paper measured it.
  EXPECT_EQ(band.points[0].studies, std::vector<std::string>{"kimi_fig6"});
  EXPECT_TRUE(near_fraction(band.points[0].low, (1.766 - 1.757) / 0.029));
  EXPECT_DOUBLE_EQ(band.points[0].low, band.points[0].high);
  // N = 4: the paper lowest (0.018 / 0.029), Delta 220M highest (0.035 / 0.037).
  EXPECT_TRUE(near_fraction(band.points[1].low, 0.018 / 0.029));
  EXPECT_TRUE(near_fraction(band.points[1].high, (3.656 - 3.621) / (3.656 - 3.619)));
  EXPECT_GE(band.points[1].studies.size(), 4u);
  // N = L is Full AttnRes in every study: f = 1.
  EXPECT_TRUE(test::near_relative(band.points[2].low, 1.0, test::roundoffs<double>(4)));
  EXPECT_TRUE(test::near_relative(band.points[2].high, 1.0, test::roundoffs<double>(4)));
  EXPECT_TRUE(band.depth_inside);
  EXPECT_EQ(band.evidence_min_sublayers, 12);
  EXPECT_EQ(band.evidence_max_sublayers, 48);
  // The counter-evidence is named in the caption.
  for (const char* id : {"delta_1044m", "delta_qwen3_0p6b", "mhar_1b"}) {
    EXPECT_NE(band.caption.find(id), std::string::npos) << id;
  }
  EXPECT_EQ(band.caption.find("Outside the evidence"), std::string::npos);
}

TEST(PublishedQuality, MarksSettingsOutsideTheEvidence) {
  const QualityBand deep = quality_band(128, {8, 64});
  EXPECT_FALSE(deep.depth_inside);
  EXPECT_NE(deep.caption.find("Outside the evidence: L = 128"), std::string::npos) << deep.caption;
  EXPECT_TRUE(deep.points[0].covered());
  EXPECT_FALSE(deep.points[1].covered());  // no study measured N = 64
  EXPECT_TRUE(std::isnan(deep.points[1].low));
  EXPECT_NE(deep.caption.find("No study measured N = 64"), std::string::npos);
  // The chart series: band edges only where covered; the studies' own points up to N = L.
  const auto series = quality_band_series(deep, false);
  ASSERT_EQ(series.size(), 3u);
  EXPECT_EQ(series[0].points.size(), 1u);
  EXPECT_TRUE(series[0].secondary_axis);
  // On a block-size axis x = L / N.
  const auto by_size = quality_band_series(quality_band(32, {4}), true);
  EXPECT_DOUBLE_EQ(by_size[0].points[0].first, 8.0);
}

}  // namespace test_published_quality
}  // namespace attnres
