// CUDA depth attention: one thread block per token, one pass over the sources with an online
// softmax. For each source the block reduces its sum of squares and its dot product with w*g
// (warp shuffles, then the warp totals in a fixed order, so every thread holds the same score and
// the same running (max, sum)); every thread owns a strided slice of the (d) output row, rescaled
// and accumulated in place. Scores wait in alpha and become weights at the end, so the number of
// sources is not limited by shared memory.
// Reference: core/model/include/attnres/depth_attention.hpp (depth_attention_one_shot); validated
// by tests/kernels/test_backend_ops.cpp (host entry point, which calls the device one) and by
// tests/engine/test_cuda_forward.cpp (the CUDA engine) on machines with a GPU.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "attnres/error.hpp"
#include "attnres/kernels.hpp"
#include "attnres/kernels_cuda_device.hpp"
#include "reduce.cuh"

namespace attnres::cuda {

namespace {

constexpr int kThreads = 128;  // a multiple of 32 (device::block_sum)

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw Error(std::string("CUDA ") + what + " failed: " + cudaGetErrorString(status));
  }
}

__global__ void __launch_bounds__(kThreads)
    depth_attention_kernel(float* __restrict__ h,            // (T, d)
                           float* __restrict__ alpha,        // (T, n)
                           const float* __restrict__ arena,  // slots of (T, d)
                           std::size_t slot_stride,          // floats between slots
                           const int* __restrict__ slots,    // (n)
                           const float* __restrict__ query,  // (d)
                           const float* __restrict__ gain,   // (d)
                           float eps, int n, int T, int d) {
  __shared__ float scratch[device::kMaxWarps];
  for (int t = blockIdx.x; t < T; t += gridDim.x) {
    const std::size_t row = static_cast<std::size_t>(t) * static_cast<std::size_t>(d);
    float* out = h + row;
    float* weights = alpha + static_cast<std::size_t>(t) * static_cast<std::size_t>(n);
    float running_max = -INFINITY, running_sum = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float* v = arena + static_cast<std::size_t>(slots[i]) * slot_stride + row;
      float squares = 0.0f, dot = 0.0f;
      for (int c = threadIdx.x; c < d; c += blockDim.x) {
        const float x = v[c];
        squares += x * x;
        dot += query[c] * gain[c] * x;
      }
      squares = device::block_sum(squares, scratch);
      dot = device::block_sum(dot, scratch);
      const float score = dot * device::block_inverse_rms(v, d, squares, eps, scratch);
      if (threadIdx.x == 0) weights[i] = score;
      // Identical in every thread: the running max and sum of the online softmax.
      const float new_max = fmaxf(running_max, score);
      const float rescale = i == 0 ? 0.0f : expf(running_max - new_max);
      const float weight = expf(score - new_max);
      running_sum = running_sum * rescale + weight;
      running_max = new_max;
      for (int c = threadIdx.x; c < d; c += blockDim.x) {
        out[c] = (i == 0 ? 0.0f : out[c] * rescale) + weight * v[c];
      }
    }
    const float inverse_sum = 1.0f / running_sum;
    for (int c = threadIdx.x; c < d; c += blockDim.x) out[c] *= inverse_sum;
    __syncthreads();  // thread 0's scores in alpha are visible to the whole block
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      weights[i] = expf(weights[i] - running_max) * inverse_sum;
    }
    __syncthreads();  // the next token's block_sum reuses scratch only after this one is done
  }
}

}  // namespace

bool available(std::string* why_not) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    if (status != cudaSuccess) cudaGetLastError();  // clear the error for later calls
    if (why_not) {
      *why_not = status != cudaSuccess
                     ? std::string("no CUDA device: ") + cudaGetErrorString(status)
                     : "no CUDA device found";
    }
    return false;
  }
  return true;
}

void depth_attention_forward_device(float* h, float* alpha, const float* arena,
                                    std::size_t slot_stride, const int* slots, const float* query,
                                    const float* gain, float eps, int n, int T, int d,
                                    CUstream_st* stream) {
  if (n < 1 || T < 1 || d < 1) {
    throw Error("depth_attention_forward_device: sizes must be positive (n = " + std::to_string(n) +
                ", T = " + std::to_string(T) + ", d = " + std::to_string(d) + ")");
  }
  const unsigned int blocks = static_cast<unsigned int>(T < 65535 * 16 ? T : 65535 * 16);
  depth_attention_kernel<<<blocks, kThreads, 0, stream>>>(h, alpha, arena, slot_stride, slots,
                                                          query, gain, eps, n, T, d);
  check(cudaGetLastError(), "depth attention kernel launch");
}

void depth_attention_forward(float* h, float* alpha, const float* sources, const float* query,
                             const float* gain, float eps, int n, int T, int d) {
  const std::size_t slot = static_cast<std::size_t>(T) * static_cast<std::size_t>(d);
  const std::size_t source_bytes = static_cast<std::size_t>(n) * slot * sizeof(float);
  float *d_h = nullptr, *d_alpha = nullptr, *d_sources = nullptr, *d_query = nullptr,
        *d_gain = nullptr;
  int* d_slots = nullptr;
  auto release = [&] {
    cudaFree(d_h);
    cudaFree(d_alpha);
    cudaFree(d_sources);
    cudaFree(d_query);
    cudaFree(d_gain);
    cudaFree(d_slots);
  };
  try {
    std::vector<int> slots(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) slots[static_cast<std::size_t>(i)] = i;  // sources are contiguous
    check(cudaMalloc(&d_h, slot * sizeof(float)), "cudaMalloc");
    check(cudaMalloc(&d_alpha, static_cast<std::size_t>(T) * n * sizeof(float)), "cudaMalloc");
    check(cudaMalloc(&d_sources, source_bytes), "cudaMalloc");
    check(cudaMalloc(&d_query, d * sizeof(float)), "cudaMalloc");
    check(cudaMalloc(&d_gain, d * sizeof(float)), "cudaMalloc");
    check(cudaMalloc(&d_slots, slots.size() * sizeof(int)), "cudaMalloc");
    check(cudaMemcpy(d_sources, sources, source_bytes, cudaMemcpyHostToDevice), "copy to device");
    check(cudaMemcpy(d_query, query, d * sizeof(float), cudaMemcpyHostToDevice), "copy to device");
    check(cudaMemcpy(d_gain, gain, d * sizeof(float), cudaMemcpyHostToDevice), "copy to device");
    check(cudaMemcpy(d_slots, slots.data(), slots.size() * sizeof(int), cudaMemcpyHostToDevice),
          "copy to device");
    depth_attention_forward_device(d_h, d_alpha, d_sources, slot, d_slots, d_query, d_gain, eps, n,
                                   T, d, nullptr);
    check(cudaMemcpy(h, d_h, slot * sizeof(float), cudaMemcpyDeviceToHost), "copy to host");
    check(cudaMemcpy(alpha, d_alpha, static_cast<std::size_t>(T) * n * sizeof(float),
                     cudaMemcpyDeviceToHost),
          "copy to host");
  } catch (...) {
    release();
    throw;
  }
  release();
}

}  // namespace attnres::cuda
