// mHC's per-token steps on raw buffers (declared in kernels.hpp; docs/schemes.md "mHC"): the
// coefficients with Sinkhorn batched over tokens (each token's m x m matrix on the stack), the
// stream update, and their backward pass with the Sinkhorn iterates retraced per token. The
// (T, m d) projections are matrix products over a block of tokens. Reference:
// core/model/src/mhc.cpp, whose formulas and order these follow.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <vector>

#include "attnres/kernels.hpp"
#include "attnres/tensor.hpp"
#include "row_maps.hpp"

namespace attnres::cpu {

namespace {

// Scratch of one call, on the stack for the common sizes.
template <typename Scalar>
struct Scratch {
  static constexpr std::size_t kStack = 2048;
  Scalar stack[kStack];
  std::vector<Scalar> heap;
  Scalar* get(std::size_t size) {
    if (size <= kStack) return stack;
    heap.resize(size);
    return heap.data();
  }
};

// K = exp(A - max A), then `iterations` times rows divided by their sums, then columns; k (m, m)
// row-major holds A on entry. states, when not null, receives the matrix before each row step
// (2 it) and each column step (2 it + 1), and start the matrix K.
template <typename Scalar>
void sinkhorn(Scalar* k, int m, int iterations, Scalar* start, Scalar* states) {
  const int mm = m * m;
  const Scalar top = *std::max_element(k, k + mm);
  for (int i = 0; i < mm; ++i) k[i] = std::exp(k[i] - top);
  if (start) std::copy(k, k + mm, start);
  for (int it = 0; it < iterations; ++it) {
    if (states) std::copy(k, k + mm, states + static_cast<long>(2 * it) * mm);
    for (int i = 0; i < m; ++i) {
      Scalar sum = 0;
      for (int j = 0; j < m; ++j) sum += k[i * m + j];
      for (int j = 0; j < m; ++j) k[i * m + j] /= sum;
    }
    if (states) std::copy(k, k + mm, states + static_cast<long>(2 * it + 1) * mm);
    for (int j = 0; j < m; ++j) {
      Scalar sum = 0;
      for (int i = 0; i < m; ++i) sum += k[i * m + j];
      for (int i = 0; i < m; ++i) k[i * m + j] /= sum;
    }
  }
}

}  // namespace

template <typename Scalar>
MhcSpec<Scalar> mhc_spec(const AttnResConfig& scheme, int d, Scalar eps, const Vector<Scalar>& bias,
                         const Matrix<Scalar>& proj) {
  MhcSpec<Scalar> spec;
  spec.m = scheme.streams;
  spec.d = d;
  spec.iterations = scheme.sinkhorn_iterations;
  spec.eps = eps;
  spec.bias = bias.data();
  if (scheme.dynamic) spec.proj = proj.data();
  return spec;
}

template <typename Scalar>
void mhc_stack_weights(const AttnResConfig& scheme, const DepthReadWeights<Scalar>& read,
                       Vector<Scalar>& bias, Matrix<Scalar>& proj) {
  const auto m = static_cast<Eigen::Index>(scheme.streams);
  bias.resize(2 * m + m * m);
  bias << read.pre_bias, read.post_bias,
      Eigen::Map<const Vector<Scalar>>(read.res_bias.data(), m * m);
  if (!scheme.dynamic) return;
  proj.resize(2 * m + m * m, read.pre_proj.cols());
  proj << read.pre_proj, read.post_proj, read.res_proj;
}

template <typename Scalar>
void mhc_coefficients(const MhcSpec<Scalar>& spec, const Scalar* X, Scalar* inv, Scalar* flat,
                      Scalar* logits, Scalar* coef, Scalar* u, int t_begin, int t_end) {
  const int m = spec.m, d = spec.d, md = m * d, C = spec.coefficients();
  const int rows = t_end - t_begin;
  if (rows <= 0) return;
  const ConstRow<Scalar> bias(spec.bias, C);
  Eigen::Map<RowMatrix<Scalar>> Z(logits + static_cast<long>(t_begin) * C, rows, C);
  if (spec.proj) {
    for (int t = t_begin; t < t_end; ++t) {
      const long row = static_cast<long>(t) * md;
      inv[t] = inverse_rms_of_row(X + row, md, spec.eps);
      Row<Scalar>(flat + row, md) = ConstRow<Scalar>(X + row, md) * inv[t];
    }
    Z.noalias() =
        Eigen::Map<const RowMatrix<Scalar>>(flat + static_cast<long>(t_begin) * md, rows, md) *
        Eigen::Map<const RowMatrix<Scalar>>(spec.proj, C, md).transpose();
    Z.rowwise() += bias.transpose();
  } else {
    Z.rowwise() = bias.transpose();
  }
  for (int t = t_begin; t < t_end; ++t) {
    const Scalar* z = logits + static_cast<long>(t) * C;
    Scalar* c = coef + static_cast<long>(t) * C;
    for (int j = 0; j < m; ++j) c[j] = sigmoid(z[j]);
    for (int j = 0; j < m; ++j) c[m + j] = Scalar(2) * sigmoid(z[m + j]);
    std::copy(z + 2 * m, z + C, c + 2 * m);
    sinkhorn(c + 2 * m, m, spec.iterations, static_cast<Scalar*>(nullptr),
             static_cast<Scalar*>(nullptr));
    Row<Scalar> out(u + static_cast<long>(t) * d, d);
    out.setZero();
    for (int j = 0; j < m; ++j)
      out += c[j] * ConstRow<Scalar>(X + static_cast<long>(t) * md + static_cast<long>(j) * d, d);
  }
}

template <typename Scalar>
void mhc_write(const MhcSpec<Scalar>& spec, const Scalar* coef, const Scalar* v, Scalar* X,
               int t_begin, int t_end) {
  const int m = spec.m, d = spec.d, md = m * d, C = spec.coefficients();
  Scratch<Scalar> scratch;
  Scalar* next = scratch.get(static_cast<std::size_t>(md));
  for (int t = t_begin; t < t_end; ++t) {
    const Scalar* c = coef + static_cast<long>(t) * C;
    const Scalar* res = c + 2 * m;
    Scalar* x = X + static_cast<long>(t) * md;
    const ConstRow<Scalar> value(v + static_cast<long>(t) * d, d);
    for (int i = 0; i < m; ++i) {
      Row<Scalar> row(next + static_cast<long>(i) * d, d);
      row = c[m + i] * value;
      for (int j = 0; j < m; ++j)
        row += res[i * m + j] * ConstRow<Scalar>(x + static_cast<long>(j) * d, d);
    }
    std::copy(next, next + md, x);
  }
}

template <typename Scalar>
void mhc_output_gradient(const MhcSpec<Scalar>& spec, const Scalar* coef, const Scalar* dX,
                         Scalar* dv, int t_begin, int t_end) {
  const int m = spec.m, d = spec.d, md = m * d, C = spec.coefficients();
  for (int t = t_begin; t < t_end; ++t) {
    const Scalar* c = coef + static_cast<long>(t) * C;
    Row<Scalar> out(dv + static_cast<long>(t) * d, d);
    out.setZero();
    for (int i = 0; i < m; ++i)
      out +=
          c[m + i] * ConstRow<Scalar>(dX + static_cast<long>(t) * md + static_cast<long>(i) * d, d);
  }
}

template <typename Scalar>
void mhc_step_backward(const MhcSpec<Scalar>& spec, const Scalar* X, const Scalar* coef,
                       const Scalar* logits, const Scalar* v, const Scalar* du, Scalar* dX,
                       Scalar* dlogits, int t_begin, int t_end) {
  const int m = spec.m, d = spec.d, md = m * d, mm = m * m, C = spec.coefficients();
  const int iterations = spec.iterations;
  Scratch<Scalar> scratch;
  // before (m d), dres (m m), start (m m), iterates (2 iterations, m m).
  Scalar* before = scratch.get(static_cast<std::size_t>(md + 2 * mm + 2 * iterations * mm + mm));
  Scalar* dk = before + md;
  Scalar* start = dk + mm;
  Scalar* k = start + mm;
  Scalar* states = k + mm;
  for (int t = t_begin; t < t_end; ++t) {
    const Scalar* c = coef + static_cast<long>(t) * C;
    const Scalar* res = c + 2 * m;
    const Scalar* x = X + static_cast<long>(t) * md;
    Scalar* dx = dX + static_cast<long>(t) * md;
    Scalar* dz = dlogits + static_cast<long>(t) * C;
    const ConstRow<Scalar> value(v + static_cast<long>(t) * d, d);
    const ConstRow<Scalar> dinput(du + static_cast<long>(t) * d, d);
    std::fill(before, before + md, Scalar(0));
    // X_i' = sum_j H_res,ij X_j + H_post,i v.
    for (int i = 0; i < m; ++i) {
      const ConstRow<Scalar> dnew(dx + static_cast<long>(i) * d, d);
      const Scalar post = c[m + i];
      dz[m + i] = dnew.dot(value) * post * (Scalar(1) - post / Scalar(2));  // d(2 s) = 2 s (1 - s)
      for (int j = 0; j < m; ++j) {
        dk[i * m + j] = dnew.dot(ConstRow<Scalar>(x + static_cast<long>(j) * d, d));
        Row<Scalar>(before + static_cast<long>(j) * d, d) += res[i * m + j] * dnew;
      }
    }
    // u = sum_j H_pre,j X_j.
    for (int j = 0; j < m; ++j) {
      const Scalar pre = c[j];
      dz[j] =
          dinput.dot(ConstRow<Scalar>(x + static_cast<long>(j) * d, d)) * pre * (Scalar(1) - pre);
      Row<Scalar>(before + static_cast<long>(j) * d, d) += pre * dinput;
    }
    std::copy(before, before + md, dx);
    // Sinkhorn, retraced: y = x / s(x) along the rows (columns): dx = (dy - sum_k dy_k y_k) / s.
    std::copy(logits + static_cast<long>(t) * C + 2 * m, logits + static_cast<long>(t) * C + C, k);
    sinkhorn(k, m, iterations, start, states);
    for (int it = iterations - 1; it >= 0; --it) {
      {  // column step
        const Scalar* s = states + static_cast<long>(2 * it + 1) * mm;
        for (int j = 0; j < m; ++j) {
          Scalar sum = 0, dot = 0;
          for (int i = 0; i < m; ++i) sum += s[i * m + j];
          for (int i = 0; i < m; ++i) dot += dk[i * m + j] * s[i * m + j] / sum;
          for (int i = 0; i < m; ++i) dk[i * m + j] = (dk[i * m + j] - dot) / sum;
        }
      }
      {  // row step
        const Scalar* s = states + static_cast<long>(2 * it) * mm;
        for (int i = 0; i < m; ++i) {
          Scalar sum = 0, dot = 0;
          for (int j = 0; j < m; ++j) sum += s[i * m + j];
          for (int j = 0; j < m; ++j) dot += dk[i * m + j] * s[i * m + j] / sum;
          for (int j = 0; j < m; ++j) dk[i * m + j] = (dk[i * m + j] - dot) / sum;
        }
      }
    }
    // K = exp(A - max A): the max shift has no gradient.
    for (int i = 0; i < mm; ++i) dz[2 * m + i] = dk[i] * start[i];
  }
}

template <typename Scalar>
void mhc_flat_backward(const MhcSpec<Scalar>& spec, const Scalar* flat, const Scalar* inv,
                       const Scalar* dflat, Scalar* dX, int t_begin, int t_end) {
  const int md = spec.m * spec.d;
  for (int t = t_begin; t < t_end; ++t) {
    const long row = static_cast<long>(t) * md;
    const ConstRow<Scalar> y(flat + row, md), dy(dflat + row, md);
    const Scalar dot = dy.dot(y);  // dy . x~ = r (dy . x)
    Row<Scalar>(dX + row, md) += (dy - y * (dot / static_cast<Scalar>(md))) * inv[t];
  }
}

#define ATTNRES_INSTANTIATE_MHC_STEP(Scalar)                                                       \
  template MhcSpec<Scalar> mhc_spec(const AttnResConfig&, int, Scalar, const Vector<Scalar>&,      \
                                    const Matrix<Scalar>&);                                        \
  template void mhc_stack_weights(const AttnResConfig&, const DepthReadWeights<Scalar>&,           \
                                  Vector<Scalar>&, Matrix<Scalar>&);                               \
  template void mhc_coefficients(const MhcSpec<Scalar>&, const Scalar*, Scalar*, Scalar*, Scalar*, \
                                 Scalar*, Scalar*, int, int);                                      \
  template void mhc_write(const MhcSpec<Scalar>&, const Scalar*, const Scalar*, Scalar*, int,      \
                          int);                                                                    \
  template void mhc_output_gradient(const MhcSpec<Scalar>&, const Scalar*, const Scalar*, Scalar*, \
                                    int, int);                                                     \
  template void mhc_step_backward(const MhcSpec<Scalar>&, const Scalar*, const Scalar*,            \
                                  const Scalar*, const Scalar*, const Scalar*, Scalar*, Scalar*,   \
                                  int, int);                                                       \
  template void mhc_flat_backward(const MhcSpec<Scalar>&, const Scalar*, const Scalar*,            \
                                  const Scalar*, Scalar*, int, int);
ATTNRES_INSTANTIATE_MHC_STEP(float)
ATTNRES_INSTANTIATE_MHC_STEP(double)

}  // namespace attnres::cpu
