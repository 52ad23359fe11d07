#include "cpu/fast_forward.hpp"

#include <Eigen/Core>
#include <Eigen/StdVector>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>

#include "attnres/cancel.hpp"
#include "attnres/depth_read.hpp"
#include "attnres/forward_steps.hpp"
#include "attnres/kernels.hpp"
#include "attnres/layers.hpp"
#include "attnres/tensor.hpp"
#include "cpu/eigen_maps.hpp"
#include "cpu/matmul.hpp"
#include "cpu/thread_pool.hpp"
#include "src/fast_pass.hpp"

namespace attnres::engine {

namespace {

constexpr int kTile = 64;  // attention query/key tile
// Key tiles between two looks at the cancellation flag inside attention: a few milliseconds of
// work, so a pass over a very long sequence stops within well under a second of Ctrl-C.
constexpr int kKeyTilesPerCancelCheck = 32;

// Cancellation inside one long operation (the attention of a long sequence takes minutes): any
// worker may ask, now and then; the progress callback is called by one worker at a time (never
// two at once), and once it says stop, every worker sees the flag and leaves its chunk.
class CancelCheck {
 public:
  void start(const Progress* progress, std::size_t done, std::size_t total) {
    progress_ = progress && *progress ? progress : nullptr;
    done_ = done;
    total_ = total;
    stop_.store(false, std::memory_order_relaxed);
  }
  bool stopped() {
    if (stop_.load(std::memory_order_relaxed)) return true;
    if (progress_ == nullptr) return false;
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return false;                     // another worker is asking
    if (stop_.load(std::memory_order_relaxed)) return true;  // it said stop meanwhile
    if (!(*progress_)(done_, total_)) stop_.store(true, std::memory_order_relaxed);
    return stop_.load(std::memory_order_relaxed);
  }
  bool was_stopped() const { return stop_.load(std::memory_order_relaxed); }

 private:
  const Progress* progress_ = nullptr;
  std::size_t done_ = 0, total_ = 0;
  std::mutex mutex_;
  std::atomic<bool> stop_{false};
};

// Weights rearranged once for the GEMMs of the forward pass, and rounded to bf16 once when the
// products take bf16 inputs (empty otherwise).
template <typename Scalar>
struct PreparedLayer {
  Matrix<Scalar> qkv;      // (H*hd + 2*Hkv*hd, d): q_proj, k_proj, v_proj stacked
  Matrix<Scalar> gate_up;  // (2F, d): gate_proj then up_proj
  std::vector<Bf16> qkv16, gate_up16, o16, down16;
};

template <typename Scalar>
std::vector<Bf16> rounded_if(bool bf16, const Matrix<Scalar>& m) {
  if constexpr (std::is_same_v<Scalar, float>) {
    if (bf16) return to_bf16(m);
  }
  return {};
}

// 64-byte aligned buffers: Eigen's vectorised reductions peel a scalar prologue up to the first
// aligned element, so the summation order (and the last bit) depends on a buffer's alignment;
// a fixed alignment keeps reruns bit-identical.
template <typename Scalar>
using Buffer = std::vector<Scalar, Eigen::aligned_allocator<Scalar>>;

// Buffers of one forward pass, sized for T tokens (grown, never shrunk). The arena's slots are
// arena_slot_stride elements apart.
template <typename Scalar>
struct Workspace {
  int T = -1;
  Buffer<Scalar> arena;                         // (slots, T, d)
  Buffer<Scalar> h, xn, v;                      // (T, d)
  Buffer<Scalar> qkv;                           // (T, qkv columns)
  Buffer<Scalar> context;                       // (T, H*hd)
  Buffer<Scalar> gate_up;                       // (T, 2F)
  Buffer<Scalar> activated;                     // (T, F)
  Buffer<Scalar> m, l, o;                       // two-phase statistics: (q, T), (q, T), (q, T, d)
  Buffer<Scalar> history_scores, extra_scores;  // (q, T, n) and (n, T)
  Buffer<Scalar> rope_cos, rope_sin;            // (T, hd/2)
  // Reads of the other read-based schemes (any gate, heads, query; DenseFormer, rescaled).
  Buffer<Scalar> zoo_m, zoo_l;                                  // (q, T, H) statistics per head
  Buffer<Scalar> zoo_scores;                                    // (q, T, H n) per read of the group
  Buffer<Scalar> zoo_alpha;                                     // (T, H n)
  Buffer<Scalar> query_inv, query_y, query_q, query_effective;  // input-dependent query
  std::vector<const Scalar*> zoo_sources;  // (n) the read's sources in the arena
  // mHC (kernels.hpp): the streams, the step's coefficients, each output's stream weights.
  Buffer<Scalar> mhc_X, mhc_flat;       // (T, m d)
  Buffer<Scalar> mhc_inv;               // (T)
  Buffer<Scalar> mhc_logits, mhc_coef;  // (T, 2m + m^2)
  Buffer<Scalar> mhc_weights;           // (L + 1, T, m): C_i of v_i in the streams
};

// Per-worker scratch of the attention tiles.
template <typename Scalar>
struct AttentionScratch {
  Matrix<Scalar> scores;       // (kTile, kTile)
  Matrix<Scalar> accumulator;  // (kTile, hd)
  Vector<Scalar> row_max, row_sum;
};

template <typename Scalar>
void resize(Buffer<Scalar>& buffer, std::size_t size) {
  if (buffer.size() < size) buffer.resize(size);
}

}  // namespace

template <typename Scalar>
struct FastForward<Scalar>::State {
  const ModelWeights<Scalar>& model;
  ThreadPool& pool;            // the engine's, kept across models (FastForward::set_model)
  std::vector<Matmul> matmul;  // one per worker
  std::vector<PreparedLayer<Scalar>> layers;
  std::vector<Bf16> lm_head16;
  Matrix<Scalar> queries;  // (L+1, d): effective query w * g of every read (w without key norm)
  // mHC, per sublayer: biases (C) and projections (C, m d) of H_pre, H_post, H_res stacked.
  std::vector<Vector<Scalar>> mhc_bias;
  std::vector<Matrix<Scalar>> mhc_proj;
  Workspace<Scalar> work;
  std::vector<AttentionScratch<Scalar>> scratch;  // one per worker
  CancelCheck cancel;                             // of the pass in progress
  int d, H, Hkv, hd, F, L, vocab, q_columns, kv_columns;

