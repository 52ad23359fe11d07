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
#include "attnres/forward_steps.hpp"
#include "attnres/kernels.hpp"
#include "attnres/model.hpp"
#include "cpu/thread_pool.hpp"

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

// One depth read r of the fast engine's loop over its history arena, as FastForward::forward runs
// it (and the measured DepthPass, attnres/measure.hpp): its phase 1 (one-shot: its own over its n
// sources; two-phase: its group's for all the group's reads, when r starts the group), then one
// call that merges the sources made inside the group and finishes into `out`. The buffers hold
// (q, T) m and l, (q, T, d) o, (q, T, n) history scores and (n, T) extra scores; `queries` the
// (L + 1, d) effective queries, row-major.
template <typename Scalar>
struct DepthReadBuffers {
  const Scalar* arena = nullptr;
  std::size_t slot_stride = 0;
  const Scalar* queries = nullptr;
  Scalar *m = nullptr, *l = nullptr, *o = nullptr, *history_scores = nullptr,
         *extra_scores = nullptr;
};
// What the read used: its row j in its group's statistics, the sources phase 1 read (shared), and
// the thread-pool calls it made. `group_first` / `group_shared` carry the group from read to read.
struct DepthReadStep {
  int j = 0, shared = 0, calls = 0;
};
struct DepthReadGroup {
  int first = -1, shared = 0;
};
template <typename Scalar>
DepthReadStep run_depth_read(ThreadPool& pool, const DepthLayout& layout,
                             const std::vector<int>& group_of, bool two_phase, int r, int T, int d,
                             Scalar eps, const DepthReadBuffers<Scalar>& w, DepthReadGroup& group,
                             Scalar* out) {
  const auto Tz = static_cast<std::size_t>(T), dz = static_cast<std::size_t>(d), plane = Tz * dz;
  const int L = layout.sublayers;
  const auto& sources = layout.reads[static_cast<std::size_t>(r)];
  const int n = static_cast<int>(sources.size());
  const Scalar* query = w.queries + static_cast<std::size_t>(r) * dz;
  DepthReadStep step;
  step.shared = n;
  if (!two_phase) {
    pool.parallel_for(Tz, [&](std::size_t b, std::size_t e, int) {
      cpu::depth_phase_one(w.arena, static_cast<long>(w.slot_stride), n, T, d, query, 1, eps, w.m,
                           w.l, w.o, w.history_scores, static_cast<int>(b), static_cast<int>(e));
    });
    ++step.calls;
  } else {
    const int g = group_of[static_cast<std::size_t>(r)];
    if (r == 0 || group_of[static_cast<std::size_t>(r - 1)] != g) {
      int last = r;
      while (last < L && group_of[static_cast<std::size_t>(last + 1)] == g) ++last;
      group.first = r;
      group.shared = static_cast<int>(shared_history(layout, r, last));
      const int q = last - r + 1;
      pool.parallel_for(Tz, [&](std::size_t b, std::size_t e, int) {
        cpu::depth_phase_one(w.arena, static_cast<long>(w.slot_stride), group.shared, T, d, query,
                             q, eps, w.m, w.l, w.o, w.history_scores, static_cast<int>(b),
                             static_cast<int>(e));
      });
      ++step.calls;
    }
    step.j = r - group.first;
    step.shared = group.shared;
  }
  Scalar* m = w.m + static_cast<std::size_t>(step.j) * Tz;
  Scalar* l = w.l + static_cast<std::size_t>(step.j) * Tz;
  Scalar* o = w.o + static_cast<std::size_t>(step.j) * plane;
  const int shared = step.shared;
  pool.parallel_for(Tz, [&](std::size_t b, std::size_t e, int) {
    for (int i = shared; i < n; ++i) {  // phase 2: sources produced inside the group
      cpu::depth_merge_source(
          w.arena + static_cast<std::size_t>(arena_slot(sources[static_cast<std::size_t>(i)])) *
                        w.slot_stride,
          T, d, query, eps, m, l, o, w.extra_scores + static_cast<std::size_t>(i - shared) * Tz,
          static_cast<int>(b), static_cast<int>(e));
    }
    cpu::depth_finish(o, l, d, out, static_cast<int>(b), static_cast<int>(e));
  });
  ++step.calls;
  return step;
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
  // Other weights (of any shape) on the same threads: prepares them as the constructor does.
  void set_model(const ModelWeights<Scalar>& model);

 private:
  struct State;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<State> state_;
  bool bf16_ = false;
};

}  // namespace attnres::engine
