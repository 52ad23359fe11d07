// Sweeps, reports and writing them: skipped settings, chart specs, markdown, atomic output.
#include <gtest/gtest.h>

#include <fstream>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/report.hpp"
#include "attnres/sweep.hpp"
#include "test_support.hpp"

namespace attnres {
namespace {

CostInputs base_inputs() {
  CostInputs in;
  in.sublayers = 32;
  in.blocks = 8;
  in.d_model = 100;
  return in;
}

TEST(Sweep, DivisorsAreSortedAndComplete) {
  EXPECT_EQ(divisors(54), (std::vector<std::int64_t>{1, 2, 3, 6, 9, 18, 27, 54}));
  EXPECT_EQ(divisors(1), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(divisors(49), (std::vector<std::int64_t>{1, 7, 49}));
}

TEST(Sweep, ImpossibleSettingsAreSkippedAndListed) {
  SweepSpec spec{"s", "", {"blocks", {1, 8, 32, 33, 64}}, std::nullopt,
                 {"io_multiples_of_d.block_two_phase"}, false, false, ""};
  const auto result = run_sweep(base_inputs(), spec);
  ASSERT_EQ(result.points.size(), 3u);
  EXPECT_DOUBLE_EQ(result.points[1].values[0], 8.0 / 4.0 + 5.0);  // N = 8, S = 4
  ASSERT_EQ(result.skipped.size(), 2u);
  EXPECT_NE(result.skipped[0].find("blocks = 33"), std::string::npos);
  EXPECT_EQ(sweep_csv(result).substr(0, 41), "blocks,io_multiples_of_d.block_two_phase\n");
}

TEST(Sweep, GridAndCancellation) {
  SweepSpec spec{"g", "", {"pp", {1, 2, 4}}, SweepAxis{"vpp", {1, 2}},
                 {"pipeline_comm_elements_per_token.naive_per_d"}, false, false, ""};
  const auto result = run_sweep(base_inputs(), spec);
  ASSERT_EQ(result.points.size(), 6u);
  // P = 4, V = 2: C = 8, C(C-1)/2 = 28 in units of N_p·d.
  EXPECT_DOUBLE_EQ(result.points.back().values[0], 28.0);
  const auto chart = sweep_chart(result, base_inputs());
  EXPECT_EQ(chart.series.size(), 2u);  // one per vpp value
  EXPECT_NE(chart.series[1].name.find("vpp=2"), std::string::npos);
  EXPECT_THROW(run_sweep(base_inputs(), spec, [](std::size_t, std::size_t) { return false; }), Error);
}

TEST(Sweep, ChartMarksTheScenarioAndOverlaysFig6) {
  SweepSpec spec{"t", "", {"blocks", divisors(32)}, std::nullopt,
                 {"io_multiples_of_d.block_two_phase"}, true, false, "paper_fig6"};
  const auto chart = sweep_chart(run_sweep(base_inputs(), spec), base_inputs());
  ASSERT_TRUE(chart.marker_x.has_value());
  EXPECT_EQ(*chart.marker_x, 8.0);
  const auto& fig6 = chart.series[1];
  EXPECT_TRUE(fig6.secondary_axis);
  ASSERT_EQ(fig6.points.size(), 6u);
  EXPECT_EQ(fig6.points.front(), std::make_pair(1.0, 1.757));  // S = 32 -> N = 1
  EXPECT_EQ(fig6.points.back(), std::make_pair(32.0, 1.737));  // S = 1 (Full) -> N = 32
}

TEST(Sweep, UnknownParameterOrMetricSuggests) {
  CostInputs in = base_inputs();
  try {
    set_cost_input(in, "block_sise", 3);
    ADD_FAILURE();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("did you mean 'block_size'"), std::string::npos);
  }
  SweepSpec spec{"s", "", {"blocks", {1}}, std::nullopt, {"io_multiples_of_d.ful_two_phase"}, false, false, ""};
  EXPECT_THROW(run_sweep(base_inputs(), spec), Error);
}

Scenario small_scenario() {
  return parse_scenario(R"(
title = "small"
sections = ["io", "prefill", "scaling"]
[model]
sublayers = 16
d_model = 8
blocks = 4
[[sweep]]
name = "io"
x = "blocks"
values = "divisors"
metrics = ["io_multiples_of_d.block_two_phase"]
)", "small.toml");
}

TEST(Report, HoldsTablesChartsAndJson) {
  const Report report = build_report(small_scenario());
  std::vector<std::string> ids;
  for (const auto& table : report.tables) ids.push_back(table.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"io", "prefill", "scaling_fits", "scaling_multiplier", "io"}));
  EXPECT_EQ(report.charts.size(), 3u);  // two scaling charts + the sweep
  EXPECT_EQ(report.json["io_elements_per_sublayer"]["standard"], 24.0);
  EXPECT_NEAR(report.json["scaling"]["compute_multiplier"]["block"].get<double>(), 1.25, 0.02);
  const std::string markdown = report_markdown(report);
  EXPECT_NE(markdown.find("# small"), std::string::npos);
  EXPECT_NE(markdown.find("![Loss against compute (paper fits)](charts/scaling_loss.png)"), std::string::npos);
  EXPECT_NE(markdown.find("](charts/io.png)"), std::string::npos);
  EXPECT_NE(markdown.find("GiB = 2^30 bytes"), std::string::npos);
  EXPECT_EQ(table_csv(ReportTable{"x", "", {"a", "b,c"}, {{"1", "say \"hi\""}}, "", ""}),
            "a,\"b,c\"\n1,\"say \"\"hi\"\"\"\n");
}

TEST(Report, WriteIsAllOrNothingAndKeepsThePreviousReport) {
  test::TempDir dir;
  const auto report = build_report(small_scenario());
  auto fake_renderer = [](const ChartSpec& chart, const std::filesystem::path& png,
                          const std::filesystem::path& svg) {
    write_file_atomically(png, "png " + chart.id);
    write_file_atomically(svg, "svg " + chart.id);
  };
  write_report(report, dir / "out", fake_renderer);
  EXPECT_TRUE(std::filesystem::exists(dir / "out/report.md"));
  EXPECT_TRUE(std::filesystem::exists(dir / "out/tables/io.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir / "out/charts/scaling_loss.svg"));
  const std::string before = read_file(dir / "out/report.md");

  // A failure in the middle (the third chart) leaves the previous report untouched and no
  // staging directory behind.
  int drawn = 0;
  auto failing_renderer = [&](const ChartSpec& chart, const std::filesystem::path& png,
                              const std::filesystem::path& svg) {
    if (++drawn == 3) throw Error("simulated failure while drawing " + chart.id);
    fake_renderer(chart, png, svg);
  };
  EXPECT_THROW(write_report(report, dir / "out", failing_renderer), Error);
  EXPECT_EQ(read_file(dir / "out/report.md"), before);
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1);
  // And a first report that fails leaves nothing at all.
  drawn = 0;
  EXPECT_THROW(write_report(report, dir / "fresh", failing_renderer), Error);
  EXPECT_FALSE(std::filesystem::exists(dir / "fresh"));
}

}  // namespace
}  // namespace attnres