  State(const ModelWeights<Scalar>& weights, ThreadPool& threads, bool bf16)
      : model(weights), pool(threads) {
    for (int k = 0; k < pool.size(); ++k) matmul.emplace_back(bf16);
    const ModelConfig& c = model.config;
    d = c.hidden_size;
    H = c.num_attention_heads;
    Hkv = c.num_key_value_heads;
    hd = c.head_dim();
    F = c.intermediate_size;
    L = c.sublayers();
    vocab = c.vocab_size;
    q_columns = H * hd;
    kv_columns = Hkv * hd;
    for (const auto& layer : model.layers) {
      PreparedLayer<Scalar> p;
      p.qkv.resize(q_columns + 2 * kv_columns, d);
      p.qkv << layer.q_proj, layer.k_proj, layer.v_proj;
      p.gate_up.resize(2 * F, d);
      p.gate_up << layer.gate_proj, layer.up_proj;
      p.qkv16 = rounded_if(bf16, p.qkv);
      p.gate_up16 = rounded_if(bf16, p.gate_up);
      p.o16 = rounded_if(bf16, layer.o_proj);
      p.down16 = rounded_if(bf16, layer.down_proj);
      layers.push_back(std::move(p));
    }
    lm_head16 = rounded_if(bf16, model.lm_head);
    queries.resize(L + 1, d);
    for (int r = 0; r <= L; ++r) {
      const auto& read = model.depth_read(r);
      if (c.attn_res.key_norm) {
        queries.row(r) = read.query.cwiseProduct(read.key_norm_gain).transpose();
      } else {
        queries.row(r) = read.query.transpose();
      }
    }
    if (c.attn_res.mode == ResidualMode::mhc) {
      mhc_bias.resize(static_cast<std::size_t>(L));
      mhc_proj.resize(static_cast<std::size_t>(L));
      for (int r = 0; r < L; ++r) {
        cpu::mhc_stack_weights(c.attn_res, model.depth_read(r),
                               mhc_bias[static_cast<std::size_t>(r)],
                               mhc_proj[static_cast<std::size_t>(r)]);
      }
    }
    scratch.resize(static_cast<std::size_t>(pool.size()));
    for (auto& s : scratch) {
      s.scores.resize(kTile, kTile);
      s.accumulator.resize(kTile, hd);
      s.row_max.resize(kTile);
      s.row_sum.resize(kTile);
    }
  }

  // mHC's step spec of sublayer r (kernels.hpp).
  cpu::MhcSpec<Scalar> mhc_spec(int r) const {
    const auto ru = static_cast<std::size_t>(r);
    return cpu::mhc_spec(model.config.attn_res, d, static_cast<Scalar>(model.config.rms_norm_eps),
                         mhc_bias[ru], mhc_proj[ru]);
  }

  // out (T, n) = in (T, k) * W^T, W (n, k) (W16: its bf16 copy, when the products take bf16);
  // rows split over the workers (columns when T is smaller than the pool).
  void gemm(Scalar* out, const Scalar* in, const Matrix<Scalar>& W, const std::vector<Bf16>& W16,
            int T) {
    const auto n = W.rows(), k = W.cols();
    if (T >= 8 * pool.size()) {
      pool.parallel_for(
          static_cast<std::size_t>(T), [&](std::size_t begin, std::size_t end, int worker) {
            const auto rows = static_cast<Eigen::Index>(end - begin);
            matmul[static_cast<std::size_t>(worker)](
                out + begin * static_cast<std::size_t>(n), n,
                plain(in + begin * static_cast<std::size_t>(k), rows, k), transpose(W, &W16));
          });
    } else {
      pool.parallel_for(static_cast<std::size_t>(n),
                        [&](std::size_t begin, std::size_t end, int worker) {
                          const auto columns = static_cast<Eigen::Index>(end - begin);
                          const auto first = static_cast<Eigen::Index>(begin);
                          matmul[static_cast<std::size_t>(worker)](
                              out + begin, n, plain(in, T, k),
                              transpose(W.data() + first * k, columns, k, k,
                                        W16.empty() ? nullptr : W16.data() + first * k));
                        });
    }
  }

