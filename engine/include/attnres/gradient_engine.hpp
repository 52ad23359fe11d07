// Loss and gradients on an engine (docs/training.md, docs/engines.md):
//   reference  attnres::loss_and_gradients (core/model/src/backward.cpp): readable, one sequence
//              at a time, recomputes each sublayer's internals during the backward sweep; the
//              oracle
//   fast       engine/cpu/fast_backward.cpp, every scheme: keeps the forward's intermediates,
//              two-phase depth reads, causal attention that skips the masked half, the batch's
//              sequences split over a thread pool with per-thread gradient buffers summed in a
//              fixed order (deterministic for a given thread count)
// Both return the same Gradients (backward.hpp): the loss, d loss / d every parameter, and the
// Fig. 5 RMS curves.
//
//   GradientEngine<float> engine(model.config, {.engine = EngineKind::fast, .threads = 2});
//   Gradients<float> g;
//   engine.compute(model, batch, options, g);  // g's buffers are reused across calls
#pragma once

#include <memory>
#include <vector>

#include "attnres/backward.hpp"
#include "attnres/engine.hpp"

namespace attnres {

namespace engine {
template <typename Scalar>
class FastBackward;
}

template <typename Scalar>
class GradientEngine {
 public:
  // Throws attnres::Error for the CUDA device (gradients run on the CPU only).
  GradientEngine(const ModelConfig& config, const EngineOptions& options = {});
  ~GradientEngine();
  GradientEngine(const GradientEngine&) = delete;
  GradientEngine& operator=(const GradientEngine&) = delete;

  // The contract of loss_and_gradients (backward.hpp); `out` is overwritten (its tensors are
  // reused when their shapes already match).
  void compute(const ModelWeights<Scalar>& model, const std::vector<std::vector<int>>& batch,
               const ForwardOptions& options, Gradients<Scalar>& out);

  const EngineOptions& options() const { return options_; }
  int threads() const;

 private:
  EngineOptions options_;
  std::unique_ptr<engine::FastBackward<Scalar>> fast_;
};

}  // namespace attnres
