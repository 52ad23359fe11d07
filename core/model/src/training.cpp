#include "attnres/training.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numbers>
#include <sstream>

#include "attnres/backward.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"

namespace attnres {

std::uint64_t fnv1a64(const std::string& bytes) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (const unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

TextData text_data_from_bytes(const std::string& bytes, const std::string& source,
                              double validation_fraction, int sequence_length) {
  if (!(validation_fraction > 0.0 && validation_fraction < 1.0)) {
    throw Error(source + ": the validation fraction must be between 0 and 1 (exclusive), got " +
                format_number(validation_fraction));
  }
  if (bytes.empty())
    throw Error(source + ": the data file is empty (expected text; any text file works)");
  std::size_t control = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c == 0) {
      throw Error(
          source + ": byte " + std::to_string(i) +
          " is NUL: this looks like a binary file (expected text; the tokens are its bytes)");
    }
    if (c < 32 && c != '\t' && c != '\n' && c != '\r' && c != '\f') ++control;
  }
  if (control * 20 > bytes.size()) {
    throw Error(source + ": " + std::to_string(control) + " of " + std::to_string(bytes.size()) +
                " bytes are control characters: this looks like a binary file (expected text)");
  }
  const auto validation_bytes =
      static_cast<std::size_t>(std::floor(static_cast<double>(bytes.size()) * validation_fraction));
  const std::size_t train_bytes = bytes.size() - validation_bytes;
  const auto needed = static_cast<std::size_t>(sequence_length) + 1;
  if (train_bytes < needed || validation_bytes < needed) {
    throw Error(source + ": " + std::to_string(bytes.size()) + " bytes split into " +
                std::to_string(train_bytes) + " for training and " +
                std::to_string(validation_bytes) + " for validation; each part needs at least " +
                std::to_string(needed) +
                " (the sequence length + 1): use a longer file, a shorter --seq or another "
                "--val-fraction");
  }
  TextData data;
  data.source = source;
  data.fingerprint = fnv1a64(bytes);
  data.train.reserve(train_bytes);
  for (std::size_t i = 0; i < train_bytes; ++i)
    data.train.push_back(static_cast<unsigned char>(bytes[i]));
  for (std::size_t i = train_bytes; i < bytes.size(); ++i)
    data.validation.push_back(static_cast<unsigned char>(bytes[i]));
  return data;
}

TextData load_text_data(const std::filesystem::path& path, double validation_fraction,
                        int sequence_length) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot read the data file (does it exist?)");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw Error(path.string() + ": reading the data file failed");
  TextData data =
      text_data_from_bytes(buffer.str(), path.string(), validation_fraction, sequence_length);
  data.source = path;
  return data;
}

namespace {

// SplitMix64: a counter-based generator (a pure function of its input).
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<std::vector<int>> training_batch(const TextData& data, int batch, int sequence_length,
                                             std::uint64_t seed, std::int64_t step) {
  const std::size_t positions = data.train.size() - static_cast<std::size_t>(sequence_length) + 1;
  std::vector<std::vector<int>> out;
  for (int b = 0; b < batch; ++b) {
    const std::uint64_t draw =
        splitmix64(splitmix64(seed) ^ splitmix64(static_cast<std::uint64_t>(step) * 1000003ull +
                                                 static_cast<std::uint64_t>(b)));
    const auto offset = static_cast<std::ptrdiff_t>(draw % positions);
    out.emplace_back(data.train.begin() + offset, data.train.begin() + offset + sequence_length);
  }
  return out;
}

std::vector<std::vector<int>> validation_windows(const TextData& data, int sequence_length,
                                                 int max_sequences) {
  std::vector<std::vector<int>> out;
  const auto length = static_cast<std::size_t>(sequence_length);
  const std::size_t available = data.validation.size() / length;
  const std::size_t count =
      std::min<std::size_t>(available, static_cast<std::size_t>(std::max(1, max_sequences)));
  // Spread the windows over the whole validation part.
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t window = i * available / count;
    const auto begin = data.validation.begin() + static_cast<std::ptrdiff_t>(window * length);
    out.emplace_back(begin, begin + static_cast<std::ptrdiff_t>(length));
  }
  return out;
}

