// Scenario files: TOML that says which model shape, sequence, parallelism and sweeps a report
// covers. Schema (every key optional unless marked; docs/scenarios.md has the full reference):
//
//   title = "Paper Table 1"                 # string
//   description = "..."                      # string, shown under the title
//   sections = ["io", "history"]             # io history prefill pipeline boundaries flops scaling
//   [model]      (required unless sections = ["scaling"] and there are no sweeps)
//                sublayers | layers (one required), d_model (required),
//                blocks | block_size (one required), streams = 4, ffn = round(8d/3)
//   [sequence]   tokens = 4096, batch = 1, dtype = "bf16", seq_shards = 1, chunk = 0
//   [parallel]   pp = 1, vpp = 1
//   [scaling]    target_loss = 1.695, loss_range = [1.6, 1.9]
//   [[sweep]]    name (required), title, x (required), values (required):
//                [1, 2, 4] | "divisors" (of L) | {from, to, step} | {from, to, factor};
//                y, y_values (a grid), metrics (required, one unit), log_x, log_y,
//                overlay = "paper_fig6"
//
// Every error names file:line:column and what was expected; unknown keys get a "did you mean".
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "attnres/cost.hpp"
#include "attnres/sweep.hpp"

namespace attnres {

struct ScenarioScaling {
  double target_loss = 1.695;
  double loss_from = 1.60, loss_to = 1.90;
};

struct Scenario {
  std::string source;  // file name, for messages
  std::string title;
  std::string description;
  bool has_model = false;  // [model] given; optional when only "scaling" is reported
  CostInputs inputs;   // resolved and validated (when has_model)
  std::vector<std::string> sections;
  std::vector<SweepSpec> sweeps;
  ScenarioScaling scaling;
};

const std::vector<std::string>& scenario_sections();

// Parses and validates; `source` prefixes every error ("source:line:column: ...").
Scenario parse_scenario(const std::string& text, const std::string& source);
Scenario load_scenario(const std::filesystem::path& path);

}  // namespace attnres
