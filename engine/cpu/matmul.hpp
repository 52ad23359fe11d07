// The matrix products of the fast CPU engine (docs/engines.md, "Precision"): C = op(A) op(B) with
// f32 accumulation through oneDNN's matmul primitive, the inputs in f32 or rounded to bf16
// (mixed precision: oneDNN picks AMX, AVX-512-BF16 or an emulation at run time), and Eigen for
// f64. One Matmul per worker thread: it keeps the primitives it has made (one per shape and
// layout) and the bf16 copies of the operands it converts, so a product allocates nothing once
// its shape has been seen. oneDNN runs single-threaded inside a Matmul (the thread pool splits
// the work), so results are deterministic for a thread count.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attnres/tensor.hpp"

namespace attnres::engine {

// A bf16 value: the upper 16 bits of an IEEE float.
using Bf16 = std::uint16_t;

// Round to nearest even (NaN stays NaN, infinities stay infinite).
Bf16 to_bf16(float value);
float from_bf16(Bf16 value);
void to_bf16(const float* in, Bf16* out, std::size_t count);
// A row-major matrix rounded to bf16 (the same layout).
std::vector<Bf16> to_bf16(const Matrix<float>& matrix);

// One operand of a product as it enters it: `rows` x `cols`, stored row-major with `stride`
// elements between stored rows, or stored as its transpose (`transposed`: the stored matrix is
// cols x rows). `bf16`, when set, is the same matrix already rounded (same layout; a weight
// rounded once per pass), used instead of rounding `data` again in bf16 mode.
template <typename Scalar>
struct Operand {
  const Scalar* data = nullptr;
  Eigen::Index rows = 0, cols = 0, stride = 0;
  bool transposed = false;
  const Bf16* bf16 = nullptr;
};

// The operand `rows` x `cols` stored row-major (stride defaults to cols).
template <typename Scalar>
Operand<Scalar> plain(const Scalar* data, Eigen::Index rows, Eigen::Index cols,
                      Eigen::Index stride = 0, const Bf16* bf16 = nullptr) {
  return {data, rows, cols, stride > 0 ? stride : cols, false, bf16};
}
// The transpose of the stored row-major matrix `stored_rows` x `stored_cols`.
template <typename Scalar>
Operand<Scalar> transpose(const Scalar* data, Eigen::Index stored_rows, Eigen::Index stored_cols,
                          Eigen::Index stride = 0, const Bf16* bf16 = nullptr) {
  return {data, stored_cols, stored_rows, stride > 0 ? stride : stored_cols, true, bf16};
}
// A whole matrix, or its transpose, with its bf16 copy when one is given.
template <typename Scalar>
Operand<Scalar> plain(const Matrix<Scalar>& m, const std::vector<Bf16>* bf16 = nullptr) {
  return plain(m.data(), m.rows(), m.cols(), m.cols(),
               bf16 && !bf16->empty() ? bf16->data() : nullptr);
}
template <typename Scalar>
Operand<Scalar> transpose(const Matrix<Scalar>& m, const std::vector<Bf16>* bf16 = nullptr) {
  return transpose(m.data(), m.rows(), m.cols(), m.cols(),
                   bf16 && !bf16->empty() ? bf16->data() : nullptr);
}

// Rows first .. first + count - 1 of an operand (its bf16 copy's too).
template <typename Scalar>
Operand<Scalar> row_slice(const Operand<Scalar>& x, Eigen::Index first, Eigen::Index count) {
  const Eigen::Index offset = x.transposed ? first : first * x.stride;
  return {x.data + offset, count,        x.cols,
          x.stride,        x.transposed, x.bf16 ? x.bf16 + offset : nullptr};
}

class Matmul {
 public:
  // bf16: round f32 inputs to bf16 (f32 accumulation and output). Ignored for f64 products.
  explicit Matmul(bool bf16 = false);
  ~Matmul();
  Matmul(Matmul&&) noexcept;
  Matmul& operator=(Matmul&&) noexcept;

  bool bf16() const { return bf16_; }

  // C (A.rows x B.cols, row stride ldc) = A B, or C += A B when `accumulate`. A.cols == B.rows.
  void operator()(float* C, Eigen::Index ldc, const Operand<float>& A, const Operand<float>& B,
                  bool accumulate = false);
  void operator()(double* C, Eigen::Index ldc, const Operand<double>& A, const Operand<double>& B,
                  bool accumulate = false);

 private:
  struct Impl;
  bool bf16_ = false;
  std::unique_ptr<Impl> impl_;
};

// What oneDNN runs on this CPU: its ISA name ("avx512_core_amx", "avx512_core_bf16", ...) and
// whether bf16 products run on native bf16 units (AMX or AVX-512-BF16) rather than an emulation.
std::string matmul_isa();
bool native_bf16();

}  // namespace attnres::engine
