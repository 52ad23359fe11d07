// The data of the fast CPU backward pass (fast_backward.cpp has the overview): the sizes of the
// model, the plan of one call's depth history, the fused weights, one worker's tape, scratch and
// gradients, the RMSNorm steps that every part uses, and the steps of one sequence defined in the
// other files: its sublayers (fast_backward_layers.cpp) and its depth reads
// (fast_backward_depth.cpp). Internal to the engine library.
#pragma once

#include <Eigen/Core>
#include <vector>

#include "attnres/depth_layout.hpp"
#include "attnres/forward.hpp"
#include "attnres/layers.hpp"
#include "attnres/model.hpp"
#include "attnres/tensor.hpp"
#include "cpu/eigen_maps.hpp"
#include "cpu/matmul.hpp"
#include "cpu/thread_pool.hpp"

namespace attnres::engine::backward {

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
  // Reads of the other read-based schemes (docs/schemes.md): any gate, key norm, window, heads,
  // query source and mixing; DenseFormer; the rescaled residual. The paper's reads (softmax, key
  // norm, static query, one head) keep the stacked two-phase path.
  AttnResConfig scheme;      // resolve_scheme(config, options)
  bool zoo = false;          // a read-based scheme other than the paper's
  bool two_phase = true;     // zoo: the group's shared history once, then its own sources
  bool input_query = false;  // zoo: query_source = input (one-shot reads)
  Eigen::Index heads = 1;    // zoo: depth-attention heads
  // mHC (docs/schemes.md): m streams per token, C = 2m + m^2 coefficients per sublayer.
  bool mhc = false;
  Eigen::Index streams = 0, coefficients = 0;
};

// The plan of a call with `options` on `config` (resolve_layout's errors).
Plan make_plan(const ModelConfig& config, const ForwardOptions& options);

// Weights rearranged once per call, and rounded to bf16 once per call when the products take
// bf16 inputs (empty otherwise).
template <typename Scalar>
struct Prepared {
  std::vector<Matrix<Scalar>> qkv;      // per layer (qc + 2 kvc, d): q_proj, k_proj, v_proj stacked
  std::vector<Matrix<Scalar>> gate_up;  // per layer (2F, d): gate_proj, up_proj stacked
  Matrix<Scalar> queries;               // (L + 1, d): effective query w * g of every read
  std::vector<std::vector<Bf16>> qkv16, gate_up16, o16, down16;  // per layer
  std::vector<Bf16> lm_head16;
  std::vector<Vector<Scalar>> mhc_bias;  // mHC, per sublayer: (C) biases of H_pre, H_post, H_res
  std::vector<Matrix<Scalar>> mhc_proj;  // mHC, per sublayer: (C, m d) their projections
};

// One worker's buffers: the tape and scratch of one sequence (carved from one arena for the
// sequence's T), its gradients and its sums.
template <typename Scalar>
struct Worker {
  Matmul matmul;  // this worker's products (matmul.hpp)
  // When the batch leaves workers idle (split_products), the one busy worker splits each product's
  // rows over the pool, every part on its own worker's Matmul (`team`).
  ThreadPool* split_pool = nullptr;
  std::vector<Worker>* team = nullptr;

  // C = A B (+ C when `accumulate`): on this worker, or split by rows over the pool.
  void product(Scalar* C, Eigen::Index ldc, const Operand<Scalar>& A, const Operand<Scalar>& B,
               bool accumulate = false) {
    if (split_pool == nullptr || A.rows < 16 * split_pool->size()) {
      matmul(C, ldc, A, B, accumulate);
      return;
    }
    split_pool->parallel_for(
        static_cast<std::size_t>(A.rows), [&](std::size_t begin, std::size_t end, int k) {
          const auto first = static_cast<Eigen::Index>(begin);
          (*team)[static_cast<std::size_t>(k)].matmul(
              C + first * ldc, ldc, row_slice(A, first, static_cast<Eigen::Index>(end - begin)), B,
              accumulate);
        });
  }

