// The sublayers of the fast CPU backward pass (fast_backward.cpp has the overview), one sequence on
// one worker: RoPE, causal grouped-query attention by 64-row query tiles over the key columns up
// to the tile's last row only (the masked upper triangle is never computed), and each sublayer's
// forward, which keeps the tape (normalised input, roped (q|k|v), context and row log-sum-exp,
// gate/up pre-activations), and backward, which recomputes only one tile of attention
// probabilities at a time from the stored log-sum-exp and adds the weight gradients (the fused
// (q|k|v) and (gate|up) ones are split by the driver). The formulas are
// core/model/src/layers.cpp's.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "cpu/fast_backward_state.hpp"

namespace attnres::engine::backward {

namespace {

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

// One attention tile in the (T, qkvc) roped tape: query rows q0 .. q0 + rows - 1 of `head`, and
// the keys and values 0 .. keys - 1 of its kv head.
template <typename Scalar>
struct AttentionTile {
  ConstStridedMap<Scalar> Q;  // (rows, hd)
  ConstStridedMap<Scalar> K;  // (keys, hd)
  ConstStridedMap<Scalar> V;  // (keys, hd)
};

template <typename Scalar>
AttentionTile<Scalar> attention_tile(const Shape& s, const Scalar* qkv, Eigen::Index head,
                                     Eigen::Index kv, Eigen::Index q0, Eigen::Index rows,
                                     Eigen::Index keys) {
  return {ConstStridedMap<Scalar>(qkv + q0 * s.qkvc + head * s.hd, rows, s.hd,
                                  Eigen::OuterStride<>(s.qkvc)),
          ConstStridedMap<Scalar>(qkv + s.qc + kv * s.hd, keys, s.hd, Eigen::OuterStride<>(s.qkvc)),
          ConstStridedMap<Scalar>(qkv + s.qc + s.kvc + kv * s.hd, keys, s.hd,
                                  Eigen::OuterStride<>(s.qkvc))};
}

// Where sublayer r lives: its tape index, its transformer layer (r / 2: attention on even r, MLP
// on odd r) and that layer's weights.
template <typename Scalar>
struct SublayerAt {
  std::size_t ru;  // r, as an index of the tape's per-sublayer lists
  int layer;       // r / 2
  std::size_t lu;  // layer, as an index of the per-layer lists
  const LayerWeights<Scalar>& weights;
};

template <typename Scalar>
SublayerAt<Scalar> sublayer_at(const ModelWeights<Scalar>& model, int r) {
  const int layer = r / 2;
  const auto lu = static_cast<std::size_t>(layer);
  return {static_cast<std::size_t>(r), layer, lu, model.layers[lu]};
}

}  // namespace

// ---------------------------------------------------------------- attention (causal, GQA)
template <typename Scalar>
void LayerSteps<Scalar>::attention_forward(int layer) {
  const Shape& s = c.s;
  const Scalar* qkv = w.qkv[static_cast<std::size_t>(layer)];
  Scalar* lse = w.lse[static_cast<std::size_t>(layer)];
  Scalar* ctx = w.ctx[static_cast<std::size_t>(layer)];
  const Eigen::Index group = s.H / s.Hkv;
  for (Eigen::Index head = 0; head < s.H; ++head) {
    const Eigen::Index kv = head / group;
    for (Eigen::Index q0 = 0; q0 < T; q0 += kTile) {
      const Eigen::Index rows = std::min(kTile, T - q0), keys = q0 + rows;  // keys 0 .. last row
      const auto [Q, K, V] = attention_tile(s, qkv, head, kv, q0, rows, keys);
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
// log-sum-exp; ds = p (dp - sum_j p_j dp_j) scale (attention_backward in
// core/model/src/layers.cpp).
template <typename Scalar>
void LayerSteps<Scalar>::attention_backward(int layer) {
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
      const auto [Q, K, V] = attention_tile(s, qkv, head, kv, q0, rows, keys);
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
template <typename Scalar>
void LayerSteps<Scalar>::sublayer_forward(int r, const Scalar* h, Scalar* v) {
  const Shape& s = c.s;
  const auto [ru, layer, lu, weights] = sublayer_at(c.model, r);
  if (r % 2 == 0) {
    norm_forward(h, weights.input_layernorm, c.eps, T, s.d, w.inv[ru], w.nhat[ru], w.x[ru]);
    w.product(w.qkv[lu], s.qkvc, plain(w.x[ru], T, s.d),
              transpose(c.prepared.qkv[lu], &c.prepared.qkv16[lu]));
    rope(w.qkv[lu], s.qkvc, Eigen::Index(0), s.H + s.Hkv, s.hd, T, w.rope_cos.data(),
         w.rope_sin.data(), Scalar(1));
    attention_forward(layer);
    w.product(v, s.d, plain(w.ctx[lu], T, s.qc), transpose(weights.o_proj, &c.prepared.o16[lu]));
  } else {
    norm_forward(h, weights.post_attention_layernorm, c.eps, T, s.d, w.inv[ru], w.nhat[ru],
                 w.x[ru]);
    w.product(w.gu[lu], 2 * s.F, plain(w.x[ru], T, s.d),
              transpose(c.prepared.gate_up[lu], &c.prepared.gate_up16[lu]));
    for (Eigen::Index t = 0; t < T; ++t) {
      const ConstVectorMap<Scalar> gate(w.gu[lu] + t * 2 * s.F, s.F),
          up(w.gu[lu] + t * 2 * s.F + s.F, s.F);
      VectorMap<Scalar>(w.act[lu] + t * s.F, s.F) =
          (gate.array() / (Scalar(1) + (-gate.array()).exp()) * up.array())
              .matrix();  // silu(g) * u
    }
    w.product(v, s.d, plain(w.act[lu], T, s.F),
              transpose(weights.down_proj, &c.prepared.down16[lu]));
  }
}

// dh (T, d) = d loss / d h of sublayer r from dv = d loss / d v_{r+1}; weight gradients added.
template <typename Scalar>
void LayerSteps<Scalar>::sublayer_backward(int r, const Scalar* dv_data, Scalar* dh) {
  const Shape& s = c.s;
  const auto [ru, layer, lu, weights] = sublayer_at(c.model, r);
  LayerWeights<Scalar>& grad = w.grad.layers[lu];
  if (r % 2 == 0) {
    w.product(grad.o_proj.data(), s.qc, transpose(dv_data, T, s.d), plain(w.ctx[lu], T, s.qc),
              true);
    w.product(w.dctx, s.qc, plain(dv_data, T, s.d), plain(weights.o_proj, &c.prepared.o16[lu]));
    attention_backward(layer);
    rope(w.dqkv, s.qkvc, Eigen::Index(0), s.H + s.Hkv, s.hd, T, w.rope_cos.data(),
         w.rope_sin.data(), Scalar(-1));
    w.product(w.dqkv_w[lu].data(), s.d, transpose(w.dqkv, T, s.qkvc), plain(w.x[ru], T, s.d), true);
    w.product(w.dx, s.d, plain(w.dqkv, T, s.qkvc),
              plain(c.prepared.qkv[lu], &c.prepared.qkv16[lu]));
    norm_backward(w.dx, w.inv[ru], w.nhat[ru], weights.input_layernorm, T, s.d, dh,
                  grad.input_layernorm);
  } else {
    w.product(grad.down_proj.data(), s.F, transpose(dv_data, T, s.d), plain(w.act[lu], T, s.F),
              true);
    w.product(w.dact, s.F, plain(dv_data, T, s.d),
              plain(weights.down_proj, &c.prepared.down16[lu]));
    for (Eigen::Index t = 0; t < T; ++t) {
      const Scalar* gu = w.gu[lu] + t * 2 * s.F;
      const auto gate = ConstVectorMap<Scalar>(gu, s.F).array();
      const auto up = ConstVectorMap<Scalar>(gu + s.F, s.F).array();
      const auto da = ConstVectorMap<Scalar>(w.dact + t * s.F, s.F).array();
      VectorMap<Scalar> dgate(w.dgu + t * 2 * s.F, s.F), dup(w.dgu + t * 2 * s.F + s.F, s.F);
      dgate = (Scalar(1) / (Scalar(1) + (-gate).exp())).matrix();  // sigmoid, kept in dgate's row
      dup = (da * (gate * dgate.array())).matrix();                // d up = da * silu(g)
      // silu'(g) = s (1 + g (1 - s)).
      dgate = (da * up * dgate.array() * (Scalar(1) + gate * (Scalar(1) - dgate.array()))).matrix();
    }
    w.product(w.dgate_up_w[lu].data(), s.d, transpose(w.dgu, T, 2 * s.F), plain(w.x[ru], T, s.d),
              true);
    w.product(w.dx, s.d, plain(w.dgu, T, 2 * s.F),
              plain(c.prepared.gate_up[lu], &c.prepared.gate_up16[lu]));
    norm_backward(w.dx, w.inv[ru], w.nhat[ru], weights.post_attention_layernorm, T, s.d, dh,
                  grad.post_attention_layernorm);
  }
}

template struct LayerSteps<float>;
template struct LayerSteps<double>;

}  // namespace attnres::engine::backward
