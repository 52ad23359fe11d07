// Tensor aliases used throughout the core: row-major Eigen matrices, so that a (rows, cols)
// tensor has the same memory order as a safetensors/PyTorch (rows, cols) tensor, and activations
// are (T, d): one row per token.
#pragma once

#include <Eigen/Core>
#include <cmath>

namespace attnres {

template <typename Scalar>
using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename Scalar>
using Vector = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>;

// 1 / sqrt(mean(x^2) + eps) per row: the one RMS used by RMSNorm and by the depth attention's
// key norm. Rows whose squares overflow (huge entries, e.g. above ~1e19 in float32) are rescaled
// by their largest magnitude instead of silently normalising to zero.
template <typename Scalar>
Vector<Scalar> row_inverse_rms(const Matrix<Scalar>& x,  // (T, d)
                               Scalar eps) {
  Vector<Scalar> mean_square = x.array().square().rowwise().mean();  // (T)
  Vector<Scalar> inverse = (mean_square.array() + eps).sqrt().inverse().matrix();
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    if (std::isfinite(mean_square(r))) continue;
    const Scalar largest = x.row(r).cwiseAbs().maxCoeff();
    if (!std::isfinite(largest)) continue;  // a real Inf/NaN: left for the caller to report
    const Scalar scaled = (x.row(r).array() / largest).square().mean();
    inverse(r) = Scalar(1) / (largest * std::sqrt(scaled + eps / largest / largest));
  }
  return inverse;
}

}  // namespace attnres
