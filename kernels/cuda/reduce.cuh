// Block-wide reductions and the per-row inverse RMS shared by the CUDA kernels (depth reads here,
// RMSNorm in engine/cuda/forward_kernels.cu). Device code only; include from .cu files.
//
// Every thread of the block gets the same result: warps reduce with an xor butterfly (identical in
// every lane), then every thread adds the warp totals in the same order. Deterministic for a
// given block size. blockDim.x must be a multiple of 32 and at most 1024, and every thread of the
// block must call (they synchronise).
#pragma once

#include <cuda_runtime.h>

#include <cmath>

namespace attnres::cuda::device {

constexpr int kMaxWarps = 32;

__device__ __forceinline__ float warp_sum(float value) {
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

__device__ __forceinline__ float warp_max(float value) {
  for (int offset = 16; offset > 0; offset /= 2) {
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

// scratch: kMaxWarps floats of shared memory, reused by every call.
__device__ __forceinline__ float block_sum(float value, float* scratch) {
  value = warp_sum(value);
  __syncthreads();  // the previous call's readers are done with scratch
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = value;
  __syncthreads();
  float total = 0.0f;
  const int warps = static_cast<int>(blockDim.x / 32);
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}

__device__ __forceinline__ float block_max(float value, float* scratch) {
  value = warp_max(value);
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = value;
  __syncthreads();
  float total = scratch[0];
  const int warps = static_cast<int>(blockDim.x / 32);
  for (int w = 1; w < warps; ++w) total = fmaxf(total, scratch[w]);
  return total;
}

// 1 / sqrt(mean(x^2) + eps) of the row x (d values) whose sum of squares is `squares`: the rule of
// inverse_rms_of_row (core/model/include/attnres/tensor.hpp), including its rescaling of a row
// whose squares overflow float. The branch depends only on block-uniform values.
__device__ __forceinline__ float block_inverse_rms(const float* x, int d, float squares, float eps,
                                                   float* scratch) {
  const float mean_square = squares / static_cast<float>(d);
  if (isfinite(mean_square)) return 1.0f / sqrtf(mean_square + eps);
  float largest = 0.0f;
  for (int c = threadIdx.x; c < d; c += blockDim.x) largest = fmaxf(largest, fabsf(x[c]));
  largest = block_max(largest, scratch);
  if (!isfinite(largest)) return 1.0f / sqrtf(mean_square + eps);  // a real Inf/NaN
  float scaled = 0.0f;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    const float s = x[c] / largest;
    scaled += s * s;
  }
  scaled = block_sum(scaled, scratch) / static_cast<float>(d);
  return 1.0f / (largest * sqrtf(scaled + eps / largest / largest));
}

}  // namespace attnres::cuda::device
