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

#include "attnres/residual_scheme.hpp"

namespace attnres {

struct ModelConfig {
  int hidden_size = 0;          // d
  int num_hidden_layers = 0;    // transformer layers; L = 2 * this sublayers
  int num_attention_heads = 0;  // H
  int num_key_value_heads = 0;  // H_kv (grouped-query attention when < H)
  int intermediate_size = 0;    // F, SwiGLU width
  int vocab_size = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  AttnResConfig attn_res;

  int sublayers() const { return 2 * num_hidden_layers; }
  int head_dim() const { return hidden_size / num_attention_heads; }

  // Throws attnres::Error (prefixed by `where`) unless every size is positive and consistent:
  // heads divide d, kv-heads divide heads, head_dim is even (RoPE), 1 <= block_size <= L in block
  // mode, eps > 0, and every scheme key applies to the mode (docs/schemes.md). Messages name the
  // config.json keys, or what `key_name` maps them to (the CLI passes its flag names).
  void validate(const std::string& where,
                const std::function<std::string(const std::string&)>& key_name = {}) const;
};

// Parses and validates config.json text; `source` (usually the file name) prefixes every error.
ModelConfig parse_model_config(const std::string& json_text, const std::string& source);
// Serialises with the Hugging Face keys, `architectures`/`model_type`, and the `attn_res` object.
std::string model_config_to_json(const ModelConfig& config);

}  // namespace attnres