  Buffer<Scalar> arena;
  // Tape, per sublayer r = 0 .. L-1 and the final norm at index L.
  std::vector<Scalar*> inv, nhat, x;  // (T), (T, d) RMS-normalised input without / with the gain
  // Tape, per layer.
  std::vector<Scalar*> qkv, lse, ctx;  // (T, qkvc) roped, (H, T) row log-sum-exp, (T, qc)
  std::vector<Scalar*> gu, act;        // (T, 2F) gate|up pre-activations, (T, F) silu(gate) * up
  // Depth history.
  std::vector<Scalar*> value, value_inv;  // per value (T, d), (T)
  std::vector<Scalar*> alpha;             // per read (T, sources); zoo: (T, H sources)
  std::vector<Scalar*> zscore;            // zoo, per read (T, H sources): the scores
  std::vector<Scalar*> query_inv, query_y, query_q, query_effective;  // zoo input query, per read
  Scalar *zm = nullptr, *zl = nullptr;    // zoo statistics (group, T, H)
  Scalar *dqs = nullptr, *dys = nullptr;  // zoo input query: (T, d) d loss / d q and d y
  // mHC tape: the streams before sublayer r (r = L: after the last), (T, m d); each sublayer's
  // inverse RMS (T), normalised streams (T, m d), logits and coefficients (T, C), output (T, d).
  std::vector<Scalar*> mhc_X, mhc_inv, mhc_flat, mhc_logits, mhc_coef, mhc_v;
  Scalar *mhc_dX = nullptr, *mhc_dflat = nullptr, *mhc_dlogits = nullptr, *mhc_dv = nullptr;
  std::vector<Scalar*> dacc;          // per gradient slot (T, d)
  Scalar *h = nullptr, *v = nullptr;  // (T, d) read output / running h, sublayer output
  Scalar *o = nullptr, *m = nullptr, *l = nullptr, *zhist = nullptr;  // two-phase statistics
  Scalar* logits = nullptr;                                           // (T, vocab)
  Scalar *dh = nullptr, *dx = nullptr, *dctx = nullptr, *dqkv = nullptr, *dgu = nullptr,
         *dact = nullptr;
  Scalar *scores = nullptr, *dscores = nullptr;  // (kTile, T) attention tile scratch
  Vector<Scalar> dquery;                         // (d)
  Vector<Scalar> dalpha;                         // (H sources)
  Vector<Scalar> dscore;                         // zoo: (H sources)
  std::vector<const Scalar*> zoo_sources;        // zoo: (sources) a read's values
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
      const auto Hz = static_cast<std::size_t>(plan.heads);
      take_many(value_inv, static_cast<std::size_t>(plan.values), Tz * Hz);
      alpha.resize(plan.read_value.size());
      zscore.resize(plan.read_value.size());
      for (std::size_t r = 0; r < alpha.size(); ++r) {
        alpha[r] = take(Tz * Hz * plan.read_value[r].size());
        zscore[r] = take(plan.zoo ? Tz * Hz * plan.read_value[r].size() : 0);
      }
      const std::size_t query_plane = plan.input_query ? Tz * dz : 0;
      take_many(query_inv, plan.read_value.size(), plan.input_query ? Tz : 0);
      take_many(query_y, plan.read_value.size(), query_plane);
      take_many(query_q, plan.read_value.size(), query_plane);
      take_many(query_effective, plan.read_value.size(), query_plane);
      dqs = take(query_plane);
      dys = take(query_plane);
      const std::size_t streams_plane = static_cast<std::size_t>(plan.streams) * Tz * dz;
      const std::size_t mhc_layers = plan.mhc ? L : 0;
      const std::size_t coefficient_plane = static_cast<std::size_t>(plan.coefficients) * Tz;
      take_many(mhc_X, plan.mhc ? L + 1 : 0, streams_plane);
      take_many(mhc_inv, mhc_layers, Tz);
      take_many(mhc_flat, mhc_layers, streams_plane);
      take_many(mhc_logits, mhc_layers, coefficient_plane);
      take_many(mhc_coef, mhc_layers, coefficient_plane);
      take_many(mhc_v, mhc_layers, Tz * dz);
      mhc_dX = take(plan.mhc ? streams_plane : 0);
      mhc_dflat = take(plan.mhc ? streams_plane : 0);
      mhc_dlogits = take(plan.mhc ? coefficient_plane : 0);
      mhc_dv = take(plan.mhc ? Tz * dz : 0);
      take_many(dacc, static_cast<std::size_t>(plan.slots), Tz * dz);
      h = take(Tz * dz);
      v = take(Tz * dz);
      const auto group = static_cast<std::size_t>(plan.max_group);
      o = take(group * Tz * dz);
      m = take(group * Tz);
      l = take(group * Tz);
      zhist = take(static_cast<std::size_t>(plan.max_shared) * Tz * group);
      zm = take(plan.zoo ? group * Tz * Hz : 0);
      zl = take(plan.zoo ? group * Tz * Hz : 0);
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

// d loss / d h of x = g * (h r) (rms_norm_backward in core/model/src/layers.cpp); adds sum_t dy *
// (h r) to the gain's gradient.
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

// The sublayers of one sequence on one worker (fast_backward_layers.cpp).
template <typename Scalar>
struct LayerSteps {
  const Context<Scalar>& c;
  Worker<Scalar>& w;
  Eigen::Index T;

