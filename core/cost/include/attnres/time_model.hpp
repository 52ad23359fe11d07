// Roofline time model (docs/math.md §3.4): t = max(flops / (peak·eff_c), bytes / (bw·eff_m))
// per op, for the attention, MLP (dense or MoE by active parameters) and residual-mechanism work
// of one sublayer, in prefill and in decode; transfers t = latency + bytes / (link_bw·eff_l).
//
// Conventions (docs/math.md): attention and MLP from the architecture (architecture.hpp: MHA,
// GQA, MQA, MLA or linear attention; SwiGLU or GeLU; dense or MoE); prefill scores at mean causal
// context T/2; decode reads the whole KV cache of context T; the residual
// mechanism is a separate memory-bound op whose bytes are the I/O per token of docs/math.md §3.1.
#pragma once

#include <string>

#include "attnres/cost.hpp"
#include "attnres/enum_names.hpp"
#include "attnres/hardware.hpp"

namespace attnres {

enum class Phase { prefill, decode };
inline constexpr EnumNames<Phase, 2> kPhaseNames{
    {{Phase::prefill, "prefill"}, {Phase::decode, "decode"}}};
std::string to_string(Phase phase);

// How the residual mechanism forms each sublayer's input.
enum class ResidualScheme { standard, block_two_phase, block_one_shot, full_two_phase, full_naive };
// In the enum's order (tables and JSON list the schemes so; StackTime indexes by the value).
inline constexpr EnumNames<ResidualScheme, 5> kResidualSchemeNames{
    {{ResidualScheme::standard, "standard"},
     {ResidualScheme::block_two_phase, "block_two_phase"},
     {ResidualScheme::block_one_shot, "block_one_shot"},
     {ResidualScheme::full_two_phase, "full_two_phase"},
     {ResidualScheme::full_naive, "full_naive"}}};
std::string to_string(ResidualScheme scheme);
ResidualScheme parse_residual_scheme(const std::string& text, const std::string& where);

struct OpCost {
  double flops = 0;
  double bytes = 0;
  double seconds = 0;
  bool memory_bound = false;
};
OpCost roofline(double flops, double bytes, const Hardware& hardware);
// latency + bytes / (bandwidth · link efficiency); 0 for 0 bytes.
double transfer_seconds(double bytes, double bandwidth, double latency, double link_efficiency);

// Residual-mechanism I/O per token per sublayer of each scheme (docs/math.md §3.1). block_one_shot
// reads keys and values of every source of every read (mean over the L + 1 reads), like the
// naive Full AttnRes row; full_two_phase uses the best schedule block (~sqrt(L)).
double residual_io_elements(const CostInputs& resolved, ResidualScheme scheme);

// One op of one sublayer for `batch` sequences of context T (inputs.tokens): prefill processes
// all B·T tokens, decode one new token per sequence.
// Attention of one layer of `kind` and one MLP (dense or MoE) from the architecture
// (architecture.hpp): FLOPs per token, weights read once per step, the KV cache or state.
OpCost attention_cost(const CostInputs& resolved, Phase phase, const Hardware& hardware,
                      AttentionKind kind);
OpCost mlp_cost(const CostInputs& resolved, bool moe, Phase phase, const Hardware& hardware);
OpCost residual_cost(const CostInputs& resolved, ResidualScheme scheme, Phase phase,
                     const Hardware& hardware);

// Forward time of the whole stack (attention + MLP + residual of every sublayer) per scheme, and
// each scheme's overhead over the standard residual as a fraction of the standard's time.
struct StackTime {
  Phase phase = Phase::prefill;
  OpCost attention, mlp;                                   // the mean attention and MLP sublayer
  OpCost residual[kResidualSchemeNames.size()];            // indexed by ResidualScheme
  double stack_seconds[kResidualSchemeNames.size()] = {};  // L sublayers, per scheme
  double overhead_fraction[kResidualSchemeNames.size()] =
      {};  // (stack(scheme) - stack(standard)) / stack(standard)
};
StackTime stack_time(const CostInputs& resolved, Phase phase, const Hardware& hardware);

}  // namespace attnres
