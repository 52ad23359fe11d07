// Block layouts the way users write them (docs/math.md §3.6): blocks of equal size in sublayers
// (`--block-size`, the paper's S), in transformer layers (`--block-layers`, as production configs
// and Megatron-LM count them: one layer = an attention and an MLP sublayer, so S = 2K), or an
// uneven list of block sizes in sublayers (`--block-sizes 6,6,4`). One BlockLayout describes all
// three; the cost engine's strategies, the layout view and the exact pipeline payloads read it.
//
//   BlockLayout layout = uniform_block_layout(54, 6);   // Kimi Linear 48B: 9 blocks of 6
//   read_sources(layout)[6].sources();                   // read 6 sees emb, b1: 2 sources
//   layout_rows(layout, 4, 1);                           // every block against 4 pipeline stages
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnres/cost.hpp"
#include "attnres/pipeline_payload.hpp"

namespace attnres {

struct BlockLayout {
  std::vector<std::int64_t> sizes;  // sublayers per block, in model order; each >= 1

  std::int64_t sublayers() const;  // L = the sum of the sizes
  std::int64_t blocks() const { return static_cast<std::int64_t>(sizes.size()); }
  // Blocks completed once sublayers 1..e are done (blocks whose last sublayer is <= e).
  std::int64_t completed_after(std::int64_t e) const;
  // Whether every block has the same size (the closed forms of docs/math.md §3.1 assume it).
  bool equal() const;
  // "6 x 9" for equal blocks, else the list "6, 6, 4".
  std::string describe() const;
};

// N = ceil(L / S) blocks of S sublayers, the last one shorter when S does not divide L (the
// engine's convention everywhere, docs/math.md §3). Throws attnres::Error past kMaxListedBlocks
// blocks (a listed layout is for views and per-read counts, not for closed forms).
BlockLayout uniform_block_layout(std::int64_t sublayers, std::int64_t block_size);
// The layout of resolved cost inputs: CostInputs::block_sizes when given, else uniform with S.
BlockLayout block_layout_of(const CostInputs& resolved);

// Transformer layers per block <-> sublayers per block: S = 2K; K = S / 2 only for even S (an odd
// S splits a layer between two blocks: nullopt).
std::int64_t block_size_from_layers(std::int64_t layers_per_block);
std::optional<std::int64_t> layers_per_block(std::int64_t block_size);

// A list "6,6,4" (sublayers per block). Throws attnres::Error naming `where` and what was
// expected: integers >= 1 separated by commas, at most kMaxListedBlocks.
inline constexpr std::size_t kMaxListedBlocks = 100'000;
std::vector<std::int64_t> parse_block_list(const std::string& text, const std::string& where);
// What is wrong with a list for L sublayers: an entry < 1, or a sum other than L (the message
// gives the sum and L). `field` is "block_sizes".
std::optional<CostInputProblem> block_list_problem(const std::vector<std::int64_t>& sizes,
                                                   std::int64_t sublayers);

// ------------------------------------------------------------------ sources per read
// Read r (0..L) forms the input of sublayer r + 1 (read L is the final read) after sublayers
// 1..r are done (docs/math.md §2.2–2.3).
struct ReadSources {
  std::int64_t completed = 0;  // the embedding and the blocks completed by then (1 + blocks)
  bool partial = false;        // the open block's running sum is a source too
  // Whether the newest source (the one holding v_r) is formed by adding v_r to an earlier partial
  // sum (sublayer r is not the first of its block), rather than being v_r itself. False for r = 0
  // (the newest source is the embedding).
  bool accumulates = false;
  std::int64_t sources() const { return completed + (partial ? 1 : 0); }
};
// One entry per read r = 0..L. Full AttnRes is the layout with every block of size 1.
std::vector<ReadSources> read_sources(const BlockLayout& layout);
// sum over reads of sources(): the (read, source) pairs of docs/math.md §2.2–2.3.
std::int64_t read_source_pairs(const BlockLayout& layout);

// ------------------------------------------------------------------ the layout view
// One row per block: where it sits in the model and against the pipeline's C = P·V chunks (chunk
// c runs on rank c mod P; chunks end at `chunk_last`, empty: layer_aligned_chunks).
struct LayoutBlockRow {
  std::int64_t block = 0;                              // 1-based
  std::int64_t first_sublayer = 0, last_sublayer = 0;  // 1-based, inclusive
  std::int64_t size = 0;                               // sublayers
  // Transformer layers the block touches (sublayer s is in layer ceil(s/2)); a block that starts
  // on an MLP sublayer or ends on an attention sublayer splits a layer with its neighbour.
  std::int64_t first_layer = 0, last_layer = 0;
  bool splits_layer = false;
  // Sources of the reads that form the inputs of the block's sublayers (min and max over them).
  std::int64_t sources_min = 0, sources_max = 0;
  std::int64_t first_chunk = 0, last_chunk = 0;  // pipeline chunks the block's sublayers run in
  bool crosses_stage = false;                    // first_chunk != last_chunk
};
std::vector<LayoutBlockRow> layout_rows(const BlockLayout& layout, std::int64_t pp,
                                        std::int64_t vpp,
                                        const std::vector<std::int64_t>& chunk_last = {});

// The exact pipeline payload of every stage boundary for a layout, uneven lists included:
// pipeline_boundaries(layout, P, V) in pipeline_payload.hpp (docs/math.md §3.3).

}  // namespace attnres
