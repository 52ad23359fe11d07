// The whole model forward on a CUDA GPU, f32 (docs/engines.md): the layer loop of one pass. Same
// contract, checks, errors and trace as the readable reference (core/model/src/forward.cpp),
// through the shared steps of attnres/forward_steps.hpp and the fast engines' first and last steps
// (src/fast_pass.hpp). The engine's state and memory are described in cuda_engine.hpp, its set-up
// in cuda_setup.cu.
//
// Kernels: the fused depth read of kernels/cuda (device-pointer entry point), cuBLAS SGEMM for
// every projection (FP32, no TF32), and the engine's own kernels (forward_kernels.cuh): RMSNorm,
// RoPE (rotate_half), a causal grouped-query attention kernel with an online softmax over key tiles
// (never a T x T matrix), SwiGLU, the embedding gather, and a deterministic sum of squares (in
// double) for the RMS traces and finiteness checks.
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
#include <string>
#include <vector>

#include "attnres/error.hpp"
#include "attnres/forward_steps.hpp"
#include "attnres/kernels_cuda_device.hpp"
#include "attnres/layers.hpp"
#include "cuda/cuda_engine.hpp"
#include "src/fast_pass.hpp"

namespace attnres::cuda_engine {

namespace {

// Where every read's sources and weights live: the arena slot of each source (cuda_engine.hpp),
// read after read, and where each read's slots and weights (T, sources) start.
struct ReadPlan {
  int arena_slots = 0;                         // (T, d) slots of the arena
  std::vector<int> slot_list;                  // per read, per source: its arena slot
  std::vector<std::size_t> slot_at, alpha_at;  // per read: its first entry in slot_list / alpha
  std::size_t alpha_count = 0;                 // floats of every read's weights
};

ReadPlan plan_reads(const DepthLayout& layout, int L, int T) {
  const auto Ts = static_cast<std::size_t>(T);
  const bool block = layout.mode == ResidualMode::block;
  ReadPlan plan;
  const int zero_slot = block ? layout.blocks + 1 : -1;
  if (layout.mode == ResidualMode::full) plan.arena_slots = L + 1;
  if (block) plan.arena_slots = layout.blocks + 1 + (layout.zero_placeholder ? 1 : 0);
  for (const auto& sources : layout.reads) {
    plan.slot_at.push_back(plan.slot_list.size());
    plan.alpha_at.push_back(plan.alpha_count);
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
      if (slot < 0 || slot >= plan.arena_slots)
        throw Error("CUDA engine: a depth source has no arena slot");
      plan.slot_list.push_back(slot);
    }
    plan.alpha_count += Ts * sources.size();
  }
  return plan;
}

// The trace of every read from the weights copied back, alpha_host (read after read, (T, sources)
// each).
void record_reads(ForwardTrace& trace, const DepthLayout& layout, const ReadPlan& plan,
                  const std::vector<float>& alpha_host, int L, int T) {
  for (int r = 0; r <= L; ++r) {
    const auto& sources = layout.reads[static_cast<std::size_t>(r)];
    const Eigen::Map<const Matrix<float>> weights_r(
        alpha_host.data() + plan.alpha_at[static_cast<std::size_t>(r)], T,
        static_cast<Eigen::Index>(sources.size()));
    ReadTrace read{r, read_target_name(r, L), sources, weights_r.cast<double>(), {}};
    read.alpha_mean = read.alpha.colwise().mean().transpose();
    trace.reads.push_back(std::move(read));
  }
}

}  // namespace

// y (T, out) = x (T, in) W^T with W (out, in), all row-major. Column-major cuBLAS sees x as
// (in, T), W as (in, out) and y as (out, T), so y^T = W^T' x^T: op(A) = A^T with A = W.
void CudaForward::Impl::gemm(const float* x, int T, int in, const float* weight, int out,
                             float* y) {
  const float one = 1.0f, zero = 0.0f;
  check(cuda_engine::cublas().sgemm(cublas, CUBLAS_OP_T, CUBLAS_OP_N, out, T, in, &one, weight, in,
                                    x, in, &zero, y, out),
        "cublasSgemm");
}

void CudaForward::Impl::rms_norm(float* out, const float* x, const float* gain, int T) {
  rms_norm_forward(out, x, gain, static_cast<float>(config.rms_norm_eps), T, d, stream);
}