  // xn = RMSNorm(h) with gain g, per token.
  void rms_norm(Scalar* xn, const Scalar* h, const Vector<Scalar>& gain, int T) {
    const auto eps = static_cast<Scalar>(model.config.rms_norm_eps);
    pool.parallel_for(static_cast<std::size_t>(T), [&](std::size_t begin, std::size_t end, int) {
      for (std::size_t t = begin; t < end; ++t) {
        const Scalar* row = h + t * static_cast<std::size_t>(d);
        const Scalar inv = inverse_rms_of_row(row, d, eps);
        Eigen::Map<Vector<Scalar>>(xn + t * static_cast<std::size_t>(d), d) =
            (Eigen::Map<const Vector<Scalar>>(row, d) * inv).cwiseProduct(gain);
      }
    });
  }

  // zoo_heads: the heads of a read of another read-based scheme (0: the paper's reads).
  void prepare(int T, const DepthLayout& layout, const std::vector<int>& group_of, int zoo_heads) {
    Workspace<Scalar>& w = work;
    const auto Tz = static_cast<std::size_t>(T), dz = static_cast<std::size_t>(d);
    const bool mhc = layout.mode == ResidualMode::mhc;
    const std::size_t slots = layout.mode == ResidualMode::standard || mhc ? 0
                              : layout.mode == ResidualMode::block
                                  ? static_cast<std::size_t>(layout.blocks) + 1
                                  : static_cast<std::size_t>(L) + 1;
    std::size_t max_group = 1, max_sources = 1;
    for (std::size_t r = 0; r < layout.reads.size(); ++r) {
      max_sources = std::max(max_sources, layout.reads[r].size());
      const auto count =
          static_cast<std::size_t>(std::count(group_of.begin(), group_of.end(), group_of[r]));
      max_group = std::max(max_group, count);
    }
    resize(w.arena, slots * arena_slot_stride<Scalar>(Tz, dz));
    resize(w.h, Tz * dz);
    resize(w.xn, Tz * dz);
    resize(w.v, Tz * dz);
    resize(w.qkv, Tz * static_cast<std::size_t>(q_columns + 2 * kv_columns));
    resize(w.context, Tz * static_cast<std::size_t>(q_columns));
    resize(w.gate_up, Tz * 2 * static_cast<std::size_t>(F));
    resize(w.activated, Tz * static_cast<std::size_t>(F));
    resize(w.m, max_group * Tz);
    resize(w.l, max_group * Tz);
    resize(w.o, max_group * Tz * dz);
    resize(w.history_scores, max_group * Tz * max_sources);
    resize(w.extra_scores, max_sources * Tz);
    if (zoo_heads > 0) {
      const auto Hz = static_cast<std::size_t>(zoo_heads);
      resize(w.zoo_m, max_group * Tz * Hz);
      resize(w.zoo_l, max_group * Tz * Hz);
      resize(w.zoo_scores, max_group * Tz * Hz * max_sources);
      resize(w.zoo_alpha, Tz * Hz * max_sources);
      resize(w.query_inv, Tz);
      resize(w.query_y, Tz * dz);
      resize(w.query_q, Tz * dz);
      resize(w.query_effective, Tz * dz);
      w.zoo_sources.resize(max_sources);
    }
    if (mhc) {
      const auto md = static_cast<std::size_t>(model.config.attn_res.streams) * dz;
      const auto C = static_cast<std::size_t>(mhc_spec(0).coefficients());
      resize(w.mhc_X, Tz * md);
      resize(w.mhc_flat, Tz * md);
      resize(w.mhc_inv, Tz);
      resize(w.mhc_logits, Tz * C);
      resize(w.mhc_coef, Tz * C);
      resize(w.mhc_weights, (static_cast<std::size_t>(L) + 1) * Tz *
                                static_cast<std::size_t>(model.config.attn_res.streams));
    }
    if (w.T != T) {
      const int half = hd / 2;
      w.rope_cos.assign(Tz * static_cast<std::size_t>(half), Scalar(0));
      w.rope_sin.assign(Tz * static_cast<std::size_t>(half), Scalar(0));
      const auto rope =
          make_rope_table<Scalar>(T, hd, model.config.rope_theta);  // the reference's table
      std::copy(rope.cos.data(), rope.cos.data() + rope.cos.size(), w.rope_cos.begin());
      std::copy(rope.sin.data(), rope.sin.data() + rope.sin.size(), w.rope_sin.begin());
      w.T = T;
    }
  }

