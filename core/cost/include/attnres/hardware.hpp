// Hardware presets for the time model (docs/math.md §3.4): peak bf16 FLOP/s, HBM bandwidth, link
// bandwidths per GPU and direction, link latency, and efficiency factors kept apart from the
// peaks. Presets live as TOML under resources/hardware/ and are compiled into the program, so
// `--hardware h100` works anywhere; a path to a TOML file of the same form works too.
#pragma once

#include <string>
#include <vector>

namespace attnres {

struct Hardware {
  std::string name;
  std::string source;               // where the figures come from
  double peak_flops = 0;            // FLOP/s, dense bf16
  double hbm_bandwidth = 0;         // bytes/s
  double intra_node_bandwidth = 0;  // bytes/s per GPU, one direction
  double scale_out_bandwidth = 0;   // bytes/s per GPU, one direction
  double link_latency = 0;          // seconds per transfer
  // The shortest time one kernel call takes however little it moves: launch and small-kernel
  // latency (docs/math.md §3.6), seconds.
  double kernel_floor = 4e-6;
  int gpus_per_node = 8;            // GPUs that share the intra-node (NVLink) domain
  double memory_bytes = 0;          // device memory per GPU; 0 = not given (no fit verdict)
  double compute_efficiency = 0.5;  // achieved / peak
  double memory_efficiency = 0.8;
  double link_efficiency = 0.8;
};

// Names of the built-in presets: a100, h100, h200, b200.
std::vector<std::string> hardware_preset_names();
// The preset's TOML text (for "show me the numbers"); throws attnres::Error for unknown names.
const std::string& hardware_preset_text(const std::string& name);
// Parses a preset; errors carry source:line:column.
Hardware parse_hardware(const std::string& text, const std::string& source);
// A preset name or a path to a TOML file.
Hardware load_hardware(const std::string& name_or_path);
// A preset as TOML text of the form parse_hardware reads (resources/hardware/*.toml): the
// `comments` first, each line as a '#' comment, then every field, numbers written so that they
// parse back to the same doubles. `attnres calibrate --measure --write-hardware` writes one.
std::string hardware_to_toml(const Hardware& hardware,
                             const std::vector<std::string>& comments = {});

}  // namespace attnres
