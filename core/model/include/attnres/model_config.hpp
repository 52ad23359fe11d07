// The shape of a tiny Llama-style model and its residual scheme (docs/math.md §2.6).
//
// `config.json` uses the Hugging Face Llama keys (hidden_size, num_hidden_layers, ...) plus an
// `attn_res` object: {"mode": "standard"|"full"|"block"|"denseformer"|"rescaled"|"mhc",
// "block_size": S, "key_norm_eps": eps, and the scheme keys of docs/schemes.md: "gate",
// "key_norm", "window", "heads", "query_source", "mixing", "streams", "dynamic",
// "sinkhorn_iterations"}.
// Example:
//   ModelConfig config = parse_model_config(read_file("m/config.json"), "m/config.json");
//   config.sublayers();   // L = 2 * num_hidden_layers
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "attnres/residual_scheme.hpp"

namespace attnres {

enum class CheckpointLayout { lab, k3, plain };
std::string to_string(CheckpointLayout layout);

struct ModelConfig {
  int hidden_size = 0;          // d
  int num_hidden_layers = 0;    // transformer layers; L = 2 * this sublayers
  int num_attention_heads = 0;  // H
  int num_key_value_heads = 0;  // H_kv (grouped-query attention when < H)
  int intermediate_size = 0;    // F, SwiGLU width
  int vocab_size = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  // Hugging Face's `head_dim` where it differs from d / H (Qwen3: 128 at d = 1024, H = 16); 0 means
  // d / H.
  int explicit_head_dim = 0;
  // Qwen3's per-head RMSNorm of q and k before RoPE (`self_attn.q_norm.weight`, `k_norm.weight`,
  // each (head_dim)); model_type "qwen3". Forward passes only (docs/interop.md).
  bool qk_norm = false;
  // The LM head is the embedding matrix (no lm_head.weight in the file; lm_head holds a copy).
  bool tie_word_embeddings = false;
  AttnResConfig attn_res;
  // Where the config came from (docs/interop.md): the lab's `attn_res` object, Kimi K3's
  // `attn_res_block_size` (counted in decoder layers), or a plain Llama/Qwen3 config.
  CheckpointLayout layout = CheckpointLayout::lab;
  // K3's attn_res_block_size as read (0: null or not K3); kept so that a block size larger than the
  // model (one block) exports as it was written.
  int k3_block_layers = 0;
  // The keys of config.json the lab does not read (max_position_embeddings, bos_token_id,
  // torch_dtype, ...) as a JSON object's text, written back on save so a checkpoint round-trips.
  std::string passthrough_json;
  // A port's declared attn_res_detach_blocks (docs/interop.md "Deviations"): the forward pass is
  // the paper's, gradients are not.
  bool detached_blocks = false;
  // What loading noted about the checkpoint (a declared deviation that changes training only).
  std::vector<std::string> notes;

  int sublayers() const { return 2 * num_hidden_layers; }
  int head_dim() const {
    return explicit_head_dim > 0 ? explicit_head_dim : hidden_size / num_attention_heads;
  }

  // Throws attnres::Error (prefixed by `where`) unless every size is positive and consistent:
  // heads divide d, kv-heads divide heads, head_dim is even (RoPE), 1 <= block_size <= L in block
  // mode, eps > 0, and every scheme key applies to the mode (docs/schemes.md). Messages name the
  // config.json keys, or what `key_name` maps them to (the CLI passes its flag names).
  void validate(const std::string& where,
                const std::function<std::string(const std::string&)>& key_name = {}) const;
  // Throws attnres::Error (prefixed by `what`) for a model whose gradients the lab does not
  // compute: Qwen3's q/k norms, tied embeddings and declared detached block summaries
  // (docs/interop.md).
  void require_gradients(const std::string& what) const;
};

// Parses and validates config.json text in any layout of docs/interop.md: the lab's `attn_res`
// object, Kimi K3's `attn_res_block_size` (null = standard, b layers = Block with S = 2b
// sublayers, S capped at L), or neither (the standard residual). Llama and Qwen3 (model_type
// "qwen3": q/k norms) architectures; keys that would change the math the lab computes (biases,
// RoPE scaling, sliding windows, other model types) and AttnRes keys of ports that deviate from
// the paper are refused by name. `source` (usually the file name) prefixes every error.
ModelConfig parse_model_config(const std::string& json_text, const std::string& source);
// Serialises with the Hugging Face keys, `architectures`/`model_type`, the passthrough keys, and
// the `attn_res` object (the lab's layout).
std::string model_config_to_json(const ModelConfig& config);
// The same in Kimi K3's layout: `attn_res_block_size` in decoder layers instead of `attn_res`, and
// `torch_dtype` = `dtype_name` ("bfloat16", "float16", "float32"). Throws attnres::Error naming
// what the K3 layout cannot hold (Full AttnRes, an odd S, other schemes and scheme keys, a key-norm
// eps other than rms_norm_eps).
std::string model_config_to_k3_json(const ModelConfig& config, const std::string& dtype_name);
// The K3 block size in decoder layers for `config` (0 for the standard residual), or throws as
// model_config_to_k3_json does.
int k3_block_layers(const ModelConfig& config);

}  // namespace attnres
