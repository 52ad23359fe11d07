// Eigen views over the CPU kernels' raw row-major buffers, and the logistic function, shared by
// the kernels of kernels/cpu/ (private to them).
#pragma once

#include <Eigen/Core>
#include <cmath>

namespace attnres::cpu {

template <typename Scalar>
using RowMatrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename Scalar>
using ConstRow = Eigen::Map<const Eigen::Matrix<Scalar, Eigen::Dynamic, 1>>;
template <typename Scalar>
using Row = Eigen::Map<Eigen::Matrix<Scalar, Eigen::Dynamic, 1>>;

template <typename Scalar>
Scalar sigmoid(Scalar x) {
  return Scalar(1) / (Scalar(1) + std::exp(-x));
}

}  // namespace attnres::cpu
