// The fast CPU backward pass (docs/training.md, docs/engines.md): the contract of
// attnres::loss_and_gradients (core/src/backward.cpp, the oracle), computed with
//   - a tape: the forward keeps what the backward sweep needs (each sublayer's normalised input
//     and inverse RMS, the roped (q|k|v), the context and each row's log-sum-exp of every head,
//     the (gate|up) pre-activations and silu(gate) * up), so nothing is recomputed but the
//     attention probabilities of one tile at a time (one small GEMM against a row's stored
//     log-sum-exp);
//   - fused weights, concatenated once per call: one (q|k|v) GEMM and one (gate|up) GEMM per
//     layer, forward and backward; the gradient of a fused weight is split at the end;
//   - causal attention by 64-row query tiles over the key columns up to the tile's last row only
//     (the masked upper triangle is never computed), grouped-query heads sharing their k/v;
//   - depth reads with the two-phase schedule (phase 1 per schedule group with the group's
//     queries stacked over the shared history, phase 2 merging the group's own sources), the
//     weights alpha of every read kept for the backward, and one inverse RMS per source value;
//   - the backward of a read by depth_attention_backward's formula, one pass per token over its
//     sources with the stored inverse RMS; the standard residual by its running sum (d loss / d
//     v_l is the sum of the gradients of every later read), Block AttnRes by one accumulator per
//     block: a block summary's or partial sum's gradient is the gradient of each member, so the
//     block's accumulator *is* d loss / d v of the member being processed;
//   - the batch's sequences split over the thread pool in contiguous chunks; each worker owns its
//     workspace (grown, never shrunk: no allocation inside the layer loop) and its gradient
//     buffers, summed in worker order at the end: bit-identical results for a given thread count.
#include "cpu/fast_backward.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <mutex>

#include "attnres/cancel.hpp"
#include "attnres/error.hpp"
#include "attnres/forward_steps.hpp"
#include "attnres/layers.hpp"
#include "attnres/tensor.hpp"
#include "cpu/eigen_maps.hpp"
#include "cpu/thread_pool.hpp"

namespace attnres::engine {

namespace {

// 64-byte aligned storage (see fast_forward.cpp: a fixed alignment keeps Eigen's vectorised
// reductions, and so the last bit, the same from call to call).
template <typename Scalar>
using Buffer = std::vector<Scalar, Eigen::aligned_allocator<Scalar>>;

constexpr Eigen::Index kTile = 64;  // attention query rows per tile

// Sizes of the model, from its config.
struct Shape {
  Eigen::Index d = 0, H = 0, Hkv = 0, hd = 0, F = 0, vocab = 0, qc = 0, kvc = 0, qkvc = 0;
  int L = 0;
  explicit Shape(const ModelConfig& c)
      : d(c.hidden_size),
        H(c.num_attention_heads),
        Hkv(c.num_key_value_heads),
        hd(c.head_dim()),
        F(c.intermediate_size),
        vocab(c.vocab_size),
        L(c.sublayers()) {
    qc = H * hd;
    kvc = Hkv * hd;
    qkvc = qc + 2 * kvc;
  }
  bool operator==(const Shape&) const = default;
};

// How the depth history of one call is stored, derived once from the layout (read-only while
// the workers run). Values: Full keeps v_0 .. v_L (value i); Block keeps the block sums b_0 ..
// b_N (value n; block n's running partial sum lives there until the block completes), a copy of
// the partial sum each partial read saw (value N + 1 + r) and a zero value for the placeholder.
// Gradient slots: one accumulator per value a sublayer output belongs to (v_i in Full, block n in
// Block, the single running sum of the standard residual).
struct Plan {
  DepthLayout layout;
  bool standard = true, block = false;
  int values = 0, slots = 1, zero_value = -1;
  std::vector<std::vector<int>> read_value;  // per read, per source: value index
  std::vector<std::vector<int>> read_slot;  // per read, per source: gradient slot (-1: placeholder)
  std::vector<int> partial_of_read;         // per read: block whose partial it copies, or -1
  std::vector<int> output_slot;             // per sublayer r: slot of v_{r+1}
  std::vector<int> group_first, group_last;  // per read: its schedule group's reads
  std::vector<int> group_shared;             // per read: the group's shared history size
  Eigen::Index max_sources = 1, max_group = 1, max_shared = 1;
};

Plan make_plan(const ModelConfig& config, const ForwardOptions& options) {
  Plan plan;
  plan.layout = resolve_layout(config, options);
  const DepthLayout& layout = plan.layout;
  const int L = layout.sublayers;
  plan.standard = layout.mode == ResidualMode::standard;
  plan.block = layout.mode == ResidualMode::block;
  plan.output_slot.assign(static_cast<std::size_t>(L), 0);
  if (plan.standard) return plan;
  const int N = layout.blocks;
  plan.values = plan.block ? N + 1 + L + 1 : L + 1;
  plan.slots = plan.block ? N + 1 : L + 1;
  plan.zero_value = plan.block ? N + 1 + L : -1;
  for (int r = 0; r < L; ++r)
    plan.output_slot[static_cast<std::size_t>(r)] =
        plan.block ? layout.block_of_sublayer(r + 1) : r + 1;
  const std::vector<int> group_of = schedule_groups(layout, options);
  plan.read_value.resize(static_cast<std::size_t>(L + 1));
  plan.read_slot.resize(static_cast<std::size_t>(L + 1));
  plan.partial_of_read.assign(static_cast<std::size_t>(L + 1), -1);
  plan.group_first.resize(static_cast<std::size_t>(L + 1));
  plan.group_last.resize(static_cast<std::size_t>(L + 1));
  plan.group_shared.resize(static_cast<std::size_t>(L + 1));
  for (int r = 0; r <= L; ++r) {
    const auto ru = static_cast<std::size_t>(r);
    for (const DepthSource& source : layout.reads[ru]) {
      int value = 0, slot = 0;
      switch (source.kind) {
        case DepthSource::Kind::embedding:
          value = slot = 0;
          break;
        case DepthSource::Kind::sublayer_output:
          value = slot = source.first_member;
          break;
        case DepthSource::Kind::block:
          value = slot = source.block;
          break;
        case DepthSource::Kind::partial_block:
          value = N + 1 + r;
          slot = source.block;
          plan.partial_of_read[ru] = source.block;
          break;
        case DepthSource::Kind::zero_placeholder:
          value = plan.zero_value;
          slot = -1;
          break;
      }
      plan.read_value[ru].push_back(value);
      plan.read_slot[ru].push_back(slot);
    }
    plan.max_sources = std::max<Eigen::Index>(plan.max_sources,
                                              static_cast<Eigen::Index>(layout.reads[ru].size()));
    int first = r, last = r;
    while (first > 0 && group_of[static_cast<std::size_t>(first - 1)] == group_of[ru]) --first;
    while (last < L && group_of[static_cast<std::size_t>(last + 1)] == group_of[ru]) ++last;
    plan.group_first[ru] = first;
    plan.group_last[ru] = last;
    plan.group_shared[ru] = static_cast<int>(shared_history(layout, first, last));
    plan.max_group = std::max<Eigen::Index>(plan.max_group, last - first + 1);
    plan.max_shared = std::max<Eigen::Index>(plan.max_shared, plan.group_shared[ru]);
  }
  return plan;
}

// Weights rearranged once per call.
template <typename Scalar>
struct Prepared {
  std::vector<Matrix<Scalar>> qkv;      // per layer (qc + 2 kvc, d): q_proj, k_proj, v_proj stacked
  std::vector<Matrix<Scalar>> gate_up;  // per layer (2F, d): gate_proj, up_proj stacked
  Matrix<Scalar> queries;               // (L + 1, d): effective query w * g of every read
};

// One worker's buffers: the tape and scratch of one sequence (carved from one arena for the
// sequence's T), its gradients and its sums.
template <typename Scalar>
struct Worker {
  Buffer<Scalar> arena;
  // Tape, per sublayer r = 0 .. L-1 and the final norm at index L.
  std::vector<Scalar*> inv, nhat, x;  // (T), (T, d) RMS-normalised input without / with the gain
  // Tape, per layer.
  std::vector<Scalar*> qkv, lse, ctx;  // (T, qkvc) roped, (H, T) row log-sum-exp, (T, qc)
  std::vector<Scalar*> gu, act;        // (T, 2F) gate|up pre-activations, (T, F) silu(gate) * up
  // Depth history.
  std::vector<Scalar*> value, value_inv;  // per value (T, d), (T)
  std::vector<Scalar*> alpha;             // per read (T, sources)
  std::vector<Scalar*> dacc;              // per gradient slot (T, d)
  Scalar *h = nullptr, *v = nullptr;      // (T, d) read output / running h, sublayer output
  Scalar *o = nullptr, *m = nullptr, *l = nullptr, *zhist = nullptr;  // two-phase statistics
  Scalar* logits = nullptr;                                           // (T, vocab)
  Scalar *dh = nullptr, *dx = nullptr, *dctx = nullptr, *dqkv = nullptr, *dgu = nullptr,
         *dact = nullptr;
  Scalar *scores = nullptr, *dscores = nullptr;  // (kTile, T) attention tile scratch
  Vector<Scalar> dquery;                         // (d)
  Vector<Scalar> dalpha;                         // (sources)
  Buffer<Scalar> rope_cos, rope_sin;             // (rope_T, hd / 2), prefix rows valid for any T
  Eigen::Index rope_T = 0;
  // Gradients and sums of this worker's sequences.
  ModelWeights<Scalar> grad;
  std::vector<Matrix<Scalar>> dqkv_w, dgate_up_w;  // fused weight gradients per layer
  double loss = 0.0;
  std::vector<double> output_squares, grad_squares;

