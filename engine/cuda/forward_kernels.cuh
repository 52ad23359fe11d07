// The CUDA engine's own kernels (forward_kernels.cu), each behind a host launcher that enqueues it
// on `stream` and checks the launch (attnres::Error "CUDA engine: the ... kernel launch failed:
// ..."): the embedding gather, RMSNorm, RoPE (rotate_half), a causal grouped-query attention with
// an online softmax over key tiles (never a T x T matrix), SwiGLU, the residual add, and a
// deterministic sum of squares in double for the RMS traces and finiteness checks. Arguments are
// f32 row-major device pointers, outputs first; the depth read is kernels/cuda's. Internal to the
// engine library; include from .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace attnres::cuda_engine {

// out (T, d) = embed[tokens[t]]; embed (vocab, d), tokens (T).
void embedding_forward(float* out, const float* embed, const int* tokens, int T, int d,
                       cudaStream_t stream);

// out (T, d) = gain * x / sqrt(mean(x^2) + eps) per row of x (T, d); gain (d) (layers.cpp
// rms_norm, tensor.hpp inverse_rms_of_row).
void rms_norm_forward(float* out, const float* x, const float* gain, float eps, int T, int d,
                      cudaStream_t stream);

// RoPE in place on the first `heads` heads (width 2 half) of each row of x (T, stride); tables
// (T, half). Channel i pairs with i + half: x1' = x1 cos - x2 sin, x2' = x2 cos + x1 sin.
void rope_forward(float* x, int stride, const float* cos_table, const float* sin_table, int T,
                  int heads, int half, cudaStream_t stream);

// How the attention kernel tiles the queries: `tile` query rows of one head per block, Q and the
// output accumulator in shared memory when `shared_qo`, `shared_bytes` of shared memory a block.
struct AttentionTiling {
  int tile = 1;
  bool shared_qo = false;
  std::size_t shared_bytes = 0;
};

// The largest tile (32 .. 1) whose shared memory fits the device's per-block limit (at most
// 48 KiB), Q and the output accumulator in shared memory when possible; throws attnres::Error
// when head_dim is too large for any.
AttentionTiling choose_attention_tiling(int head_dim, int device);

// context (T, context_stride): heads * head_dim columns of causal softmax(q k^T / sqrt(hd)) v,
// from qkv (T, qkv_stride) whose rows hold the heads' q, then the kv heads' k, then their v
// (already rotated); query head h reads kv head h / (heads / kv_heads).
void causal_attention_forward(float* context, int context_stride, const float* qkv, int qkv_stride,
                              int T, int heads, int kv_heads, int head_dim,
                              const AttentionTiling& tiling, cudaStream_t stream);

// act (T, F) = silu(gate) * up, gate_up (T, 2F) rows = [gate (F), up (F)].
void swiglu_forward(float* act, const float* gate_up, int T, int F, cudaStream_t stream);

// y (count) += x (count).
void add_forward(float* y, const float* x, std::size_t count, cudaStream_t stream);

// Doubles of scratch sum_squares_forward needs (one partial per block).
constexpr int kStatsBlocks = 256;

// *out = the sum of x[i]^2 over count floats, in double and in a fixed order (as rms_of);
// partials: kStatsBlocks doubles of scratch.
void sum_squares_forward(double* out, const float* x, std::size_t count, double* partials,
                         cudaStream_t stream);

}  // namespace attnres::cuda_engine
