// The "training" section of a report (docs/training.md, docs/scenarios.md): every scheme of a
// scenario's [train] table trained on the same data, steps and seeds, then
//   - train_quality: final validation loss per scheme (mean, min, max over seeds) beside the
//     tiny model's computed costs (I/O per sublayer, stored history) — our own Fig. 6;
//   - train_runs: every run, with its loss curve chart;
//   - train_output_rms / train_output_grad_rms: magnitudes and gradients by depth at the end of
//     training (Fig. 5b/5c);
//   - train_alpha_entropy: how far the learnt depth attention is from a uniform mean.
#pragma once

#include <string>
#include <vector>

#include "attnres/history_mask.hpp"
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

// Shannon entropy (nats) of each row of `alpha_mean` rows, against log(#sources): the mean over
// reads with at least two sources. Returns {mean entropy, mean uniform entropy}.
std::pair<double, double> mean_read_entropy(const ForwardTrace& trace);

}  // namespace attnres
