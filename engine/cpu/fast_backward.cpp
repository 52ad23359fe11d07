// The fast CPU backward pass (docs/training.md, docs/engines.md): the contract of
// attnres::loss_and_gradients (core/model/src/backward.cpp, the oracle), computed with
//   - a tape: the forward keeps what the backward sweep needs (each sublayer's normalised input
//     and inverse RMS, the roped (q|k|v), the context and each row's log-sum-exp of every head,
//     the (gate|up) pre-activations and silu(gate) * up), so nothing is recomputed but the
//     attention probabilities of one tile at a time (one small GEMM against a row's stored
//     log-sum-exp);
//   - fused weights, concatenated once per call: one (q|k|v) GEMM and one (gate|up) GEMM per
//     layer, forward and backward; the gradient of a fused weight is split at the end;
//   - causal attention by 64-row query tiles over the key columns up to the tile's last row only
//     (the masked upper triangle is never computed), grouped-query heads sharing their k/v;
//   - depth reads with the two-phase schedule (phase 1 per schedule group with the group's
//     queries stacked over the shared history, phase 2 merging the group's own sources), the
//     weights alpha of every read kept for the backward, and one inverse RMS per source value;
//   - the backward of a read by depth_attention_backward's formula, one pass per token over its
//     sources with the stored inverse RMS; the standard residual by its running sum (d loss / d
//     v_l is the sum of the gradients of every later read), Block AttnRes by one accumulator per
//     block: a block summary's or partial sum's gradient is the gradient of each member, so the
//     block's accumulator *is* d loss / d v of the member being processed;
//   - the batch's sequences split over the thread pool in contiguous chunks (a batch that would
//     leave half the pool idle runs its sequences in turn, each matrix product split by rows over
//     the pool); each worker owns its
//     workspace (grown, never shrunk: no allocation inside the layer loop) and its gradient
//     buffers, summed in worker order at the end: bit-identical results for a given thread count.
//
// Files: fast_backward_state.hpp (the plan, the fused weights, a worker's tape and gradients),
// fast_backward_layers.cpp (the sublayers), fast_backward_depth.cpp (the depth reads), and this
// one: the plan of a call, one sequence's forward, loss and backward sweep, and the driver that
// splits the batch over the workers and sums their gradients.
#include "cpu/fast_backward.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <mutex>

#include "attnres/cancel.hpp"
#include "attnres/depth_read.hpp"
#include "attnres/error.hpp"
#include "attnres/forward_steps.hpp"
#include "attnres/kernels.hpp"
#include "attnres/tensor.hpp"
#include "cpu/eigen_maps.hpp"
#include "cpu/fast_backward_state.hpp"
#include "cpu/thread_pool.hpp"

