// The training report's paired comparisons (docs/training.md#statistics): which pairs are
// compared, the verdicts and sentences against hand-worked examples, and the section's table,
// conclusion and JSON from synthetic runs (no training: the losses are chosen here).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attnres/train_report.hpp"
#include "test_support.hpp"

namespace attnres {
namespace test_train_report {

// Bounds (docs/testing.md §2). The losses here (~2.5) are not binary fractions and their
// differences cancel to ~0.1: a mean of differences is rounded relative to the losses' magnitude
// (2 u per difference from the inputs' own rounding, then the sum and the division, ~4 u; 8 u),
// a standard deviation of them likewise (~6 u; 16 u).
constexpr double kLossMagnitude = 2.6;
constexpr double kMeanBound = test::roundoffs<double>(8);
constexpr double kSpreadBound = test::roundoffs<double>(16);
// t_{0.975, 2} = 4.302653 printed to 7 digits: a unit of its last digit, through s / sqrt(3) with
// s = 0.02, bounds an interval end computed from it (the rounding, ~u x 0.17, is far below).
const double kPrintedT = 1e-6 * 0.02 / std::sqrt(3.0);

SchemeLosses losses(const std::string& scheme, ResidualMode mode, int blocks,
                    std::vector<double> by_seed, bool paper = true) {
  SchemeLosses s{scheme, mode, blocks, paper, {}};
  for (std::size_t i = 0; i < by_seed.size(); ++i) s.loss_by_seed[i + 1] = by_seed[i];
  return s;
}

const PairedComparison& find(const std::vector<PairedComparison>& all, const std::string& scheme,
                             const std::string& against) {
  for (const auto& c : all) {
    if (c.scheme == scheme && c.against == against) return c;
  }
  throw std::runtime_error("no comparison " + scheme + " - " + against);
}

TEST(TrainReportPaired, HandWorkedIntervalAndVerdict) {
  // d = full - standard = {-0.10, -0.14, -0.12}: mean -0.12, s = 0.02, t_{0.975,2} = 4.3027,
  // half width 4.3027 * 0.02 / sqrt(3) = 0.04968: [-0.1697, -0.0703], resolved.
  const std::vector<SchemeLosses> schemes{
      losses("standard", ResidualMode::standard, 0, {2.50, 2.60, 2.55}),
      losses("full", ResidualMode::full, 8, {2.40, 2.46, 2.43})};
  const auto all = paired_comparisons(schemes);
  ASSERT_EQ(all.size(), 1u);
  const PairedComparison& c = all.front();
  EXPECT_EQ(c.comparison, "vs standard");
  EXPECT_EQ(c.interval.pairs, 3);
  EXPECT_TRUE(test::near_relative(c.interval.mean, -0.12, kMeanBound, kLossMagnitude, "mean"));
  EXPECT_TRUE(test::near_relative(c.interval.spread, 0.02, kSpreadBound, kLossMagnitude, "spread"));
  EXPECT_NEAR(c.interval.low, -0.12 - 4.302653 * 0.02 / std::sqrt(3.0), kPrintedT);
  EXPECT_NEAR(c.interval.high, -0.12 + 4.302653 * 0.02 / std::sqrt(3.0), kPrintedT);
  EXPECT_EQ(paired_verdict(c), "resolved: full lower");
  EXPECT_EQ(paired_sentence(c),
            "full - standard: -0.120 nats/token, 95 % interval [-0.170, -0.070] (paired t, 3 "
            "seeds): resolved: full lower.");
}

TEST(TrainReportPaired, UnresolvedGapGetsThePowerLine) {
  // d = {+0.02, -0.05, +0.05}: mean 0.00667, s = 0.05132 (by hand: deviations 0.01333,
  // -0.05667, 0.04333; squares sum 0.005267; / 2; sqrt), interval [-0.121, +0.134].
  const std::vector<SchemeLosses> schemes{
      losses("standard", ResidualMode::standard, 0, {2.50, 2.60, 2.55}),
      losses("block N=2", ResidualMode::block, 2, {2.52, 2.55, 2.60})};
  const auto all = paired_comparisons(schemes);
  const PairedComparison& c = find(all, "block N=2", "standard");
  EXPECT_NEAR(c.interval.spread, 0.051316, 5e-7);  // printed to 6 decimals: half a unit of the last
  EXPECT_FALSE(c.interval.resolved);
  EXPECT_EQ(paired_verdict(c), "not resolved");
  // Normal-theory planning figure: ((1.95996 + 0.84162) * s / gap)^2 = 465.0; the t version is
  // a few more.
  const int k = c.interval.seeds_to_resolve;
  EXPECT_GT(k, 465);
  EXPECT_LT(k, 472);
  EXPECT_NE(paired_sentence(c).find("not resolved; resolving a gap of 0.007 at this spread (s = "
                                    "0.051) needs about " +
                                    std::to_string(k) + " seeds."),
            std::string::npos)
      << paired_sentence(c);
}

TEST(TrainReportPaired, WhichPairsAreCompared) {
  // Every scheme against the standard residual; the paper's Block/Full along N between
  // neighbours (larger N minus smaller); a zoo scheme only against the standard residual.
  const std::vector<SchemeLosses> schemes{
      losses("standard", ResidualMode::standard, 0, {2.5, 2.6}),
      losses("full", ResidualMode::full, 8, {2.4, 2.5}),
      losses("full_sigmoid", ResidualMode::full, 8, {2.45, 2.55}, false),
      losses("block N=2", ResidualMode::block, 2, {2.42, 2.52}),
      losses("block N=1", ResidualMode::block, 1, {2.41, 2.53})};
  const auto all = paired_comparisons(schemes);
  std::vector<std::string> names;
  for (const auto& c : all)
    names.push_back(c.scheme + " - " + c.against + " (" + c.comparison + ")");
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "full - standard (vs standard)", "full_sigmoid - standard (vs standard)",
                "block N=2 - standard (vs standard)", "block N=1 - standard (vs standard)",
                "block N=2 - block N=1 (neighbours in N)", "full - block N=2 (neighbours in N)"}));
  EXPECT_TRUE(test::near_relative(find(all, "full", "block N=2").interval.mean, -0.02, kMeanBound,
                                  kLossMagnitude, "mean"));
}

