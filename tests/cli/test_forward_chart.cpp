// attnres forward --chart DIR: the GUI's Depth attention, Magnitudes and Duality figures of one
// pass (the core's builders) as PNG + SVG + CSV, written as a whole or not at all; and the
// warning a report prints when the paper's Fig. 6 overlay is drawn on another model.
#include <gtest/gtest.h>

#include "attnres/atomic_file.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"
#include "attnres/model_charts.hpp"
#include "attnres/safetensors.hpp"
#include "cli_support.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_forward_chart {

namespace fs = std::filesystem;
using test::CliRun;
using test::run_cli;

std::string make_model(const test::TempDir& dir) {
  return test::make_block_test_model(dir.path(), 2);
}

const std::vector<std::string> kStems = {"depth_attention", "duality_mixing", "magnitudes_input",
                                         "magnitudes_output", "duality_ranks"};

TEST(ForwardChart, WritesTheModelViewsFiguresAsPngSvgAndCsv) {
  test::TempDir dir;
  const std::string model = make_model(dir);
  const fs::path out = dir / "charts";
  const CliRun run = run_cli({"forward", "--model", model, "--tokens", "1 7 42 7 9", "--precision",
                              "f64", "--engine", "reference", "--chart", out.string()});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(
      run.out.find("wrote " + out.string() + ": depth_attention, duality_mixing, magnitudes_input"),
      std::string::npos)
      << run.out;
  for (const auto& stem : kStems) {
    for (const char* extension : {".png", ".svg", ".csv"}) {
      EXPECT_TRUE(fs::is_regular_file(out / (stem + extension))) << stem << extension;
    }
    test::expect_non_blank_png(out / (stem + ".png"));
    EXPECT_NE(read_file(out / (stem + ".svg")).find("<svg"), std::string::npos) << stem;
  }
  // The data are the core builders' output for the same pass (independently recomputed here).
  const ModelWeights<double> weights = load_model(model);
  const ForwardTrace trace = forward(weights, {1, 7, 42, 7, 9}).trace;
  const std::string scheme = trace.scheme.describe();
  EXPECT_EQ(read_file(out / "depth_attention.csv"),
            heatmap_csv(alpha_heatmap(trace, alpha_title(scheme, trace, -1, -1))));
  EXPECT_EQ(read_file(out / "duality_mixing.csv"), heatmap_csv(mixing_heatmap(trace, scheme)));
  const ForwardTrace standard =
      forward(convert_scheme(weights, AttnResConfig{}), {1, 7, 42, 7, 9}).trace;
  const auto magnitudes = magnitude_charts(
      {{scheme, &trace, false}, {standard.scheme.describe() + " (reference)", &standard, true}},
      "");
  EXPECT_EQ(read_file(out / "magnitudes_input.csv"), chart_csv(magnitudes[0]));
  EXPECT_EQ(read_file(out / "magnitudes_output.csv"), chart_csv(magnitudes[1]));
  EXPECT_EQ(read_file(out / "duality_ranks.csv"), chart_csv(depth_rank_chart({&trace})));
  // A second run into the directory it wrote needs no --force (attnres's own files).
  const CliRun again =
      run_cli({"forward", "--model", model, "--tokens", "3 4", "--chart", out.string()});
  EXPECT_EQ(again.status, 0) << again.err;
}

TEST(ForwardChart, ForeignFilesNeedForceAndBadDirectoriesNameTheFlag) {
  test::TempDir dir;
  const std::string model = make_model(dir);
  const fs::path out = dir / "mine";
  fs::create_directories(out);
  write_file_atomically(out / "notes.txt", "keep me\n");
  const CliRun refused =
      run_cli({"forward", "--model", model, "--tokens", "1 2", "--chart", out.string()});
  EXPECT_EQ(refused.status, cli::kExitFailure);
  EXPECT_NE(refused.err.find("--chart"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("notes.txt"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;
  EXPECT_EQ(read_file(out / "notes.txt"), "keep me\n");
  EXPECT_FALSE(fs::exists(out / "depth_attention.png"));

  const CliRun forced =
      run_cli({"forward", "--model", model, "--tokens", "1 2", "--chart", out.string(), "--force"});
  EXPECT_EQ(forced.status, 0) << forced.err;
  EXPECT_TRUE(fs::exists(out / "depth_attention.png"));
  EXPECT_FALSE(fs::exists(out / "notes.txt"));

  // A directory that cannot be made (its parent is a file).
  write_file_atomically(dir / "file", "x");
  const CliRun unwritable = run_cli(
      {"forward", "--model", model, "--tokens", "1 2", "--chart", (dir / "file/sub").string()});
  EXPECT_EQ(unwritable.status, cli::kExitFailure);
  EXPECT_NE(unwritable.err.find("--chart"), std::string::npos) << unwritable.err;

  const CliRun empty = run_cli({"forward", "--model", model, "--tokens", "1 2", "--chart", ""});
  EXPECT_NE(empty.status, 0);
  EXPECT_NE(empty.err.find("--chart"), std::string::npos) << empty.err;

  const CliRun lone_force = run_cli({"forward", "--model", model, "--tokens", "1 2", "--force"});
  EXPECT_EQ(lone_force.status, cli::kExitUsage);
  EXPECT_NE(lone_force.err.find("--force applies to --chart"), std::string::npos) << lone_force.err;
}

TEST(ForwardChart, AFailedPassLeavesNoDirectory) {
  test::TempDir dir;
  const std::string model = make_model(dir);
  const fs::path out = dir / "charts";
  const CliRun run =
      run_cli({"forward", "--model", model, "--tokens", "1 2 999", "--chart", out.string()});
  EXPECT_EQ(run.status, cli::kExitFailure) << run.err;
  EXPECT_NE(run.err.find("out of range"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(out / "depth_attention.png"));
  if (fs::exists(out)) EXPECT_TRUE(fs::is_empty(out));  // no staging folder left behind
}

TEST(ReportCli, PaperFig6OverlayOnAnotherModelPrintsAWarning) {
  test::TempDir dir;
  write_file_atomically(
      dir / "s.toml",
      "[model]\nsublayers = 8\nd_model = 16\nblocks = 2\n\n[[sweep]]\nname = \"tradeoff\"\n"
      "x = \"blocks\"\nvalues = \"divisors\"\n"
      "metrics = [\"io_multiples_of_d.block_two_phase\"]\noverlay = \"paper_fig6\"\n");
  const CliRun run = run_cli({"report", (dir / "s.toml").string(), "--out", (dir / "r").string()});
  ASSERT_EQ(run.status, 0) << run.err;
  const std::string warning =
      "Warning: the paper's Fig. 6 losses come from its 32-sublayer ablation model";
  EXPECT_NE(run.out.find("note: sweep tradeoff: " + warning), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("(L = 8)"), std::string::npos) << run.out;
  EXPECT_NE(read_file(dir / "r/report.md").find(warning), std::string::npos);
}

}  // namespace test_forward_chart
}  // namespace attnres