namespace attnres::engine {

namespace backward {

Plan make_plan(const ModelConfig& config, const ForwardOptions& options) {
  Plan plan;
  plan.scheme = resolve_scheme(config, options);
  plan.layout = make_depth_layout(plan.scheme, config.sublayers(), options.zero_placeholder);
  const DepthLayout& layout = plan.layout;
  const int L = layout.sublayers;
  plan.standard = layout.mode == ResidualMode::standard;
  plan.block = layout.mode == ResidualMode::block;
  plan.output_slot.assign(static_cast<std::size_t>(L), 0);
  if (plan.standard) return plan;
  if (layout.mode == ResidualMode::mhc) {
    plan.mhc = true;
    plan.streams = plan.scheme.streams;
    plan.coefficients = 2 * plan.streams + plan.streams * plan.streams;
    return plan;
  }
  plan.zoo = !plan.scheme.paper_defaults();
  if (plan.zoo) {
    plan.two_phase = plan.scheme.two_phase_limit().empty();
    plan.input_query = plan.scheme.uses_query() && plan.scheme.query_source == QuerySource::input;
    plan.heads = depth_read_heads(plan.scheme);
  }
  const int N = layout.blocks;
  plan.values = plan.block ? N + 1 + L + 1 : L + 1;
  plan.slots = plan.block ? N + 1 : L + 1;
  plan.zero_value = plan.block ? N + 1 + L : -1;
  for (int r = 0; r < L; ++r)
    plan.output_slot[static_cast<std::size_t>(r)] =
        plan.block ? layout.block_of_sublayer(r + 1) : r + 1;
  const std::vector<int> group_of = schedule_groups(layout, options);
  plan.read_value.resize(static_cast<std::size_t>(L + 1));
  plan.read_slot.resize(static_cast<std::size_t>(L + 1));
  plan.partial_of_read.assign(static_cast<std::size_t>(L + 1), -1);
  plan.group_first.resize(static_cast<std::size_t>(L + 1));
  plan.group_last.resize(static_cast<std::size_t>(L + 1));
  plan.group_shared.resize(static_cast<std::size_t>(L + 1));
  for (int r = 0; r <= L; ++r) {
    const auto ru = static_cast<std::size_t>(r);
    for (const DepthSource& source : layout.reads[ru]) {
      int value = 0, slot = 0;
      switch (source.kind) {
        case DepthSource::Kind::embedding:
          value = slot = 0;
          break;
        case DepthSource::Kind::sublayer_output:
          value = slot = source.first_member;
          break;
        case DepthSource::Kind::block:
          value = slot = source.block;
          break;
        case DepthSource::Kind::partial_block:
          value = N + 1 + r;
          slot = source.block;
          plan.partial_of_read[ru] = source.block;
          break;
        case DepthSource::Kind::zero_placeholder:
          value = plan.zero_value;
          slot = -1;
          break;
      }
      plan.read_value[ru].push_back(value);
      plan.read_slot[ru].push_back(slot);
    }
    plan.max_sources = std::max<Eigen::Index>(plan.max_sources,
                                              static_cast<Eigen::Index>(layout.reads[ru].size()));
    int first = r, last = r;
    while (first > 0 && group_of[static_cast<std::size_t>(first - 1)] == group_of[ru]) --first;
    while (last < L && group_of[static_cast<std::size_t>(last + 1)] == group_of[ru]) ++last;
    plan.group_first[ru] = first;
    plan.group_last[ru] = last;
    plan.group_shared[ru] = static_cast<int>(shared_history(layout, first, last));
    plan.max_group = std::max<Eigen::Index>(plan.max_group, last - first + 1);
    plan.max_shared = std::max<Eigen::Index>(plan.max_shared, plan.group_shared[ru]);
  }
  return plan;
}

}  // namespace backward

namespace {

using backward::Context;
using backward::DepthSteps;
using backward::LayerSteps;
using backward::make_plan;
using backward::norm_backward;
using backward::norm_forward;
using backward::Plan;
using backward::Prepared;
using backward::Shape;
using backward::Worker;

// One sequence on one worker: the forward keeping the tape, the loss, the backward sweep.
template <typename Scalar>
struct SequenceRun {
  const Context<Scalar>& c;
  Worker<Scalar>& w;
  Eigen::Index T;
  const std::vector<int>& tokens;
  const std::function<void()>& step;  // progress (throws Cancelled)
  LayerSteps<Scalar> layers{c, w, T};
  DepthSteps<Scalar> depth{c, w, T};

  void run() {
    forward_with_tape();
    loss_and_head_backward();
    backward_sweep();
  }

  void add(Scalar* target, const Scalar* source) {
    VectorMap<Scalar>(target, T * c.s.d) += ConstVectorMap<Scalar>(source, T * c.s.d);
  }
  double squares(const Scalar* data) const {
    const Eigen::Index d = c.s.d;
    double sum = 0.0;
    for (Eigen::Index t = 0; t < T; ++t)
      sum += ConstVectorMap<Scalar>(data + t * d, d).template cast<double>().squaredNorm();
    return sum;
  }

