// The whole model forward on a CUDA GPU, f32 (docs/engines.md). Same contract, checks, errors and
// trace as the readable reference (core/src/forward.cpp), through the shared steps of
// attnres/forward_steps.hpp.
//
// Memory (all on the device, f32, row-major like the host tensors):
//   weights   one allocation, uploaded once by the constructor; per layer the q/k/v projections are
//             stacked into one ((H + 2 H_kv) hd, d) matrix and gate/up into one (2F, d) matrix,
//             so each is a single GEMM
//   arena     the depth-read history, one (T, d) slot per source value: Full AttnRes slot i = v_i
//             (i = 0 .. L, written in place by the sublayer's last GEMM); Block AttnRes slot 0 =
//             b_0 (the embedding), slot n = block n (the running partial sum while the block is
//             open, its summary once complete: "partial" and "b_n" are the same slot), slot N + 1 =
//             the zero placeholder's zeros when that option is on
//   alpha     every read's weights (T, sources), copied back once at the end
//   workspace h, the RMS-normalised input, v, qkv, the attention context, gate/up, SwiGLU output,
//             logits: grown on demand, kept between calls
// Kernels: the fused depth read of kernels/cuda (device-pointer entry point), cuBLAS SGEMM for
// every projection (FP32, no TF32), RMSNorm, RoPE (rotate_half), a causal grouped-query attention
// kernel with an online softmax over key tiles (never a T x T matrix), SwiGLU, the embedding
// gather, and a deterministic sum of squares (in double) for the RMS traces and finiteness checks.
//
// Two-phase reads are a scheduling optimisation with the same results (docs/math.md); on the GPU
// every read runs one-shot over the arena with the fused kernel (one pass, online softmax), and
// the trace's two_phase flag still reports ForwardOptions::two_phase (start_trace).
//
// Checks: after each sublayer the host waits for the stream and reads back two sums of squares
// (h and v); a non-finite sum means a non-finite entry, and only then is that tensor copied back
// and passed to attnres::require_finite, so the message (what, token, channel) is the reference's.
//
// Build: the host code of this file must be compiled with the same -march as the C++ files.
// Eigen's allocation scheme depends on the vector width (16 bytes: malloc; 32 or 64 bytes: its own
// aligned malloc with the offset stored before the block), and ForwardResult's matrices are
// allocated here and freed by the caller (and make_rope_table's the other way round).

// Eigen is used on the host only here: no __host__ __device__ annotations.
#define EIGEN_NO_CUDA 1

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../../kernels/cuda/reduce.cuh"
#include "attnres/error.hpp"
#include "attnres/forward_steps.hpp"
#include "attnres/kernels_cuda_device.hpp"
#include "attnres/layers.hpp"
#include "cuda/cuda_forward.hpp"
#include "src/fast_pass.hpp"

namespace attnres::cuda_engine {

namespace {

namespace reduce = attnres::cuda::device;

// ---------------------------------------------------------------------------------------------
// Errors

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear a non-sticky error so that the engine object stays usable
    throw Error(std::string("CUDA engine: ") + what + " failed: " + cudaGetErrorString(status));
  }
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(std::string("CUDA engine: ") + what + " failed: " + cublasGetStatusString(status));
  }
}

std::string mib(std::size_t bytes) {
  return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB";
}

// A device allocation that only grows (contents are not kept when it does).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void reserve(std::size_t bytes, const char* what) {
    if (bytes <= bytes_) return;
    if (ptr_) {
      cudaFree(ptr_);  // waits for the work that may still use it
      ptr_ = nullptr;
      bytes_ = 0;
    }
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, bytes);
    if (status != cudaSuccess) {
      cudaGetLastError();
      throw Error("CUDA engine: cannot allocate " + mib(bytes) + " of GPU memory for " + what +
                  ": " + cudaGetErrorString(status));
    }
    ptr_ = p;
    bytes_ = bytes;
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

std::size_t product(std::size_t a, std::size_t b) {
  return a * b;
}

// Grid for a grid-stride loop over `count` elements.
unsigned int grid_for(std::size_t count, int threads) {
  const std::size_t blocks =
      (count + static_cast<std::size_t>(threads) - 1) / static_cast<std::size_t>(threads);
  return static_cast<unsigned int>(std::clamp<std::size_t>(blocks, 1, std::size_t{1} << 20));
}

