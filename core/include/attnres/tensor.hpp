// Tensor aliases used throughout the core: row-major Eigen matrices, so that a (rows, cols)
// tensor has the same memory order as a safetensors/PyTorch (rows, cols) tensor, and activations
// are (T, d): one row per token.
#pragma once

#include <Eigen/Core>

namespace attnres {

template <typename Scalar>
using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename Scalar>
using Vector = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>;

}  // namespace attnres