  // Forward, keeping the tape; w.h ends as the final read's output (the final hidden state).
  void forward_with_tape() {
    const Plan& plan = c.plan;
    const int L = c.s.L;
    const Eigen::Index d = c.s.d;
    const auto plane = static_cast<std::size_t>(T * d);
    Scalar* embedding = plan.standard || plan.mhc ? w.h : w.value[0];
    for (Eigen::Index t = 0; t < T; ++t) {
      const auto row = c.model.embed_tokens.row(tokens[static_cast<std::size_t>(t)]);
      std::copy(row.data(), row.data() + d, embedding + t * d);
    }
    if (plan.mhc) {  // m streams (docs/schemes.md "mHC")
      depth.mhc_start(w.h);
      for (int r = 0; r < L; ++r) {
        step();
        depth.mhc_read(r, w.h);
        Scalar* v = w.mhc_v[static_cast<std::size_t>(r)];
        layers.sublayer_forward(r, w.h, v);
        w.output_squares[static_cast<std::size_t>(r)] += squares(v);
        depth.mhc_write(r);
      }
      step();
      depth.mhc_final(w.h);
      return;
    }
    if (!plan.standard) {
      depth.set_inverse_rms(0);
      if (plan.zero_value >= 0) {
        std::fill(w.value[static_cast<std::size_t>(plan.zero_value)],
                  w.value[static_cast<std::size_t>(plan.zero_value)] + plane, Scalar(0));
        depth.set_inverse_rms(plan.zero_value);
      }
      if (plan.block)
        std::fill(w.value[1], w.value[1] + plane, Scalar(0));  // block 1's partial sum
    }
    for (int r = 0; r <= L; ++r) {
      step();
      if (plan.standard) {
        if (r == L) break;  // h is the final hidden state
        layers.sublayer_forward(r, w.h, w.v);
        w.output_squares[static_cast<std::size_t>(r)] += squares(w.v);
        add(w.h, w.v);
        continue;
      }
      const int partial = plan.partial_of_read[static_cast<std::size_t>(r)];
      if (partial >= 0) {  // the partial sum as this read sees it
        const int copy = plan.read_value[static_cast<std::size_t>(r)].back();
        std::copy(w.value[static_cast<std::size_t>(partial)],
                  w.value[static_cast<std::size_t>(partial)] + plane,
                  w.value[static_cast<std::size_t>(copy)]);
        depth.set_inverse_rms(copy);
      }
      depth.read_forward(r, w.h);
      if (r == L) break;
      const int sublayer = r + 1;  // 1-based
      if (!plan.block) {
        layers.sublayer_forward(r, w.h, w.value[static_cast<std::size_t>(sublayer)]);
        w.output_squares[static_cast<std::size_t>(r)] +=
            squares(w.value[static_cast<std::size_t>(sublayer)]);
        depth.set_inverse_rms(sublayer);
      } else {
        const int n = plan.layout.block_of_sublayer(sublayer);
        layers.sublayer_forward(r, w.h, w.v);
        w.output_squares[static_cast<std::size_t>(r)] += squares(w.v);
        add(w.value[static_cast<std::size_t>(n)], w.v);
        if (sublayer % plan.layout.block_size == 0 || sublayer == L) {  // block n complete: b_n
          depth.set_inverse_rms(n);
          if (sublayer < L)
            std::fill(w.value[static_cast<std::size_t>(n + 1)],
                      w.value[static_cast<std::size_t>(n + 1)] + plane, Scalar(0));
        }
      }
    }
  }

  // Loss: logits = RMSNorm(h_final) W_head^T, next-token cross-entropy; w.dh = d loss / d h_final.
  void loss_and_head_backward() {
    const Shape& s = c.s;
    const int L = s.L;
    const Eigen::Index d = s.d;
    const auto Lu = static_cast<std::size_t>(L);
    norm_forward(w.h, c.model.norm, c.eps, T, d, w.inv[Lu], w.nhat[Lu], w.x[Lu]);
    Map<Scalar> logits(w.logits, T, s.vocab);
    w.product(w.logits, s.vocab, plain(w.x[Lu], T, d),
              transpose(c.model.lm_head, &c.prepared.lm_head16));
    double sum = 0.0;
    const auto loss_scale = static_cast<Scalar>(c.loss_scale);
    for (Eigen::Index p = 0; p < T; ++p) {
      auto row = logits.row(p);
      if (p + 1 == T) {
        row.setZero();  // the last position predicts nothing
        break;
      }
      const Scalar top = row.maxCoeff();
      const Scalar log_sum_exp = top + std::log((row.array() - top).exp().sum());
      const int target = tokens[static_cast<std::size_t>(p + 1)];
      sum += static_cast<double>(log_sum_exp - row(target));
      row = (row.array() - log_sum_exp).exp().matrix();  // softmax
      row(target) -= Scalar(1);
      row *= loss_scale;
    }
    w.loss += sum * c.loss_scale;
    w.product(w.grad.lm_head.data(), d, transpose(w.logits, T, s.vocab), plain(w.x[Lu], T, d),
              true);
    w.product(w.dx, d, plain(w.logits, T, s.vocab), plain(c.model.lm_head, &c.prepared.lm_head16));
    norm_backward(w.dx, w.inv[Lu], w.nhat[Lu], c.model.norm, T, d, w.dh, w.grad.norm);
  }