// ---------------------------------------------------------------------------------------------
// Kernels

constexpr int kRowThreads = 256;      // RMSNorm: one block per row
constexpr int kElementThreads = 256;  // element-wise kernels
constexpr int kAttentionThreads = 128;
constexpr int kStatsThreads = 256;
constexpr int kStatsBlocks = 256;

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

// ---------------------------------------------------------------------------------------------
// Host side

struct DeviceLayer {
  const float* input_norm = nullptr;  // (d)
  const float* qkv = nullptr;         // ((H + 2 H_kv) hd, d)
  const float* o = nullptr;           // (d, H hd)
  const float* post_norm = nullptr;   // (d)
  const float* gate_up = nullptr;     // (2F, d)
  const float* down = nullptr;        // (d, F)
};

struct DeviceRead {
  const float* query = nullptr;  // (d) w
  const float* gain = nullptr;   // (d) g
};

template <typename Tensor>
void expect_shape(const Tensor& x, long rows, long cols, const std::string& name) {
  if (static_cast<long>(x.rows()) != rows || static_cast<long>(x.cols()) != cols) {
    throw Error("CUDA engine: tensor " + name + " is (" + std::to_string(x.rows()) + ", " +
                std::to_string(x.cols()) + "), expected (" + std::to_string(rows) + ", " +
                std::to_string(cols) + ")");
  }
}

}  // namespace

bool available(std::string* why_not) {
  auto fail = [&](const std::string& why) {
    if (why_not) *why_not = "no CUDA device: " + why;
    return false;
  };
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return fail(cudaGetErrorString(status));
  }
  if (count == 0) return fail("the CUDA runtime found none");
  int device = 0, major = 0, minor = 0;
  status = cudaGetDevice(&device);
  if (status == cudaSuccess)
    status = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (status == cudaSuccess)
    status = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return fail(cudaGetErrorString(status));
  }
  if (major * 10 + minor < 75) {
    return fail("device " + std::to_string(device) + " has compute capability " +
                std::to_string(major) + "." + std::to_string(minor) +
                "; this build needs 7.5 or newer");
  }
  return true;
}

struct CudaForward::Impl {
  ModelConfig config;
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;

  // Sizes.
  int d = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0, L = 0;
  int qkv_width = 0, context_width = 0;
  // Attention tiling (chosen once from head_dim and the shared memory per block).
  int attention_tile = 1;
  bool attention_shared_qo = false;
  std::size_t attention_shared_bytes = 0;

  // Weights.
  DeviceBuffer weights;
  const float* embed = nullptr;       // (vocab, d)
  const float* final_norm = nullptr;  // (d)
  const float* lm_head = nullptr;     // (vocab, d)
  std::vector<DeviceLayer> layers;
  std::vector<DeviceRead> reads;  // r = 0 .. L

  // Workspaces (grown on demand).
  DeviceBuffer tokens, rope_cos, rope_sin, arena, h, normed, v, qkv, context, gate_up, act, logits,
      alpha, slots, stats_partials, stats;
  int rope_tokens = 0;
  std::vector<double> stats_host;

  ~Impl() {
    cudaSetDevice(device);
    if (stream) cudaStreamSynchronize(stream);
    if (cublas) cublasDestroy(cublas);
    if (stream) cudaStreamDestroy(stream);
    cudaGetLastError();
  }

  void init(const ModelWeights<float>& model);
  void upload(const float* host, std::size_t count, const float* device_ptr);
  void gemm(const float* x, int T, int in, const float* weight, int out, float* y);
  void rms_norm(float* out, const float* x, const float* gain, int T);
  void sum_squares(const float* x, std::size_t count, int slot);
  void fetch_stats(int first, int count);
  double checked_rms(const float* x, int T, int slot, const std::string& what);
  void sublayer(int s, const float* input, float* output, int T);
  void prepare(int T, std::size_t alpha_count, std::size_t slot_count, int arena_slots,
               int stats_slots);
  ForwardResult<float> run(const std::vector<int>& tokens, const ForwardOptions& options);
};

void CudaForward::Impl::upload(const float* host, std::size_t count, const float* device_ptr) {
  // On the engine's stream (a plain cudaMemcpy from pageable memory may return before the data
  // lands, and the legacy stream does not order work on a non-blocking stream); init waits once.
  check(cudaMemcpyAsync(const_cast<float*>(device_ptr), host, count * sizeof(float),
                        cudaMemcpyHostToDevice, stream),
        "copying the weights to the GPU");
}

