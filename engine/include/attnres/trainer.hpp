// Training a tiny model on byte-level text (docs/training.md): the loop behind `attnres train`,
// the Training view and the `[train]` table of scenarios.
//
//   TextData data = load_text_data("corpus.txt", 0.05, 128);
//   TrainOptions options;
//   options.steps = 300; options.sequence_length = 128; options.batch = 8;
//   options.forward.mode = ResidualMode::block; options.forward.block_size = 4;
//   Trainer trainer(random_model(config, {.seed = 1}), data, options);
//   while (!trainer.finished()) trainer.step();   // f32 weights, AdamW, warm-up + cosine, clip
//   trainer.write_checkpoint("out");               // config.json, model.safetensors, optimizer,
//                                                  // train_state.json, train_log.csv
//   auto again = Trainer::resume("out", Trainer::resume_data("out"));  // continues bit-identically
//
// Training keeps f32 weights and AdamW state on the CPU with a GradientEngine (fast by default),
// its matrix products in f32 or bf16 (options.engine.bf16; docs/training.md). Batches are a pure
// function of (seed, step), and the fast engine is deterministic for a thread count, so the same
// seed and thread count give the same bits, and a resumed run equals an uninterrupted one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "attnres/engine.hpp"
#include "attnres/forward.hpp"
#include "attnres/gradient_engine.hpp"
#include "attnres/training.hpp"

namespace attnres {

struct TrainOptions {
  std::int64_t steps = 0;     // optimisation steps of the whole run
  int sequence_length = 0;    // T tokens per sequence
  int batch = 0;              // B sequences per step
  double lr = 3e-3;           // peak learning rate
  double min_lr_ratio = 0.1;  // the cosine ends at lr * this
  std::int64_t warmup = -1;   // warm-up steps; -1 = min(100, steps / 10)
  AdamWOptions adamw;
  double clip = 1.0;            // max global gradient norm; <= 0 turns clipping off
  std::uint64_t seed = 0;       // batches (and, for shape-flag models, the initial weights)
  std::int64_t eval_every = 0;  // validation (and checkpoint) interval; 0 = max(1, steps / 10)
  int eval_sequences = 16;      // validation windows of T tokens
  double validation_fraction = 0.05;
  ForwardOptions forward;  // residual mode and block size (else the model's)
  EngineOptions engine;    // fast | reference, threads (CPU only), bf16 products (engine.hpp)

  LearningRateSchedule schedule() const;
  std::int64_t evaluation_interval() const;
  // Throws attnres::Error naming the option (`flag` spells it as the caller wants: "--steps").
  void validate() const;
};

struct TrainLogRow {
  std::int64_t step = 0;
  std::int64_t tokens = 0;  // tokens seen so far (B * T per step)
  double train_loss = std::numeric_limits<double>::quiet_NaN();  // NaN at step 0
  double val_loss = std::numeric_limits<double>::quiet_NaN();    // NaN when not evaluated
  double lr = 0.0;
  double grad_norm = std::numeric_limits<double>::quiet_NaN();  // before clipping
  std::vector<double> output_rms;       // (L) sublayer_output_rms of the step's batch (Fig. 5b)
  std::vector<double> output_grad_rms;  // (L) sublayer_output_grad_rms (Fig. 5c)
};

// The files of a checkpoint directory.
inline constexpr const char* kTrainStateFile = "train_state.json";
inline constexpr const char* kTrainLogFile = "train_log.csv";
inline constexpr const char* kOptimizerFile = "optimizer.safetensors";
// The files train_state.json (version 2) records a checksum of: resume refuses any other.
inline constexpr const char* kCheckpointCompanions[] = {"config.json", "model.safetensors",
                                                        kOptimizerFile, kTrainLogFile};
// The most tokens one step takes (batch x sequence length): the trainer is for tiny models, and
// its activations grow with this.
inline constexpr std::int64_t kMaxTokensPerStep = std::int64_t{1} << 20;

class Trainer {
 public:
  // A fresh run from `initial` (its weights are rounded to f32). The model's config takes the
  // run's residual mode; Full/Block runs train the AttnRes tensors (zero queries, unit gains when
  // the initial model has none), standard runs have none. Throws attnres::Error on bad options, a
  // vocabulary smaller than 256 (byte tokens), or data too short for the sequence length.
  Trainer(const ModelWeights<double>& initial, TextData data, const TrainOptions& options);
  ~Trainer();