TEST(TrainReportPaired, OnlySeedsBothRanAndOneSeedHasNoInterval) {
  std::vector<SchemeLosses> schemes{losses("standard", ResidualMode::standard, 0, {2.5, 2.6, 2.7}),
                                    losses("full", ResidualMode::full, 4, {2.4, 2.5})};
  EXPECT_EQ(find(paired_comparisons(schemes), "full", "standard").interval.pairs, 2);
  // A diverged run (NaN) leaves its seed out.
  schemes[1].loss_by_seed[2] = std::nan("");
  const PairedComparison c = find(paired_comparisons(schemes), "full", "standard");
  EXPECT_EQ(c.interval.pairs, 1);
  EXPECT_EQ(paired_verdict(c), "one seed: no interval");
  EXPECT_EQ(paired_sentence(c),
            "full - standard: -0.100 nats/token (one seed: no interval; train at least two "
            "seeds)");
}

TrainingRun run(const std::string& scheme, ResidualMode mode, int blocks, std::uint64_t seed,
                double final_loss) {
  TrainingRun r;
  r.scheme = scheme;
  r.directory = scheme;
  r.mode = mode;
  r.config.mode = mode;
  if (mode == ResidualMode::block) r.config.block_size = 4 / blocks;
  r.blocks = blocks;
  r.block_size = blocks ? 4 / blocks : 0;
  r.seed = seed;
  TrainLogRow first, last;
  first.val_loss = 5.5;
  last.step = 10;
  last.train_loss = final_loss + 0.1;
  last.val_loss = final_loss;
  last.output_rms = last.output_grad_rms = {1.0, 1.0, 1.0, 1.0};
  r.log = {first, last};
  return r;
}

TEST(TrainReportPaired, TheSectionHasTheTableTheConclusionAndTheJson) {
  ScenarioTraining training;
  training.layers = 2;  // L = 4
  training.data = "corpus.txt";
  training.seeds = {1, 2, 3};
  std::vector<TrainingRun> runs;
  const std::vector<double> standard{2.50, 2.60, 2.55}, full{2.40, 2.46, 2.43},
      block{2.52, 2.55, 2.60};
  for (std::uint64_t s = 1; s <= 3; ++s)
    runs.push_back(run("standard", ResidualMode::standard, 0, s, standard[s - 1]));
  for (std::uint64_t s = 1; s <= 3; ++s)
    runs.push_back(run("full", ResidualMode::full, 4, s, full[s - 1]));
  for (std::uint64_t s = 1; s <= 3; ++s)
    runs.push_back(run("block N=2", ResidualMode::block, 2, s, block[s - 1]));
  Report report;
  add_training_section(training, runs, report);

  const ReportTable* table = nullptr;
  for (const auto& t : report.tables) {
    if (t.id == "train_paired_differences") table = &t;
  }
  ASSERT_NE(table, nullptr);
  ASSERT_EQ(table->values.size(), 3u);  // full, block vs standard; full vs block N=2
  EXPECT_EQ(table->values[0][0], "full");
  EXPECT_EQ(table->values[0][8], "resolved: full lower");
  EXPECT_EQ(table->values[2][0], "full");
  EXPECT_EQ(table->values[2][1], "block N=2");
  EXPECT_EQ(table->values[2][2], "neighbours in N");

  const auto& rows = report.json["training"]["paired_differences"];
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_TRUE(rows[0]["resolved"].get<bool>());
  EXPECT_TRUE(rows[0]["seeds_to_resolve"].is_null());
  EXPECT_FALSE(rows[1]["resolved"].get<bool>());
  EXPECT_GT(rows[1]["seeds_to_resolve"].get<int>(), 400);
  EXPECT_NEAR(rows[0]["ci_low"].get<double>(), -0.12 - 4.302653 * 0.02 / std::sqrt(3.0), kPrintedT);
  EXPECT_FALSE(report.json["training"]["statistics_method"].get<std::string>().empty());
  // The quality rows carry the interval against the standard residual.
  const auto& quality = report.json["training"]["quality"];
  EXPECT_TRUE(quality[0]["vs_standard_verdict"].is_null());  // the standard residual itself
  EXPECT_EQ(quality[1]["vs_standard_verdict"], "resolved: full lower");
  EXPECT_NEAR(quality[1]["vs_standard_ci_high"].get<double>(),
              -0.12 + 4.302653 * 0.02 / std::sqrt(3.0), kPrintedT);

  ASSERT_EQ(report.conclusions.size(), 1u);
  const std::string& words = report.conclusions.front();
  EXPECT_NE(words.find("What the training measurement resolves"), std::string::npos);
  const auto resolved = words.find("Resolved:"), unresolved = words.find("Not resolved:");
  ASSERT_NE(resolved, std::string::npos);
  ASSERT_NE(unresolved, std::string::npos);
  const auto full_line = words.find("full - standard: -0.120");
  const auto block_line = words.find("block N=2 - standard: +0.007");
  EXPECT_TRUE(resolved < full_line && full_line < unresolved) << words;
  EXPECT_TRUE(unresolved < block_line && block_line != std::string::npos) << words;
}

}  // namespace test_train_report
}  // namespace attnres
