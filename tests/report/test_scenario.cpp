// Scenario files: the schema, and errors that carry file:line:column and a hint.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "attnres/atomic_file.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/error.hpp"
#include "attnres/report.hpp"
#include "attnres/scenario.hpp"
#include "test_support.hpp"

namespace attnres {
namespace {

const std::string kModel = "[model]\nsublayers = 128\nd_model = 64\nblocks = 8\n";

}  // namespace

// Parsing `text` must fail with a message starting "s.toml:<location>:" and containing `needle`.
void expect_error(const std::string& text, const std::string& location, const std::string& needle) {
  try {
    parse_scenario(text, "s.toml");
    ADD_FAILURE() << "accepted; expected an error at " << location;
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_EQ(message.rfind("s.toml:" + location + ":", 0), 0u) << message;
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
}

namespace {

TEST(Scenario, ReadsEveryTableAndResolvesTheInputs) {
  const auto s = parse_scenario(R"(
title = "t"
description = "d"
sections = ["io", "pipeline"]
[model]
layers = 27
d_model = 2304
block_size = 6
streams = 2
[sequence]
tokens = 8192
batch = 2
dtype = "fp8"
seq_shards = 4
chunk = 1024
[parallel]
pp = 4
vpp = 2
[scaling]
target_loss = 1.7
loss_range = [1.65, 1.8]
[[sweep]]
name = "grid"
x = "pp"
values = [1, 2]
y = "vpp"
y_values = { from = 1, to = 4, factor = 2 }
metrics = ["pipeline_exact_elements_per_token.naive"]
[[sweep]]
name = "divisors"
x = "block_size"
values = "divisors"
metrics = ["io_multiples_of_d.block_two_phase"]
log_x = true
)",
                                "s.toml");
  EXPECT_EQ(s.title, "t");
  EXPECT_TRUE(s.has_model);
  EXPECT_EQ(s.inputs.sublayers, 54);
  EXPECT_EQ(s.inputs.blocks, 9);
  EXPECT_EQ(s.inputs.dtype, DType::fp8);
  EXPECT_EQ(s.inputs.chunk, 1024);
  EXPECT_EQ(s.sections, (std::vector<std::string>{"io", "pipeline"}));
  EXPECT_EQ(s.scaling.target_loss, 1.7);
  ASSERT_EQ(s.sweeps.size(), 2u);
  EXPECT_EQ(s.sweeps[0].y->values, (std::vector<std::int64_t>{1, 2, 4}));
  EXPECT_EQ(s.sweeps[1].x.values, (std::vector<std::int64_t>{1, 2, 3, 6, 9, 18, 27, 54}));
  EXPECT_TRUE(s.sweeps[1].log_x);
}

TEST(Scenario, ScalingOnlyNeedsNoModel) {
  const auto s = parse_scenario("sections = [\"scaling\"]\n", "s.toml");
  EXPECT_FALSE(s.has_model);
  expect_error("title = \"x\"\n", "1:1", "missing table [model]");
}

TEST(Scenario, SyntaxErrorsHaveLineAndColumn) {
  expect_error("[model]\nsublayers = = 3\n", "2:13", "TOML syntax error");
}

TEST(Scenario, WrongTypesAreNamed) {
  expect_error("[model]\nsublayers = \"many\"\n", "2:13",
               "model.sublayers must be an integer, got a string");
  expect_error(kModel + "[sequence]\ndtype = \"bf17\"\n", "6:9", "unknown dtype 'bf17'");
  expect_error("sections = \"io\"\n" + kModel, "1:12", "sections must be an array");
}

TEST(Scenario, UnknownKeysSuggestTheNearestOne) {
  expect_error(kModel + "[sequence]\ntoken = 5\n", "6:1", "did you mean 'sequence.tokens'?");
  expect_error("[modle]\n", "1:2", "did you mean 'model'?");
  expect_error("sections = [\"pipline\"]\n" + kModel, "1:13", "did you mean 'pipeline'?");
}

TEST(Scenario, ImpossibleSettingsPointAtTheKey) {
  expect_error("[model]\nsublayers = 8\nd_model = 64\nblocks = 9\n", "4:10",
               "blocks N = 9 exceeds L = 8");
  expect_error("[model]\nsublayers = 8\nd_model = 0\nblocks = 2\n", "3:11", "width d must be >= 1");
  expect_error("[model]\nsublayers = -8\nd_model = 4\nblocks = 2\n", "2:13",
               "sublayers L must be >= 1");
  expect_error(kModel + "[parallel]\npp = 16\nvpp = 16\n", "6:6", "exceed L = 128");
  expect_error(kModel + "[sequence]\ntokens = 1000000000\nbatch = 1000000000\n", "6:10",
               "overflows");
  expect_error("[model]\nsublayers = 8\nd_model = 4\n", "1:1", "give the number of blocks");
}

TEST(Scenario, SweepErrorsAreLocated) {
  const std::string head = kModel + "[[sweep]]\nname = \"s\"\n";
  expect_error(head + "x = \"blocs\"\nvalues = [1]\nmetrics = [\"io_multiples_of_d.mhc\"]\n", "7:5",
               "did you mean 'blocks'?");
  expect_error(head + "x = \"blocks\"\nvalues = [1]\nmetrics = [\"io_multiples_of_d.mch\"]\n",
               "9:12", "did you mean 'io_multiples_of_d.mhc'?");
  expect_error(head +
                   "x = \"blocks\"\nvalues = [1]\nmetrics = [\"io_multiples_of_d.mhc\", "
                   "\"prefill_history_gb.total\"]\n",
               "9:37", "put them in separate sweeps");
  expect_error(
      head +
          "x = \"blocks\"\nvalues = { from = 1, to = 8 }\nmetrics = [\"io_multiples_of_d.mhc\"]\n",
      "8:10", "exactly one of 'step' or 'factor'");
  expect_error(head + "x = \"blocks\"\nmetrics = [\"io_multiples_of_d.mhc\"]\n", "5:1",
               "needs 'values'");
  expect_error(head +
                   "x = \"tokens\"\nvalues = [1]\noverlay = \"paper_fig6\"\nmetrics = "
                   "[\"io_multiples_of_d.mhc\"]\n",
               "9:11", "needs x = \"blocks\"");
  expect_error(kModel + "[[sweep]]\nname = \"a b\"\n", "6:8", "letters, digits");
  // The output-name rules (200 characters at most) are checked where the name is read, with its
  // place in the file, not after the sweep has run.
  expect_error(kModel + "[[sweep]]\nname = \"" + std::string(300, 'a') +
                   "\"\nx = \"blocks\"\nvalues = [1]\nmetrics = [\"io_multiples_of_d.mhc\"]\n",
               "6:8", "is longer than 200 characters");
  expect_error(
      kModel +
          "[[sweep]]\nname = \"s\"\nx = \"pp\"\nvalues = { from = 1, to = 100000000, step = 1 }\n"
          "metrics = [\"io_multiples_of_d.mhc\"]\n",
      "8:10", "too many values");
}

}  // namespace
}  // namespace attnres

