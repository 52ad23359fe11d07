#include "attnres/gradient_engine.hpp"

#include "attnres/error.hpp"
#include "cpu/fast_backward.hpp"

namespace attnres {

template <typename Scalar>
GradientEngine<Scalar>::GradientEngine(const ModelConfig& config, const EngineOptions& options)
    : options_(options) {
  if (options.device != Device::cpu) {
    throw Error(
        "gradients: only the CPU computes gradients (--device cpu); the CUDA engine is "
        "forward-only");
  }
  check_thread_count(options.threads, "threads");
  check_bf16(options, std::is_same_v<Scalar, float>);
  if (options.engine == EngineKind::fast) {
    fast_ = std::make_unique<engine::FastBackward<Scalar>>(
        config, options.threads > 0 ? options.threads : default_thread_count(), options.bf16);
  }
}

template <typename Scalar>
GradientEngine<Scalar>::~GradientEngine() = default;

template <typename Scalar>
int GradientEngine<Scalar>::threads() const {
  return fast_ ? fast_->threads() : 1;
}

template <typename Scalar>
void GradientEngine<Scalar>::compute(const ModelWeights<Scalar>& model,
                                     const std::vector<std::vector<int>>& batch,
                                     const ForwardOptions& options, Gradients<Scalar>& out) {
  // The fast backward runs every scheme (engine::fast_engines_run; docs/schemes.md).
  if (fast_) {
    fast_->compute(model, batch, options, out);
  } else {
    out = loss_and_gradients(model, batch, options);
  }
}

template class GradientEngine<float>;
template class GradientEngine<double>;

}  // namespace attnres
