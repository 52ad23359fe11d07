// Weights of the tiny Llama-style model with AttnRes tensors (docs/math.md §2.6), and how to make,
// load and save them.
//
// Weights are held at any precision; files are read into ModelWeights<double> (exact for F32,
// F16 and BF16) and cast once to the precision of the forward pass:
//   ModelWeights<double> model = load_model("models/tiny");
//   ModelWeights<float> model_f32 = model.cast<float>();
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "attnres/cancel.hpp"
#include "attnres/model_config.hpp"
#include "attnres/safetensors.hpp"
#include "attnres/tensor.hpp"

namespace attnres {

// The depth-mixing parameters of one read (docs/math.md §2.2, docs/schemes.md). Which of them a
// model has depends on its scheme (AttnResConfig); the others stay empty or at their neutral
// value and are neither saved nor trained.
template <typename Scalar>
struct DepthReadWeights {
  Vector<Scalar> query;          // (d) pseudo-query w_l; zero makes the read a plain mean
  Vector<Scalar> key_norm_gain;  // (d) g of KeyNorm, ones by default (unused when key_norm = false)
  Matrix<Scalar> query_proj;     // (d, d) W_l of an input-dependent query; empty otherwise
  Vector<Scalar> mix;  // (sources) mix_logits (mixing = scalars) or dwa weights (DenseFormer)
  // mHC coefficients of the sublayer this read feeds (m streams); empty otherwise.
  Vector<Scalar> pre_bias;   // (m)
  Vector<Scalar> post_bias;  // (m)
  Matrix<Scalar> res_bias;   // (m, m)
  Matrix<Scalar> pre_proj;   // (m, m d), dynamic only
  Matrix<Scalar> post_proj;  // (m, m d), dynamic only
  Matrix<Scalar> res_proj;   // (m m, m d), dynamic only; row i m + j gives H_res(i, j)
};

template <typename Scalar>
struct LayerWeights {
  Vector<Scalar> input_layernorm;  // (d) RMSNorm gain before attention
  Matrix<Scalar> q_proj;           // (H * head_dim, d)
  Matrix<Scalar> k_proj;           // (H_kv * head_dim, d)
  Matrix<Scalar> v_proj;           // (H_kv * head_dim, d)
  Matrix<Scalar> o_proj;           // (d, H * head_dim)
  Vector<Scalar> q_norm;  // (head_dim) Qwen3's RMSNorm gain of each query head; empty otherwise
  Vector<Scalar> k_norm;  // (head_dim) the same for each key head
  Vector<Scalar> post_attention_layernorm;  // (d) RMSNorm gain before the MLP
  Matrix<Scalar> gate_proj;                 // (F, d)
  Matrix<Scalar> up_proj;                   // (F, d)
  Matrix<Scalar> down_proj;                 // (d, F)
  DepthReadWeights<Scalar> attn_res;        // read that forms the attention sublayer's input
  DepthReadWeights<Scalar> mlp_res;         // read that forms the MLP sublayer's input
};

template <typename Scalar>
struct ModelWeights {
  ModelConfig config;
  Matrix<Scalar> embed_tokens;  // (vocab, d)
  std::vector<LayerWeights<Scalar>> layers;
  Vector<Scalar> norm;                 // (d) final RMSNorm gain
  Matrix<Scalar> lm_head;              // (vocab, d), untied
  DepthReadWeights<Scalar> final_res;  // the final read (l = L + 1)
  // False when the file had no AttnRes tensors: a standard-residual model, whose Full/Block
  // forward passes use zero queries and unit gains.
  bool has_attn_res_tensors = true;

  // Read r = 0 .. L-1 forms sublayer r's input (even r: attention, odd r: MLP of layer r / 2);
  // r = L is the final read.
  const DepthReadWeights<Scalar>& depth_read(int read) const;
  DepthReadWeights<Scalar>& depth_read(int read);