  // Backward sweep over reads L .. 0 (core/model/src/backward.cpp): when sublayer r is reached
  // every later read has passed its gradient back, so its output's slot holds d loss / d v_{r+1}.
  void backward_sweep() {
    const Plan& plan = c.plan;
    const int L = c.s.L;
    const Eigen::Index d = c.s.d;
    const auto plane = static_cast<std::size_t>(T * d);
    for (int slot = 0; slot < plan.slots; ++slot) {
      std::fill(w.dacc[static_cast<std::size_t>(slot)],
                w.dacc[static_cast<std::size_t>(slot)] + plane, Scalar(0));
    }
    if (plan.mhc) {  // back through each write and read of the streams
      depth.mhc_final_backward(w.dh);
      step();
      for (int r = L - 1; r >= 0; --r) {
        step();
        const Scalar* dv = depth.mhc_output_gradient(r);
        w.grad_squares[static_cast<std::size_t>(r)] += squares(dv);
        layers.sublayer_backward(r, dv, w.dh);
        depth.mhc_step_backward(r, w.dh);
      }
      depth.mhc_embedding_gradient(w.dacc[0]);
    }
    for (int r = plan.mhc ? -1 : L; r >= 0; --r) {  // (mHC's sweep is above)
      step();
      if (r < L) {
        const Scalar* dv =
            w.dacc[static_cast<std::size_t>(plan.output_slot[static_cast<std::size_t>(r)])];
        w.grad_squares[static_cast<std::size_t>(r)] += squares(dv);
        layers.sublayer_backward(r, dv, w.dh);
      }
      if (plan.standard) {
        add(w.dacc[0], w.dh);  // h_r = v_0 + .. + v_r: the running sum of the read gradients
      } else {
        depth.read_backward(r, w.dh);
      }
    }
    for (Eigen::Index t = 0; t < T; ++t) {
      w.grad.embed_tokens.row(tokens[static_cast<std::size_t>(t)]) +=
          ConstVectorMap<Scalar>(w.dacc[0] + t * d, d).transpose();
    }
  }
};

// Whether a batch of `sequences` on `threads` workers splits each product over the pool rather
// than the sequences (when at least half the workers would be idle).
bool split_products(std::size_t sequences, int threads) {
  return threads > 1 && 2 * sequences <= static_cast<std::size_t>(threads);
}

template <typename Scalar>
void zero(ModelWeights<Scalar>& weights) {
  visit_tensors(weights, [](const TensorRef<Scalar>& tensor) {
    std::fill(tensor.data, tensor.data + tensor.element_count(), Scalar(0));
  });
}

// Whether two models have the same tensors (visit_tensors only reads the shapes here).
template <typename Scalar>
bool same_shapes(const ModelWeights<Scalar>& a, const ModelWeights<Scalar>& b) {
  if (a.layers.size() != b.layers.size()) return false;
  std::vector<std::vector<std::int64_t>> shapes_a, shapes_b;
  visit_tensors(const_cast<ModelWeights<Scalar>&>(a),
                [&](const TensorRef<Scalar>& tensor) { shapes_a.push_back(tensor.shape); });
  visit_tensors(const_cast<ModelWeights<Scalar>&>(b),
                [&](const TensorRef<Scalar>& tensor) { shapes_b.push_back(tensor.shape); });
  return shapes_a == shapes_b;
}

}  // namespace

template <typename Scalar>
struct FastBackward<Scalar>::State {
  ThreadPool pool;
  std::vector<Worker<Scalar>> workers;
  Prepared<Scalar> prepared;
  std::mutex progress_mutex;
  std::size_t progress_done = 0;
  std::atomic<bool> stop{false};
  bool bf16 = false;  // the products take bf16 inputs (matmul.hpp)
  State(int threads, bool bf16_inputs)
      : pool(threads), workers(static_cast<std::size_t>(pool.size())), bf16(bf16_inputs) {
    for (auto& w : workers) w.matmul = Matmul(bf16);
  }

