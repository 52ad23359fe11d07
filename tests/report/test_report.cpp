// Sweeps, reports and writing them: skipped settings, chart specs, markdown, atomic output.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/published_quality.hpp"
#include "attnres/report.hpp"
#include "attnres/sweep.hpp"
#include "attnres/version.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_report {

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
  SweepSpec spec{"s",
                 "",
                 {"blocks", {1, 8, 32, 33, 64}},
                 std::nullopt,
                 {"io_multiples_of_d.block_two_phase"},
                 false,
                 false,
                 ""};
  const auto result = run_sweep(base_inputs(), spec);
  ASSERT_EQ(result.points.size(), 3u);
  EXPECT_DOUBLE_EQ(result.points[1].values[0], 8.0 / 4.0 + 5.0);  // N = 8, S = 4
  ASSERT_EQ(result.skipped.size(), 2u);
  EXPECT_NE(result.skipped[0].find("blocks = 33"), std::string::npos);
  EXPECT_EQ(sweep_csv(result).substr(0, 41), "blocks,io_multiples_of_d.block_two_phase\n");
}

TEST(Sweep, GridAndCancellation) {
  SweepSpec spec{"g",
                 "",
                 {"pp", {1, 2, 4}},
                 SweepAxis{"vpp", {1, 2}},
                 {"pipeline_comm_elements_per_token.naive_per_d"},
                 false,
                 false,
                 ""};
  const auto result = run_sweep(base_inputs(), spec);
  ASSERT_EQ(result.points.size(), 6u);
  // P = 4, V = 2: C = 8, C(C-1)/2 = 28 in units of N_p·d.
  EXPECT_DOUBLE_EQ(result.points.back().values[0], 28.0);
  const auto chart = sweep_chart(result, base_inputs());
  EXPECT_EQ(chart.series.size(), 2u);  // one per vpp value
  EXPECT_NE(chart.series[1].name.find("vpp=2"), std::string::npos);
  EXPECT_THROW(run_sweep(base_inputs(), spec, [](std::size_t, std::size_t) { return false; }),
               Cancelled);
}

TEST(Sweep, StreamedSweepsSeeEveryPointAndKeepOnlyWhatAChartShows) {
  SweepSpec spec;
  spec.name = "big";
  spec.x = {"d_model", {}};
  for (std::int64_t d = 64; d < 64 + 2500; ++d) spec.x.values.push_back(d);
  spec.y = SweepAxis{"tokens", {}};
  for (std::int64_t t = 1; t <= 18; ++t) spec.y->values.push_back(t * 100);
  spec.y->values.push_back(0);   // impossible: T >= 1
  spec.y->values.push_back(-1);  // impossible
  spec.metrics = {"io_multiples_of_d.block_two_phase"};
  SweepRun run;
  run.keep_points = false;
  std::size_t seen = 0;
  double sum = 0;
  run.on_point = [&](const SweepPoint& point) {
    ++seen;
    sum += point.values[0];
  };
  const SweepResult result = run_sweep(
      ScenarioInputs{base_inputs(), std::nullopt, std::nullopt, Strategy::fused_two_phase}, spec,
      run);
  // 18 valid y values x 2500 d values; 2 x 2500 impossible settings.
  EXPECT_EQ(seen, 18u * 2500u);
  EXPECT_EQ(result.valid_count, seen);
  EXPECT_EQ(result.skipped_count, 2u * 2500u);
  EXPECT_EQ(result.skipped.size(), 1001u);  // the first 1000, then "... and 4000 more"
  EXPECT_NE(result.skipped.back().find("and 4000 more"), std::string::npos);
  EXPECT_GT(sum, 0.0);
  // Kept for the chart: at most 16 y values (of 20; 2 of them impossible) and 2000 x values each.
  EXPECT_LE(result.points.size(), 16u * 2000u);
  const ChartSpec chart = sweep_chart(result, base_inputs());
  EXPECT_LE(chart.series.size(), 16u);
  for (const auto& series : chart.series) EXPECT_LE(series.points.size(), 2000u);
  EXPECT_NE(chart.caption.find("45000 settings"), std::string::npos) << chart.caption;
  EXPECT_NE(chart.caption.find("Decimated"), std::string::npos) << chart.caption;
  // The first and last x of every kept series are there (evenly spaced, ends included).
  EXPECT_EQ(chart.series.front().points.front().first, 64.0);
  EXPECT_EQ(chart.series.front().points.back().first, 64.0 + 2499.0);
}

