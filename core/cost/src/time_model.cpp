#include "attnres/time_model.hpp"

#include <algorithm>

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

OpCost attention_cost(const CostInputs& in, Phase phase, const Hardware& hw) {
  const double d = static_cast<double>(in.d_model), T = static_cast<double>(in.tokens);
  const double b = bytes_per_element(in.dtype), B = static_cast<double>(in.batch);
  const double tokens = tokens_in_step(in, phase);
  const double weights = 4.0 * d * d * b;  // q, k, v, o
  if (phase == Phase::prefill) {
    // Projections 8d^2 per token; scores and values 2·(T/2)·d each at mean causal context.
    const double flops = tokens * (8.0 * d * d + 2.0 * T * d);
    const double bytes = weights + tokens * d * b * 4.0;  // input, output, K and V written
    return roofline(flops, bytes, hw);
  }
  const double flops = tokens * (8.0 * d * d + 4.0 * T * d);
  const double bytes = weights + B * 2.0 * T * d * b + tokens * d * b * 2.0;  // KV cache read
  return roofline(flops, bytes, hw);
}

OpCost mlp_cost(const CostInputs& in, const MoeShape& moe, Phase phase, const Hardware& hw) {
  const double d = static_cast<double>(in.d_model), b = bytes_per_element(in.dtype);
  const double tokens = tokens_in_step(in, phase);
  if (moe.experts == 0) {
    const double F = static_cast<double>(in.ffn);
    return roofline(tokens * 6.0 * d * F, 3.0 * d * F * b + tokens * 2.0 * d * b, hw);
  }
  // MoE by active parameters: each token runs `active` routed + `shared` experts; the weights
  // read are those of the experts some token in the step uses (at most all of them).
  const double expert_weights = 3.0 * d * static_cast<double>(moe.expert_ffn) * b;
  const double active = static_cast<double>(moe.active + moe.shared);
  const double touched =
      std::min(static_cast<double>(moe.experts), tokens * static_cast<double>(moe.active)) +
      static_cast<double>(moe.shared);
  return roofline(tokens * 6.0 * d * static_cast<double>(moe.expert_ffn) * active,
                  touched * expert_weights + tokens * 2.0 * d * b, hw);
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

StackTime stack_time(const CostInputs& in, const MoeShape& moe, Phase phase, const Hardware& hw) {
  StackTime out;
  out.phase = phase;
  out.attention = attention_cost(in, phase, hw);
  out.mlp = mlp_cost(in, moe, phase, hw);
  const double attention_sublayers = static_cast<double>((in.sublayers + 1) / 2);
  const double mlp_sublayers = static_cast<double>(in.sublayers / 2);
  const double body = attention_sublayers * out.attention.seconds + mlp_sublayers * out.mlp.seconds;
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