  // ctx (T, qc) and each row's log-sum-exp of causal attention over the layer's roped (q|k|v).
  void attention_forward(int layer);
  // dqkv (T, qkvc) from dctx (T, qc).
  void attention_backward(int layer);
  // v (T, d) = f_r(h), PreNorm included; the tape keeps the internals.
  void sublayer_forward(int r, const Scalar* h, Scalar* v);
  // dh (T, d) = d loss / d h of sublayer r from dv = d loss / d v_{r+1}; weight gradients added.
  void sublayer_backward(int r, const Scalar* dv_data, Scalar* dh);
};

// The depth reads of one sequence on one worker (fast_backward_depth.cpp).
template <typename Scalar>
struct DepthSteps {
  const Context<Scalar>& c;
  Worker<Scalar>& w;
  Eigen::Index T;

  // value_inv of a stored value: its per-token inverse RMS (the key norm's; per head, (T, H), for
  // a zoo scheme's heads).
  void set_inverse_rms(int value);
  // h (T, d) and alpha (T, sources) of read r, two-phase.
  void read_forward(int r, Scalar* h);
  // Adds d loss / d source of read r into the sources' gradient slots, and the query/gain
  // gradients.
  void read_backward(int r, const Scalar* dh);
  // The same for a read of the other read-based schemes (plan.zoo): h, alpha (T, H sources) and
  // the scores by the kernels of any read; the backward of depth_read_backward
  // (core/model/src/depth_read.cpp), one pass per token, then the input query's products.
  void zoo_read_forward(int r, Scalar* h);
  void zoo_read_backward(int r, const Scalar* dh);
  // mHC (plan.mhc), with the kernels of kernels.hpp: the streams start as m copies of the
  // embedding h; sublayer r's coefficients from its streams and its input u -> h; the write of its
  // output; the final read (the mean of the streams) -> h.
  void mhc_start(const Scalar* embedding);
  void mhc_read(int r, Scalar* h);
  void mhc_write(int r);
  void mhc_final(Scalar* h);
  // Backward: d loss / d X after the last sublayer from dh of the final read; dv of sublayer r
  // (mhc_dv); then the step's backward from du (d loss / d u), adding its parameters' gradients;
  // at the end, d loss / d embedding (T, d) = the sum over the streams.
  void mhc_final_backward(const Scalar* dh);
  const Scalar* mhc_output_gradient(int r);
  void mhc_step_backward(int r, const Scalar* du);
  void mhc_embedding_gradient(Scalar* dembedding);
};

// Instantiated in their files.
extern template struct LayerSteps<float>;
extern template struct LayerSteps<double>;
extern template struct DepthSteps<float>;
extern template struct DepthSteps<double>;

}  // namespace attnres::engine::backward
