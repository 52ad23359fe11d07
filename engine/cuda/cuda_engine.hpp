// The state of one CUDA engine (CudaForward::Impl), shared by its source files: cuda_setup.cu
// (the device check, the checks of the model's shapes, the handles, the attention tiling and the
// weights upload) and cuda_forward.cu (the layer loop of a pass, its statistics and copies).
// Internal to the engine library; include from .cu files.
//
// Memory (all on the device, f32, row-major like the host tensors):
//   weights   one allocation, uploaded once by init; per layer the q/k/v projections are stacked
//             into one ((H + 2 H_kv) hd, d) matrix and gate/up into one (2F, d) matrix, so each
//             is a single GEMM
//   arena     the depth-read history, one (T, d) slot per source value: Full AttnRes slot i = v_i
//             (i = 0 .. L, written in place by the sublayer's last GEMM); Block AttnRes slot 0 =
//             b_0 (the embedding), slot n = block n (the running partial sum while the block is
//             open, its summary once complete: "partial" and "b_n" are the same slot), slot N + 1 =
//             the zero placeholder's zeros when that option is on
//   alpha     every read's weights (T, sources), copied back once at the end
//   workspace h, the RMS-normalised input, v, qkv, the attention context, gate/up, SwiGLU output,
//             logits: grown on demand, kept between calls
#pragma once

// Eigen runs on the host only in the CUDA engine: every .cu file defines this before any include.
#ifndef EIGEN_NO_CUDA
#error "define EIGEN_NO_CUDA before including cuda/cuda_engine.hpp"
#endif

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <vector>

#include "attnres/forward.hpp"
#include "attnres/model.hpp"
#include "cuda/cublas_loader.hpp"
#include "cuda/cuda_forward.hpp"
#include "cuda/cuda_support.hpp"
#include "cuda/forward_kernels.cuh"

namespace attnres::cuda_engine {

// One layer's weights inside the weights allocation.
struct DeviceLayer {
  const float* input_norm = nullptr;  // (d)
  const float* qkv = nullptr;         // ((H + 2 H_kv) hd, d)
  const float* o = nullptr;           // (d, H hd)
  const float* post_norm = nullptr;   // (d)
  const float* gate_up = nullptr;     // (2F, d)
  const float* down = nullptr;        // (d, F)
};

// One depth read's weights inside the weights allocation.
struct DeviceRead {
  const float* query = nullptr;  // (d) w
  const float* gain = nullptr;   // (d) g
};

struct CudaForward::Impl {
  ModelConfig config;
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;

  // Sizes.
  int d = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0, L = 0;
  int qkv_width = 0, context_width = 0;
  // Attention tiling (chosen once from head_dim and the shared memory per block).
  AttentionTiling attention;

  // Weights.
  DeviceBuffer weights;
  const float* embed = nullptr;       // (vocab, d)
  const float* final_norm = nullptr;  // (d)
  const float* lm_head = nullptr;     // (vocab, d)
  std::vector<DeviceLayer> layers;
  std::vector<DeviceRead> reads;  // r = 0 .. L

  // Workspaces (grown on demand, sized by prepare for T tokens).
  DeviceBuffer tokens;              // (T) int
  DeviceBuffer rope_cos, rope_sin;  // (rope_tokens, hd/2)
  DeviceBuffer arena;               // (slots, T, d): the depth-read history
  DeviceBuffer h, normed, v;        // (T, d)
  DeviceBuffer qkv;                 // (T, qkv_width)
  DeviceBuffer context;             // (T, context_width)
  DeviceBuffer gate_up;             // (T, 2F)
  DeviceBuffer act;                 // (T, F)
  DeviceBuffer logits;              // (T, vocab)
  DeviceBuffer alpha;               // every read's (T, sources), read after read
  DeviceBuffer slots;               // every read's arena slots (int), read after read
  DeviceBuffer stats_partials;      // (kStatsBlocks) double
  DeviceBuffer stats;               // (stats slots) double: sums of squares
  int rope_tokens = 0;
  std::vector<double> stats_host;  // (stats slots): the fetched sums of squares

  ~Impl() {
    cudaSetDevice(device);
    if (stream) cudaStreamSynchronize(stream);
    if (cublas) cuda_engine::cublas().destroy(cublas);
    if (stream) cudaStreamDestroy(stream);
    cudaGetLastError();
  }

  // cuda_setup.cu
  void init(const ModelWeights<float>& model);
  void check_model(const ModelWeights<float>& model);
  void create_handles();
  void upload_weights(const ModelWeights<float>& model);
  void upload(const float* host, std::size_t count, const float* device_ptr);

  // cuda_forward.cu
  void gemm(const float* x, int T, int in, const float* weight, int out, float* y);
  void rms_norm(float* out, const float* x, const float* gain, int T);
  void sum_squares(const float* x, std::size_t count, int slot);
  void fetch_stats(int first, int count);
  double checked_rms(const float* x, int T, int slot, const std::string& what);
  void sublayer(int s, const float* input, float* output, int T);
  void prepare(int T, std::size_t alpha_count, std::size_t slot_count, int arena_slots,
               int stats_slots);
  void upload_inputs(const std::vector<int>& token_ids, const std::vector<int>& slot_list,
                     int arena_slots, bool block);
  void finish_on_gpu(ForwardResult<float>& result, std::vector<float>& alpha_host, int T);
  ForwardResult<float> run(const std::vector<int>& tokens, const ForwardOptions& options);
};

}  // namespace attnres::cuda_engine
