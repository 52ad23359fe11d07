#include "attnres/time_model.hpp"

#include <algorithm>

#include "attnres/architecture.hpp"
#include "attnres/error.hpp"

namespace attnres {

std::string to_string(Phase phase) {
  return enum_name(kPhaseNames, phase);
}

std::string to_string(ResidualScheme scheme) {
  return enum_name(kResidualSchemeNames, scheme);
}

ResidualScheme parse_residual_scheme(const std::string& text, const std::string& where) {
  return parse_enum(kResidualSchemeNames, text, where, "unknown residual scheme");
}

OpCost roofline(double flops, double bytes, const Hardware& hw) {
  const double compute = flops / (hw.peak_flops * hw.compute_efficiency);
  const double memory = bytes / (hw.hbm_bandwidth * hw.memory_efficiency);
  return {flops, bytes, std::max(compute, memory), memory > compute};
}

double transfer_seconds(double bytes, double bandwidth, double latency, double link_efficiency) {
  if (bytes <= 0) return 0.0;
  return latency + bytes / (bandwidth * link_efficiency);
}

double residual_io_elements(const CostInputs& in, ResidualScheme scheme) {
  const std::int64_t d = in.d_model;
  switch (scheme) {
    case ResidualScheme::standard:
      return io_standard(d).total();
    case ResidualScheme::block_two_phase:
      return io_block_two_phase(in.blocks, in.block_size, d).total();
    case ResidualScheme::block_one_shot: {
      const double mean_sources = static_cast<double>(depth_read_source_pairs(
                                      ResidualMode::block, in.sublayers, in.block_size)) /
                                  static_cast<double>(in.sublayers + 1);
      return (2.0 * mean_sources + 1.0) * static_cast<double>(d);
    }
    case ResidualScheme::full_two_phase:
      return best_full_schedule_block(in.sublayers, d).io_elements;
    case ResidualScheme::full_naive:
      return io_full_naive_mean(in.sublayers, d).total();
  }
  return 0;
}

namespace {

double tokens_in_step(const CostInputs& in, Phase phase) {
  return static_cast<double>(in.batch) *
         (phase == Phase::prefill ? static_cast<double>(in.tokens) : 1.0);
}

}  // namespace

OpCost attention_cost(const CostInputs& in, Phase phase, const Hardware& hw, AttentionKind kind) {
  const double T = static_cast<double>(in.tokens), d = static_cast<double>(in.d_model);
  const double b = bytes_per_element(in.dtype), B = static_cast<double>(in.batch);
  const double tokens = tokens_in_step(in, phase);
  const double weights = attention_params(in, kind) * b;
  const double cache = kv_cache_elements_per_token(in, kind);
  if (phase == Phase::prefill) {
    // Scores and values at mean causal context T/2; input and output read and written, the
    // cached keys and values (or latent) written.
    const double flops = tokens * attention_flops_per_token(in, kind, T / 2.0);
    const double bytes = weights + tokens * b * (2.0 * d + cache);
    return roofline(flops, bytes, hw);
  }
  // Decode: one token per sequence against the whole cache (linear attention: its state).
  const double flops = tokens * attention_flops_per_token(in, kind, T);
  const double bytes =
      weights + B * kv_cache_bytes_per_sequence(in, kind, in.tokens) + tokens * d * b * 2.0;
  return roofline(flops, bytes, hw);
}

OpCost mlp_cost(const CostInputs& in, bool moe, Phase phase, const Hardware& hw) {
  const double d = static_cast<double>(in.d_model), b = bytes_per_element(in.dtype);
  const double tokens = tokens_in_step(in, phase);
  if (!moe)
    return roofline(tokens * mlp_flops_per_token(in, false),
                    mlp_params(in, false) * b + tokens * 2.0 * d * b, hw);
  // MoE by active parameters: each token runs `active` routed + `shared` experts; the weights
  // read are those of the experts some token in the step uses (at most all of them).
  const double expert_weights = mlp_matrices(in.mlp) * d * static_cast<double>(in.expert_ffn) * b;
  const double touched =
      std::min(static_cast<double>(in.experts), tokens * static_cast<double>(in.active)) +
      static_cast<double>(in.shared);
  return roofline(
      tokens * mlp_flops_per_token(in, true),
      touched * expert_weights + d * static_cast<double>(in.experts) * b + tokens * 2.0 * d * b,
      hw);
}

OpCost residual_cost(const CostInputs& in, ResidualScheme scheme, Phase phase, const Hardware& hw) {
  const double tokens = tokens_in_step(in, phase);
  const double bytes = residual_io_elements(in, scheme) * tokens * bytes_per_element(in.dtype);
  double flops = 0;
  if (scheme != ResidualScheme::standard) {
    const bool full =
        scheme == ResidualScheme::full_two_phase || scheme == ResidualScheme::full_naive;
    flops = depth_attention_flops(full ? ResidualMode::full : ResidualMode::block, in.sublayers,
                                  full ? 1 : in.block_size, in.d_model) /
            static_cast<double>(in.sublayers) * tokens;
  } else {
    flops = static_cast<double>(in.d_model) * tokens;  // one add per element
  }
  return roofline(flops, bytes, hw);
}

StackTime stack_time(const CostInputs& in, Phase phase, const Hardware& hw) {
  StackTime out;
  out.phase = phase;
  // The body: every attention layer by its kind, every MLP layer dense or MoE. `attention` and
  // `mlp` are the mean op of their sublayers.
  double body = 0;
  // n sublayers running `op`: their time in the body, their share of the mean op over `count`.
  auto add = [&body](OpCost& mean, const OpCost& op, double n, double count) {
    body += n * op.seconds;
    mean.flops += n * op.flops / count;
    mean.bytes += n * op.bytes / count;
    mean.seconds += n * op.seconds / count;
    mean.memory_bound = op.memory_bound;
  };
  const double attention_count = static_cast<double>(attention_layers(in));
  const double mlp_count = static_cast<double>(mlp_layers(in));
  for (const auto& [kind, name] : kAttentionKindNames) {
    const auto n = static_cast<double>(count_attention_layers(in, kind));
    if (n > 0) add(out.attention, attention_cost(in, phase, hw, kind), n, attention_count);
  }
  const auto moe_layers = static_cast<double>(count_moe_layers(in));
  for (const bool moe : {false, true}) {
    const double n = moe ? moe_layers : mlp_count - moe_layers;
    if (n > 0) add(out.mlp, mlp_cost(in, moe, phase, hw), n, mlp_count);
  }
  for (const auto& [scheme, name] : kResidualSchemeNames) {
    const auto i = static_cast<std::size_t>(scheme);
    out.residual[i] = residual_cost(in, scheme, phase, hw);
    out.stack_seconds[i] = body + static_cast<double>(in.sublayers) * out.residual[i].seconds;
  }
  for (std::size_t i = 0; i < kResidualSchemeNames.size(); ++i) {
    out.overhead_fraction[i] = out.stack_seconds[i] / out.stack_seconds[0] - 1.0;
  }
  return out;
}

}  // namespace attnres
