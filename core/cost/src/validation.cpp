// The validation suite (validation.hpp, docs/validation.md).
#include "attnres/validation.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "attnres/cost_input_fields.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/hardware.hpp"
#include "attnres/toml_reader.hpp"
#include "validation_runs.hpp"  // generated from resources/validation/training-runs.toml

namespace attnres {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Runs `set`; an engine error becomes one at the node's file:line:column.
template <typename Set>
void set_or_fail(const detail::TomlReader& reader, const toml::node& node, Set set) {
  try {
    set();
  } catch (const Error& error) {
    reader.fail(node.source(), error.what());
  }
}

// The cost inputs of one of the run's tables ([run.model], [run.parallel], [run.sequence]): any
// key of the engine's input table (cost_input_fields.hpp) in any of them.
void read_inputs(const detail::TomlReader& reader, const toml::table& table,
                 const std::string& prefix, CostInputs& in) {
  for (const auto& [key_node, node] : table) {
    const std::string key(key_node.str());
    const std::string name = prefix + key;
    if (find_cost_input_field(key)) {
      const std::int64_t value = reader.integer(node, name);
      set_or_fail(reader, node, [&] { set_cost_input(in, key, value); });
    } else if (const CostInputChoice* choice = find_cost_input_choice(key)) {
      const std::string value = reader.string(node, name);
      set_or_fail(reader, node, [&] { choice->set(in, value, name); });
    } else if (const CostInputList* list = find_cost_input_list(key)) {
      if (!node.is_array()) reader.fail(node.source(), name + " must be an array of integers");
      std::vector<std::int64_t>& values = in.*(list->member);
      values.clear();
      for (const auto& item : *node.as_array()) values.push_back(reader.integer(item, name));
    } else {
      reader.fail(node.source(),
                  "unknown key " + name + " (expected a cost input: docs/scenarios.md lists them)");
    }
  }
}

ValidationRun read_run(const detail::TomlReader& reader, const toml::table& t, std::size_t index) {
  const std::string prefix = "run[" + std::to_string(index) + "].";
  reader.check_keys(t, prefix, {"id",           "title",       "source",      "url",
                                "framework",    "hardware",    "gpus",        "measured_text",
                                "step_seconds", "derivation",  "memory_gib",  "memory_kind",
                                "memory_text",  "assumptions", "expressible", "not_expressible",
                                "model",        "parallel",    "sequence",    "schedule"});
  ValidationRun run;
  run.location = reader.location(t.source());
  auto text = [&](const char* key, std::string& out, bool required) {
    if (const toml::node* node = t.get(key)) {
      out = reader.string(*node, prefix + key);
    } else if (required) {
      reader.fail(t.source(), "missing '" + prefix + key + "' (a string)");
    }
  };
  text("id", run.id, true);
  text("title", run.title, true);
  text("source", run.source, true);
  text("url", run.url, false);
  text("framework", run.framework, true);
  text("hardware", run.hardware_name, true);
  text("measured_text", run.measured_text, true);
  text("derivation", run.derivation, false);
  text("assumptions", run.assumptions, false);
  text("memory_kind", run.memory_kind, false);
  text("memory_text", run.memory_text, false);
  text("not_expressible", run.not_expressible, false);
  if (const toml::node* node = t.get("gpus")) run.gpus = reader.integer(*node, prefix + "gpus");
  const toml::node* step = t.get("step_seconds");
  if (!step) reader.fail(t.source(), "missing '" + prefix + "step_seconds' (a number)");
  run.step_seconds = reader.number(*step, prefix + "step_seconds");
  if (!(run.step_seconds > 0)) reader.fail(step->source(), prefix + "step_seconds must be > 0");
  if (const toml::node* node = t.get("memory_gib")) {
    const double gib = reader.number(*node, prefix + "memory_gib");
    if (!(gib > 0)) reader.fail(node->source(), prefix + "memory_gib must be > 0");
    run.memory_bytes = gib * kGiB;
  }
  if (const toml::node* node = t.get("expressible"))
    run.expressible = reader.boolean(*node, prefix + "expressible");
  if (!run.expressible && run.not_expressible.empty())
    reader.fail(t.source(), prefix + "not_expressible must say why the run cannot be expressed");

  CostInputs in;
  in.block_size = 2;  // the runs have the standard residual: the block shape is not used
  for (const char* table : {"model", "parallel", "sequence"}) {
    if (const toml::table* sub = reader.table(t, table))
      read_inputs(reader, *sub, prefix + table + ".", in);
  }
  PipelineSettings& s = run.settings;
  s.mode = ResidualMode::standard;
  s.record_timeline = false;
  std::string schedule;
  if (const toml::table* sub = reader.table(t, "schedule")) {
    reader.check_keys(*sub, prefix + "schedule.",
                      {"global_batch", "microbatches", "schedule", "dtype"});
    if (const toml::node* node = sub->get("global_batch"))
      run.global_batch = reader.integer(*node, prefix + "schedule.global_batch");
    if (const toml::node* node = sub->get("microbatches"))
      s.microbatches = static_cast<int>(reader.integer(*node, prefix + "schedule.microbatches"));
    if (const toml::node* node = sub->get("schedule"))
      schedule = reader.string(*node, prefix + "schedule.schedule");
    if (const toml::node* node = sub->get("dtype")) {
      const std::string dtype = reader.string(*node, prefix + "schedule.dtype");
      // FP8 training keeps bf16 weights, gradients and activations; only the GEMMs run in FP8
      // (Transformer Engine), which the time model does not take: the run is timed at bf16.
      run.fp8 = dtype == "fp8";
      try {
        in.dtype = run.fp8 ? DType::bf16 : parse_dtype(dtype, prefix + "schedule.dtype");
      } catch (const Error& error) {
        reader.fail(node->source(), error.what());
      }
    }
  }
  try {
    s.hardware = load_hardware(run.hardware_name);
  } catch (const Error& error) {
    reader.fail(t.get("hardware")->source(), prefix + "hardware: " + error.what());
  }
  if (!run.expressible) return run;
  try {
    s.model = resolve_cost_inputs(in);
    s.schedule = schedule.empty() ? default_pipeline_schedule(s.model.vpp)
                                  : parse_pipeline_schedule(schedule, prefix + "schedule");
  } catch (const Error& error) {
    reader.fail(t.source(), prefix.substr(0, prefix.size() - 1) + ": " + error.what());
  }
  const std::int64_t world = s.model.tp * s.model.cp * s.model.dp * s.model.pp;
  if (run.gpus > 0 && world != run.gpus) {
    reader.fail(t.source(), prefix + "gpus = " + std::to_string(run.gpus) +
                                " but t·c·D·P = " + std::to_string(world));
  }
  return run;
}

// The prediction of the measured memory kind (validation.hpp).
double predicted_memory(const RankMemory& peak, const std::string& kind,
                        const MemoryAllowance& allowance) {
  if (kind == "max_allocated") return peak.tensors();
  if (kind == "max_reserved") return peak.tensors() * (1.0 + allowance.fragmentation);
  return peak.total();
}

}  // namespace