TEST(Sweep, ImpossibleParameterValuesAreSkippedWithTheValueGiven) {
  // Before: microbatches were clamped to 10^9, so a message showed a value nobody typed.
  ScenarioInputs in{base_inputs(), load_hardware("h100"), PipelineSettings{}};
  SweepSpec spec{"m",
                 "",
                 {"microbatches", {0, 4, 5'000'000'000}},
                 std::nullopt,
                 {"pipeline.iteration_seconds"},
                 false,
                 false,
                 ""};
  const SweepResult result = run_sweep(in, spec);
  ASSERT_EQ(result.points.size(), 1u);
  ASSERT_EQ(result.skipped.size(), 2u);
  EXPECT_NE(result.skipped[0].find("microbatches m = 0 is out of range"), std::string::npos)
      << result.skipped[0];
  EXPECT_NE(result.skipped[1].find("microbatches m = 5000000000 is out of range"),
            std::string::npos);
}

TEST(Sweep, MoreSettingsThanTheLimitAreRefused) {
  SweepSpec spec{"g",
                 "",
                 {"d_model", {8, 16, 32}},
                 SweepAxis{"blocks", {1, 2, 4}},
                 {"io_multiples_of_d.block_two_phase"},
                 false,
                 false,
                 ""};
  spec.max_points = 8;
  try {
    run_sweep(base_inputs(), spec);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("has 3 x 3 settings, more than the limit of 8"),
              std::string::npos)
        << error.what();
  }
  spec.max_points = 9;
  EXPECT_EQ(run_sweep(base_inputs(), spec).points.size(), 9u);
}

TEST(Sweep, StreamedJsonAndCsvRowsMatchTheInMemoryTable) {
  SweepSpec spec{"g",
                 "",
                 {"pp", {1, 2}},
                 SweepAxis{"vpp", {1, 2}},
                 {"pipeline_comm_elements_per_token.naive_per_d"},
                 false,
                 false,
                 ""};
  const auto result = run_sweep(base_inputs(), spec);
  std::string rows = sweep_csv_header(spec);
  for (const auto& point : result.points) {
    rows += sweep_csv_row(spec, point);
    const auto json = nlohmann::json::parse(sweep_point_json(spec, point));
    EXPECT_EQ(json["pp"], point.x);
    EXPECT_EQ(json["vpp"], *point.y);
    EXPECT_EQ(json["pipeline_comm_elements_per_token.naive_per_d"].get<double>(), point.values[0]);
  }
  EXPECT_EQ(rows, sweep_csv(result));
  EXPECT_EQ(sweep_point_json(SweepSpec{"n", "", {"x", {}}, std::nullopt, {"m"}, false, false, ""},
                             SweepPoint{1, std::nullopt, {std::nan("")}}),
            "{\"x\": 1, \"m\": null}");
}

TEST(Sweep, ChartMarksTheScenarioAndOverlaysFig6) {
  SweepSpec spec{"t",
                 "",
                 {"blocks", divisors(32)},
                 std::nullopt,
                 {"io_multiples_of_d.block_two_phase"},
                 true,
                 false,
                 "paper_fig6"};
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
  SweepSpec spec{
      "s",   "", {"blocks", {1}}, std::nullopt, {"io_multiples_of_d.ful_two_phase"}, false,
      false, ""};
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
name = "io_sweep"
x = "blocks"
values = "divisors"
metrics = ["io_multiples_of_d.block_two_phase"]
)",
                        "small.toml");
}

TEST(Report, ASweepNamedLikeOneOfTheReportsTablesIsRefused) {
  // Before: the sweep's tables/io.csv silently replaced the I/O table's.
  const Scenario scenario = parse_scenario(R"(
sections = ["io"]
[model]
sublayers = 16
d_model = 8
blocks = 4
[[sweep]]
name = "io"
x = "blocks"
values = [1, 2]
metrics = ["io_multiples_of_d.block_two_phase"]
)",
                                           "clash.toml");
  try {
    build_report(scenario);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()),
              "clash.toml: sweep 'io' has the name of the report's own table 'io' "
              "(tables/io.csv); give the sweep another name");
  }
}

