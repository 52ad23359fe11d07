// Internal to the report layer: the reader of scenario files (scenario.hpp has the schema), through
// the core's one typed TOML reader (toml_reader.hpp), so every error names file:line:column. One
// member function per table; they live by job in scenario_reader.cpp (the top level, [model],
// [sequence], [parallel], [scaling], [implementation], [calibration], [hardware], [moe],
// [pipeline]), scenario_train_reader.cpp ([train]) and scenario_sweep_reader.cpp ([[sweep]]).
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "attnres/scenario.hpp"
#include "attnres/toml_reader.hpp"

namespace attnres::detail {

class ScenarioReader : public TomlReader {
 public:
  explicit ScenarioReader(std::string source) : TomlReader(std::move(source)) {}

  // Every table of the file, in the order their errors are reported.
  Scenario read(const toml::table& root);

 private:
  // ---- scenario_reader.cpp
  // title, source, [implementation], [calibration] and description.
  void read_header(const toml::table& root, Scenario& s) const;
  // `sections`, or the default list.
  void read_sections(const toml::table& root, Scenario& s) const;
  // The training section follows the [train] table: added by default, an error without it.
  void check_training_section(const toml::table& root, Scenario& s) const;
  // [model], [sequence] and [parallel]: the cost inputs, resolved (an error points at the key it
  // is about). False when there is no [model] and the sections and sweeps need none.
  bool read_model(const toml::table& root, Scenario& s);
  // Reads the integer inputs of one table into `in` and remembers where each was, for later
  // range errors.
  void read_inputs(const toml::table& t, std::string_view section, CostInputs& in);
  void read_scaling(const toml::table& root, Scenario& s) const;
  void read_implementation(const toml::table& root, Scenario& s) const;
  void read_hardware(const toml::table& root, Scenario& s) const;
  void read_pipeline(const toml::table& root, Scenario& s) const;
  void read_plan(const toml::table& root, Scenario& s) const;
  // Adds the time and pipeline_sim sections by default; a listed section needs its table.
  void check_section_needs(const toml::table& root, Scenario& s) const;

  // ---- scenario_train_reader.cpp
  void read_training(const toml::table& root, Scenario& s) const;
  // The sizes, steps, lr, threads and save_models, each within its range.
  void read_training_settings(const toml::table& train, ScenarioTraining& t) const;
  // train.schemes (kept as written) and train.blocks; returns the schemes node, if any.
  const toml::node* read_training_schemes(const toml::table& train, ScenarioTraining& t) const;
  void check_training_schemes(const toml::node* schemes, const ScenarioTraining& t) const;
  void read_training_masks(const toml::table& train, ScenarioTraining& t) const;
  void read_training_seeds(const toml::table& train, ScenarioTraining& t) const;
  void check_training_heads(const toml::table& train, const ScenarioTraining& t) const;

  // ---- scenario_sweep_reader.cpp
  void read_sweeps(const toml::table& root, Scenario& s) const;
  SweepSpec read_sweep(const toml::table& t, const Scenario& s, std::set<std::string>& names) const;
  // A key [[sweep]] must have.
  const toml::node& sweep_key(const toml::table& t, const char* key) const;
  // name (unique, usable as a file name) and title.
  void read_sweep_name(const toml::table& t, std::set<std::string>& names, SweepSpec& spec) const;
  // x and values, y and y_values, and the max_points limit on the settings they make.
  void read_sweep_axes(const toml::table& t, const Scenario& s, SweepSpec& spec) const;
  // A sweep parameter ("blocks", ...) that this scenario can vary.
  std::string sweep_parameter(const toml::node& node, const char* what, const Scenario& s) const;
  // One axis: numbers (axis_values) or, for a named parameter, its names checked.
  SweepAxis sweep_axis(const std::string& parameter, const toml::node& values,
                       const std::string& name, const Scenario& s) const;
  std::vector<std::int64_t> axis_values(const toml::node& node, const std::string& name,
                                        const Scenario& scenario) const;
  // metrics (one unit), threshold and claim, log axes and the paper overlay.
  void read_sweep_metrics(const toml::table& t, const Scenario& s, SweepSpec& spec) const;

  std::map<std::string, toml::source_region> locations_;
  toml::source_region model_region_;
};

}  // namespace attnres::detail
