// The cost engine's inputs and everything at once (docs/math.md §3): try_resolve_cost_inputs
// derives L, N, S and F from what was given and names the first problem with its CostInputs
// field; evaluate_costs fills a CostReport from the formulas of cost_io.cpp, cost_flops.cpp,
// pipeline_payload.cpp and the named schemes' I/O rows (scheme_cost.cpp).
#include "attnres/cost.hpp"

#include <algorithm>
#include <limits>

#include "attnres/architecture.hpp"
#include "attnres/block_layout.hpp"
#include "attnres/checked_math.hpp"
#include "named_schemes.hpp"

namespace attnres {

namespace {

using Problem = std::optional<CostInputProblem>;

}  // namespace

std::optional<CostInputProblem> try_resolve_cost_inputs(CostInputs& in) {
  auto problem = [](const char* field, std::string message) -> Problem {
    return CostInputProblem{field, std::move(message)};
  };
  auto below = [](std::int64_t value, std::int64_t minimum, const char* field,
                  const char* meaning) -> Problem {
    if (value >= minimum) return std::nullopt;
    return CostInputProblem{field, std::string(meaning) + " must be >= " + std::to_string(minimum) +
                                       ", got " + std::to_string(value)};
  };
  if (in.sublayers == 0 && in.layers == 0) {
    return problem("sublayers", "give the number of sublayers L (or of transformer layers)");
  }
  if (in.layers != 0) {
    if (auto p = below(in.layers, 1, "layers", "transformer layers")) return p;
    if (in.layers > kMaxSublayers / 2) {
      return problem("layers", "transformer layers must be at most " +
                                   std::to_string(kMaxSublayers / 2) +
                                   " (L = " + std::to_string(kMaxSublayers) + " sublayers), got " +
                                   std::to_string(in.layers));
    }
    const std::int64_t from_layers = 2 * in.layers;
    if (in.sublayers != 0 && in.sublayers != from_layers) {
      return problem("sublayers", "sublayers L = " + std::to_string(in.sublayers) +
                                      " disagrees with " + std::to_string(in.layers) +
                                      " transformer layers (L = " + std::to_string(from_layers) +
                                      ")");
    }
    in.sublayers = from_layers;
  }
  if (auto p = below(in.sublayers, 1, "sublayers", "sublayers L")) return p;
  if (in.sublayers > kMaxSublayers) {
    return problem("sublayers", "sublayers L must be at most " + std::to_string(kMaxSublayers) +
                                    ", got " + std::to_string(in.sublayers));
  }
  if (auto p = below(in.d_model, 1, "d_model", "width d")) return p;
  const std::int64_t L = in.sublayers;
  if (in.block_layers != 0) {
    // K transformer layers per block are S = 2K sublayers (docs/math.md §3.6).
    if (auto p = below(in.block_layers, 1, "block_layers", "layers per block K")) return p;
    if (in.block_layers > L / 2) {
      return problem("block_layers", "layers per block K = " + std::to_string(in.block_layers) +
                                         " exceeds the model's " + std::to_string(L / 2) +
                                         " transformer layers (L = " + std::to_string(L) +
                                         " sublayers)");
    }
    const std::int64_t S = block_size_from_layers(in.block_layers);
    if (in.block_size != 0 && in.block_size != S) {
      return problem("block_layers", "layers per block K = " + std::to_string(in.block_layers) +
                                         " (S = 2K = " + std::to_string(S) +
                                         " sublayers) disagrees with block size S = " +
                                         std::to_string(in.block_size));
    }
    in.block_size = S;
    in.block_layers = 0;
  }
  if (!in.block_sizes.empty()) {
    if (auto p = block_list_problem(in.block_sizes, L)) return p;
    const auto n = static_cast<std::int64_t>(in.block_sizes.size());
    const std::int64_t s = (L + n - 1) / n;
    if ((in.blocks != 0 && in.blocks != n) || (in.block_size != 0 && in.block_size != s)) {
      return problem("block_sizes", "the block_sizes list (" + std::to_string(n) +
                                        " blocks) fixes N and S; give either the list or "
                                        "blocks / block_size / block_layers, not both");
    }
    in.blocks = n;
    in.block_size = s;
  }
  if (in.blocks == 0 && in.block_size == 0) {
    return problem("blocks", "give the number of blocks N (or the block size S)");
  }
  if (!in.block_sizes.empty()) {
    // N and S come from the list (above).
  } else if (in.block_size != 0) {
    if (auto p = below(in.block_size, 1, "block_size", "block size S")) return p;
    if (in.block_size > L) {
      return problem("block_size", "block size S = " + std::to_string(in.block_size) +
                                       " exceeds L = " + std::to_string(L) + " sublayers");
    }
    const std::int64_t n = block_count(L, in.block_size);
    if (in.blocks != 0 && in.blocks != n) {
      return problem("blocks", "blocks N = " + std::to_string(in.blocks) +
                                   " disagrees with block size S = " +
                                   std::to_string(in.block_size) + " (L = " + std::to_string(L) +
                                   " gives N = ceil(L/S) = " + std::to_string(n) + ")");
    }
    in.blocks = n;
  } else {
    if (auto p = below(in.blocks, 1, "blocks", "blocks N")) return p;
    if (in.blocks > L) {
      return problem("blocks", "blocks N = " + std::to_string(in.blocks) +
                                   " exceeds L = " + std::to_string(L) + " sublayers");
    }
    in.block_size = (L + in.blocks - 1) / in.blocks;
    const std::int64_t n = block_count(L, in.block_size);
    if (n != in.blocks) {
      return problem(
          "blocks",
          "N = " + std::to_string(in.blocks) + " blocks cannot cover L = " + std::to_string(L) +
              " sublayers with equal blocks (S = ceil(L/N) = " + std::to_string(in.block_size) +
              " gives " + std::to_string(n) + " blocks); give block_size instead");
    }
  }
  if (auto p = below(in.streams, 1, "streams", "residual streams m")) return p;
  if (auto p = below(in.ffn, 0, "ffn", "FFN width")) return p;
  if (in.d_model > std::numeric_limits<std::int64_t>::max() / 8) {
    return problem("d_model", "width d is too large");
  }
  if (auto p = below(in.tokens, 1, "tokens", "sequence length T")) return p;
  if (auto p = below(in.batch, 1, "batch", "batch B")) return p;
  if (auto p = below(in.seq_shards, 1, "seq_shards", "sequence shards")) return p;
  if (in.seq_shards > in.tokens) {
    return problem("seq_shards",
                   "sequence shards (" + std::to_string(in.seq_shards) +
                       ") exceed the sequence length T = " + std::to_string(in.tokens));
  }
  if (auto p = below(in.chunk, 0, "chunk", "chunk length")) return p;
  if (in.chunk > in.tokens) {
    return problem("chunk", "chunk length " + std::to_string(in.chunk) +
                                " exceeds T = " + std::to_string(in.tokens));
  }
  if (auto p = below(in.pp, 1, "pp", "pipeline ranks P")) return p;
  if (auto p = below(in.vpp, 1, "vpp", "virtual stages V")) return p;
  std::int64_t chunks = 0;
  if (__builtin_mul_overflow(in.pp, in.vpp, &chunks) || chunks > L) {
    return problem("pp", "P·V = " + std::to_string(in.pp) + " x " + std::to_string(in.vpp) +
                             " chunks exceed L = " + std::to_string(L) +
                             " sublayers (every chunk needs at least one sublayer)");
  }
  if (!in.stage_layers.empty()) {
    const std::int64_t layers = (L + 1) / 2;
    if (static_cast<std::int64_t>(in.stage_layers.size()) != chunks) {
      return problem("stage_layers", "the stage_layers list has " +
                                         std::to_string(in.stage_layers.size()) +
                                         " entries; P·V = " + std::to_string(in.pp) + " x " +
                                         std::to_string(in.vpp) + " = " + std::to_string(chunks) +
                                         " chunks expected (one entry per chunk, in chunk order)");
    }
    std::int64_t sum = 0;
    for (std::size_t c = 0; c < in.stage_layers.size(); ++c) {
      if (in.stage_layers[c] < 1) {
        return problem("stage_layers", "chunk " + std::to_string(c) + " has " +
                                           std::to_string(in.stage_layers[c]) +
                                           " layers; every chunk needs at least one");
      }
      if (__builtin_add_overflow(sum, in.stage_layers[c], &sum)) sum = layers + 1;
    }
    if (sum != layers) {
      return problem("stage_layers", "the stage_layers list sums to " + std::to_string(sum) +
                                         " layers; the model has " + std::to_string(layers) +
                                         " (L = " + std::to_string(L) + " sublayers)");
    }
  }
  if (auto p = resolve_architecture(in)) return p;
  // Products the engine forms later must fit 64 bits: B·b·N·T·d, (L+1)(L+2)/2 and (L+1)·d.
  std::int64_t product = 0;
  if (__builtin_mul_overflow(in.batch, std::int64_t{bytes_per_element(in.dtype)}, &product) ||
      __builtin_mul_overflow(product, in.blocks, &product) ||
      __builtin_mul_overflow(product, in.d_model, &product) ||
      __builtin_mul_overflow(product, in.tokens, &product)) {
    return problem("tokens", "prefill history bytes B·b·N·T·d = " + std::to_string(in.batch) +
                                 " x " + std::to_string(bytes_per_element(in.dtype)) + " x " +
                                 std::to_string(in.blocks) + " x " + std::to_string(in.tokens) +
                                 " x " + std::to_string(in.d_model) + " overflows 64-bit integers");
  }
  if (__builtin_mul_overflow(L + 1, L + 2, &product) ||
      __builtin_mul_overflow(L + 1, in.d_model, &product)) {
    return problem("sublayers", "L = " + std::to_string(L) + " with d = " +
                                    std::to_string(in.d_model) + " overflows 64-bit integers");
  }
  return std::nullopt;
}

CostInputs resolve_cost_inputs(CostInputs in) {
  if (auto problem = try_resolve_cost_inputs(in)) {
    throw CostInputError(problem->field, problem->message);
  }
  return in;
}

std::vector<std::int64_t> stage_last_sublayers(const CostInputs& in) {
  return in.stage_layers.empty() ? layer_aligned_chunks(in.sublayers, in.pp * in.vpp)
                                 : listed_chunks(in.sublayers, in.stage_layers);
}

std::string stage_split_warning(const CostInputs& in) {
  const auto split = split_layers(stage_last_sublayers(in));
  if (split.empty()) return "";
  std::string list;
  const std::size_t shown = std::min<std::size_t>(split.size(), 8);
  for (std::size_t i = 0; i < shown; ++i)
    list += (i == 0 ? "" : i + 1 == split.size() ? " and " : ", ") + std::to_string(split[i]);
  if (shown < split.size()) list += " and " + std::to_string(split.size() - shown) + " more";
  return "the stage boundaries split layer" + std::string(split.size() > 1 ? "s " : " ") + list +
         " (attention on one chunk, MLP on the next): P·V = " + std::to_string(in.pp * in.vpp) +
         " chunks exceed the " + std::to_string((in.sublayers + 1) / 2) +
         " layers; real pipelines keep layers whole (docs/math.md §3.3)";
}

std::vector<BoundaryPayload> pipeline_boundaries(const CostInputs& in, ResidualMode mode) {
  const auto last = stage_last_sublayers(in);
  if (mode == ResidualMode::block && !in.block_sizes.empty())
    return pipeline_boundaries(block_layout_of(in), in.pp, in.vpp, last);
  return pipeline_boundaries(mode, in.sublayers, mode == ResidualMode::full ? 1 : in.block_size,
                             in.pp, in.vpp, last);
}

CostReport evaluate_costs(const CostInputs& in) {
  CostReport r;
  r.inputs = in;
  const std::int64_t L = in.sublayers, d = in.d_model, N = in.blocks, S = in.block_size;
  r.io.standard = io_standard(d);
  r.io.block_two_phase = io_block_two_phase(N, S, d);
  r.io.full_two_phase = io_full_two_phase(N, S, d);
  r.io.full_naive = io_full_naive_mean(L, d);
  r.io.mhc = io_mhc(in.streams, d);
  for (std::size_t i = 0; i < kSchemeIoKeyCount; ++i) {
    r.scheme_io[i] = scheme_io(detail::scheme_of_io_key(i, in), in, kSchemeIoKeys[i].one_shot);
  }
  r.full_best_schedule = best_full_schedule_block(L, d);
  r.history_full_vectors = history_vectors_full(L);
  r.history_block_vectors = history_vectors_block(N);
  r.prefill = prefill_history_bytes(in.batch, in.tokens, N, d, bytes_per_element(in.dtype),
                                    in.seq_shards, in.chunk);
  r.pipeline_paper = pipeline_comm_paper(in.pp, in.vpp, N, d);
  r.boundaries = pipeline_boundaries(in, ResidualMode::block);
  std::int64_t naive = 0, cached = 0, own = 0, peak_naive = 0, peak_cached = 0;
  for (const auto& b : r.boundaries) {
    naive += b.naive_vectors;
    cached += b.cached_vectors;
    own += b.cached_own_vectors;
    peak_naive = std::max(peak_naive, b.naive_vectors);
    peak_cached = std::max(peak_cached, b.cached_vectors);
  }
  const std::string what = "pipeline elements";
  r.boundary_naive_elements = checked_multiply(naive, d, what);
  r.boundary_cached_elements = checked_multiply(cached, d, what);
  r.boundary_cached_own_elements = checked_multiply(own, d, what);
  r.boundary_peak_naive_elements = checked_multiply(peak_naive, d, what);
  r.boundary_peak_cached_elements = checked_multiply(peak_cached, d, what);
  r.depth_flops_full = depth_attention_flops(ResidualMode::full, L, 1, d);
  r.depth_flops_block = depth_attention_flops(ResidualMode::block, L, S, d);
  r.model_flops = model_flops_per_token(in);
  return r;
}

}  // namespace attnres