namespace attnres {
namespace {

TEST(ScenarioDocs, ListEveryMetricKey) {
  std::ifstream in(std::string(ATTNRES_CORE_DIR) + "/../docs/scenarios.md");
  std::stringstream text;
  text << in.rdbuf();
  for (const auto& metric : cost_metrics()) {
    EXPECT_NE(text.str().find("`" + metric.key + "`"), std::string::npos)
        << metric.key << " is missing from docs/scenarios.md";
  }
}

}  // namespace
}  // namespace attnres

namespace attnres {
namespace {

const std::string kKimi =
    "[model]\nlayers = 27\nd_model = 2304\nblock_size = 6\n[parallel]\npp = 4\nvpp = 2\n";

TEST(ScenarioPipeline, ReadsHardwareOverridesMoeAndPipeline) {
  const auto s = parse_scenario(kKimi + R"(
[hardware]
preset = "h100"
scale_out_bandwidth = 25e9
efficiency = { compute = 0.4 }
[moe]
experts = 256
active = 8
shared = 1
expert_ffn = 1024
[pipeline]
microbatches = 16
cache = "naive"
overlap = false
)",
                                "s.toml");
  ASSERT_TRUE(s.hardware && s.pipeline);
  EXPECT_EQ(s.hardware->scale_out_bandwidth, 25e9);
  EXPECT_EQ(s.hardware->compute_efficiency, 0.4);
  EXPECT_EQ(s.hardware->memory_efficiency, 0.8);  // kept from the preset
  EXPECT_EQ(s.inputs.experts, 256);
  EXPECT_EQ(s.pipeline->microbatches, 16);
  EXPECT_EQ(s.pipeline->schedule, PipelineSchedule::interleaved);  // vpp > 1
  EXPECT_EQ(s.pipeline->cache, CachePolicy::naive);
  EXPECT_FALSE(s.pipeline->overlap);
  EXPECT_NE(std::find(s.sections.begin(), s.sections.end(), "pipeline_sim"), s.sections.end());
}

TEST(ScenarioPipeline, AHardwareFilesOwnMistakesPointIntoThatFile) {
  // [hardware] file = ...: a bad value or a syntax error in the file is located in the file, an
  // override in the scenario; a good file with an override reads both.
  test::TempDir dir;
  const std::string gpu = (dir / "gpu.toml").string();
  const std::string ok =
      "peak_bf16_flops = 1e15\nhbm_bandwidth = 3e12\nintra_node_bandwidth = 4e11\n";
  auto message = [&](const std::string& file_text, const std::string& overrides) {
    write_file_atomically(gpu, file_text);
    try {
      parse_scenario(kKimi + "[hardware]\nfile = \"" + gpu + "\"\n" + overrides, "s.toml");
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message(ok + "scale_out_bandwidth = -5\n", ""),
            gpu + ":4:23: scale_out_bandwidth must be in (0, 1e+30], got -5");
  EXPECT_EQ(message(ok + "scale_out_bandwidth = 5e10\n", "scale_out_bandwidth = -5\n"),
            "s.toml:10:23: hardware.scale_out_bandwidth must be in (0, 1e+30], got -5");
  EXPECT_EQ(message(ok + "scale_out_bandwidth = \n", "").rfind(gpu + ":4:", 0), 0u);
  EXPECT_EQ(message(ok, "").rfind("s.toml:8:1: missing 'hardware.scale_out_bandwidth'", 0), 0u);
  write_file_atomically(gpu, ok + "scale_out_bandwidth = 5e10\n");
  const Scenario s = parse_scenario(
      kKimi + "[hardware]\nfile = \"" + gpu + "\"\nhbm_bandwidth = 1e12\n", "s.toml");
  ASSERT_TRUE(s.hardware);
  EXPECT_EQ(s.hardware->hbm_bandwidth, 1e12);
  EXPECT_EQ(s.hardware->scale_out_bandwidth, 5e10);
}

TEST(ScenarioPlan, ReadsTheGridAndBudgetsAndWritesThemBack) {
  const std::string text = kKimi + R"(stage_layers = [3, 4, 4, 3, 3, 4, 3, 3]
[implementation]
strategy = "arena"
[hardware]
preset = "h100"
[pipeline]
microbatches = 8
overlap_comm = "tp,dp"
[plan]
blocks = [1, 3, 9]
tp = [1, 2]
strategies = ["stack", "fused_two_phase"]
hardware = ["h100", "b200"]
gpus = 64
max_overhead_percent = 2.5
max_pipeline_gb = 100
require_fit = false
)";
  const Scenario s = parse_scenario(text, "s.toml");
  ASSERT_TRUE(s.plan && s.pipeline);
  EXPECT_EQ(s.pipeline->strategy, Strategy::arena);  // [implementation] is the one strategy
  EXPECT_TRUE(s.pipeline->comm_overlap.tp);
  EXPECT_FALSE(s.pipeline->comm_overlap.cp);
  EXPECT_EQ(s.inputs.stage_layers.size(), 8u);
  EXPECT_EQ(s.plan->grid.blocks, (std::vector<std::int64_t>{1, 3, 9}));
  EXPECT_EQ(s.plan->grid.hardware.size(), 2u);
  EXPECT_EQ(s.plan->grid.hardware[1].memory_bytes, load_hardware("b200").memory_bytes);
  EXPECT_DOUBLE_EQ(s.plan->budgets.max_overhead_fraction, 0.025);
  EXPECT_FALSE(s.plan->budgets.must_fit);
  EXPECT_NE(std::find(s.sections.begin(), s.sections.end(), "step"), s.sections.end());
  EXPECT_NE(std::find(s.sections.begin(), s.sections.end(), "decision"), s.sections.end());
  const Scenario again = parse_scenario(scenario_to_toml(s), "again.toml");
  ASSERT_TRUE(again.plan);
  EXPECT_EQ(again.plan->grid.tp, s.plan->grid.tp);
  EXPECT_EQ(again.plan->grid.strategies, s.plan->grid.strategies);
  EXPECT_EQ(again.plan->grid.gpus, 64);
  EXPECT_DOUBLE_EQ(again.plan->budgets.max_pipeline_bytes, 100e9);
  EXPECT_EQ(again.inputs.stage_layers, s.inputs.stage_layers);
  EXPECT_EQ(to_string(again.pipeline->comm_overlap), "tp,dp");
  // The report's decision section is the plan of these settings.
  const Report report = build_report(s);
  bool found = false;
  for (const auto& table : report.tables) found = found || table.id == "plan";
  EXPECT_TRUE(found);
  EXPECT_EQ(report.json["decision"]["candidates"].size(), 3u * 2 * 2 * 2);
}

TEST(ScenarioSweeps, StrategyAndHardwareAxesTakeNames) {
  const std::string text = kKimi + R"([hardware]
preset = "h100"
[pipeline]
microbatches = 8
[[sweep]]
name = "by_name"
x = "hardware"
values = ["h100", "b200"]
y = "strategy"
y_values = ["arena", "fused_two_phase"]
metrics = ["pipeline.attnres_overhead_fraction"]
)";
  const Scenario s = parse_scenario(text, "s.toml");
  ASSERT_EQ(s.sweeps.size(), 1u);
  EXPECT_EQ(s.sweeps[0].x.names, (std::vector<std::string>{"h100", "b200"}));
  EXPECT_EQ(s.sweeps[0].x.values, (std::vector<std::int64_t>{0, 1}));
  ASSERT_TRUE(s.sweeps[0].y.has_value());
  EXPECT_EQ(s.sweeps[0].y->names[0], "arena");
  const Scenario again = parse_scenario(scenario_to_toml(s), "again.toml");
  EXPECT_EQ(again.sweeps[0].x.names, s.sweeps[0].x.names);
  EXPECT_EQ(again.sweeps[0].y->names, s.sweeps[0].y->names);
  const Report report = build_report(s);
  const auto& points = report.json["sweeps"][0]["points"];
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[0]["hardware"], "h100");
  EXPECT_EQ(points[3]["strategy"], "fused_two_phase");
  expect_error(kKimi +
                   "[[sweep]]\nname = \"s\"\nx = \"hardware\"\nvalues = [\"h1000\"]\n"
                   "metrics = [\"io_elements_per_sublayer.standard\"]\n",
               "11:11", "h1000");
  expect_error(kKimi +
                   "[[sweep]]\nname = \"s\"\nx = \"strategy\"\nvalues = [1, 2]\n"
                   "metrics = [\"io_elements_per_sublayer.standard\"]\n",
               "11:11", "sweep.values entry");
}