  template <typename Other>
  ModelWeights<Other> cast() const;
};

// Allocates every tensor with the config's shapes: zeros, norm gains and key-norm gains ones,
// DenseFormer weights ones, mHC biases at their documented start (docs/schemes.md).
template <typename Scalar>
ModelWeights<Scalar> allocate_model(const ModelConfig& config);

// Visits every tensor with its Hugging Face name and shape: the single table of names used by
// load_model, save_model, gradients, the optimizer and the tests. `data` is row-major with
// product(shape) elements. Works at any precision (gradients and optimizer moments are
// ModelWeights too).
template <typename Scalar>
struct TensorRef {
  std::string name;
  std::vector<std::int64_t> shape;
  Scalar* data;
  bool attn_res;  // one of the AttnRes tensors (optional in a file)
  std::int64_t element_count() const {
    std::int64_t count = 1;
    for (auto extent : shape) count *= extent;
    return count;
  }
};
template <typename Scalar, typename Visit>
void visit_tensors(ModelWeights<Scalar>& model, Visit&& visit);  // visit(const TensorRef<Scalar>&)

using TensorVisit = TensorRef<double>;
void for_each_tensor(ModelWeights<double>& model,
                     const std::function<void(const TensorVisit&)>& visit);

// Read-only view of the same table.
using TensorView = TensorRef<const double>;
void for_each_tensor(const ModelWeights<double>& model,
                     const std::function<void(const TensorView&)>& visit);

// Number of parameters (every tensor, AttnRes ones included when the model has them; a tied LM
// head counts once, as the embedding).
template <typename Scalar>
std::int64_t parameter_count(const ModelWeights<Scalar>& model);
extern template std::int64_t parameter_count(const ModelWeights<double>&);
extern template std::int64_t parameter_count(const ModelWeights<float>&);

struct RandomModelOptions {
  std::uint64_t seed = 0;
  double weight_std = 0.02;  // projections and embeddings ~ N(0, weight_std^2)
  // Every depth-mixing parameter (pseudo-queries, query projections, mixing logits, mHC
  // projections) ~ N(0, query_std^2), DenseFormer weights 1 + N(0, query_std^2); 0 gives each
  // scheme's documented starting point (docs/schemes.md).
  double query_std = 0.0;
};
// The depth-mixing parameters (docs/schemes.md "Tensors of a read") that random_model draws from
// N(0, query_std^2): what kind of parameter `tensor_name` is ("queries", "query projections",
// "mixing logits", "weights", "projections"), or null for any other tensor.
const char* depth_mixing_parameter_kind(const std::string& tensor_name);

// A reproducible random model (the same seed gives the same weights on every platform). Values
// are rounded to float so that saving as F32 and loading back is exact.
ModelWeights<double> random_model(const ModelConfig& config, const RandomModelOptions& options);

// The model with another residual scheme, for comparing schemes on the same weights
// (docs/schemes.md "Comparing schemes"): every shared tensor is copied — embeddings, attention,
// MLP, norms, and each depth tensor the new scheme has with the same name and shape — and every
// tensor the new scheme adds starts at its query_std = 0 value. Throws attnres::Error when
// `scheme` is invalid for the model's shape (the message names the attn_res key).
ModelWeights<double> convert_scheme(const ModelWeights<double>& model, const AttnResConfig& scheme);

// Memory the weights of `config` need as float64 (or `element_bytes` per value), with checked
// arithmetic (throws attnres::Error naming `where` when the size does not fit 64 bits), and the
// memory available now.
std::uint64_t model_bytes_as_float64(const ModelConfig& config, const std::string& where);
std::uint64_t model_bytes(const ModelConfig& config, const std::string& where,
                          std::size_t element_bytes);
std::uint64_t available_memory_bytes();

// What a load found (attnres inspect prints it): the layout of docs/interop.md, the files, and how
// many tensors each dtype had.
struct CheckpointReport {
  CheckpointLayout layout = CheckpointLayout::lab;
  bool sharded = false;
  std::vector<std::string> files;              // the safetensors files read
  std::map<std::string, std::int64_t> dtypes;  // "BF16" -> tensor count
  std::uint64_t tensor_bytes = 0;              // as stored
  std::vector<std::string> notes;              // config notes and what loading did
};

// One line on what a load read: "Kimi K3 Hugging Face layout (attn_res_block_size), sharded over 3
// files, 64 BF16 tensors (36832 bytes)" (attnres inspect and the GUI's routing page).
std::string checkpoint_summary(const CheckpointReport& report);

// The name of a lab tensor in a checkpoint of `layout` (docs/interop.md): the lab's names in its
// own layout; Kimi K3's `self_attention_res_proj.weight` / `_norm.weight`, `mlp_res_*` and
// `model.output_attn_res_*` for the AttnRes tensors in the K3 and plain layouts, the others
// unchanged. `row` is set where K3 stores a (d) query as a (1, d) matrix.
std::string checkpoint_tensor_name(const std::string& lab_name, CheckpointLayout layout,
                                   bool* row = nullptr);

// Loads DIR/config.json and the weights (DIR/model.safetensors, or the shards that
// DIR/model.safetensors.index.json lists), in the lab's layout or Kimi K3's (docs/interop.md),
// validating every tensor's presence, shape and finiteness before the model is returned, and
// converting F32/F16/BF16/F64 from the memory-mapped files straight to `Scalar` (no float64 copy
// for a float model). Errors name the file and the tensor. A model whose declared shapes need more
// memory than is available is refused before anything is allocated. `progress` gets (bytes
// converted, bytes) and may cancel (Cancelled).
template <typename Scalar>
ModelWeights<Scalar> load_model_as(const std::filesystem::path& directory,
                                   const Progress& progress = {},
                                   CheckpointReport* report = nullptr);
extern template ModelWeights<double> load_model_as(const std::filesystem::path&, const Progress&,
                                                   CheckpointReport*);
extern template ModelWeights<float> load_model_as(const std::filesystem::path&, const Progress&,
                                                  CheckpointReport*);
inline ModelWeights<double> load_model(const std::filesystem::path& directory) {
  return load_model_as<double>(directory);
}
// The bytes of model.safetensors for `model` (F32; AttnRes tensors only when it has them; no
// lm_head.weight when the embeddings are tied).
std::string model_safetensors_bytes(const ModelWeights<double>& model);
// Writes DIR/config.json and DIR/model.safetensors (F32), each atomically; creates DIR.
void save_model(const ModelWeights<double>& model, const std::filesystem::path& directory);

// Writes `model` in the Kimi K3 Hugging Face layout (docs/interop.md): config.json with
// attn_res_block_size, the tensors as `dtype` (BF16 and F16 rounded to nearest even: exact for a
// model loaded from that dtype), in one model.safetensors or, when they exceed `max_shard_bytes`
// (0: no limit), in shards model-0000k-of-0000n.safetensors with model.safetensors.index.json.
// Every file is written atomically; creates DIR. Throws attnres::Error (before writing) when the
// model's scheme has no K3 form (k3_block_layers).
struct HfExportOptions {
  TensorDType dtype = TensorDType::bf16;
  std::uint64_t max_shard_bytes = 0;
};
template <typename Scalar>
std::vector<std::string> save_hf_model(const ModelWeights<Scalar>& model,
                                       const std::filesystem::path& directory,
                                       const HfExportOptions& options,
                                       const Progress& progress = {});
extern template std::vector<std::string> save_hf_model(const ModelWeights<double>&,
                                                       const std::filesystem::path&,
                                                       const HfExportOptions&, const Progress&);
extern template std::vector<std::string> save_hf_model(const ModelWeights<float>&,
                                                       const std::filesystem::path&,
                                                       const HfExportOptions&, const Progress&);

}  // namespace attnres

#include "attnres/model_impl.hpp"
