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

namespace {

// The checks of a data file's bytes, applied chunk by chunk as they arrive: a NUL refuses the file
// at once (so /dev/zero-like input stops after its first chunk), control bytes are counted for
// the 5 % rule, the FNV-1a hash runs along.
class TextCheck {
 public:
  explicit TextCheck(const std::string& source) : source_(source) {}

  void add(const char* bytes, std::size_t size) {
    for (std::size_t i = 0; i < size; ++i) {
      const auto c = static_cast<unsigned char>(bytes[i]);
      if (c == 0) {
        throw Error(
            source_ + ": byte " + std::to_string(seen_ + i) +
            " is NUL: this looks like a binary file (expected text; the tokens are its bytes)");
      }
      if (c < 32 && c != '\t' && c != '\n' && c != '\r' && c != '\f') ++control_;
      hash_ ^= c;
      hash_ *= 0x100000001b3ull;
    }
    seen_ += size;
  }

  // The whole-file checks and the split of `bytes` (all of them, added above) into the training
  // and the validation part.
  TextData finish(std::vector<std::uint8_t> bytes, double validation_fraction,
                  int sequence_length) const {
    if (bytes.empty())
      throw Error(source_ + ": the data file is empty (expected text; any text file works)");
    if (control_ * 20 > bytes.size()) {
      throw Error(source_ + ": " + std::to_string(control_) + " of " +
                  std::to_string(bytes.size()) +
                  " bytes are control characters: this looks like a binary file (expected text)");
    }
    const auto validation_bytes = static_cast<std::size_t>(
        std::floor(static_cast<double>(bytes.size()) * validation_fraction));
    const std::size_t train_bytes = bytes.size() - validation_bytes;
    const auto needed = static_cast<std::size_t>(sequence_length) + 1;
    if (train_bytes < needed || validation_bytes < needed) {
      throw Error(source_ + ": " + std::to_string(bytes.size()) + " bytes split into " +
                  std::to_string(train_bytes) + " for training and " +
                  std::to_string(validation_bytes) + " for validation; each part needs at least " +
                  std::to_string(needed) +
                  " (the sequence length + 1): use a longer file, a shorter --seq or another "
                  "--val-fraction");
    }
    TextData data;
    data.source = source_;
    data.fingerprint = hash_;
    const auto split = bytes.begin() + static_cast<std::ptrdiff_t>(train_bytes);
    data.validation.assign(split, bytes.end());
    bytes.resize(train_bytes);
    data.train = std::move(bytes);
    return data;
  }

 private:
  const std::string& source_;
  std::size_t seen_ = 0, control_ = 0;
  std::uint64_t hash_ = 0xcbf29ce484222325ull;  // FNV-1a 64, as fnv1a64
};

void check_fraction(double validation_fraction, const std::string& source) {
  if (!(validation_fraction > 0.0 && validation_fraction < 1.0)) {
    throw Error(source + ": the validation fraction must be between 0 and 1 (exclusive), got " +
                format_number(validation_fraction));
  }
}

std::string cap_text() {
  return std::to_string(kMaxTextDataBytes) + " bytes (" + std::to_string(kMaxTextDataBytes >> 20) +
         " MiB, the most a data file may hold)";
}

}  // namespace

TextData text_data_from_bytes(const std::string& bytes, const std::string& source,
                              double validation_fraction, int sequence_length) {
  check_fraction(validation_fraction, source);
  TextCheck check(source);
  check.add(bytes.data(), bytes.size());
  return check.finish(std::vector<std::uint8_t>(bytes.begin(), bytes.end()), validation_fraction,
                      sequence_length);
}

TextData load_text_data(const std::filesystem::path& path, double validation_fraction,
                        int sequence_length) {
  namespace fs = std::filesystem;
  const std::string source = path.string();
  check_fraction(validation_fraction, source);
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (!fs::exists(status)) throw Error(source + ": cannot read the data file (does it exist?)");
  if (!fs::is_regular_file(status)) {
    const char* what = fs::is_directory(status) ? "a directory"
                       : fs::is_fifo(status)    ? "a FIFO (named pipe)"
                       : fs::is_character_file(status) || fs::is_block_file(status)
                           ? "a device"
                           : "not a regular file";
    throw Error(source + ": the data file is " + what + "; expected a regular text file");
  }
  const std::uint64_t size = fs::file_size(path, error);
  if (!error && size > kMaxTextDataBytes) {
    throw Error(source + ": the data file has " + std::to_string(size) + " bytes; at most " +
                cap_text());
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(source + ": cannot read the data file (does it exist?)");
  // Streamed in chunks, each checked as it arrives. The file may grow while it is read: the cap
  // holds for what arrives, not only for the size it had.
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  TextCheck check(source);
  std::vector<std::uint8_t> bytes;
  if (!error) bytes.reserve(static_cast<std::size_t>(size));
  std::vector<char> chunk(kChunk);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(kChunk));
    const auto got = static_cast<std::size_t>(in.gcount());
    if (got == 0) break;
    if (bytes.size() + got > kMaxTextDataBytes) {
      throw Error(source + ": the data file has more than " + cap_text());
    }
    check.add(chunk.data(), got);
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(got));
  }
  if (in.bad()) throw Error(source + ": reading the data file failed");
  TextData data = check.finish(std::move(bytes), validation_fraction, sequence_length);
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
    sum += Eigen::Map<const Eigen::Matrix<Scalar, Eigen::Dynamic, 1>>(tensor.data,
                                                                      tensor.element_count())
               .template cast<double>()
               .squaredNorm();
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
    // Element by element, as arrays (vectorised; the same operations in the same order).
    using Array = Eigen::Array<Scalar, Eigen::Dynamic, 1>;
    const Eigen::Index n = p.element_count();
    Eigen::Map<Array> param(p.data, n), m(firsts[k].data, n), v(seconds[k].data, n);
    const auto g = Eigen::Map<const Array>(grads[k].data, n) * scale;
    param *= decay;
    m = b1 * m + (Scalar(1) - b1) * g;
    v = b2 * v + (Scalar(1) - b2) * g * g;
    param -= step_size * m / (v.sqrt() / root_bias2 + eps);
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
