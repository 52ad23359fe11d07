// The sublayers f_l of the tiny Llama-style model (docs/math.md §2.6), readable reference versions.
//
// f_l includes its own PreNorm: attention sublayers are Attn(RMSNorm(h)), MLP sublayers are
// MLP(RMSNorm(h)). Activations are (T, d), one row per token; weights are (out, in) as in
// PyTorch, so a projection is x * W^T.
#pragma once

#include <vector>

#include "attnres/model.hpp"
#include "attnres/tensor.hpp"

namespace attnres {

// RMSNorm(x) = g * x / sqrt(mean(x^2) + eps), per token.
template <typename Scalar>
Matrix<Scalar> rms_norm(const Matrix<Scalar>& x,     // (T, d)
                        const Vector<Scalar>& gain,  // (d)
                        Scalar eps);

// Qwen3's q/k norm: RMSNorm of each head's head_dim channels of x (T, heads * head_dim) with the
// same gain (head_dim), in place; nothing when `gain` is empty (Llama).
template <typename Scalar>
void head_rms_norm(Matrix<Scalar>& x, int heads, const Vector<Scalar>& gain, Scalar eps);

// cos/sin of the rotary angles pos * theta^(-2i / head_dim), i < head_dim / 2.
template <typename Scalar>
struct RopeTable {
  Matrix<Scalar> cos;  // (T, head_dim / 2)
  Matrix<Scalar> sin;  // (T, head_dim / 2)
};
template <typename Scalar>
RopeTable<Scalar> make_rope_table(int tokens, int head_dim, double theta);

// Rotates each head of x in place, Hugging Face `rotate_half` convention: channel j and
// j + head_dim/2 of a head form a pair rotated by angle[j].
template <typename Scalar>
void apply_rope(Matrix<Scalar>& x,  // (T, heads * head_dim)
                int heads, const RopeTable<Scalar>& rope);

// Causal multi-head attention with RoPE and grouped-query heads; scale 1/sqrt(head_dim); Qwen3's
// q/k norms (when the layer has them) before RoPE.
template <typename Scalar>
Matrix<Scalar> attention_forward(const LayerWeights<Scalar>& layer, const ModelConfig& config,
                                 const Matrix<Scalar>& x,  // (T, d), already RMS-normalised
                                 const RopeTable<Scalar>& rope);

// SwiGLU: down(silu(gate x) * up x).
template <typename Scalar>
Matrix<Scalar> mlp_forward(const LayerWeights<Scalar>& layer,
                           const Matrix<Scalar>& x);  // (T, d), already RMS-normalised

// The causal attention probabilities (T, T) of one head of one layer, given that layer's real input
// h (T, d) — the residual stream (or AttnRes read) entering its attention sublayer, before the
// layer's input RMSNorm (ForwardOptions::sublayer_inputs records it): the sequence-side analogue
// of the depth mixing matrix, for the duality view.
Matrix<double> attention_probabilities(const ModelWeights<double>& model, int layer, int head,
                                       const Matrix<double>& h);

// Sublayer `sublayer` (0-based; even = attention of layer sublayer/2, odd = its MLP), PreNorm
// included: returns v = f(h).
template <typename Scalar>
Matrix<Scalar> sublayer_forward(const ModelWeights<Scalar>& model, int sublayer,
                                const Matrix<Scalar>& h,  // (T, d)
                                const RopeTable<Scalar>& rope);

// ---- Backward (docs/training.md). Each returns d loss / d input and adds the weight gradients
// into `grad` (same shapes as the weights). The attention and MLP backward recompute their
// internals from the input x.

// RMSNorm: dx from dy; adds sum_t dy * x * inv_rms to *gain_grad.
template <typename Scalar>
Matrix<Scalar> rms_norm_backward(const Matrix<Scalar>& x, const Vector<Scalar>& gain, Scalar eps,
                                 const Matrix<Scalar>& dy, Vector<Scalar>* gain_grad);

// RoPE is a rotation per pair, so its gradient is the inverse rotation (angle -> -angle).
template <typename Scalar>
void apply_rope_inverse(Matrix<Scalar>& x, int heads, const RopeTable<Scalar>& rope);

template <typename Scalar>
Matrix<Scalar> attention_backward(const LayerWeights<Scalar>& layer, const ModelConfig& config,
                                  const Matrix<Scalar>& x,  // (T, d), RMS-normalised input
                                  const RopeTable<Scalar>& rope,
                                  const Matrix<Scalar>& dout,  // (T, d)
                                  LayerWeights<Scalar>& grad);

template <typename Scalar>
Matrix<Scalar> mlp_backward(const LayerWeights<Scalar>& layer, const Matrix<Scalar>& x,
                            const Matrix<Scalar>& dout, LayerWeights<Scalar>& grad);

// The whole sublayer, PreNorm included: d loss / d h from d loss / d v.
template <typename Scalar>
Matrix<Scalar> sublayer_backward(const ModelWeights<Scalar>& model, int sublayer,
                                 const Matrix<Scalar>& h, const RopeTable<Scalar>& rope,
                                 const Matrix<Scalar>& dv, ModelWeights<Scalar>& grad);

}  // namespace attnres