// Enqueues the sum of squares of x (count floats) into stats[slot].
void CudaForward::Impl::sum_squares(const float* x, std::size_t count, int slot) {
  sum_squares_forward(stats.as<double>() + slot, x, count, stats_partials.as<double>(), stream);
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
    rope_forward(q, qkv_width, rope_cos.as<float>(), rope_sin.as<float>(), T, heads + kv_heads,
                 head_dim / 2, stream);
    causal_attention_forward(context.as<float>(), context_width, q, qkv_width, T, heads, kv_heads,
                             head_dim, attention, stream);
    gemm(context.as<float>(), T, context_width, layer.o, d, output);  // (T, d)
  } else {
    rms_norm(x, input, layer.post_norm, T);
    gemm(x, T, d, layer.gate_up, 2 * ffn, gate_up.as<float>());  // (T, 2F)
    swiglu_forward(act.as<float>(), gate_up.as<float>(), T, ffn, stream);
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

// Copies the tokens and the read layout to the GPU; clears the arena of Block AttnRes (block sums
// accumulate in place; the zero placeholder stays zero).
void CudaForward::Impl::upload_inputs(const std::vector<int>& token_ids,
                                      const std::vector<int>& slot_list, int arena_slots,
                                      bool block) {
  const std::size_t activation = token_ids.size() * static_cast<std::size_t>(d);
  check(cudaMemcpyAsync(tokens.as<int>(), token_ids.data(), token_ids.size() * sizeof(int),
                        cudaMemcpyHostToDevice, stream),
        "copying the tokens to the GPU");
  if (!slot_list.empty()) {
    check(cudaMemcpyAsync(slots.as<int>(), slot_list.data(), slot_list.size() * sizeof(int),
                          cudaMemcpyHostToDevice, stream),
          "copying the read layout to the GPU");
  }
  if (block) {
    check(
        cudaMemsetAsync(arena.as<float>(), 0,
                        static_cast<std::size_t>(arena_slots) * activation * sizeof(float), stream),
        "clearing the depth-read history");
  }
}

// Final RMSNorm and LM head of the final read's output h; copies back hidden_final, the logits and
// every read's weights (alpha_host), then waits for the stream.
void CudaForward::Impl::finish_on_gpu(ForwardResult<float>& result, std::vector<float>& alpha_host,
                                      int T) {
  const auto Ts = static_cast<std::size_t>(T);
  float* h_buffer = h.as<float>();
  rms_norm(normed.as<float>(), h_buffer, final_norm, T);
  gemm(normed.as<float>(), T, d, lm_head, vocab, logits.as<float>());  // (T, vocab)
  result.hidden_final.resize(T, d);
  result.logits.resize(T, vocab);
  check(cudaMemcpyAsync(result.hidden_final.data(), h_buffer,
                        Ts * static_cast<std::size_t>(d) * sizeof(float), cudaMemcpyDeviceToHost,
                        stream),
        "copying the final hidden state from the GPU");
  check(cudaMemcpyAsync(result.logits.data(), logits.as<float>(),
                        Ts * static_cast<std::size_t>(vocab) * sizeof(float),
                        cudaMemcpyDeviceToHost, stream),
        "copying the logits from the GPU");
  if (!alpha_host.empty()) {
    check(cudaMemcpyAsync(alpha_host.data(), alpha.as<float>(), alpha_host.size() * sizeof(float),
                          cudaMemcpyDeviceToHost, stream),
          "copying the depth-attention weights from the GPU");
  }
  check(cudaStreamSynchronize(stream), "the forward pass on the GPU");
}

ForwardResult<float> CudaForward::Impl::run(const std::vector<int>& token_ids,
                                            const ForwardOptions& options) {
  ForwardResult<float> result;
  ForwardTrace& trace = result.trace;
  const engine::FastPass pass =
      engine::start_fast_pass(trace, config, token_ids, options, engine::FastEngine::cuda);
  const DepthLayout& layout = pass.layout;
  const int T = pass.T;
  const float key_eps = static_cast<float>(config.attn_res.key_norm_eps);
  const std::size_t activation = static_cast<std::size_t>(T) * d;  // floats in a (T, d) tensor
  const bool standard = layout.mode == ResidualMode::standard;
  const bool block = layout.mode == ResidualMode::block;

  const ReadPlan plan = plan_reads(layout, L, T);
  // Statistics: 0 = embedding, 1 + 2s / 2 + 2s = input / output of sublayer s, then the blocks.
  const int block_stats = 1 + 2 * L;
  const int stats_slots = block_stats + (block ? layout.blocks + 1 : 0);
  prepare(T, plan.alpha_count, plan.slot_list.size(), plan.arena_slots, stats_slots);
  upload_inputs(token_ids, plan.slot_list, plan.arena_slots, block);
  float* history = arena.as<float>();
  auto slot_ptr = [&](int slot) { return history + static_cast<std::size_t>(slot) * activation; };

  float* h_buffer = h.as<float>();
  float* v_buffer = v.as<float>();
  float* embedding = standard ? h_buffer : slot_ptr(0);  // v_0 = h_1
  embedding_forward(embedding, embed, tokens.as<int>(), T, d, stream);
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
  auto add = [&](float* y, const float* x) { add_forward(y, x, activation, stream); };

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
          h_buffer, alpha.as<float>() + plan.alpha_at[static_cast<std::size_t>(r)], history,
          activation, slots.as<int>() + plan.slot_at[static_cast<std::size_t>(r)], weights_r.query,
          weights_r.gain, key_eps, n, T, d, stream);
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

  std::vector<float> alpha_host(plan.alpha_count);
  finish_on_gpu(result, alpha_host, T);
  if (!standard) record_reads(trace, layout, plan, alpha_host, L, T);
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
