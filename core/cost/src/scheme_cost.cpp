// The costs of any residual scheme (docs/scheme-costs.md, the contract for every row and every
// choice below): the sizes a scheme is costed at, its I/O row with formula and schedule (two-phase
// or one-shot), the settings that do not apply to it (scheme_problem), and scheme_cost — stored
// history, parameters, mixing FLOPs and whether the two-phase schedule (docs/math.md §2.4)
// applies. The named schemes and spec strings are in named_schemes.cpp.
#include <limits>
#include <optional>
#include <string>

#include "attnres/cost.hpp"

namespace attnres {

namespace {

using Problem = std::optional<CostInputProblem>;

// The sizes a scheme is costed at (docs/scheme-costs.md "Sizes").
struct SchemeSizes {
  std::int64_t L = 0, d = 0;
  std::int64_t N = 0, S = 0;  // Block: its own blocks; Full layout: the two-phase schedule block
  std::int64_t window = 0;    // the effective window: 0 when off or W >= L (Full AttnRes)
  std::int64_t m = 0;
  bool full_layout = false;  // Full, DenseFormer (and rescaled): every output is a source
  bool input_query = false;
  bool values_only = false;  // weights known ahead: DenseFormer, mixing = scalars
};

SchemeSizes sizes_of(const AttnResConfig& scheme, const CostInputs& in) {
  SchemeSizes z;
  z.L = in.sublayers;
  z.d = in.d_model;
  z.N = in.blocks;
  z.S = in.block_size;
  if (scheme.mode == ResidualMode::block && scheme.block_size > 0) {
    z.S = scheme.block_size;
    z.N = block_count(z.L, z.S);
  }
  z.full_layout = scheme.mode == ResidualMode::full || scheme.mode == ResidualMode::denseformer ||
                  scheme.mode == ResidualMode::rescaled;
  if (scheme.mode == ResidualMode::full && scheme.window > 0 && scheme.window < z.L)
    z.window = scheme.window;
  z.m = scheme.streams;
  z.input_query = scheme.uses_query() && scheme.query_source == QuerySource::input;
  z.values_only = scheme.mode == ResidualMode::denseformer ||
                  (scheme.attention_mode() && scheme.mixing == DepthMixing::scalars);
  return z;
}

// (read, source) pairs of the scheme's layout over the L + 1 reads.
std::int64_t pairs_of(const AttnResConfig& scheme, const SchemeSizes& z) {
  if (scheme.mode == ResidualMode::block)
    return depth_read_source_pairs(ResidualMode::block, z.L, z.S);
  return depth_read_source_pairs_window(z.L, z.window);
}

std::string pairs_formula(const AttnResConfig& scheme, const SchemeSizes& z) {
  if (scheme.mode == ResidualMode::block) return "P = SN(N - 1)/2 + N(L - (N - 1)S) + L + 1";
  if (z.window > 0) return "P = (L + 1) + W(W + 1)/2 + (L - W)W";
  return "P = (L + 1)(L + 2)/2";
}

// The I/O row; formula and schedule text only when asked for (sweeps evaluate millions of
// settings).
ResidualIo io_row(const AttnResConfig& scheme, const CostInputs& in, bool one_shot,
                  std::string* formula, std::string* schedule) {
  const SchemeSizes z = sizes_of(scheme, in);
  auto say = [&](const char* f, const char* s) {
    if (formula) *formula = f;
    if (schedule) *schedule = s;
  };
  switch (scheme.mode) {
    case ResidualMode::standard:
      say("3d", "running sum: read h and f(h), write h (paper Table 1)");
      return io_standard(z.d);
    case ResidualMode::rescaled:
      say("3d", "running mean h <- (r h + v)/(r + 1): read h and v, write h (the standard row)");
      return io_standard(z.d);
    case ResidualMode::mhc:
      say("(8m + 2)d + 2m^2 + 4m", scheme.dynamic
                                       ? "stream update (paper Table 1)"
                                       : "stream update (paper Table 1's row; static coefficients "
                                         "are not subtracted)");
      return io_mhc(z.m, z.d);
    case ResidualMode::full:
    case ResidualMode::block:
    case ResidualMode::denseformer:
      break;
  }
  if (!one_shot && !z.input_query && z.window == 0) {
    if (z.full_layout) {
      say("(S + N)d", "two-phase, schedule block S (Appendix B)");
      return io_full_two_phase(z.N, z.S, z.d);
    }
    say("(N/S + 5)d", "two-phase (paper Table 1)");
    return io_block_two_phase(z.N, z.S, z.d);
  }
  // One-shot: each read reads its sources, twice (keys, then values) when scores need them,
  // once when the weights are known ahead; an input-dependent query also reads u.
  ResidualIo io;
  std::string f;
  if (!z.full_layout) {
    io = io_block_one_shot(z.L, z.S, z.d);
    f = z.values_only ? "(n + 1)d" : "(2n + 1)d";
  } else if (z.window > 0) {
    io = io_full_window_mean(z.L, z.window, z.d);
    f = z.values_only ? "(W(2L - W - 1)/(2L) + 1)d" : "(W(2L - W - 1)/L + 1)d";
  } else {
    io = io_full_naive_mean(z.L, z.d);
    f = z.values_only ? "((L - 1)/2 + 1)d" : "Ld";
  }
  if (z.values_only) io.reads /= 2.0;
  if (z.input_query) {
    io.reads += static_cast<double>(z.d);
    f += " + d";
  }
  if (formula) *formula = f;
  if (schedule) {
    *schedule = z.values_only ? "one-shot, values only" : "one-shot, keys and values";
    if (!z.full_layout) *schedule += " of n = P/(L + 1) sources per read";
    if (z.input_query) *schedule += ", plus u for the input-dependent query";
  }
  return io;
}

// Stored history per token (docs/scheme-costs.md "Stored depth history").
void add_stored_history(const AttnResConfig& scheme, const SchemeSizes& z, int b, SchemeCost& out) {
  const double D = static_cast<double>(z.d);
  switch (scheme.mode) {
    case ResidualMode::standard:
      out.history_vectors = 1;
      out.history_formula = "1 (the running sum h)";
      break;
    case ResidualMode::rescaled:
      out.history_vectors = 1;
      out.history_formula = "1 (the running mean h)";
      break;
    case ResidualMode::mhc:
      out.history_vectors = z.m;
      out.history_formula = "m (the streams)";
      break;
    case ResidualMode::block:
      out.history_vectors = history_vectors_block(z.N);
      out.history_formula = "N + 1 (+ the running partial)";
      break;
    case ResidualMode::full:
    case ResidualMode::denseformer:
      out.history_vectors = z.window > 0 ? z.window + 1 : history_vectors_full(z.L);
      out.history_formula = z.window > 0 ? "W + 1 (the embedding and the last W outputs)" : "L + 1";
      break;
  }
  out.history_bytes = static_cast<double>(out.history_vectors) * D * b;
}

// Parameters of the whole model and mixing FLOPs per token (docs/scheme-costs.md "Parameters
// (whole model)", "Mixing FLOPs").
void add_params_and_flops(const AttnResConfig& scheme, const SchemeSizes& z, SchemeCost& out) {
  const double L = static_cast<double>(z.L), D = static_cast<double>(z.d), R = L + 1.0;
  const double m = static_cast<double>(z.m);
  const bool read_based = scheme.mode == ResidualMode::full || scheme.mode == ResidualMode::block ||
                          scheme.mode == ResidualMode::denseformer;
  const bool normalised = scheme.gate != DepthGate::sigmoid;
  // "0" goes through a temporary: GCC 12 at -O3 reports a false -Wrestrict on assigning the
  // literal itself here (as on "literal" + std::string elsewhere).
  if (scheme.mode == ResidualMode::standard) {
    out.params_formula = std::string("0");
    out.mixing_flops = L * D;
    out.flops_formula = "Ld (one add per sublayer)";
  } else if (scheme.mode == ResidualMode::rescaled) {
    out.params_formula = std::string("0");
    out.mixing_flops = 3.0 * L * D;
    out.flops_formula = "3Ld (two scalings and an add per sublayer)";
  } else if (scheme.mode == ResidualMode::mhc) {
    const double I = static_cast<double>(scheme.sinkhorn_iterations);
    const double coefficients = L * (2.0 * m + m * m);
    if (scheme.dynamic) {
      out.params = coefficients * (1.0 + m * D);
      out.params_formula = "L(2m + m^2)(1 + md)";
      out.mixing_flops =
          L * ((2.0 * m * m * m + 6.0 * m * m + 6.0 * m) * D + 4.0 * I * m * m) + m * D;
      out.flops_formula = "L[(2m^3 + 6m^2 + 6m)d + 4Im^2] + md";
    } else {
      out.params = coefficients;
      out.params_formula = "L(2m + m^2)";
      out.mixing_flops = L * (2.0 * m * m + 4.0 * m) * D + m * D;
      out.flops_formula = "L(2m^2 + 4m)d + md";
    }
  } else if (read_based) {
    const double P = static_cast<double>(pairs_of(scheme, z));
    const std::string P_text = pairs_formula(scheme, z);
    int per_pair = 2, per_read = 0;  // in units of d
    if (scheme.mode == ResidualMode::denseformer) {
      out.params = P;
      out.params_formula = "P (one weight per (read, source)); " + P_text;
    } else if (scheme.mixing == DepthMixing::scalars) {
      per_read = normalised ? 1 : 0;
      out.params = P;
      out.params_formula = "P (one logit per (read, source)); " + P_text;
    } else {
      per_pair = scheme.key_norm ? 6 : 4;
      per_read = (scheme.key_norm ? 1 : 0) + (normalised ? 1 : 0);
      const double per_read_params =
          (scheme.key_norm ? 2.0 : 1.0) * D + (z.input_query ? D * D : 0.0);
      out.params = R * per_read_params;
      out.params_formula = z.input_query
                               ? (scheme.key_norm ? "(L + 1)(2d + d^2)" : "(L + 1)(d + d^2)")
                               : (scheme.key_norm ? "2(L + 1)d" : "(L + 1)d");
    }
    out.mixing_flops = P * per_pair * D + R * per_read * D;
    std::string f = std::to_string(per_pair) + "dP";
    if (per_read > 0) {
      f += " + ";
      if (per_read > 1) f += std::to_string(per_read);
      f += "d(L + 1)";
    }
    if (z.input_query) {
      out.mixing_flops += R * (2.0 * D * D + 4.0 * D);
      f += " + (2d^2 + 4d)(L + 1)";
    }
    out.flops_formula = f + "; " + P_text;
  }
  out.mixing_flops_per_sublayer = out.mixing_flops / L;
}

// Whether the two-phase schedule applies, and why (docs/scheme-costs.md "Two-phase schedule").
void add_two_phase(const AttnResConfig& scheme, const SchemeSizes& z, SchemeCost& out) {
  const std::string limit = scheme.two_phase_limit();
  out.two_phase = limit.empty();
  if (!out.two_phase) {
    out.two_phase_reason = limit;
  } else if (scheme.mode == ResidualMode::rescaled) {
    out.two_phase_reason =
        "applies (fixed weights), but the running mean reads no history: the row counts the "
        "running update";
  } else if (scheme.mode == ResidualMode::denseformer) {
    out.two_phase_reason = "applies: the weights are parameters, known before phase 1";
  } else if (scheme.mixing == DepthMixing::scalars) {
    out.two_phase_reason = "applies: the mixing logits are parameters, known before phase 1";
  } else {
    out.two_phase_reason = "applies: the static queries of a group are known before phase 1";
    if (scheme.gate == DepthGate::sigmoid)
      out.two_phase_reason += "; unnormalised sums merge without a max";
  }
  if (out.two_phase && z.window > 0) {
    out.two_phase_reason +=
        "; the I/O row counts one-shot reads (no closed form for a windowed two-phase schedule)";
  }
}

}  // namespace

std::optional<CostInputProblem> scheme_problem(const AttnResConfig& c, const CostInputs& in) {
  const AttnResConfig defaults;
  const std::string mode = to_string(c.mode);
  auto only_for = [&](bool applies, bool is_default, const char* key,
                      const char* modes) -> Problem {
    if (applies || is_default) return std::nullopt;
    std::string message = key;
    message += " applies to ";
    message += modes;
    message += " only, not to mode ";
    message += mode;
    return CostInputProblem{key, message};
  };
  const std::int64_t L = in.sublayers;
  if (c.mode == ResidualMode::block) {
    const std::int64_t S = c.block_size > 0 ? c.block_size : in.block_size;
    if (c.block_size < 0 || S > L) {
      return CostInputProblem{
          "block_size", "block_size must be between 1 and L = " + std::to_string(L) +
                            " sublayers for Block AttnRes, got " + std::to_string(c.block_size)};
    }
  } else if (auto p =
                 only_for(false, c.block_size == 0, "block_size", "Block AttnRes (mode block)")) {
    return p;
  }
  const bool attention = c.attention_mode(), query = c.uses_query(),
             mhc = c.mode == ResidualMode::mhc;
  const char* query_modes = "Full and Block AttnRes with mixing = attention";
  if (auto p = only_for(attention, c.gate == defaults.gate, "gate", "Full and Block AttnRes"))
    return p;
  if (auto p = only_for(attention, c.mixing == defaults.mixing, "mixing", "Full and Block AttnRes"))
    return p;
  if (auto p = only_for(c.mode == ResidualMode::full, c.window == defaults.window, "window",
                        "Full AttnRes (mode full)")) {
    return p;
  }
  if (auto p = only_for(query, c.key_norm == defaults.key_norm, "key_norm", query_modes)) return p;
  if (auto p = only_for(query, c.heads == defaults.heads, "heads", query_modes)) return p;
  if (auto p =
          only_for(query, c.query_source == defaults.query_source, "query_source", query_modes))
    return p;
  if (auto p = only_for(mhc, c.streams == defaults.streams, "streams", "mHC (mode mhc)")) return p;
  if (auto p = only_for(mhc, c.dynamic == defaults.dynamic, "dynamic", "mHC (mode mhc)")) return p;
  if (auto p = only_for(mhc, c.sinkhorn_iterations == defaults.sinkhorn_iterations,
                        "sinkhorn_iterations", "mHC (mode mhc)")) {
    return p;
  }
  if (c.window < 0) {
    return CostInputProblem{"window",
                            "window must be >= 0 (0 = no window), got " + std::to_string(c.window)};
  }
  if (c.heads < 1 || in.d_model % c.heads != 0) {
    return CostInputProblem{
        "heads", "heads (" + std::to_string(c.heads) +
                     ") must be a positive divisor of d = " + std::to_string(in.d_model)};
  }
  if (c.streams < 1) {
    return CostInputProblem{"streams", "streams must be at least 1 (mHC needs a stream), got " +
                                           std::to_string(c.streams)};
  }
  if (c.sinkhorn_iterations < 1) {
    return CostInputProblem{"sinkhorn_iterations", "sinkhorn_iterations must be at least 1, got " +
                                                       std::to_string(c.sinkhorn_iterations)};
  }
  return std::nullopt;
}

ResidualIo scheme_io(const AttnResConfig& scheme, const CostInputs& in, bool one_shot) {
  return io_row(scheme, in, one_shot, nullptr, nullptr);
}

SchemeCost scheme_cost(const AttnResConfig& scheme, const CostInputs& in) {
  if (auto problem = scheme_problem(scheme, in))
    throw CostInputError(problem->field, problem->message);
  SchemeCost out;
  out.scheme = scheme;
  const SchemeSizes z = sizes_of(scheme, in);
  if (scheme.mode == ResidualMode::block && scheme.block_size == 0 &&
      z.S <= std::numeric_limits<int>::max()) {
    out.scheme.block_size = static_cast<int>(z.S);
  }
  out.spec = scheme_spec(out.scheme);
  out.description = out.scheme.describe();
  out.io = io_row(scheme, in, false, &out.io_formula, &out.io_schedule);
  out.io_one_shot = io_row(scheme, in, true, &out.io_one_shot_formula, nullptr);
  add_stored_history(scheme, z, bytes_per_element(in.dtype), out);
  add_params_and_flops(scheme, z, out);
  add_two_phase(scheme, z, out);
  return out;
}

}  // namespace attnres
