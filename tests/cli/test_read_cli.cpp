// attnres read: one depth read step by step from the command line. Its JSON numbers are the
// core's read_walkthrough (core/model/include/attnres/read_walkthrough.hpp) on the same model,
// its tables show them, and bad flags are located usage errors with exit status 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "attnres/model.hpp"
#include "attnres/read_walkthrough.hpp"
#include "cli/cli_support.hpp"
#include "model_support.hpp"
#include "test_support.hpp"
#include "text_table.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_read_cli {

namespace fs = std::filesystem;
using test::run_cli;

const char* const kTokens = "1 7 12 5";

// A random L = 4 model (d = 16) with random pseudo-queries, in `dir`.
void make_model(const fs::path& dir, std::vector<std::string> scheme) {
  std::vector<std::string> args = {"init-model", "--layers",    "2",     "--d-model", "16",
                                   "--heads",    "4",           "--ffn", "24",        "--vocab",
                                   "20",         "--query-std", "0.8",   "--seed",    "4",
                                   "--out",      dir.string()};
  args.insert(args.end(), scheme.begin(), scheme.end());
  const auto made = run_cli(args);
  ASSERT_EQ(made.status, 0) << made.err;
}

std::vector<std::string> read_args(const fs::path& model, std::vector<std::string> extra) {
  std::vector<std::string> args = {"read", "--model", model.string(), "--tokens", kTokens};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

void expect_vector(const nlohmann::json& json, const Eigen::VectorXd& expected,
                   const std::string& where) {
  ASSERT_EQ(json.size(), static_cast<std::size_t>(expected.size())) << where;
  for (Eigen::Index i = 0; i < expected.size(); ++i)
    EXPECT_EQ(json[static_cast<std::size_t>(i)].get<double>(), expected(i))
        << where << "[" << i << "]";
}

TEST(ReadCli, JsonIsTheCoresWalkthroughNumberForNumber) {
  test::TempDir dir;
  make_model(dir / "block", {"--mode", "block", "--block-size", "2"});
  const ModelWeights<double> model = load_model(dir / "block");
  for (int read : {0, 1, 3, 4}) {
    const auto run = run_cli(read_args(
        dir / "block", {"--token", "2", "--read", std::to_string(read), "--format", "json"}));
    ASSERT_EQ(run.status, 0) << run.err;
    const auto json = nlohmann::json::parse(run.out);
    const ReadWalkthrough core = read_walkthrough(model, {1, 7, 12, 5}, 2, read);
    const std::string where = "read " + std::to_string(read);
    EXPECT_EQ(json["schema"]["name"], "attnres.read");
    EXPECT_EQ(json["read"], read);
    EXPECT_EQ(json["target"], core.target);
    EXPECT_EQ(json["token_id"], 12);
    ASSERT_EQ(json["sources"].size(), core.sources.size()) << where;
    for (std::size_t i = 0; i < core.sources.size(); ++i) {
      const auto& source = json["sources"][i];
      EXPECT_EQ(source["label"], core.sources[i].label) << where;
      EXPECT_EQ(source["rms"].get<double>(), core.sources[i].rms) << where;
      expect_vector(source["value"], core.sources[i].value, where + " value");
      expect_vector(source["score"], core.sources[i].score, where + " score");
      expect_vector(source["alpha"], core.sources[i].weight, where + " alpha");
      EXPECT_EQ(source["phase"], core.sources[i].phase) << where;
    }
    expect_vector(json["softmax"]["max"], core.softmax_max, where + " m");
    expect_vector(json["softmax"]["denominator"], core.softmax_denominator, where + " l");
    expect_vector(json["h"], core.h, where + " h");
    ASSERT_TRUE(core.two_phase.has_value());
    const auto& two = json["two_phase"];
    expect_vector(two["merged"]["l"], core.two_phase->merged.l, where + " merged l");
    expect_vector(two["phase1"]["o"], core.two_phase->phase1.o, where + " phase 1 o");
    expect_vector(two["h"], core.two_phase->h, where + " two-phase h");
    // Two-phase against one-shot: the same arithmetic in another order, relative to |h|.
    EXPECT_LE(two["max_difference"].get<double>(),
              test::kReorderedBound<double> * core.h.cwiseAbs().maxCoeff())
        << where;
    // Reads 0 and 2 start a block: phase 2 is empty, its max -inf written as null.
    if (read == 0) EXPECT_TRUE(two["phase2"]["m"][0].is_null()) << where;
  }
}

TEST(ReadCli, TablesShowEveryStepWithTheCoresNumbers) {
  test::TempDir dir;
  make_model(dir / "block", {"--mode", "block", "--block-size", "2"});
  const ModelWeights<double> model = load_model(dir / "block");
  const auto run = run_cli(read_args(dir / "block", {"--token", "1", "--sublayer", "4"}));
  ASSERT_EQ(run.status, 0) << run.err;
  const ReadWalkthrough core = read_walkthrough(model, {1, 7, 12, 5}, 1, 3);
  for (const std::string& expected :
       {std::string("the input of sublayer 4 (mlp, layer 1), at token position 1 (id 7)"),
        std::string("1. Sources v_i of the read (docs/math.md §2.3)"),
        std::string("partial = v3 (block 2 so far)"), std::string("b1 = v1 + v2"),
        std::string("2. Keys and scores"),
        std::string("3. Softmax over the 3 sources: m = max_i s_i = ") +
            cli::format_fixed(core.softmax_max(0), 6),
        std::string("4. The weighted sum h"), std::string("5. Two-phase (docs/math.md §2.4)"),
        cli::format_fixed(core.sources[2].weight(0), 6),
        cli::format_fixed(core.two_phase->merged.l(0), 6)}) {
    EXPECT_NE(run.out.find(expected), std::string::npos) << expected << "\n" << run.out;
  }
  // --sublayer N is --read N - 1.
  EXPECT_EQ(run_cli(read_args(dir / "block", {"--token", "1", "--read", "3"})).out, run.out);
}

TEST(ReadCli, StandardAndFullReadsOfTheSameWeights) {
  test::TempDir dir;
  make_model(dir / "full", {"--mode", "full", "--depth-heads", "2"});
  const ModelWeights<double> model = load_model(dir / "full");
  const auto full = run_cli(read_args(
      dir / "full", {"--token", "3", "--read", "4", "--format", "json", "--schedule-block", "3"}));
  ASSERT_EQ(full.status, 0) << full.err;
  ForwardOptions options;
  options.full_schedule_block = 3;
  const ReadWalkthrough core = read_walkthrough(model, {1, 7, 12, 5}, 3, 4, options);
  const auto json = nlohmann::json::parse(full.out);
  EXPECT_EQ(json["heads"], 2);
  EXPECT_EQ(json["two_phase"]["group_reads"], nlohmann::json::array({3, 4}));
  expect_vector(json["sources"][4]["alpha"], core.sources[4].weight, "full alpha, 2 heads");
  expect_vector(json["h"], core.h, "full h");

  const auto standard =
      run_cli(read_args(dir / "full", {"--token", "3", "--read", "2", "--mode", "standard"}));
  ASSERT_EQ(standard.status, 0) << standard.err;
  EXPECT_NE(standard.out.find("every weight is 1, h = v_0 + ... + v_2"), std::string::npos)
      << standard.out;
}

TEST(ReadCli, BadFlagsAreLocatedUsageErrors) {
  test::TempDir dir;
  make_model(dir / "block", {"--mode", "block", "--block-size", "2"});
  const struct {
    std::vector<std::string> flags;
    std::string message;
  } cases[] = {
      {{"--token", "4", "--read", "1"},
       "attnres read: --token 4 is out of range: --tokens has 4 tokens (positions 0 .. 3)"},
      {{"--token", "-1", "--read", "1"}, "attnres read: --token -1 is out of range"},
      {{"--token", "0", "--read", "5"},
       "attnres read: --read 5 is out of range: the model has reads 0 .. 4 (L = 4 sublayers; "
       "read r forms the input of sublayer r + 1, read 4 is the final read)"},
      {{"--token", "0", "--sublayer", "0"},
       "attnres read: --sublayer 0 is out of range: the model has sublayers 1 .. 4"},
      {{"--token", "0"}, "attnres read: give the read to walk through: --read R (0 .. L)"},
      {{"--token", "0", "--read", "1", "--sublayer", "2"},
       "attnres read: give --read R or --sublayer N, not both"},
      {{"--token", "0", "--read", "1", "--mode", "mhc"},
       "attnres read: --mode must be standard, full or block"},
      {{"--token", "0", "--read", "1", "--mode", "full", "--block-size", "2"},
       "attnres read: --block-size applies to Block AttnRes, but --mode full is not block"},
      {{"--token", "0", "--read", "1", "--schedule-block", "2"},
       "attnres read: --schedule-block applies to Full AttnRes, but the model's mode block is not "
       "full"},
      {{"--token", "0", "--read", "1", "--channels", "0"},
       "attnres read: --channels must be at least 1, got 0"},
      {{"--token", "0", "--read", "1", "--format", "csv"}, "attnres read: --format must be"},
      {{"--token", "x", "--read", "1"}, "attnres read: "},
  };
  for (const auto& c : cases) {
    const auto run = run_cli(read_args(dir / "block", c.flags));
    EXPECT_EQ(run.status, 2) << c.message << ": " << run.err;
    EXPECT_EQ(run.err.rfind(c.message, 0), 0u) << run.err;
    EXPECT_NE(run.err.find("(see attnres read --help)"), std::string::npos) << run.err;
    EXPECT_TRUE(run.out.empty()) << run.out;
  }
  // With --format json the error is a JSON object on stdout too.
  const auto json =
      run_cli(read_args(dir / "block", {"--token", "9", "--read", "1", "--format", "json"}));
  EXPECT_EQ(json.status, 2);
  const auto error = nlohmann::json::parse(json.out);
  EXPECT_EQ(error["schema"]["name"], "attnres.error");
  EXPECT_EQ(error["error"]["exit_status"], 2);
  // A model the walkthrough does not cover is an input error (exit status 1) that says why.
  make_model(dir / "dense", {"--mode", "denseformer"});
  const auto dense = run_cli(read_args(dir / "dense", {"--token", "0", "--read", "1"}));
  EXPECT_EQ(dense.status, 1);
  EXPECT_NE(dense.err.find("the step-by-step read covers the standard residual"), std::string::npos)
      << dense.err;
}

}  // namespace test_read_cli
}  // namespace attnres
