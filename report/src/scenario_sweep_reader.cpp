// The [[sweep]] tables of a scenario file (docs/scenarios.md): a name that names files, one or two
// axes over the sweep parameters (values as a list, "divisors" or a {from, to, step|factor}
// range) within max_points settings, metrics of one unit, and the claim, log axes and overlay of
// its chart.
#include <cmath>
#include <filesystem>

#include "attnres/cost_metrics.hpp"
#include "attnres/error.hpp"
#include "attnres/output_dir.hpp"
#include "scenario_reader.hpp"

namespace attnres::detail {

void ScenarioReader::read_sweeps(const toml::table& root, Scenario& s) const {
  if (const toml::node* n = root.get("sweep")) {
    if (!n->is_array_of_tables()) fail(n->source(), "sweep must be written as [[sweep]] tables");
    std::set<std::string> names;
    for (const auto& item : *n->as_array())
      s.sweeps.push_back(read_sweep(*item.as_table(), s, names));
  }
}

SweepSpec ScenarioReader::read_sweep(const toml::table& t, const Scenario& s,
                                     std::set<std::string>& names) const {
  check_keys(t, "sweep.",
             {"name", "title", "x", "values", "y", "y_values", "metrics", "log_x", "log_y",
              "overlay", "threshold", "claim", "max_points"});
  SweepSpec spec;
  read_sweep_name(t, names, spec);
  read_sweep_axes(t, s, spec);
  read_sweep_metrics(t, s, spec);
  return spec;
}

const toml::node& ScenarioReader::sweep_key(const toml::table& t, const char* key) const {
  const toml::node* node = t.get(key);
  if (!node) fail(t.source(), std::string("[[sweep]] needs '") + key + "'");
  return *node;
}

void ScenarioReader::read_sweep_name(const toml::table& t, std::set<std::string>& names,
                                     SweepSpec& spec) const {
  const toml::node& name = sweep_key(t, "name");
  spec.name = string(name, "sweep.name");
  if (spec.name.empty() ||
      spec.name.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
          std::string::npos) {
    fail(name.source(), "sweep.name must be letters, digits, '_' or '-' (it names files), got '" +
                            spec.name + "'");
  }
  // The rules of every output name (length included), checked here so that a bad name fails with
  // its place in the file before any work.
  try {
    validate_output_name(spec.name, "sweep.name");
  } catch (const Error& error) {
    fail(name.source(), error.what());
  }
  if (!names.insert(spec.name).second)
    fail(name.source(), "duplicate sweep name '" + spec.name + "'");
  if (const toml::node* n = t.get("title")) spec.title = string(*n, "sweep.title");
}

std::string ScenarioReader::sweep_parameter(const toml::node& node, const char* what,
                                            const Scenario& s) const {
  std::string p = string(node, what);
  const std::string problem = sweep_parameter_problem(p, s.pipeline.has_value());
  if (!problem.empty()) fail(node.source(), std::string(what) + ": " + problem);
  return p;
}

SweepAxis ScenarioReader::sweep_axis(const std::string& parameter, const toml::node& values,
                                     const std::string& name, const Scenario& s) const {
  SweepAxis axis;
  axis.parameter = parameter;
  if (!is_named_sweep_parameter(parameter)) {
    axis.values = axis_values(values, name, s);
    return axis;
  }
  // Named values: strategies, or hardware presets and .toml files (relative to the scenario).
  if (!values.is_array() || values.as_array()->empty())
    fail(values.source(), name + ": '" + parameter + "' takes a non-empty array of names");
  std::vector<std::string> names;
  for (const auto& item : *values.as_array()) {
    std::string text = string(item, name + " entry");
    const bool file = text.find('/') != std::string::npos ||
                      (text.size() > 5 && text.substr(text.size() - 5) == ".toml");
    if (parameter == "hardware" && file && std::filesystem::path(text).is_relative())
      text = (std::filesystem::path(source()).parent_path() / text).string();
    try {
      named_sweep_axis(parameter, {text}, name);
    } catch (const Error& error) {
      // An error inside a hardware file names its own place (FILE:LINE:COLUMN): kept as it is,
      // not put under the scenario's place (two locations, the first the wrong file).
      const std::string message = error.what();
      if (const auto at = message.find(text + ":"); file && at != std::string::npos)
        throw Error(message.substr(at));
      fail(item.source(), message);
    }
    names.push_back(text);
  }
  return named_sweep_axis(parameter, std::move(names), name);
}

void ScenarioReader::read_sweep_axes(const toml::table& t, const Scenario& s,
                                     SweepSpec& spec) const {
  spec.x = sweep_axis(sweep_parameter(sweep_key(t, "x"), "sweep.x", s), sweep_key(t, "values"),
                      "sweep.values", s);
  if (const toml::node* y = t.get("y")) {
    const std::string parameter = sweep_parameter(*y, "sweep.y", s);
    const toml::node* values = t.get("y_values");
    if (!values) fail(y->source(), "sweep.y needs sweep.y_values");
    SweepAxis axis = sweep_axis(parameter, *values, "sweep.y_values", s);
    if (axis.parameter == spec.x.parameter) fail(y->source(), "sweep.y must differ from sweep.x");
    spec.y = axis;
  } else if (const toml::node* values = t.get("y_values")) {
    fail(values->source(), "sweep.y_values given without sweep.y");
  }
  const std::int64_t settings = static_cast<std::int64_t>(spec.x.values.size()) *
                                static_cast<std::int64_t>(spec.y ? spec.y->values.size() : 1);
  if (const toml::node* n = t.get("max_points")) {
    const std::int64_t limit = integer(*n, "sweep.max_points");
    if (limit < 1) fail(n->source(), "sweep.max_points must be >= 1, got " + std::to_string(limit));
    spec.max_points = static_cast<std::size_t>(limit);
  }
  if (settings > static_cast<std::int64_t>(spec.max_points)) {
    const toml::node* at = t.get("max_points") ? t.get("max_points") : t.get("values");
    fail(at ? at->source() : t.source(),
         "sweep '" + spec.name + "' has " + std::to_string(settings) +
             " settings, more than the limit of " + std::to_string(spec.max_points) +
             " (raise it with max_points = N in this [[sweep]])");
  }
}

std::vector<std::int64_t> ScenarioReader::axis_values(const toml::node& node,
                                                      const std::string& name,
                                                      const Scenario& scenario) const {
  std::vector<std::int64_t> values;
  if (node.is_string()) {
    const std::string text = node.as_string()->get();
    if (text != "divisors") {
      fail(node.source(), name +
                              ": expected an array of integers, \"divisors\" or a table "
                              "{from, to, step|factor}, got \"" +
                              text + "\"");
    }
    return divisors(scenario.inputs.sublayers);
  }
  if (node.is_array()) {
    for (const auto& item : *node.as_array()) values.push_back(integer(item, name + " entry"));
    if (values.empty()) fail(node.source(), name + " is empty");
    return values;
  }
  if (node.is_table()) {
    const toml::table& range = *node.as_table();
    check_keys(range, name + ".", {"from", "to", "step", "factor"});
    const toml::node* from = range.get("from");
    const toml::node* to = range.get("to");
    if (!from || !to) fail(node.source(), name + " needs 'from' and 'to'");
    const std::int64_t first = integer(*from, name + ".from");
    const std::int64_t last = integer(*to, name + ".to");
    if (last < first) fail(to->source(), name + ".to (" + std::to_string(last) + ") is below from");
    const toml::node* step = range.get("step");
    const toml::node* factor = range.get("factor");
    if ((step == nullptr) == (factor == nullptr)) {
      fail(node.source(), name + " needs exactly one of 'step' or 'factor'");
    }
    SweepRange bounds;
    bounds.from = first;
    bounds.to = last;
    if (step) {
      bounds.step = integer(*step, name + ".step");
      if (bounds.step < 1) fail(step->source(), name + ".step must be >= 1");
    } else {
      bounds.factor = integer(*factor, name + ".factor");
      if (bounds.factor < 2) fail(factor->source(), name + ".factor must be >= 2");
      if (first < 1) fail(from->source(), name + ".from must be >= 1 with a factor");
    }
    try {
      return expand_sweep_range(bounds, name);
    } catch (const Error& error) {
      fail(node.source(), error.what());
    }
  }
  fail(node.source(), name +
                          ": expected an array of integers, \"divisors\" or a table "
                          "{from, to, step|factor}, got " +
                          type_name(node));
}

void ScenarioReader::read_sweep_metrics(const toml::table& t, const Scenario& s,
                                        SweepSpec& spec) const {
  const toml::node& metrics = sweep_key(t, "metrics");
  if (!metrics.is_array() || metrics.as_array()->empty()) {
    fail(metrics.source(), "sweep.metrics must be a non-empty array of metric names");
  }
  std::string unit;
  for (const auto& item : *metrics.as_array()) {
    const std::string key = string(item, "sweep.metrics entry");
    const std::string problem = sweep_metric_problem(
        key, s.hardware.has_value() || sweeps_hardware(spec), s.pipeline.has_value(), unit);
    if (!problem.empty()) fail(item.source(), problem);
    const CostMetric* metric = find_cost_metric(key);
    if (unit.empty()) unit = metric->unit;
    spec.metrics.push_back(key);
  }
  if (const toml::node* n = t.get("threshold")) spec.threshold = number(*n, "sweep.threshold");
  if (const toml::node* n = t.get("claim")) {
    spec.claim = string(*n, "sweep.claim");
    if (std::isnan(spec.threshold)) fail(n->source(), "sweep.claim needs sweep.threshold");
  }
  if (const toml::node* n = t.get("log_x")) spec.log_x = boolean(*n, "sweep.log_x");
  if (const toml::node* n = t.get("log_y")) spec.log_y = boolean(*n, "sweep.log_y");
  if (const toml::node* n = t.get("overlay")) {
    spec.overlay = string(*n, "sweep.overlay");
    if (spec.overlay != "paper_fig6" && spec.overlay != "published_band") {
      fail(n->source(), "sweep.overlay must be \"paper_fig6\" or \"published_band\" (got \"" +
                            spec.overlay + "\")");
    }
    if (spec.x.parameter != "blocks" && spec.x.parameter != "block_size") {
      fail(n->source(), "overlay \"" + spec.overlay + "\" needs x = \"blocks\" or \"block_size\"");
    }
  }
}

}  // namespace attnres::detail
