// The CUDA engine's own kernels and their launchers (forward_kernels.cuh), f32, row-major like the
// host tensors. Each kernel is the device version of a step of the readable reference
// (core/model/src/layers.cpp, core/model/src/forward.cpp); the engine (cuda_forward.cu) checks the
// whole pass against that reference (tests/engine/test_cuda_forward.cpp). Launch geometry lives
// here, next to the kernel it fits.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "../../kernels/cuda/reduce.cuh"
#include "attnres/error.hpp"
#include "cuda/cuda_support.hpp"
#include "cuda/forward_kernels.cuh"

namespace attnres::cuda_engine {

namespace {

namespace reduce = attnres::cuda::device;

constexpr int kRowThreads = 256;      // RMSNorm: one block per row
constexpr int kElementThreads = 256;  // element-wise kernels
constexpr int kAttentionThreads = 128;
constexpr int kStatsThreads = 256;

// out (T, d) = embed[tokens[t]].
__global__ void embedding_kernel(float* __restrict__ out, const float* __restrict__ embed,
                                 const int* __restrict__ tokens, int T, int d) {
  const std::size_t count = static_cast<std::size_t>(T) * d;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t t = i / d, c = i % d;
    out[i] = embed[static_cast<std::size_t>(tokens[t]) * d + c];
  }
}

// out = g * x / sqrt(mean(x^2) + eps) per row (layers.cpp rms_norm, tensor.hpp inverse_rms_of_row).
__global__ void __launch_bounds__(kRowThreads)
    rms_norm_kernel(float* __restrict__ out, const float* __restrict__ x,
                    const float* __restrict__ gain, float eps, int T, int d) {
  __shared__ float scratch[reduce::kMaxWarps];
  for (int t = blockIdx.x; t < T; t += gridDim.x) {
    const float* row = x + static_cast<std::size_t>(t) * d;
    float* out_row = out + static_cast<std::size_t>(t) * d;
    float squares = 0.0f;
    for (int c = threadIdx.x; c < d; c += blockDim.x) squares += row[c] * row[c];
    squares = reduce::block_sum(squares, scratch);
    const float inverse = reduce::block_inverse_rms(row, d, squares, eps, scratch);
    for (int c = threadIdx.x; c < d; c += blockDim.x) out_row[c] = row[c] * inverse * gain[c];
  }
}

// RoPE in place on the first `heads` heads of each row of x (row stride `stride`), rotate_half:
// channel i pairs with i + half; x1' = x1 cos - x2 sin, x2' = x2 cos + x1 sin (layers.cpp).
__global__ void rope_kernel(float* __restrict__ x, int stride, const float* __restrict__ cos_table,
                            const float* __restrict__ sin_table, int T, int heads, int half) {
  const std::size_t count = static_cast<std::size_t>(T) * heads * half;
  for (std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t i = e % half;
    const std::size_t rest = e / half;
    const std::size_t head = rest % heads;
    const std::size_t t = rest / heads;
    float* pair = x + t * stride + head * 2 * half;
    const float c = cos_table[t * half + i], s = sin_table[t * half + i];
    const float x1 = pair[i], x2 = pair[i + half];
    pair[i] = x1 * c - x2 * s;
    pair[i + half] = x2 * c + x1 * s;
  }
}

// Causal grouped-query attention, FlashAttention style: a block takes `tile` query rows of one
// head and walks the key tiles up to its last row, keeping per row the running max and sum of an
// online softmax and the unnormalised output; only a (tile x tile) block of scores exists at a
// time. K and V tiles live in shared memory (rows padded to hd + 1 floats against bank
// conflicts); Q and the output accumulator too when they fit (shared_qo), else they are read and
// accumulated in global memory (the block owns its rows of the context). qkv rows hold the
// heads' q, then the kv heads' k, then their v (already rotated); context (T, heads * hd).
__global__ void __launch_bounds__(kAttentionThreads)
    causal_attention_kernel(float* __restrict__ context, int context_stride,
                            const float* __restrict__ qkv, int qkv_stride, int T, int heads,
                            int kv_heads, int head_dim, int tile, int shared_qo, float scale) {
  extern __shared__ float smem[];
  const int head = static_cast<int>(blockIdx.y);
  const int kv_head = head / (heads / kv_heads);
  const int q0 = static_cast<int>(blockIdx.x) * tile;
  if (q0 >= T) return;  // uniform over the block
  const int rows = min(tile, T - q0);
  const int ld = head_dim + 1;
  const int tid = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  float* keys = smem;                    // (tile, ld)
  float* values = keys + tile * ld;      // (tile, ld)
  float* probs = values + tile * ld;     // (tile, tile): scores, then exp(score - max)
  float* row_max = probs + tile * tile;  // (tile)
  float* row_sum = row_max + tile;       // (tile)
  float* row_scale = row_sum + tile;     // (tile)

  float* out = context + static_cast<std::size_t>(q0) * context_stride +
               static_cast<std::size_t>(head) * head_dim;
  const float* q_global =
      qkv + static_cast<std::size_t>(q0) * qkv_stride + static_cast<std::size_t>(head) * head_dim;
  const float* q_base;
  float* o_base;
  std::size_t q_ld, o_ld;
  if (shared_qo) {
    float* q_shared = row_scale + tile;      // (tile, ld)
    float* o_shared = q_shared + tile * ld;  // (tile, ld)
    for (int e = tid; e < rows * head_dim; e += threads) {
      const int i = e / head_dim, c = e % head_dim;
      q_shared[i * ld + c] = q_global[static_cast<std::size_t>(i) * qkv_stride + c];
      o_shared[i * ld + c] = 0.0f;
    }
    q_base = q_shared;
    q_ld = static_cast<std::size_t>(ld);
    o_base = o_shared;
    o_ld = static_cast<std::size_t>(ld);
  } else {
    for (int e = tid; e < rows * head_dim; e += threads) {
      const int i = e / head_dim, c = e % head_dim;
      out[static_cast<std::size_t>(i) * context_stride + c] = 0.0f;
    }
    q_base = q_global;
    q_ld = static_cast<std::size_t>(qkv_stride);
    o_base = out;
    o_ld = static_cast<std::size_t>(context_stride);
  }
  for (int i = tid; i < tile; i += threads) {
    row_max[i] = -INFINITY;
    row_sum[i] = 0.0f;
    row_scale[i] = 0.0f;
  }
  __syncthreads();

  const std::size_t k_column = static_cast<std::size_t>(heads + kv_head) * head_dim;
  const std::size_t v_column = static_cast<std::size_t>(heads + kv_heads + kv_head) * head_dim;
  const int key_end = q0 + rows;  // keys 0 .. q0 + rows - 1 are visible to some row here
  for (int k0 = 0; k0 < key_end; k0 += tile) {
    // k0 <= q0 (both multiples of tile, k0 < q0 + tile), so key k0 is visible to every row.
    const int keys_here = min(tile, key_end - k0);
    for (int e = tid; e < keys_here * head_dim; e += threads) {
      const int j = e / head_dim, c = e % head_dim;
      const float* source = qkv + static_cast<std::size_t>(k0 + j) * qkv_stride;
      keys[j * ld + c] = source[k_column + c];
      values[j * ld + c] = source[v_column + c];
    }
    __syncthreads();
    for (int e = tid; e < rows * keys_here; e += threads) {
      const int i = e / keys_here, j = e % keys_here;
      float score = -INFINITY;  // causal mask
      if (k0 + j <= q0 + i) {
        const float* q = q_base + static_cast<std::size_t>(i) * q_ld;
        const float* k = keys + j * ld;
        float dot = 0.0f;
        for (int c = 0; c < head_dim; ++c) dot += q[c] * k[c];
        score = dot * scale;
      }
      probs[i * tile + j] = score;
    }
    __syncthreads();
    for (int i = tid; i < rows; i += threads) {
      float* p = probs + i * tile;
      float new_max = row_max[i];
      for (int j = 0; j < keys_here; ++j) new_max = fmaxf(new_max, p[j]);
      const float rescale = expf(row_max[i] - new_max);  // 0 on the first tile (max was -inf)
      float sum = 0.0f;
      for (int j = 0; j < keys_here; ++j) {
        const float w = expf(p[j] - new_max);  // 0 where masked
        p[j] = w;
        sum += w;
      }
      row_sum[i] = row_sum[i] * rescale + sum;
      row_max[i] = new_max;
      row_scale[i] = rescale;
    }
    __syncthreads();
    for (int e = tid; e < rows * head_dim; e += threads) {
      const int i = e / head_dim, c = e % head_dim;
      const float* p = probs + i * tile;
      float* o = o_base + static_cast<std::size_t>(i) * o_ld + c;
      float accumulator = *o * row_scale[i];
      for (int j = 0; j < keys_here; ++j) accumulator += p[j] * values[j * ld + c];
      *o = accumulator;
    }
    __syncthreads();
  }
  for (int e = tid; e < rows * head_dim; e += threads) {
    const int i = e / head_dim, c = e % head_dim;
    out[static_cast<std::size_t>(i) * context_stride + c] =
        o_base[static_cast<std::size_t>(i) * o_ld + c] / row_sum[i];
  }
}

// act (T, F) = silu(gate) * up, gate_up rows = [gate (F), up (F)].
__global__ void swiglu_kernel(float* __restrict__ act, const float* __restrict__ gate_up, int T,
                              int F) {
  const std::size_t count = static_cast<std::size_t>(T) * F;
  for (std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t t = e / F, j = e % F;
    const float gate = gate_up[t * 2 * F + j];
    const float up = gate_up[t * 2 * F + F + j];
    act[e] = gate / (1.0f + expf(-gate)) * up;
  }
}

// y += x.
__global__ void add_kernel(float* __restrict__ y, const float* __restrict__ x, std::size_t count) {
  for (std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    y[e] += x[e];
  }
}

__device__ __forceinline__ double warp_sum_double(double value) {
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// Sum of squares in double (as rms_of), step 1: one partial per block, in a fixed order.
__global__ void __launch_bounds__(kStatsThreads)
    sum_squares_kernel(const float* __restrict__ x, std::size_t count,
                       double* __restrict__ partials) {
  __shared__ double warp_totals[kStatsThreads / 32];
  double accumulator = 0.0;
  for (std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const double value = static_cast<double>(x[e]);
    accumulator += value * value;
  }
  accumulator = warp_sum_double(accumulator);
  if (threadIdx.x % 32 == 0) warp_totals[threadIdx.x / 32] = accumulator;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int w = 0; w < kStatsThreads / 32; ++w) total += warp_totals[w];
    partials[blockIdx.x] = total;
  }
}

