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

namespace attnres {

enum class KernelBackend { cpu, cuda };

std::string to_string(KernelBackend backend);
std::vector<KernelBackend> all_kernel_backends();
// False, with the reason in *why_not, when the backend cannot run here (not built, no device).
bool kernel_backend_available(KernelBackend backend, std::string* why_not);

// One depth-attention read over n sources for T tokens (SPEC §2.2), float32, host pointers:
//   h      (T, d) out        alpha   (T, n) out
//   sources (n, T, d) in     query, gain (d) in: pseudo-query w and KeyNorm gain g
// h[t] = sum_i softmax_i(w . (g * v_i[t] / sqrt(mean(v_i[t]^2) + eps))) v_i[t].
// Throws attnres::Error if the backend is unavailable or the sizes are not positive.
void depth_attention_forward(KernelBackend backend, float* h, float* alpha, const float* sources,
                             const float* query, const float* gain, float eps, int n, int T, int d);

namespace cpu {
void depth_attention_forward(float* h, float* alpha, const float* sources, const float* query,
                             const float* gain, float eps, int n, int T, int d);
}  // namespace cpu

namespace cuda {
bool available(std::string* why_not);
void depth_attention_forward(float* h, float* alpha, const float* sources, const float* query,
                             const float* gain, float eps, int n, int T, int d);
}  // namespace cuda

}  // namespace attnres
