// Which depth sources each read sees (docs/math.md §2.2–2.3).
//
// Reads are numbered r = 0 .. L: read r forms the input h_{r+1} of sublayer r+1 (1-based in
// docs/math.md and in printed output), read L is the final read. Sources are the embedding v_0,
// single sublayer outputs v_i (Full AttnRes), completed block summaries b_n, the running partial
// sum of the current block, and — only with the zero-placeholder option — a zero vector.
//
// Example, Block AttnRes with L = 4, S = 2 (N = 2):
//   read 0 (sublayer 1): [emb]            read 1 (sublayer 2): [emb, partial(v1)]
//   read 2 (sublayer 3): [emb, b1]        read 3 (sublayer 4): [emb, b1, partial(v3)]
//   read 4 (final):      [emb, b1, b2]
#pragma once

#include <string>
#include <vector>

#include "attnres/model_config.hpp"

namespace attnres {

struct DepthSource {
  enum class Kind { embedding, sublayer_output, block, partial_block, zero_placeholder };
  Kind kind = Kind::embedding;
  int block = 0;         // block number n (1-based) for block / partial_block
  int first_member = 0;  // sublayer outputs v_first .. v_last summed into this source
  int last_member = -1;  // (v_0 is the embedding; an empty range for the zero placeholder)

  // "emb", "v3", "b2", "partial" (b2 so far), "zero".
  std::string label() const;
  // Spelt out (not "= default") so that the header also compiles as C++17 in CUDA files.
  bool operator==(const DepthSource& other) const {
    return kind == other.kind && block == other.block && first_member == other.first_member &&
           last_member == other.last_member;
  }
  bool operator!=(const DepthSource& other) const { return !(*this == other); }
};

struct DepthLayout {
  ResidualMode mode = ResidualMode::standard;
  int sublayers = 0;   // L
  int block_size = 0;  // S (block mode)
  int blocks = 0;      // N = ceil(L / S) in block mode, L in full mode
  int window = 0;      // Full with a window: the embedding plus the last W outputs (0 = all)
  bool zero_placeholder = false;
  std::vector<std::vector<DepthSource>> reads;  // reads[r] = sources of read r, r = 0 .. L

  int block_of_sublayer(int sublayer) const;  // 1-based sublayer -> 1-based block
};

// The layout for `mode` with L sublayers and block size S (ignored unless mode is block; must
// be 1 <= S <= L there) and, in full mode, a window W (0 = every output). Standard residual has
// no reads. Throws attnres::Error on bad sizes.
DepthLayout make_depth_layout(ResidualMode mode, int sublayers, int block_size,
                              bool zero_placeholder = false, int window = 0);
// The layout of a scheme (docs/schemes.md): Block and Full as above (with its window);
// DenseFormer, the rescaled residual and mHC list every earlier output v_0 .. v_r, like Full.
DepthLayout make_depth_layout(const AttnResConfig& scheme, int sublayers,
                              bool zero_placeholder = false);

}  // namespace attnres