TEST(Report, RecordsWhatProducedIt) {
  const std::string text = R"(
title = "provenance"
sections = ["io", "time", "pipeline_sim"]
[model]
layers = 8
d_model = 256
blocks = 4
[hardware]
preset = "h100"
efficiency = { compute = 0.4 }
[moe]
experts = 16
active = 2
shared = 1
expert_ffn = 128
[pipeline]
microbatches = 4
schedule = "1f1b"
cache = "naive"
overlap = false
link = "intra_node"
)";
  const Report report = build_report(parse_scenario(text, "p.toml"));
  const nlohmann::json& p = report.json.at("provenance");
  EXPECT_EQ(p["tool"], "attnres");
  EXPECT_EQ(p["version"], kVersion);
  EXPECT_EQ(p["scenario_file"], "p.toml");
  EXPECT_EQ(p["scenario_text"], text);
  EXPECT_EQ(p["inputs"]["hardware"]["name"], "H100 SXM");
  EXPECT_EQ(p["inputs"]["hardware"]["compute_efficiency_fraction"], 0.4);
  EXPECT_EQ(p["inputs"]["model"]["experts"], 16);
  EXPECT_EQ(report.json["schema"]["name"], "attnres.report");
  EXPECT_EQ(p["inputs"]["model"]["expert_ffn"], 128);
  EXPECT_EQ(p["inputs"]["pipeline"]["schedule"], "1f1b");
  EXPECT_EQ(p["inputs"]["pipeline"]["cache"], "naive");
  EXPECT_EQ(p["inputs"]["pipeline"]["overlap"], false);
  EXPECT_EQ(p["inputs"]["pipeline"]["link"], "intra_node");
  EXPECT_EQ(p["inputs"]["pipeline"]["microbatches"], 4);
  EXPECT_EQ(p["inputs"]["model"]["sublayers"], 16);
  const std::string markdown = report_markdown(report);
  EXPECT_NE(markdown.find("## Provenance"), std::string::npos);
  EXPECT_NE(markdown.find("Written by attnres " + std::string(kVersion)), std::string::npos);
  EXPECT_NE(markdown.find("efficiency = { compute = 0.4 }"), std::string::npos)
      << "the scenario text is quoted";
  EXPECT_NE(markdown.find("\"cache\": \"naive\""), std::string::npos);
}

TEST(Report, ACancelledBuildStopsEvenWithoutSweeps) {
  // Before: a scenario without sweeps never consulted the progress callback, so Ctrl-C was
  // swallowed and the report was still written.
  const Scenario scenario = parse_scenario(
      "sections = [\"io\"]\n[model]\nsublayers = 8\nd_model = 8\nblocks = 2\n", "s.toml");
  EXPECT_THROW(build_report(scenario, [](std::size_t, std::size_t) { return false; }), Cancelled);
}

TEST(Report, HoldsTablesChartsAndJson) {
  const Report report = build_report(small_scenario());
  std::vector<std::string> ids;
  for (const auto& table : report.tables) ids.push_back(table.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"io", "prefill", "scaling_fits", "scaling_multiplier",
                                           "io_sweep"}));
  EXPECT_EQ(report.charts.size(), 3u);  // two scaling charts + the sweep
  EXPECT_EQ(report.json["io_elements_per_sublayer"]["standard"], 24.0);
  // docs/math.md §3.5's hand-worked multiplier at the default target loss 1.695, 6.819 / 5.442 =
  // 1.253, printed to 3 decimals: within half a unit of its last digit.
  EXPECT_NEAR(report.json["scaling"]["compute_multiplier"]["block"].get<double>(), 1.253, 0.0005);
  const std::string markdown = report_markdown(report);
  EXPECT_NE(markdown.find("# small"), std::string::npos);
  EXPECT_NE(markdown.find("![Loss against compute (paper fits)](charts/scaling_loss.png)"),
            std::string::npos);
  EXPECT_NE(markdown.find("](charts/io_sweep.png)"), std::string::npos);
  EXPECT_NE(markdown.find("GiB = 2^30 bytes"), std::string::npos);
  // A table built from text: keys from the headers, values parsed from the cells.
  EXPECT_EQ(table_csv(ReportTable{"x", "", {"a", "b,c"}, {{"1", "say \"hi\""}}, "", ""}),
            "a,b_c\n1,\"say \"\"hi\"\"\"\n");
}

