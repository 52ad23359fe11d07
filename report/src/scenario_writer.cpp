// Writing a scenario back as TOML (scenario_to_toml): text that parse_scenario reads back to the
// same settings, one step per table — the cost inputs from the one table of cost inputs
// (cost_input_fields.hpp), [implementation], [calibration], [scaling], [hardware] in full,
// [train], [moe], [pipeline] and every [[sweep]]. Numbers are the shortest text that reads back
// to the same double.
#include <charconv>
#include <cmath>
#include <sstream>

#include "attnres/cost_input_fields.hpp"
#include "attnres/scenario.hpp"

namespace attnres {

namespace {

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// The shortest text that reads back to the same double (1.695, not 1.6950000000000001).
std::string toml_number(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

std::string values_array(const std::vector<std::int64_t>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i)
    out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

void write_cost_inputs(const CostInputs& in, std::ostringstream& out) {
  // Every primary input of the one table, in its TOML table (derived aliases are left out).
  for (const std::string_view section : kCostInputSections) {
    out << "\n[" << section << "]\n";
    for (const auto& field : cost_input_fields()) {
      if (field.section == section && !field.derived)
        out << field.key << " = " << in.*field.member << "\n";
    }
    for (const auto& choice : cost_input_choices()) {
      if (choice.section == section) out << choice.key << " = " << quoted(choice.get(in)) << "\n";
    }
    for (const auto& list : cost_input_lists()) {
      if (list.section == section && !(in.*list.member).empty())
        out << list.key << " = " << values_array(in.*list.member) << "\n";
    }
  }
}

void write_hardware(const Hardware& hw, std::ostringstream& out) {
  // In full (a preset name would lose overrides).
  out << "\n[hardware]\nname = " << quoted(hw.name) << "\nsource = " << quoted(hw.source)
      << "\npeak_bf16_flops = " << toml_number(hw.peak_flops)
      << "\nhbm_bandwidth = " << toml_number(hw.hbm_bandwidth)
      << "\nintra_node_bandwidth = " << toml_number(hw.intra_node_bandwidth)
      << "\nscale_out_bandwidth = " << toml_number(hw.scale_out_bandwidth)
      << "\nlink_latency = " << toml_number(hw.link_latency)
      << "\nkernel_floor = " << toml_number(hw.kernel_floor)
      << "\ngpus_per_node = " << hw.gpus_per_node
      << (hw.memory_bytes > 0 ? "\nmemory_bytes = " + toml_number(hw.memory_bytes) : std::string())
      << "\nefficiency = { compute = " << toml_number(hw.compute_efficiency)
      << ", memory = " << toml_number(hw.memory_efficiency)
      << ", link = " << toml_number(hw.link_efficiency) << " }\n";
}

void write_training(const ScenarioTraining& t, std::ostringstream& out) {
  auto list = [](const auto& values) {
    std::ostringstream text;
    text << "[";
    for (std::size_t i = 0; i < values.size(); ++i) text << (i ? ", " : "") << values[i];
    return text.str() + "]";
  };
  std::vector<std::string> schemes;
  for (const auto& scheme : t.schemes) schemes.push_back(quoted(scheme));
  out << "\n[train]\ndata = " << quoted(t.data) << "\nlayers = " << t.layers
      << "\nd_model = " << t.d_model << "\nheads = " << t.heads << "\nkv_heads = " << t.kv_heads
      << "\nffn = " << t.ffn << "\nschemes = " << list(schemes) << "\nblocks = " << list(t.blocks)
      << "\nsteps = " << t.steps << "\nseq = " << t.seq << "\nbatch = " << t.batch
      << "\nlr = " << toml_number(t.lr) << "\nseeds = " << list(t.seeds)
      << "\neval_every = " << t.eval_every << "\nthreads = " << t.threads
      << (t.precision.empty() ? "" : "\nprecision = " + quoted(t.precision))
      << "\nsave_models = " << (t.save_models ? "true" : "false") << "\n";
  std::vector<std::string> masks;
  for (const auto& mask : t.masks) masks.push_back(quoted(mask));
  if (!masks.empty()) out << "masks = " << list(masks) << "\n";
}

void write_pipeline(const PipelineSettings& p, std::ostringstream& out) {
  out << "\n[pipeline]\nmicrobatches = " << p.microbatches
      << "\nschedule = " << quoted(to_string(p.schedule))
      << "\ncache = " << quoted(to_string(p.cache)) << "\nmode = " << quoted(to_string(p.mode))
      << "\noverlap = " << (p.overlap ? "true" : "false")
      << "\noverlap_comm = " << quoted(to_string(p.comm_overlap))
      << "\nideal_links = " << (p.ideal_links ? "true" : "false")
      << "\nlink = " << quoted(enum_name(kPipelineLinkNames, p.link)) << "\n";
  if (p.link_bandwidth > 0) out << "link_bandwidth = " << toml_number(p.link_bandwidth) << "\n";
}

void write_plan(const ScenarioPlan& plan, std::ostringstream& out) {
  const PlanGrid& g = plan.grid;
  out << "\n[plan]\n";
  for (const auto& [key, values] :
       {std::pair{"blocks", &g.blocks}, std::pair{"tp", &g.tp}, std::pair{"cp", &g.cp},
        std::pair{"ep", &g.ep}, std::pair{"pp", &g.pp}, std::pair{"vpp", &g.vpp}}) {
    if (!values->empty()) out << key << " = " << values_array(*values) << "\n";
  }
  auto names = [&](const char* key, const std::vector<std::string>& list) {
    if (list.empty()) return;
    out << key << " = [";
    for (std::size_t i = 0; i < list.size(); ++i) out << (i ? ", " : "") << quoted(list[i]);
    out << "]\n";
  };
  std::vector<std::string> strategies;
  for (const Strategy st : g.strategies) strategies.push_back(to_string(st));
  names("strategies", strategies);
  names("hardware", plan.hardware_entries);  // preset names, or the files' resolved paths
  if (g.gpus > 0) out << "gpus = " << g.gpus << "\n";
  const PlanBudgets& b = plan.budgets;
  if (!std::isnan(b.max_overhead_fraction))
    out << "max_overhead_percent = " << toml_number(b.max_overhead_fraction * 100) << "\n";
  if (!std::isnan(b.max_pipeline_bytes))
    out << "max_pipeline_gb = " << toml_number(b.max_pipeline_bytes / 1e9) << "\n";
  if (!std::isnan(b.max_step_seconds))
    out << "max_step_seconds = " << toml_number(b.max_step_seconds) << "\n";
  out << "require_fit = " << (b.must_fit ? "true" : "false") << "\n";
}

void write_sweep(const SweepSpec& sweep, std::ostringstream& out) {
  out << "\n[[sweep]]\nname = " << quoted(sweep.name) << "\n";
  if (!sweep.title.empty()) out << "title = " << quoted(sweep.title) << "\n";
  // A named axis (strategy, hardware) as its names, a numeric one as its values.
  auto axis_values = [](const SweepAxis& axis) {
    if (axis.names.empty()) return values_array(axis.values);
    std::string text = "[";
    for (std::size_t i = 0; i < axis.names.size(); ++i)
      text += (i ? ", " : "") + quoted(axis.names[i]);
    return text + "]";
  };
  out << "x = " << quoted(sweep.x.parameter) << "\nvalues = " << axis_values(sweep.x) << "\n";
  if (sweep.y)
    out << "y = " << quoted(sweep.y->parameter) << "\ny_values = " << axis_values(*sweep.y) << "\n";
  out << "metrics = [";
  for (std::size_t i = 0; i < sweep.metrics.size(); ++i)
    out << (i ? ", " : "") << quoted(sweep.metrics[i]);
  out << "]\nlog_x = " << (sweep.log_x ? "true" : "false")
      << "\nlog_y = " << (sweep.log_y ? "true" : "false") << "\n";
  if (!sweep.overlay.empty()) out << "overlay = " << quoted(sweep.overlay) << "\n";
  if (!std::isnan(sweep.threshold)) out << "threshold = " << toml_number(sweep.threshold) << "\n";
  if (!sweep.claim.empty()) out << "claim = " << quoted(sweep.claim) << "\n";
  if (sweep.max_points != SweepSpec::kDefaultMaxSweepPoints)
    out << "max_points = " << sweep.max_points << "\n";
}

}  // namespace

std::string scenario_to_toml(const Scenario& s) {
  std::ostringstream out;
  out << "# Written by AttnRes Lab.\n";
  if (!s.title.empty()) out << "title = " << quoted(s.title) << "\n";
  if (!s.description.empty()) out << "description = " << quoted(s.description) << "\n";
  if (!s.model_source.empty()) out << "source = " << quoted(s.model_source) << "\n";
  out << "sections = [";
  for (std::size_t i = 0; i < s.sections.size(); ++i)
    out << (i ? ", " : "") << quoted(s.sections[i]);
  out << "]\n";
  if (s.has_model) write_cost_inputs(s.inputs, out);
  out << "\n[implementation]\nstrategy = " << quoted(to_string(s.strategy))
      << "\nmode = " << quoted(to_string(s.strategy_mode)) << "\n";
  if (!s.calibration_table.empty())
    out << "\n[calibration]\ntable = " << quoted(s.calibration_table.string()) << "\n";
  out << "\n[scaling]\ntarget_loss = " << toml_number(s.scaling.target_loss) << "\nloss_range = ["
      << toml_number(s.scaling.loss_from) << ", " << toml_number(s.scaling.loss_to) << "]\n";
  if (s.hardware) write_hardware(*s.hardware, out);
  if (s.training) write_training(*s.training, out);
  if (s.pipeline) write_pipeline(*s.pipeline, out);
  if (s.plan) write_plan(*s.plan, out);
  for (const auto& sweep : s.sweeps) write_sweep(sweep, out);
  return out.str();
}

}  // namespace attnres