  // Fused weights and effective queries, once per call (the model changes between steps).
  void prepare_weights(const ModelWeights<Scalar>& model, const Shape& shape) {
    const int L = shape.L;
    prepared.qkv.resize(model.layers.size());
    prepared.gate_up.resize(model.layers.size());
    for (auto* list : {&prepared.qkv16, &prepared.gate_up16, &prepared.o16, &prepared.down16})
      list->resize(model.layers.size());
    pool.parallel_for(model.layers.size(), [&](std::size_t begin, std::size_t end, int) {
      for (std::size_t i = begin; i < end; ++i) {
        const LayerWeights<Scalar>& layer = model.layers[i];
        prepared.qkv[i].resize(shape.qkvc, shape.d);
        prepared.qkv[i] << layer.q_proj, layer.k_proj, layer.v_proj;
        prepared.gate_up[i].resize(2 * shape.F, shape.d);
        prepared.gate_up[i] << layer.gate_proj, layer.up_proj;
        if constexpr (std::is_same_v<Scalar, float>) {
          if (bf16) {
            prepared.qkv16[i] = to_bf16(prepared.qkv[i]);
            prepared.gate_up16[i] = to_bf16(prepared.gate_up[i]);
            prepared.o16[i] = to_bf16(layer.o_proj);
            prepared.down16[i] = to_bf16(layer.down_proj);
          }
        }
      }
    });
    if constexpr (std::is_same_v<Scalar, float>) {
      if (bf16) prepared.lm_head16 = to_bf16(model.lm_head);
    }
    prepared.queries.resize(L + 1, shape.d);
    for (int r = 0; r <= L; ++r) {
      const auto& read = model.depth_read(r);
      if (model.config.attn_res.key_norm) {
        prepared.queries.row(r) = read.query.cwiseProduct(read.key_norm_gain).transpose();
      } else {
        prepared.queries.row(r) = read.query.transpose();  // no key norm: the query itself
      }
    }
    prepared.mhc_bias.clear();
    prepared.mhc_proj.clear();
    if (model.config.attn_res.mode == ResidualMode::mhc) {
      prepared.mhc_bias.resize(static_cast<std::size_t>(L));
      prepared.mhc_proj.resize(static_cast<std::size_t>(L));
      for (int r = 0; r < L; ++r) {
        cpu::mhc_stack_weights(model.config.attn_res, model.depth_read(r),
                               prepared.mhc_bias[static_cast<std::size_t>(r)],
                               prepared.mhc_proj[static_cast<std::size_t>(r)]);
      }
    }
  }

  // The first `parts` workers' gradients and sums zeroed for this call.
  void reset_workers(const ModelWeights<Scalar>& model, const Shape& shape, const Plan& plan,
                     int parts) {
    const ModelConfig& config = model.config;
    const auto Lu = static_cast<std::size_t>(shape.L);
    for (int k = 0; k < parts; ++k) {
      Worker<Scalar>& w = workers[static_cast<std::size_t>(k)];
      if (!same_shapes(w.grad, model)) {
        w.grad = zero_like(model);
        w.dqkv_w.assign(model.layers.size(), Matrix<Scalar>(shape.qkvc, shape.d));
        w.dgate_up_w.assign(model.layers.size(), Matrix<Scalar>(2 * shape.F, shape.d));
      }
      w.grad.config = config;
      w.grad.has_attn_res_tensors = model.has_attn_res_tensors;
      zero(w.grad);
      for (auto& g : w.dqkv_w) g.setZero();
      for (auto& g : w.dgate_up_w) g.setZero();
      w.dquery.resize(shape.d);
      w.dalpha.resize(plan.max_sources * plan.heads);
      w.dscore.resize(plan.max_sources * plan.heads);
      w.zoo_sources.resize(static_cast<std::size_t>(plan.max_sources));
      w.loss = 0.0;
      w.output_squares.assign(Lu, 0.0);
      w.grad_squares.assign(Lu, 0.0);
      w.theta = config.rope_theta;
    }
  }

