// Layer kinds and their per-token counts (architecture.hpp, docs/math.md §3.7).
#include "attnres/architecture.hpp"

#include <algorithm>
#include <cmath>

#include "attnres/format.hpp"

namespace attnres {

namespace {

using Problem = std::optional<CostInputProblem>;

// The most an MLA width (kv_latent, rope_dim, q_latent) may be: the GUI's and the input table's
// bound of the width d (cost_input_fields.cpp), far above any published model (DeepSeek-V3:
// 512, 64, 1536).
constexpr std::int64_t kMaxMlaWidth = 1'000'000;

Problem problem(const char* field, std::string message) {
  return CostInputProblem{field, std::move(message)};
}

std::string str(std::int64_t v) {
  return std::to_string(v);
}

double D(std::int64_t v) {
  return static_cast<double>(v);
}

bool softmax_kind(AttentionKind kind) {
  return kind == AttentionKind::mha || kind == AttentionKind::gqa || kind == AttentionKind::mqa;
}

Problem resolve_attention(CostInputs& in) {
  const std::string kind = enum_name(kAttentionKindNames, in.attention);
  if (in.heads < 0) return problem("heads", "attention heads H must be >= 0, got " + str(in.heads));
  if (in.heads == 0) {
    // d / 128 heads of 128 when 128 divides d; else the largest divisor of d up to d / 128.
    in.heads = 1;
    const std::int64_t most = std::min<std::int64_t>(1'000'000, in.d_model / 128);
    for (std::int64_t h = std::max<std::int64_t>(1, most); h >= 1; --h) {
      if (in.d_model % h == 0) {
        in.heads = h;
        break;
      }
    }
  }
  if (in.head_dim < 0)
    return problem("head_dim", "head width must be >= 0, got " + str(in.head_dim));
  if (in.head_dim == 0) {
    if (in.d_model % in.heads != 0) {
      return problem("head_dim", "H = " + str(in.heads) + " heads do not divide d = " +
                                     str(in.d_model) + ": give the head width head_dim");
    }
    in.head_dim = in.d_model / in.heads;
  }
  const AttentionKind full = in.attention;
  switch (full) {
    case AttentionKind::mha:
      if (in.kv_heads != 0 && in.kv_heads != in.heads) {
        return problem("kv_heads", "mha has H_kv = H = " + str(in.heads) + " KV heads, got " +
                                       str(in.kv_heads) + " (use attention = gqa)");
      }
      in.kv_heads = in.heads;
      break;
    case AttentionKind::mqa:
      if (in.kv_heads != 0 && in.kv_heads != 1) {
        return problem("kv_heads",
                       "mqa has one KV head, got " + str(in.kv_heads) + " (use attention = gqa)");
      }
      in.kv_heads = 1;
      break;
    case AttentionKind::gqa:
      if (in.kv_heads < 1 || in.kv_heads > in.heads || in.heads % in.kv_heads != 0) {
        return problem("kv_heads", "gqa needs KV heads H_kv that divide the H = " + str(in.heads) +
                                       " heads (1 <= H_kv <= H), got " + str(in.kv_heads));
      }
      break;
    case AttentionKind::mla:
    case AttentionKind::linear:
      if (in.kv_heads != 0) {
        return problem("kv_heads",
                       "kv_heads applies to mha, gqa and mqa, not " + kind + " (leave it out)");
      }
      break;
  }
  if (full == AttentionKind::mla) {
    if (in.kv_latent < 0 || in.rope_dim < 0 || in.q_latent < 0)
      return problem("kv_latent", "MLA widths must be >= 0");
    // Capped as the width d is, so that no byte count of a cache row or a traffic can overflow
    // (rope_dim = 2^63 - 1 made 1e28-byte rows).
    for (auto [value, key] :
         {std::pair{in.kv_latent, "kv_latent"}, std::pair{in.rope_dim, "rope_dim"},
          std::pair{in.q_latent, "q_latent"}}) {
      if (value > kMaxMlaWidth)
        return problem(key, std::string(key) + " must be at most " + str(kMaxMlaWidth) + ", got " +
                                str(value));
    }
    if (in.kv_latent == 0) in.kv_latent = 512;
    if (in.rope_dim == 0) in.rope_dim = 64;
  } else {
    for (auto [value, key] :
         {std::pair{in.kv_latent, "kv_latent"}, std::pair{in.rope_dim, "rope_dim"},
          std::pair{in.q_latent, "q_latent"}}) {
      if (value != 0)
        return problem(
            key, std::string(key) + " applies to attention = mla, not " + kind + " (leave it out)");
    }
  }
  const std::int64_t layers = attention_layers(in);
  if (in.hybrid_period < 0)
    return problem("hybrid_period", "hybrid period must be >= 0, got " + str(in.hybrid_period));
  if (in.hybrid_period > 0 || !in.full_attention_layers.empty()) {
    const char* key = in.hybrid_period > 0 ? "hybrid_period" : "full_attention_layers";
    if (full == AttentionKind::linear) {
      return problem(key, std::string(key) +
                              " keeps some layers on full attention: set attention to their kind "
                              "(mha, gqa, mqa or mla); the other layers are linear");
    }
    if (in.hybrid_period > 0 && !in.full_attention_layers.empty()) {
      return problem("full_attention_layers",
                     "give hybrid_period or full_attention_layers, not both");
    }
    if (in.hybrid_period > layers) {
      return problem("hybrid_period", "hybrid period " + str(in.hybrid_period) + " exceeds the " +
                                          str(layers) + " layers");
    }
    std::int64_t previous = 0;
    for (const std::int64_t layer : in.full_attention_layers) {
      if (layer <= previous || layer > layers) {
        return problem("full_attention_layers",
                       "full_attention_layers must be increasing layer numbers in 1.." +
                           str(layers) + ", got " + str(layer) + " after " + str(previous));
      }
      previous = layer;
    }
  }
  return std::nullopt;
}

Problem resolve_moe(CostInputs& in) {
  for (auto [value, key] : {std::pair{in.experts, "experts"}, std::pair{in.active, "active"},
                            std::pair{in.shared, "shared"}, std::pair{in.expert_ffn, "expert_ffn"},
                            std::pair{in.dense_layers, "dense_layers"}}) {
    if (value < 0) return problem(key, std::string(key) + " must be >= 0, got " + str(value));
  }
  if (in.experts == 0) {
    for (auto [value, key] :
         {std::pair{in.active, "active"}, std::pair{in.shared, "shared"},
          std::pair{in.expert_ffn, "expert_ffn"}, std::pair{in.dense_layers, "dense_layers"}}) {
      if (value != 0)
        return problem(key, std::string(key) +
                                " applies to a mixture of experts: give the routed experts "
                                "(experts >= 1) or leave it out");
    }
    return std::nullopt;
  }
  if (in.active < 1 || in.active > in.experts) {
    return problem("active", "active experts must be between 1 and the " + str(in.experts) +
                                 " experts, got " + str(in.active));
  }
  if (in.expert_ffn < 1)
    return problem("expert_ffn", "the expert MLP width must be >= 1, got " + str(in.expert_ffn));
  if (in.dense_layers >= mlp_layers(in) && mlp_layers(in) > 0) {
    return problem("dense_layers", "dense_layers = " + str(in.dense_layers) +
                                       " leaves no MoE layer among the " + str(mlp_layers(in)) +
                                       " MLP layers");
  }
  return std::nullopt;
}

Problem resolve_parallel(CostInputs& in) {
  for (auto [value, key] : {std::pair{in.tp, "tp"}, std::pair{in.cp, "cp"}, std::pair{in.ep, "ep"},
                            std::pair{in.dp, "dp"}}) {
    if (value < 1) return problem(key, std::string(key) + " must be >= 1, got " + str(value));
  }
  if (in.zero < 0 || in.zero > 3)
    return problem("zero", "ZeRO stage must be 0, 1, 2 or 3, got " + str(in.zero));
  if (in.optimizer_bytes < 0)
    return problem("optimizer_bytes",
                   "optimizer bytes must be >= 0, got " + str(in.optimizer_bytes));
  if (in.heads % in.tp != 0) {
    return problem("tp", "tensor parallelism splits the heads: t = " + str(in.tp) +
                             " must divide H = " + str(in.heads));
  }
  if (in.tokens % in.cp != 0) {
    return problem("cp", "context parallelism splits the sequence: c = " + str(in.cp) +
                             " must divide T = " + str(in.tokens));
  }
  if (in.ep > 1) {
    if (in.experts == 0)
      return problem("ep", "expert parallelism needs a mixture of experts (experts >= 1)");
    if (in.experts % in.ep != 0) {
      return problem("ep", "e = " + str(in.ep) + " expert-parallel ranks must divide the " +
                               str(in.experts) + " experts");
    }
    const std::int64_t fold = in.tp * in.cp * in.dp;
    if (fold % in.ep != 0) {
      return problem("ep", "expert parallelism is folded into the t·c·D = " + str(fold) +
                               " ranks of a pipeline stage: e = " + str(in.ep) + " must divide it");
    }
  }
  if (in.zero > 0 && in.dp * in.cp == 1 &&
      (in.experts == 0 || in.tp * in.cp * in.dp / in.ep == 1)) {
    return problem("zero",
                   "ZeRO shards over the data-parallel ranks; with dp = 1 it changes "
                   "nothing (give dp > 1 or leave zero out)");
  }
  return std::nullopt;
}

}  // namespace

std::optional<CostInputProblem> resolve_architecture(CostInputs& in) {
  if (in.ffn == 0) in.ffn = in.mlp == MlpKind::gelu ? 4 * in.d_model : in.d_model * 8 / 3;
  if (in.vocab < 0) return problem("vocab", "vocabulary must be >= 0, got " + str(in.vocab));
  if (auto p = resolve_attention(in)) return p;
  if (auto p = resolve_moe(in)) return p;
  return resolve_parallel(in);
}

std::int64_t attention_layers(const CostInputs& r) {
  return (r.sublayers + 1) / 2;
}
std::int64_t mlp_layers(const CostInputs& r) {
  return r.sublayers / 2;
}

AttentionKind layer_attention(const CostInputs& r, std::int64_t layer) {
  if (!r.full_attention_layers.empty()) {
    return std::binary_search(r.full_attention_layers.begin(), r.full_attention_layers.end(), layer)
               ? r.attention
               : AttentionKind::linear;
  }
  if (r.hybrid_period > 0) {
    return layer % r.hybrid_period == 0 || layer == attention_layers(r) ? r.attention
                                                                        : AttentionKind::linear;
  }
  return r.attention;
}

bool layer_is_moe(const CostInputs& r, std::int64_t layer) {
  return r.experts > 0 && layer > r.dense_layers;
}

std::int64_t count_attention_layers(const CostInputs& r, AttentionKind kind) {
  if (r.hybrid_period == 0 && r.full_attention_layers.empty())
    return kind == r.attention ? attention_layers(r) : 0;
  std::int64_t n = 0;
  for (std::int64_t i = 1; i <= attention_layers(r); ++i) n += layer_attention(r, i) == kind;
  return n;
}

std::int64_t count_moe_layers(const CostInputs& r) {
  return r.experts > 0 ? std::max<std::int64_t>(0, mlp_layers(r) - r.dense_layers) : 0;
}

double attention_params(const CostInputs& r, AttentionKind kind) {
  const double d = D(r.d_model), H = D(r.heads), dh = D(r.head_dim);
  switch (kind) {
    case AttentionKind::mha:
    case AttentionKind::gqa:
    case AttentionKind::mqa:
      return 2.0 * d * H * dh + 2.0 * d * D(r.kv_heads) * dh;  // q, o + k, v
    case AttentionKind::mla: {
      const double dr = D(r.rope_dim), dc = D(r.kv_latent), ql = D(r.q_latent);
      const double q = ql > 0 ? d * ql + ql * H * (dh + dr) : d * H * (dh + dr);
      const double kv = d * (dc + dr) + dc * H * 2.0 * dh;  // down, then k and v up-projections
      return q + kv + H * dh * d;
    }
    case AttentionKind::linear:
      // KDA (Kimi Linear): q, k, v and o projections, low-rank (rank d_h) forget and output
      // gates, and a per-head beta.
      return 4.0 * d * H * dh + 2.0 * (d * dh + dh * H * dh) + d * H;
  }
  return 0;
}

double attention_flops_per_token(const CostInputs& r, AttentionKind kind, double context) {
  const double H = D(r.heads), dh = D(r.head_dim);
  const double projections = 2.0 * attention_params(r, kind);
  switch (kind) {
    case AttentionKind::mha:
    case AttentionKind::gqa:
    case AttentionKind::mqa:
      return projections + 4.0 * context * H * dh;  // q·k and p·v, 2·context·H·d_h each
    case AttentionKind::mla:
      return projections + 2.0 * context * H * (dh + D(r.rope_dim)) + 2.0 * context * H * dh;
    case AttentionKind::linear:
      return projections + 4.0 * H * dh * dh;  // state update and read-out, 2·d_h² per head each
  }
  return 0;
}

double kv_cache_elements_per_token(const CostInputs& r, AttentionKind kind) {
  if (softmax_kind(kind)) return 2.0 * D(r.kv_heads) * D(r.head_dim);
  if (kind == AttentionKind::mla) return D(r.kv_latent) + D(r.rope_dim);
  return 0;
}

double linear_state_elements(const CostInputs& r) {
  return D(r.heads) * D(r.head_dim) * D(r.head_dim);
}

double kv_cache_bytes_per_sequence(const CostInputs& r, AttentionKind kind, std::int64_t context) {
  if (kind == AttentionKind::linear) return linear_state_elements(r) * kLinearStateBytes;
  return kv_cache_elements_per_token(r, kind) * D(context) * bytes_per_element(r.dtype);
}

int mlp_matrices(MlpKind kind) {
  return kind == MlpKind::gelu ? 2 : 3;
}

double mlp_params(const CostInputs& r, bool moe) {
  const double d = D(r.d_model), m = mlp_matrices(r.mlp);
  if (!moe) return m * d * D(r.ffn);
  return D(r.experts + r.shared) * m * d * D(r.expert_ffn) + d * D(r.experts);
}

double mlp_active_params(const CostInputs& r, bool moe) {
  const double d = D(r.d_model), m = mlp_matrices(r.mlp);
  if (!moe) return m * d * D(r.ffn);
  return D(r.active + r.shared) * m * d * D(r.expert_ffn) + d * D(r.experts);
}

double mlp_flops_per_token(const CostInputs& r, bool moe) {
  return 2.0 * mlp_active_params(r, moe);
}

ParameterCounts parameter_counts(const CostInputs& r) {
  ParameterCounts p;
  const double d = D(r.d_model);
  p.embedding = D(r.vocab) * d;
  p.lm_head = D(r.vocab) * d;
  p.norms = D(r.sublayers + 1) * d;
  for (std::int64_t i = 1; i <= attention_layers(r); ++i) {
    const double a = attention_params(r, layer_attention(r, i));
    p.attention += a;
    p.active_per_token += a;
  }
  const double m = mlp_matrices(r.mlp);
  for (std::int64_t i = 1; i <= mlp_layers(r); ++i) {
    const bool moe = layer_is_moe(r, i);
    p.active_per_token += mlp_active_params(r, moe);
    if (!moe) {
      p.dense_mlp += mlp_params(r, false);
      continue;
    }
    p.routed_experts += D(r.experts) * m * d * D(r.expert_ffn);
    p.shared_experts += D(r.shared) * m * d * D(r.expert_ffn);
    p.router += d * D(r.experts);
  }
  p.active_per_token += p.lm_head;
  return p;
}

double sublayer_flops_per_token(const CostInputs& r, std::int64_t sublayer, double context) {
  const std::int64_t layer = (sublayer + 1) / 2;
  if (sublayer % 2 == 1) return attention_flops_per_token(r, layer_attention(r, layer), context);
  return mlp_flops_per_token(r, layer_is_moe(r, layer));
}

double model_flops_per_token(const CostInputs& r) {
  const double context = D(r.tokens) / 2.0;
  double flops = 0;
  for (const AttentionKind kind : {AttentionKind::mha, AttentionKind::gqa, AttentionKind::mqa,
                                   AttentionKind::mla, AttentionKind::linear}) {
    flops += D(count_attention_layers(r, kind)) * attention_flops_per_token(r, kind, context);
  }
  const double moe_layers = D(count_moe_layers(r));
  flops += (D(mlp_layers(r)) - moe_layers) * mlp_flops_per_token(r, false) +
           moe_layers * mlp_flops_per_token(r, true);
  return flops;
}

double pass_flops_per_token(const CostInputs& r, bool backward) {
  const double forward = model_flops_per_token(r) + 2.0 * parameter_counts(r).lm_head;
  return backward ? (1.0 + kBackwardFlopsPerForward) * forward : forward;
}

std::string describe_architecture(const CostInputs& r) {
  std::string out;
  const std::int64_t layers = attention_layers(r);
  const std::int64_t full = layers - count_attention_layers(r, AttentionKind::linear);
  auto attention_text = [&](AttentionKind kind) {
    switch (kind) {
      case AttentionKind::mha:
        return "MHA, H = " + str(r.heads) + " x d_h " + str(r.head_dim);
      case AttentionKind::gqa:
        return "GQA, H = " + str(r.heads) + ", H_kv = " + str(r.kv_heads) + " x d_h " +
               str(r.head_dim);
      case AttentionKind::mqa:
        return "MQA, H = " + str(r.heads) + " x d_h " + str(r.head_dim);
      case AttentionKind::mla:
        return "MLA, H = " + str(r.heads) + " x d_h " + str(r.head_dim) + ", latent d_c " +
               str(r.kv_latent) + " + d_r " + str(r.rope_dim);
      case AttentionKind::linear:
        return "linear attention (KDA), H = " + str(r.heads) + " x d_h " + str(r.head_dim);
    }
    return std::string();
  };
  if (r.attention != AttentionKind::linear && full < layers) {
    out = attention_text(r.attention) + " on " + str(full) + " of " + str(layers) +
          " layers, linear attention (KDA) on the others";
  } else {
    out = attention_text(r.attention) + " on " + str(layers) + " layers";
  }
  out += "; ";
  out += r.mlp == MlpKind::gelu ? "GeLU MLP" : "SwiGLU MLP";
  if (r.experts > 0) {
    out += " with MoE: " + str(r.experts) + " experts top-" + str(r.active) +
           (r.shared > 0 ? " + " + str(r.shared) + " shared" : "") + ", width " +
           str(r.expert_ffn) +
           (r.dense_layers > 0
                ? ", dense width " + str(r.ffn) + " on the first " + str(r.dense_layers) + " layers"
                : "");
  } else {
    out += ", width " + str(r.ffn);
  }
  return out;
}

}  // namespace attnres
