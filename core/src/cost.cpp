#include "attnres/cost.hpp"
#include "attnres/cost_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attnres/checked_math.hpp"

namespace attnres {

std::string to_string(DType dtype) {
  switch (dtype) {
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
    case DType::fp32: return "fp32";
    case DType::fp8: return "fp8";
  }
  return "?";
}

DType parse_dtype(const std::string& text, const std::string& where) {
  if (text == "bf16") return DType::bf16;
  if (text == "fp16") return DType::fp16;
  if (text == "fp32") return DType::fp32;
  if (text == "fp8") return DType::fp8;
  const std::string hint = did_you_mean(text, {"bf16", "fp16", "fp32", "fp8"});
  throw Error(where + ": unknown dtype '" + text + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
              "; expected bf16, fp16, fp32 or fp8");
}

int bytes_per_element(DType dtype) {
  switch (dtype) {
    case DType::bf16:
    case DType::fp16: return 2;
    case DType::fp32: return 4;
    case DType::fp8: return 1;
  }
  return 0;
}

// ---------------------------------------------------------------- SPEC §3.1, paper Table 1

ResidualIo io_standard(std::int64_t d) {
  // Read h_l and f_l(h_l), write h_{l+1}.
  return {2.0 * static_cast<double>(d), static_cast<double>(d)};
}

ResidualIo io_block_two_phase(std::int64_t blocks, std::int64_t block_size, std::int64_t d) {
  // Phase 1 reads the N block summaries once per block (amortised over its S sublayers: N/S),
  // phase 2 reads 3d (statistics, partial sum, output); writes the partial sum and the output.
  const double D = static_cast<double>(d);
  return {(static_cast<double>(blocks) / static_cast<double>(block_size) + 3.0) * D, 2.0 * D};
}

ResidualIo io_full_two_phase(std::int64_t blocks, std::int64_t block_size, std::int64_t d) {
  // Appendix B: (S + N - 2)d reads, 2d writes per sublayer.
  const double D = static_cast<double>(d);
  return {static_cast<double>(block_size + blocks - 2) * D, 2.0 * D};
}

ResidualIo io_full_naive_at(std::int64_t sublayer, std::int64_t d) {
  // Keys and values of the l - 1 earlier outputs, then write the output.
  const double D = static_cast<double>(d);
  return {2.0 * static_cast<double>(sublayer - 1) * D, D};
}

ResidualIo io_full_naive_mean(std::int64_t sublayers, std::int64_t d) {
  // Mean over l = 1..L of 2(l-1)d reads = (L - 1)d; total L·d.
  const double D = static_cast<double>(d);
  return {static_cast<double>(sublayers - 1) * D, D};
}

ResidualIo io_mhc(std::int64_t streams, std::int64_t d) {
  // Table 1: (8m + 2)d + 2m^2 + 4m in all; SPEC splits the vector terms (6m+2)d reads, 2m·d
  // writes. The scalar mixing terms (2m^2 + 4m) are split evenly (our choice, docs/math.md).
  const double m = static_cast<double>(streams);
  const double D = static_cast<double>(d);
  const double scalars = m * m + 2.0 * m;
  return {(6.0 * m + 2.0) * D + scalars, 2.0 * m * D + scalars};
}

std::int64_t block_count(std::int64_t sublayers, std::int64_t block_size) {
  return (sublayers + block_size - 1) / block_size;
}

ScheduleChoice best_full_schedule_block(std::int64_t sublayers, std::int64_t d) {
  ScheduleChoice best;
  std::int64_t best_sum = 0;
  for (std::int64_t s = 1; s <= sublayers; ++s) {
    const std::int64_t n = block_count(sublayers, s);
    if (best.block_size == 0 || s + n < best_sum) {
      best_sum = s + n;
      best.block_size = s;
      best.blocks = n;
    }
    if (s > n + 1) break;  // past sqrt(L), S + ceil(L/S) only grows
  }
  best.io_elements = io_full_two_phase(best.blocks, best.block_size, d).total();
  return best;
}

// ---------------------------------------------------------------- SPEC §3.2

std::int64_t history_vectors_full(std::int64_t sublayers) { return sublayers + 1; }
std::int64_t history_vectors_block(std::int64_t blocks) { return blocks + 1; }

PrefillMemory prefill_history_bytes(std::int64_t batch, std::int64_t tokens, std::int64_t blocks,
                                    std::int64_t d, int bytes_per_element,
                                    std::int64_t seq_shards, std::int64_t chunk_tokens) {
  const std::string what = "prefill history bytes (B·b·N·T·d)";
  const std::int64_t per_token = checked_multiply(
      checked_multiply(checked_multiply(batch, bytes_per_element, what), blocks, what), d, what);
  PrefillMemory memory;
  memory.total_bytes = checked_multiply(per_token, tokens, what);
  memory.per_device_bytes = memory.total_bytes / seq_shards;
  const std::int64_t chunk = chunk_tokens > 0 ? std::min(chunk_tokens, tokens) : tokens;
  memory.per_device_chunked_bytes = checked_multiply(per_token, chunk, what) / seq_shards;
  return memory;
}

// ---------------------------------------------------------------- SPEC §3.3

PipelineCommPaper pipeline_comm_paper(std::int64_t pp, std::int64_t vpp, std::int64_t blocks,
                                      std::int64_t d) {
  const double P = static_cast<double>(pp), V = static_cast<double>(vpp);
  const double C = P * V;
  PipelineCommPaper comm;
  comm.blocks_per_chunk = static_cast<double>(blocks) / C;
  const double unit = comm.blocks_per_chunk * static_cast<double>(d);  // N_p · d
  comm.naive_elements = C * (C - 1.0) / 2.0 * unit;
  comm.cached_elements = (P * (P - 1.0) / 2.0 + (V - 1.0) * P * P) * unit;
  comm.peak_naive_elements = (C - 1.0) * unit;
  comm.peak_cached_elements = (vpp > 1 ? P : P - 1.0) * unit;
  return comm;
}

std::vector<std::int64_t> chunk_last_sublayers(std::int64_t sublayers, std::int64_t chunks) {
  std::vector<std::int64_t> last(static_cast<std::size_t>(chunks));
  const std::int64_t base = sublayers / chunks, extra = sublayers % chunks;
  std::int64_t end = 0;
  for (std::int64_t c = 0; c < chunks; ++c) {
    end += base + (c < extra ? 1 : 0);
    last[static_cast<std::size_t>(c)] = end;
  }
  return last;
}

std::vector<BoundaryPayload> pipeline_boundaries(ResidualMode mode, std::int64_t sublayers,
                                                 std::int64_t block_size, std::int64_t pp,
                                                 std::int64_t vpp) {
  if (sublayers < 1 || pp < 1 || vpp < 1) {
    throw Error("pipeline boundaries: L, P and V must be >= 1");
  }
  const std::int64_t chunks = checked_multiply(pp, vpp, "pipeline chunks P·V");
  if (chunks > sublayers) {
    throw Error("pipeline boundaries: P·V = " + std::to_string(chunks) +
                " chunks exceed L = " + std::to_string(sublayers) + " sublayers");
  }
  const std::int64_t S = mode == ResidualMode::full ? 1 : block_size;
  if (mode == ResidualMode::block && (S < 1 || S > sublayers)) {
    throw Error("pipeline boundaries: block size must be between 1 and L");
  }
  const auto last = chunk_last_sublayers(sublayers, chunks);
  auto completed = [&](std::int64_t e) { return e / S; };  // e < L at every boundary
  std::vector<BoundaryPayload> out;
  out.reserve(static_cast<std::size_t>(chunks - 1));
  for (std::int64_t c = 0; c + 1 < chunks; ++c) {
    BoundaryPayload b;
    b.from_chunk = c;
    b.to_chunk = c + 1;
    b.from_rank = c % pp;
    b.to_rank = (c + 1) % pp;
    b.last_sublayer = last[static_cast<std::size_t>(c)];
    if (mode == ResidualMode::standard) {
      // The hidden state h is the whole payload.
      b.naive_vectors = b.cached_vectors = b.cached_own_vectors = 1;
      out.push_back(b);
      continue;
    }
    b.completed_blocks = completed(b.last_sublayer);
    b.partial = b.last_sublayer % S != 0;
    const std::int64_t k = c + 1;  // receiving chunk
    const std::int64_t partial = b.partial ? 1 : 0;
    b.naive_vectors = 1 + b.completed_blocks + partial;  // embedding + blocks + partial
    b.naive_block_vectors = b.completed_blocks;
    if (k < pp) {
      // First visit of this rank: nothing cached yet.
      b.cached_vectors = b.cached_own_vectors = b.naive_vectors;
      b.cached_block_vectors = b.completed_blocks;
    } else {
      // The rank last ran chunk k - P: it received the blocks completed before that chunk
      // (none for rank 0's chunk 0) and produced those completed by its end.
      const std::int64_t previous = k - pp;
      const std::int64_t received =
          previous == 0 ? 0 : completed(last[static_cast<std::size_t>(previous - 1)]);
      const std::int64_t produced = completed(last[static_cast<std::size_t>(previous)]);
      b.cached_block_vectors = b.completed_blocks - received;
      b.cached_vectors = b.cached_block_vectors + partial;
      b.cached_own_vectors = b.completed_blocks - produced + partial;
    }
    out.push_back(b);
  }
  return out;
}

// ---------------------------------------------------------------- arithmetic

std::int64_t depth_read_source_pairs(ResidualMode mode, std::int64_t sublayers,
                                     std::int64_t block_size) {
  const std::int64_t L = sublayers;
  const std::string what = "depth-attention source count";
  switch (mode) {
    case ResidualMode::standard: return 0;
    case ResidualMode::full:
      // Read r sees r + 1 sources, r = 0..L.
      return checked_multiply(L + 1, L + 2, what) / 2;
    case ResidualMode::block: {
      // The i-th sublayer of block n sees n sources, plus the partial sum when i >= 2; the final
      // read sees N + 1.
      const std::int64_t S = block_size, N = block_count(L, S), last_size = L - (N - 1) * S;
      const std::int64_t full_blocks = checked_multiply(S, checked_multiply(N - 1, N, what) / 2, what);
      return checked_add(checked_add(full_blocks, checked_multiply(N, last_size, what), what),
                         (L - N) + (N + 1), what);
    }
  }
  return 0;
}

double depth_attention_flops(ResidualMode mode, std::int64_t sublayers, std::int64_t block_size,
                             std::int64_t d) {
  if (mode == ResidualMode::standard) return 0.0;
  const double D = static_cast<double>(d);
  return static_cast<double>(depth_read_source_pairs(mode, sublayers, block_size)) * 6.0 * D +
         static_cast<double>(sublayers + 1) * 2.0 * D;
}

double model_flops_per_token(std::int64_t sublayers, std::int64_t d, std::int64_t ffn,
                             std::int64_t tokens) {
  const double D = static_cast<double>(d);
  const double attention = 8.0 * D * D + 2.0 * static_cast<double>(tokens) * D;
  const double mlp = 6.0 * D * static_cast<double>(ffn);
  const auto attention_count = static_cast<double>((sublayers + 1) / 2);
  const auto mlp_count = static_cast<double>(sublayers / 2);
  return attention_count * attention + mlp_count * mlp;
}

// ---------------------------------------------------------------- SPEC §3.5

double ScalingFit::loss_at(double compute) const { return A * std::pow(compute, -a); }
double ScalingFit::compute_for(double loss) const { return std::pow(A / loss, 1.0 / a); }

const std::array<ScalingFit, 3>& paper_scaling_fits() {
  static const std::array<ScalingFit, 3> fits = {ScalingFit{"baseline", 1.891, 0.057},
                                                 ScalingFit{"block", 1.870, 0.058},
                                                 ScalingFit{"full", 1.865, 0.057}};
  return fits;
}

ScalingAtLoss scaling_at_loss(double target_loss) {
  if (!(target_loss > 0.0) || !std::isfinite(target_loss)) {
    throw Error("target loss must be a positive number, got " + std::to_string(target_loss));
  }
  const auto& fits = paper_scaling_fits();
  ScalingAtLoss out;
  out.target_loss = target_loss;
  out.compute_baseline = fits[0].compute_for(target_loss);
  out.compute_block = fits[1].compute_for(target_loss);
  out.compute_full = fits[2].compute_for(target_loss);
  out.multiplier_block = out.compute_baseline / out.compute_block;
  out.multiplier_full = out.compute_baseline / out.compute_full;
  return out;
}

// ---------------------------------------------------------------- all together

std::optional<CostInputProblem> try_resolve_cost_inputs(CostInputs& in) {
  using Problem = std::optional<CostInputProblem>;
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
    if (in.layers > (std::int64_t{1} << 61)) return problem("layers", "transformer layers is too large");
    const std::int64_t from_layers = 2 * in.layers;
    if (in.sublayers != 0 && in.sublayers != from_layers) {
      return problem("sublayers", "sublayers L = " + std::to_string(in.sublayers) + " disagrees with " +
                                      std::to_string(in.layers) + " transformer layers (L = " +
                                      std::to_string(from_layers) + ")");
    }
    in.sublayers = from_layers;
  }
  if (auto p = below(in.sublayers, 1, "sublayers", "sublayers L")) return p;
  if (auto p = below(in.d_model, 1, "d_model", "width d")) return p;
  const std::int64_t L = in.sublayers;
  if (in.blocks == 0 && in.block_size == 0) {
    return problem("blocks", "give the number of blocks N (or the block size S)");
  }
  if (in.block_size != 0) {
    if (auto p = below(in.block_size, 1, "block_size", "block size S")) return p;
    if (in.block_size > L) {
      return problem("block_size", "block size S = " + std::to_string(in.block_size) +
                                       " exceeds L = " + std::to_string(L) + " sublayers");
    }
    const std::int64_t n = block_count(L, in.block_size);
    if (in.blocks != 0 && in.blocks != n) {
      return problem("blocks", "blocks N = " + std::to_string(in.blocks) +
                                   " disagrees with block size S = " + std::to_string(in.block_size) +
                                   " (L = " + std::to_string(L) + " gives N = ceil(L/S) = " +
                                   std::to_string(n) + ")");
    }
    in.blocks = n;
  } else {
    if (auto p = below(in.blocks, 1, "blocks", "blocks N")) return p;
    if (in.blocks > L) {
      return problem("blocks", "blocks N = " + std::to_string(in.blocks) + " exceeds L = " +
                                   std::to_string(L) + " sublayers");
    }
    in.block_size = (L + in.blocks - 1) / in.blocks;
    const std::int64_t n = block_count(L, in.block_size);
    if (n != in.blocks) {
      return problem("blocks", "N = " + std::to_string(in.blocks) + " blocks cannot cover L = " +
                                   std::to_string(L) + " sublayers with equal blocks (S = ceil(L/N) = " +
                                   std::to_string(in.block_size) + " gives " + std::to_string(n) +
                                   " blocks); give block_size instead");
    }
  }
  if (auto p = below(in.streams, 1, "streams", "residual streams m")) return p;
  if (auto p = below(in.ffn, 0, "ffn", "FFN width")) return p;
  if (in.ffn == 0) {
    if (in.d_model > std::numeric_limits<std::int64_t>::max() / 8) {
      return problem("d_model", "width d is too large");
    }
    in.ffn = in.d_model * 8 / 3;
  }
  if (auto p = below(in.tokens, 1, "tokens", "sequence length T")) return p;
  if (auto p = below(in.batch, 1, "batch", "batch B")) return p;
  if (auto p = below(in.seq_shards, 1, "seq_shards", "sequence shards")) return p;
  if (in.seq_shards > in.tokens) {
    return problem("seq_shards", "sequence shards (" + std::to_string(in.seq_shards) +
                                     ") exceed the sequence length T = " + std::to_string(in.tokens));
  }
  if (auto p = below(in.chunk, 0, "chunk", "chunk length")) return p;
  if (in.chunk > in.tokens) {
    return problem("chunk", "chunk length " + std::to_string(in.chunk) + " exceeds T = " +
                                std::to_string(in.tokens));
  }
  if (auto p = below(in.pp, 1, "pp", "pipeline ranks P")) return p;
  if (auto p = below(in.vpp, 1, "vpp", "virtual stages V")) return p;
  std::int64_t chunks = 0;
  if (__builtin_mul_overflow(in.pp, in.vpp, &chunks) || chunks > L) {
    return problem("pp", "P·V = " + std::to_string(in.pp) + " x " + std::to_string(in.vpp) +
                             " chunks exceed L = " + std::to_string(L) +
                             " sublayers (every chunk needs at least one sublayer)");
  }
  // Products the engine forms later must fit 64 bits: B·b·N·T·d, (L+1)(L+2)/2 and (L+1)·d.
  std::int64_t product = 0;
  if (__builtin_mul_overflow(in.batch, std::int64_t{bytes_per_element(in.dtype)}, &product) ||
      __builtin_mul_overflow(product, in.blocks, &product) ||
      __builtin_mul_overflow(product, in.d_model, &product) ||
      __builtin_mul_overflow(product, in.tokens, &product)) {
    return problem("tokens", "prefill history bytes B·b·N·T·d = " + std::to_string(in.batch) + " x " +
                                 std::to_string(bytes_per_element(in.dtype)) + " x " +
                                 std::to_string(in.blocks) + " x " + std::to_string(in.tokens) +
                                 " x " + std::to_string(in.d_model) + " overflows 64-bit integers");
  }
  if (__builtin_mul_overflow(L + 1, L + 2, &product) ||
      __builtin_mul_overflow(L + 1, in.d_model, &product)) {
    return problem("sublayers", "L = " + std::to_string(L) + " with d = " + std::to_string(in.d_model) +
                                    " overflows 64-bit integers");
  }
  return std::nullopt;
}

CostInputs resolve_cost_inputs(CostInputs in) {
  if (auto problem = try_resolve_cost_inputs(in)) {
    throw CostInputError(problem->field, problem->message);
  }
  return in;
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
  r.full_best_schedule = best_full_schedule_block(L, d);
  r.history_full_vectors = history_vectors_full(L);
  r.history_block_vectors = history_vectors_block(N);
  r.prefill = prefill_history_bytes(in.batch, in.tokens, N, d, bytes_per_element(in.dtype),
                                    in.seq_shards, in.chunk);
  r.pipeline_paper = pipeline_comm_paper(in.pp, in.vpp, N, d);
  r.boundaries = pipeline_boundaries(ResidualMode::block, L, S, in.pp, in.vpp);
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
  r.model_flops = model_flops_per_token(L, d, in.ffn, in.tokens);
  return r;
}

}  // namespace attnres