  // Each worker's fused (q|k|v) and (gate|up) gradients split into the projections' gradients.
  void split_fused_gradients(const ModelWeights<Scalar>& model, const Shape& shape, int parts) {
    pool.parallel_for(static_cast<std::size_t>(parts),
                      [&](std::size_t begin, std::size_t end, int) {
                        for (std::size_t k = begin; k < end; ++k) {
                          Worker<Scalar>& w = workers[k];
                          for (std::size_t i = 0; i < model.layers.size(); ++i) {
                            LayerWeights<Scalar>& g = w.grad.layers[i];
                            g.q_proj = w.dqkv_w[i].topRows(shape.qc);
                            g.k_proj = w.dqkv_w[i].middleRows(shape.qc, shape.kvc);
                            g.v_proj = w.dqkv_w[i].bottomRows(shape.kvc);
                            g.gate_proj = w.dgate_up_w[i].topRows(shape.F);
                            g.up_proj = w.dgate_up_w[i].bottomRows(shape.F);
                          }
                        }
                      });
  }

  // out.grad = the workers' gradients summed tensor by tensor (in parallel over tensors); each
  // element is summed in worker order.
  void sum_gradients(const ModelWeights<Scalar>& model, int parts, Gradients<Scalar>& out) {
    if (!same_shapes(out.grad, model)) out.grad = zero_like(model);
    out.grad.config = model.config;
    out.grad.has_attn_res_tensors = model.has_attn_res_tensors;
    std::vector<Scalar*> targets;
    visit_tensors(out.grad,
                  [&](const TensorRef<Scalar>& tensor) { targets.push_back(tensor.data); });
    std::vector<std::vector<const Scalar*>> sources(static_cast<std::size_t>(parts));
    std::vector<std::int64_t> counts;
    for (int k = 0; k < parts; ++k) {
      visit_tensors(workers[static_cast<std::size_t>(k)].grad,
                    [&](const TensorRef<Scalar>& tensor) {
                      sources[static_cast<std::size_t>(k)].push_back(tensor.data);
                      if (k == 0) counts.push_back(tensor.element_count());
                    });
    }
    pool.parallel_for(targets.size(), [&](std::size_t begin, std::size_t end, int) {
      for (std::size_t i = begin; i < end; ++i) {
        VectorMap<Scalar> target(targets[i], counts[i]);
        target = ConstVectorMap<Scalar>(sources[0][i], counts[i]);
        for (int k = 1; k < parts; ++k)
          target += ConstVectorMap<Scalar>(sources[static_cast<std::size_t>(k)][i], counts[i]);
      }
    });
  }