  // The data for resuming the run saved in `directory`: `data_path`, or when it is empty the file
  // its train_state.json records (an absolute path), split with the run's own validation
  // fraction. Refuses before any training, naming the file and both FNV-1a 64 fingerprints, a
  // file whose bytes are not the ones the run started with, and naming the recorded path and
  // fingerprint, a recorded file that cannot be read.
  static TextData resume_data(const std::filesystem::path& directory,
                              const std::filesystem::path& data_path = {});
  // Continues the run saved in `directory` (model, optimizer moments, step, options and log).
  // `data` must be the file the run started with (checked by fingerprint; resume_data reads it
  // with the run's split). `steps`, when > 0, changes the run's length (the schedule then
  // differs from the original run's); `engine` overrides the thread count / engine (not the
  // precision); `precision` (bf16 | f32), when given, changes the run's precision. Errors name
  // the file and what is wrong.
  static std::unique_ptr<Trainer> resume(const std::filesystem::path& directory, TextData data,
                                         std::int64_t steps = 0,
                                         const EngineOptions* engine = nullptr,
                                         const Precision* precision = nullptr);

  // One optimisation step; the row is appended to the log (with a validation loss when the step
  // is an evaluation step or the last one). `progress` is checked inside the forward/backward;
  // a Cancelled leaves the trainer exactly as before the call.
  const TrainLogRow& step(const Progress& progress = {});
  // Mean validation loss (nats/token) of the current weights.
  double evaluate(const Progress& progress = {}) const;

  bool finished() const { return step_ >= options_.steps; }
  std::int64_t current_step() const { return step_; }
  std::int64_t tokens_seen() const { return step_ * options_.batch * options_.sequence_length; }
  const TrainOptions& options() const { return options_; }
  const std::vector<TrainLogRow>& log() const { return log_; }
  const TextData& data() const { return data_; }
  int sublayers() const { return model_.config.sublayers(); }
  int threads() const;

  // The current weights (exactly the f32 values) with the run's mode in their config.
  ModelWeights<double> model() const;
  const ModelWeights<float>& model_f32() const { return model_; }
  // A forward pass of the current weights with its trace (depth-attention weights, RMS by depth).
  ForwardResult<float> forward(const std::vector<int>& tokens) const;

  // Writes the checkpoint files into `directory` (which must exist): config.json,
  // model.safetensors, optimizer.safetensors, train_state.json, train_log.csv.
  void write_checkpoint(const std::filesystem::path& directory) const;

 private:
  Trainer() = default;
  void prepare();

  TrainOptions options_;
  TextData data_;
  ModelWeights<float> model_;
  AdamState<float> adam_;
  std::unique_ptr<GradientEngine<float>> engine_;
  Gradients<float> gradients_;
  std::int64_t step_ = 0;
  std::vector<TrainLogRow> log_;
};

// train_log.csv text of `rows` (header: step, tokens, train_loss, val_loss, lr, grad_norm,
// output_rms_1..L, output_grad_rms_1..L), and back. Parsing errors name `source` and the line.
std::string train_log_csv(const std::vector<TrainLogRow>& rows, int sublayers);
std::vector<TrainLogRow> parse_train_log_csv(const std::string& text, int sublayers,
                                             const std::string& source);
// The one reader of a train_log.csv file (Trainer::resume, and the GUI's line about a trained
// model): parse_train_log_csv of its text. `sublayers` < 0 takes L from the header, whose 6 + 2L
// columns are those train_log_csv writes. Errors name the file (and the line).
std::vector<TrainLogRow> read_train_log(const std::filesystem::path& file, int sublayers = -1);

}  // namespace attnres
