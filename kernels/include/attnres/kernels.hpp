// Optimised kernels behind one op-level interface, one file per op and backend:
//   kernels/cpu/depth_attention.cpp   fused single-pass CPU kernel
//   kernels/cuda/depth_attention.cu   CUDA kernel (built when ATTNRES_ENABLE_CUDA is on)
// Each is validated against the readable reference in core/ (attnres/depth_attention.hpp) by
// tests/kernels/test_backend_ops.cpp, which runs every case on every backend present and skips,
// with the reason, the ones that are absent.
//
// Example:
//   std::string why;
//   if (kernel_backend_available(KernelBackend::cuda, &why)) { ... } else { puts(why.c_str()); }
//   depth_attention_forward(KernelBackend::cpu, h, alpha, sources, query, gain, 1e-6f, n, T, d);
#pragma once

#include <string>
#include <vector>

#include "attnres/enum_names.hpp"
#include "attnres/model.hpp"
#include "attnres/residual_scheme.hpp"

namespace attnres {

enum class KernelBackend { cpu, cuda };
inline constexpr EnumNames<KernelBackend, 2> kKernelBackendNames{
    {{KernelBackend::cpu, "cpu"}, {KernelBackend::cuda, "cuda"}}};

std::string to_string(KernelBackend backend);
// False, with the reason in *why_not, when the backend cannot run here (not built, no device).
bool kernel_backend_available(KernelBackend backend, std::string* why_not);

// One depth-attention read over n sources for T tokens (docs/math.md §2.2), float32, host pointers:
//   h      (T, d) out        alpha   (T, n) out
//   sources (n, T, d) in     query, gain (d) in: pseudo-query w and KeyNorm gain g
// h[t] = sum_i softmax_i(w . (g * v_i[t] / sqrt(mean(v_i[t]^2) + eps))) v_i[t].
// Throws attnres::Error if the backend is unavailable or the sizes are not positive.
void depth_attention_forward(KernelBackend backend, float* h, float* alpha, const float* sources,
                             const float* query, const float* gain, float eps, int n, int T, int d);

namespace cpu {
void depth_attention_forward(float* h, float* alpha, const float* sources, const float* query,
                             const float* gain, float eps, int n, int T, int d);

// The two-phase depth read as fused kernels (docs/engines.md), f32 and f64, on tokens
// [t_begin, t_end) so that callers can split tokens across threads. Every source row is read
// once per call; a token's rows stay in cache between the scoring pass and the weighting pass.
// Statistics are those of docs/math.md: m = max z, l = sum exp(z - m), o = sum exp(z - m) v, with
// z = (v . w_eff) / sqrt(mean(v^2) + eps) and w_eff = w * g (query times key-norm gain).
//
// Phase 1: q reads (rows of `queries`, (q, d)) over n sources, source i's (T, d) values at
// sources + i * source_stride. Writes m, l (q, T), o (q, T, d) and, when not null, the scores
// (q, T, n).
template <typename Scalar>
void depth_phase_one(const Scalar* sources, long source_stride, int n, int T, int d,
                     const Scalar* queries, int q, Scalar eps, Scalar* m, Scalar* l, Scalar* o,
                     Scalar* scores, int t_begin, int t_end);
// Phase 2: merges one more source (T, d) into one read's statistics m, l (T) and o (T, d);
// stores its scores (T) when `scores` is not null.
template <typename Scalar>
void depth_merge_source(const Scalar* source, int T, int d, const Scalar* query, Scalar eps,
                        Scalar* m, Scalar* l, Scalar* o, Scalar* scores, int t_begin, int t_end);
// h = o / l per token (h may be o).
template <typename Scalar>
void depth_finish(const Scalar* o, const Scalar* l, int d, Scalar* h, int t_begin, int t_end);

// ---- Any read of the read-based schemes (docs/schemes.md "Read-based schemes: one formula"),
// f32 and f64, on tokens [t_begin, t_end): Full / Block AttnRes with any gate, key norm on or off,
// H heads, a static or per-token query, learned logits (mixing = scalars); DenseFormer's weights;
// the rescaled residual's mean. The statistics are those of depth_read_stats
// (core/model/include/attnres/depth_read.hpp), per token and head: e_i = exp(s_i - m) (softmax,
// m the running max), sigmoid(s_i) (both sigmoid gates), a_i (DenseFormer) or 1 (rescaled);
// l = sum e_i, o = sum e_i x_i over the head's channels. They merge exactly, so the two-phase
// schedule is "accumulate the shared history, then each source produced inside the group".
enum class DepthWeights {
  attention,  // s = q . x / rms_c(x) (or q . x without the key norm), per head
  logits,     // s_i = b_i, learned (mixing = scalars), then the gate
  direct,     // alpha_i = a_i, unnormalised (DenseFormer)
  mean,       // alpha_i = 1 / n (rescaled residual)
};

template <typename Scalar>
struct DepthReadSpec {
  DepthWeights weights = DepthWeights::attention;
  DepthGate gate = DepthGate::softmax;  // attention and logits
  int heads = 1;                        // attention: channel groups of d / heads; else 1
  bool key_norm = true;                 // attention
  Scalar eps = 0;                       // the key norm's eps
  const Scalar* query = nullptr;        // attention: effective query (w * g, or w without key norm)
  long query_stride = 0;                // 0: the same query for every token; d: (T, d) per token
  const Scalar* logits = nullptr;       // logits / direct: (n) per source of the read
  bool uses_max = true;    // softmax statistics carry a running max (depth_read_uses_max)
  bool normalised = true;  // the read is o / l, else o (depth_read_normalised)
};

// The spec's kind, gate, heads and key norm for `scheme`; the caller sets query and logits.
template <typename Scalar>
DepthReadSpec<Scalar> depth_read_spec(const AttnResConfig& scheme);

// Merges sources first .. first + k - 1 (of a read with n; sources[i] points at (T, d) values of
// source first + i) into the read's statistics m, l (T, H) and o (T, d); `fresh` starts them
// from the empty set. scores (T, H n), head-major columns c * n + i, receive the sources' scores.
template <typename Scalar>
void depth_read_accumulate(const DepthReadSpec<Scalar>& spec, const Scalar* const* sources, int k,
                           int first, int n, int d, bool fresh, Scalar* m, Scalar* l, Scalar* o,
                           Scalar* scores, int t_begin, int t_end);
// The read's output h (T, d) and weights alpha (T, H n) from the statistics of all n sources.
template <typename Scalar>
void depth_read_finish(const DepthReadSpec<Scalar>& spec, int n, int d, const Scalar* m,
                       const Scalar* l, const Scalar* o, const Scalar* scores, Scalar* h,
                       Scalar* alpha, int t_begin, int t_end);
// The input-dependent query (docs/schemes.md): y = u / rms(u) (eps, no gain), q = w + W y, and
// the effective query q * g (gain not null: the key norm) or q. u, y, q, effective (T, d),
// inv (T); W (d, d) row-major.
template <typename Scalar>
void depth_input_query(const Scalar* u, int d, const Scalar* w, const Scalar* W, const Scalar* gain,
                       Scalar eps, Scalar* inv, Scalar* y, Scalar* q, Scalar* effective,
                       int t_begin, int t_end);

// ---- mHC (docs/schemes.md "mHC") on raw buffers, f32 and f64, tokens [t_begin, t_end). A token's
// m streams are stored stream-major, X (T, m d): entry j d + k is channel k of stream j, which is
// vec(X). A sublayer's C = 2m + m^2 coefficients are stored (T, C): H_pre (m), H_post (m), then
// H_res row-major (m^2), as are their logits; its biases (C) and projections (C, m d) likewise.
// Reference: core/model/src/mhc.cpp (mhc_coefficients, mhc_write, mhc_step_backward, sinkhorn).
template <typename Scalar>
struct MhcSpec {
  int m = 1, d = 0, iterations = 20;
  Scalar eps = 0;                // rms_norm_eps: the norm of vec(X)
  const Scalar* bias = nullptr;  // (C)
  const Scalar* proj = nullptr;  // (C, m d) row-major; null: static mHC
  int coefficients() const { return 2 * m + m * m; }
};
// The spec of a sublayer of `scheme` (m streams, d channels) over its stacked weights, made by
// mhc_stack_weights from its DepthReadWeights (`proj` is used when the scheme is dynamic).
template <typename Scalar>
MhcSpec<Scalar> mhc_spec(const AttnResConfig& scheme, int d, Scalar eps, const Vector<Scalar>& bias,
                         const Matrix<Scalar>& proj);
template <typename Scalar>
void mhc_stack_weights(const AttnResConfig& scheme, const DepthReadWeights<Scalar>& read,
                       Vector<Scalar>& bias, Matrix<Scalar>& proj);
// inv (T) and flat (T, m d) = X / rms(vec X) (dynamic only), logits (T, C) = bias + proj flat,
// coef (T, C) = sigmoid, 2 sigmoid and Sinkhorn of the logits, and u (T, d) = sum_j H_pre,j X_j.
template <typename Scalar>
void mhc_coefficients(const MhcSpec<Scalar>& spec, const Scalar* X, Scalar* inv, Scalar* flat,
                      Scalar* logits, Scalar* coef, Scalar* u, int t_begin, int t_end);
// X <- H_res X + H_post v (T, d), in place.
template <typename Scalar>
void mhc_write(const MhcSpec<Scalar>& spec, const Scalar* coef, const Scalar* v, Scalar* X,
               int t_begin, int t_end);
// dv (T, d) = sum_i H_post,i dX_i from d loss / d X after the step (T, m d).
template <typename Scalar>
void mhc_output_gradient(const MhcSpec<Scalar>& spec, const Scalar* coef, const Scalar* dX,
                         Scalar* dv, int t_begin, int t_end);
// The step's backward but for the projections: from X (before), coef, logits, v and du (d loss /
// d u), dX (after) becomes d loss / d X before the step through H_res and H_pre, and dlogits
// (T, C) receives d loss / d logits (Sinkhorn retraced per token).
template <typename Scalar>
void mhc_step_backward(const MhcSpec<Scalar>& spec, const Scalar* X, const Scalar* coef,
                       const Scalar* logits, const Scalar* v, const Scalar* du, Scalar* dX,
                       Scalar* dlogits, int t_begin, int t_end);
// The path through flat = X r: dX += r dflat - r flat (dflat . flat) / (m d), dflat (T, m d).
template <typename Scalar>
void mhc_flat_backward(const MhcSpec<Scalar>& spec, const Scalar* flat, const Scalar* inv,
                       const Scalar* dflat, Scalar* dX, int t_begin, int t_end);
}  // namespace cpu

namespace cuda {
bool available(std::string* why_not);
void depth_attention_forward(float* h, float* alpha, const float* sources, const float* query,
                             const float* gain, float eps, int n, int T, int d);
}  // namespace cuda

}  // namespace attnres