TEST(ScenarioPlan, BadPlansAndStageListsAreLocated) {
  const std::string pipeline = "[hardware]\npreset = \"h100\"\n[pipeline]\nmicrobatches = 8\n";
  expect_error(kKimi + "[hardware]\npreset = \"h100\"\n[plan]\ntp = [2]\n", "10:1",
               "[plan] simulates training steps and needs a [pipeline] table");
  expect_error(kKimi + pipeline + "[plan]\nmax_overhead = 2\n", "13:1",
               "unknown key 'plan.max_overhead'; expected one of: blocks");
  expect_error(kKimi + pipeline + "[plan]\nmax_overhead_percent = -2\n", "13:24",
               "plan.max_overhead_percent must be > 0");
  expect_error(kKimi + pipeline + "[plan]\ntp = [2, 0]\n", "13:10", "plan.tp values must be >= 1");
  expect_error(kKimi + pipeline + "[plan]\nstrategies = [\"fused\"]\n", "13:15",
               "plan.strategies: unknown implementation strategy 'fused'");
  expect_error(kKimi + pipeline + "[plan]\nhardware = [\"h1000\"]\n", "13:13", "h1000");
  expect_error(kKimi + "stage_layers = [3, 4]\n", "8:16",
               "parallel.stage_layers: the stage_layers list has 2 entries");
  expect_error(kKimi + "[hardware]\npreset = \"h100\"\n[pipeline]\noverlap_comm = \"tp,xp\"\n",
               "11:16", "unknown parallel group 'xp'");
}

