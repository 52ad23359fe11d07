// Scenario files: TOML that says which model shape, sequence, parallelism and sweeps a report
// covers. Schema (every key optional unless marked; docs/scenarios.md has the full reference):
//
//   title = "Paper Table 1"                 # string
//   description = "..."                      # string, shown under the title
//   source = "..."                           # where the model shape comes from (presets)
//   sections = ["io", "history"]             # io history prefill pipeline boundaries flops scaling
//   [model]      (required unless sections = ["scaling"] and there are no sweeps)
//                sublayers | layers (one required), d_model (required),
//                blocks | block_size | block_layers | block_sizes = [6, 6, 4] (one required),
//                streams = 4, ffn = round(8d/3)
//   [sequence]   tokens = 4096, batch = 1, dtype = "bf16", seq_shards = 1, chunk = 0
//   [parallel]   pp = 1, vpp = 1
//   [implementation] strategy = "fused_one_shot", mode = "block" (the recompute section's)
//   [calibration] table = "my-points.toml" (relative to the scenario; default: the committed one)
//   [scaling]    target_loss = 1.695, loss_range = [1.6, 1.9]
//   [hardware]   preset = "h100" | file = "my-gpu.toml", and any preset key to override
//                (peak_bf16_flops, hbm_bandwidth, scale_out_bandwidth, ..., efficiency = {...})
//   [moe]        experts, active, shared, expert_ffn (MoE MLP by active parameters)
//   [pipeline]   microbatches = 8, schedule = "interleaved" | "1f1b", cache = "cached" | "naive"
//                | "cached_own", mode = "block" | "full", overlap = true, ideal_links = false,
//                link = "scale_out" | "intra_node", link_bandwidth (bytes/s, overrides)
//   [[sweep]]    name (required), title, x (required), values (required):
//                [1, 2, 4] | "divisors" (of L) | {from, to, step} | {from, to, factor};
//                y, y_values (a grid), metrics (required, one unit), log_x, log_y,
//                overlay = "paper_fig6", threshold = 0.04 with claim = "overhead < 4%",
//                max_points = 2000000
//   [train]      data (required; a text file, relative to the scenario file), layers, d_model,
//                heads, kv_heads, ffn, schemes = ["standard", "full"], blocks = [2, 4] (Block
//                AttnRes with N blocks), steps, seq, batch, lr, seeds = [1, 2, 3], eval_every,
//                threads = 0, save_models = false, masks = ["embedding", "distant:2"] — trains
//                each scheme x seed and masks the trained models' depth history (docs/training.md)
//
// Every error names file:line:column and what was expected; unknown keys get a "did you mean".
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "attnres/cost.hpp"
#include "attnres/hardware.hpp"
#include "attnres/model_config.hpp"
#include "attnres/pipeline.hpp"
#include "attnres/plan.hpp"
#include "attnres/strategy.hpp"
#include "attnres/sweep.hpp"

namespace attnres {

struct ScenarioScaling {
  double target_loss = 1.695;
  double loss_from = 1.60, loss_to = 1.90;
};

// The [train] table: tiny models trained on the same data, steps and seeds for each scheme, so a
// report can put measured losses beside the computed costs (docs/training.md).
struct ScenarioTraining {
  std::string data;                 // as written in the file
  std::filesystem::path data_path;  // resolved against the scenario file's directory
  int layers = 2, d_model = 64, heads = 4, kv_heads = 0,
      ffn = 0;  // kv_heads 0 = heads, ffn 0 = round(8d/3)
  // Scheme specs (docs/schemes.md, docs/scenarios.md): a named scheme ("standard", "full",
  // "denseformer", "full_sigmoid", ...) optionally refined as "NAME:key=value,...".
  std::vector<std::string> schemes = {"standard", "full"};
  std::vector<int> blocks;  // Block AttnRes with N blocks each (N divides L = 2 x layers)
  int steps = 200, seq = 64, batch = 8;
  double lr = 3e-3;
  std::vector<std::uint64_t> seeds = {1, 2, 3};
  int eval_every = 0;  // 0 = steps / 10
  int threads = 0;
  // "bf16" | "f32"; empty: bf16 where the CPU has native bf16 units, else f32 (one precision for
  // every run of the table; docs/training.md).
  std::string precision;
  bool save_models = false;        // write models/<scheme>[_seed<k>]/ into the report
  std::vector<std::string> masks;  // history-masking experiments on the trained AttnRes models
                                   // ("embedding", "distant:K", "recent:K"; docs/training.md)
  int sublayers() const { return 2 * layers; }
  // The model shape of every run (byte vocabulary; ffn 0 = round(8d/3)).
  ModelConfig model_config() const;
  // The scheme of one train.schemes entry at this shape: named Block schemes use S = 4 (the
  // paper's Table 4) unless block_size= is given. Throws attnres::Error naming the entry.
  AttnResConfig scheme_of(const std::string& spec) const;
};

// A scheme spec as a file or directory name: ':', ',', '=' and spaces become '_'
// ("block:block_size=4" -> "block_block_size_4").
std::string scheme_file_name(const std::string& spec);

// The [plan] table (docs/scenarios.md): the grid a "decision" section tries and the budgets it
// checks (plan.hpp, docs/math.md §3.9).
struct ScenarioPlan {
  PlanGrid grid;
  PlanBudgets budgets;
  std::vector<std::string> hardware_entries;  // plan.hardware as written (files resolved)
};

struct Scenario {
  std::string source;  // file name, for messages
  std::string text;    // the file's text as read (reports keep a copy; empty when built in code)
  std::string title;
  std::string description;
  std::string model_source;  // `source = "..."`: where the model shape comes from
  bool has_model = false;    // [model] given; optional when only "scaling" is reported
  CostInputs inputs;         // resolved and validated (when has_model)
  std::vector<std::string> sections;
  std::vector<SweepSpec> sweeps;
  ScenarioScaling scaling;
  std::optional<Hardware> hardware;          // enables the "time" section and time metrics
  std::optional<PipelineSettings> pipeline;  // enables "pipeline_sim" and pipeline metrics
  std::optional<ScenarioTraining> training;  // enables the "training" section
  std::optional<ScenarioPlan> plan;          // enables the "decision" section (needs [pipeline])
  // [implementation]: the strategy the pipeline simulation times and memory counts, and the
  // variant the recompute section uses (docs/math.md §3.6).
  Strategy strategy = Strategy::fused_two_phase;
  ResidualMode strategy_mode = ResidualMode::block;
  // [calibration] table: a calibration table file (resolved against the scenario's directory);
  // empty = the committed table (docs/calibration.md).
  std::filesystem::path calibration_table;
  // [hardware] file = "...", resolved against the scenario's directory (empty for a preset).
  std::filesystem::path hardware_file;

  ScenarioInputs scenario_inputs() const { return {inputs, hardware, pipeline, strategy}; }
  // Every file this scenario reads besides itself: its hardware file, the plan's hardware files,
  // its calibration table and its training data. A command that writes an output directory
  // keeps them, --force or not (docs/output-safety.md).
  std::vector<std::filesystem::path> files_read() const;
};

const std::vector<std::string>& scenario_sections();

// Parses and validates; `source` prefixes every error ("source:line:column: ...").
Scenario parse_scenario(const std::string& text, const std::string& source);
Scenario load_scenario(const std::filesystem::path& path);
// TOML text that parse_scenario reads back to the same settings (sweeps included; a [hardware]
// table is written in full, with its source line, rather than as a preset name).
std::string scenario_to_toml(const Scenario& scenario);

}  // namespace attnres
