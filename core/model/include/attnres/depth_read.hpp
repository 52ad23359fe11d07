// One read of any read-based residual scheme (docs/schemes.md "Read-based schemes: one
// formula"), forward and backward, in the readable one-shot form: Full and Block AttnRes with
// any gate, key norm on or off, H heads, a static or input-dependent query, attention or scalar
// mixing; DenseFormer's learned weights; the rescaled residual's running mean.
//
//   h_r = sum_i alpha_{r,c(j),i} x_i        (channel j in head c(j))
//   alpha = gate(s),  s_{c,i} = q . g . x_i / rms_c(x_i)  (attention)   or  s_i = b_i  (scalars)
//
// Every function works on all T tokens at once and never mixes positions.
//
//   DepthReadCache<double> cache;
//   Matrix<double> h = depth_read(scheme, model.depth_read(r), sources, eps, &cache);
//   cache.alpha;   // (T, H * n), column c * n + i: weight of source i in head c
#pragma once

#include <vector>

#include "attnres/model.hpp"
#include "attnres/tensor.hpp"

namespace attnres {

// What a read keeps for its backward pass.
template <typename Scalar>
struct DepthReadCache {
  int heads = 1;
  Matrix<Scalar> alpha;          // (T, H n) weights after the gate
  Matrix<Scalar> scores;         // (T, H n) scores before the gate (attention / scalars)
  Matrix<Scalar> query;          // (T, d) per-token query w + W n (input-dependent query only)
  Matrix<Scalar> query_input;    // (T, d) n = u / rms(u) of the latest source (input query only)
  Vector<Scalar> query_inv_rms;  // (T) 1 / rms(u)
  std::vector<Matrix<Scalar>> key_inv_rms;  // per source (T, H): 1 / rms over each head's channels
};

// Heads a read of `scheme` has (attention mixing: attn_res.heads; otherwise 1).
int depth_read_heads(const AttnResConfig& scheme);

// The read: returns h (T, d) and fills `cache` (alpha always; the rest as the backward needs).
// sources: n pointers to (T, d) values, the most recent last. eps: attn_res.key_norm_eps.
template <typename Scalar>
Matrix<Scalar> depth_read(const AttnResConfig& scheme, const DepthReadWeights<Scalar>& weights,
                          const std::vector<const Matrix<Scalar>*>& sources, Scalar eps,
                          DepthReadCache<Scalar>* cache);

// Backward of depth_read: sets dsources[i] = d loss / d x_i (the value path plus the score path
// through the key norm, and through the query for an input-dependent query) and adds the
// gradients of the read's parameters into *grad (same shapes as `weights`).
template <typename Scalar>
void depth_read_backward(const AttnResConfig& scheme, const DepthReadWeights<Scalar>& weights,
                         const std::vector<const Matrix<Scalar>*>& sources, Scalar eps,
                         const DepthReadCache<Scalar>& cache, const Matrix<Scalar>& dh,
                         std::vector<Matrix<Scalar>>* dsources, DepthReadWeights<Scalar>* grad);

// ---- The two-phase schedule for every scheme that allows it (docs/schemes.md "Which schedules
// apply"): statistics over disjoint subsets of a read's sources merge exactly. With
// e_i = exp(s_i - m) (softmax), sigmoid(s_i) (both sigmoid gates), a_i (DenseFormer) or 1
// (rescaled): o = sum e_i x_i per head, l = sum e_i, m = the max score (softmax only); the read is
// o / l, or o for the unnormalised gates (sigmoid, DenseFormer).
template <typename Scalar>
struct DepthReadStats {
  Matrix<Scalar> o;       // (T, d)
  Matrix<Scalar> l;       // (T, H)
  Matrix<Scalar> m;       // (T, H), softmax only (else zeros)
  Matrix<Scalar> scores;  // (T, H k): the subset's scores, head-major, kept to recover the weights
};

// Whether a read of `scheme` keeps a running max in its statistics (softmax gate), and whether it
// divides by l (softmax, sigmoid_normalized, rescaled; not sigmoid or DenseFormer).
bool depth_read_uses_max(const AttnResConfig& scheme);
bool depth_read_normalised(const AttnResConfig& scheme);

// Statistics of sources first .. first + k - 1 of a read with n sources (the subset in `sources`).
// Not for an input-dependent query (its query needs the read's latest source).
template <typename Scalar>
DepthReadStats<Scalar> depth_read_stats(const AttnResConfig& scheme,
                                        const DepthReadWeights<Scalar>& weights,
                                        const std::vector<const Matrix<Scalar>*>& sources,
                                        Eigen::Index first, Eigen::Index n, Scalar eps);
// The statistics of the union of two disjoint subsets (a's sources first).
template <typename Scalar>
DepthReadStats<Scalar> merge_read_stats(const AttnResConfig& scheme,
                                        const DepthReadStats<Scalar>& a,
                                        const DepthReadStats<Scalar>& b);
// The read's output h (T, d) and its weights alpha (T, H n) from the statistics of all n sources.
template <typename Scalar>
Matrix<Scalar> finish_read_stats(const AttnResConfig& scheme, const DepthReadStats<Scalar>& stats,
                                 Matrix<Scalar>* alpha);

// Channel-averaged weights (T, n): the mean over heads of alpha (T, H n).
template <typename Scalar>
Matrix<Scalar> head_mean(const Matrix<Scalar>& alpha, int heads);

}  // namespace attnres
