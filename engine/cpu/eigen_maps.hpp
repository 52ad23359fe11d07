// Eigen views over the fast engines' raw buffers (row-major, like every tensor here).
#pragma once

#include <Eigen/Core>

#include "attnres/tensor.hpp"

namespace attnres::engine {

template <typename Scalar>
using Map = Eigen::Map<Matrix<Scalar>>;
template <typename Scalar>
using ConstMap = Eigen::Map<const Matrix<Scalar>>;
template <typename Scalar>
using StridedMap = Eigen::Map<Matrix<Scalar>, 0, Eigen::OuterStride<>>;
template <typename Scalar>
using ConstStridedMap = Eigen::Map<const Matrix<Scalar>, 0, Eigen::OuterStride<>>;
template <typename Scalar>
using VectorMap = Eigen::Map<Vector<Scalar>>;
template <typename Scalar>
using ConstVectorMap = Eigen::Map<const Vector<Scalar>>;

}  // namespace attnres::engine
