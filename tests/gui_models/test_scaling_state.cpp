// The Scaling law view's state and results without a window (app/gui/models/scaling_state.hpp):
// the multipliers against the paper's fits computed here by hand, the problems the view shows,
// and a scenario's [scaling] table round-tripping through the state.
#include <gtest/gtest.h>

#include <cmath>

#include "attnres/scenario.hpp"
#include "scaling_state.hpp"
#include "test_support.hpp"

namespace attnres::gui {
namespace test_scaling_state {

// The compute at which loss = A·C^(-a) reaches `loss`: C = (A / loss)^(1/a) (paper Fig. 4).
double compute_at(double A, double a, double loss) {
  return std::pow(A / loss, 1.0 / a);
}

}  // namespace test_scaling_state

TEST(ScalingState, MultipliersAreThePaperFitsComputeRatiosAtTheTarget) {
  using test_scaling_state::compute_at;
  const ScalingState state{1.70, 1.60, 1.90};
  const ScalingResult result = compute_scaling(state);
  ASSERT_TRUE(result.problem.empty()) << result.problem;
  // The fits of the paper's Fig. 4: baseline 1.891·C^-0.057, Block 1.870·C^-0.058,
  // Full 1.865·C^-0.057.
  const double baseline = compute_at(1.891, 0.057, 1.70);
  const double block = compute_at(1.870, 0.058, 1.70);
  const double full = compute_at(1.865, 0.057, 1.70);
  // C = (A / loss)^(1/a): the exponent 1/a ~ 17.5 multiplies the base's roundoff, and the core
  // may take another (equal) route to C; a ratio of two such values: 1024 u.
  EXPECT_TRUE(test::near_relative(result.block_multiplier, baseline / block,
                                  test::roundoffs<double>(1024), 0.0, "Block multiplier"));
  EXPECT_TRUE(test::near_relative(result.full_multiplier, baseline / full,
                                  test::roundoffs<double>(1024), 0.0, "Full multiplier"));
  // The paper's reading: near loss 1.69-1.70 Block AttnRes is worth about 1.25x compute.
  EXPECT_GT(result.block_multiplier, 1.15);
  EXPECT_LT(result.block_multiplier, 1.35);
  // The table the view shows is the report's: three fits, the multiplier in its last column.
  ASSERT_EQ(result.fits.rows.size(), 3u);
  EXPECT_EQ(result.fits.header.back(), "compute multiplier vs baseline");
  ASSERT_EQ(result.charts.size(), 2u);
  EXPECT_DOUBLE_EQ(*result.charts[1].marker_x, 1.70);
}

TEST(ScalingState, ProblemsNameTheFieldsAndComputeNothing) {
  ScalingResult bad = compute_scaling({1.70, 1.90, 1.60});
  EXPECT_EQ(bad.problem, "scaling: the curve needs from < to");
  EXPECT_TRUE(bad.charts.empty());
  bad = compute_scaling({4.0, 1.60, 1.90});
  EXPECT_NE(bad.problem.find("0.5 .. 3"), std::string::npos) << bad.problem;
  const nlohmann::json dump = scaling_dump({1.70, 1.90, 1.60});
  EXPECT_EQ(dump["results"]["problem"], "scaling: the curve needs from < to");
}

TEST(ScalingState, AScenariosScalingTableRoundTrips) {
  Scenario scenario;
  scenario.scaling = {1.72, 1.65, 1.85};
  const ScalingState state = scaling_state(scenario);
  EXPECT_DOUBLE_EQ(state.target_loss, 1.72);
  EXPECT_DOUBLE_EQ(state.loss_from, 1.65);
  EXPECT_DOUBLE_EQ(state.loss_to, 1.85);
  Scenario saved;
  save_scaling_state(state, saved);
  EXPECT_DOUBLE_EQ(saved.scaling.target_loss, 1.72);
  EXPECT_DOUBLE_EQ(saved.scaling.loss_to, 1.85);
  const nlohmann::json dump = scaling_dump(state);
  EXPECT_DOUBLE_EQ(dump["state"]["target_loss"].get<double>(), 1.72);
  EXPECT_EQ(dump["results"]["block_multiplier"].get<double>(),
            compute_scaling(state).block_multiplier);  // the same computation, bit for bit
}

}  // namespace attnres::gui