// Step 2: one warp adds the partials into *out.
__global__ void finish_sum_kernel(const double* __restrict__ partials, int count,
                                  double* __restrict__ out) {
  double accumulator = 0.0;
  for (int i = static_cast<int>(threadIdx.x); i < count; i += 32) accumulator += partials[i];
  accumulator = warp_sum_double(accumulator);
  if (threadIdx.x == 0) *out = accumulator;
}

}  // namespace

void embedding_forward(float* out, const float* embed, const int* tokens, int T, int d,
                       cudaStream_t stream) {
  const std::size_t count = static_cast<std::size_t>(T) * static_cast<std::size_t>(d);
  embedding_kernel<<<grid_for(count, kElementThreads), kElementThreads, 0, stream>>>(out, embed,
                                                                                     tokens, T, d);
  check(cudaGetLastError(), "the embedding kernel launch");
}

void rms_norm_forward(float* out, const float* x, const float* gain, float eps, int T, int d,
                      cudaStream_t stream) {
  const auto blocks = static_cast<unsigned int>(std::min(T, 1 << 20));
  rms_norm_kernel<<<blocks, kRowThreads, 0, stream>>>(out, x, gain, eps, T, d);
  check(cudaGetLastError(), "the RMSNorm kernel launch");
}

void rope_forward(float* x, int stride, const float* cos_table, const float* sin_table, int T,
                  int heads, int half, cudaStream_t stream) {
  const std::size_t count = static_cast<std::size_t>(T) * heads * half;
  rope_kernel<<<grid_for(count, kElementThreads), kElementThreads, 0, stream>>>(
      x, stride, cos_table, sin_table, T, heads, half);
  check(cudaGetLastError(), "the RoPE kernel launch");
}

