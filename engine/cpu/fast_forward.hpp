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

#include <memory>
#include <vector>

#include "attnres/forward.hpp"
#include "attnres/model.hpp"

namespace attnres::engine {

class ThreadPool;

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
  // Other weights (of any shape) on the same threads: prepares them as the constructor does.
  void set_model(const ModelWeights<Scalar>& model);

 private:
  struct State;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<State> state_;
  bool bf16_ = false;
};

}  // namespace attnres::engine
