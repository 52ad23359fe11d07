// The one table of cost inputs (cost_input_fields.hpp) and the sweep value forms: every
// CostInputs field once, every reader and writer driven by it, and the value lists against
// hand-computed expansions.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <set>
#include <sstream>
#include <string>

#include "attnres/cost_input_fields.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/error.hpp"
#include "attnres/sweep.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_cost_input_fields {

TEST(CostInputFields, EveryIntegerInputOnceWithItsOwnMember) {
  // CostInputs has 33 integer fields (and the block_sizes and full_attention_layers lists) and
  // five choices (cost.hpp); each row writes exactly its member.
  const auto fields = cost_input_fields();
  ASSERT_EQ(fields.size(), 33u);
  std::set<std::string> keys, flags;
  for (const auto& field : fields) {
    EXPECT_TRUE(keys.insert(std::string(field.key)).second) << field.key;
    EXPECT_TRUE(flags.insert(std::string(field.flag)).second) << field.flag;
    EXPECT_FALSE(field.help.empty()) << field.key;
    EXPECT_TRUE(field.section == "model" || field.section == "sequence" ||
                field.section == "parallel" || field.section == "attention" ||
                field.section == "moe")
        << field.key;
    EXPECT_LE(field.input_min, field.input_max) << field.key;
    CostInputs probe;
    const CostInputs before = probe;
    probe.*field.member = 777;
    int changed = 0;
    for (const auto& other : fields) changed += probe.*other.member != before.*other.member;
    EXPECT_EQ(changed, 1) << field.key << " shares its member with another row";
    EXPECT_EQ(find_cost_input_field(field.key), &field);
  }
  EXPECT_EQ(find_cost_input_field("nope"), nullptr);
  EXPECT_EQ(
      cost_input_keys("parallel"),
      (std::vector<std::string>{"pp", "vpp", "tp", "cp", "ep", "dp", "zero", "optimizer_bytes"}));
  // The choices: each sets what it reads back, and refuses an unknown name with the list.
  for (const auto& choice : cost_input_choices()) {
    for (const auto& name : choice.names) {
      CostInputs probe;
      choice.set(probe, name, std::string(choice.key));
      EXPECT_EQ(choice.get(probe), name) << choice.key;
    }
    CostInputs probe;
    EXPECT_NE(test::error_message([&] { choice.set(probe, "nope", "k"); }).find(choice.names[0]),
              std::string::npos)
        << choice.key;
  }
}

TEST(CostInputFields, SettingOneOfTwoAlternativesClearsTheOther) {
  CostInputs in;
  in.block_size = 4;
  set_cost_input(in, "blocks", 8);
  EXPECT_EQ(in.blocks, 8);
  EXPECT_EQ(in.block_size, 0);
  in.sublayers = 64;
  set_cost_input(in, "layers", 16);
  EXPECT_EQ(in.layers, 16);
  EXPECT_EQ(in.sublayers, 0);
  set_cost_input(in, "seq_shards", 3);
  EXPECT_EQ(in.seq_shards, 3);
  EXPECT_NE(
      test::error_message([&] { set_cost_input(in, "blokcs", 1); }).find("did you mean 'blocks'"),
      std::string::npos);
  EXPECT_NE(test::error_message([&] { set_cost_input(in, "microbatches", 1); }).find("[pipeline]"),
            std::string::npos);
}

TEST(CostInputFields, JsonInputsHaveEveryKeyOfTheTable) {
  CostInputs in;
  in.sublayers = 32;
  in.d_model = 64;
  in.blocks = 4;
  const nlohmann::json j = cost_inputs_to_json(resolve_cost_inputs(in));
  // + the five choices, bytes_per_element and the three lists
  EXPECT_EQ(j.size(), cost_input_fields().size() + cost_input_choices().size() + 1 +
                          cost_input_lists().size());
  EXPECT_EQ(cost_input_lists().size(), 3u);
  for (const auto& list : cost_input_lists())
    EXPECT_TRUE(j[std::string(list.key)].is_array()) << list.key;
  EXPECT_EQ(j["layers"], 16);
  EXPECT_EQ(j["block_size"], 8);
  EXPECT_EQ(j["dtype"], "bf16");
  for (const auto& field : cost_input_fields())
    EXPECT_TRUE(j.contains(std::string(field.key))) << field.key;
}

