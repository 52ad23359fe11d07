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

#include "cpu/fast_backward_state.hpp"

namespace attnres::engine::backward {

template <typename Scalar>
void DepthSteps<Scalar>::set_inverse_rms(int value) {
  const Scalar* data = w.value[static_cast<std::size_t>(value)];
  Scalar* inv = w.value_inv[static_cast<std::size_t>(value)];
  for (Eigen::Index t = 0; t < T; ++t)
    inv[t] = inverse_rms_of_row(data + t * c.s.d, c.s.d, c.key_eps);
}

// Read r with the two-phase schedule (core/model/src/forward.cpp: phase_one, phase_two_read):
// writes h (T, d) and alpha (T, n).
template <typename Scalar>
void DepthSteps<Scalar>::read_forward(int r, Scalar* h) {
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

template struct DepthSteps<float>;
template struct DepthSteps<double>;

}  // namespace attnres::engine::backward