  // Points every buffer into the arena for T tokens (offsets depend only on T and the plan).
  void carve(const Shape& s, const Plan& plan, Eigen::Index T) {
    const auto Tz = static_cast<std::size_t>(T), dz = static_cast<std::size_t>(s.d);
    const std::size_t align = 64 / sizeof(Scalar);
    for (int pass = 0; pass < 2; ++pass) {
      std::size_t offset = 0;
      auto take = [&](std::size_t count) {
        Scalar* p = pass == 1 ? arena.data() + offset : nullptr;
        offset += (count + align - 1) / align * align;
        return p;
      };
      auto take_many = [&](std::vector<Scalar*>& list, std::size_t n, std::size_t count) {
        list.resize(n);
        for (auto& p : list) p = take(count);
      };
      const auto L = static_cast<std::size_t>(s.L), layers = L / 2;
      take_many(inv, L + 1, Tz);
      take_many(nhat, L + 1, Tz * dz);
      take_many(x, L + 1, Tz * dz);
      take_many(qkv, layers, Tz * static_cast<std::size_t>(s.qkvc));
      take_many(lse, layers, Tz * static_cast<std::size_t>(s.H));
      take_many(ctx, layers, Tz * static_cast<std::size_t>(s.qc));
      take_many(gu, layers, Tz * 2 * static_cast<std::size_t>(s.F));
      take_many(act, layers, Tz * static_cast<std::size_t>(s.F));
      take_many(value, static_cast<std::size_t>(plan.values), Tz * dz);
      take_many(value_inv, static_cast<std::size_t>(plan.values), Tz);
      alpha.resize(plan.read_value.size());
      for (std::size_t r = 0; r < alpha.size(); ++r)
        alpha[r] = take(Tz * plan.read_value[r].size());
      take_many(dacc, static_cast<std::size_t>(plan.slots), Tz * dz);
      h = take(Tz * dz);
      v = take(Tz * dz);
      const auto group = static_cast<std::size_t>(plan.max_group);
      o = take(group * Tz * dz);
      m = take(group * Tz);
      l = take(group * Tz);
      zhist = take(static_cast<std::size_t>(plan.max_shared) * Tz * group);
      logits = take(Tz * static_cast<std::size_t>(s.vocab));
      dh = take(Tz * dz);
      dx = take(Tz * dz);
      dctx = take(Tz * static_cast<std::size_t>(s.qc));
      dqkv = take(Tz * static_cast<std::size_t>(s.qkvc));
      dgu = take(Tz * 2 * static_cast<std::size_t>(s.F));
      dact = take(Tz * static_cast<std::size_t>(s.F));
      scores = take(static_cast<std::size_t>(kTile) * Tz);
      dscores = take(static_cast<std::size_t>(kTile) * Tz);
      if (pass == 0 && arena.size() < offset) arena.resize(offset);
    }
    if (rope_T < T || rope_theta != theta ||
        rope_hd != s.hd) {  // the reference's table (pos, i), rows independent of T
      const int half = static_cast<int>(s.hd / 2);
      const auto rope = make_rope_table<Scalar>(static_cast<int>(T), static_cast<int>(s.hd), theta);
      rope_cos.assign(rope.cos.data(), rope.cos.data() + static_cast<std::size_t>(T) *
                                                             static_cast<std::size_t>(half));
      rope_sin.assign(rope.sin.data(), rope.sin.data() + static_cast<std::size_t>(T) *
                                                             static_cast<std::size_t>(half));
      rope_T = T;
      rope_theta = theta;
      rope_hd = s.hd;
    }
  }
  double theta = 10000.0, rope_theta = 0.0;
  Eigen::Index rope_hd = 0;
};

// Everything the per-sequence code reads: model, shapes, plan, fused weights.
template <typename Scalar>
struct Context {
  const ModelWeights<Scalar>& model;
  const Shape& s;
  const Plan& plan;
  const Prepared<Scalar>& prepared;
  Scalar eps, key_eps, scale;
  double loss_scale;
};

// x = RMSNorm(h) = g * (h r), r = 1 / sqrt(mean(h^2) + eps); keeps r and h r for the backward.
template <typename Scalar>
void norm_forward(const Scalar* h, const Vector<Scalar>& gain, Scalar eps, Eigen::Index T,
                  Eigen::Index d, Scalar* inv, Scalar* nhat, Scalar* x) {
  for (Eigen::Index t = 0; t < T; ++t) {
    const Scalar r = inverse_rms_of_row(h + t * d, d, eps);
    inv[t] = r;
    VectorMap<Scalar> n(nhat + t * d, d);
    n = ConstVectorMap<Scalar>(h + t * d, d) * r;
    VectorMap<Scalar>(x + t * d, d) = n.cwiseProduct(gain);
  }
}

// d loss / d h of x = g * (h r) (rms_norm_backward in core/src/layers.cpp); adds sum_t dy * (h r)
// to the gain's gradient.
template <typename Scalar>
void norm_backward(const Scalar* dy, const Scalar* inv, const Scalar* nhat,
                   const Vector<Scalar>& gain, Eigen::Index T, Eigen::Index d, Scalar* dh,
                   Vector<Scalar>& gain_grad) {
  for (Eigen::Index t = 0; t < T; ++t) {
    const ConstVectorMap<Scalar> g(dy + t * d, d), n(nhat + t * d, d);
    gain_grad += g.cwiseProduct(n);
    VectorMap<Scalar> out(dh + t * d, d);
    out = g.cwiseProduct(gain);  // d loss / d (h r)
    const Scalar dot = out.dot(n) / static_cast<Scalar>(d);
    out = (out - n * dot) * inv[t];
  }
}

// RoPE (rotate_half) on `heads` heads of width hd starting at column `first` of rows of stride
// `stride`; `sign` -1 applies the inverse rotation (the gradient of RoPE).
template <typename Scalar>
void rope(Scalar* data, Eigen::Index stride, Eigen::Index first, Eigen::Index heads,
          Eigen::Index hd, Eigen::Index T, const Scalar* cos_table, const Scalar* sin_table,
          Scalar sign) {
  const Eigen::Index half = hd / 2;
  for (Eigen::Index t = 0; t < T; ++t) {
    const ConstVectorMap<Scalar> c(cos_table + t * half, half);
    const Scalar* sn = sin_table + t * half;
    for (Eigen::Index head = 0; head < heads; ++head) {
      Scalar* x = data + t * stride + first + head * hd;
      for (Eigen::Index i = 0; i < half; ++i) {
        const Scalar x1 = x[i], x2 = x[i + half], sv = sign * sn[i];
        x[i] = x1 * c(i) - x2 * sv;
        x[i + half] = x2 * c(i) + x1 * sv;
      }
    }
  }
}

}  // namespace

template <typename Scalar>
struct FastBackward<Scalar>::State {
  ThreadPool pool;
  std::vector<Worker<Scalar>> workers;
  Prepared<Scalar> prepared;
  std::mutex progress_mutex;
  std::size_t progress_done = 0;
  std::atomic<bool> stop{false};
  explicit State(int threads) : pool(threads), workers(static_cast<std::size_t>(pool.size())) {}
};

namespace {

template <typename Scalar>
struct SequenceRun {
  const Context<Scalar>& c;
  Worker<Scalar>& w;
  Eigen::Index T;
  const std::vector<int>& tokens;
  const std::function<void()>& step;  // progress (throws Cancelled)