  // out's loss and RMS statistics from the workers' sums, in worker order.
  void sum_statistics(const std::vector<std::vector<int>>& batch, const Shape& shape, int parts,
                      Gradients<Scalar>& out) {
    const auto Lu = static_cast<std::size_t>(shape.L);
    Worker<Scalar>& first = workers[0];
    out.loss = first.loss;
    std::vector<double> output_squares = first.output_squares, grad_squares = first.grad_squares;
    for (int k = 1; k < parts; ++k) {
      const Worker<Scalar>& w = workers[static_cast<std::size_t>(k)];
      out.loss += w.loss;
      for (std::size_t r = 0; r < Lu; ++r) {
        output_squares[r] += w.output_squares[r];
        grad_squares[r] += w.grad_squares[r];
      }
    }
    double elements = 0.0;
    for (const auto& tokens : batch)
      elements += static_cast<double>(tokens.size()) * static_cast<double>(shape.d);
    out.sublayer_output_rms.resize(Lu);
    out.sublayer_output_grad_rms.resize(Lu);
    for (std::size_t r = 0; r < Lu; ++r) {
      out.sublayer_output_rms[r] = std::sqrt(output_squares[r] / elements);
      out.sublayer_output_grad_rms[r] = std::sqrt(grad_squares[r] / elements);
    }
  }
};

template <typename Scalar>
FastBackward<Scalar>::FastBackward(const ModelConfig&, int threads, bool bf16)
    : state_(std::make_unique<State>(threads, bf16)) {}

template <typename Scalar>
FastBackward<Scalar>::~FastBackward() = default;

template <typename Scalar>
int FastBackward<Scalar>::threads() const {
  return state_->pool.size();
}

template <typename Scalar>
void FastBackward<Scalar>::compute(const ModelWeights<Scalar>& model,
                                   const std::vector<std::vector<int>>& batch,
                                   const ForwardOptions& options, Gradients<Scalar>& out) {
  State& state = *state_;
  const ModelConfig& config = model.config;
  config.require_gradients("gradients");
  const std::int64_t predicted = check_training_batch(config, batch, "gradients");
  const Plan plan = make_plan(config, options);
  const Shape shape(config);
  const int L = shape.L;

  state.prepare_weights(model, shape);
  // Workers: contiguous chunks of the batch, at most one per sequence (one in all when the
  // products are split).
  const int parts = split_products(batch.size(), state.pool.size())
                        ? 1
                        : static_cast<int>(std::min<std::size_t>(
                              static_cast<std::size_t>(state.pool.size()), batch.size()));
  state.reset_workers(model, shape, plan, parts);

  const Context<Scalar> context{model,
                                shape,
                                plan,
                                state.prepared,
                                static_cast<Scalar>(config.rms_norm_eps),
                                static_cast<Scalar>(config.attn_res.key_norm_eps),
                                Scalar(1) / std::sqrt(static_cast<Scalar>(shape.hd)),
                                1.0 / static_cast<double>(predicted)};
  const std::size_t total = batch.size() * static_cast<std::size_t>(2 * L + 2);
  state.progress_done = 0;
  state.stop.store(false);
  // Progress (options.progress) is called under a lock, with a running count of the steps of
  // every worker; a cancelled step stops the other workers at their next step.
  auto step = [&] {
    if (state.stop.load(std::memory_order_relaxed)) throw Cancelled("backward pass cancelled");
    if (!options.progress) return;
    std::lock_guard<std::mutex> lock(state.progress_mutex);
    try {
      report_progress(options.progress, state.progress_done++, total, "backward pass");
    } catch (...) {
      state.stop.store(true);
      throw;
    }
  };
  const std::function<void()> step_function = step;
  auto run_sequences = [&](std::size_t begin, std::size_t end, int worker) {
    Worker<Scalar>& w = state.workers[static_cast<std::size_t>(worker)];
    for (std::size_t b = begin; b < end; ++b) {
      const auto T = static_cast<Eigen::Index>(batch[b].size());
      w.carve(shape, plan, T);
      SequenceRun<Scalar>{context, w, T, batch[b], step_function}.run();
    }
  };
  // A batch that would leave at least half the pool idle runs its sequences one after another on
  // worker 0, its matrix products split by rows over the pool; else sequences split the pool.
  Worker<Scalar>& first = state.workers[0];
  if (split_products(batch.size(), state.pool.size())) {
    first.split_pool = &state.pool;
    first.team = &state.workers;
    try {
      run_sequences(0, batch.size(), 0);
    } catch (...) {
      first.split_pool = nullptr;
      throw;
    }
    first.split_pool = nullptr;
  } else {
    state.pool.parallel_for(batch.size(), run_sequences);
  }

  // Split the fused gradients, then sum the workers in order.
  state.split_fused_gradients(model, shape, parts);
  state.sum_gradients(model, parts, out);
  state.sum_statistics(batch, shape, parts, out);
  out.predicted = predicted;
}

template class FastBackward<float>;
template class FastBackward<double>;

}  // namespace attnres::engine