ValidationSuite parse_validation_suite(const std::string& text, const std::string& source) {
  const detail::TomlReader reader(source);
  const toml::table root = reader.parse(text);
  reader.check_keys(root, "", {"run"});
  const toml::node* runs = root.get("run");
  if (!runs || !runs->is_array_of_tables())
    reader.fail(runs ? runs->source() : root.source(), "expected [[run]] tables");
  ValidationSuite suite;
  suite.source = source;
  std::size_t index = 0;
  for (const auto& node : *runs->as_array()) {
    ValidationRun run = read_run(reader, *node.as_table(), index++);
    for (const ValidationRun& earlier : suite.runs) {
      if (earlier.id == run.id)
        reader.fail(node.as_table()->get("id")->source(),
                    "duplicate id \"" + run.id + "\" (first at " + earlier.location + ")");
    }
    suite.runs.push_back(std::move(run));
  }
  return suite;
}

const std::string& builtin_validation_text() {
  static const std::string text = kValidationRunsText;
  return text;
}

ValidationSuite builtin_validation_suite() {
  return parse_validation_suite(builtin_validation_text(), "training-runs.toml");
}

std::vector<ValidationResult> validate(const ValidationSuite& suite) {
  std::vector<ValidationResult> out;
  for (const ValidationRun& run : suite.runs) {
    ValidationResult r;
    r.run = &run;
    if (run.expressible) {
      try {
        const PipelineReport report = evaluate_pipeline(run.settings);
        r.evaluated = true;
        r.predicted_step_seconds = report.step_time_s;
        r.step_ratio = r.predicted_step_seconds / run.step_seconds;
        const RankMemory& peak = largest_rank(report.memory);
        r.fits = peak.fits();
        r.fit = fit_verdict(peak);
        if (run.memory_bytes) {
          r.predicted_memory_bytes =
              predicted_memory(peak, run.memory_kind, run.settings.allowance);
          r.memory_ratio = *r.predicted_memory_bytes / *run.memory_bytes;
        }
      } catch (const Cancelled&) {
        throw;
      } catch (const Error& error) {
        r.refused = error.what();
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

double error_factor(double ratio) {
  return ratio >= 1 ? ratio : 1.0 / ratio;
}

std::vector<ValidationSummary> validation_summaries(const std::vector<ValidationResult>& results) {
  // Regime -> the runs in it, in the order regimes first appear.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const ValidationResult*>> regimes;
  auto add = [&](const std::string& regime, const ValidationResult* r) {
    if (!regimes.count(regime)) order.push_back(regime);
    regimes[regime].push_back(r);
  };
  for (const ValidationResult& r : results) {
    if (!r.evaluated) continue;
    const ValidationRun& run = *r.run;
    add("all", &r);
    add(run.settings.model.experts > 0 ? "moe" : "dense", &r);
    add(run.hardware_name, &r);
    add(run.framework, &r);
    add(run.fp8 ? "fp8" : "bf16/fp16", &r);
  }
  std::vector<ValidationSummary> out;
  for (const char* quantity : {"step", "memory"}) {
    const bool step = std::string(quantity) == "step";
    for (const std::string& regime : order) {
      ValidationSummary s;
      s.regime = regime;
      s.quantity = quantity;
      double log_sum = 0;
      for (const ValidationResult* r : regimes[regime]) {
        if (!step && !r->memory_ratio) continue;
        const double ratio = step ? r->step_ratio : *r->memory_ratio;
        const double factor = error_factor(ratio);
        ++s.runs;
        log_sum += std::log(factor);
        if (factor > s.worst) {
          s.worst = factor;
          s.worst_id = r->run->id;
        }
        if (std::abs(ratio - 1) <= 0.2) ++s.within_20_percent;
        if (std::abs(ratio - 1) <= 0.3) ++s.within_30_percent;
      }
      if (s.runs == 0) continue;
      s.typical = std::exp(log_sum / s.runs);
      out.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace attnres