  // ---------------------------------------------------------------- attention (causal, GQA)
  void attention_forward(int layer) {
    const Shape& s = c.s;
    const Scalar* qkv = w.qkv[static_cast<std::size_t>(layer)];
    Scalar* lse = w.lse[static_cast<std::size_t>(layer)];
    Scalar* ctx = w.ctx[static_cast<std::size_t>(layer)];
    const Eigen::Index group = s.H / s.Hkv;
    for (Eigen::Index head = 0; head < s.H; ++head) {
      const Eigen::Index kv = head / group;
      for (Eigen::Index q0 = 0; q0 < T; q0 += kTile) {
        const Eigen::Index rows = std::min(kTile, T - q0), keys = q0 + rows;  // keys 0 .. last row
        const ConstStridedMap<Scalar> Q(qkv + q0 * s.qkvc + head * s.hd, rows, s.hd,
                                        Eigen::OuterStride<>(s.qkvc));
        const ConstStridedMap<Scalar> K(qkv + s.qc + kv * s.hd, keys, s.hd,
                                        Eigen::OuterStride<>(s.qkvc));
        const ConstStridedMap<Scalar> V(qkv + s.qc + s.kvc + kv * s.hd, keys, s.hd,
                                        Eigen::OuterStride<>(s.qkvc));
        Map<Scalar> S(w.scores, rows, keys);
        S.noalias() = Q * K.transpose();
        for (Eigen::Index i = 0; i < rows; ++i) {
          const Eigen::Index visible = q0 + i + 1;
          auto row = S.row(i).head(visible);
          row *= c.scale;
          const Scalar top = row.maxCoeff();
          row = (row.array() - top).exp().matrix();
          const Scalar sum = row.sum();
          row /= sum;
          if (visible < keys) S.row(i).tail(keys - visible).setZero();
          lse[head * T + q0 + i] = top + std::log(sum);
        }
        StridedMap<Scalar>(ctx + q0 * s.qc + head * s.hd, rows, s.hd, Eigen::OuterStride<>(s.qc))
            .noalias() = S * V;
      }
    }
  }

