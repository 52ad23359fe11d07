// Pipeline communication of block representations (docs/math.md §3.3): the paper's accounting
// with N_p block representations per chunk, how L sublayers are split into the C = P·V chunks,
// and the exact payload of every stage boundary — the one home of pipeline boundaries, for blocks
// of S sublayers (any L, without listing them) and for any listed block layout (block_layout.hpp).
// cost.hpp includes this header; CostReport carries both accountings.
//
//   pipeline_comm_paper(4, 1, 9, 7168).cached_elements;        // P = 4, V = 1, N = 9
//   pipeline_boundaries(ResidualMode::block, 54, 6, 4, 1)[0];  // chunk 0 -> 1 of Kimi Linear 48B
#pragma once

#include <cstdint>
#include <vector>

#include "attnres/enum_names.hpp"
#include "attnres/residual_scheme.hpp"

namespace attnres {

struct BlockLayout;  // block_layout.hpp

// The paper's accounting with N_p = N / (P·V) block representations per chunk, elements per token.
struct PipelineCommPaper {
  double blocks_per_chunk = 0;      // N_p
  double naive_elements = 0;        // C(C-1)/2 · N_p · d
  double cached_elements = 0;       // [P(P-1)/2 + (V-1)·P^2] · N_p · d
  double peak_naive_elements = 0;   // (C-1) · N_p · d
  double peak_cached_elements = 0;  // largest single transition of the cached formula
};
PipelineCommPaper pipeline_comm_paper(std::int64_t pp, std::int64_t vpp, std::int64_t blocks,
                                      std::int64_t d);

// How L sublayers are split into C = P·V chunks, as the last sublayer of each chunk (1-based).
// Chunk c runs on rank c mod P as its virtual stage c / P.
// Sublayers split evenly: the first (L mod C) chunks hold one more (a layer's attention and MLP
// may land on different chunks).
std::vector<std::int64_t> chunk_last_sublayers(std::int64_t sublayers, std::int64_t chunks);
// Whole layers split evenly, as Megatron-LM does: the first (layers mod C) chunks hold one more
// layer (a layer is an attention and an MLP sublayer; with L odd the last holds attention only).
// With more chunks than layers no split keeps layers whole: sublayers split evenly
// (chunk_last_sublayers) and split_layers says which layers are cut.
std::vector<std::int64_t> layer_aligned_chunks(std::int64_t sublayers, std::int64_t chunks);
// The listed layout: transformer layers per chunk (sum = ceil(L/2)), as last sublayers.
std::vector<std::int64_t> listed_chunks(std::int64_t sublayers,
                                        const std::vector<std::int64_t>& stage_layers);
// The layers (1-based) whose attention and MLP sublayers sit on different chunks.
std::vector<std::int64_t> split_layers(const std::vector<std::int64_t>& chunk_last);

// The exact payload of one forward stage boundary (chunk c -> c+1), counted in d-wide vectors
// per token, from the real block layout. Backward sends gradients of exactly these tensors over
// the same link in the other direction, so its per-boundary payload is the same.
struct BoundaryPayload {
  std::int64_t from_chunk = 0, to_chunk = 0;
  std::int64_t from_rank = 0, to_rank = 0;
  std::int64_t last_sublayer = 0;     // sublayers 1..last_sublayer are done before the boundary
  std::int64_t completed_blocks = 0;  // b_1.. finished by then
  bool partial = false;               // a block is open across the boundary
  // Vectors sent under each policy (embedding + blocks + partial, minus what the receiver has):
  std::int64_t naive_vectors = 0;         // everything the receiver needs
  std::int64_t cached_vectors = 0;        // receiver keeps what it received earlier (paper)
  std::int64_t cached_own_vectors = 0;    // ... and also the blocks it produced itself
  std::int64_t naive_block_vectors = 0;   // the same three, completed blocks only (the paper's
  std::int64_t cached_block_vectors = 0;  // N_p accounting counts only these)
};
// What a boundary sends (docs/math.md §3.3): everything the receiver needs (naive), or only what
// it has not received before (cached, the paper's), or also not the blocks it produced itself.
enum class CachePolicy { naive, cached, cached_own };
inline constexpr EnumNames<CachePolicy, 3> kCachePolicyNames{
    {{CachePolicy::naive, "naive"},
     {CachePolicy::cached, "cached"},
     {CachePolicy::cached_own, "cached_own"}}};
// The vectors the boundary sends under the policy; what the receiving rank then holds for the
// micro-batch until its backward (the earlier chunks of the rank hold the rest).
std::int64_t sent_vectors(const BoundaryPayload& boundary, CachePolicy policy);

// mode standard: one hidden-state vector per boundary; full: every sublayer output is a source
// (S = 1); block: blocks of block_size sublayers, the last one shorter (O(P·V), any L). The
// chunks end at `chunk_last` (P·V entries; empty: layer_aligned_chunks). Throws on P·V > L or
// sizes < 1.
std::vector<BoundaryPayload> pipeline_boundaries(ResidualMode mode, std::int64_t sublayers,
                                                 std::int64_t block_size, std::int64_t pp,
                                                 std::int64_t vpp,
                                                 const std::vector<std::int64_t>& chunk_last = {});
// The same for any block layout, uneven lists included; pipeline_boundaries(block, L, S, P, V) is
// this with the uniform layout.
std::vector<BoundaryPayload> pipeline_boundaries(const BlockLayout& layout, std::int64_t pp,
                                                 std::int64_t vpp,
                                                 const std::vector<std::int64_t>& chunk_last = {});

}  // namespace attnres
