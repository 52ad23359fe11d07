// CUDA depth attention: one thread block per token. Each warp-strided pass over d computes a
// source's sum of squares and its dot product with w*g (block reduction in shared memory); thread
// 0 keeps the online-softmax state; every thread owns a slice of the (d) output accumulator.
// Reference: core/include/attnres/depth_attention.hpp (depth_attention_one_shot); validated by
// tests/kernels/test_backend_ops.cpp on machines with a GPU.
#include <cuda_runtime.h>

#include <string>

#include "attnres/error.hpp"
#include "attnres/kernels.hpp"

namespace attnres::cuda {

namespace {

constexpr int kThreads = 128;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw Error(std::string("CUDA ") + what + " failed: " + cudaGetErrorString(status));
  }
}

__global__ void depth_attention_kernel(float* h,              // (T, d)
                                       float* alpha,          // (T, n)
                                       const float* sources,  // (n, T, d)
                                       const float* query,    // (d)
                                       const float* gain,     // (d)
                                       float eps, int n, int T, int d) {
  extern __shared__ float shared[];  // scores (n), then 2 * kThreads reduction slots
  float* scores = shared;
  float* reduce_squares = shared + n;
  float* reduce_dots = reduce_squares + kThreads;
  __shared__ float weight_shared, rescale_shared, max_shared, sum_shared;
  const int t = blockIdx.x;
  const int lane = threadIdx.x;
  float* out = h + static_cast<size_t>(t) * d;
  for (int c = lane; c < d; c += blockDim.x) out[c] = 0.0f;
  if (lane == 0) {
    max_shared = -INFINITY;
    sum_shared = 0.0f;
  }
  __syncthreads();
  for (int i = 0; i < n; ++i) {
    const float* v = sources + (static_cast<size_t>(i) * T + t) * d;
    float squares = 0.0f, dot = 0.0f;
    for (int c = lane; c < d; c += blockDim.x) {
      squares += v[c] * v[c];
      dot += query[c] * gain[c] * v[c];
    }
    reduce_squares[lane] = squares;
    reduce_dots[lane] = dot;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
      if (lane < stride) {
        reduce_squares[lane] += reduce_squares[lane + stride];
        reduce_dots[lane] += reduce_dots[lane + stride];
      }
      __syncthreads();
    }
    if (lane == 0) {
      const float score = reduce_dots[0] * rsqrtf(reduce_squares[0] / d + eps);
      scores[i] = score;
      const float new_max = fmaxf(max_shared, score);
      rescale_shared = __expf(max_shared - new_max);
      weight_shared = __expf(score - new_max);
      sum_shared = sum_shared * rescale_shared + weight_shared;
      max_shared = new_max;
    }
    __syncthreads();
    for (int c = lane; c < d; c += blockDim.x) {
      out[c] = out[c] * rescale_shared + weight_shared * v[c];
    }
    __syncthreads();
  }
  const float inverse_sum = 1.0f / sum_shared;
  for (int c = lane; c < d; c += blockDim.x) out[c] *= inverse_sum;
  for (int i = lane; i < n; i += blockDim.x) {
    alpha[static_cast<size_t>(t) * n + i] = __expf(scores[i] - max_shared) * inverse_sum;
  }
}

}  // namespace

bool available(std::string* why_not) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    if (why_not) {
      *why_not = status != cudaSuccess ? std::string("no CUDA device: ") + cudaGetErrorString(status)
                                       : "no CUDA device found";
    }
    return false;
  }
  return true;
}

void depth_attention_forward(float* h, float* alpha, const float* sources, const float* query,
                             const float* gain, float eps, int n, int T, int d) {
  const size_t source_bytes = static_cast<size_t>(n) * T * d * sizeof(float);
  float *d_h = nullptr, *d_alpha = nullptr, *d_sources = nullptr, *d_query = nullptr, *d_gain = nullptr;
  auto release = [&] {
    cudaFree(d_h);
    cudaFree(d_alpha);
    cudaFree(d_sources);
    cudaFree(d_query);
    cudaFree(d_gain);
  };
  try {
    check(cudaMalloc(&d_h, static_cast<size_t>(T) * d * sizeof(float)), "cudaMalloc");
    check(cudaMalloc(&d_alpha, static_cast<size_t>(T) * n * sizeof(float)), "cudaMalloc");
    check(cudaMalloc(&d_sources, source_bytes), "cudaMalloc");
    check(cudaMalloc(&d_query, d * sizeof(float)), "cudaMalloc");
    check(cudaMalloc(&d_gain, d * sizeof(float)), "cudaMalloc");
    check(cudaMemcpy(d_sources, sources, source_bytes, cudaMemcpyHostToDevice), "copy to device");
    check(cudaMemcpy(d_query, query, d * sizeof(float), cudaMemcpyHostToDevice), "copy to device");
    check(cudaMemcpy(d_gain, gain, d * sizeof(float), cudaMemcpyHostToDevice), "copy to device");
    const size_t shared_bytes = (static_cast<size_t>(n) + 2 * kThreads) * sizeof(float);
    depth_attention_kernel<<<T, kThreads, shared_bytes>>>(d_h, d_alpha, d_sources, d_query, d_gain,
                                                          eps, n, T, d);
    check(cudaGetLastError(), "kernel launch");
    check(cudaMemcpy(h, d_h, static_cast<size_t>(T) * d * sizeof(float), cudaMemcpyDeviceToHost),
          "copy to host");
    check(cudaMemcpy(alpha, d_alpha, static_cast<size_t>(T) * n * sizeof(float),
                     cudaMemcpyDeviceToHost),
          "copy to host");
  } catch (...) {
    release();
    throw;
  }
  release();
}

}  // namespace attnres::cuda