  // dqkv (T, qkvc) from dctx (T, qc): probabilities recomputed per tile from the stored row
  // log-sum-exp; ds = p (dp - sum_j p_j dp_j) scale (attention_backward in core/src/layers.cpp).
  void attention_backward(int layer) {
    const Shape& s = c.s;
    const Scalar* qkv = w.qkv[static_cast<std::size_t>(layer)];
    const Scalar* lse = w.lse[static_cast<std::size_t>(layer)];
    const Eigen::Index group = s.H / s.Hkv;
    for (Eigen::Index t = 0; t < T; ++t) {  // dk, dv accumulate over heads and tiles
      std::fill(w.dqkv + t * s.qkvc + s.qc, w.dqkv + (t + 1) * s.qkvc, Scalar(0));
    }
    for (Eigen::Index head = 0; head < s.H; ++head) {
      const Eigen::Index kv = head / group;
      for (Eigen::Index q0 = 0; q0 < T; q0 += kTile) {
        const Eigen::Index rows = std::min(kTile, T - q0), keys = q0 + rows;
        const ConstStridedMap<Scalar> Q(qkv + q0 * s.qkvc + head * s.hd, rows, s.hd,
                                        Eigen::OuterStride<>(s.qkvc));
        const ConstStridedMap<Scalar> K(qkv + s.qc + kv * s.hd, keys, s.hd,
                                        Eigen::OuterStride<>(s.qkvc));
        const ConstStridedMap<Scalar> V(qkv + s.qc + s.kvc + kv * s.hd, keys, s.hd,
                                        Eigen::OuterStride<>(s.qkvc));
        const ConstStridedMap<Scalar> dO(w.dctx + q0 * s.qc + head * s.hd, rows, s.hd,
                                         Eigen::OuterStride<>(s.qc));
        Map<Scalar> P(w.scores, rows, keys);
        Map<Scalar> dP(w.dscores, rows, keys);
        P.noalias() = Q * K.transpose();
        dP.noalias() = dO * V.transpose();
        for (Eigen::Index i = 0; i < rows; ++i) {
          const Eigen::Index visible = q0 + i + 1;
          auto p = P.row(i).head(visible);
          auto dp = dP.row(i).head(visible);
          p = (p.array() * c.scale - lse[head * T + q0 + i]).exp().matrix();
          const Scalar dot = p.dot(dp);
          dp = (p.array() * (dp.array() - dot) * c.scale).matrix();
          if (visible < keys) {
            P.row(i).tail(keys - visible).setZero();
            dP.row(i).tail(keys - visible).setZero();
          }
        }
        StridedMap<Scalar>(w.dqkv + s.qc + s.kvc + kv * s.hd, keys, s.hd,
                           Eigen::OuterStride<>(s.qkvc))
            .noalias() += P.transpose() * dO;
        StridedMap<Scalar>(w.dqkv + q0 * s.qkvc + head * s.hd, rows, s.hd,
                           Eigen::OuterStride<>(s.qkvc))
            .noalias() = dP * K;
        StridedMap<Scalar>(w.dqkv + s.qc + kv * s.hd, keys, s.hd, Eigen::OuterStride<>(s.qkvc))
            .noalias() += dP.transpose() * Q;
      }
    }
  }

  // ---------------------------------------------------------------- sublayers
  // v (T, d) = f_r(h), PreNorm included; the tape keeps the internals.
  void sublayer_forward(int r, const Scalar* h, Scalar* v) {
    const Shape& s = c.s;
    const auto ru = static_cast<std::size_t>(r);
    const int layer = r / 2;
    const auto lu = static_cast<std::size_t>(layer);
    const LayerWeights<Scalar>& weights = c.model.layers[lu];
    const ConstMap<Scalar> X(w.x[ru], T, s.d);
    if (r % 2 == 0) {
      norm_forward(h, weights.input_layernorm, c.eps, T, s.d, w.inv[ru], w.nhat[ru], w.x[ru]);
      Map<Scalar>(w.qkv[lu], T, s.qkvc).noalias() = X * c.prepared.qkv[lu].transpose();
      rope(w.qkv[lu], s.qkvc, Eigen::Index(0), s.H + s.Hkv, s.hd, T, w.rope_cos.data(),
           w.rope_sin.data(), Scalar(1));
      attention_forward(layer);
      Map<Scalar>(v, T, s.d).noalias() =
          ConstMap<Scalar>(w.ctx[lu], T, s.qc) * weights.o_proj.transpose();
    } else {
      norm_forward(h, weights.post_attention_layernorm, c.eps, T, s.d, w.inv[ru], w.nhat[ru],
                   w.x[ru]);
      Map<Scalar>(w.gu[lu], T, 2 * s.F).noalias() = X * c.prepared.gate_up[lu].transpose();
      for (Eigen::Index t = 0; t < T; ++t) {
        const ConstVectorMap<Scalar> gate(w.gu[lu] + t * 2 * s.F, s.F),
            up(w.gu[lu] + t * 2 * s.F + s.F, s.F);
        VectorMap<Scalar>(w.act[lu] + t * s.F, s.F) =
            (gate.array() / (Scalar(1) + (-gate.array()).exp()) * up.array())
                .matrix();  // silu(g) * u
      }
      Map<Scalar>(v, T, s.d).noalias() =
          ConstMap<Scalar>(w.act[lu], T, s.F) * weights.down_proj.transpose();
    }
  }

