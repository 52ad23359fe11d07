// The readable reference backward pass (docs/training.md). Every step names the formula it
// differentiates; the fast path in engine/cpu/train_engine.cpp is tested against this file.
#include "attnres/backward.hpp"

#include <algorithm>
#include <cmath>

#include "attnres/depth_attention.hpp"
#include "attnres/depth_read.hpp"
#include "attnres/error.hpp"
#include "attnres/forward_steps.hpp"
#include "attnres/layers.hpp"
#include "attnres/mhc.hpp"

namespace attnres {

std::int64_t check_training_batch(const ModelConfig& config,
                                  const std::vector<std::vector<int>>& batch,
                                  const std::string& what) {
  if (batch.empty()) throw Error(what + ": the batch is empty (expected at least one sequence)");
  std::int64_t predicted = 0;
  for (std::size_t s = 0; s < batch.size(); ++s) {
    if (batch[s].size() < 2) {
      throw Error(what + ": sequence " + std::to_string(s) + " has " +
                  std::to_string(batch[s].size()) +
                  " token(s); the loss needs at least 2 (position p predicts token p + 1)");
    }
    check_tokens(config, batch[s]);
    predicted += static_cast<std::int64_t>(batch[s].size()) - 1;
  }
  return predicted;
}

template <typename Scalar>
ModelWeights<Scalar> zero_like(const ModelWeights<Scalar>& model) {
  ModelWeights<Scalar> zero = allocate_model<Scalar>(model.config);
  zero.has_attn_res_tensors = model.has_attn_res_tensors;
  visit_tensors(zero, [](const TensorRef<Scalar>& tensor) {
    std::fill(tensor.data, tensor.data + tensor.element_count(), Scalar(0));
  });
  return zero;
}

template <typename Scalar>
double next_token_cross_entropy_sum(const Matrix<Scalar>& logits, const std::vector<int>& tokens,
                                    Matrix<Scalar>* gradient) {
  const Eigen::Index T = logits.rows();
  if (gradient) gradient->setZero(T, logits.cols());
  double sum = 0.0;
  for (Eigen::Index p = 0; p + 1 < T; ++p) {
    const auto row = logits.row(p);
    const Scalar top = row.maxCoeff();
    const Scalar log_sum_exp = top + std::log((row.array() - top).exp().sum());
    const int target = tokens[static_cast<std::size_t>(p + 1)];
    sum += static_cast<double>(log_sum_exp - row(target));
    if (gradient) {
      gradient->row(p) = (row.array() - log_sum_exp).exp().matrix();  // softmax
      (*gradient)(p, target) -= Scalar(1);
    }
  }
  return sum;
}

template <typename Scalar>
double batch_loss(const ModelWeights<Scalar>& model, const std::vector<std::vector<int>>& batch,
                  const ForwardOptions& options) {
  const std::int64_t predicted = check_training_batch(model.config, batch, "loss");
  ForwardOptions quiet = options;
  quiet.record_mixing = false;
  double sum = 0.0;
  for (const auto& tokens : batch) {
    sum += next_token_cross_entropy_sum(forward(model, tokens, quiet).logits, tokens);
  }
  return sum / static_cast<double>(predicted);
}

namespace {

// The value of a depth source: the sum of its member outputs (the embedding, one v_i, a block
// summary b_n or a partial sum), or zeros for the placeholder.
template <typename Scalar>
Matrix<Scalar> source_value(const std::vector<Matrix<Scalar>>& outputs, const DepthSource& source) {
  Matrix<Scalar> value = Matrix<Scalar>::Zero(outputs.front().rows(), outputs.front().cols());
  for (int member = source.first_member; member <= source.last_member; ++member) {
    value += outputs[static_cast<std::size_t>(member)];
  }
  return value;
}

// What the backward sweep needs from the forward pass of one sequence.
template <typename Scalar>
struct Tape {
  std::vector<Matrix<Scalar>> outputs;               // v_0 (embedding) .. v_L, each (T, d)
  std::vector<Matrix<Scalar>> inputs;                // h of sublayers 0 .. L-1 (reads 0 .. L-1)
  Matrix<Scalar> final_hidden;                       // output of read L
  std::vector<DepthReadCache<Scalar>> reads;         // per read (read-based schemes)
  std::vector<std::vector<Matrix<Scalar>>> streams;  // mHC: the streams before each sublayer
  std::vector<MhcStep<Scalar>> steps;                // mHC: each sublayer's coefficients
};

template <typename Scalar>
void sequence_gradients(const ModelWeights<Scalar>& model, const AttnResConfig& scheme,
                        const DepthLayout& layout, const std::vector<int>& tokens,
                        double loss_scale, const Progress& progress, std::size_t progress_base,
                        std::size_t progress_total, Gradients<Scalar>& out,
                        std::vector<double>& output_squares, std::vector<double>& grad_squares) {
  const ModelConfig& config = model.config;
  const int L = layout.sublayers;
  const auto T = static_cast<Eigen::Index>(tokens.size());
  const auto eps = static_cast<Scalar>(config.rms_norm_eps);
  const auto key_eps = static_cast<Scalar>(config.attn_res.key_norm_eps);
  const RopeTable<Scalar> rope =
      make_rope_table<Scalar>(static_cast<int>(T), config.head_dim(), config.rope_theta);
  const bool standard = layout.mode == ResidualMode::standard;
  const bool mhc = layout.mode == ResidualMode::mhc;
  auto sources_of = [&](const Tape<Scalar>& tape, int read) {
    std::vector<Matrix<Scalar>> values;
    for (const auto& source : layout.reads[static_cast<std::size_t>(read)])
      values.push_back(source_value(tape.outputs, source));
    return values;
  };
  auto pointers = [](const std::vector<Matrix<Scalar>>& values) {
    std::vector<const Matrix<Scalar>*> list;
    for (const auto& value : values) list.push_back(&value);
    return list;
  };

  // ---- Forward, keeping the tape.
  Tape<Scalar> tape;
  Matrix<Scalar> embedding(T, config.hidden_size);
  for (Eigen::Index t = 0; t < T; ++t)
    embedding.row(t) = model.embed_tokens.row(tokens[static_cast<std::size_t>(t)]);
  tape.outputs.push_back(std::move(embedding));
  std::vector<Matrix<Scalar>> streams;  // mHC state
  if (mhc) streams.assign(static_cast<std::size_t>(scheme.streams), tape.outputs.front());
  for (int r = 0; r <= L; ++r) {
    report_progress(progress, progress_base + static_cast<std::size_t>(r), progress_total,
                    "backward pass");
    Matrix<Scalar> h;
    if (standard) {
      h = tape.outputs.front();  // h_{r+1} = v_0 + sum_{i <= r} v_i
      for (int i = 1; i <= r; ++i) h += tape.outputs[static_cast<std::size_t>(i)];
    } else if (mhc) {
      if (r == L) {  // the final read: the mean of the streams
        h = Matrix<Scalar>::Zero(T, config.hidden_size);
        for (const auto& stream : streams) h += stream;
        h /= static_cast<Scalar>(scheme.streams);
      } else {
        tape.steps.push_back(mhc_coefficients(scheme, model.depth_read(r), streams, eps));
        tape.streams.push_back(streams);
        h = mhc_sublayer_input(tape.steps.back(), streams);
      }
    } else {
      const auto values = sources_of(tape, r);
      tape.reads.emplace_back();
      h = depth_read(scheme, model.depth_read(r), pointers(values), key_eps, &tape.reads.back());
    }
    if (r == L) {
      tape.final_hidden = std::move(h);
      break;
    }
    tape.outputs.push_back(sublayer_forward(model, r, h, rope));
    if (mhc) mhc_write(tape.steps.back(), tape.outputs.back(), streams);
    tape.inputs.push_back(std::move(h));
  }
  for (int r = 0; r < L; ++r)
    output_squares[static_cast<std::size_t>(r)] +=
        tape.outputs[static_cast<std::size_t>(r + 1)].squaredNorm();

  // ---- Loss: logits = RMSNorm(h_final) W_head^T, mean cross-entropy (loss_scale = 1 / predicted).
  const Matrix<Scalar> normalised = rms_norm(tape.final_hidden, model.norm, eps);
  const Matrix<Scalar> logits = normalised * model.lm_head.transpose();
  Matrix<Scalar> dlogits;
  out.loss += next_token_cross_entropy_sum(logits, tokens, &dlogits) * loss_scale;
  dlogits *= static_cast<Scalar>(loss_scale);
  out.grad.lm_head += dlogits.transpose() * normalised;
  Matrix<Scalar> dh = rms_norm_backward(tape.final_hidden, model.norm, eps,
                                        Matrix<Scalar>(dlogits * model.lm_head), &out.grad.norm);

  if (mhc) {
    // ---- mHC: d loss / d streams flows back through each write and read (docs/schemes.md).
    std::vector<Matrix<Scalar>> dstreams(static_cast<std::size_t>(scheme.streams),
                                         dh / static_cast<Scalar>(scheme.streams));
    for (int r = L - 1; r >= 0; --r) {
      report_progress(progress, progress_base + static_cast<std::size_t>(2 * L + 1 - r),
                      progress_total, "backward pass");
      const auto& step = tape.steps[static_cast<std::size_t>(r)];
      const Matrix<Scalar> dv = mhc_output_gradient(step, dstreams);
      grad_squares[static_cast<std::size_t>(r)] += dv.squaredNorm();
      const Matrix<Scalar> du =
          sublayer_backward(model, r, tape.inputs[static_cast<std::size_t>(r)], rope, dv, out.grad);
      mhc_step_backward(scheme, model.depth_read(r), tape.streams[static_cast<std::size_t>(r)],
                        step, tape.outputs[static_cast<std::size_t>(r + 1)], du, dstreams,
                        &out.grad.depth_read(r));
    }
    Matrix<Scalar> dembedding = Matrix<Scalar>::Zero(T, config.hidden_size);
    for (const auto& d : dstreams) dembedding += d;  // X_0 = m copies of v_0
    for (Eigen::Index t = 0; t < T; ++t)
      out.grad.embed_tokens.row(tokens[static_cast<std::size_t>(t)]) += dembedding.row(t);
    return;
  }

  // ---- Backward sweep over reads L .. 0. d loss / d v_{r+1} is complete once every later read
  // has passed its gradient back, which is exactly when read r's sublayer is reached.
  std::vector<Matrix<Scalar>> doutputs(static_cast<std::size_t>(L + 1),
                                       Matrix<Scalar>::Zero(T, config.hidden_size));
  for (int r = L; r >= 0; --r) {
    report_progress(progress, progress_base + static_cast<std::size_t>(2 * L + 1 - r),
                    progress_total, "backward pass");
    if (r < L) {
      const Matrix<Scalar>& dv = doutputs[static_cast<std::size_t>(r + 1)];
      grad_squares[static_cast<std::size_t>(r)] += dv.squaredNorm();
      dh =
          sublayer_backward(model, r, tape.inputs[static_cast<std::size_t>(r)], rope, dv, out.grad);
    }
    if (standard) {
      for (int i = 0; i <= r; ++i)
        doutputs[static_cast<std::size_t>(i)] += dh;  // h = sum of v_0 .. v_r
      continue;
    }
    const auto values = sources_of(tape, r);
    std::vector<Matrix<Scalar>> dsources;
    depth_read_backward(scheme, model.depth_read(r), pointers(values), key_eps,
                        tape.reads[static_cast<std::size_t>(r)], dh, &dsources,
                        &out.grad.depth_read(r));
    const auto& sources = layout.reads[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < sources.size(); ++i) {
      for (int member = sources[i].first_member; member <= sources[i].last_member; ++member) {
        doutputs[static_cast<std::size_t>(member)] +=
            dsources[i];  // a sum passes its gradient to every member
      }
    }
  }
  for (Eigen::Index t = 0; t < T; ++t)
    out.grad.embed_tokens.row(tokens[static_cast<std::size_t>(t)]) += doutputs.front().row(t);
}

}  // namespace

template <typename Scalar>
Gradients<Scalar> loss_and_gradients(const ModelWeights<Scalar>& model,
                                     const std::vector<std::vector<int>>& batch,
                                     const ForwardOptions& options) {
  Gradients<Scalar> out;
  model.config.require_gradients("gradients");
  out.predicted = check_training_batch(model.config, batch, "gradients");
  const AttnResConfig scheme = resolve_scheme(model.config, options);
  const DepthLayout layout =
      make_depth_layout(scheme, model.config.sublayers(), options.zero_placeholder);
  const int L = layout.sublayers;
  out.grad = zero_like(model);
  std::vector<double> output_squares(static_cast<std::size_t>(L), 0.0);
  std::vector<double> grad_squares(static_cast<std::size_t>(L), 0.0);
  double elements = 0.0;
  const std::size_t steps_per_sequence = static_cast<std::size_t>(2 * L + 2);
  for (std::size_t s = 0; s < batch.size(); ++s) {
    sequence_gradients(model, scheme, layout, batch[s], 1.0 / static_cast<double>(out.predicted),
                       options.progress, s * steps_per_sequence, batch.size() * steps_per_sequence,
                       out, output_squares, grad_squares);
    elements += static_cast<double>(batch[s].size()) * model.config.hidden_size;
  }
  for (int r = 0; r < L; ++r) {
    out.sublayer_output_rms.push_back(
        std::sqrt(output_squares[static_cast<std::size_t>(r)] / elements));
    out.sublayer_output_grad_rms.push_back(
        std::sqrt(grad_squares[static_cast<std::size_t>(r)] / elements));
  }
  return out;
}

#define ATTNRES_INSTANTIATE_BACKWARD(Scalar)                                                    \
  template ModelWeights<Scalar> zero_like(const ModelWeights<Scalar>&);                         \
  template double next_token_cross_entropy_sum(const Matrix<Scalar>&, const std::vector<int>&,  \
                                               Matrix<Scalar>*);                                \
  template double batch_loss(const ModelWeights<Scalar>&, const std::vector<std::vector<int>>&, \
                             const ForwardOptions&);                                            \
  template Gradients<Scalar> loss_and_gradients(                                                \
      const ModelWeights<Scalar>&, const std::vector<std::vector<int>>&, const ForwardOptions&);
ATTNRES_INSTANTIATE_BACKWARD(float)
ATTNRES_INSTANTIATE_BACKWARD(double)

}  // namespace attnres
