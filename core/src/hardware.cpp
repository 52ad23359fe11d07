#include "attnres/hardware.hpp"

#include <filesystem>
#include <map>
#include <toml++/toml.h>

#include "attnres/atomic_file.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "hardware_presets.hpp"  // generated from resources/hardware/*.toml

namespace attnres {

std::vector<std::string> hardware_preset_names() {
  std::vector<std::string> names;
  for (const auto& preset : kHardwarePresets) names.emplace_back(preset.name);
  return names;
}

const std::string& hardware_preset_text(const std::string& name) {
  static const std::map<std::string, std::string> texts = [] {
    std::map<std::string, std::string> out;
    for (const auto& preset : kHardwarePresets) out.emplace(preset.name, preset.text);
    return out;
  }();
  auto it = texts.find(name);
  if (it == texts.end()) {
    const std::string hint = did_you_mean(name, hardware_preset_names());
    std::string list;
    for (const auto& n : hardware_preset_names()) list += (list.empty() ? "" : ", ") + n;
    throw Error("unknown hardware preset '" + name + "'" +
                (hint.empty() ? "" : " (did you mean '" + hint + "'?)") + "; presets: " + list +
                ", or give a path to a .toml file");
  }
  return it->second;
}

Hardware parse_hardware(const std::string& text, const std::string& source) {
  toml::table root;
  auto location = [&](const toml::source_region& where) {
    return source + ":" + std::to_string(where.begin.line) + ":" + std::to_string(where.begin.column);
  };
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& error) {
    throw Error(location(error.source()) + ": TOML syntax error: " + std::string(error.description()));
  }
  const std::vector<std::string> keys = {"name", "source", "peak_bf16_flops", "hbm_bandwidth",
                                         "intra_node_bandwidth", "scale_out_bandwidth",
                                         "link_latency", "gpus_per_node", "efficiency"};
  for (auto&& [key, node] : root) {
    const std::string name(key.str());
    if (std::find(keys.begin(), keys.end(), name) == keys.end()) {
      const std::string hint = did_you_mean(name, keys);
      throw Error(location(key.source()) + ": unknown key '" + name + "'" +
                  (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
    }
  }
  Hardware hw;
  auto number = [&](const toml::table& table, const char* key, double& out, bool required,
                    double minimum_exclusive, double maximum) {
    const toml::node* node = table.get(key);
    if (!node) {
      if (required) throw Error(location(table.source()) + ": missing '" + key + "' (a number)");
      return;
    }
    if (node->is_integer()) {
      out = static_cast<double>(node->as_integer()->get());
    } else if (node->is_floating_point()) {
      out = node->as_floating_point()->get();
    } else {
      throw Error(location(node->source()) + ": " + key + " must be a number");
    }
    if (!(out > minimum_exclusive) || !(out <= maximum)) {
      throw Error(location(node->source()) + ": " + key + " must be in (" +
                  format_number(minimum_exclusive) + ", " + format_number(maximum) + "], got " +
                  format_number(out));
    }
  };
  auto string = [&](const char* key, std::string& out) {
    if (const toml::node* node = root.get(key)) {
      if (!node->is_string()) throw Error(location(node->source()) + ": " + key + " must be a string");
      out = node->as_string()->get();
    }
  };
  string("name", hw.name);
  string("source", hw.source);
  constexpr double kHuge = 1e30;
  number(root, "peak_bf16_flops", hw.peak_flops, true, 0, kHuge);
  number(root, "hbm_bandwidth", hw.hbm_bandwidth, true, 0, kHuge);
  number(root, "intra_node_bandwidth", hw.intra_node_bandwidth, true, 0, kHuge);
  number(root, "scale_out_bandwidth", hw.scale_out_bandwidth, true, 0, kHuge);
  hw.link_latency = 0;
  if (const toml::node* node = root.get("link_latency")) {
    if (!node->is_number()) throw Error(location(node->source()) + ": link_latency must be a number");
    hw.link_latency = node->value<double>().value_or(0);
    if (!(hw.link_latency >= 0) || hw.link_latency > 1) {
      throw Error(location(node->source()) + ": link_latency must be in [0, 1] seconds");
    }
  }
  if (const toml::node* node = root.get("gpus_per_node")) {
    if (!node->is_integer() || node->as_integer()->get() < 1 || node->as_integer()->get() > 1'000'000) {
      throw Error(location(node->source()) + ": gpus_per_node must be a positive integer");
    }
    hw.gpus_per_node = static_cast<int>(node->as_integer()->get());
  }
  if (const toml::node* node = root.get("efficiency")) {
    if (!node->is_table()) throw Error(location(node->source()) + ": efficiency must be a table");
    const toml::table& efficiency = *node->as_table();
    for (auto&& [key, value] : efficiency) {
      const std::string name(key.str());
      if (name != "compute" && name != "memory" && name != "link") {
        throw Error(location(key.source()) + ": unknown key 'efficiency." + name +
                    "' (expected compute, memory, link)");
      }
    }
    number(efficiency, "compute", hw.compute_efficiency, false, 0, 1);
    number(efficiency, "memory", hw.memory_efficiency, false, 0, 1);
    number(efficiency, "link", hw.link_efficiency, false, 0, 1);
  }
  if (hw.name.empty()) hw.name = source;
  return hw;
}

Hardware load_hardware(const std::string& name_or_path) {
  for (const auto& preset : kHardwarePresets) {
    if (name_or_path == preset.name) return parse_hardware(preset.text, std::string("preset ") + preset.name);
  }
  if (std::filesystem::exists(name_or_path) || name_or_path.find('/') != std::string::npos ||
      name_or_path.ends_with(".toml")) {
    return parse_hardware(read_file(name_or_path), name_or_path);
  }
  hardware_preset_text(name_or_path);  // throws the "unknown preset" message
  return {};
}

}  // namespace attnres