  // dh (T, d) = d loss / d h of sublayer r from dv = d loss / d v_{r+1}; weight gradients added.
  void sublayer_backward(int r, const Scalar* dv_data, Scalar* dh) {
    const Shape& s = c.s;
    const auto ru = static_cast<std::size_t>(r);
    const int layer = r / 2;
    const auto lu = static_cast<std::size_t>(layer);
    const LayerWeights<Scalar>& weights = c.model.layers[lu];
    LayerWeights<Scalar>& grad = w.grad.layers[lu];
    const ConstMap<Scalar> dv(dv_data, T, s.d);
    const ConstMap<Scalar> X(w.x[ru], T, s.d);
    Map<Scalar> dx(w.dx, T, s.d);
    if (r % 2 == 0) {
      grad.o_proj.noalias() += dv.transpose() * ConstMap<Scalar>(w.ctx[lu], T, s.qc);
      Map<Scalar>(w.dctx, T, s.qc).noalias() = dv * weights.o_proj;
      attention_backward(layer);
      rope(w.dqkv, s.qkvc, Eigen::Index(0), s.H + s.Hkv, s.hd, T, w.rope_cos.data(),
           w.rope_sin.data(), Scalar(-1));
      const ConstMap<Scalar> dqkv(w.dqkv, T, s.qkvc);
      w.dqkv_w[lu].noalias() += dqkv.transpose() * X;
      dx.noalias() = dqkv * c.prepared.qkv[lu];
      norm_backward(w.dx, w.inv[ru], w.nhat[ru], weights.input_layernorm, T, s.d, dh,
                    grad.input_layernorm);
    } else {
      grad.down_proj.noalias() += dv.transpose() * ConstMap<Scalar>(w.act[lu], T, s.F);
      Map<Scalar>(w.dact, T, s.F).noalias() = dv * weights.down_proj;
      for (Eigen::Index t = 0; t < T; ++t) {
        const Scalar* gu = w.gu[lu] + t * 2 * s.F;
        const auto gate = ConstVectorMap<Scalar>(gu, s.F).array();
        const auto up = ConstVectorMap<Scalar>(gu + s.F, s.F).array();
        const auto da = ConstVectorMap<Scalar>(w.dact + t * s.F, s.F).array();
        VectorMap<Scalar> dgate(w.dgu + t * 2 * s.F, s.F), dup(w.dgu + t * 2 * s.F + s.F, s.F);
        dgate = (Scalar(1) / (Scalar(1) + (-gate).exp())).matrix();  // sigmoid, kept in dgate's row
        dup = (da * (gate * dgate.array())).matrix();                // d up = da * silu(g)
        // silu'(g) = s (1 + g (1 - s)).
        dgate =
            (da * up * dgate.array() * (Scalar(1) + gate * (Scalar(1) - dgate.array()))).matrix();
      }
      const ConstMap<Scalar> dgu(w.dgu, T, 2 * s.F);
      w.dgate_up_w[lu].noalias() += dgu.transpose() * X;
      dx.noalias() = dgu * c.prepared.gate_up[lu];
      norm_backward(w.dx, w.inv[ru], w.nhat[ru], weights.post_attention_layernorm, T, s.d, dh,
                    grad.post_attention_layernorm);
    }
  }

  // ---------------------------------------------------------------- depth reads
  void set_inverse_rms(int value) {
    const Scalar* data = w.value[static_cast<std::size_t>(value)];
    Scalar* inv = w.value_inv[static_cast<std::size_t>(value)];
    for (Eigen::Index t = 0; t < T; ++t)
      inv[t] = inverse_rms_of_row(data + t * c.s.d, c.s.d, c.key_eps);
  }

  // Read r with the two-phase schedule (core/src/forward.cpp: phase_one, phase_two_read): writes
  // h (T, d) and alpha (T, n).
  void read_forward(int r, Scalar* h) {
    const Plan& plan = c.plan;
    const Eigen::Index d = c.s.d;
    const auto ru = static_cast<std::size_t>(r);
    const std::vector<int>& values = plan.read_value[ru];
    const auto n = static_cast<Eigen::Index>(values.size());
    const int first = plan.group_first[ru];
    const Eigen::Index q = plan.group_last[ru] - first + 1, j = r - first;
    const Eigen::Index shared = plan.group_shared[ru];
    if (r == first) {
      // Phase 1: the group's q stacked queries score the shared history once.
      const auto Qg = c.prepared.queries.middleRows(first, q);  // (q, d)
      for (Eigen::Index i = 0; i < shared; ++i) {
        const auto vi = static_cast<std::size_t>(values[static_cast<std::size_t>(i)]);
        Map<Scalar> Z(w.zhist + i * T * q, T, q);
        Z.noalias() = ConstMap<Scalar>(w.value[vi], T, d) * Qg.transpose();
        Z.array().colwise() *= ConstVectorMap<Scalar>(w.value_inv[vi], T).array();
      }
      for (Eigen::Index t = 0; t < T; ++t) {
        for (Eigen::Index k = 0; k < q; ++k) {
          Scalar top = -std::numeric_limits<Scalar>::infinity();
          for (Eigen::Index i = 0; i < shared; ++i)
            top = std::max(top, w.zhist[(i * T + t) * q + k]);
          VectorMap<Scalar> o(w.o + (k * T + t) * d, d);
          o.setZero();
          Scalar sum = 0;
          for (Eigen::Index i = 0; i < shared; ++i) {
            const Scalar weight = std::exp(w.zhist[(i * T + t) * q + k] - top);
            sum += weight;
            o += weight *
                 ConstVectorMap<Scalar>(
                     w.value[static_cast<std::size_t>(values[static_cast<std::size_t>(i)])] + t * d,
                     d);
          }
          w.m[k * T + t] = top;
          w.l[k * T + t] = sum;
        }
      }
    }
    // Phase 2: merge the sources produced inside the group, then divide once.
    const ConstVectorMap<Scalar> query(c.prepared.queries.row(r).data(), d);
    Scalar* alpha = w.alpha[ru];
    Scalar* m = w.m + j * T;
    Scalar* l = w.l + j * T;
    for (Eigen::Index t = 0; t < T; ++t) {
      Scalar* z = alpha + t * n;  // scores first, weights after
      for (Eigen::Index i = 0; i < shared; ++i) z[i] = w.zhist[(i * T + t) * q + j];
      VectorMap<Scalar> o(w.o + (j * T + t) * d, d);
      for (Eigen::Index i = shared; i < n; ++i) {
        const auto vi = static_cast<std::size_t>(values[static_cast<std::size_t>(i)]);
        const ConstVectorMap<Scalar> value(w.value[vi] + t * d, d);
        const Scalar score = query.dot(value) * w.value_inv[vi][t];
        z[i] = score;
        const Scalar top = std::max(m[t], score);
        const Scalar scale_old = std::exp(m[t] - top), scale_new = std::exp(score - top);
        o = o * scale_old + scale_new * value;
        l[t] = l[t] * scale_old + scale_new;
        m[t] = top;
      }
      VectorMap<Scalar>(h + t * d, d) = o / l[t];
      for (Eigen::Index i = 0; i < n; ++i) z[i] = std::exp(z[i] - m[t]) / l[t];
    }
  }

