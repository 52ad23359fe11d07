// The cost explorer's Charts tab without a window (app/gui/models/cost_sweeps.hpp): its four
// sweeps against N, the current numbers, schemes A and B side by side, and the caption under the
// charts — against the paper's Table 1 (the standard residual moves 3d per sublayer), the core's
// own sweep of the same metrics, and the published-evidence band (docs/quality.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "attnres/published_quality.hpp"
#include "cost_sweeps.hpp"
#include "explorer_state.hpp"

namespace attnres::gui {
namespace test_cost_sweeps {

const ChartSeries* series_named(const ChartSpec& chart, const std::string& name) {
  for (const auto& series : chart.series)
    if (series.name == name) return &series;
  return nullptr;
}

}  // namespace test_cost_sweeps

using test_cost_sweeps::series_named;

TEST(CostSweeps, TheChartsTabIsTheCoresSweepOfThePaperSetting) {
  const ExplorerState state = default_explorer_state();  // L = 128, N = 8, d = 7168
  const CostSweepResult result =
      cost_explorer_sweeps(state.model, state.hardware, "full", "block", "", {});
  ASSERT_EQ(result.charts.size(), 4u);
  EXPECT_EQ(result.charts[0].id, "cost_io");
  EXPECT_EQ(result.charts[3].id, "cost_pipeline");
  // Paper Table 1: the standard residual reads 2d and writes d per sublayer, whatever N.
  const ChartSeries* standard = series_named(result.charts[0], "standard");
  ASSERT_NE(standard, nullptr);
  ASSERT_FALSE(standard->points.empty());
  for (const auto& [n, io] : standard->points) EXPECT_EQ(io, 3.0) << "N = " << n;
  // N runs over every count an equal block size gives, 1 .. L.
  EXPECT_EQ(standard->points.front().first, 1.0);
  EXPECT_EQ(standard->points.back().first, 128.0);
  // The history chart: Full AttnRes stores every output and the embedding, L + 1 = 129 vectors
  // per token, at every N (paper Table 1).
  const ChartSeries* full = nullptr;
  for (const auto& series : result.charts[1].series)
    if (series.name.find("Full") != std::string::npos) full = &series;
  ASSERT_NE(full, nullptr);
  for (const auto& [n, vectors] : full->points) EXPECT_EQ(vectors, 129.0) << "N = " << n;
  // The numbers under the charts: the standard I/O again, in multiples of d.
  const auto row = std::find_if(result.rows.begin(), result.rows.end(),
                                [](const auto& r) { return r[0] == "io_multiples_of_d.standard"; });
  ASSERT_NE(row, result.rows.end());
  EXPECT_EQ((*row)[1], "3");
  // Schemes A and B side by side, as specs (Block at the model's S).
  ASSERT_FALSE(result.compared.empty());
  EXPECT_EQ(result.compared[0][0], "scheme");
  EXPECT_EQ(result.compared[0][1], "full");
  EXPECT_EQ(result.compared[0][2], "block:block_size=16");  // N = 8 of L = 128: S = 16
  EXPECT_TRUE(result.warning.empty()) << result.warning;
}

// The quality overlay: Fig. 6's losses are the paper's 32-sublayer model's only; the published
// band is drawn for any L, and the caption says when L lies outside the evidence.
TEST(CostSweeps, TheQualityOverlaySaysWhoseNumbersItDraws) {
  ExplorerState state = default_explorer_state();
  state.model.sublayers = 64;
  state.model.blocks = 8;
  const CostSweepResult fig6 =
      cost_explorer_sweeps(state.model, state.hardware, "full", "block", "paper_fig6", {});
  EXPECT_FALSE(fig6.warning.empty());
  const CostSweepResult band =
      cost_explorer_sweeps(state.model, state.hardware, "full", "block", "published_band", {});
  EXPECT_NE(band.warning.find("Outside the evidence: L = 64"), std::string::npos) << band.warning;
  const QualityBand expected = quality_band(64, {8});
  const ChartSeries* low = series_named(band.charts[0], "published band, lowest f");
  ASSERT_NE(low, nullptr);
  EXPECT_TRUE(low->secondary_axis);
  const auto at_8 = std::find_if(low->points.begin(), low->points.end(),
                                 [](const auto& p) { return p.first == 8.0; });
  ASSERT_NE(at_8, low->points.end());
  EXPECT_DOUBLE_EQ(at_8->second, expected.points[0].low);
}

}  // namespace attnres::gui
