#include "attnres/model.hpp"

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <numbers>
#include <random>
#include <set>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/output_dir.hpp"
#include "attnres/safetensors.hpp"

namespace attnres {

namespace fs = std::filesystem;

void for_each_tensor(ModelWeights<double>& model,
                     const std::function<void(const TensorVisit&)>& visit) {
  visit_tensors(model, visit);
}

void for_each_tensor(const ModelWeights<double>& model,
                     const std::function<void(const TensorView&)>& visit) {
  // The mutable walk only hands out pointers; this visitor cannot write through them.
  visit_tensors(const_cast<ModelWeights<double>&>(model), [&](const TensorVisit& tensor) {
    visit(TensorView{tensor.name, tensor.shape, tensor.data, tensor.attn_res});
  });
}

template <typename Scalar>
std::int64_t parameter_count(const ModelWeights<Scalar>& model) {
  std::int64_t count = 0;
  visit_tensors(const_cast<ModelWeights<Scalar>&>(model), [&](const TensorRef<Scalar>& tensor) {
    if (tensor.attn_res && !model.has_attn_res_tensors) return;
    if (model.config.tie_word_embeddings && tensor.name == "lm_head.weight") return;
    count += tensor.element_count();
  });
  return count;
}

template std::int64_t parameter_count(const ModelWeights<double>&);
template std::int64_t parameter_count(const ModelWeights<float>&);

namespace {

// Standard normal draws from mt19937_64 (whose output the C++ standard fixes) by Box–Muller, so a
// seed gives the same model everywhere (std::normal_distribution is implementation-defined).
class NormalSource {
 public:
  explicit NormalSource(std::uint64_t seed) : engine_(seed) {}
  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = (static_cast<double>(engine_() >> 11) + 1.0) * 0x1p-53;  // (0, 1]
    const double u2 = static_cast<double>(engine_() >> 11) * 0x1p-53;          // [0, 1)
    const double radius = std::sqrt(-2.0 * std::log(u1));
    spare_ = radius * std::sin(2.0 * std::numbers::pi * u2);
    has_spare_ = true;
    return radius * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  std::mt19937_64 engine_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

const char* depth_mixing_parameter_kind(const std::string& name) {
  static const std::pair<const char*, const char*> kinds[] = {
      {".query", "queries"},
      {".query_proj.weight", "query projections"},
      {".mix_logits", "mixing logits"},
      {".dwa.weight", "weights"},
      {".mhc.pre_proj.weight", "projections"},
      {".mhc.post_proj.weight", "projections"},
      {".mhc.res_proj.weight", "projections"}};
  for (const auto& [suffix, kind] : kinds) {
    if (ends_with(name, suffix)) return kind;
  }
  return nullptr;
}

ModelWeights<double> random_model(const ModelConfig& config, const RandomModelOptions& options) {
  config.validate("random model");
  if (!(options.weight_std >= 0.0) || !(options.query_std >= 0.0)) {
    throw Error("random model: standard deviations must be >= 0");
  }
  auto model = allocate_model<double>(config);
  NormalSource normal(options.seed);
  for_each_tensor(model, [&](const TensorVisit& tensor) {
    const std::int64_t count = tensor.element_count();
    double std_dev = 0.0;
    if (depth_mixing_parameter_kind(tensor.name) != nullptr) {
      std_dev = options.query_std;  // every depth-mixing parameter (docs/schemes.md)
    } else if (tensor.shape.size() == 2 && !ends_with(tensor.name, ".mhc.res_bias")) {
      std_dev = options.weight_std;
    }
    if (std_dev == 0.0) {  // zeros, or the start values allocate_model gave (gains, biases, dwa)
      for (std::int64_t i = 0; i < count; ++i)
        tensor.data[i] = static_cast<double>(static_cast<float>(tensor.data[i]));
      return;
    }
    for (std::int64_t i = 0; i < count; ++i) {
      // Added to the start value: DenseFormer weights are 1 + N(0, sigma^2), the rest 0 + N(0,
      // sigma^2).
      tensor.data[i] =
          static_cast<double>(static_cast<float>(tensor.data[i] + std_dev * normal.next()));
    }
  });
  model.has_attn_res_tensors = true;
  return model;
}

std::uint64_t available_memory_bytes() {
  // MemAvailable from /proc/meminfo (Linux); without it, assume there is no limit to check.
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kilobytes = 0;
  std::string unit;
  while (meminfo >> key >> kilobytes >> unit) {
    if (key == "MemAvailable:") return kilobytes * 1024;
  }
  return std::numeric_limits<std::uint64_t>::max();
}

std::uint64_t model_bytes_as_float64(const ModelConfig& config, const std::string& where) {
  return model_bytes(config, where, sizeof(double));
}

std::uint64_t model_bytes(const ModelConfig& config, const std::string& where,
                          std::size_t element_bytes) {
  // Every tensor of allocate_model, with checked arithmetic: huge configs must not overflow.
  const auto d = static_cast<std::uint64_t>(config.hidden_size);
  const auto heads = static_cast<std::uint64_t>(config.num_attention_heads);
  const auto kv = static_cast<std::uint64_t>(config.num_key_value_heads);
  const auto ffn = static_cast<std::uint64_t>(config.intermediate_size);
  const auto vocab = static_cast<std::uint64_t>(config.vocab_size);
  const auto layers = static_cast<std::uint64_t>(config.num_hidden_layers);
  const auto head_dim = static_cast<std::uint64_t>(config.head_dim());
  std::uint64_t total = 0;
  auto add = [&](std::uint64_t a, std::uint64_t b, std::uint64_t times = 1) {
    std::uint64_t product = 0;
    if (__builtin_mul_overflow(a, b, &product) ||
        __builtin_mul_overflow(product, times, &product) ||
        __builtin_add_overflow(total, product, &total)) {
      throw Error(where + ": the model described is too large (its size overflows 64 bits)");
    }
  };
  add(vocab, d, 2);                                                         // embedding, LM head
  add(d, heads * head_dim + 2 * kv * head_dim + heads * head_dim, layers);  // q, k, v, o
  add(d, 3 * ffn, layers);                                                  // gate, up, down
  add(d, 8, layers);  // norms, queries, key-norm gains
  add(d, 3);          // final norm, final read
  if (config.qk_norm) add(head_dim, 2, layers);
  // Scheme tensors (docs/schemes.md): query projections, mixing logits / DenseFormer weights, mHC.
  const AttnResConfig& scheme = config.attn_res;
  const std::uint64_t reads = 2 * layers + 1;
  if (scheme.uses_query() && scheme.query_source == QuerySource::input) add(d * d, reads);
  add(reads, reads);  // at most L + 1 logits or weights per read
  if (scheme.mode == ResidualMode::mhc) {
    const auto m = static_cast<std::uint64_t>(scheme.streams);
    add(m * m + 2 * m, 2 * layers);
    if (scheme.dynamic) add(m * d, (2 * m + m * m) * 2 * layers);
  }
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(total, std::uint64_t{element_bytes}, &bytes)) {
    throw Error(where + ": the model described is too large (its size overflows 64 bits)");
  }
  return bytes;
}

ModelWeights<double> convert_scheme(const ModelWeights<double>& model,
                                    const AttnResConfig& scheme) {
  ModelConfig config = model.config;
  config.attn_res = scheme;
  config.validate("scheme");
  ModelWeights<double> out = allocate_model<double>(config);
  // Copy every tensor the two models share by name and shape; the rest keep their start values.
  std::map<std::string, TensorView> source;
  for_each_tensor(model, [&](const TensorView& tensor) {
    if (!tensor.attn_res || model.has_attn_res_tensors) source.emplace(tensor.name, tensor);
  });
  for_each_tensor(out, [&](const TensorVisit& tensor) {
    const auto it = source.find(tensor.name);
    if (it == source.end() || it->second.shape != tensor.shape) return;
    std::copy(it->second.data, it->second.data + tensor.element_count(), tensor.data);
  });
  out.has_attn_res_tensors = scheme.mode != ResidualMode::standard || model.has_attn_res_tensors;
  return out;
}

}  // namespace attnres