  // Backward of read r (depth_attention_backward in core/include/attnres/depth_attention.hpp):
  // adds d loss / d source into the sources' gradient slots and the query/gain gradients.
  void read_backward(int r, const Scalar* dh) {
    const Plan& plan = c.plan;
    const Eigen::Index d = c.s.d;
    const auto ru = static_cast<std::size_t>(r);
    const std::vector<int>& values = plan.read_value[ru];
    const std::vector<int>& slots = plan.read_slot[ru];
    const auto n = static_cast<Eigen::Index>(values.size());
    const ConstVectorMap<Scalar> query(c.prepared.queries.row(r).data(), d);  // w * g
    const Scalar* alpha = w.alpha[ru];
    Vector<Scalar>& dquery = w.dquery;
    dquery.setZero();
    Scalar* dalpha = w.dalpha.data();  // (sources) of one token
    for (Eigen::Index t = 0; t < T; ++t) {
      const ConstVectorMap<Scalar> g(dh + t * d, d);
      const Scalar* a = alpha + t * n;
      Scalar mean = 0;
      for (Eigen::Index i = 0; i < n; ++i) {
        dalpha[i] = g.dot(ConstVectorMap<Scalar>(
            w.value[static_cast<std::size_t>(values[static_cast<std::size_t>(i)])] + t * d, d));
        mean += a[i] * dalpha[i];
      }
      for (Eigen::Index i = 0; i < n; ++i) {
        const int slot = slots[static_cast<std::size_t>(i)];
        if (slot < 0) continue;  // the zero placeholder: no parameters, zero value
        const auto vi = static_cast<std::size_t>(values[static_cast<std::size_t>(i)]);
        const ConstVectorMap<Scalar> value(w.value[vi] + t * d, d);
        const Scalar inv = w.value_inv[vi][t];
        const Scalar dz_r = a[i] * (dalpha[i] - mean) * inv;
        dquery += dz_r * value;
        const Scalar projected = value.dot(query);
        // d z_i / d v_i = r_i q - (u_i r_i^3 / d) v_i.
        const Scalar value_scale = -dz_r * projected * inv * inv / static_cast<Scalar>(d);
        VectorMap<Scalar> out(w.dacc[static_cast<std::size_t>(slot)] + t * d, d);
        out += a[i] * g + dz_r * query + value_scale * value;
      }
    }
    const DepthReadWeights<Scalar>& read = c.model.depth_read(r);
    DepthReadWeights<Scalar>& grad = w.grad.depth_read(r);
    grad.query += dquery.cwiseProduct(read.key_norm_gain);
    grad.key_norm_gain += dquery.cwiseProduct(read.query);
  }

