// The "training" section of a report (docs/training.md, docs/scenarios.md): every scheme of a
// scenario's [train] table trained on the same data, steps and seeds, then
//   - train_quality: final validation loss per scheme (mean, min, max over seeds) beside the
//     tiny model's computed costs (I/O per sublayer, stored history) — our own Fig. 6;
//   - train_runs: every run, with its loss curve chart;
//   - train_output_rms / train_output_grad_rms: magnitudes and gradients by depth at the end of
//     training (Fig. 5b/5c);
//   - train_alpha_entropy: how far the learnt depth attention is from a uniform mean;
//   - train_paired_differences: each scheme against the standard residual and Block/Full AttnRes
//     between neighbours in N, paired by seed, with 95 % intervals, a resolved / not resolved
//     verdict and a power line (docs/training.md#statistics).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "attnres/history_mask.hpp"
#include "attnres/paired_stats.hpp"
#include "attnres/report.hpp"
#include "attnres/scenario.hpp"
#include "attnres/trainer.hpp"

namespace attnres {

struct TrainingRun {
  std::string scheme;  // "standard", "full", "block N=2"
  std::string
      directory;  // models/<this>/ when saved: "standard", "full", "block_N2" (+ "_seed<k>")
  ResidualMode mode = ResidualMode::standard;
  AttnResConfig config;  // every setting of the scheme (docs/schemes.md)
  int blocks = 0;        // N (block), L (full), 0 (standard)
  int block_size = 0;    // S (block)
  std::uint64_t seed = 0;
  Precision precision = Precision::f32;  // of the run's matrix products (engine.hpp)
  std::vector<TrainLogRow> log;
  double tokens_per_second = 0.0;
  double seconds = 0.0;
  ForwardTrace trace;  // a forward pass of the trained model on the first validation window
  std::string model_config_json;  // saved models only
  std::string model_safetensors;
  std::vector<MaskExperiment> masks;  // the [train] masks on this model (first seed, AttnRes only)
};

// Trains every scheme x seed. `steps_override` > 0 replaces the table's steps (a quick look; the
// masking experiments then use 2 validation windows and 2 random masks instead of 8 and 8).
// progress(done steps, total steps); false stops with attnres::Cancelled.
std::vector<TrainingRun> run_scenario_training(const ScenarioTraining& training,
                                               const Progress& progress = {},
                                               int steps_override = 0);

// Adds the tables, charts, json["training"] and (with save_models) the model files to `report`.
void add_training_section(const ScenarioTraining& training, const std::vector<TrainingRun>& runs,
                          Report& report);

// One scheme's final validation losses by seed, what the paired comparisons are made from.
struct SchemeLosses {
  std::string scheme;  // "standard", "full", "block N=2", ...
  ResidualMode mode = ResidualMode::standard;
  int blocks = 0;               // N (Block), L (Full), 0 otherwise
  bool paper_defaults = false;  // Block/Full as the paper defines them (compared along N)
  std::map<std::uint64_t, double> loss_by_seed;
};

// A paired comparison by seed (docs/training.md#statistics): the differences
// loss(scheme, seed) - loss(against, seed) over the seeds both have.
struct PairedComparison {
  std::string scheme, against;
  std::string comparison;  // "vs standard" | "neighbours in N"
  PairedInterval interval;
};

// Every scheme against the standard residual (when it ran), then Block/Full AttnRes with the
// paper's defaults between neighbours in N (the larger N against the smaller), in run order.
std::vector<PairedComparison> paired_comparisons(const std::vector<SchemeLosses>& schemes);

// "resolved: full lower" | "resolved: standard lower" | "not resolved" | "one seed: no interval".
std::string paired_verdict(const PairedComparison& comparison);

// The verdict in a sentence with its numbers and, when not resolved, the power line: "full -
// standard: -0.072 nats/token, 95 % interval [-0.305, +0.159] (paired t, 3 seeds): not resolved;
// resolving a gap of 0.072 at this spread (s = 0.094) needs about 15 seeds."
std::string paired_sentence(const PairedComparison& comparison);

// The losses of `runs` grouped by scheme, in run order.
std::vector<SchemeLosses> scheme_losses(const std::vector<TrainingRun>& runs);

// Shannon entropy (nats) of each row of `alpha_mean` rows, against log(#sources): the mean over
// reads with at least two sources. Returns {mean entropy, mean uniform entropy}.
std::pair<double, double> mean_read_entropy(const ForwardTrace& trace);

}  // namespace attnres
