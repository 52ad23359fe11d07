// Scenario files against the one table of cost inputs (cost_input_fields.hpp): a scenario reads
// every key of the table and writes it back, its sweep ranges expand as the CLI's text forms do,
// and a sweep from a scenario keeps the pipeline's own bounds.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <set>
#include <sstream>
#include <string>

#include "attnres/cost_input_fields.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/error.hpp"
#include "attnres/pipeline.hpp"
#include "attnres/scenario.hpp"
#include "attnres/sweep.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_scenario_inputs {

TEST(CostInputFields, ScenarioReadsEveryKeyOfTheTableAndWritesItBack) {
  // Each primary field gets a distinct value in a scenario built from the table itself; parsing
  // must put each value in its member and the writer must give the same settings back.
  std::map<std::string, std::string> tables = {{"model", "[model]\n"},
                                               {"attention", "[attention]\nattention = \"gqa\"\n"},
                                               {"moe", "[moe]\n"},
                                               {"sequence", "[sequence]\n"},
                                               {"parallel", "[parallel]\n"}};
  // One valid setting (GQA with a hybrid period, MoE, every parallel degree): the MLA widths
  // do not apply to GQA and stay 0.
  const std::map<std::string, std::int64_t> values = {{"sublayers", 24},
                                                      {"d_model", 96},
                                                      {"block_size", 4},
                                                      {"streams", 3},
                                                      {"ffn", 200},
                                                      {"tokens", 512},
                                                      {"batch", 2},
                                                      {"seq_shards", 4},
                                                      {"chunk", 128},
                                                      {"pp", 2},
                                                      {"vpp", 3},
                                                      {"heads", 4},
                                                      {"kv_heads", 2},
                                                      {"head_dim", 24},
                                                      {"vocab", 1000},
                                                      {"kv_latent", 0},
                                                      {"rope_dim", 0},
                                                      {"q_latent", 0},
                                                      {"hybrid_period", 3},
                                                      {"experts", 4},
                                                      {"active", 2},
                                                      {"shared", 1},
                                                      {"expert_ffn", 50},
                                                      {"dense_layers", 1},
                                                      {"tp", 2},
                                                      {"cp", 2},
                                                      {"ep", 2},
                                                      {"dp", 2},
                                                      {"zero", 1},
                                                      {"optimizer_bytes", 8}};
  for (const auto& field : cost_input_fields()) {
    auto it = values.find(std::string(field.key));
    if (field.derived) {
      EXPECT_EQ(it, values.end()) << field.key;
      continue;
    }
    ASSERT_NE(it, values.end()) << field.key << " has no value in this test";
    tables.at(std::string(field.section)) +=
        std::string(field.key) + " = " + std::to_string(it->second) + "\n";
  }
  std::string text;
  for (const auto& [section, table] : tables) text += table;
  const Scenario s = parse_scenario(text, "table.toml");
  for (const auto& [key, value] : values)
    EXPECT_EQ(s.inputs.*find_cost_input_field(key)->member, value) << key;
  EXPECT_EQ(s.inputs.blocks, 6);  // derived: ceil(24 / 4)
  const Scenario again = parse_scenario(scenario_to_toml(s), "again.toml");
  for (const auto& field : cost_input_fields())
    EXPECT_EQ(again.inputs.*field.member, s.inputs.*field.member) << field.key;
  for (const auto& choice : cost_input_choices())
    EXPECT_EQ(choice.get(again.inputs), choice.get(s.inputs)) << choice.key;
  EXPECT_EQ(s.inputs.attention, AttentionKind::gqa);
  // A key of one table in another is refused with the table's own list.
  const std::string wrong = test::error_message(
      [] { parse_scenario("[model]\nd_model = 8\nsublayers = 4\npp = 2\n", "w.toml"); });
  EXPECT_NE(wrong.find("w.toml:4:1: unknown key 'model.pp'"), std::string::npos) << wrong;
}

TEST(SweepValues, ScenarioRangesAndCliTextGiveTheSameValues) {
  const Scenario s = parse_scenario(
      "[model]\nsublayers = 32\nd_model = 8\nblocks = 4\n"
      "[[sweep]]\nname = \"a\"\nx = \"pp\"\nvalues = { from = 1, to = 16, factor = 2 }\n"
      "metrics = [\"pipeline_exact_elements_per_token.naive\"]\n"
      "[[sweep]]\nname = \"b\"\nx = \"tokens\"\nvalues = { from = 100, to = 130, step = 10 }\n"
      "metrics = [\"prefill_history_gb.total\"]\n",
      "ranges.toml");
  EXPECT_EQ(s.sweeps[0].x.values, parse_sweep_values("1:16:x2", "--values", 32));
  EXPECT_EQ(s.sweeps[1].x.values, parse_sweep_values("100:130:10", "--values", 32));
}

TEST(SweepRules, AMicrobatchCountOutsideThePipelinesRuleIsASkippedSetting) {
  // The sweep's bound is the pipeline's own (1 <= m <= kMaxMicrobatches): m = 1000001 is skipped
  // here, not accepted by the sweep and refused later by the simulation.
  const Scenario s =
      load_scenario(std::string(ATTNRES_SCENARIOS_DIR) + "/paper-overhead-claims.toml");
  SweepSpec spec;
  spec.name = "m";
  spec.x = {"microbatches", {0, 8, kMaxMicrobatches + 1}};
  spec.metrics = {"pipeline.attnres_overhead_fraction"};
  const SweepResult result = run_sweep(s.scenario_inputs(), spec);
  ASSERT_EQ(result.points.size(), 1u);
  EXPECT_EQ(result.points[0].x, 8);
  ASSERT_EQ(result.skipped.size(), 2u);
  for (const auto& why : result.skipped) {
    EXPECT_NE(why.find("is out of range (1 .. 1000000)"), std::string::npos) << why;
  }
}

}  // namespace test_scenario_inputs
}  // namespace attnres
