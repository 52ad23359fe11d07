// The GUI's models without a window (app/gui/models/, issue 43): the state a scenario gives, what
// the cost views compute from it, the dump, and the item model over report tables. The figures
// are held against independent values: the engine calls the report makes for the same scenario
// (the CLI's path), the scenario's own numbers, and hand-written tables.
#include <gtest/gtest.h>

#include <QCoreApplication>
#include <filesystem>

#include "attnres/cost_metrics.hpp"
#include "attnres/sweep.hpp"
#include "explorer_results.hpp"
#include "report_table_model.hpp"

namespace attnres::gui {
namespace test_explorer_models {

const std::filesystem::path kScenarios = ATTNRES_SCENARIOS_DIR;

TEST(ExplorerState, TakesTheScenariosHardwareAsAValue) {
  const ExplorerState kimi = explorer_state(load_scenario(kScenarios / "kimi-k3.toml"));
  EXPECT_EQ(kimi.hardware.name, "GB300");
  EXPECT_EQ(kimi.hardware.memory_bytes, load_hardware("gb300").memory_bytes);
  EXPECT_EQ(kimi.hardware_preset, "gb300");
  EXPECT_EQ(kimi.hardware_origin, "scenario [hardware] preset gb300");
  // A preset with an override is no preset: the state keeps the value and says where it is from.
  Scenario s = parse_scenario(
      "[model]\nsublayers = 8\nd_model = 64\nblocks = 2\n[hardware]\npreset = \"h100\"\n"
      "memory_bytes = 40e9\n",
      "inline.toml");
  const ExplorerState own = explorer_state(s);
  EXPECT_EQ(own.hardware_preset, "");
  EXPECT_EQ(own.hardware.memory_bytes, 40e9);
  EXPECT_NE(own.hardware_origin.find("overrides"), std::string::npos) << own.hardware_origin;
  // No [hardware]: the GUI's default, said as such.
  const ExplorerState none = explorer_state(load_scenario(kScenarios / "paper-table1.toml"));
  EXPECT_EQ(none.hardware_preset, "h100");
  EXPECT_NE(none.hardware_origin.find("names no hardware"), std::string::npos);
}

TEST(ExplorerState, ComputesWhatTheReportComputes) {
  // The CLI's path for the same scenario: scenario_inputs() into the engine, as build_report does.
  for (const char* name :
       {"kimi-k3.toml", "moe-61-layers-128k.toml", "llama-3-70b.toml", "deepseek-v4-flash.toml"}) {
    const Scenario s = load_scenario(kScenarios / name);
    const ExplorerState state = explorer_state(s);
    const MemoryResult memory = compute_memory(state);
    const auto cli = memory_per_rank(s.inputs, scenario_memory_settings(s.scenario_inputs()));
    ASSERT_EQ(memory.ranks.size(), cli.size()) << name;
    for (std::size_t r = 0; r < cli.size(); ++r) EXPECT_EQ(memory.ranks[r].total(), cli[r].total());
    EXPECT_EQ(memory.peak.capacity, s.hardware->memory_bytes) << name;
    if (!s.pipeline) continue;
    const PipelineReport step = evaluate_pipeline(step_settings(state));
    const PipelineReport report =
        evaluate_scenario(s.scenario_inputs(), false, true, false).pipeline.value();
    EXPECT_EQ(step.step_time_s, report.step_time_s) << name;
    EXPECT_EQ(step.attnres_overhead_fraction, report.attnres_overhead_fraction) << name;
    EXPECT_EQ(step.settings.model.tp, s.inputs.tp) << name;
    EXPECT_EQ(step.settings.model.attention, s.inputs.attention) << name;
  }
}

TEST(ExplorerState, SavesBackToTheSameState) {
  for (const char* name :
       {"kimi-k3.toml", "moe-61-layers-128k.toml", "paper-overhead-claims.toml"}) {
    const ExplorerState state = explorer_state(load_scenario(kScenarios / name));
    Scenario saved;
    saved.source = "saved";
    save_explorer_state(state, saved);
    const Scenario back = parse_scenario(scenario_to_toml(saved), "saved.toml");
    nlohmann::json a = explorer_state_json(state), b = explorer_state_json(explorer_state(back));
    // Written in full, the hardware is no longer "a preset"; everything computed is the same.
    a.erase("hardware_origin");
    b.erase("hardware_origin");
    a.erase("not_taken");
    b.erase("not_taken");
    b["pipeline_origin"] = a["pipeline_origin"];
    EXPECT_EQ(a, b) << name << "\n" << nlohmann::json::diff(a, b).dump(1);
  }
}

TEST(ExplorerState, LabelsTheTwoMemoryFigures) {
  const Scenario scenario = load_scenario(kScenarios / "moe-61-layers-128k.toml");
  const ExplorerState state = explorer_state(scenario);
  const ViewDump dump = cost_view_dump(scenario);
  ASSERT_TRUE(dump.not_dumped.empty()) << dump.not_dumped;
  EXPECT_EQ(dump.view["state"], explorer_state_json(state));
  const auto& cost = dump.view["results"];
  EXPECT_EQ(cost["memory_kind"], kAnalyticMemory);
  EXPECT_EQ(cost["step"]["peak_memory_kind"], kSimulatedMemory);
  // The simulated peak counts the whole rank (weights, gradients, optimizer) as `attnres plan`
  // does: never below the weights alone, never the activations only.
  const PipelineReport step = evaluate_pipeline(step_settings(state));
  double weights = 0;
  for (const RankMemory& rank : step.memory) weights = std::max(weights, rank.weights);
  EXPECT_GT(cost["step"]["peak_memory_per_rank_bytes"].get<double>(), weights);
  EXPECT_EQ(simulated_peak_bytes(step), cost["step"]["peak_memory_per_rank_bytes"].get<double>());
  EXPECT_EQ(pipeline_view_dump(scenario).view["results"]["step"], cost["step"]);
  // A scenario without [model] gives the cost views nothing, and says so.
  const ViewDump none = cost_view_dump(load_scenario(kScenarios / "scaling-law.toml"));
  EXPECT_TRUE(none.view.is_null());
  EXPECT_EQ(none.not_dumped, "the scenario has no [model] table");
}

// The opened scenario's one state: linked views hear each other's changes, only after a scenario
// was opened, never their own, never an unchanged state, and never in reply to a notification.
TEST(ExplorerStateHub, TellsTheOtherViewsOfAChangeOnce) {
  ExplorerStateHub hub;
  int a_heard = 0, b_heard = 0;
  const int a = 0, b = 0;  // two subscribers' addresses
  hub.subscribe(&a, [&] { ++a_heard; });
  hub.subscribe(&b, [&] {
    ++b_heard;
    ExplorerState reply = hub.state();  // b answers with another change: not re-published
    reply.pipeline.microbatches += 1;
    hub.publish(reply, &b);
  });
  ExplorerState state = default_explorer_state();
  state.pipeline.microbatches = 8;
  hub.publish(state, &a);  // not linked: no scenario opened
  EXPECT_EQ(b_heard, 0);
  hub.open(state);
  EXPECT_TRUE(hub.linked());
  EXPECT_EQ(a_heard + b_heard, 0);  // opening tells nobody: each view applies the scenario
  hub.publish(state, &a);           // unchanged
  EXPECT_EQ(b_heard, 0);
  state.pipeline.microbatches = 16;
  hub.publish(state, &a);
  EXPECT_EQ(b_heard, 1);
  EXPECT_EQ(a_heard, 0);
  EXPECT_EQ(hub.state().pipeline.microbatches, 16);
}

TEST(ReportTableModel, ShowsTheTableAsTheCliPrintsIt) {
  ReportTable table;
  table.title = "memory per rank";
  table.header = {"rank", "total (GB)"};
  table.columns = {{"rank", "rank", Shown::text}, {"total", "total (GB)", Shown::number}};
  table.rows = {{"0", "12.5"}, {"1", "13"}};
  ReportTableModel model;
  model.set_table(table);
  EXPECT_EQ(model.rowCount(), 2);
  EXPECT_EQ(model.columnCount(), 2);
  EXPECT_EQ(model.headerData(1, Qt::Horizontal).toString(), "total (GB)");
  EXPECT_EQ(model.data(model.index(1, 1)).toString(), "13");
  EXPECT_EQ(model.data(model.index(1, 1), Qt::TextAlignmentRole).toInt(),
            static_cast<int>(Qt::AlignRight | Qt::AlignVCenter));
  EXPECT_EQ(model.data(model.index(0, 0), Qt::TextAlignmentRole).toInt(),
            static_cast<int>(Qt::AlignLeft | Qt::AlignVCenter));
  EXPECT_NE(model.data(model.index(0, 1), Qt::ToolTipRole).toString().indexOf("memory per rank"),
            -1);
  EXPECT_FALSE(model.data(model.index(5, 0)).isValid());
}

}  // namespace test_explorer_models
}  // namespace attnres::gui
