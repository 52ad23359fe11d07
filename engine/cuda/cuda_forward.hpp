// The whole model forward on a CUDA GPU, f32 (docs/engines.md): weights uploaded once, cuBLAS
// GEMMs, the fused depth-read kernel of kernels/cuda, a causal attention kernel, small kernels for
// RMSNorm, RoPE, SwiGLU and the embedding gather. Internal to the engine library; users call
// ForwardEngine<float> with Device::cuda.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "attnres/forward.hpp"
#include "attnres/model.hpp"

namespace attnres::cuda_engine {

// False, with the reason ("this build has no CUDA ...", "no CUDA device: ..."), when it cannot run.
bool available(std::string* why_not);

class CudaForward {
 public:
  // Uploads the weights; throws attnres::Error when no device is usable (never crashes).
  explicit CudaForward(const ModelWeights<float>& model);
  ~CudaForward();
  CudaForward(const CudaForward&) = delete;
  CudaForward& operator=(const CudaForward&) = delete;
  // Same contract as attnres::forward: logits, hidden_final and the trace (alpha of every read,
  // RMS by depth, block norms; the mixing matrix via record_mixing when options ask).
  ForwardResult<float> forward(const std::vector<int>& tokens, const ForwardOptions& options);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnres::cuda_engine
