// The one state behind the cost views (explorer_state.hpp).
#include "explorer_state.hpp"

#include "attnres/cost_metrics.hpp"
#include "attnres/error.hpp"
#include "attnres/sweep.hpp"

namespace attnres::gui {

ScenarioInputs ExplorerState::scenario_inputs() const {
  ScenarioInputs in;
  in.cost = model;
  in.hardware = hardware;
  in.pipeline = pipeline;
  in.strategy = strategy;
  return in;
}

std::string matching_preset(const Hardware& hardware) {
  const std::string text = hardware_to_toml(hardware);
  for (const std::string& name : hardware_preset_names()) {
    if (hardware_to_toml(load_hardware(name)) == text) return name;
  }
  return {};
}

void set_hardware_preset(ExplorerState& state, const std::string& preset) {
  state.hardware = load_hardware(preset);
  state.hardware_preset = preset;
  state.hardware_origin = "preset " + preset;
}

namespace {

// The pipeline settings a scenario without [pipeline] gets: the engine's defaults, its schedule
// by V (what scenario_memory_settings counts with when there is no table).
PipelineSettings default_pipeline(const CostInputs& model) {
  PipelineSettings p;
  p.schedule = default_pipeline_schedule(model.vpp);
  p.record_timeline = false;
  return p;
}

}  // namespace

ExplorerState default_explorer_state() {
  ExplorerState s;
  CostInputs in;
  in.sublayers = 128;
  in.blocks = 8;
  in.d_model = 7168;
  in.tokens = 131072;
  in.batch = 1;
  in.pp = 4;
  in.vpp = 2;
  in.streams = 4;
  in.seq_shards = 8;
  in.chunk = 16384;
  s.model = resolve_cost_inputs(in);
  set_hardware_preset(s, "h100");
  s.hardware_origin = "preset h100 (the GUI's default)";
  s.pipeline = default_pipeline(s.model);
  s.strategy = Strategy::fused_one_shot;
  return s;
}

ExplorerState pipeline_lesson_state() {
  ExplorerState s;
  CostInputs in;
  in.sublayers = 54;
  in.block_size = 6;
  in.d_model = 2304;
  in.experts = 256;
  in.active = 8;
  in.shared = 1;
  in.expert_ffn = 1024;
  in.tokens = 4096;
  in.batch = 1;
  in.pp = 4;
  in.vpp = 2;
  s.model = resolve_cost_inputs(in);
  set_hardware_preset(s, "h100");
  s.hardware_origin = "preset h100 (the GUI's default)";
  s.pipeline = default_pipeline(s.model);
  s.pipeline.microbatches = 8;
  s.pipeline.cache = CachePolicy::cached;
  s.pipeline.link_bandwidth = 200e9;
  return s;
}

ExplorerState explorer_state(const Scenario& scenario) {
  if (!scenario.has_model)
    throw Error(scenario.source + ": the cost views need a [model] table (this scenario has none)");
  ExplorerState s = default_explorer_state();
  s.title = scenario.title;
  s.model = scenario.inputs;
  if (scenario.hardware) {
    s.hardware = *scenario.hardware;
    s.hardware_preset = matching_preset(s.hardware);
    if (!scenario.hardware_file.empty())
      s.hardware_origin = "scenario [hardware] file " + scenario.hardware_file.string();
    else if (!s.hardware_preset.empty())
      s.hardware_origin = "scenario [hardware] preset " + s.hardware_preset;
    else
      s.hardware_origin = "scenario [hardware] (" + s.hardware.name + " with overrides)";
  } else {
    s.hardware_origin = "preset h100 (the GUI's default: the scenario names no hardware)";
  }
  s.scenario_pipeline = scenario.pipeline.has_value();
  s.pipeline = scenario.pipeline ? *scenario.pipeline : default_pipeline(s.model);
  s.pipeline.record_timeline = false;
  s.pipeline.progress = {};
  s.strategy = scenario.strategy;
  s.plan = scenario.plan;
  if (!scenario.sweeps.empty())
    s.not_taken.push_back("[[sweep]] (drawn by the cost explorer's sweep picker)");
  if (scenario.training) s.not_taken.push_back("[train] (the Training view's)");
  if (scenario.strategy_mode != ResidualMode::block)
    s.not_taken.push_back("[implementation] mode (the recompute section's only)");
  if (!scenario.calibration_table.empty())
    s.not_taken.push_back("[calibration] table (the Calibration tab shows the committed table)");
  return s;
}

void save_explorer_state(const ExplorerState& state, Scenario& scenario) {
  scenario.inputs = state.model;
  scenario.has_model = true;
  scenario.hardware = state.hardware;
  PipelineSettings p = state.pipeline;
  p.model = state.model;
  p.hardware = state.hardware;
  p.strategy = state.strategy;
  p.progress = {};
  scenario.pipeline = p;
  scenario.strategy = state.strategy;
  scenario.plan = state.plan;
}

MemorySettings memory_settings(const ExplorerState& state) {
  MemorySettings m = scenario_memory_settings(state.scenario_inputs());
  m.workload = state.workload;
  return m;
}

PipelineSettings step_settings(const ExplorerState& state) {
  // As evaluate_scenario: the [pipeline] table with the scenario's model, strategy and hardware.
  PipelineSettings p = state.pipeline;
  p.model = state.model;
  p.strategy = state.strategy;
  p.hardware = state.hardware;
  p.record_timeline = false;
  p.progress = {};
  return p;
}

nlohmann::json explorer_state_json(const ExplorerState& state) {
  const PipelineSettings p = step_settings(state);
  nlohmann::json j = inputs_to_json(state.model, &state.hardware, &p);
  j["hardware_origin"] = state.hardware_origin;
  j["pipeline_origin"] = state.scenario_pipeline ? "scenario [pipeline]" : "defaults";
  j["strategy"] = to_string(state.strategy);
  j["workload"] = std::string(enum_name(kWorkloadNames, state.workload));
  j["plan"] = state.plan ? nlohmann::json("scenario [plan]") : nlohmann::json("defaults");
  j["not_taken"] = state.not_taken;
  return j;
}

void ExplorerStateHub::open(const ExplorerState& state) {
  state_ = state;
  linked_ = true;
}

void ExplorerStateHub::publish(const ExplorerState& state, const void* by) {
  if (!linked_ || notifying_) return;
  if (explorer_state_json(state) == explorer_state_json(state_)) return;
  state_ = state;
  notifying_ = true;
  try {
    for (const auto& [who, on_change] : subscribers_)
      if (who != by) on_change();
  } catch (...) {
    notifying_ = false;
    throw;
  }
  notifying_ = false;
}

void ExplorerStateHub::subscribe(const void* who, std::function<void()> on_change) {
  subscribers_.emplace_back(who, std::move(on_change));
}

}  // namespace attnres::gui
