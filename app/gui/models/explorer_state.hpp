// The one state behind the cost views of attnres-lab (the cost explorer's tabs, the Pipeline view,
// the Memory and Decision tabs): what a scenario says — the model, the hardware as a value, the
// [pipeline] table, the [implementation] strategy, the [plan] — plus the few choices the GUI adds
// (the memory workload, the chart pickers). Built from a Scenario by the same derivations the CLI
// uses (scenario_memory_settings, evaluate_scenario's pipeline settings), so a view computing from
// it computes what `attnres report` computes. QtCore-free; no widgets. docs/architecture.md
// ("The GUI's models").
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attnres/scenario.hpp"

namespace attnres::gui {

struct ExplorerState {
  // The model (resolved), the hardware, the [pipeline] settings and the strategy, as the CLI's
  // ScenarioInputs; hardware and pipeline are always set here (the GUI's defaults where the
  // scenario has none; `hardware_origin` and `pipeline_origin` say which).
  CostInputs model;
  Hardware hardware;
  PipelineSettings pipeline;  // its model and hardware fields are not used: `model`, `hardware`
  Strategy strategy = Strategy::fused_two_phase;
  std::string hardware_origin;     // "preset h100", "scenario [hardware] preset gb300", "file ..."
  std::string hardware_preset;     // the preset key when `hardware` is one unchanged, else ""
  bool scenario_pipeline = false;  // the [pipeline] table came from the scenario
  std::optional<ScenarioPlan> plan;        // the [plan] table (none: the Decision tab's defaults)
  Workload workload = Workload::training;  // the Memory tab's choice (the CLI counts training)
  std::string title;                       // the scenario's title ("" before one is opened)
  // The keys of the scenario that no cost view takes (sweeps are drawn, training runs are the
  // Training view's): said in words by the views, listed in the dump.
  std::vector<std::string> not_taken;

  ScenarioInputs scenario_inputs() const;
};

// The cost explorer as it opens: the paper's example setting (docs/math.md §3) on an H100 preset.
ExplorerState default_explorer_state();
// The Pipeline view as it opens and as the lesson starts it: the paper's Kimi-Linear-like MoE
// model of scenarios/paper-overhead-claims.toml (27 layers, S = 6, d = 2304, 8 of 256 experts + 1
// shared) on H100s, P = 4, V = 2, m = 8, the cached history, scale-out links at 200 GB/s.
ExplorerState pipeline_lesson_state();
// A scenario's state: every key the cost views use. Throws attnres::Error for a scenario without
// [model].
ExplorerState explorer_state(const Scenario& scenario);
// The state back into a scenario (File > Save scenario): [model] and everything under it,
// [hardware] in full, [pipeline], [implementation] and [plan].
void save_explorer_state(const ExplorerState& state, Scenario& scenario);

// The hardware of a preset key, labelled as chosen in the GUI.
void set_hardware_preset(ExplorerState& state, const std::string& preset);
// The preset key `hardware` equals field for field ("" when none does: a file or overrides).
std::string matching_preset(const Hardware& hardware);

// The settings every cost view computes with, as the CLI derives them from the same scenario.
MemorySettings memory_settings(const ExplorerState& state);
PipelineSettings step_settings(const ExplorerState& state);

// The state as JSON (the dump's "state" of each view): every input with its value.
nlohmann::json explorer_state_json(const ExplorerState& state);

// The one state of an opened scenario, shared by the views that compute from it (the main
// window's cost explorer and Pipeline view; docs/architecture.md "The GUI's models"). Opening a
// scenario links the views to it; after that, a view whose inputs change the state publishes it
// and every other view shows it and computes again, so the Step tab and the Pipeline view never
// simulate two settings of one scenario. Before a scenario is opened the views keep their own
// teaching examples (the cost explorer's paper setting, the Pipeline lesson's MoE). A view that
// is notified and publishes in turn is not re-notified (no ping-pong).
class ExplorerStateHub {
 public:
  bool linked() const { return linked_; }
  const ExplorerState& state() const { return state_; }
  // A scenario was opened: every subscriber computes it from now on (each view applies the
  // scenario itself, so nobody is notified).
  void open(const ExplorerState& state);
  // `by` changed the state: every other subscriber is told, unless nothing changed, the hub is
  // not linked, or this is a subscriber answering a notification.
  void publish(const ExplorerState& state, const void* by);
  // `on_change` runs on every change another subscriber publishes. Subscribers live as long as
  // the hub (the main window owns both).
  void subscribe(const void* who, std::function<void()> on_change);

 private:
  ExplorerState state_;
  bool linked_ = false;
  bool notifying_ = false;
  std::vector<std::pair<const void*, std::function<void()>>> subscribers_;
};

}  // namespace attnres::gui
