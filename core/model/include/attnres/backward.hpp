// Loss and gradients of the tiny model (docs/training.md): the readable reference backward pass.
//
// The loss of a sequence t_0 .. t_{T-1} is the mean next-token cross-entropy over positions
// 0 .. T-2 (position p predicts t_{p+1}, natural log); a batch averages over every predicted
// position of every sequence. Gradients are d loss / d parameter for every tensor of the model,
// in a ModelWeights of the same shapes (so `visit_tensors` names them exactly as the model file
// does). The Fig. 5 quantities come with them: the RMS of each sublayer's output v_l and of
// d loss / d v_l over every token and channel of the batch.
//
//   Gradients<double> g = loss_and_gradients(model, {{1, 2, 3, 4}}, options);
//   g.loss;                         // nats
//   g.grad.layers[0].q_proj;        // d loss / d W_q of layer 0
//   g.sublayer_output_grad_rms[3];  // Fig. 5c at sublayer 4
//
// The reference runs one sequence at a time and recomputes each sublayer's internals during the
// backward sweep; it reads the depth history one-shot (the two-phase schedule computes the same
// weights, so the gradient is the same). The fast path (engine/, train_engine.hpp) is checked
// against it, and it against central finite differences.
#pragma once

#include <cstdint>
#include <vector>

#include "attnres/forward.hpp"
#include "attnres/model.hpp"

namespace attnres {

template <typename Scalar>
struct Gradients {
  double loss = 0.0;           // mean cross-entropy (nats) over the predicted positions
  std::int64_t predicted = 0;  // predicted positions in the batch (sum of T - 1)
  ModelWeights<Scalar> grad;   // d loss / d parameter, every tensor of the model
  std::vector<double> sublayer_output_rms;       // (L) RMS of v_l over the batch (Fig. 5b)
  std::vector<double> sublayer_output_grad_rms;  // (L) RMS of d loss / d v_l (Fig. 5c)
};

// Throws attnres::Error when the batch is empty, a sequence has fewer than two tokens (nothing
// to predict) or a token is outside the vocabulary. `options` chooses the mode and block size as
// for forward(); its two_phase, record_mixing and rank settings do not change the result.
// options.progress is called once per sequence and sublayer (cancellable).
template <typename Scalar>
Gradients<Scalar> loss_and_gradients(const ModelWeights<Scalar>& model,
                                     const std::vector<std::vector<int>>& batch,
                                     const ForwardOptions& options = {});

// Sum over positions 0 .. T-2 of -log softmax(logits[p])[tokens[p + 1]] (nats), computed stably.
// `gradient`, when given, receives d(sum)/d logits (softmax minus one-hot; the last row zero).
template <typename Scalar>
double next_token_cross_entropy_sum(const Matrix<Scalar>& logits, const std::vector<int>& tokens,
                                    Matrix<Scalar>* gradient = nullptr);

// Mean next-token cross-entropy of a batch by forward passes only (no gradients).
template <typename Scalar>
double batch_loss(const ModelWeights<Scalar>& model, const std::vector<std::vector<int>>& batch,
                  const ForwardOptions& options = {});

// A zero gradient with the shapes of `model` (norm and key-norm gains zero too).
template <typename Scalar>
ModelWeights<Scalar> zero_like(const ModelWeights<Scalar>& model);

// Throws attnres::Error (prefixed by `what`) for an empty batch, a sequence shorter than two
// tokens, or a token outside the vocabulary; returns the number of predicted positions.
std::int64_t check_training_batch(const ModelConfig& config,
                                  const std::vector<std::vector<int>>& batch,
                                  const std::string& what);

}  // namespace attnres
