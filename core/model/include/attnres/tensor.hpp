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

// 1 / sqrt(mean(x^2) + eps) of one row of d values: the one RMS used by RMSNorm and by the depth
// attention's key norm, in every engine. A row whose squares overflow (huge entries, e.g. above
// ~1e19 in float32) is rescaled by its largest magnitude instead of silently normalising to zero.
template <typename Scalar>
Scalar inverse_rms_of_row(const Scalar* x, Eigen::Index d, Scalar eps) {
  const Eigen::Map<const Vector<Scalar>> row(x, d);
  const Scalar mean_square = row.squaredNorm() / static_cast<Scalar>(d);
  if (std::isfinite(mean_square)) return Scalar(1) / std::sqrt(mean_square + eps);
  const Scalar largest = row.cwiseAbs().maxCoeff();
  if (!std::isfinite(largest)) return Scalar(1) / std::sqrt(mean_square + eps);  // a real Inf/NaN
  const Scalar scaled = (row.array() / largest).square().mean();
  return Scalar(1) / (largest * std::sqrt(scaled + eps / largest / largest));
}

// inverse_rms_of_row for every row of x (T, d) -> (T).
template <typename Scalar>
Vector<Scalar> row_inverse_rms(const Matrix<Scalar>& x, Scalar eps) {
  Vector<Scalar> inverse(x.rows());
  for (Eigen::Index r = 0; r < x.rows(); ++r)
    inverse(r) = inverse_rms_of_row(x.data() + r * x.cols(), x.cols(), eps);
  return inverse;
}

}  // namespace attnres