TEST(Report, TypedTablesShowRoundedValuesAndWriteThemWhole) {
  ReportTable t = typed_table("t", "title",
                              {{"name", "name", Shown::text},
                               {"read_bytes", "read (MB)", Shown::megabytes},
                               {"overhead_fraction", "overhead (%)", Shown::percent},
                               {"launches", "launches", Shown::integer},
                               {"crosses_stage", "crosses", Shown::yes_no},
                               {"read_bytes", "read (GB)", Shown::gigabytes}});
  add_row(t, {"a,b", 1234567.891, 0.0712345678, std::int64_t{49}, true, 1234567.891});
  add_row(t, {"n", nullptr, nullptr, nullptr, false, nullptr});
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.header[1], "read (MB)");
  EXPECT_EQ(t.rows[0], (std::vector<std::string>{"a,b", "1.235", "7.123", "49", "yes", "0.0012"}));
  EXPECT_EQ(t.rows[1][1], "n/a");
  // CSV: the keys once each (GB repeats read_bytes), every digit, units only in the keys.
  EXPECT_EQ(table_csv(t),
            "name,read_bytes,overhead_fraction,launches,crosses_stage\n"
            "\"a,b\",1234567.891,0.0712345678,49,true\n"
            "n,,,,false\n");
  const nlohmann::json j = table_json(t);
  EXPECT_EQ(j["columns"].size(), 5u);
  EXPECT_EQ(j["typed_from_display"], false);
  EXPECT_EQ(j["rows"][0]["launches"].get<std::int64_t>(), 49);
  EXPECT_TRUE(j["rows"][0]["launches"].is_number_integer());
  EXPECT_EQ(j["rows"][0]["read_bytes"].get<double>(), 1234567.891);
  EXPECT_TRUE(j["rows"][1]["overhead_fraction"].is_null());
  EXPECT_THROW(add_row(t, {"too few"}), Error);
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
  EXPECT_TRUE(std::filesystem::exists(dir / "out/tables/io_sweep.csv"));
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
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path()))
    ++entries;
  EXPECT_EQ(entries, 1);
  for (const auto& entry : std::filesystem::directory_iterator(dir / "out")) {
    EXPECT_EQ(entry.path().filename().string().find(".attnres-staging"), std::string::npos)
        << entry.path();
  }
  // And a first report that fails leaves nothing at all.
  drawn = 0;
  EXPECT_THROW(write_report(report, dir / "fresh", failing_renderer), Error);
  EXPECT_FALSE(std::filesystem::exists(dir / "fresh"));
}

// The section quality (docs/quality.md): the band at the model's L with its N marked; beyond the
// depth it is computed for, a note instead of a loop over a billion N.
TEST(QualitySection, BandAtTheModelsDepthOrANoteBeyondIt) {
  const Report report = build_report(parse_scenario(
      "sections = [\"quality\"]\n[model]\nsublayers = 48\nd_model = 64\nblocks = 8\n", "q.toml"));
  ASSERT_TRUE(report.json.contains("quality"));
  EXPECT_EQ(report.json["quality"]["sublayers"], 48);
  EXPECT_EQ(report.json["quality"]["blocks"], 8);
  const QualityBand band = quality_band(48, {8});
  bool at_8 = false;
  for (const auto& point : report.json["quality"]["band"]) {
    if (point["blocks"] != 8) continue;
    at_8 = true;
    EXPECT_DOUBLE_EQ(point["band_low"].get<double>(), band.points[0].low);
  }
  EXPECT_TRUE(at_8);
  ASSERT_FALSE(report.conclusions.empty());
  EXPECT_NE(report.conclusions.front().find("at L = 48, N = 8"), std::string::npos);
  const Report deep = build_report(parse_scenario(
      "sections = [\"quality\"]\n[model]\nsublayers = 1000000000\nd_model = 64\nblocks = 8\n",
      "deep.toml"));
  EXPECT_FALSE(deep.json.contains("quality"));
  ASSERT_EQ(deep.notes.size(), 1u);
  EXPECT_NE(deep.notes.front().find("section quality left out: L = 1000000000"), std::string::npos);
}

}  // namespace test_report
}  // namespace attnres
