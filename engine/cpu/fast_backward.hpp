// The fast CPU backward pass (docs/engines.md, docs/training.md): see gradient_engine.hpp.
#pragma once

#include <memory>
#include <vector>

#include "attnres/backward.hpp"

namespace attnres::engine {

template <typename Scalar>
class FastBackward {
 public:
  // bf16: the products take bf16 inputs (f32 accumulation; f32 only, matmul.hpp).
  FastBackward(const ModelConfig& config, int threads, bool bf16 = false);
  ~FastBackward();
  FastBackward(const FastBackward&) = delete;
  FastBackward& operator=(const FastBackward&) = delete;

  // Same contract as attnres::loss_and_gradients; `out` is overwritten.
  void compute(const ModelWeights<Scalar>& model, const std::vector<std::vector<int>>& batch,
               const ForwardOptions& options, Gradients<Scalar>& out);
  int threads() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace attnres::engine
