// mHC streams, coefficients and their backward pass (docs/schemes.md "mHC"). Readable
// per-token loops for the m x m matrices; the (T, m d) projections are matrix products.
#include "attnres/mhc.hpp"

#include <cmath>

#include "attnres/error.hpp"

namespace attnres {

template <typename Scalar>
Matrix<Scalar> sinkhorn(const Matrix<Scalar>& logits, int iterations) {
  Matrix<Scalar> k = (logits.array() - logits.maxCoeff()).exp().matrix();
  for (int it = 0; it < iterations; ++it) {
    k.array().colwise() /= k.rowwise().sum().array();
    k.array().rowwise() /= k.colwise().sum().array();
  }
  return k;
}

template <typename Scalar>
Matrix<Scalar> sinkhorn_backward(const Matrix<Scalar>& logits, int iterations,
                                 const Matrix<Scalar>& doutput) {
  // Forward again, keeping every iterate: states[2 it] before the row step, [2 it + 1] before
  // the column step.
  std::vector<Matrix<Scalar>> states;
  Matrix<Scalar> k = (logits.array() - logits.maxCoeff()).exp().matrix();
  const Matrix<Scalar> start = k;
  for (int it = 0; it < iterations; ++it) {
    states.push_back(k);
    k.array().colwise() /= k.rowwise().sum().array();
    states.push_back(k);
    k.array().rowwise() /= k.colwise().sum().array();
  }
  // y = x / s(x) with s the row (or column) sums: dx = (dy - sum_k dy_k y_k) / s along that sum.
  Matrix<Scalar> dk = doutput;
  for (int it = iterations - 1; it >= 0; --it) {
    {  // column step
      const Matrix<Scalar>& x = states[static_cast<std::size_t>(2 * it + 1)];
      const Eigen::Array<Scalar, 1, Eigen::Dynamic> sums = x.colwise().sum().array();
      const Matrix<Scalar> y = (x.array().rowwise() / sums).matrix();
      const Eigen::Array<Scalar, 1, Eigen::Dynamic> dot = (dk.array() * y.array()).colwise().sum();
      dk = ((dk.array().rowwise() - dot).rowwise() / sums).matrix();
    }
    {  // row step
      const Matrix<Scalar>& x = states[static_cast<std::size_t>(2 * it)];
      const Eigen::Array<Scalar, Eigen::Dynamic, 1> sums = x.rowwise().sum().array();
      const Matrix<Scalar> y = (x.array().colwise() / sums).matrix();
      const Eigen::Array<Scalar, Eigen::Dynamic, 1> dot = (dk.array() * y.array()).rowwise().sum();
      dk = ((dk.array().colwise() - dot).colwise() / sums).matrix();
    }
  }
  // K = exp(A - max A): the output does not change when K is scaled, so the max shift has no
  // gradient (sum(dK * K) = 0 up to rounding).
  return (dk.array() * start.array()).matrix();
}

namespace {

template <typename Scalar>
Scalar sigmoid(Scalar x) {
  return Scalar(1) / (Scalar(1) + std::exp(-x));
}

}  // namespace

template <typename Scalar>
MhcStep<Scalar> mhc_coefficients(const AttnResConfig& scheme,
                                 const DepthReadWeights<Scalar>& weights,
                                 const std::vector<Matrix<Scalar>>& streams, Scalar eps) {
  const auto m = static_cast<Eigen::Index>(streams.size());
  const Eigen::Index T = streams.front().rows();
  const Eigen::Index d = streams.front().cols();
  MhcStep<Scalar> step;
  step.pre_logits = weights.pre_bias.transpose().replicate(T, 1);
  step.post_logits = weights.post_bias.transpose().replicate(T, 1);
  // Column i m + j of res_logits is H_res(i, j); Matrix is row-major, so B_res's storage is
  // already in that order.
  const Eigen::Map<const Vector<Scalar>> res_bias_flat(weights.res_bias.data(), m * m);
  step.res_logits = res_bias_flat.transpose().replicate(T, 1);
  if (scheme.dynamic) {
    step.flat.resize(T, m * d);
    for (Eigen::Index j = 0; j < m; ++j)
      step.flat.middleCols(j * d, d) = streams[static_cast<std::size_t>(j)];
    step.inv_rms = row_inverse_rms(step.flat, eps);
    step.flat.array().colwise() *= step.inv_rms.array();
    step.pre_logits += step.flat * weights.pre_proj.transpose();
    step.post_logits += step.flat * weights.post_proj.transpose();
    step.res_logits += step.flat * weights.res_proj.transpose();
  }
  step.pre = step.pre_logits.unaryExpr([](Scalar x) { return sigmoid(x); });
  step.post = step.post_logits.unaryExpr([](Scalar x) { return Scalar(2) * sigmoid(x); });
  step.res.resize(static_cast<std::size_t>(T));
  for (Eigen::Index t = 0; t < T; ++t) {
    Matrix<Scalar> logits(m, m);
    for (Eigen::Index i = 0; i < m; ++i) logits.row(i) = step.res_logits.row(t).segment(i * m, m);
    step.res[static_cast<std::size_t>(t)] = sinkhorn(logits, scheme.sinkhorn_iterations);
  }
  return step;
}

template <typename Scalar>
Matrix<Scalar> mhc_sublayer_input(const MhcStep<Scalar>& step,
                                  const std::vector<Matrix<Scalar>>& streams) {
  Matrix<Scalar> u = Matrix<Scalar>::Zero(streams.front().rows(), streams.front().cols());
  for (std::size_t j = 0; j < streams.size(); ++j) {
    u.array() += streams[j].array().colwise() * step.pre.col(static_cast<Eigen::Index>(j)).array();
  }
  return u;
}

template <typename Scalar>
void mhc_write(const MhcStep<Scalar>& step, const Matrix<Scalar>& v,
               std::vector<Matrix<Scalar>>& streams) {
  const auto m = static_cast<Eigen::Index>(streams.size());
  const Eigen::Index T = v.rows();
  std::vector<Matrix<Scalar>> next(streams.size(), Matrix<Scalar>(T, v.cols()));
  for (Eigen::Index t = 0; t < T; ++t) {
    const Matrix<Scalar>& res = step.res[static_cast<std::size_t>(t)];
    for (Eigen::Index i = 0; i < m; ++i) {
      auto row = next[static_cast<std::size_t>(i)].row(t);
      row = step.post(t, i) * v.row(t);
      for (Eigen::Index j = 0; j < m; ++j)
        row += res(i, j) * streams[static_cast<std::size_t>(j)].row(t);
    }
  }
  streams = std::move(next);
}

template <typename Scalar>
Matrix<Scalar> mhc_output_gradient(const MhcStep<Scalar>& step,
                                   const std::vector<Matrix<Scalar>>& dstreams) {
  Matrix<Scalar> dv = Matrix<Scalar>::Zero(dstreams.front().rows(), dstreams.front().cols());
  for (std::size_t i = 0; i < dstreams.size(); ++i) {
    dv.array() +=
        dstreams[i].array().colwise() * step.post.col(static_cast<Eigen::Index>(i)).array();
  }
  return dv;
}

template <typename Scalar>
void mhc_step_backward(const AttnResConfig& scheme, const DepthReadWeights<Scalar>& weights,
                       const std::vector<Matrix<Scalar>>& streams, const MhcStep<Scalar>& step,
                       const Matrix<Scalar>& v, const Matrix<Scalar>& du,
                       std::vector<Matrix<Scalar>>& dstreams, DepthReadWeights<Scalar>* grad) {
  const auto m = static_cast<Eigen::Index>(streams.size());
  const Eigen::Index T = v.rows();
  const Eigen::Index d = v.cols();
  Matrix<Scalar> dpre_logits(T, m), dpost_logits(T, m), dres_logits(T, m * m);
  std::vector<Matrix<Scalar>> dbefore(streams.size(), Matrix<Scalar>::Zero(T, d));
  for (Eigen::Index t = 0; t < T; ++t) {
    const Matrix<Scalar>& res = step.res[static_cast<std::size_t>(t)];
    Matrix<Scalar> dres(m, m);
    for (Eigen::Index i = 0; i < m; ++i) {
      const auto dx_new = dstreams[static_cast<std::size_t>(i)].row(t);
      // X_i' = sum_j H_res,ij X_j + H_post,i v
      const Scalar post = step.post(t, i);
      dpost_logits(t, i) =
          dx_new.dot(v.row(t)) * post * (Scalar(1) - post / Scalar(2));  // d(2 sigma) = 2 s (1 - s)
      for (Eigen::Index j = 0; j < m; ++j) {
        dres(i, j) = dx_new.dot(streams[static_cast<std::size_t>(j)].row(t));
        dbefore[static_cast<std::size_t>(j)].row(t) += res(i, j) * dx_new;
      }
    }
    for (Eigen::Index j = 0; j < m; ++j) {
      // u = sum_j H_pre,j X_j
      const Scalar pre = step.pre(t, j);
      dpre_logits(t, j) =
          du.row(t).dot(streams[static_cast<std::size_t>(j)].row(t)) * pre * (Scalar(1) - pre);
      dbefore[static_cast<std::size_t>(j)].row(t) += pre * du.row(t);
    }
    Matrix<Scalar> logits(m, m);
    for (Eigen::Index i = 0; i < m; ++i) logits.row(i) = step.res_logits.row(t).segment(i * m, m);
    const Matrix<Scalar> dlogits = sinkhorn_backward(logits, scheme.sinkhorn_iterations, dres);
    for (Eigen::Index i = 0; i < m; ++i) dres_logits.row(t).segment(i * m, m) = dlogits.row(i);
  }
  grad->pre_bias += dpre_logits.colwise().sum().transpose();
  grad->post_bias += dpost_logits.colwise().sum().transpose();
  const Vector<Scalar> dres_flat = dres_logits.colwise().sum().transpose();
  for (Eigen::Index i = 0; i < m; ++i)
    grad->res_bias.row(i) += dres_flat.segment(i * m, m).transpose();
  if (scheme.dynamic) {
    grad->pre_proj += dpre_logits.transpose() * step.flat;
    grad->post_proj += dpost_logits.transpose() * step.flat;
    grad->res_proj += dres_logits.transpose() * step.flat;
    // x~ = x r over the m d values of vec X: dx = r dy - r^3 x (dy . x) / (m d), x = x~ / r.
    const Matrix<Scalar> dflat = dpre_logits * weights.pre_proj + dpost_logits * weights.post_proj +
                                 dres_logits * weights.res_proj;
    const Vector<Scalar> dot =
        (dflat.array() * step.flat.array()).rowwise().sum();  // dy . x~ = r (dy . x)
    for (Eigen::Index j = 0; j < m; ++j) {
      const auto dy = dflat.middleCols(j * d, d);
      const auto y = step.flat.middleCols(j * d, d);
      dbefore[static_cast<std::size_t>(j)].array() +=
          (dy.array() - y.array().colwise() * (dot.array() / static_cast<Scalar>(m * d)))
              .colwise() *
          step.inv_rms.array();
    }
  }
  dstreams = std::move(dbefore);
}

template <typename Scalar>
Matrix<Scalar> MhcCoefficientsOfOutputs<Scalar>::read_weights(const MhcStep<Scalar>& step) const {
  const Eigen::Index T = step.pre.rows();
  Matrix<Scalar> weights(T, static_cast<Eigen::Index>(coefficients.size()));
  for (std::size_t i = 0; i < coefficients.size(); ++i) {
    weights.col(static_cast<Eigen::Index>(i)) =
        (coefficients[i].array() * step.pre.array()).rowwise().sum();
  }
  return weights;
}

template <typename Scalar>
Matrix<Scalar> MhcCoefficientsOfOutputs<Scalar>::final_weights() const {
  const Eigen::Index T = coefficients.front().rows();
  Matrix<Scalar> weights(T, static_cast<Eigen::Index>(coefficients.size()));
  for (std::size_t i = 0; i < coefficients.size(); ++i) {
    weights.col(static_cast<Eigen::Index>(i)) = coefficients[i].rowwise().mean();
  }
  return weights;
}

template <typename Scalar>
void MhcCoefficientsOfOutputs<Scalar>::advance(const MhcStep<Scalar>& step) {
  const Eigen::Index T = step.pre.rows();
  for (auto& c : coefficients) {
    for (Eigen::Index t = 0; t < T; ++t) {
      const Vector<Scalar> column = step.res[static_cast<std::size_t>(t)] * c.row(t).transpose();
      c.row(t) = column.transpose();
    }
  }
  coefficients.push_back(step.post);
}

#define ATTNRES_INSTANTIATE_MHC(Scalar)                                                            \
  template Matrix<Scalar> sinkhorn(const Matrix<Scalar>&, int);                                    \
  template Matrix<Scalar> sinkhorn_backward(const Matrix<Scalar>&, int, const Matrix<Scalar>&);    \
  template MhcStep<Scalar> mhc_coefficients(const AttnResConfig&, const DepthReadWeights<Scalar>&, \
                                            const std::vector<Matrix<Scalar>>&, Scalar);           \
  template Matrix<Scalar> mhc_sublayer_input(const MhcStep<Scalar>&,                               \
                                             const std::vector<Matrix<Scalar>>&);                  \
  template void mhc_write(const MhcStep<Scalar>&, const Matrix<Scalar>&,                           \
                          std::vector<Matrix<Scalar>>&);                                           \
  template Matrix<Scalar> mhc_output_gradient(const MhcStep<Scalar>&,                              \
                                              const std::vector<Matrix<Scalar>>&);                 \
  template void mhc_step_backward(const AttnResConfig&, const DepthReadWeights<Scalar>&,           \
                                  const std::vector<Matrix<Scalar>>&, const MhcStep<Scalar>&,      \
                                  const Matrix<Scalar>&, const Matrix<Scalar>&,                    \
                                  std::vector<Matrix<Scalar>>&, DepthReadWeights<Scalar>*);        \
  template struct MhcCoefficientsOfOutputs<Scalar>;
ATTNRES_INSTANTIATE_MHC(float)
ATTNRES_INSTANTIATE_MHC(double)

}  // namespace attnres
