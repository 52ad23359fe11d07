// Memory of the residual mechanism (docs/math.md §3.1–3.2): element sizes of the data types, the
// residual I/O per token per sublayer of each paper Table 1 row (and the one-shot and windowed
// rows of docs/scheme-costs.md), the best schedule block of Full two-phase, the stored depth
// history and the long-context prefill memory of the block history.
#include <algorithm>

#include "attnres/checked_math.hpp"
#include "attnres/cost.hpp"

namespace attnres {

std::string to_string(DType dtype) {
  return enum_name(kDTypeNames, dtype);
}

DType parse_dtype(const std::string& text, const std::string& where) {
  return parse_enum(kDTypeNames, text, where, "unknown dtype");
}

int bytes_per_element(DType dtype) {
  switch (dtype) {
    case DType::bf16:
    case DType::fp16:
      return 2;
    case DType::fp32:
      return 4;
    case DType::fp8:
      return 1;
  }
  return 0;
}

// ---------------------------------------------------------------- docs/math.md §3.1, paper Table 1

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
  // Table 1: (8m + 2)d + 2m^2 + 4m in all; the paper splits the vector terms (6m+2)d reads,
  // 2m·d writes. The scalar mixing terms (2m^2 + 4m) are split evenly (our choice, docs/math.md
  // §3.1).
  const double m = static_cast<double>(streams);
  const double D = static_cast<double>(d);
  const double scalars = m * m + 2.0 * m;
  return {(6.0 * m + 2.0) * D + scalars, 2.0 * m * D + scalars};
}

ResidualIo io_block_one_shot(std::int64_t sublayers, std::int64_t block_size, std::int64_t d) {
  // Every source of every read twice (keys, then values), mean over the L + 1 reads, plus the
  // output write: the time model's block_one_shot row (docs/math.md §3.4).
  const double mean_sources =
      static_cast<double>(depth_read_source_pairs(ResidualMode::block, sublayers, block_size)) /
      static_cast<double>(sublayers + 1);
  const double D = static_cast<double>(d);
  return {2.0 * mean_sources * D, D};
}

ResidualIo io_full_window_mean(std::int64_t sublayers, std::int64_t window, std::int64_t d) {
  // The naive row 2(l-1)d with l - 1 capped at W (docs/scheme-costs.md): sum over l = 1..L of
  // min(l-1, W) is L(L-1)/2 when W >= L - 1, else W(W+1)/2 + (L-1-W)W = W(2L - W - 1)/2.
  const double L = static_cast<double>(sublayers), W = static_cast<double>(window);
  const double D = static_cast<double>(d);
  if (window >= sublayers - 1) return io_full_naive_mean(sublayers, d);
  return {W * (2.0 * L - W - 1.0) / L * D, D};
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

// ---------------------------------------------------------------- docs/math.md §3.2

std::int64_t history_vectors_full(std::int64_t sublayers) {
  return sublayers + 1;
}
std::int64_t history_vectors_block(std::int64_t blocks) {
  return blocks + 1;
}

PrefillMemory prefill_history_bytes(std::int64_t batch, std::int64_t tokens, std::int64_t blocks,
                                    std::int64_t d, int bytes_per_element, std::int64_t seq_shards,
                                    std::int64_t chunk_tokens) {
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

}  // namespace attnres