  // ---------------------------------------------------------------- the whole sequence
  void run() {
    const Shape& s = c.s;
    const Plan& plan = c.plan;
    const int L = s.L;
    const Eigen::Index d = s.d;
    const auto plane = static_cast<std::size_t>(T * d);
    auto add = [&](Scalar* target, const Scalar* source) {
      VectorMap<Scalar>(target, T * d) += ConstVectorMap<Scalar>(source, T * d);
    };
    auto squares = [&](const Scalar* data) {
      double sum = 0.0;
      for (Eigen::Index t = 0; t < T; ++t)
        sum += ConstVectorMap<Scalar>(data + t * d, d).template cast<double>().squaredNorm();
      return sum;
    };

    // ---- Forward, keeping the tape.
    Scalar* embedding = plan.standard ? w.h : w.value[0];
    for (Eigen::Index t = 0; t < T; ++t) {
      const auto row = c.model.embed_tokens.row(tokens[static_cast<std::size_t>(t)]);
      std::copy(row.data(), row.data() + d, embedding + t * d);
    }
    if (!plan.standard) {
      set_inverse_rms(0);
      if (plan.zero_value >= 0) {
        std::fill(w.value[static_cast<std::size_t>(plan.zero_value)],
                  w.value[static_cast<std::size_t>(plan.zero_value)] + plane, Scalar(0));
        set_inverse_rms(plan.zero_value);
      }
      if (plan.block)
        std::fill(w.value[1], w.value[1] + plane, Scalar(0));  // block 1's partial sum
    }
    for (int r = 0; r <= L; ++r) {
      step();
      if (plan.standard) {
        if (r == L) break;  // h is the final hidden state
        sublayer_forward(r, w.h, w.v);
        w.output_squares[static_cast<std::size_t>(r)] += squares(w.v);
        add(w.h, w.v);
        continue;
      }
      const int partial = plan.partial_of_read[static_cast<std::size_t>(r)];
      if (partial >= 0) {  // the partial sum as this read sees it
        const int copy = plan.read_value[static_cast<std::size_t>(r)].back();
        std::copy(w.value[static_cast<std::size_t>(partial)],
                  w.value[static_cast<std::size_t>(partial)] + plane,
                  w.value[static_cast<std::size_t>(copy)]);
        set_inverse_rms(copy);
      }
      read_forward(r, w.h);
      if (r == L) break;
      const int sublayer = r + 1;  // 1-based
      if (!plan.block) {
        sublayer_forward(r, w.h, w.value[static_cast<std::size_t>(sublayer)]);
        w.output_squares[static_cast<std::size_t>(r)] +=
            squares(w.value[static_cast<std::size_t>(sublayer)]);
        set_inverse_rms(sublayer);
      } else {
        const int n = plan.layout.block_of_sublayer(sublayer);
        sublayer_forward(r, w.h, w.v);
        w.output_squares[static_cast<std::size_t>(r)] += squares(w.v);
        add(w.value[static_cast<std::size_t>(n)], w.v);
        if (sublayer % plan.layout.block_size == 0 || sublayer == L) {  // block n complete: b_n
          set_inverse_rms(n);
          if (sublayer < L)
            std::fill(w.value[static_cast<std::size_t>(n + 1)],
                      w.value[static_cast<std::size_t>(n + 1)] + plane, Scalar(0));
        }
      }
    }

    // ---- Loss: logits = RMSNorm(h_final) W_head^T, next-token cross-entropy.
    const auto Lu = static_cast<std::size_t>(L);
    norm_forward(w.h, c.model.norm, c.eps, T, d, w.inv[Lu], w.nhat[Lu], w.x[Lu]);
    const ConstMap<Scalar> Xf(w.x[Lu], T, d);
    Map<Scalar> logits(w.logits, T, s.vocab);
    logits.noalias() = Xf * c.model.lm_head.transpose();
    double sum = 0.0;
    const auto loss_scale = static_cast<Scalar>(c.loss_scale);
    for (Eigen::Index p = 0; p < T; ++p) {
      auto row = logits.row(p);
      if (p + 1 == T) {
        row.setZero();  // the last position predicts nothing
        break;
      }
      const Scalar top = row.maxCoeff();
      const Scalar log_sum_exp = top + std::log((row.array() - top).exp().sum());
      const int target = tokens[static_cast<std::size_t>(p + 1)];
      sum += static_cast<double>(log_sum_exp - row(target));
      row = (row.array() - log_sum_exp).exp().matrix();  // softmax
      row(target) -= Scalar(1);
      row *= loss_scale;
    }
    w.loss += sum * c.loss_scale;
    w.grad.lm_head.noalias() += logits.transpose() * Xf;
    Map<Scalar>(w.dx, T, d).noalias() = logits * c.model.lm_head;
    norm_backward(w.dx, w.inv[Lu], w.nhat[Lu], c.model.norm, T, d, w.dh, w.grad.norm);

    // ---- Backward sweep over reads L .. 0 (core/src/backward.cpp): when sublayer r is reached
    // every later read has passed its gradient back, so its output's slot holds d loss / d v_{r+1}.
    for (int slot = 0; slot < plan.slots; ++slot) {
      std::fill(w.dacc[static_cast<std::size_t>(slot)],
                w.dacc[static_cast<std::size_t>(slot)] + plane, Scalar(0));
    }
    for (int r = L; r >= 0; --r) {
      step();
      if (r < L) {
        const Scalar* dv =
            w.dacc[static_cast<std::size_t>(plan.output_slot[static_cast<std::size_t>(r)])];
        w.grad_squares[static_cast<std::size_t>(r)] += squares(dv);
        sublayer_backward(r, dv, w.dh);
      }
      if (plan.standard) {
        add(w.dacc[0], w.dh);  // h_r = v_0 + .. + v_r: the running sum of the read gradients
      } else {
        read_backward(r, w.dh);
      }
    }
    for (Eigen::Index t = 0; t < T; ++t) {
      w.grad.embed_tokens.row(tokens[static_cast<std::size_t>(t)]) +=
          ConstVectorMap<Scalar>(w.dacc[0] + t * d, d).transpose();
    }
  }
};

template <typename Scalar>
void zero(ModelWeights<Scalar>& weights) {
  visit_tensors(weights, [](const TensorRef<Scalar>& tensor) {
    std::fill(tensor.data, tensor.data + tensor.element_count(), Scalar(0));
  });
}

// Whether two models have the same tensors (visit_tensors only reads the shapes here).
template <typename Scalar>
bool same_shapes(const ModelWeights<Scalar>& a, const ModelWeights<Scalar>& b) {
  if (a.layers.size() != b.layers.size()) return false;
  std::vector<std::vector<std::int64_t>> shapes_a, shapes_b;
  visit_tensors(const_cast<ModelWeights<Scalar>&>(a),
                [&](const TensorRef<Scalar>& tensor) { shapes_a.push_back(tensor.shape); });
  visit_tensors(const_cast<ModelWeights<Scalar>&>(b),
                [&](const TensorRef<Scalar>& tensor) { shapes_b.push_back(tensor.shape); });
  return shapes_a == shapes_b;
}

}  // namespace

template <typename Scalar>
FastBackward<Scalar>::FastBackward(const ModelConfig&, int threads)
    : state_(std::make_unique<State>(threads)) {}

template <typename Scalar>
FastBackward<Scalar>::~FastBackward() = default;

template <typename Scalar>
int FastBackward<Scalar>::threads() const {
  return state_->pool.size();
}

template <typename Scalar>
void FastBackward<Scalar>::compute(const ModelWeights<Scalar>& model,
                                   const std::vector<std::vector<int>>& batch,
                                   const ForwardOptions& options, Gradients<Scalar>& out) {
  State& state = *state_;
  const ModelConfig& config = model.config;
  const std::int64_t predicted = check_training_batch(config, batch, "gradients");
  const Plan plan = make_plan(config, options);
  const Shape shape(config);
  const int L = shape.L;
  const auto Lu = static_cast<std::size_t>(L);

  // Fused weights and effective queries, once per call (the model changes between steps).
  Prepared<Scalar>& prepared = state.prepared;
  prepared.qkv.resize(model.layers.size());
  prepared.gate_up.resize(model.layers.size());
  state.pool.parallel_for(model.layers.size(), [&](std::size_t begin, std::size_t end, int) {
    for (std::size_t i = begin; i < end; ++i) {
      const LayerWeights<Scalar>& layer = model.layers[i];
      prepared.qkv[i].resize(shape.qkvc, shape.d);
      prepared.qkv[i] << layer.q_proj, layer.k_proj, layer.v_proj;
      prepared.gate_up[i].resize(2 * shape.F, shape.d);
      prepared.gate_up[i] << layer.gate_proj, layer.up_proj;
    }
  });
  prepared.queries.resize(L + 1, shape.d);
  for (int r = 0; r <= L; ++r) {
    const auto& read = model.depth_read(r);
    prepared.queries.row(r) = read.query.cwiseProduct(read.key_norm_gain).transpose();
  }

  // Workers: contiguous chunks of the batch, at most one per sequence.
  const int parts = static_cast<int>(
      std::min<std::size_t>(static_cast<std::size_t>(state.pool.size()), batch.size()));
  for (int k = 0; k < parts; ++k) {
    Worker<Scalar>& w = state.workers[static_cast<std::size_t>(k)];
    if (!same_shapes(w.grad, model)) {
      w.grad = zero_like(model);
      w.dqkv_w.assign(model.layers.size(), Matrix<Scalar>(shape.qkvc, shape.d));
      w.dgate_up_w.assign(model.layers.size(), Matrix<Scalar>(2 * shape.F, shape.d));
    }
    w.grad.config = config;
    w.grad.has_attn_res_tensors = model.has_attn_res_tensors;
    zero(w.grad);
    for (auto& g : w.dqkv_w) g.setZero();
    for (auto& g : w.dgate_up_w) g.setZero();
    w.dquery.resize(shape.d);
    w.dalpha.resize(plan.max_sources);
    w.loss = 0.0;
    w.output_squares.assign(Lu, 0.0);
    w.grad_squares.assign(Lu, 0.0);
    w.theta = config.rope_theta;
  }

  const Context<Scalar> context{model,
                                shape,
                                plan,
                                prepared,
                                static_cast<Scalar>(config.rms_norm_eps),
                                static_cast<Scalar>(config.attn_res.key_norm_eps),
                                Scalar(1) / std::sqrt(static_cast<Scalar>(shape.hd)),
                                1.0 / static_cast<double>(predicted)};
  const std::size_t total = batch.size() * static_cast<std::size_t>(2 * L + 2);
  state.progress_done = 0;
  state.stop.store(false);
  // Progress (options.progress) is called under a lock, with a running count of the steps of
  // every worker; a cancelled step stops the other workers at their next step.
  auto step = [&] {
    if (state.stop.load(std::memory_order_relaxed)) throw Cancelled("backward pass cancelled");
    if (!options.progress) return;
    std::lock_guard<std::mutex> lock(state.progress_mutex);
    try {
      report_progress(options.progress, state.progress_done++, total, "backward pass");
    } catch (...) {
      state.stop.store(true);
      throw;
    }
  };
  const std::function<void()> step_function = step;
  state.pool.parallel_for(batch.size(), [&](std::size_t begin, std::size_t end, int worker) {
    Worker<Scalar>& w = state.workers[static_cast<std::size_t>(worker)];
    for (std::size_t b = begin; b < end; ++b) {
      const auto T = static_cast<Eigen::Index>(batch[b].size());
      w.carve(shape, plan, T);
      SequenceRun<Scalar>{context, w, T, batch[b], step_function}.run();
    }
  });

  // Split the fused gradients, then sum the workers in order.
  state.pool.parallel_for(static_cast<std::size_t>(parts),
                          [&](std::size_t begin, std::size_t end, int) {
                            for (std::size_t k = begin; k < end; ++k) {
                              Worker<Scalar>& w = state.workers[k];
                              for (std::size_t i = 0; i < model.layers.size(); ++i) {
                                LayerWeights<Scalar>& g = w.grad.layers[i];
                                g.q_proj = w.dqkv_w[i].topRows(shape.qc);
                                g.k_proj = w.dqkv_w[i].middleRows(shape.qc, shape.kvc);
                                g.v_proj = w.dqkv_w[i].bottomRows(shape.kvc);
                                g.gate_proj = w.dgate_up_w[i].topRows(shape.F);
                                g.up_proj = w.dgate_up_w[i].bottomRows(shape.F);
                              }
                            }
                          });
  if (!same_shapes(out.grad, model)) out.grad = zero_like(model);
  out.grad.config = config;
  out.grad.has_attn_res_tensors = model.has_attn_res_tensors;
  // Tensor by tensor (in parallel over tensors); each element is summed in worker order.
  std::vector<Scalar*> targets;
  visit_tensors(out.grad, [&](const TensorRef<Scalar>& tensor) { targets.push_back(tensor.data); });
  std::vector<std::vector<const Scalar*>> sources(static_cast<std::size_t>(parts));
  std::vector<std::int64_t> counts;
  for (int k = 0; k < parts; ++k) {
    visit_tensors(state.workers[static_cast<std::size_t>(k)].grad,
                  [&](const TensorRef<Scalar>& tensor) {
                    sources[static_cast<std::size_t>(k)].push_back(tensor.data);
                    if (k == 0) counts.push_back(tensor.element_count());
                  });
  }
  state.pool.parallel_for(targets.size(), [&](std::size_t begin, std::size_t end, int) {
    for (std::size_t i = begin; i < end; ++i) {
      VectorMap<Scalar> target(targets[i], counts[i]);
      target = ConstVectorMap<Scalar>(sources[0][i], counts[i]);
      for (int k = 1; k < parts; ++k)
        target += ConstVectorMap<Scalar>(sources[static_cast<std::size_t>(k)][i], counts[i]);
    }
  });
  Worker<Scalar>& first = state.workers[0];
  out.loss = first.loss;
  std::vector<double> output_squares = first.output_squares, grad_squares = first.grad_squares;
  for (int k = 1; k < parts; ++k) {
    const Worker<Scalar>& w = state.workers[static_cast<std::size_t>(k)];
    out.loss += w.loss;
    for (std::size_t r = 0; r < Lu; ++r) {
      output_squares[r] += w.output_squares[r];
      grad_squares[r] += w.grad_squares[r];
    }
  }
  out.predicted = predicted;
  double elements = 0.0;
  for (const auto& tokens : batch)
    elements += static_cast<double>(tokens.size()) * static_cast<double>(shape.d);
  out.sublayer_output_rms.resize(Lu);
  out.sublayer_output_grad_rms.resize(Lu);
  for (std::size_t r = 0; r < Lu; ++r) {
    out.sublayer_output_rms[r] = std::sqrt(output_squares[r] / elements);
    out.sublayer_output_grad_rms[r] = std::sqrt(grad_squares[r] / elements);
  }
}

template class FastBackward<float>;
template class FastBackward<double>;

}  // namespace attnres::engine
