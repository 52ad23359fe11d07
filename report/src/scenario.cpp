// Scenario files (scenario.hpp has the schema): the [train] table's model and schemes, the list
// of sections, and parse_scenario / load_scenario, which read through detail::ScenarioReader
// (scenario_reader.hpp). Writing a scenario back as TOML is in scenario_writer.cpp.
#include "attnres/scenario.hpp"

#include <algorithm>
#include <cmath>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/json_reading.hpp"
#include "scenario_reader.hpp"

namespace attnres {

ModelConfig ScenarioTraining::model_config() const {
  ModelConfig config;
  config.num_hidden_layers = layers;
  config.hidden_size = d_model;
  config.num_attention_heads = heads;
  config.num_key_value_heads = kv_heads > 0 ? kv_heads : heads;
  config.intermediate_size = ffn > 0 ? ffn : static_cast<int>(std::lround(8.0 * d_model / 3.0));
  config.vocab_size = 256;  // bytes (docs/training.md)
  return config;
}

std::string scheme_file_name(const std::string& spec) {
  std::string name = spec;
  for (char& c : name) {
    if (c == ':' || c == ',' || c == '=' || c == ' ') c = '_';
  }
  return name;
}

AttnResConfig ScenarioTraining::scheme_of(const std::string& spec) const {
  CostInputs sizes;
  sizes.sublayers = sublayers();
  sizes.d_model = d_model;
  sizes.block_size = std::min(4, sublayers());
  AttnResConfig scheme;
  try {
    scheme = parse_scheme_spec(spec, sizes);
  } catch (const Error& error) {
    throw Error("train.schemes entry '" + spec + "': " + error.what());
  }
  ModelConfig config = model_config();
  config.attn_res = scheme;
  config.validate("train.schemes entry '" + spec + "'");
  return scheme;
}

const std::vector<std::string>& scenario_sections() {
  static const std::vector<std::string> sections = {
      "io",          "history",      "prefill",  "pipeline",   "boundaries", "flops",  "scaling",
      "time",        "pipeline_sim", "training", "strategies", "decode",     "layout", "recompute",
      "calibration", "memory",       "step",     "decision",   "quality"};
  return sections;
}

Scenario parse_scenario(const std::string& text, const std::string& source) {
  detail::ScenarioReader reader(source);
  const toml::table root = reader.parse(text);
  Scenario scenario = reader.read(root);
  scenario.text = text;
  return scenario;
}

std::vector<std::filesystem::path> Scenario::files_read() const {
  std::vector<std::filesystem::path> files;
  if (!hardware_file.empty()) files.push_back(hardware_file);
  if (plan) {
    const std::vector<std::string> presets = hardware_preset_names();
    for (const auto& entry : plan->hardware_entries) {  // a preset's name or a file's path
      if (std::find(presets.begin(), presets.end(), entry) == presets.end())
        files.emplace_back(entry);
    }
  }
  if (!calibration_table.empty()) files.push_back(calibration_table);
  if (training) files.push_back(training->data_path);
  return files;
}

Scenario load_scenario(const std::filesystem::path& path) {
  return parse_scenario(read_document(path, "a scenario .toml file"), path.string());
}

}  // namespace attnres
