// Serialising a forward pass's outputs and trace: JSON (with source labels) for `--trace`, and
// F32 safetensors tensors for `--dump` (docs/math.md §2.7).
//
// Dump tensors: logits (T, vocab); hidden_final (T, d), the final read's output before the final
// RMSNorm; alpha.<r> (T, sources of read r) for r = 0 .. L, r = L the final read (absent for the
// standard residual); sublayer_input_rms (L); sublayer_output_rms (L). With gradients
// (`forward --grad`, docs/training.md): loss (1), grad.<tensor name> for every parameter of the
// model file, sublayer_output_grad_rms (L).
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "attnres/backward.hpp"
#include "attnres/forward.hpp"
#include "attnres/safetensors.hpp"

namespace attnres {

nlohmann::json trace_to_json(const ForwardTrace& trace, const Eigen::MatrixXd& logits,
                             const Eigen::MatrixXd& hidden_final);
// The tensors of `attnres forward --dump`, written as F64 when `f64` (a float64 forward pass)
// and as F32 otherwise: the dump keeps the compute precision.
std::vector<TensorToWrite> forward_dump_tensors(const ForwardTrace& trace,
                                                const Eigen::MatrixXd& logits,
                                                const Eigen::MatrixXd& hidden_final, bool f64);

// loss, grad.<name> (the model file's tensors: AttnRes ones only when the model has them) and
// sublayer_output_grad_rms, at the compute precision (F64 for a float64 pass).
template <typename Scalar>
std::vector<TensorToWrite> gradient_dump_tensors(const Gradients<Scalar>& gradients);

template <typename Scalar>
nlohmann::json trace_to_json(const ForwardResult<Scalar>& result) {
  return trace_to_json(result.trace, result.logits.template cast<double>(),
                       result.hidden_final.template cast<double>());
}
template <typename Scalar>
std::vector<TensorToWrite> forward_dump_tensors(const ForwardResult<Scalar>& result) {
  return forward_dump_tensors(result.trace, result.logits.template cast<double>(),
                              result.hidden_final.template cast<double>(),
                              sizeof(Scalar) == sizeof(double));
}

}  // namespace attnres
