// Fused two-phase depth-read kernels (declared in kernels.hpp; docs/engines.md).
// Phase 1, per token: one pass over each history source computes its inverse RMS and the scores
// of all q reads of the group (a (q, d) x (d) product); a second pass, while the token's n rows
// are still in cache, accumulates exp(z - m) v for every read. Phase 2 merges a single source
// with the online-softmax rescaling. Eigen maps give SIMD reductions.
// Reference: core/model/include/attnres/depth_attention.hpp (phase_one_stats, merge_stats).
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attnres/kernels.hpp"
#include "attnres/tensor.hpp"
#include "row_maps.hpp"

namespace attnres::cpu {

namespace {

template <typename Scalar>
Scalar inverse_rms(const ConstRow<Scalar>& v, Scalar eps) {
  return inverse_rms_of_row(v.data(), v.size(), eps);  // the one rule (attnres/tensor.hpp)
}

}  // namespace

template <typename Scalar>
void depth_phase_one(const Scalar* sources, long source_stride, int n, int T, int d,
                     const Scalar* queries, int q, Scalar eps, Scalar* m, Scalar* l, Scalar* o,
                     Scalar* scores, int t_begin, int t_end) {
  const Eigen::Map<const RowMatrix<Scalar>> Q(queries, q, d);  // (q, d)
  // Scores of one token: (q, n), kept on the stack for the common sizes.
  constexpr int kStack = 4096;
  Scalar stack_z[kStack];
  std::vector<Scalar> heap_z;
  Scalar* z = stack_z;
  if (q * n > kStack) {
    heap_z.resize(static_cast<std::size_t>(q) * static_cast<std::size_t>(n));
    z = heap_z.data();
  }
  const long plane = static_cast<long>(T) * d;  // (T, d) of one read's o
  for (int t = t_begin; t < t_end; ++t) {
    // Pass 1: scores z(j, i) = (w_eff_j . v_i) / rms(v_i).
    for (int i = 0; i < n; ++i) {
      const ConstRow<Scalar> v(sources + i * source_stride + static_cast<long>(t) * d, d);
      const Scalar inv = inverse_rms(v, eps);
      Eigen::Map<Eigen::Matrix<Scalar, Eigen::Dynamic, 1>, 0, Eigen::InnerStride<>> column(
          z + i, q, Eigen::InnerStride<>(n));
      column.noalias() = Q * v;
      column *= inv;
    }
    // Pass 2: per read, max, then the exp-weighted sums.
    for (int j = 0; j < q; ++j) {
      const Scalar* zj = z + static_cast<long>(j) * n;
      const Scalar max = *std::max_element(zj, zj + n);
      Row<Scalar> out(o + j * plane + static_cast<long>(t) * d, d);
      out.setZero();
      Scalar sum = 0;
      for (int i = 0; i < n; ++i) {
        const Scalar weight = std::exp(zj[i] - max);
        sum += weight;
        out += weight * ConstRow<Scalar>(sources + i * source_stride + static_cast<long>(t) * d, d);
      }
      m[static_cast<long>(j) * T + t] = max;
      l[static_cast<long>(j) * T + t] = sum;
      if (scores) std::copy(zj, zj + n, scores + (static_cast<long>(j) * T + t) * n);
    }
  }
}

template <typename Scalar>
void depth_merge_source(const Scalar* source, int /*T*/, int d, const Scalar* query, Scalar eps,
                        Scalar* m, Scalar* l, Scalar* o, Scalar* scores, int t_begin, int t_end) {
  const ConstRow<Scalar> w(query, d);
  for (int t = t_begin; t < t_end; ++t) {
    const ConstRow<Scalar> v(source + static_cast<long>(t) * d, d);
    const Scalar z = w.dot(v) * inverse_rms(v, eps);
    if (scores) scores[t] = z;
    const Scalar new_max = std::max(m[t], z);
    const Scalar scale_old = std::exp(m[t] - new_max);
    const Scalar scale_new = std::exp(z - new_max);
    Row<Scalar> out(o + static_cast<long>(t) * d, d);
    out = out * scale_old + scale_new * v;
    l[t] = l[t] * scale_old + scale_new;
    m[t] = new_max;
  }
}

template <typename Scalar>
void depth_finish(const Scalar* o, const Scalar* l, int d, Scalar* h, int t_begin, int t_end) {
  for (int t = t_begin; t < t_end; ++t) {
    Row<Scalar>(h + static_cast<long>(t) * d, d) =
        ConstRow<Scalar>(o + static_cast<long>(t) * d, d) / l[t];
  }
}

#define ATTNRES_INSTANTIATE_TWO_PHASE(Scalar)                                                   \
  template void depth_phase_one(const Scalar*, long, int, int, int, const Scalar*, int, Scalar, \
                                Scalar*, Scalar*, Scalar*, Scalar*, int, int);                  \
  template void depth_merge_source(const Scalar*, int, int, const Scalar*, Scalar, Scalar*,     \
                                   Scalar*, Scalar*, Scalar*, int, int);                        \
  template void depth_finish(const Scalar*, const Scalar*, int, Scalar*, int, int);
ATTNRES_INSTANTIATE_TWO_PHASE(float)
ATTNRES_INSTANTIATE_TWO_PHASE(double)

}  // namespace attnres::cpu