  // Qwen3's q/k norms (when the layer has them: each head's hd channels RMS-normalised with the
  // q_norm or k_norm gain, as the reference's head_rms_norm), then RoPE (rotate_half) on the q and
  // k columns of the qkv buffer, in place.
  void rope(int T, const LayerWeights<Scalar>& layer) {
    const int half = hd / 2, columns = q_columns + 2 * kv_columns;
    const bool qk_norm = layer.q_norm.size() > 0;
    const auto eps = static_cast<Scalar>(model.config.rms_norm_eps);
    pool.parallel_for(static_cast<std::size_t>(T), [&](std::size_t begin, std::size_t end, int) {
      for (std::size_t t = begin; t < end; ++t) {
        const Scalar* cos = work.rope_cos.data() + t * static_cast<std::size_t>(half);
        const Scalar* sin = work.rope_sin.data() + t * static_cast<std::size_t>(half);
        Scalar* row = work.qkv.data() + t * static_cast<std::size_t>(columns);
        for (int head = 0; head < H + Hkv; ++head) {  // query heads, then key heads
          Scalar* x = row + head * hd;
          if (qk_norm) {
            Eigen::Map<Eigen::Matrix<Scalar, 1, Eigen::Dynamic>> channels(x, hd);
            const Scalar inv_rms =
                Scalar(1) / std::sqrt(channels.squaredNorm() / static_cast<Scalar>(hd) + eps);
            const auto& gain = head < H ? layer.q_norm : layer.k_norm;
            channels = (channels * inv_rms).cwiseProduct(gain.transpose());
          }
          for (int i = 0; i < half; ++i) {
            const Scalar x1 = x[i], x2 = x[i + half];
            x[i] = x1 * cos[i] - x2 * sin[i];
            x[i + half] = x2 * cos[i] + x1 * sin[i];
          }
        }
      }
    });
  }

  // Causal attention of every head, 64-token tiles with an online softmax; key tiles above the
  // diagonal are skipped. context (T, H*hd).
  void attention(int T) {
    const int columns = q_columns + 2 * kv_columns;
    const int tiles = (T + kTile - 1) / kTile;
    const int group = H / Hkv;
    const Scalar scale = Scalar(1) / std::sqrt(static_cast<Scalar>(hd));
    const Scalar* qkv = work.qkv.data();
    pool.parallel_for(
        static_cast<std::size_t>(H) * static_cast<std::size_t>(tiles),
        [&](std::size_t begin, std::size_t end, int worker) {
          AttentionScratch<Scalar>& s = scratch[static_cast<std::size_t>(worker)];
          for (std::size_t item = begin; item < end; ++item) {
            const int head = static_cast<int>(item / static_cast<std::size_t>(tiles));
            const int tile = static_cast<int>(item % static_cast<std::size_t>(tiles));
            const int kv_head = head / group;
            const int q0 = tile * kTile, rows = std::min(kTile, T - q0);
            const ConstStridedMap<Scalar> Q(qkv + static_cast<long>(q0) * columns + head * hd, rows,
                                            hd, Eigen::OuterStride<>(columns));
            auto acc = s.accumulator.topRows(rows);
            acc.setZero();
            s.row_max.head(rows).setConstant(-std::numeric_limits<Scalar>::infinity());
            s.row_sum.head(rows).setZero();
            for (int key_tile = 0; key_tile <= tile; ++key_tile) {
              if (key_tile % kKeyTilesPerCancelCheck == kKeyTilesPerCancelCheck - 1 &&
                  cancel.stopped())
                return;  // the pass throws Cancelled once every worker is back
              const int k0 = key_tile * kTile, keys = std::min(kTile, T - k0);
              const ConstStridedMap<Scalar> K(
                  qkv + static_cast<long>(k0) * columns + q_columns + kv_head * hd, keys, hd,
                  Eigen::OuterStride<>(columns));
              const ConstStridedMap<Scalar> V(
                  qkv + static_cast<long>(k0) * columns + q_columns + kv_columns + kv_head * hd,
                  keys, hd, Eigen::OuterStride<>(columns));
              auto S = s.scores.topLeftCorner(rows, keys);
              S.noalias() = Q * K.transpose();
              S *= scale;
              for (int i = 0; i < rows; ++i) {
                // On the diagonal tile, key k0 + j is visible to query q0 + i only when j <= i.
                const int visible = key_tile == tile ? std::min(keys, i + 1) : keys;
                auto row = S.row(i);
                const Scalar old_max = s.row_max(i);
                const Scalar new_max = std::max(old_max, row.head(visible).maxCoeff());
                row.head(visible).array() = (row.head(visible).array() - new_max).exp();
                if (visible < keys) row.tail(keys - visible).setZero();
                const Scalar correction = std::exp(old_max - new_max);  // 0 on the first tile
                s.row_sum(i) = s.row_sum(i) * correction + row.head(visible).sum();
                if (correction != Scalar(1)) acc.row(i) *= correction;
                s.row_max(i) = new_max;
              }
              acc.noalias() += S * V;
            }
            StridedMap<Scalar> out(
                work.context.data() + static_cast<long>(q0) * q_columns + head * hd, rows, hd,
                Eigen::OuterStride<>(q_columns));
            out = acc.array().colwise() / s.row_sum.head(rows).array();
          }
        });
    if (cancel.was_stopped()) throw Cancelled("forward pass cancelled");
  }

