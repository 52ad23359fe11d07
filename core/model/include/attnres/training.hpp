// The pieces of training a tiny model (docs/training.md): byte-level text data, batches drawn
// deterministically from a seed and the step number, the learning-rate schedule (linear warm-up
// then cosine decay), gradient clipping by the global norm, and AdamW.
//
//   TextData data = load_text_data("corpus.txt", 0.05, 128);
//   auto batch = training_batch(data, 8, 128, /*seed=*/1, /*step=*/1);
//   double lr = learning_rate(schedule, step);
//   double norm = gradient_norm(g.grad);
//   adamw_update(model, g.grad, moments, step, lr, clip_scale(norm, 1.0), adamw);
//
// Everything here is deterministic: the same inputs give the same bits on every run, so a run
// resumed from a checkpoint continues exactly like an uninterrupted one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "attnres/model.hpp"

namespace attnres {

// The bytes of a text file as tokens 0..255 (vocabulary 256), split into a training part and a
// validation part (the last `validation_fraction` of the file). Held as bytes: the data takes its
// file's size in memory (batches widen their windows to int token ids).
struct TextData {
  std::filesystem::path source;
  std::vector<std::uint8_t> train;
  std::vector<std::uint8_t> validation;
  std::uint64_t fingerprint = 0;  // FNV-1a 64 of the file's bytes: a checkpoint names its data
};

inline constexpr int kByteVocabulary = 256;

// The largest data file read (256 MiB): byte-level training of the tiny models needs far less,
// and the cap keeps memory bounded whatever the path names.
inline constexpr std::uint64_t kMaxTextDataBytes = std::uint64_t{256} << 20;

// Throws attnres::Error naming the file when it cannot be read, is not a regular file (a
// directory, a FIFO, a device such as /dev/zero), holds more than kMaxTextDataBytes, is empty,
// looks binary (a NUL byte, or more than 5 % control bytes other than tab, newline, carriage
// return and form feed), or when either part is shorter than `sequence_length` + 1 bytes.
// 0 < validation_fraction < 1. The file is read in chunks, each checked as it arrives: a NUL
// stops the read at once.
TextData load_text_data(const std::filesystem::path& path, double validation_fraction,
                        int sequence_length);
// The same from bytes held in memory (`source` names them in errors).
TextData text_data_from_bytes(const std::string& bytes, const std::string& source,
                              double validation_fraction, int sequence_length);

std::uint64_t fnv1a64(const std::string& bytes);

// `batch` windows of `sequence_length` tokens from the training part, at offsets drawn from
// (seed, step, index) by a counter-based generator (no state to save or restore).
std::vector<std::vector<int>> training_batch(const TextData& data, int batch, int sequence_length,
                                             std::uint64_t seed, std::int64_t step);

// Up to `max_sequences` non-overlapping windows of `sequence_length` tokens from the validation
// part, always the same ones.
std::vector<std::vector<int>> validation_windows(const TextData& data, int sequence_length,
                                                 int max_sequences);

struct LearningRateSchedule {
  double peak = 3e-3;       // reached at the end of warm-up
  double minimum = 3e-4;    // reached at the last step
  std::int64_t warmup = 0;  // linear warm-up steps (lr = peak * step / warmup)
  std::int64_t total = 1;   // steps of the whole run
};

// Learning rate at step 1..total: linear warm-up, then cosine decay from peak to minimum.
double learning_rate(const LearningRateSchedule& schedule, std::int64_t step);

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // decoupled, on matrices only (not on gains or pseudo-queries)
};

// First and second moments of every parameter (the shapes of the model).
template <typename Scalar>
struct AdamState {
  ModelWeights<Scalar> first;
  ModelWeights<Scalar> second;
};

// Zero moments for `model`.
template <typename Scalar>
AdamState<Scalar> adam_state_for(const ModelWeights<Scalar>& model);

// Global L2 norm (in double) of the gradients of the tensors that train: every tensor, the
// AttnRes tensors of a model without them excluded.
template <typename Scalar>
double gradient_norm(const ModelWeights<Scalar>& grad);

// The factor clipping applies to the gradients: min(1, max_norm / (norm + 1e-6)); 1 when
// max_norm <= 0 (clipping off).
double clip_scale(double norm, double max_norm);

// One AdamW step (PyTorch's torch.optim.AdamW order): p *= 1 - lr * wd (matrices only);
// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 -
// b2^t) + eps), with g = grad * grad_scale and t = step (1-based). AttnRes tensors of a model
// without them are left alone.
template <typename Scalar>
void adamw_update(ModelWeights<Scalar>& model, const ModelWeights<Scalar>& grad,
                  AdamState<Scalar>& state, std::int64_t step, double lr, double grad_scale,
                  const AdamWOptions& options);

}  // namespace attnres