AttentionTiling choose_attention_tiling(int head_dim, int device) {
  int shared_limit = 0;
  check(cudaDeviceGetAttribute(&shared_limit, cudaDevAttrMaxSharedMemoryPerBlock, device),
        "reading the shared memory per block");
  const std::size_t budget = static_cast<std::size_t>(std::min(shared_limit, 48 * 1024));
  // The kernel's shared memory: K and V tiles, the scores, three per-row vectors, and Q and the
  // output accumulator when qo.
  auto shared_bytes = [&](int tile, bool qo) {
    const std::size_t ld = static_cast<std::size_t>(head_dim) + 1;
    const std::size_t t = static_cast<std::size_t>(tile);
    return (2 * t * ld + t * t + 3 * t + (qo ? 2 * t * ld : 0)) * sizeof(float);
  };
  for (bool qo : {true, false}) {
    for (int tile = 32; tile >= 1; tile /= 2) {
      if (shared_bytes(tile, qo) <= budget)
        return AttentionTiling{tile, qo, shared_bytes(tile, qo)};
    }
  }
  throw Error("CUDA engine: head_dim " + std::to_string(head_dim) +
              " is too large for the attention kernel's shared memory (" + std::to_string(budget) +
              " bytes)");
}

void causal_attention_forward(float* context, int context_stride, const float* qkv, int qkv_stride,
                              int T, int heads, int kv_heads, int head_dim,
                              const AttentionTiling& tiling, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned int>((T + tiling.tile - 1) / tiling.tile),
                  static_cast<unsigned int>(heads));
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  causal_attention_kernel<<<grid, kAttentionThreads, tiling.shared_bytes, stream>>>(
      context, context_stride, qkv, qkv_stride, T, heads, kv_heads, head_dim, tiling.tile,
      tiling.shared_qo ? 1 : 0, scale);
  check(cudaGetLastError(), "the attention kernel launch");
}