TEST(ScenarioPipeline, BadSettingsAreLocated) {
  expect_error(kKimi + "[hardware]\npreset = \"h1000\"\n", "9:10", "did you mean 'h100'");
  expect_error(kKimi + "[hardware]\n", "8:1", "missing 'hardware.peak_bf16_flops'");
  expect_error(kKimi + "[hardware]\npreset = \"h100\"\nfile = \"x.toml\"\n", "10:8",
               "preset or file, not both");
  // An override is located at its own key, not at the table (the preset's keys are read too).
  expect_error(kKimi + "[hardware]\npreset = \"h100\"\nhbm_bandwidth = 0\n", "10:17",
               "hardware.hbm_bandwidth must be in (0");
  expect_error(kKimi + "[hardware]\npreset = \"h100\"\nefficiency = { compute = 2 }\n", "10:26",
               "hardware.efficiency.compute must be in (0, 1]");
  expect_error(kKimi + "[hardware]\npreset = \"h100\"\nhbm_bandwith = 1\n", "10:1",
               "unknown key 'hardware.hbm_bandwith' (did you mean 'hardware.hbm_bandwidth'?)");
  expect_error(kKimi + "[pipeline]\nmicrobatches = 8\n", "8:1", "needs [hardware]");
  expect_error(kKimi + "[hardware]\npreset = \"h100\"\n[pipeline]\nmicrobatches = 0\n", "11:16",
               "between 1 and 1000000");
  expect_error(kKimi + "[hardware]\npreset = \"h100\"\n[pipeline]\nschedule = \"1f1b\"\n", "11:12",
               "pipeline.schedule: the 1f1b schedule runs one stage per rank (V = 1)");
  expect_error(kKimi + "[hardware]\npreset = \"h100\"\n[pipeline]\nlink_bandwidth = 0\n", "11:18",
               "must be > 0");
  expect_error(kKimi + "[hardware]\npreset = \"h100\"\n[pipeline]\ncache = \"sometimes\"\n", "11:9",
               "unknown cache policy");
  expect_error(kKimi + "[moe]\nexperts = 4\nactive = 8\nexpert_ffn = 2\n", "10:10",
               "moe.active: active experts must be between 1 and the 4 experts, got 8");
  expect_error(kKimi +
                   "[[sweep]]\nname = \"s\"\nx = \"microbatches\"\nvalues = [1]\nmetrics = "
                   "[\"io_multiples_of_d.mhc\"]\n",
               "10:5", "needs a [pipeline] table");
  expect_error(kKimi +
                   "[[sweep]]\nname = \"s\"\nx = \"pp\"\nvalues = [1]\nmetrics = "
                   "[\"time.decode_overhead_block_two_phase\"]\n",
               "12:12", "needs [hardware]");
  expect_error("sections = [\"time\"]\n" + kKimi, "1:12", "needs [hardware]");
}

}  // namespace
}  // namespace attnres

