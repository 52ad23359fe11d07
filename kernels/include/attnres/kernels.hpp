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
}  // namespace cpu

namespace cuda {
bool available(std::string* why_not);
void depth_attention_forward(float* h, float* alpha, const float* sources, const float* query,
                             const float* gain, float eps, int n, int T, int d);
}  // namespace cuda

}  // namespace attnres