void CudaForward::Impl::init(const ModelWeights<float>& model) {
  config = model.config;
  d = config.hidden_size;
  heads = config.num_attention_heads;
  kv_heads = config.num_key_value_heads;
  ffn = config.intermediate_size;
  vocab = config.vocab_size;
  L = config.sublayers();
  if (d < 1 || heads < 1 || kv_heads < 1 || ffn < 1 || vocab < 1 || config.num_hidden_layers < 1 ||
      d % heads != 0 || heads % kv_heads != 0 || (d / heads) % 2 != 0) {
    throw Error("CUDA engine: the model's shape is not valid (d = " + std::to_string(d) +
                ", heads = " + std::to_string(heads) + ", kv heads = " + std::to_string(kv_heads) +
                ", ffn = " + std::to_string(ffn) + ", vocab = " + std::to_string(vocab) +
                ", layers = " + std::to_string(config.num_hidden_layers) + ")");
  }
  if (heads > 65535) throw Error("CUDA engine: at most 65535 attention heads are supported");
  head_dim = config.head_dim();
  qkv_width = (heads + 2 * kv_heads) * head_dim;
  context_width = heads * head_dim;
  if (static_cast<long>(model.layers.size()) != config.num_hidden_layers) {
    throw Error("CUDA engine: the model has " + std::to_string(model.layers.size()) +
                " layers, its config " + std::to_string(config.num_hidden_layers));
  }
  expect_shape(model.embed_tokens, vocab, d, "model.embed_tokens");
  expect_shape(model.lm_head, vocab, d, "lm_head");
  expect_shape(model.norm, d, 1, "model.norm");
  for (int r = 0; r <= L; ++r) {
    expect_shape(model.depth_read(r).query, d, 1, "the pseudo-query of read " + std::to_string(r));
    expect_shape(model.depth_read(r).key_norm_gain, d, 1,
                 "the key-norm gain of read " + std::to_string(r));
  }
  for (std::size_t l = 0; l < model.layers.size(); ++l) {
    const auto& layer = model.layers[l];
    const std::string name = "layer " + std::to_string(l) + " ";
    expect_shape(layer.input_layernorm, d, 1, name + "input_layernorm");
    expect_shape(layer.q_proj, heads * head_dim, d, name + "q_proj");
    expect_shape(layer.k_proj, kv_heads * head_dim, d, name + "k_proj");
    expect_shape(layer.v_proj, kv_heads * head_dim, d, name + "v_proj");
    expect_shape(layer.o_proj, d, heads * head_dim, name + "o_proj");
    expect_shape(layer.post_attention_layernorm, d, 1, name + "post_attention_layernorm");
    expect_shape(layer.gate_proj, ffn, d, name + "gate_proj");
    expect_shape(layer.up_proj, ffn, d, name + "up_proj");
    expect_shape(layer.down_proj, d, ffn, name + "down_proj");
  }

  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "creating a CUDA stream");
  check(cublasCreate(&cublas), "creating the cuBLAS handle");
  check(cublasSetStream(cublas, stream), "cublasSetStream");
  // FP32 GEMMs (no TF32): the engine is checked against the f32 reference at 1e-4.
  check(cublasSetMathMode(cublas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");

  // Attention tiles: the largest tile (32 .. 1) whose shared memory fits, Q and the output
  // accumulator in shared memory when possible.
  int shared_limit = 0;
  check(cudaDeviceGetAttribute(&shared_limit, cudaDevAttrMaxSharedMemoryPerBlock, device),
        "reading the shared memory per block");
  const std::size_t budget = static_cast<std::size_t>(std::min(shared_limit, 48 * 1024));
  auto shared_bytes = [&](int tile, bool qo) {
    const std::size_t ld = static_cast<std::size_t>(head_dim) + 1;
    const std::size_t t = static_cast<std::size_t>(tile);
    return (2 * t * ld + t * t + 3 * t + (qo ? 2 * t * ld : 0)) * sizeof(float);
  };
  bool found = false;
  for (bool qo : {true, false}) {
    for (int tile = 32; tile >= 1 && !found; tile /= 2) {
      if (shared_bytes(tile, qo) <= budget) {
        attention_tile = tile;
        attention_shared_qo = qo;
        attention_shared_bytes = shared_bytes(tile, qo);
        found = true;
      }
    }
    if (found) break;
  }
  if (!found) {
    throw Error("CUDA engine: head_dim " + std::to_string(head_dim) +
                " is too large for the attention kernel's shared memory (" +
                std::to_string(budget) + " bytes)");
  }

  // Weights: one allocation, each tensor aligned to 256 bytes.
  std::size_t total = 0;
  auto place = [&](std::size_t count) {
    const std::size_t offset = total;
    total += (count + 63) / 64 * 64;
    return offset;
  };
  const std::size_t D = static_cast<std::size_t>(d);
  const std::size_t embed_at = place(product(static_cast<std::size_t>(vocab), D));
  const std::size_t norm_at = place(D);
  const std::size_t head_at = place(product(static_cast<std::size_t>(vocab), D));
  struct LayerOffsets {
    std::size_t input_norm, qkv, o, post_norm, gate_up, down;
  };
  std::vector<LayerOffsets> layer_at(model.layers.size());
  for (auto& at : layer_at) {
    at.input_norm = place(D);
    at.qkv = place(product(static_cast<std::size_t>(qkv_width), D));
    at.o = place(product(D, static_cast<std::size_t>(context_width)));
    at.post_norm = place(D);
    at.gate_up = place(product(2 * static_cast<std::size_t>(ffn), D));
    at.down = place(product(D, static_cast<std::size_t>(ffn)));
  }
  std::vector<std::size_t> read_at(static_cast<std::size_t>(L + 1));
  for (auto& at : read_at) at = place(2 * D);  // query, then gain
  weights.reserve(total * sizeof(float), "the model weights");
  const float* base = weights.as<float>();

  embed = base + embed_at;
  final_norm = base + norm_at;
  lm_head = base + head_at;
  upload(model.embed_tokens.data(), static_cast<std::size_t>(model.embed_tokens.size()), embed);
  upload(model.norm.data(), D, final_norm);
  upload(model.lm_head.data(), static_cast<std::size_t>(model.lm_head.size()), lm_head);
  layers.resize(model.layers.size());
  for (std::size_t l = 0; l < model.layers.size(); ++l) {
    const auto& layer = model.layers[l];
    const auto& at = layer_at[l];
    DeviceLayer& dev = layers[l];
    dev.input_norm = base + at.input_norm;
    dev.qkv = base + at.qkv;
    dev.o = base + at.o;
    dev.post_norm = base + at.post_norm;
    dev.gate_up = base + at.gate_up;
    dev.down = base + at.down;
    upload(layer.input_layernorm.data(), D, dev.input_norm);
    const auto q_size = static_cast<std::size_t>(layer.q_proj.size());
    const auto k_size = static_cast<std::size_t>(layer.k_proj.size());
    upload(layer.q_proj.data(), q_size, dev.qkv);  // rows stacked: q, k, v (row-major (out, in))
    upload(layer.k_proj.data(), k_size, dev.qkv + q_size);
    upload(layer.v_proj.data(), static_cast<std::size_t>(layer.v_proj.size()),
           dev.qkv + q_size + k_size);
    upload(layer.o_proj.data(), static_cast<std::size_t>(layer.o_proj.size()), dev.o);
    upload(layer.post_attention_layernorm.data(), D, dev.post_norm);
    const auto gate_size = static_cast<std::size_t>(layer.gate_proj.size());
    upload(layer.gate_proj.data(), gate_size, dev.gate_up);  // rows stacked: gate, up
    upload(layer.up_proj.data(), static_cast<std::size_t>(layer.up_proj.size()),
           dev.gate_up + gate_size);
    upload(layer.down_proj.data(), static_cast<std::size_t>(layer.down_proj.size()), dev.down);
  }
  reads.resize(static_cast<std::size_t>(L + 1));
  for (int r = 0; r <= L; ++r) {
    const auto& read = model.depth_read(r);
    DeviceRead& dev = reads[static_cast<std::size_t>(r)];
    dev.query = base + read_at[static_cast<std::size_t>(r)];
    dev.gain = dev.query + D;
    upload(read.query.data(), D, dev.query);
    upload(read.key_norm_gain.data(), D, dev.gain);
  }
  stats_partials.reserve(kStatsBlocks * sizeof(double), "statistics");
  check(cudaStreamSynchronize(stream), "copying the weights to the GPU");
}

// y (T, out) = x (T, in) W^T with W (out, in), all row-major. Column-major cuBLAS sees x as
// (in, T), W as (in, out) and y as (out, T), so y^T = W^T' x^T: op(A) = A^T with A = W.
void CudaForward::Impl::gemm(const float* x, int T, int in, const float* weight, int out,
                             float* y) {
  const float one = 1.0f, zero = 0.0f;
  check(cublasSgemm(cublas, CUBLAS_OP_T, CUBLAS_OP_N, out, T, in, &one, weight, in, x, in, &zero, y,
                    out),
        "cublasSgemm");
}

void CudaForward::Impl::rms_norm(float* out, const float* x, const float* gain, int T) {
  const auto blocks = static_cast<unsigned int>(std::min(T, 1 << 20));
  rms_norm_kernel<<<blocks, kRowThreads, 0, stream>>>(
      out, x, gain, static_cast<float>(config.rms_norm_eps), T, d);
  check(cudaGetLastError(), "the RMSNorm kernel launch");
}

// Enqueues the sum of squares of x (count floats) into stats[slot].
void CudaForward::Impl::sum_squares(const float* x, std::size_t count, int slot) {
  const unsigned int blocks = std::min<unsigned int>(grid_for(count, kStatsThreads), kStatsBlocks);
  sum_squares_kernel<<<blocks, kStatsThreads, 0, stream>>>(x, count, stats_partials.as<double>());
  check(cudaGetLastError(), "the statistics kernel launch");
  finish_sum_kernel<<<1, 32, 0, stream>>>(stats_partials.as<double>(), static_cast<int>(blocks),
                                          stats.as<double>() + slot);
  check(cudaGetLastError(), "the statistics kernel launch");
}

// Waits for the stream and copies stats[first .. first + count) to the host.
void CudaForward::Impl::fetch_stats(int first, int count) {
  check(cudaMemcpyAsync(stats_host.data() + first, stats.as<double>() + first,
                        static_cast<std::size_t>(count) * sizeof(double), cudaMemcpyDeviceToHost,
                        stream),
        "copying statistics from the GPU");
  check(cudaStreamSynchronize(stream), "the forward pass on the GPU");
}

// The reference's require_finite(x, what) then rms_of(x), from the fetched sum of squares of x
// (T, d): a non-finite sum means a non-finite entry, and then x is copied back so that
// attnres::require_finite reports it exactly as the reference does.
double CudaForward::Impl::checked_rms(const float* x, int T, int slot, const std::string& what) {
  const double squares = stats_host[static_cast<std::size_t>(slot)];
  const std::size_t count = static_cast<std::size_t>(T) * static_cast<std::size_t>(d);
  if (!std::isfinite(squares)) {
    std::vector<float> host(count);
    check(cudaMemcpyAsync(host.data(), x, count * sizeof(float), cudaMemcpyDeviceToHost, stream),
          "copying from the GPU");
    check(cudaStreamSynchronize(stream), "copying from the GPU");
    require_finite(host.data(), T, d, d, what);
    throw Error("forward: a non-finite value first appeared in " + what);  // (not reached)
  }
  return std::sqrt(squares / static_cast<double>(count));
}

// v = f_s(h) (PreNorm included), layers.cpp sublayer_forward.
void CudaForward::Impl::sublayer(int s, const float* input, float* output, int T) {
  const DeviceLayer& layer = layers[static_cast<std::size_t>(s / 2)];
  float* x = normed.as<float>();
  if (s % 2 == 0) {
    rms_norm(x, input, layer.input_norm, T);
    float* q = qkv.as<float>();
    gemm(x, T, d, layer.qkv, qkv_width, q);  // (T, (H + 2 H_kv) hd)
    const int half = head_dim / 2;
    const std::size_t rope_count = static_cast<std::size_t>(T) * (heads + kv_heads) * half;
    rope_kernel<<<grid_for(rope_count, kElementThreads), kElementThreads, 0, stream>>>(
        q, qkv_width, rope_cos.as<float>(), rope_sin.as<float>(), T, heads + kv_heads, half);
    check(cudaGetLastError(), "the RoPE kernel launch");
    const dim3 grid(static_cast<unsigned int>((T + attention_tile - 1) / attention_tile),
                    static_cast<unsigned int>(heads));
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    causal_attention_kernel<<<grid, kAttentionThreads, attention_shared_bytes, stream>>>(
        context.as<float>(), context_width, q, qkv_width, T, heads, kv_heads, head_dim,
        attention_tile, attention_shared_qo ? 1 : 0, scale);
    check(cudaGetLastError(), "the attention kernel launch");
    gemm(context.as<float>(), T, context_width, layer.o, d, output);  // (T, d)
  } else {
    rms_norm(x, input, layer.post_norm, T);
    gemm(x, T, d, layer.gate_up, 2 * ffn, gate_up.as<float>());  // (T, 2F)
    const std::size_t count = static_cast<std::size_t>(T) * ffn;
    swiglu_kernel<<<grid_for(count, kElementThreads), kElementThreads, 0, stream>>>(
        act.as<float>(), gate_up.as<float>(), T, ffn);
    check(cudaGetLastError(), "the SwiGLU kernel launch");
    gemm(act.as<float>(), T, ffn, layer.down, d, output);  // (T, d)
  }
}

void CudaForward::Impl::prepare(int T, std::size_t alpha_count, std::size_t slot_count,
                                int arena_slots, int stats_slots) {
  const auto Ts = static_cast<std::size_t>(T);
  const std::size_t activation = Ts * static_cast<std::size_t>(d) * sizeof(float);
  tokens.reserve(Ts * sizeof(int), "the token ids");
  arena.reserve(static_cast<std::size_t>(arena_slots) * activation, "the depth-read history");
  h.reserve(activation, "activations");
  normed.reserve(activation, "activations");
  v.reserve(activation, "activations");
  qkv.reserve(Ts * static_cast<std::size_t>(qkv_width) * sizeof(float), "q, k and v");
  context.reserve(Ts * static_cast<std::size_t>(context_width) * sizeof(float),
                  "the attention context");
  gate_up.reserve(Ts * 2 * static_cast<std::size_t>(ffn) * sizeof(float), "the MLP activations");
  act.reserve(Ts * static_cast<std::size_t>(ffn) * sizeof(float), "the MLP activations");
  logits.reserve(Ts * static_cast<std::size_t>(vocab) * sizeof(float), "the logits");
  alpha.reserve(alpha_count * sizeof(float), "the depth-attention weights");
  slots.reserve(slot_count * sizeof(int), "the depth-read sources");
  stats.reserve(static_cast<std::size_t>(stats_slots) * sizeof(double), "statistics");
  stats_host.assign(static_cast<std::size_t>(stats_slots), 0.0);
  if (T > rope_tokens) {
    const RopeTable<float> rope =
        make_rope_table<float>(T, head_dim, config.rope_theta);  // (T, hd/2)
    const std::size_t bytes = static_cast<std::size_t>(rope.cos.size()) * sizeof(float);
    rope_tokens = 0;  // (until the new table is in place)
    rope_cos.reserve(bytes, "the RoPE table");
    rope_sin.reserve(bytes, "the RoPE table");
    check(cudaMemcpyAsync(rope_cos.as<float>(), rope.cos.data(), bytes, cudaMemcpyHostToDevice,
                          stream),
          "copying the RoPE table");
    check(cudaMemcpyAsync(rope_sin.as<float>(), rope.sin.data(), bytes, cudaMemcpyHostToDevice,
                          stream),
          "copying the RoPE table");
    check(cudaStreamSynchronize(stream), "copying the RoPE table");  // before `rope` goes away
    rope_tokens = T;
  }
}

ForwardResult<float> CudaForward::Impl::run(const std::vector<int>& token_ids,
                                            const ForwardOptions& options) {
  ForwardResult<float> result;
  ForwardTrace& trace = result.trace;
  const engine::FastPass pass = engine::start_fast_pass(trace, config, token_ids, options);
  const DepthLayout& layout = pass.layout;
  const int T = pass.T;
  const float key_eps = static_cast<float>(config.attn_res.key_norm_eps);
  const auto Ts = static_cast<std::size_t>(T);
  const std::size_t activation = Ts * static_cast<std::size_t>(d);  // floats in a (T, d) tensor

  const bool standard = layout.mode == ResidualMode::standard;
  const bool block = layout.mode == ResidualMode::block;

  // Arena slots of every source (see the top of this file), and where each read's slot list and
  // weights start.
  const int zero_slot = block ? layout.blocks + 1 : -1;
  int arena_slots = 0;
  if (layout.mode == ResidualMode::full) arena_slots = L + 1;
  if (block) arena_slots = layout.blocks + 1 + (layout.zero_placeholder ? 1 : 0);
  std::vector<int> slot_list;
  std::vector<std::size_t> slot_at, alpha_at;
  std::size_t alpha_count = 0;
  for (const auto& sources : layout.reads) {
    slot_at.push_back(slot_list.size());
    alpha_at.push_back(alpha_count);
    for (const auto& source : sources) {
      int slot = 0;
      switch (source.kind) {
        case DepthSource::Kind::embedding:
          slot = 0;
          break;
        case DepthSource::Kind::sublayer_output:
          slot = source.first_member;
          break;
        case DepthSource::Kind::block:
        case DepthSource::Kind::partial_block:
          slot = source.block;
          break;
        case DepthSource::Kind::zero_placeholder:
          slot = zero_slot;
          break;
      }
      if (slot < 0 || slot >= arena_slots)
        throw Error("CUDA engine: a depth source has no arena slot");
      slot_list.push_back(slot);
    }
    alpha_count += Ts * sources.size();
  }
  // Statistics: 0 = embedding, 1 + 2s / 2 + 2s = input / output of sublayer s, then the blocks.
  const int block_stats = 1 + 2 * L;
  const int stats_slots = block_stats + (block ? layout.blocks + 1 : 0);
  prepare(T, alpha_count, slot_list.size(), arena_slots, stats_slots);

  check(cudaMemcpyAsync(tokens.as<int>(), token_ids.data(), Ts * sizeof(int),
                        cudaMemcpyHostToDevice, stream),
        "copying the tokens to the GPU");
  if (!slot_list.empty()) {
    check(cudaMemcpyAsync(slots.as<int>(), slot_list.data(), slot_list.size() * sizeof(int),
                          cudaMemcpyHostToDevice, stream),
          "copying the read layout to the GPU");
  }
  float* history = arena.as<float>();
  auto slot_ptr = [&](int slot) { return history + static_cast<std::size_t>(slot) * activation; };
  if (block) {
    // Block sums accumulate in place; the zero placeholder stays zero.
    check(
        cudaMemsetAsync(history, 0,
                        static_cast<std::size_t>(arena_slots) * activation * sizeof(float), stream),
        "clearing the depth-read history");
  }

  float* h_buffer = h.as<float>();
  float* v_buffer = v.as<float>();
  float* embedding = standard ? h_buffer : slot_ptr(0);  // v_0 = h_1
  embedding_kernel<<<grid_for(activation, kElementThreads), kElementThreads, 0, stream>>>(
      embedding, embed, tokens.as<int>(), T, d);
  check(cudaGetLastError(), "the embedding kernel launch");
  sum_squares(embedding, activation, 0);
  fetch_stats(0, 1);
  checked_rms(embedding, T, 0, engine::kEmbeddingName);

  // One sublayer: progress, then v = f(h), the reference's checks and RMS traces of h and v.
  // `after` enqueues work that must follow the sublayer (the block sum) before the host waits.
  auto run_sublayer = [&](int s, float* output, auto&& after) {
    engine::report_sublayer_progress(options, s, L);
    sum_squares(h_buffer, activation, 1 + 2 * s);
    sublayer(s, h_buffer, output, T);
    sum_squares(output, activation, 2 + 2 * s);
    after();
    fetch_stats(1 + 2 * s, 2);
    trace.sublayer_input_rms.push_back(
        checked_rms(h_buffer, T, 1 + 2 * s, engine::sublayer_input_name(s, L)));
    trace.sublayer_output_rms.push_back(
        checked_rms(output, T, 2 + 2 * s, engine::sublayer_output_name(s, L)));
  };
  auto add = [&](float* y, const float* x) {
    add_kernel<<<grid_for(activation, kElementThreads), kElementThreads, 0, stream>>>(y, x,
                                                                                      activation);
    check(cudaGetLastError(), "the residual add kernel launch");
  };

  if (standard) {
    // h_{l+1} = h_l + f_l(h_l).
    for (int s = 0; s < L; ++s) {
      run_sublayer(s, v_buffer, [] {});
      add(h_buffer, v_buffer);
    }
  } else {
    // Every read one-shot over the arena (the two-phase schedule gives the same weights; the
    // trace still reports options.two_phase).
    for (int r = 0; r <= L; ++r) {
      const auto n = static_cast<int>(layout.reads[static_cast<std::size_t>(r)].size());
      const DeviceRead& weights_r = reads[static_cast<std::size_t>(r)];
      attnres::cuda::depth_attention_forward_device(
          h_buffer, alpha.as<float>() + alpha_at[static_cast<std::size_t>(r)], history, activation,
          slots.as<int>() + slot_at[static_cast<std::size_t>(r)], weights_r.query, weights_r.gain,
          key_eps, n, T, d, stream);
      if (r == L) break;
      if (block) {
        const int block_number = r / layout.block_size + 1;  // the block sublayer r + 1 belongs to
        run_sublayer(r, v_buffer, [&] { add(slot_ptr(block_number), v_buffer); });
      } else {
        run_sublayer(r, slot_ptr(r + 1), [] {});  // v_{r+1} in place
      }
    }
    if (block) {
      for (int n = 0; n <= layout.blocks; ++n)
        sum_squares(slot_ptr(n), activation, block_stats + n);
      fetch_stats(block_stats, layout.blocks + 1);
      for (int n = 0; n <= layout.blocks; ++n) {
        trace.block_summary_rms.push_back(
            std::sqrt(stats_host[static_cast<std::size_t>(block_stats + n)] /
                      static_cast<double>(activation)));
      }
    }
  }

  // Final RMSNorm and LM head; copy back the results.
  rms_norm(normed.as<float>(), h_buffer, final_norm, T);
  gemm(normed.as<float>(), T, d, lm_head, vocab, logits.as<float>());  // (T, vocab)
  result.hidden_final.resize(T, d);
  result.logits.resize(T, vocab);
  std::vector<float> alpha_host(alpha_count);
  check(cudaMemcpyAsync(result.hidden_final.data(), h_buffer, activation * sizeof(float),
                        cudaMemcpyDeviceToHost, stream),
        "copying the final hidden state from the GPU");
  check(cudaMemcpyAsync(result.logits.data(), logits.as<float>(),
                        Ts * static_cast<std::size_t>(vocab) * sizeof(float),
                        cudaMemcpyDeviceToHost, stream),
        "copying the logits from the GPU");
  if (alpha_count > 0) {
    check(cudaMemcpyAsync(alpha_host.data(), alpha.as<float>(), alpha_count * sizeof(float),
                          cudaMemcpyDeviceToHost, stream),
          "copying the depth-attention weights from the GPU");
  }
  check(cudaStreamSynchronize(stream), "the forward pass on the GPU");

  for (int r = 0; !standard && r <= L; ++r) {
    const auto& sources = layout.reads[static_cast<std::size_t>(r)];
    const Eigen::Map<const Matrix<float>> weights_r(
        alpha_host.data() + alpha_at[static_cast<std::size_t>(r)], T,
        static_cast<Eigen::Index>(sources.size()));
    ReadTrace read{r, read_target_name(r, L), sources, weights_r.cast<double>(), {}};
    read.alpha_mean = read.alpha.colwise().mean().transpose();
    trace.reads.push_back(std::move(read));
  }
  engine::finish_fast_pass(result, options);
  return result;
}

CudaForward::CudaForward(const ModelWeights<float>& model) {
  std::string why_not;
  if (!available(&why_not)) throw Error("--device cuda: " + why_not);
  impl_ = std::make_unique<Impl>();
  impl_->init(model);
}

CudaForward::~CudaForward() = default;

ForwardResult<float> CudaForward::forward(const std::vector<int>& tokens,
                                          const ForwardOptions& options) {
  check(cudaSetDevice(impl_->device), "selecting the GPU");
  try {
    return impl_->run(tokens, options);
  } catch (...) {
    // Cancelled or failed: let the queued work finish before the buffers are reused or freed.
    cudaStreamSynchronize(impl_->stream);
    cudaGetLastError();
    throw;
  }
}

}  // namespace attnres::cuda_engine