namespace attnres {
namespace {

TEST(ScenarioWriter, RoundTripsEverySetting) {
  const auto original =
      load_scenario(std::string(ATTNRES_CORE_DIR) + "/../scenarios/paper-overhead-claims.toml");
  const auto again = parse_scenario(scenario_to_toml(original), "written.toml");
  EXPECT_EQ(again.inputs.sublayers, original.inputs.sublayers);
  EXPECT_EQ(again.inputs.block_size, original.inputs.block_size);
  EXPECT_EQ(again.inputs.pp, original.inputs.pp);
  EXPECT_EQ(again.sections, original.sections);
  ASSERT_TRUE(again.hardware && again.pipeline);
  EXPECT_EQ(again.hardware->scale_out_bandwidth, original.hardware->scale_out_bandwidth);
  EXPECT_EQ(again.hardware->source, original.hardware->source);
  EXPECT_EQ(again.inputs.experts, 256);
  EXPECT_EQ(again.pipeline->microbatches, original.pipeline->microbatches);
  EXPECT_EQ(again.pipeline->cache, original.pipeline->cache);
  ASSERT_EQ(again.sweeps.size(), original.sweeps.size());
  EXPECT_EQ(again.sweeps[0].x.values, original.sweeps[0].x.values);
  EXPECT_EQ(again.sweeps[0].threshold, 0.04);
  EXPECT_EQ(again.sweeps[0].claim, original.sweeps[0].claim);
  EXPECT_EQ(again.scaling.target_loss, original.scaling.target_loss);
}

}  // namespace
}  // namespace attnres

