// PLACEHOLDER while the fast backward is written: delegates to the reference.
#include "cpu/fast_backward.hpp"

namespace attnres::engine {

template <typename Scalar>
struct FastBackward<Scalar>::State {
  int threads = 1;
};

template <typename Scalar>
FastBackward<Scalar>::FastBackward(const ModelConfig&, int threads) : state_(std::make_unique<State>()) {
  state_->threads = threads;
}
template <typename Scalar>
FastBackward<Scalar>::~FastBackward() = default;
template <typename Scalar>
int FastBackward<Scalar>::threads() const {
  return state_->threads;
}
template <typename Scalar>
void FastBackward<Scalar>::compute(const ModelWeights<Scalar>& model, const std::vector<std::vector<int>>& batch,
                                   const ForwardOptions& options, Gradients<Scalar>& out) {
  out = loss_and_gradients(model, batch, options);
}

template class FastBackward<float>;
template class FastBackward<double>;

}  // namespace attnres::engine
