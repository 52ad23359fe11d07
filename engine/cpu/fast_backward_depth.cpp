// The depth reads of the fast CPU backward pass (fast_backward.cpp has the overview), one sequence
// on one worker. Forward: the two-phase schedule (phase 1 per schedule group with the group's
// queries stacked over the shared history, phase 2 merging the group's own sources), keeping the
// weights alpha of every read and one inverse RMS per stored value. Backward: the formula of
// depth_attention_backward, one pass per token over its sources with the stored inverse RMS,
// adding into the gradient slots of the plan (fast_backward_state.hpp).
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "attnres/kernels.hpp"
#include "cpu/fast_backward_state.hpp"

namespace attnres::engine::backward {

template <typename Scalar>
void DepthSteps<Scalar>::set_inverse_rms(int value) {
  const Scalar* data = w.value[static_cast<std::size_t>(value)];
  Scalar* inv = w.value_inv[static_cast<std::size_t>(value)];
  const Eigen::Index heads = c.plan.heads;
  if (heads == 1) {
    for (Eigen::Index t = 0; t < T; ++t)
      inv[t] = inverse_rms_of_row(data + t * c.s.d, c.s.d, c.key_eps);
    return;
  }
  const Eigen::Index width = c.s.d / heads;  // each head's channels (docs/schemes.md)
  for (Eigen::Index t = 0; t < T; ++t) {
    for (Eigen::Index head = 0; head < heads; ++head)
      inv[t * heads + head] = inverse_rms_of_row(data + t * c.s.d + head * width, width, c.key_eps);
  }
}

// Read r with the two-phase schedule (core/model/src/forward.cpp: phase_one, phase_two_read):
// writes h (T, d) and alpha (T, n).
template <typename Scalar>
void DepthSteps<Scalar>::read_forward(int r, Scalar* h) {
  if (c.plan.zoo) {
    zoo_read_forward(r, h);
    return;
  }
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
        for (Eigen::Index i = 0; i < shared; ++i) top = std::max(top, w.zhist[(i * T + t) * q + k]);
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

// Backward of read r (depth_attention_backward in core/model/include/attnres/depth_attention.hpp):
// adds d loss / d source into the sources' gradient slots and the query/gain gradients.
template <typename Scalar>
void DepthSteps<Scalar>::read_backward(int r, const Scalar* dh) {
  if (c.plan.zoo) {
    zoo_read_backward(r, dh);
    return;
  }
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

// Read r of another read-based scheme (core/model/src/forward.cpp: generic_phase_one,
// generic_phase_two, one_shot_read): the kernels of any read (kernels.hpp), with the statistics
// of the group's shared history computed at the group's first read.
template <typename Scalar>
void DepthSteps<Scalar>::zoo_read_forward(int r, Scalar* h) {
  const Plan& plan = c.plan;
  const int d = static_cast<int>(c.s.d);
  const auto ru = static_cast<std::size_t>(r);
  const std::vector<int>& values = plan.read_value[ru];
  const int n = static_cast<int>(values.size());
  const Eigen::Index H = plan.heads;
  const int Ti = static_cast<int>(T);
  auto spec_of = [&](int read) {
    cpu::DepthReadSpec<Scalar> spec = cpu::depth_read_spec<Scalar>(plan.scheme);
    spec.query = c.prepared.queries.row(read).data();
    spec.logits = c.model.depth_read(read).mix.data();
    return spec;
  };
  for (int i = 0; i < n; ++i)
    w.zoo_sources[static_cast<std::size_t>(i)] =
        w.value[static_cast<std::size_t>(values[static_cast<std::size_t>(i)])];
  cpu::DepthReadSpec<Scalar> spec = spec_of(r);
  if (plan.input_query) {
    const DepthReadWeights<Scalar>& weights = c.model.depth_read(r);
    cpu::depth_input_query(
        w.zoo_sources[static_cast<std::size_t>(n - 1)], d, weights.query.data(),
        weights.query_proj.data(), plan.scheme.key_norm ? weights.key_norm_gain.data() : nullptr,
        c.key_eps, w.query_inv[ru], w.query_y[ru], w.query_q[ru], w.query_effective[ru], 0, Ti);
    spec.query = w.query_effective[ru];
    spec.query_stride = d;
  }
  Eigen::Index j = 0;
  int shared = 0;
  bool fresh = true;
  if (plan.two_phase) {
    const int first = plan.group_first[ru];
    shared = plan.group_shared[ru];
    j = r - first;
    fresh = false;
    if (r == first) {                  // phase 1: every read of the group over the shared history
      constexpr int kTokenBlock = 16;  // a block's rows stay in cache between the reads
      for (int t0 = 0; t0 < Ti; t0 += kTokenBlock) {
        const int t1 = std::min(Ti, t0 + kTokenBlock);
        for (int k = first; k <= plan.group_last[ru]; ++k) {
          const Eigen::Index kk = k - first;
          cpu::depth_read_accumulate(
              spec_of(k), w.zoo_sources.data(), shared, 0,
              static_cast<int>(plan.read_value[static_cast<std::size_t>(k)].size()), d, true,
              w.zm + kk * T * H, w.zl + kk * T * H, w.o + kk * T * d,
              w.zscore[static_cast<std::size_t>(k)], t0, t1);
        }
      }
    }
  }
  Scalar* m = w.zm + j * T * H;
  Scalar* l = w.zl + j * T * H;
  Scalar* o = w.o + j * T * d;
  cpu::depth_read_accumulate(spec, w.zoo_sources.data() + shared, n - shared, shared, n, d, fresh,
                             m, l, o, w.zscore[ru], 0, Ti);
  cpu::depth_read_finish(spec, n, d, m, l, o, w.zscore[ru], h, w.alpha[ru], 0, Ti);
}

// Backward of read r of another read-based scheme (depth_read_backward in
// core/model/src/depth_read.cpp): per token the value path, the gate's backward and the score
// path through the key norm, into the sources' gradient slots; then the parameters' gradients
// (the query, the key-norm gain, the mixing logits or DenseFormer weights) and, for an
// input-dependent query, its projection and the path into the read's latest source.
template <typename Scalar>
void DepthSteps<Scalar>::zoo_read_backward(int r, const Scalar* dh) {
  const Plan& plan = c.plan;
  const AttnResConfig& scheme = plan.scheme;
  const Eigen::Index d = c.s.d;
  const auto ru = static_cast<std::size_t>(r);
  const std::vector<int>& values = plan.read_value[ru];
  const std::vector<int>& slots = plan.read_slot[ru];
  const auto n = static_cast<Eigen::Index>(values.size());
  const Eigen::Index H = plan.heads, width = d / H, Hn = H * n;
  const Scalar* alpha = w.alpha[ru];
  const Scalar* scores = w.zscore[ru];
  const bool attention = scheme.uses_query();
  const Scalar* query = plan.input_query ? w.query_effective[ru] : c.prepared.queries.row(r).data();
  const Eigen::Index query_stride = plan.input_query ? d : 0;
  const DepthReadWeights<Scalar>& read = c.model.depth_read(r);
  DepthReadWeights<Scalar>& grad = w.grad.depth_read(r);
  Vector<Scalar>& dquery = w.dquery;  // d loss / d (q * g), static query
  dquery.setZero();
  if (plan.input_query) std::fill(w.dqs, w.dqs + T * d, Scalar(0));
  Scalar* dalpha = w.dalpha.data();
  Scalar* dscore = w.dscore.data();
  auto value_of = [&](Eigen::Index i, Eigen::Index t) {
    return w.value[static_cast<std::size_t>(values[static_cast<std::size_t>(i)])] + t * d;
  };
  for (Eigen::Index t = 0; t < T; ++t) {
    const Scalar* g = dh + t * d;
    const Scalar* a = alpha + t * Hn;
    // Value path: h = sum_i alpha_i x_i per head, so dx_i = alpha_i dh and dalpha_i = dh . x_i.
    for (Eigen::Index i = 0; i < n; ++i) {
      const Scalar* x = value_of(i, t);
      const int slot = slots[static_cast<std::size_t>(i)];
      Scalar* out = slot < 0 ? nullptr : w.dacc[static_cast<std::size_t>(slot)] + t * d;
      for (Eigen::Index head = 0; head < H; ++head) {
        const Eigen::Index k = head * width;
        dalpha[head * n + i] =
            ConstVectorMap<Scalar>(g + k, width).dot(ConstVectorMap<Scalar>(x + k, width));
        if (out)
          VectorMap<Scalar>(out + k, width) +=
              a[head * n + i] * ConstVectorMap<Scalar>(g + k, width);
      }
    }
    if (scheme.mode == ResidualMode::rescaled) continue;  // fixed weights
    if (scheme.mode == ResidualMode::denseformer) {
      grad.mix += ConstVectorMap<Scalar>(dalpha, n);
      continue;
    }
    // The gate's backward, per head.
    for (Eigen::Index head = 0; head < H; ++head) {
      const Scalar* ah = a + head * n;
      const Scalar* dah = dalpha + head * n;
      Scalar* dsh = dscore + head * n;
      Scalar mean = 0;
      for (Eigen::Index i = 0; i < n; ++i) mean += ah[i] * dah[i];
      switch (scheme.gate) {
        case DepthGate::softmax:  // ds_i = a_i (da_i - sum_k a_k da_k)
          for (Eigen::Index i = 0; i < n; ++i) dsh[i] = ah[i] * (dah[i] - mean);
          break;
        case DepthGate::sigmoid:  // a = sigma(s): ds = da a (1 - a)
          for (Eigen::Index i = 0; i < n; ++i) dsh[i] = dah[i] * ah[i] * (Scalar(1) - ah[i]);
          break;
        case DepthGate::sigmoid_normalized: {  // a_i = sigma_i / S
          const Scalar* sh = scores + t * Hn + head * n;
          Scalar total = 0;
          for (Eigen::Index i = 0; i < n; ++i) total += Scalar(1) / (Scalar(1) + std::exp(-sh[i]));
          for (Eigen::Index i = 0; i < n; ++i) {
            const Scalar sig = Scalar(1) / (Scalar(1) + std::exp(-sh[i]));
            dsh[i] = (dah[i] - mean) / total * sig * (Scalar(1) - sig);
          }
          break;
        }
      }
    }
    if (!attention) {  // mixing = scalars: the logits' gradient
      grad.mix += ConstVectorMap<Scalar>(dscore, n);
      continue;
    }
    // Score path: s = p r, p = q' . x over the head's channels, r = 1 / rms_c(x) (1 without the
    // key norm); d r / d x_j = -r^3 x_j / width.
    const Scalar* q = query + t * query_stride;
    Scalar* dq = plan.input_query ? w.dqs + t * d : dquery.data();
    for (Eigen::Index i = 0; i < n; ++i) {
      const Scalar* x = value_of(i, t);
      const int slot = slots[static_cast<std::size_t>(i)];
      const Scalar* inv =
          w.value_inv[static_cast<std::size_t>(values[static_cast<std::size_t>(i)])];
      for (Eigen::Index head = 0; head < H; ++head) {
        const Eigen::Index k = head * width;
        const Scalar rr = scheme.key_norm ? inv[t * H + head] : Scalar(1);
        const Scalar ds_r = dscore[head * n + i] * rr;
        const ConstVectorMap<Scalar> xh(x + k, width), qh(q + k, width);
        VectorMap<Scalar>(dq + k, width) += ds_r * xh;
        if (slot < 0) continue;  // the zero placeholder
        VectorMap<Scalar> out(w.dacc[static_cast<std::size_t>(slot)] + t * d + k, width);
        out += ds_r * qh;
        if (scheme.key_norm)
          out += (-ds_r * xh.dot(qh) * rr * rr / static_cast<Scalar>(width)) * xh;
      }
    }
  }
  if (!attention) return;
  if (!plan.input_query) {
    if (scheme.key_norm) {
      grad.query += dquery.cwiseProduct(read.key_norm_gain);
      grad.key_norm_gain += dquery.cwiseProduct(read.query);
    } else {
      grad.query += dquery;
    }
    return;
  }
  // q = w + W y, y = u r_u: dW += dq^T y, dy = dq W, du = r_u dy - r_u^3 u (dy . u) / d.
  Map<Scalar> dQ(w.dqs, T, d);
  const ConstMap<Scalar> Q(w.query_q[ru], T, d);
  if (scheme.key_norm) {
    grad.key_norm_gain += (dQ.array() * Q.array()).colwise().sum().transpose().matrix();
    dQ = (dQ.array().rowwise() * read.key_norm_gain.transpose().array()).matrix();
  }
  grad.query += dQ.colwise().sum().transpose();
  const ConstMap<Scalar> Y(w.query_y[ru], T, d);
  grad.query_proj.noalias() += dQ.transpose() * Y;
  Map<Scalar> dY(w.dys, T, d);
  dY.noalias() = dQ * read.query_proj;
  const int slot = slots[static_cast<std::size_t>(n - 1)];
  if (slot < 0) return;
  const Scalar* inv = w.query_inv[ru];
  for (Eigen::Index t = 0; t < T; ++t) {
    const ConstVectorMap<Scalar> u(value_of(n - 1, t), d), dy(w.dys + t * d, d);
    VectorMap<Scalar> out(w.dacc[static_cast<std::size_t>(slot)] + t * d, d);
    out += inv[t] * dy - (inv[t] * inv[t] * inv[t] * dy.dot(u) / static_cast<Scalar>(d)) * u;
  }
}

// ---- mHC (core/model/src/mhc.cpp, with the kernels of kernels.hpp).
namespace {

template <typename Scalar>
cpu::MhcSpec<Scalar> mhc_spec(const Context<Scalar>& c, int r) {
  const auto ru = static_cast<std::size_t>(r);
  return cpu::mhc_spec(c.plan.scheme, static_cast<int>(c.s.d), c.eps, c.prepared.mhc_bias[ru],
                       c.prepared.mhc_proj[ru]);
}

}  // namespace

template <typename Scalar>
void DepthSteps<Scalar>::mhc_start(const Scalar* embedding) {
  const Eigen::Index d = c.s.d, m = c.plan.streams;
  Scalar* X = w.mhc_X[0];
  for (Eigen::Index t = 0; t < T; ++t) {
    for (Eigen::Index j = 0; j < m; ++j)
      std::copy(embedding + t * d, embedding + (t + 1) * d, X + (t * m + j) * d);
  }
}

template <typename Scalar>
void DepthSteps<Scalar>::mhc_read(int r, Scalar* h) {
  const auto ru = static_cast<std::size_t>(r);
  cpu::mhc_coefficients(mhc_spec(c, r), w.mhc_X[ru], w.mhc_inv[ru], w.mhc_flat[ru],
                        w.mhc_logits[ru], w.mhc_coef[ru], h, 0, static_cast<int>(T));
}

template <typename Scalar>
void DepthSteps<Scalar>::mhc_write(int r) {
  const auto ru = static_cast<std::size_t>(r);
  const Eigen::Index plane = T * c.s.d * c.plan.streams;
  std::copy(w.mhc_X[ru], w.mhc_X[ru] + plane, w.mhc_X[ru + 1]);
  cpu::mhc_write(mhc_spec(c, r), w.mhc_coef[ru], w.mhc_v[ru], w.mhc_X[ru + 1], 0,
                 static_cast<int>(T));
}

template <typename Scalar>
void DepthSteps<Scalar>::mhc_final(Scalar* h) {
  const Eigen::Index d = c.s.d, m = c.plan.streams;
  const Scalar* X = w.mhc_X[static_cast<std::size_t>(c.s.L)];
  for (Eigen::Index t = 0; t < T; ++t) {
    VectorMap<Scalar> out(h + t * d, d);
    out.setZero();
    for (Eigen::Index j = 0; j < m; ++j) out += ConstVectorMap<Scalar>(X + (t * m + j) * d, d);
    out /= static_cast<Scalar>(m);
  }
}

template <typename Scalar>
void DepthSteps<Scalar>::mhc_final_backward(const Scalar* dh) {
  const Eigen::Index d = c.s.d, m = c.plan.streams;
  for (Eigen::Index t = 0; t < T; ++t) {
    for (Eigen::Index j = 0; j < m; ++j)
      VectorMap<Scalar>(w.mhc_dX + (t * m + j) * d, d) =
          ConstVectorMap<Scalar>(dh + t * d, d) / static_cast<Scalar>(m);
  }
}

template <typename Scalar>
const Scalar* DepthSteps<Scalar>::mhc_output_gradient(int r) {
  cpu::mhc_output_gradient(mhc_spec(c, r), w.mhc_coef[static_cast<std::size_t>(r)], w.mhc_dX,
                           w.mhc_dv, 0, static_cast<int>(T));
  return w.mhc_dv;
}

template <typename Scalar>
void DepthSteps<Scalar>::mhc_step_backward(int r, const Scalar* du) {
  const auto ru = static_cast<std::size_t>(r);
  const cpu::MhcSpec<Scalar> spec = mhc_spec(c, r);
  const Eigen::Index m = c.plan.streams, C = c.plan.coefficients, md = m * c.s.d;
  cpu::mhc_step_backward(spec, w.mhc_X[ru], w.mhc_coef[ru], w.mhc_logits[ru], w.mhc_v[ru], du,
                         w.mhc_dX, w.mhc_dlogits, 0, static_cast<int>(T));
  // The biases' and projections' gradients; the path through x~ = vec(X) / rms(vec X).
  const ConstMap<Scalar> dZ(w.mhc_dlogits, T, C);
  DepthReadWeights<Scalar>& grad = w.grad.depth_read(r);
  const Vector<Scalar> dbias = dZ.colwise().sum().transpose();
  grad.pre_bias += dbias.head(m);
  grad.post_bias += dbias.segment(m, m);
  Eigen::Map<Vector<Scalar>>(grad.res_bias.data(), m * m) += dbias.tail(m * m);
  if (!c.plan.scheme.dynamic) return;
  const ConstMap<Scalar> flat(w.mhc_flat[ru], T, md);
  grad.pre_proj.noalias() += dZ.leftCols(m).transpose() * flat;
  grad.post_proj.noalias() += dZ.middleCols(m, m).transpose() * flat;
  grad.res_proj.noalias() += dZ.rightCols(m * m).transpose() * flat;
  Map<Scalar>(w.mhc_dflat, T, md).noalias() = dZ * c.prepared.mhc_proj[static_cast<std::size_t>(r)];
  cpu::mhc_flat_backward(spec, w.mhc_flat[ru], w.mhc_inv[ru], w.mhc_dflat, w.mhc_dX, 0,
                         static_cast<int>(T));
}

template <typename Scalar>
void DepthSteps<Scalar>::mhc_embedding_gradient(Scalar* dembedding) {
  const Eigen::Index d = c.s.d, m = c.plan.streams;
  for (Eigen::Index t = 0; t < T; ++t) {  // X_0 = m copies of v_0
    VectorMap<Scalar> out(dembedding + t * d, d);
    out.setZero();
    for (Eigen::Index j = 0; j < m; ++j)
      out += ConstVectorMap<Scalar>(w.mhc_dX + (t * m + j) * d, d);
  }
}

template struct DepthSteps<float>;
template struct DepthSteps<double>;

}  // namespace attnres::engine::backward
