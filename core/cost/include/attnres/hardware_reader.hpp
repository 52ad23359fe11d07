// Reading a hardware description through the TOML reader (internal: for the cost library and the
// report layer's scenario reader): a preset file on its own, or a scenario's [hardware] table
// layered over a preset or a file (docs/scenarios.md).
#pragma once

#include <string>
#include <vector>

#include "attnres/hardware.hpp"
#include "attnres/toml_reader.hpp"

namespace attnres::detail {

// One table of keys; the first layer that has a key gives it (a scenario's overrides before the
// preset). `prefix` names keys in messages ("hardware."); `extra_keys` are keys the layer may hold
// that are not hardware keys (a scenario table's "preset" and "file").
struct HardwareLayer {
  const toml::table* table = nullptr;
  std::string prefix;
  std::vector<std::string> extra_keys;
};
// Every error names the file, line and column of the key it is about (its own file: the scenario
// for an override, the preset for the preset's keys); a missing key is reported at the first layer.
// `fallback_name` is the name when no layer gives one.
Hardware read_hardware_layers(const TomlReader& reader, const std::vector<HardwareLayer>& layers,
                              const std::string& fallback_name);

}  // namespace attnres::detail
