// The architecture of the costed model (docs/math.md §3.7): which attention and which MLP each
// layer has, and what each costs per token in parameters, forward FLOPs and cached state. One
// place for these counts: the time model, the strategies, the pipeline simulation and the memory
// model all read them from here.
//
//   CostInputs in = resolve_cost_inputs(deepseek_v3_like);
//   layer_attention(in, 1);                 // AttentionKind::mla
//   attention_params(in, AttentionKind::mla);
//   parameter_counts(in).total;             // the whole model
//
// Layers are 1-based: layer i owns sublayers 2i - 1 (attention) and 2i (MLP).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "attnres/cost.hpp"

namespace attnres {

// Checks and derives the architecture and parallel inputs of a CostInputs whose sizes (L, d) are
// already resolved: heads, kv_heads, head_dim, MLA widths, the hybrid pattern, the MoE shape,
// FFN defaults (SwiGLU round(8d/3), GeLU 4d) and the parallel degrees. Called by
// try_resolve_cost_inputs; `field` of the problem is the CostInputs key.
std::optional<CostInputProblem> resolve_architecture(CostInputs& inputs);

// Transformer layers: ceil(L / 2) attention sublayers, floor(L / 2) MLP sublayers.
std::int64_t attention_layers(const CostInputs& resolved);
std::int64_t mlp_layers(const CostInputs& resolved);
// The attention of layer i (1-based): `attention`, or linear for the layers a hybrid pattern
// leaves out (every hybrid_period-th layer and the last keep `attention`, or the listed ones).
AttentionKind layer_attention(const CostInputs& resolved, std::int64_t layer);
// Whether layer i's MLP is a mixture of experts (experts > 0 and i > dense_layers).
bool layer_is_moe(const CostInputs& resolved, std::int64_t layer);
// How many attention layers of each kind, and MoE layers.
std::int64_t count_attention_layers(const CostInputs& resolved, AttentionKind kind);
std::int64_t count_moe_layers(const CostInputs& resolved);

// Per layer: weights, forward FLOPs per token (context `context`: T/2 mean causal context in
// prefill, T in decode) and the state a decode keeps per sequence.
double attention_params(const CostInputs& resolved, AttentionKind kind);
double attention_flops_per_token(const CostInputs& resolved, AttentionKind kind, double context);
// Elements cached per token per layer (softmax kinds: 2·H_kv·d_h; MLA: d_c + d_r) and, for linear
// attention, the fixed state per sequence (H·d_h·d_h, kept in fp32: kLinearStateBytes each).
double kv_cache_elements_per_token(const CostInputs& resolved, AttentionKind kind);
double linear_state_elements(const CostInputs& resolved);
inline constexpr int kLinearStateBytes = 4;
// Bytes one sequence of `context` tokens keeps for one layer's attention (cache or state).
double kv_cache_bytes_per_sequence(const CostInputs& resolved, AttentionKind kind,
                                   std::int64_t context);
// MLP weights of one layer: all of them, and those a token uses (MoE: top-k and shared experts,
// plus the router).
double mlp_params(const CostInputs& resolved, bool moe);
double mlp_active_params(const CostInputs& resolved, bool moe);
double mlp_flops_per_token(const CostInputs& resolved, bool moe);  // 2 x active weights
// Matrices per MLP (expert): SwiGLU 3, GeLU 2.
int mlp_matrices(MlpKind kind);

struct ParameterCounts {
  double embedding = 0;       // vocab x d, input embedding
  double lm_head = 0;         // vocab x d (untied)
  double attention = 0;       // all layers
  double dense_mlp = 0;       // dense MLP layers
  double routed_experts = 0;  // all routed experts of all MoE layers
  double shared_experts = 0;
  double router = 0;
  double norms = 0;  // one d-wide weight per sublayer and the final norm
  double total() const {
    return embedding + lm_head + attention + dense_mlp + routed_experts + shared_experts + router +
           norms;
  }
  double active_per_token = 0;  // weights one token's forward uses (no embedding lookup)
};
ParameterCounts parameter_counts(const CostInputs& resolved);

// Forward FLOPs per token of the sublayers (LM head and embedding excluded), at mean causal
// context T/2: the sum over layers of attention_flops_per_token and mlp_flops_per_token.
double model_flops_per_token(const CostInputs& resolved);
// The same for sublayers first..last (1-based, inclusive), per token, at context `context`.
double sublayer_flops_per_token(const CostInputs& resolved, std::int64_t sublayer, double context);

// Backward FLOPs per forward FLOP of a matrix product: the gradients of its input and of its
// weight, one product each (the pipeline's time model and pass_flops_per_token count it so).
inline constexpr double kBackwardFlopsPerForward = 2.0;
// FLOPs per token of one pass of the whole model, as `attnres bench` counts them: the sublayers
// (model_flops_per_token, at mean causal context T/2) and the LM head's product, 2·vocab·d; with
// `backward`, a training step's forward and backward, (1 + kBackwardFlopsPerForward) times that.
// The depth mixing (depth_attention_flops), norms and the optimizer are not counted: no matrix
// products.
double pass_flops_per_token(const CostInputs& resolved, bool backward);

// One line, e.g. "MLA (d_c 512 + d_r 64) on 61 layers; MoE 256 experts top-8 + 1 shared from
// layer 4".
std::string describe_architecture(const CostInputs& resolved);

}  // namespace attnres