TEST(SweepValues, TheCliFormsExpandAsWrittenByHand) {
  using V = std::vector<std::int64_t>;
  EXPECT_EQ(parse_sweep_values("1,2,4", "--values", 0), (V{1, 2, 4}));
  EXPECT_EQ(parse_sweep_values(" 3, 5 ", "--values", 0), (V{3, 5}));
  EXPECT_EQ(parse_sweep_values("divisors", "--values", 12), (V{1, 2, 3, 4, 6, 12}));
  EXPECT_EQ(parse_sweep_values("1:10:3", "--values", 0), (V{1, 4, 7, 10}));
  EXPECT_EQ(parse_sweep_values("2:5", "--values", 0), (V{2, 3, 4, 5}));
  EXPECT_EQ(parse_sweep_values("1:64:x2", "--values", 0), (V{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(parse_sweep_values("3:100:x3", "--values", 0), (V{3, 9, 27, 81}));
  // No overflow next to the largest integer.
  const std::int64_t top = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(
      parse_sweep_values(std::to_string(top - 7) + ":" + std::to_string(top) + ":5", "--values", 0),
      (V{top - 7, top - 2}));
  for (const auto& [text, expected] : std::vector<std::pair<std::string, std::string>>{
           {"a,2", "--values: 'a' is not an integer"},
           {"", "--values: no values given"},
           {" 3, 5 ,", "--values: entry 3 of ' 3, 5 ,' is empty"},
           {",1,2", "--values: entry 1 of ',1,2' is empty"},
           {"1,,2", "--values: entry 2 of '1,,2' is empty"},
           {"5:1", "--values: TO (1) is below FROM (5)"},
           {"1:10:0", "--values: STEP must be >= 1"},
           {"1:10:x1", "--values: a factor needs FROM >= 1 and FACTOR >= 2"},
           {"0:10:x2", "--values: a factor needs FROM >= 1 and FACTOR >= 2"},
           {"1:2:3:4", "--values: expected FROM:TO[:STEP|:xFACTOR]"},
           {"1:100000000", "--values: too many values"}}) {
    const std::string message =
        test::error_message([&text = text] { parse_sweep_values(text, "--values", 8); });
    EXPECT_EQ(message.rfind(expected, 0), 0u) << text << " -> " << message;
  }
  SweepRange both;
  both.from = 1;
  both.to = 4;
  both.step = 1;
  both.factor = 2;
  EXPECT_NE(
      test::error_message([&] { expand_sweep_range(both, "sweep.values"); }).find("exactly one"),
      std::string::npos);
}

TEST(SweepRules, ParametersAndMetricsNeedWhatTheyMeasure) {
  EXPECT_EQ(sweep_parameter_problem("blocks", false), "");
  EXPECT_EQ(sweep_parameter_problem("microbatches", true), "");
  EXPECT_NE(sweep_parameter_problem("microbatches", false).find("needs a [pipeline] table"),
            std::string::npos);
  EXPECT_NE(sweep_parameter_problem("blocs", false).find("did you mean 'blocks'"),
            std::string::npos);
  EXPECT_EQ(sweep_metric_problem("io_multiples_of_d.standard", false, false, ""), "");
  EXPECT_NE(sweep_metric_problem("time.prefill_overhead_block_two_phase", false, false, "")
                .find("needs [hardware]"),
            std::string::npos);
  EXPECT_EQ(sweep_metric_problem("time.prefill_overhead_block_two_phase", true, false, ""), "");
  EXPECT_NE(sweep_metric_problem("pipeline.attnres_overhead_fraction", true, false, "")
                .find("[pipeline]"),
            std::string::npos);
  const CostMetric* io = find_cost_metric("io_multiples_of_d.standard");
  ASSERT_NE(io, nullptr);
  EXPECT_NE(sweep_metric_problem("prefill_history_gb.total", false, false, io->unit)
                .find("separate sweeps"),
            std::string::npos);
  // every sweep parameter is a table key, one of the two pipeline settings or one of the two
  // named ones (strategy, hardware)
  for (const auto& name : sweep_parameters()) {
    EXPECT_TRUE(find_cost_input_field(name) != nullptr || is_pipeline_sweep_parameter(name) ||
                is_named_sweep_parameter(name))
        << name;
  }
  EXPECT_EQ(sweep_parameters().size(), cost_input_fields().size() + 2 + 2);
  EXPECT_TRUE(is_named_sweep_parameter("hardware"));
  EXPECT_FALSE(is_named_sweep_parameter("tp"));
}

TEST(SweepJson, TheStreamedObjectHoldsTheHeaderEveryPointAndTheRejectedSettings) {
  // Written piece by piece, read back whole: the same points run_sweep returns, the counts, and a
  // rejected setting (N = 64 > L = 32) with its reason.
  CostInputs base;
  base.sublayers = 32;
  base.d_model = 8;
  base.blocks = 4;
  base = resolve_cost_inputs(base);
  SweepSpec spec;
  spec.name = "io";
  spec.x = {"blocks", {1, 2, 64}};
  spec.metrics = {"io_multiples_of_d.block_two_phase"};
  std::ostringstream text;
  SweepRun run;
  SweepJsonWriter writer(text, spec, cost_inputs_to_json(base));
  run.on_point = [&](const SweepPoint& point) { writer.point(point); };
  const SweepResult result = run_sweep(
      ScenarioInputs{base, std::nullopt, std::nullopt, Strategy::fused_two_phase}, spec, run);
  writer.end(result);
  const nlohmann::json j = nlohmann::json::parse(text.str());
  EXPECT_EQ(j["name"], "io");
  EXPECT_EQ(j["x"], "blocks");
  EXPECT_TRUE(j["y"].is_null());
  EXPECT_EQ(j["inputs"]["sublayers"], 32);
  ASSERT_EQ(j["points"].size(), 2u);
  EXPECT_EQ(j["points"][1]["blocks"], 2);
  // (N/S + 5)d with N = 2, S = 16: 5.125
  EXPECT_EQ(j["points"][1]["io_multiples_of_d.block_two_phase"], 5.125);
  EXPECT_EQ(j["valid_count"], 2);
  EXPECT_EQ(j["skipped_count"], 1);
  EXPECT_NE(j["skipped"][0].get<std::string>().find("blocks = 64"), std::string::npos);
}

}  // namespace test_cost_input_fields
}  // namespace attnres