  // v (T, d) = the sublayer's output f(h), PreNorm included.
  void sublayer(int r, const Scalar* h, Scalar* v, int T) {
    const auto& layer = model.layers[static_cast<std::size_t>(r / 2)];
    const auto& prepared = layers[static_cast<std::size_t>(r / 2)];
    if (r % 2 == 0) {
      rms_norm(work.xn.data(), h, layer.input_layernorm, T);
      gemm(work.qkv.data(), work.xn.data(), prepared.qkv, prepared.qkv16, T);
      rope(T, layer);
      attention(T);
      gemm(v, work.context.data(), layer.o_proj, prepared.o16, T);
    } else {
      rms_norm(work.xn.data(), h, layer.post_attention_layernorm, T);
      gemm(work.gate_up.data(), work.xn.data(), prepared.gate_up, prepared.gate_up16, T);
      pool.parallel_for(static_cast<std::size_t>(T), [&](std::size_t begin, std::size_t end, int) {
        for (std::size_t t = begin; t < end; ++t) {
          const Scalar* gu = work.gate_up.data() + t * 2 * static_cast<std::size_t>(F);
          const Eigen::Map<const Vector<Scalar>> gate(gu, F), up(gu + F, F);
          Eigen::Map<Vector<Scalar>>(work.activated.data() + t * static_cast<std::size_t>(F), F) =
              (gate.array() / (Scalar(1) + (-gate.array()).exp()) * up.array())
                  .matrix();  // silu(g) * u
        }
      });
      gemm(v, work.activated.data(), layer.down_proj, prepared.down16, T);
    }
  }
};

template <typename Scalar>
FastForward<Scalar>::FastForward(const ModelWeights<Scalar>& model, int threads, bool bf16)
    : pool_(std::make_unique<ThreadPool>(threads)),
      state_(std::make_unique<State>(model, *pool_, bf16)),
      bf16_(bf16) {}

template <typename Scalar>
void FastForward<Scalar>::set_model(const ModelWeights<Scalar>& model) {
  state_.reset();  // its buffers go before the new model's are made
  state_ = std::make_unique<State>(model, *pool_, bf16_);
}

template <typename Scalar>
FastForward<Scalar>::~FastForward() = default;

template <typename Scalar>
int FastForward<Scalar>::threads() const {
  return state_->pool.size();
}

template <typename Scalar>
ForwardResult<Scalar> FastForward<Scalar>::forward(const std::vector<int>& tokens,
                                                   const ForwardOptions& options) {
  State& s = *state_;
  const ModelConfig& config = s.model.config;
  ForwardResult<Scalar> result;
  ForwardTrace& trace = result.trace;
  const FastPass pass = start_fast_pass(trace, config, tokens, options, FastEngine::cpu);
  const DepthLayout& layout = pass.layout;
  const int L = s.L, d = s.d, T = pass.T;
  const auto Tz = static_cast<std::size_t>(T), dz = static_cast<std::size_t>(d), plane = Tz * dz;
  const std::size_t slot_stride = arena_slot_stride<Scalar>(Tz, dz);
  const std::vector<int> group_of =
      layout.mode == ResidualMode::standard ? std::vector<int>{} : schedule_groups(layout, options);
  // The paper's reads run the stacked two-phase kernels; every other read-based scheme the
  // kernels of any read (cpu::depth_read_accumulate), two-phase where the scheme allows it.
  const bool zoo = pass.scheme.reads_sources() && !pass.scheme.paper_defaults();
  const int zoo_heads = zoo ? depth_read_heads(pass.scheme) : 0;
  s.prepare(T, layout, group_of, zoo_heads);
  Workspace<Scalar>& w = s.work;
  const auto key_eps = static_cast<Scalar>(config.attn_res.key_norm_eps);
  trace.sublayer_input_rms.reserve(static_cast<std::size_t>(L));
  trace.sublayer_output_rms.reserve(static_cast<std::size_t>(L));

  // The embedding v_0: the standard residual's h, or slot 0 of the arena.
  Scalar* embedding = layout.mode == ResidualMode::standard || layout.mode == ResidualMode::mhc
                          ? w.h.data()
                          : w.arena.data();
  for (int t = 0; t < T; ++t) {
    const auto row = s.model.embed_tokens.row(tokens[static_cast<std::size_t>(t)]);
    std::copy(row.data(), row.data() + d, embedding + static_cast<std::size_t>(t) * dz);
  }
  require_finite(embedding, T, d, d, kEmbeddingName);

  auto run_sublayer = [&](int r, const Scalar* h, Scalar* v) {
    report_sublayer_progress(options, r, L);
    s.cancel.start(&options.progress, static_cast<std::size_t>(r), static_cast<std::size_t>(L));
    // The message (a string) is built only when there is something to report.
    if (!all_finite(h, T, d, d)) require_finite(h, T, d, d, sublayer_input_name(r, L));
    trace.sublayer_input_rms.push_back(rms_of(h, T, d, d));
    s.sublayer(r, h, v, T);
    if (!all_finite(v, T, d, d)) require_finite(v, T, d, d, sublayer_output_name(r, L));
    trace.sublayer_output_rms.push_back(rms_of(v, T, d, d));
  };

  Scalar* hidden = w.h.data();  // the final read's output
  if (layout.mode == ResidualMode::standard) {
    for (int r = 0; r < L; ++r) {
      run_sublayer(r, w.h.data(), w.v.data());
      Eigen::Map<Vector<Scalar>>(w.h.data(), T * d) +=
          Eigen::Map<const Vector<Scalar>>(w.v.data(), T * d);
    }
  } else if (layout.mode == ResidualMode::mhc) {
    // m streams (docs/schemes.md "mHC"), stream-major per token; each sublayer reads u = H_pre X
    // into h, and X <- H_res X + H_post v. The trace's weights of v_0 .. v_r follow the stream
    // coefficients C_i (T, m) of every output (forward.cpp, MhcCoefficientsOfOutputs).
    const int m = pass.scheme.streams, C = s.mhc_spec(0).coefficients();
    const auto mz = static_cast<std::size_t>(m);
    Scalar* X = w.mhc_X.data();
    Scalar* weights = w.mhc_weights.data();  // output i: weights + i T m
    s.pool.parallel_for(Tz, [&](std::size_t b, std::size_t e, int) {
      for (std::size_t t = b; t < e; ++t) {
        for (std::size_t j = 0; j < mz; ++j)
          std::copy(w.h.data() + t * dz, w.h.data() + (t + 1) * dz, X + (t * mz + j) * dz);
        std::fill(weights + t * mz, weights + (t + 1) * mz, Scalar(1));  // v_0 in every stream
      }
    });
    auto record = [&](int r, bool final_read) {
      ReadTrace read;
      read.read = r;
      read.target = read_target_name(r, L);
      read.sources = layout.reads[static_cast<std::size_t>(r)];
      const int n = static_cast<int>(read.sources.size());
      read.alpha = Eigen::MatrixXd(T, n);
      for (int t = 0; t < T; ++t) {
        const Scalar* pre = w.mhc_coef.data() + static_cast<std::size_t>(t) * C;
        for (int i = 0; i < n; ++i) {
          const Scalar* c = weights + (static_cast<std::size_t>(i) * Tz + t) * mz;
          Scalar sum = 0;
          for (int j = 0; j < m; ++j) sum += final_read ? c[j] : c[j] * pre[j];
          read.alpha(t, i) = static_cast<double>(final_read ? sum / static_cast<Scalar>(m) : sum);
        }
      }
      read.alpha_mean = read.alpha.colwise().mean().transpose();
      trace.reads.push_back(std::move(read));
    };
    trace.reads.reserve(static_cast<std::size_t>(L) + 1);
    for (int r = 0; r < L; ++r) {
      const cpu::MhcSpec<Scalar> spec = s.mhc_spec(r);
      s.pool.parallel_for(Tz, [&](std::size_t b, std::size_t e, int) {
        cpu::mhc_coefficients(spec, X, w.mhc_inv.data(), w.mhc_flat.data(), w.mhc_logits.data(),
                              w.mhc_coef.data(), w.h.data(), static_cast<int>(b),
                              static_cast<int>(e));
      });
      record(r, false);
      run_sublayer(r, w.h.data(), w.v.data());
      s.pool.parallel_for(Tz, [&](std::size_t b, std::size_t e, int) {
        cpu::mhc_write(spec, w.mhc_coef.data(), w.v.data(), X, static_cast<int>(b),
                       static_cast<int>(e));
        // C_i <- H_res C_i for the outputs so far; C_{r+1} = H_post.
        std::vector<Scalar> column(mz);
        for (std::size_t t = b; t < e; ++t) {
          const Scalar* c = w.mhc_coef.data() + t * static_cast<std::size_t>(C);
          for (int i = 0; i <= r; ++i) {
            Scalar* ci = weights + (static_cast<std::size_t>(i) * Tz + t) * mz;
            for (int a = 0; a < m; ++a) {
              Scalar sum = 0;
              for (int k = 0; k < m; ++k) sum += c[2 * m + a * m + k] * ci[k];
              column[a] = sum;
            }
            std::copy(column.begin(), column.end(), ci);
          }
          std::copy(c + m, c + 2 * m, weights + (static_cast<std::size_t>(r + 1) * Tz + t) * mz);
        }
      });
    }
    record(L, true);
    // The final read: the mean of the streams.
    s.pool.parallel_for(Tz, [&](std::size_t b, std::size_t e, int) {
      for (std::size_t t = b; t < e; ++t) {
        Eigen::Map<Vector<Scalar>> h(w.h.data() + t * dz, d);
        h.setZero();
        for (std::size_t j = 0; j < mz; ++j)
          h += Eigen::Map<const Vector<Scalar>>(X + (t * mz + j) * dz, d);
        h /= static_cast<Scalar>(m);
      }
    });
  } else {
    // Every read's trace entry and alpha matrix, allocated here rather than in the layer loop.
    trace.reads.reserve(static_cast<std::size_t>(L) + 1);
    for (int r = 0; r <= L; ++r) {
      const auto& sources = layout.reads[static_cast<std::size_t>(r)];
      const auto n = static_cast<Eigen::Index>(sources.size());
      ReadTrace read;
      read.read = r;
      read.target = read_target_name(r, L);
      read.sources = sources;
      read.alpha = Eigen::MatrixXd(T, n);
      read.alpha_mean = Eigen::VectorXd(n);
      if (zoo_heads > 1) {
        read.heads = zoo_heads;
        read.alpha_heads = Eigen::MatrixXd(T, zoo_heads * n);
      }
      trace.reads.push_back(std::move(read));
    }
    DepthReadGroup group;  // the paper's reads (run_depth_read)
    const DepthReadBuffers<Scalar> buffers{
        w.arena.data(), slot_stride, s.queries.data(),        w.m.data(),
        w.l.data(),     w.o.data(),  w.history_scores.data(), w.extra_scores.data()};
    int group_first = -1, group_shared = 0;
    Scalar* read_output = w.h.data();  // h: the next sublayer's input, or the final read's output
    // Read r of another read-based scheme: one-shot, or phase 1 over the group's shared history
    // (each read of the group, token block by token block so that a block's rows stay in cache
    // between the reads) and phase 2 merging the sources produced inside the group.
    // The last read of the schedule group that read r starts, or -1 when r starts none.
    auto group_last = [&](int r) {
      const int g = group_of[static_cast<std::size_t>(r)];
      if (r > 0 && group_of[static_cast<std::size_t>(r - 1)] == g) return -1;
      int last = r;
      while (last < L && group_of[static_cast<std::size_t>(last + 1)] == g) ++last;
      return last;
    };
    std::size_t max_sources = 1;
    for (const auto& list : layout.reads) max_sources = std::max(max_sources, list.size());
    auto zoo_read = [&](int r) {
      const auto& sources = layout.reads[static_cast<std::size_t>(r)];
      const int n = static_cast<int>(sources.size());
      const auto Hz = static_cast<std::size_t>(zoo_heads);
      const std::size_t score_stride = Tz * Hz * max_sources;
      auto spec_of = [&](int read) {
        cpu::DepthReadSpec<Scalar> spec = cpu::depth_read_spec<Scalar>(pass.scheme);
        spec.query = s.queries.row(read).data();
        spec.logits = s.model.depth_read(read).mix.data();
        return spec;
      };
      auto sources_of = [&](int read) {
        const auto& list = layout.reads[static_cast<std::size_t>(read)];
        for (std::size_t i = 0; i < list.size(); ++i)
          w.zoo_sources[i] =
              w.arena.data() + static_cast<std::size_t>(arena_slot(list[i])) * slot_stride;
      };
      cpu::DepthReadSpec<Scalar> spec = spec_of(r);
      sources_of(r);
      int j = 0, shared = 0;
      bool fresh = true;
      if (trace.two_phase) {
        if (const int last = group_last(r); last >= 0) {
          group_first = r;
          group_shared = static_cast<int>(shared_history(layout, r, last));
          constexpr std::size_t kTokenBlock = 16;
          s.pool.parallel_for(Tz, [&](std::size_t b, std::size_t e, int) {
            for (std::size_t t0 = b; t0 < e; t0 += kTokenBlock) {
              const std::size_t t1 = std::min(e, t0 + kTokenBlock);
              for (int k = 0; k <= last - r; ++k) {
                const auto kz = static_cast<std::size_t>(k);
                cpu::depth_read_accumulate(
                    spec_of(r + k), w.zoo_sources.data(), group_shared, 0,
                    static_cast<int>(layout.reads[static_cast<std::size_t>(r + k)].size()), d, true,
                    w.zoo_m.data() + kz * Tz * Hz, w.zoo_l.data() + kz * Tz * Hz,
                    w.o.data() + kz * plane, w.zoo_scores.data() + kz * score_stride,
                    static_cast<int>(t0), static_cast<int>(t1));
              }
            }
          });
        }
        j = r - group_first;
        shared = group_shared;
        fresh = false;
      }
      if (pass.scheme.uses_query() && pass.scheme.query_source == QuerySource::input) {
        const DepthReadWeights<Scalar>& weights = s.model.depth_read(r);
        s.pool.parallel_for(Tz, [&](std::size_t b, std::size_t e, int) {
          cpu::depth_input_query(w.zoo_sources[static_cast<std::size_t>(n - 1)], d,
                                 weights.query.data(), weights.query_proj.data(),
                                 pass.scheme.key_norm ? weights.key_norm_gain.data() : nullptr,
                                 key_eps, w.query_inv.data(), w.query_y.data(), w.query_q.data(),
                                 w.query_effective.data(), static_cast<int>(b),
                                 static_cast<int>(e));
        });
        spec.query = w.query_effective.data();
        spec.query_stride = d;
      }
      const auto jz = static_cast<std::size_t>(j);
      Scalar* m = w.zoo_m.data() + jz * Tz * Hz;
      Scalar* l = w.zoo_l.data() + jz * Tz * Hz;
      Scalar* o = w.o.data() + jz * plane;
      Scalar* scores = w.zoo_scores.data() + jz * score_stride;
      s.pool.parallel_for(Tz, [&](std::size_t b, std::size_t e, int) {
        cpu::depth_read_accumulate(spec, w.zoo_sources.data() + shared, n - shared, shared, n, d,
                                   fresh, m, l, o, scores, static_cast<int>(b),
                                   static_cast<int>(e));
        cpu::depth_read_finish(spec, n, d, m, l, o, scores, read_output, w.zoo_alpha.data(),
                               static_cast<int>(b), static_cast<int>(e));
      });
      ReadTrace& read = trace.reads[static_cast<std::size_t>(r)];  // allocated before the loop
      const ConstMap<Scalar> alpha(w.zoo_alpha.data(), T, zoo_heads * n);
      if (zoo_heads > 1) {
        read.alpha_heads = alpha.template cast<double>();
        read.alpha = head_mean(Matrix<double>(read.alpha_heads), zoo_heads);
      } else {
        read.alpha = alpha.template cast<double>();
      }
      read.alpha_mean.noalias() = read.alpha.colwise().mean().transpose();
    };
    if (layout.mode == ResidualMode::block)
      std::fill(w.arena.data() + slot_stride, w.arena.data() + slot_stride + plane, Scalar(0));
    for (int r = 0; r <= L; ++r) {
      if (zoo) {
        zoo_read(r);
      } else {
        const auto& sources = layout.reads[static_cast<std::size_t>(r)];
        const int n = static_cast<int>(sources.size());
        // Which statistics this read used: its group's phase 1 (two-phase) or its own (one-shot).
        const DepthReadStep step = run_depth_read(s.pool, layout, group_of, options.two_phase, r, T,
                                                  d, key_eps, buffers, group, read_output);
        const int j = step.j, shared = step.shared;
        const Scalar* m = w.m.data() + static_cast<std::size_t>(j) * Tz;
        const Scalar* l = w.l.data() + static_cast<std::size_t>(j) * Tz;
        const Scalar* history_scores =
            w.history_scores.data() +
            static_cast<std::size_t>(j) * Tz * static_cast<std::size_t>(shared);
        // The trace: alpha = exp(z - m) / l of every source.
        ReadTrace& read = trace.reads[static_cast<std::size_t>(r)];  // allocated before the loop
        for (int t = 0; t < T; ++t) {
          for (int i = 0; i < n; ++i) {
            const Scalar z = i < shared ? history_scores[static_cast<std::size_t>(t) *
                                                             static_cast<std::size_t>(shared) +
                                                         static_cast<std::size_t>(i)]
                                        : w.extra_scores[static_cast<std::size_t>(i - shared) * Tz +
                                                         static_cast<std::size_t>(t)];
            read.alpha(t, i) = static_cast<double>(std::exp(z - m[t]) / l[t]);
          }
        }
        read.alpha_mean.noalias() = read.alpha.colwise().mean().transpose();
      }
      if (r == L) break;

      // The sublayer, and where its output goes.
      const int sublayer = r + 1;                // 1-based
      if (layout.mode != ResidualMode::block) {  // Full AttnRes, DenseFormer, rescaled
        run_sublayer(r, read_output,
                     w.arena.data() + static_cast<std::size_t>(sublayer) * slot_stride);
      } else {
        Scalar* partial =
            w.arena.data() +
            static_cast<std::size_t>(layout.block_of_sublayer(sublayer)) * slot_stride;
        run_sublayer(r, read_output, w.v.data());
        Eigen::Map<Vector<Scalar>>(partial, T * d) +=
            Eigen::Map<const Vector<Scalar>>(w.v.data(), T * d);
      }
      // A block that starts at the next sublayer begins from zero (also the zero placeholder's
      // value at its first read).
      if (layout.mode == ResidualMode::block && sublayer < L && sublayer % layout.block_size == 0) {
        Scalar* next =
            w.arena.data() +
            static_cast<std::size_t>(layout.block_of_sublayer(sublayer + 1)) * slot_stride;
        std::fill(next, next + plane, Scalar(0));
      }
    }
    if (layout.mode == ResidualMode::block) {
      for (int b = 0; b <= layout.blocks; ++b) {
        trace.block_summary_rms.push_back(
            rms_of(w.arena.data() + static_cast<std::size_t>(b) * slot_stride, T, d, d));
      }
    }
  }

  result.hidden_final = ConstMap<Scalar>(hidden, T, d);
  s.rms_norm(w.xn.data(), hidden, s.model.norm, T);
  result.logits.resize(T, s.vocab);
  s.gemm(result.logits.data(), w.xn.data(), s.model.lm_head, s.lm_head16, T);
  finish_fast_pass(result, options);
  return result;
}

template class FastForward<float>;
template class FastForward<double>;

}  // namespace attnres::engine
