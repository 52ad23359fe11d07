// The fast CPU forward engine (docs/engines.md). Same contract and trace as the reference
// attnres::forward (core/model/src/forward.cpp), computed with:
//   - fused weights: one (q|k|v) projection GEMM and one (gate|up) GEMM per layer;
//   - one preallocated history arena, (slots, T, d): Full AttnRes keeps v_0 .. v_L in slots
//     0 .. L (slots a little more than T * d apart, see arena_slot_stride), Block AttnRes keeps b_0
//     .. b_N in slots 0 .. N with the running partial sum of block n living in slot n (it becomes
//     b_n when the block completes, and is zero when the block starts, which is also the zero
//     placeholder's value); every read's sources are contiguous slots, read in place, never copied;
//   - the two-phase depth read through the kernels/ interface (cpu::depth_phase_one,
//     depth_merge_source, depth_finish);
//   - causal attention over 64-token tiles with an online softmax: key tiles above the diagonal
//     are never computed, and no T x T matrix exists (T = 4096 needs 64 x 64 scores per thread);
//   - workspaces sized once per sequence length: no allocation inside the layer loop;
//   - a thread pool: GEMMs split by token rows, attention by (head, query tile), depth reads by
//     tokens; the split depends only on the thread count, so results are deterministic for it.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "attnres/depth_layout.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"

namespace attnres::engine {

// Elements from one arena slot to the next: T * d rounded up to 64 bytes, plus 256 bytes, so that
// the rows of one token in different slots (which a depth read visits together) do not all fall
// into the same L1 cache sets, as they would with slots a power-of-two number of bytes apart.
template <typename Scalar>
std::size_t arena_slot_stride(std::size_t T, std::size_t d) {
  const std::size_t line = 64 / sizeof(Scalar);
  return (T * d + line - 1) / line * line + 256 / sizeof(Scalar);
}

// Arena slot of a source: the sources of every read are slots 0 .. n-1 (Full: v_i in slot i;
// Block: b_n, the open partial sum and the zero placeholder in slot n).
inline int arena_slot(const DepthSource& source) {
  switch (source.kind) {
    case DepthSource::Kind::embedding:
      return 0;
    case DepthSource::Kind::sublayer_output:
      return source.first_member;
    default:
      return source.block;  // block, partial_block, zero_placeholder
  }
}

template <typename Scalar>
class FastForward {
 public:
  // bf16: the products take bf16 inputs (f32 accumulation; f32 engines only, matmul.hpp).
  FastForward(const ModelWeights<Scalar>& model, int threads, bool bf16 = false);
  ~FastForward();
  FastForward(const FastForward&) = delete;
  FastForward& operator=(const FastForward&) = delete;

  ForwardResult<Scalar> forward(const std::vector<int>& tokens, const ForwardOptions& options);
  int threads() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace attnres::engine