void swiglu_forward(float* act, const float* gate_up, int T, int F, cudaStream_t stream) {
  const std::size_t count = static_cast<std::size_t>(T) * F;
  swiglu_kernel<<<grid_for(count, kElementThreads), kElementThreads, 0, stream>>>(act, gate_up, T,
                                                                                  F);
  check(cudaGetLastError(), "the SwiGLU kernel launch");
}

void add_forward(float* y, const float* x, std::size_t count, cudaStream_t stream) {
  add_kernel<<<grid_for(count, kElementThreads), kElementThreads, 0, stream>>>(y, x, count);
  check(cudaGetLastError(), "the residual add kernel launch");
}

void sum_squares_forward(double* out, const float* x, std::size_t count, double* partials,
                         cudaStream_t stream) {
  const unsigned int blocks = std::min<unsigned int>(grid_for(count, kStatsThreads), kStatsBlocks);
  sum_squares_kernel<<<blocks, kStatsThreads, 0, stream>>>(x, count, partials);
  check(cudaGetLastError(), "the statistics kernel launch");
  finish_sum_kernel<<<1, 32, 0, stream>>>(partials, static_cast<int>(blocks), out);
  check(cudaGetLastError(), "the statistics kernel launch");
}

}  // namespace attnres::cuda_engine
