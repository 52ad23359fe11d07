// mHC — manifold-constrained hyper-connections (docs/schemes.md "mHC"): m residual streams per
// token, mixed by H_res (doubly stochastic, by Sinkhorn-Knopp), read by H_pre and written by
// H_post, with coefficients from the streams themselves (dynamic) or biases only (static).
//
//   MhcStep<double> step = mhc_coefficients(scheme, model.depth_read(r), streams, eps);
//   Matrix<double> u = mhc_sublayer_input(step, streams);      // H_pre X
//   mhc_write(step, v, streams);                               // X <- H_res X + H_post v
#pragma once

#include <vector>

#include "attnres/model.hpp"
#include "attnres/tensor.hpp"

namespace attnres {

// Sinkhorn-Knopp: K = exp(A - max A), then `iterations` times rows divided by their sums, then
// columns by theirs. A and the result are (m, m).
template <typename Scalar>
Matrix<Scalar> sinkhorn(const Matrix<Scalar>& logits, int iterations);

// d loss / d A from d loss / d Sinkhorn(A), by retracing the iterations.
template <typename Scalar>
Matrix<Scalar> sinkhorn_backward(const Matrix<Scalar>& logits, int iterations,
                                 const Matrix<Scalar>& doutput);

// The coefficients of one sublayer for every token, and what their backward pass needs.
template <typename Scalar>
struct MhcStep {
  Matrix<Scalar> flat;              // (T, m d) x~ = vec(X) / rms(vec X), stream-major
  Vector<Scalar> inv_rms;           // (T)
  Matrix<Scalar> pre_logits;        // (T, m)
  Matrix<Scalar> post_logits;       // (T, m)
  Matrix<Scalar> res_logits;        // (T, m m), column i m + j
  Matrix<Scalar> pre;               // (T, m) H_pre = sigmoid
  Matrix<Scalar> post;              // (T, m) H_post = 2 sigmoid
  std::vector<Matrix<Scalar>> res;  // T x (m, m) H_res = Sinkhorn
};

// streams: m matrices (T, d), X_j. eps: rms_norm_eps (the norm of vec X).
template <typename Scalar>
MhcStep<Scalar> mhc_coefficients(const AttnResConfig& scheme,
                                 const DepthReadWeights<Scalar>& weights,
                                 const std::vector<Matrix<Scalar>>& streams, Scalar eps);

// u = sum_j H_pre,j X_j (T, d).
template <typename Scalar>
Matrix<Scalar> mhc_sublayer_input(const MhcStep<Scalar>& step,
                                  const std::vector<Matrix<Scalar>>& streams);

// X_i <- sum_j H_res,ij X_j + H_post,i v, in place.
template <typename Scalar>
void mhc_write(const MhcStep<Scalar>& step, const Matrix<Scalar>& v,
               std::vector<Matrix<Scalar>>& streams);

// Backward of one sublayer step. In: the streams before the step, the step, v, d loss / d u
// (from the sublayer's backward) and d loss / d X after the step (dstreams, overwritten with
// d loss / d X before the step). Adds the coefficient gradients into *grad. d loss / d v is
// returned by mhc_output_gradient, which the caller needs first (to run the sublayer backward).
template <typename Scalar>
Matrix<Scalar> mhc_output_gradient(const MhcStep<Scalar>& step,
                                   const std::vector<Matrix<Scalar>>& dstreams);
template <typename Scalar>
void mhc_step_backward(const AttnResConfig& scheme, const DepthReadWeights<Scalar>& weights,
                       const std::vector<Matrix<Scalar>>& streams, const MhcStep<Scalar>& step,
                       const Matrix<Scalar>& v, const Matrix<Scalar>& du,
                       std::vector<Matrix<Scalar>>& dstreams, DepthReadWeights<Scalar>* grad);

// Effective depth weights (docs/schemes.md "The mixing matrix"): coefficients[i] (T, m) holds
// the coefficients of v_i in the current streams. Starts with v_0 in every stream.
template <typename Scalar>
struct MhcCoefficientsOfOutputs {
  std::vector<Matrix<Scalar>> coefficients;
  // Row r of M for every token: (T, r + 1), the weights of v_0 .. v_r in u = H_pre X.
  Matrix<Scalar> read_weights(const MhcStep<Scalar>& step) const;
  // The final read (mean of the streams): (T, L + 1).
  Matrix<Scalar> final_weights() const;
  // After the step that produced v_{r+1}: C_i <- H_res C_i, C_{r+1} = H_post.
  void advance(const MhcStep<Scalar>& step);
};

}  // namespace attnres
