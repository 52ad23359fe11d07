// Scenario files, the top level and the tables of the cost inputs (scenario.hpp has the schema):
// which tables a file may have, its sections, [model], [sequence] and [parallel] resolved into the
// cost inputs, [scaling], [implementation], [calibration], [hardware] (a preset or file with this
// table's overrides), [moe] and [pipeline] (checked by running it once). [train] and [[sweep]]
// are read in scenario_train_reader.cpp and scenario_sweep_reader.cpp.
#include "scenario_reader.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <tuple>

#include "attnres/atomic_file.hpp"
#include "attnres/cost_input_fields.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/hardware_reader.hpp"
#include "attnres/json_reading.hpp"

namespace attnres::detail {

Scenario ScenarioReader::read(const toml::table& root) {
  Scenario s;
  s.source = source();
  check_keys(root, "",
             {"title", "description", "source", "sections", "model", "sequence", "parallel",
              "scaling", "sweep", "hardware", "attention", "moe", "pipeline", "train",
              "implementation", "calibration", "plan"});
  read_header(root, s);
  read_sections(root, s);
  read_scaling(root, s);
  read_training(root, s);
  check_training_section(root, s);
  if (!read_model(root, s)) return s;
  read_hardware(root, s);
  read_pipeline(root, s);
  read_plan(root, s);
  check_section_needs(root, s);
  read_sweeps(root, s);
  return s;
}

void ScenarioReader::read_header(const toml::table& root, Scenario& s) const {
  if (const toml::node* n = root.get("title")) s.title = string(*n, "title");
  if (const toml::node* n = root.get("source")) s.model_source = string(*n, "source");
  read_implementation(root, s);
  if (const toml::node* n = root.get("description")) s.description = string(*n, "description");
}

void ScenarioReader::read_sections(const toml::table& root, Scenario& s) const {
  if (const toml::node* n = root.get("sections")) {
    if (!n->is_array()) fail(n->source(), "sections must be an array of strings");
    for (const auto& item : *n->as_array()) {
      const std::string name = string(item, "sections entry");
      const auto& known = scenario_sections();
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        const std::string hint = did_you_mean(name, known);
        fail(item.source(), "unknown section '" + name + "'" +
                                (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
      }
      s.sections.push_back(name);
    }
  } else {
    s.sections = {"io", "history", "prefill", "pipeline", "boundaries", "flops"};
  }
}

void ScenarioReader::check_training_section(const toml::table& root, Scenario& s) const {
  if (s.training && !root.get("sections")) s.sections.push_back("training");
  if (!s.training &&
      std::find(s.sections.begin(), s.sections.end(), "training") != s.sections.end()) {
    fail(root.get("sections")->source(), "section 'training' needs a [train] table");
  }
}

bool ScenarioReader::read_model(const toml::table& root, Scenario& s) {
  const bool only_scaling = std::all_of(
      s.sections.begin(), s.sections.end(),
      [](const std::string& x) { return x == "scaling" || x == "training" || x == "calibration"; });
  const toml::table* model = table(root, "model");
  if (!model) {
    if (only_scaling && !root.get("sweep")) return false;
    fail(root.source(),
         "missing table [model] (sublayers or layers, d_model, blocks or block_size)");
  }
  s.has_model = true;
  CostInputs& in = s.inputs;
  // Every input comes from the one table of cost inputs (cost_input_fields.hpp): [model],
  // [attention], [moe], [sequence] and [parallel], integers, choices and lists.
  model_region_ = model->source();
  for (const std::string_view section : kCostInputSections) {
    const toml::table* t = section == "model" ? model : table(root, std::string(section).c_str());
    if (!t) continue;
    const std::string prefix = std::string(section) + ".";
    check_keys(*t, prefix, cost_input_section_keys(section));
    read_inputs(*t, section, in);
    for (const auto& choice : cost_input_choices()) {
      if (choice.section != section) continue;
      if (const toml::node* n = t->get(std::string(choice.key))) {
        const std::string where = prefix + std::string(choice.key);
        const std::string value = string(*n, where);  // names its place itself: outside the try
        try {
          choice.set(in, value, where);
        } catch (const Error& error) {
          fail(n->source(), error.what());
        }
        locations_[std::string(choice.key)] = n->source();
      }
    }
    for (const auto& list : cost_input_lists()) {
      if (list.section != section) continue;
      const std::string key(list.key);
      if (const toml::node* n = t->get(key)) {
        if (!n->is_array()) fail(n->source(), prefix + key + " must be an array of integers");
        for (const auto& item : *n->as_array())
          (in.*list.member).push_back(integer(item, prefix + key + " entry"));
        locations_[key] = n->source();
      }
    }
  }
  try {
    in = resolve_cost_inputs(in);
  } catch (const CostInputError& error) {
    // The key the user wrote: the field itself, else the other way to give it (blocks for a
    // block_size problem, layers for sublayers), else the [model] table.
    std::vector<std::string> keys = {error.field};
    if (const CostInputField* field = find_cost_input_field(error.field);
        field && !field->alternative.empty())
      keys.emplace_back(field->alternative);
    if (error.field == "blocks" || error.field == "block_size" || error.field == "block_layers") {
      for (const char* key : {"blocks", "block_size", "block_layers", "block_sizes"})
        keys.emplace_back(key);
    }
    for (const auto& key : keys) {
      if (auto it = locations_.find(key); it != locations_.end()) {
        // The message names the key as the file spells it ("moe.active: ...").
        const std::string section(cost_input_section(key));
        fail(it->second, section.empty() || section == "model"
                             ? std::string(error.what())
                             : section + "." + key + ": " + error.what());
      }
    }
    fail(model_region_, error.what());
  }
  return true;
}

void ScenarioReader::read_inputs(const toml::table& t, std::string_view section, CostInputs& in) {
  for (const auto& field : cost_input_fields()) {
    if (field.section != section) continue;
    const std::string key(field.key);
    if (const toml::node* node = t.get(key)) {
      in.*field.member = integer(*node, std::string(section) + "." + key);
      locations_[key] = node->source();
    }
  }
}

void ScenarioReader::read_scaling(const toml::table& root, Scenario& s) const {
  const toml::table* scaling = table(root, "scaling");
  if (!scaling) return;
  check_keys(*scaling, "scaling.", {"target_loss", "loss_range"});
  if (const toml::node* n = scaling->get("target_loss")) {
    s.scaling.target_loss = number(*n, "scaling.target_loss");
    if (!(s.scaling.target_loss > 0)) fail(n->source(), "scaling.target_loss must be > 0");
  }
  if (const toml::node* n = scaling->get("loss_range")) {
    if (!n->is_array() || n->as_array()->size() != 2) {
      fail(n->source(), "scaling.loss_range must be [low, high]");
    }
    s.scaling.loss_from = number(*n->as_array()->get(0), "scaling.loss_range[0]");
    s.scaling.loss_to = number(*n->as_array()->get(1), "scaling.loss_range[1]");
    if (!(0 < s.scaling.loss_from && s.scaling.loss_from < s.scaling.loss_to)) {
      fail(n->source(), "scaling.loss_range must satisfy 0 < low < high");
    }
  }
}

void ScenarioReader::read_implementation(const toml::table& root, Scenario& s) const {
  if (const toml::table* impl = table(root, "implementation")) {
    check_keys(*impl, "implementation.", {"strategy", "mode"});
    if (const toml::node* n = impl->get("strategy")) {
      const std::string name = string(*n, "implementation.strategy");
      try {
        s.strategy = parse_strategy(name, "implementation.strategy");
      } catch (const Error& error) {
        fail(n->source(), error.what());
      }
    }
    if (const toml::node* n = impl->get("mode")) {
      const std::string mode = string(*n, "implementation.mode");
      if (mode != "block" && mode != "full")
        fail(n->source(),
             "implementation.mode: expected \"block\" or \"full\", got \"" + mode + "\"");
      s.strategy_mode = mode == "full" ? ResidualMode::full : ResidualMode::block;
    }
  }
  if (const toml::table* calibration = table(root, "calibration")) {
    check_keys(*calibration, "calibration.", {"table"});
    if (const toml::node* n = calibration->get("table")) {
      std::filesystem::path path = string(*n, "calibration.table");
      if (path.is_relative()) path = std::filesystem::path(source()).parent_path() / path;
      s.calibration_table = path;
    }
  }
}

void ScenarioReader::read_hardware(const toml::table& root, Scenario& s) const {
  const toml::table* hw = table(root, "hardware");
  if (!hw) return;
  const toml::node* preset = hw->get("preset");
  const toml::node* file = hw->get("file");
  if (preset && file) {
    fail(file->source(), "[hardware] takes preset or file, not both");
  }
  // This table's keys layered over the preset's or the file's (or alone): each error points
  // into the file that holds the key (hardware_reader.hpp).
  toml::table base;
  std::vector<detail::HardwareLayer> layers = {{hw, "hardware.", {"preset", "file"}}};
  // Read outside the try: a key of the wrong type names its place itself (once).
  const std::string name = preset ? string(*preset, "hardware.preset") : std::string();
  std::filesystem::path path = file ? string(*file, "hardware.file") : std::string();
  try {
    if (preset) {
      base = detail::TomlReader("preset " + name).parse(hardware_preset_text(name));
    } else if (file) {
      if (path.is_relative()) path = std::filesystem::path(source()).parent_path() / path;
      s.hardware_file = path;
      base = detail::TomlReader(path.string()).parse(read_document(path, "a hardware .toml file"));
    }
  } catch (const Error& error) {
    const std::string message = error.what();
    // A syntax error inside the file already names its place; a missing file or preset does not.
    if (file && message.find("TOML syntax error") != std::string::npos) throw;
    fail((preset ? preset : file)->source(), message);
  }
  if (preset || file) layers.push_back({&base, "", {}});
  s.hardware = detail::read_hardware_layers(*this, layers, "hardware");
}

void ScenarioReader::read_pipeline(const toml::table& root, Scenario& s) const {
  const toml::table* pipe = table(root, "pipeline");
  if (!pipe) return;
  check_keys(*pipe, "pipeline.",
             {"microbatches", "schedule", "cache", "mode", "overlap", "overlap_comm", "ideal_links",
              "link", "link_bandwidth"});
  PipelineSettings p;
  p.schedule = default_pipeline_schedule(s.inputs.vpp);
  if (const toml::node* n = pipe->get("microbatches")) {
    const std::int64_t m = integer(*n, "pipeline.microbatches");
    // Its range is the core's rule (pipeline_settings_problem, below); only the int conversion
    // here.
    p.microbatches = static_cast<int>(std::clamp<std::int64_t>(m, std::numeric_limits<int>::min(),
                                                               std::numeric_limits<int>::max()));
  }
  auto choice = [&](const char* key, auto parse) {
    const toml::node* n = pipe->get(key);
    if (!n) return;
    const std::string value = string(*n, std::string("pipeline.") + key);
    try {
      parse(value);
    } catch (const Error& error) {
      fail(n->source(), error.what());
    }
  };
  choice("schedule", [&](const std::string& t) {
    p.schedule = parse_pipeline_schedule(t, "pipeline.schedule");
  });
  choice("cache", [&](const std::string& t) { p.cache = parse_cache_policy(t, "pipeline.cache"); });
  choice("mode", [&](const std::string& t) { p.mode = parse_residual_mode(t, "pipeline.mode"); });
  choice("overlap_comm", [&](const std::string& t) {
    p.comm_overlap = parse_comm_overlap(t, "pipeline.overlap_comm");
  });
  choice("link", [&](const std::string& t) {
    p.link = parse_enum(kPipelineLinkNames, t, "pipeline.link", "unknown link");
  });
  if (const toml::node* n = pipe->get("overlap")) p.overlap = boolean(*n, "pipeline.overlap");
  if (const toml::node* n = pipe->get("ideal_links"))
    p.ideal_links = boolean(*n, "pipeline.ideal_links");
  if (const toml::node* n = pipe->get("link_bandwidth")) {
    p.link_bandwidth = number(*n, "pipeline.link_bandwidth");
    if (!(p.link_bandwidth > 0))
      fail(n->source(), "pipeline.link_bandwidth must be > 0 bytes/s (or set ideal_links = true)");
  }
  p.model = s.inputs;
  p.strategy = s.strategy;  // [implementation] (read before)
  if (const auto problem = pipeline_settings_problem(p)) {
    const toml::node* node = pipe->get(problem->field);
    fail(node ? node->source() : pipe->source(),
         "pipeline." + problem->field + ": " + problem->message);
  }
  if (!s.hardware) {
    fail(pipe->source(), "[pipeline] needs [hardware]: chunk times come from its roofline model");
  }
  p.hardware = *s.hardware;
  p.record_timeline = false;
  try {
    evaluate_pipeline(p);
  } catch (const Error& error) {
    fail(pipe->source(), error.what());
  }
  s.pipeline = p;
}

void ScenarioReader::read_plan(const toml::table& root, Scenario& s) const {
  const toml::table* t = table(root, "plan");
  if (!t) return;
  check_keys(*t, "plan.",
             {"blocks", "tp", "cp", "ep", "pp", "vpp", "strategies", "hardware", "gpus",
              "max_overhead_percent", "max_pipeline_gb", "max_step_seconds", "require_fit"});
  if (!s.pipeline) {
    fail(t->source(), "[plan] simulates training steps and needs a [pipeline] table");
  }
  ScenarioPlan plan;
  PlanGrid& g = plan.grid;
  auto array = [&](const char* key) -> const toml::array* {
    const toml::node* n = t->get(key);
    if (!n) return nullptr;
    if (!n->is_array()) fail(n->source(), std::string("plan.") + key + " must be an array");
    return n->as_array();
  };
  for (const auto& [key, into] :
       {std::pair{"blocks", &g.blocks}, std::pair{"tp", &g.tp}, std::pair{"cp", &g.cp},
        std::pair{"ep", &g.ep}, std::pair{"pp", &g.pp}, std::pair{"vpp", &g.vpp}}) {
    if (const toml::array* a = array(key)) {
      for (const auto& item : *a) {
        const std::int64_t v = integer(item, std::string("plan.") + key + " entry");
        if (v < 1) fail(item.source(), std::string("plan.") + key + " values must be >= 1");
        into->push_back(v);
      }
    }
  }
  if (g.blocks.empty()) g.blocks = plan_default_blocks(s.inputs.sublayers);
  if (const toml::array* a = array("strategies")) {
    for (const auto& item : *a) {
      const std::string name = string(item, "plan.strategies entry");
      try {
        g.strategies.push_back(parse_strategy(name, "plan.strategies"));
      } catch (const Error& error) {
        fail(item.source(), error.what());
      }
    }
  }
  if (const toml::array* a = array("hardware")) {
    for (const auto& item : *a) {
      // A preset name, or a .toml file relative to the scenario's directory.
      std::string name = string(item, "plan.hardware entry");
      const bool file = name.find('/') != std::string::npos ||
                        (name.size() > 5 && name.substr(name.size() - 5) == ".toml");
      if (file && std::filesystem::path(name).is_relative())
        name = (std::filesystem::path(source()).parent_path() / name).string();
      try {
        g.hardware.push_back(load_hardware(name));
        plan.hardware_entries.push_back(name);
      } catch (const Error& error) {
        // An error inside a hardware file names its own place (FILE:LINE:COLUMN): kept as it is,
        // not put under the scenario's place (two locations, the first the wrong file).
        const std::string message = error.what();
        if (file && message.rfind(name + ":", 0) == 0) throw;
        fail(item.source(), "plan.hardware: " + message);
      }
    }
  }
  if (const toml::node* n = t->get("gpus")) {
    g.gpus = integer(*n, "plan.gpus");
    if (g.gpus < 1) fail(n->source(), "plan.gpus must be >= 1");
  }
  auto positive = [&](const char* key, double scale, double& into) {
    const toml::node* n = t->get(key);
    if (!n) return;
    const double v = number(*n, std::string("plan.") + key);
    if (!(v > 0) || !std::isfinite(v))
      fail(n->source(), std::string("plan.") + key + " must be > 0");
    into = v * scale;
  };
  positive("max_overhead_percent", 0.01, plan.budgets.max_overhead_fraction);
  positive("max_pipeline_gb", 1e9, plan.budgets.max_pipeline_bytes);
  positive("max_step_seconds", 1.0, plan.budgets.max_step_seconds);
  if (const toml::node* n = t->get("require_fit"))
    plan.budgets.must_fit = boolean(*n, "plan.require_fit");
  if (std::string problem = plan_grid_problem(g); !problem.empty())
    fail(t->source(), "[plan]: " + problem);
  if (std::string problem = plan_budgets_problem(plan.budgets); !problem.empty())
    fail(t->source(), "[plan]: " + problem);
  s.plan = plan;
}

void ScenarioReader::check_section_needs(const toml::table& root, Scenario& s) const {
  if (!root.get("sections")) {
    if (s.hardware) s.sections.push_back("time");
    if (s.pipeline) s.sections.push_back("pipeline_sim");
    if (s.pipeline) s.sections.push_back("step");
    if (s.plan) s.sections.push_back("decision");
  }
  for (const auto& section : s.sections) {
    const bool needs_hardware =
        section == "time" || section == "strategies" || section == "decode" || section == "memory";
    const bool needs_pipeline = section == "pipeline_sim" || section == "step";
    if ((needs_hardware && !s.hardware) || (needs_pipeline && !s.pipeline) ||
        (section == "decision" && !s.plan)) {
      fail(root.get("sections")->source(),
           "section '" + section + "' needs " +
               (needs_hardware   ? "[hardware]"
                : needs_pipeline ? "a [pipeline] table"
                                 : "a [plan] table (and [pipeline])"));
    }
  }
}

}  // namespace attnres::detail
