// Setting up the CUDA engine (cuda_engine.hpp): whether a usable device exists, the checks of the
// model's config and tensor shapes (every error names the tensor and both shapes), the stream and
// cuBLAS handle, the attention tiling, and the weights uploaded once into one allocation with the
// q/k/v and gate/up projections stacked (docs/engines.md).

// Eigen is used on the host only here: no __host__ __device__ annotations.
#define EIGEN_NO_CUDA 1

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "attnres/error.hpp"
#include "cuda/cuda_engine.hpp"

namespace attnres::cuda_engine {

namespace {

std::size_t product(std::size_t a, std::size_t b) {
  return a * b;
}

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

void CudaForward::Impl::init(const ModelWeights<float>& model) {
  check_model(model);
  create_handles();
  attention = choose_attention_tiling(head_dim, device);
  upload_weights(model);
  stats_partials.reserve(kStatsBlocks * sizeof(double), "statistics");
  check(cudaStreamSynchronize(stream), "copying the weights to the GPU");
}

// Takes the sizes from the config, then checks them and every tensor's shape against them.
void CudaForward::Impl::check_model(const ModelWeights<float>& model) {
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
  if (config.qk_norm || config.explicit_head_dim > 0) {
    throw Error(
        "CUDA engine: Qwen3's q/k norms and a head_dim other than d / heads run on the "
        "CPU engines only (docs/interop.md); drop --device cuda");
  }
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
}

void CudaForward::Impl::create_handles() {
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "creating a CUDA stream");
  check(cuda_engine::cublas().create(&cublas), "creating the cuBLAS handle");
  check(cuda_engine::cublas().set_stream(cublas, stream), "cublasSetStream");
  // FP32 GEMMs (no TF32): the engine is checked against the f32 reference at 1e-4.
  check(cuda_engine::cublas().set_math_mode(cublas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
}

void CudaForward::Impl::upload(const float* host, std::size_t count, const float* device_ptr) {
  // On the engine's stream (a plain cudaMemcpy from pageable memory may return before the data
  // lands, and the legacy stream does not order work on a non-blocking stream); init waits once.
  check(cudaMemcpyAsync(const_cast<float*>(device_ptr), host, count * sizeof(float),
                        cudaMemcpyHostToDevice, stream),
        "copying the weights to the GPU");
}

// Enqueues the weights' copies into one allocation, each tensor aligned to 256 bytes; init waits.
void CudaForward::Impl::upload_weights(const ModelWeights<float>& model) {
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
}

}  // namespace attnres::cuda_engine