namespace attnres {
namespace {

const std::string kTrain = "[train]\ndata = \"corpus.txt\"\nlayers = 2\nd_model = 32\nheads = 2\n";

TEST(ScenarioTraining, ReadsTheTrainTableAndResolvesTheDataPath) {
  const auto s = parse_scenario(
      kModel + kTrain + "blocks = [1, 2, 4]\nseeds = [4, 5]\nsteps = 12\nlr = 0.01\n",
      "scenarios/s.toml");
  ASSERT_TRUE(s.training);
  EXPECT_EQ(s.training->data_path, std::filesystem::path("scenarios/corpus.txt"));
  EXPECT_EQ(s.training->blocks, (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(s.training->seeds, (std::vector<std::uint64_t>{4, 5}));
  EXPECT_EQ(s.training->schemes, (std::vector<std::string>{"standard", "full"}));
  EXPECT_EQ(s.training->steps, 12);
  EXPECT_NE(std::find(s.sections.begin(), s.sections.end(), "training"), s.sections.end());
  // A training-only scenario needs no [model].
  const auto only = parse_scenario("sections = [\"training\"]\n" + kTrain, "t.toml");
  EXPECT_FALSE(only.has_model);
  // Round trip.
  const auto again = parse_scenario(scenario_to_toml(s), "scenarios/w.toml");
  ASSERT_TRUE(again.training);
  EXPECT_EQ(again.training->blocks, s.training->blocks);
  EXPECT_EQ(again.training->seeds, s.training->seeds);
  EXPECT_EQ(again.training->lr, 0.01);
}

TEST(ScenarioTraining, BadSettingsAreLocated) {
  expect_error(kModel + "[train]\nlayers = 2\n", "5:1", "[train] needs 'data'");
  expect_error(kModel + kTrain + "blocks = [3]\n", "10:11", "must divide L = 4");
  expect_error(kModel + kTrain + "schemes = [\"blok\"]\n", "10:12", "unknown scheme 'blok'");
  expect_error(kModel + kTrain + "stpes = 3\n", "10:1", "did you mean 'train.steps'?");
  expect_error(kModel + kTrain + "masks = [\"distant:0\"]\n", "10:10", "unknown mask 'distant:0'");
  expect_error(kModel + kTrain + "steps = 0\n", "10:9", "train.steps must be between 1 and");
  // At the heads key, not the [train] header.
  expect_error(kModel + "[train]\ndata = \"c.txt\"\nd_model = 30\nheads = 4\n", "8:9",
               "even head size");
  expect_error(kModel + "[train]\ndata = \"c.txt\"\nheads = 4\nkv_heads = 3\n", "8:12",
               "kv_heads must divide heads");
  expect_error("sections = [\"training\"]\n" + kModel, "1:12",
               "section 'training' needs a [train] table");
}

}  // namespace
}  // namespace attnres