double learning_rate(const LearningRateSchedule& schedule, std::int64_t step) {
  if (schedule.warmup > 0 && step <= schedule.warmup) {
    return schedule.peak * static_cast<double>(step) / static_cast<double>(schedule.warmup);
  }
  const std::int64_t decay_steps = std::max<std::int64_t>(1, schedule.total - schedule.warmup);
  const double progress = std::clamp(
      static_cast<double>(step - schedule.warmup) / static_cast<double>(decay_steps), 0.0, 1.0);
  return schedule.minimum +
         0.5 * (schedule.peak - schedule.minimum) * (1.0 + std::cos(std::numbers::pi * progress));
}

template <typename Scalar>
AdamState<Scalar> adam_state_for(const ModelWeights<Scalar>& model) {
  return {zero_like(model), zero_like(model)};
}

template <typename Scalar>
double gradient_norm(const ModelWeights<Scalar>& grad) {
  double sum = 0.0;
  visit_tensors(const_cast<ModelWeights<Scalar>&>(grad), [&](const TensorRef<Scalar>& tensor) {
    if (tensor.attn_res && !grad.has_attn_res_tensors) return;
    for (std::int64_t i = 0; i < tensor.element_count(); ++i) {
      const auto g = static_cast<double>(tensor.data[i]);
      sum += g * g;
    }
  });
  return std::sqrt(sum);
}

double clip_scale(double norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0;
  return std::min(1.0, max_norm / (norm + 1e-6));
}

template <typename Scalar>
void adamw_update(ModelWeights<Scalar>& model, const ModelWeights<Scalar>& grad,
                  AdamState<Scalar>& state, std::int64_t step, double lr, double grad_scale,
                  const AdamWOptions& options) {
  // Tensors are visited in the same order in all four models (one table of names).
  std::vector<TensorRef<Scalar>> grads, firsts, seconds;
  visit_tensors(const_cast<ModelWeights<Scalar>&>(grad),
                [&](const TensorRef<Scalar>& t) { grads.push_back(t); });
  visit_tensors(state.first, [&](const TensorRef<Scalar>& t) { firsts.push_back(t); });
  visit_tensors(state.second, [&](const TensorRef<Scalar>& t) { seconds.push_back(t); });
  const double bias1 = 1.0 - std::pow(options.beta1, static_cast<double>(step));
  const double bias2 = 1.0 - std::pow(options.beta2, static_cast<double>(step));
  const auto b1 = static_cast<Scalar>(options.beta1);
  const auto b2 = static_cast<Scalar>(options.beta2);
  const auto scale = static_cast<Scalar>(grad_scale);
  const auto step_size = static_cast<Scalar>(lr / bias1);
  const auto root_bias2 = static_cast<Scalar>(std::sqrt(bias2));
  const auto eps = static_cast<Scalar>(options.eps);
  std::size_t index = 0;
  visit_tensors(model, [&](const TensorRef<Scalar>& p) {
    const std::size_t k = index++;
    if (p.attn_res && !model.has_attn_res_tensors) return;
    const Scalar decay =
        p.shape.size() == 2 ? static_cast<Scalar>(1.0 - lr * options.weight_decay) : Scalar(1);
    Scalar* m = firsts[k].data;
    Scalar* v = seconds[k].data;
    const Scalar* g = grads[k].data;
    for (std::int64_t i = 0; i < p.element_count(); ++i) {
      const Scalar gi = g[i] * scale;
      p.data[i] *= decay;
      m[i] = b1 * m[i] + (Scalar(1) - b1) * gi;
      v[i] = b2 * v[i] + (Scalar(1) - b2) * gi * gi;
      p.data[i] -= step_size * m[i] / (std::sqrt(v[i]) / root_bias2 + eps);
    }
  });
}

#define ATTNRES_INSTANTIATE_TRAINING(Scalar)                                     \
  template AdamState<Scalar> adam_state_for(const ModelWeights<Scalar>&);        \
  template double gradient_norm(const ModelWeights<Scalar>&);                    \
  template void adamw_update(ModelWeights<Scalar>&, const ModelWeights<Scalar>&, \
                             AdamState<Scalar>&, std::int64_t, double, double,   \
                             const AdamWOptions&);
ATTNRES_INSTANTIATE_TRAINING(float)
ATTNRES_INSTANTIATE_TRAINING(double)

}  // namespace attnres
