#include "attnres/hardware.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/json_reading.hpp"
#include "hardware_presets.hpp"  // generated from resources/hardware/*.toml
#include "attnres/hardware_reader.hpp"

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

namespace detail {

Hardware read_hardware_layers(const TomlReader& reader, const std::vector<HardwareLayer>& layers,
                              const std::string& fallback_name) {
  const std::vector<std::string> keys = {"name",
                                         "source",
                                         "peak_bf16_flops",
                                         "hbm_bandwidth",
                                         "intra_node_bandwidth",
                                         "scale_out_bandwidth",
                                         "link_latency",
                                         "kernel_floor",
                                         "gpus_per_node",
                                         "memory_bytes",
                                         "efficiency"};
  for (const auto& layer : layers) {
    std::vector<std::string> allowed = keys;
    allowed.insert(allowed.end(), layer.extra_keys.begin(), layer.extra_keys.end());
    reader.check_keys(*layer.table, layer.prefix, allowed);
  }
  // The first layer's node for `key` (with `sub`: for efficiency.sub), and its name as that layer
  // spells it ("hardware.hbm_bandwidth" in a scenario, "hbm_bandwidth" in a preset).
  struct Found {
    const toml::node* node = nullptr;
    std::string name;
  };
  auto get = [&](const char* key, const char* sub = nullptr) {
    for (const auto& layer : layers) {
      const toml::node* node = layer.table->get(key);
      if (!node) continue;
      if (!sub) return Found{node, layer.prefix + key};
      if (!node->is_table()) reader.fail(node->source(), layer.prefix + key + " must be a table");
      reader.check_keys(*node->as_table(), layer.prefix + key + ".", {"compute", "memory", "link"});
      if (const toml::node* inner = node->as_table()->get(sub))
        return Found{inner, layer.prefix + key + "." + sub};
    }
    return Found{nullptr,
                 layers.front().prefix + key + (sub ? std::string(".") + sub : std::string())};
  };
  Hardware hw;
  auto number = [&](const char* key, const char* sub, double& out, bool required,
                    double minimum_exclusive, double maximum) {
    const Found found = get(key, sub);
    if (!found.node) {
      if (required)
        reader.fail(layers.front().table->source(), "missing '" + found.name + "' (a number)");
      return;
    }
    out = reader.number(*found.node, found.name);
    if (!(out > minimum_exclusive) || !(out <= maximum)) {
      reader.fail(found.node->source(),
                  found.name + " must be in (" + format_number(minimum_exclusive) + ", " +
                      format_number(maximum) + "], got " + format_number(out));
    }
  };
  if (const Found found = get("name"); found.node) hw.name = reader.string(*found.node, found.name);
  if (const Found found = get("source"); found.node)
    hw.source = reader.string(*found.node, found.name);
  constexpr double kHuge = 1e30;
  number("peak_bf16_flops", nullptr, hw.peak_flops, true, 0, kHuge);
  number("hbm_bandwidth", nullptr, hw.hbm_bandwidth, true, 0, kHuge);
  number("intra_node_bandwidth", nullptr, hw.intra_node_bandwidth, true, 0, kHuge);
  number("scale_out_bandwidth", nullptr, hw.scale_out_bandwidth, true, 0, kHuge);
  hw.link_latency = 0;
  if (const Found found = get("link_latency"); found.node) {
    hw.link_latency = reader.number(*found.node, found.name);
    if (!(hw.link_latency >= 0) || hw.link_latency > 1) {
      reader.fail(found.node->source(), found.name + " must be in [0, 1] seconds");
    }
  }
  if (const Found found = get("kernel_floor"); found.node) {
    hw.kernel_floor = reader.number(*found.node, found.name);
    if (!(hw.kernel_floor >= 0) || hw.kernel_floor > 1) {
      reader.fail(found.node->source(), found.name + " must be in [0, 1] seconds");
    }
  }
  if (const Found found = get("gpus_per_node"); found.node) {
    const std::int64_t gpus = reader.integer(*found.node, found.name);
    if (gpus < 1 || gpus > 1'000'000)
      reader.fail(found.node->source(), found.name + " must be a positive integer");
    hw.gpus_per_node = static_cast<int>(gpus);
  }
  number("memory_bytes", nullptr, hw.memory_bytes, false, 0, kHuge);
  number("efficiency", "compute", hw.compute_efficiency, false, 0, 1);
  number("efficiency", "memory", hw.memory_efficiency, false, 0, 1);
  number("efficiency", "link", hw.link_efficiency, false, 0, 1);
  if (hw.name.empty()) hw.name = fallback_name;
  return hw;
}

}  // namespace detail

Hardware parse_hardware(const std::string& text, const std::string& source) {
  const detail::TomlReader reader(source);
  const toml::table root = reader.parse(text);
  return detail::read_hardware_layers(reader, {detail::HardwareLayer{&root, "", {}}}, source);
}

Hardware load_hardware(const std::string& name_or_path) {
  for (const auto& preset : kHardwarePresets) {
    if (name_or_path == preset.name)
      return parse_hardware(preset.text, std::string("preset ") + preset.name);
  }
  if (std::filesystem::exists(name_or_path) || name_or_path.find('/') != std::string::npos ||
      name_or_path.ends_with(".toml")) {
    return parse_hardware(read_document(name_or_path, "a hardware .toml file"), name_or_path);
  }
  hardware_preset_text(name_or_path);  // throws the "unknown preset" message
  return {};
}

namespace {

// A TOML basic string.
std::string toml_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

// A TOML float that parses back to `value` (17 significant digits, always with '.' or 'e').
std::string toml_float(double value) {
  if (!std::isfinite(value)) throw Error("a hardware preset holds finite numbers only");
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", value);
  std::string out = text;
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

}  // namespace

std::string hardware_to_toml(const Hardware& hw, const std::vector<std::string>& comments) {
  std::string out;
  for (const auto& comment : comments) {
    std::size_t start = 0;
    while (true) {
      const std::size_t end = comment.find('\n', start);
      out.append("# ").append(comment.substr(start, end - start)).append("\n");
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  auto line = [&](const char* key, const std::string& value) {
    out.append(key).append(" = ").append(value).append("\n");
  };
  line("name", toml_string(hw.name));
  line("source", toml_string(hw.source));
  line("peak_bf16_flops", toml_float(hw.peak_flops));
  line("hbm_bandwidth", toml_float(hw.hbm_bandwidth));
  line("intra_node_bandwidth", toml_float(hw.intra_node_bandwidth));
  line("scale_out_bandwidth", toml_float(hw.scale_out_bandwidth));
  line("link_latency", toml_float(hw.link_latency));
  line("kernel_floor", toml_float(hw.kernel_floor));
  line("gpus_per_node", std::to_string(hw.gpus_per_node));
  if (hw.memory_bytes > 0) line("memory_bytes", toml_float(hw.memory_bytes));
  out += "\n[efficiency]\n";
  line("compute", toml_float(hw.compute_efficiency));
  line("memory", toml_float(hw.memory_efficiency));
  line("link", toml_float(hw.link_efficiency));
  return out;
}

}  // namespace attnres
