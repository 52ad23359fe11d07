// Pipeline payloads (docs/math.md §3.3): the paper's N_p accounting, how the L sublayers split
// into the P·V chunks, and the exact payload of every stage boundary. One implementation
// (boundaries_with) counts every boundary from "how many blocks are complete after sublayer e";
// the uniform blocks of the cost engine, the standard residual, Full AttnRes and any listed block
// layout (block_layout.hpp) only say how to answer that.
#include "attnres/pipeline_payload.hpp"

#include <algorithm>

#include "attnres/block_layout.hpp"
#include "attnres/checked_math.hpp"
#include "attnres/error.hpp"

namespace attnres {

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

std::vector<std::int64_t> layer_aligned_chunks(std::int64_t sublayers, std::int64_t chunks) {
  const std::int64_t layers = (sublayers + 1) / 2;
  if (chunks > layers) return chunk_last_sublayers(sublayers, chunks);
  std::vector<std::int64_t> last = chunk_last_sublayers(layers, chunks);
  for (auto& end : last) end = std::min(2 * end, sublayers);
  return last;
}

std::vector<std::int64_t> listed_chunks(std::int64_t sublayers,
                                        const std::vector<std::int64_t>& stage_layers) {
  std::vector<std::int64_t> last;
  last.reserve(stage_layers.size());
  std::int64_t layers = 0;
  for (const std::int64_t n : stage_layers) {
    layers += n;
    last.push_back(std::min(2 * layers, sublayers));
  }
  return last;
}

std::vector<std::int64_t> split_layers(const std::vector<std::int64_t>& chunk_last) {
  std::vector<std::int64_t> out;
  // A boundary after an attention sublayer (odd) leaves that layer's MLP to the next chunk.
  for (std::size_t c = 0; c + 1 < chunk_last.size(); ++c) {
    if (chunk_last[c] % 2 == 1) out.push_back((chunk_last[c] + 1) / 2);
  }
  return out;
}

namespace {

// The payloads of every boundary, given how many blocks are complete after sublayer e
// (docs/math.md §3.3); shared by the uniform and the listed layouts.
template <typename Completed>
std::vector<BoundaryPayload> boundaries_with(std::int64_t L, std::int64_t pp, std::int64_t vpp,
                                             const std::vector<std::int64_t>& chunk_last,
                                             Completed completed) {
  if (L < 1 || pp < 1 || vpp < 1) throw Error("pipeline boundaries: L, P and V must be >= 1");
  const std::int64_t chunks = checked_multiply(pp, vpp, "pipeline chunks P·V");
  if (chunks > L) {
    throw Error("pipeline boundaries: P·V = " + std::to_string(chunks) +
                " chunks exceed L = " + std::to_string(L) + " sublayers");
  }
  const auto last = chunk_last.empty() ? layer_aligned_chunks(L, chunks) : chunk_last;
  if (static_cast<std::int64_t>(last.size()) != chunks || last.back() != L) {
    throw Error("pipeline boundaries: the stage layout has " + std::to_string(last.size()) +
                " chunks ending at sublayer " + std::to_string(last.empty() ? 0 : last.back()) +
                "; P·V = " + std::to_string(chunks) + " chunks over L = " + std::to_string(L) +
                " expected");
  }
  std::vector<BoundaryPayload> out;
  out.reserve(static_cast<std::size_t>(chunks - 1));
  for (std::int64_t c = 0; c + 1 < chunks; ++c) {
    BoundaryPayload b;
    b.from_chunk = c;
    b.to_chunk = c + 1;
    b.from_rank = c % pp;
    b.to_rank = (c + 1) % pp;
    b.last_sublayer = last[static_cast<std::size_t>(c)];
    b.completed_blocks = completed(b.last_sublayer);
    // Sublayer e leaves its block open unless it closes it.
    b.partial = completed(b.last_sublayer) == completed(b.last_sublayer - 1);
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

// Blocks of S sublayers (the last one shorter): floor(e / S) complete after e < L.
std::vector<BoundaryPayload> uniform_pipeline_boundaries(
    std::int64_t sublayers, std::int64_t block_size, std::int64_t pp, std::int64_t vpp,
    const std::vector<std::int64_t>& chunk_last) {
  if (sublayers >= 1 && (block_size < 1 || block_size > sublayers))
    throw Error("pipeline boundaries: block size must be between 1 and L");
  return boundaries_with(sublayers, pp, vpp, chunk_last,
                         [block_size](std::int64_t e) { return e / block_size; });
}

}  // namespace

std::vector<BoundaryPayload> pipeline_boundaries(ResidualMode mode, std::int64_t sublayers,
                                                 std::int64_t block_size, std::int64_t pp,
                                                 std::int64_t vpp,
                                                 const std::vector<std::int64_t>& chunk_last) {
  if (mode == ResidualMode::full)
    return uniform_pipeline_boundaries(sublayers, 1, pp, vpp, chunk_last);
  if (mode != ResidualMode::standard) {
    return uniform_pipeline_boundaries(sublayers, block_size, pp, vpp, chunk_last);
  }
  // The standard residual: the hidden state h is the whole payload of every boundary (the same
  // boundaries as one block spanning the model, with one vector each).
  auto out = uniform_pipeline_boundaries(sublayers, sublayers, pp, vpp, chunk_last);
  for (auto& b : out) {
    b.completed_blocks = 0;
    b.partial = false;
    b.naive_vectors = b.cached_vectors = b.cached_own_vectors = 1;
    b.naive_block_vectors = b.cached_block_vectors = 0;
  }
  return out;
}

std::vector<BoundaryPayload> pipeline_boundaries(const BlockLayout& layout, std::int64_t pp,
                                                 std::int64_t vpp,
                                                 const std::vector<std::int64_t>& chunk_last) {
  // Block ends in order, so "blocks complete after e" is a binary search.
  std::vector<std::int64_t> ends;
  ends.reserve(layout.sizes.size());
  std::int64_t end = 0;
  for (std::int64_t size : layout.sizes) ends.push_back(end += size);
  return boundaries_with(end, pp, vpp, chunk_last, [&ends](std::int64_t e) {
    return static_cast<std::int64_t>(std::upper_bound(ends.begin(), ends.end(), e) - ends.begin());
  });
}

std::int64_t sent_vectors(const BoundaryPayload& b, CachePolicy policy) {
  switch (policy) {
    case CachePolicy::naive:
      return b.naive_vectors;
    case CachePolicy::cached:
      return b.cached_vectors;
    case CachePolicy::cached_own:
      return b.cached_own_vectors;
  }
  return 0;
}

}  // namespace attnres
