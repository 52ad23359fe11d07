#include "attnres/layers.hpp"

#include <cmath>
#include <limits>

#include "attnres/assert.hpp"
#include "attnres/error.hpp"

namespace attnres {

namespace {

// Row t of causal attention scores (T, T) -> the softmax over tokens 0..t. The masked entries are
// set to exactly 0 after the exponential: exp(-inf) is 0 in scalar code, but Eigen's vectorised exp
// clamps its input and gives about 1e-308 in some builds (the generic x86-64 one).
template <typename Scalar>
void causal_softmax_rows(Matrix<Scalar>& scores) {
  const Eigen::Index T = scores.rows();
  for (Eigen::Index t = 0; t < T; ++t) {
    auto row = scores.row(t);
    row.tail(T - t - 1).setConstant(-std::numeric_limits<Scalar>::infinity());
    row.array() = (row.array() - row.maxCoeff()).exp();
    row.tail(T - t - 1).setZero();
    row /= row.sum();
  }
}

}  // namespace

template <typename Scalar>
Matrix<Scalar> rms_norm(const Matrix<Scalar>& x, const Vector<Scalar>& gain, Scalar eps) {
  const Vector<Scalar> inv_rms = row_inverse_rms(x, eps);  // (T)
  return (x.array().colwise() * inv_rms.array()).rowwise() * gain.transpose().array();
}

template <typename Scalar>
void head_rms_norm(Matrix<Scalar>& x, int heads, const Vector<Scalar>& gain, Scalar eps) {
  if (gain.size() == 0) return;
  const Eigen::Index hd = gain.size();
  ATTNRES_ASSERT(x.cols() == heads * hd, "x holds heads x head_dim channels");
  for (int head = 0; head < heads; ++head) {
    const Matrix<Scalar> block = x.middleCols(head * hd, hd);
    x.middleCols(head * hd, hd) = rms_norm(block, gain, eps);
  }
}

template <typename Scalar>
RopeTable<Scalar> make_rope_table(int tokens, int head_dim, double theta) {
  const int half = head_dim / 2;
  RopeTable<Scalar> rope{Matrix<Scalar>(tokens, half), Matrix<Scalar>(tokens, half)};
  for (int i = 0; i < half; ++i) {
    const double inverse_frequency = std::pow(theta, -2.0 * i / head_dim);
    for (int pos = 0; pos < tokens; ++pos) {
      const double angle = pos * inverse_frequency;
      rope.cos(pos, i) = static_cast<Scalar>(std::cos(angle));
      rope.sin(pos, i) = static_cast<Scalar>(std::sin(angle));
    }
  }
  return rope;
}

template <typename Scalar>
void apply_rope(Matrix<Scalar>& x, int heads, const RopeTable<Scalar>& rope) {
  const Eigen::Index half = rope.cos.cols();
  // Eigen checks no sizes in a Release build: a table for other lengths would read out of bounds.
  ATTNRES_ASSERT(rope.cos.rows() == x.rows() && x.cols() == heads * 2 * half,
                 "the RoPE table covers x's tokens and head dimensions");
  for (int head = 0; head < heads; ++head) {
    auto first = x.middleCols(head * 2 * half, half);          // (T, hd/2)
    auto second = x.middleCols(head * 2 * half + half, half);  // (T, hd/2)
    // rotate_half(x) = [-x2, x1]: x1' = x1 cos - x2 sin, x2' = x2 cos + x1 sin.
    const Matrix<Scalar> x1 = first;
    first = (x1.array() * rope.cos.array() - second.array() * rope.sin.array()).matrix();
    second = (second.array() * rope.cos.array() + x1.array() * rope.sin.array()).matrix();
  }
}

template <typename Scalar>
Matrix<Scalar> attention_forward(const LayerWeights<Scalar>& layer, const ModelConfig& config,
                                 const Matrix<Scalar>& x, const RopeTable<Scalar>& rope) {
  const int heads = config.num_attention_heads;
  const int kv_heads = config.num_key_value_heads;
  const int head_dim = config.head_dim();
  const int group = heads / kv_heads;  // query heads per key/value head
  const Eigen::Index T = x.rows();
  // The model's loader checked every weight against the config; x comes from the residual stream.
  ATTNRES_ASSERT(x.cols() == layer.q_proj.cols() && layer.q_proj.rows() == heads * head_dim &&
                     layer.o_proj.cols() == heads * head_dim,
                 "the layer's projections agree with x and the config");
  Matrix<Scalar> q = x * layer.q_proj.transpose();        // (T, H * hd)
  Matrix<Scalar> k = x * layer.k_proj.transpose();        // (T, H_kv * hd)
  const Matrix<Scalar> v = x * layer.v_proj.transpose();  // (T, H_kv * hd)
  const auto eps = static_cast<Scalar>(config.rms_norm_eps);
  head_rms_norm(q, heads, layer.q_norm, eps);
  head_rms_norm(k, kv_heads, layer.k_norm, eps);
  apply_rope(q, heads, rope);
  apply_rope(k, kv_heads, rope);
  const Scalar scale = Scalar(1) / std::sqrt(static_cast<Scalar>(head_dim));
  Matrix<Scalar> context(T, heads * head_dim);  // (T, H * hd)
  for (int head = 0; head < heads; ++head) {
    const int kv_head = head / group;
    Matrix<Scalar> scores = q.middleCols(head * head_dim, head_dim) *
                            k.middleCols(kv_head * head_dim, head_dim).transpose() *
                            scale;  // (T, T)
    causal_softmax_rows(scores);
    context.middleCols(head * head_dim, head_dim) =
        scores * v.middleCols(kv_head * head_dim, head_dim);
  }
  return context * layer.o_proj.transpose();  // (T, d)
}

template <typename Scalar>
Matrix<Scalar> mlp_forward(const LayerWeights<Scalar>& layer, const Matrix<Scalar>& x) {
  const Matrix<Scalar> gate = x * layer.gate_proj.transpose();  // (T, F)
  const Matrix<Scalar> up = x * layer.up_proj.transpose();      // (T, F)
  const Matrix<Scalar> activated =
      (gate.array() / (Scalar(1) + (-gate.array()).exp()) * up.array()).matrix();  // silu(g) * u
  return activated * layer.down_proj.transpose();                                  // (T, d)
}

template <typename Scalar>
Matrix<Scalar> sublayer_forward(const ModelWeights<Scalar>& model, int sublayer,
                                const Matrix<Scalar>& h, const RopeTable<Scalar>& rope) {
  ATTNRES_ASSERT(sublayer >= 0 && static_cast<std::size_t>(sublayer / 2) < model.layers.size(),
                 "sublayer " + std::to_string(sublayer) + " exists");
  const auto& layer = model.layers[static_cast<std::size_t>(sublayer / 2)];
  const Scalar eps = static_cast<Scalar>(model.config.rms_norm_eps);
  if (sublayer % 2 == 0) {
    return attention_forward(layer, model.config, rms_norm(h, layer.input_layernorm, eps), rope);
  }
  return mlp_forward(layer, rms_norm(h, layer.post_attention_layernorm, eps));
}

Matrix<double> attention_probabilities(const ModelWeights<double>& model, int layer, int head,
                                       const Matrix<double>& h) {
  const ModelConfig& config = model.config;
  if (layer < 0 || layer >= config.num_hidden_layers || head < 0 ||
      head >= config.num_attention_heads) {
    throw Error("attention probabilities: layer " + std::to_string(layer) + " / head " +
                std::to_string(head) + " out of range");
  }
  if (h.cols() != config.hidden_size || h.rows() < 1) {
    throw Error("attention probabilities: the layer input must be (T, " +
                std::to_string(config.hidden_size) + ")");
  }
  const auto T = h.rows();
  const auto& weights = model.layers[static_cast<std::size_t>(layer)];
  const Matrix<double> x = rms_norm(h, weights.input_layernorm, config.rms_norm_eps);
  const int head_dim = config.head_dim();
  const int kv_head = head / (config.num_attention_heads / config.num_key_value_heads);
  Matrix<double> q = x * weights.q_proj.transpose();
  Matrix<double> k = x * weights.k_proj.transpose();
  const auto rope = make_rope_table<double>(static_cast<int>(T), head_dim, config.rope_theta);
  head_rms_norm(q, config.num_attention_heads, weights.q_norm, config.rms_norm_eps);
  head_rms_norm(k, config.num_key_value_heads, weights.k_norm, config.rms_norm_eps);
  apply_rope(q, config.num_attention_heads, rope);
  apply_rope(k, config.num_key_value_heads, rope);
  Matrix<double> scores = q.middleCols(head * head_dim, head_dim) *
                          k.middleCols(kv_head * head_dim, head_dim).transpose() /
                          std::sqrt(double(head_dim));
  causal_softmax_rows(scores);
  return scores;
}

template <typename Scalar>
Matrix<Scalar> rms_norm_backward(const Matrix<Scalar>& x, const Vector<Scalar>& gain, Scalar eps,
                                 const Matrix<Scalar>& dy, Vector<Scalar>* gain_grad) {
  // y = g * x * r with r = (mean(x^2) + eps)^(-1/2); dr/dx = -r^3 x / d.
  const Vector<Scalar> inv_rms = row_inverse_rms(x, eps);                              // (T)
  const Matrix<Scalar> normalised = (x.array().colwise() * inv_rms.array()).matrix();  // (T, d)
  if (gain_grad)
    *gain_grad += (dy.array() * normalised.array()).colwise().sum().transpose().matrix();
  const Matrix<Scalar> dn =
      (dy.array().rowwise() * gain.transpose().array()).matrix();  // d loss / d (x r)
  const Vector<Scalar> dot = (dn.array() * normalised.array()).rowwise().sum().matrix() /
                             static_cast<Scalar>(x.cols());  // (T)
  return ((dn.array() - normalised.array().colwise() * dot.array()).colwise() * inv_rms.array())
      .matrix();
}

template <typename Scalar>
void apply_rope_inverse(Matrix<Scalar>& x, int heads, const RopeTable<Scalar>& rope) {
  const RopeTable<Scalar> inverse{rope.cos, -rope.sin};
  apply_rope(x, heads, inverse);
}

template <typename Scalar>
Matrix<Scalar> attention_backward(const LayerWeights<Scalar>& layer, const ModelConfig& config,
                                  const Matrix<Scalar>& x, const RopeTable<Scalar>& rope,
                                  const Matrix<Scalar>& dout, LayerWeights<Scalar>& grad) {
  const int heads = config.num_attention_heads;
  const int kv_heads = config.num_key_value_heads;
  const int head_dim = config.head_dim();
  const int group = heads / kv_heads;
  const Eigen::Index T = x.rows();
  // Recompute the forward internals.
  Matrix<Scalar> q = x * layer.q_proj.transpose();
  Matrix<Scalar> k = x * layer.k_proj.transpose();
  const Matrix<Scalar> v = x * layer.v_proj.transpose();
  apply_rope(q, heads, rope);
  apply_rope(k, kv_heads, rope);
  const Scalar scale = Scalar(1) / std::sqrt(static_cast<Scalar>(head_dim));
  Matrix<Scalar> context(T, heads * head_dim);
  Matrix<Scalar> dq = Matrix<Scalar>::Zero(T, heads * head_dim);
  Matrix<Scalar> dk = Matrix<Scalar>::Zero(T, kv_heads * head_dim);
  Matrix<Scalar> dv = Matrix<Scalar>::Zero(T, kv_heads * head_dim);
  // out = context W_o^T.
  const Matrix<Scalar> dcontext = dout * layer.o_proj;  // (T, H hd)
  for (int head = 0; head < heads; ++head) {
    const int kv_head = head / group;
    const auto q_h = q.middleCols(head * head_dim, head_dim);
    const auto k_h = k.middleCols(kv_head * head_dim, head_dim);
    const auto v_h = v.middleCols(kv_head * head_dim, head_dim);
    Matrix<Scalar> p = q_h * k_h.transpose() * scale;  // (T, T) probabilities after the softmax
    causal_softmax_rows(p);
    context.middleCols(head * head_dim, head_dim) = p * v_h;
    const auto dcontext_h = dcontext.middleCols(head * head_dim, head_dim);
    dv.middleCols(kv_head * head_dim, head_dim) += p.transpose() * dcontext_h;
    const Matrix<Scalar> dp = dcontext_h * v_h.transpose();  // (T, T)
    // Softmax: ds = p * (dp - sum_j p_j dp_j); masked entries have p = 0.
    const Vector<Scalar> row_dot = (p.array() * dp.array()).rowwise().sum().matrix();
    const Matrix<Scalar> ds =
        (p.array() * (dp.array().colwise() - row_dot.array())).matrix() * scale;
    dq.middleCols(head * head_dim, head_dim) = ds * k_h;
    dk.middleCols(kv_head * head_dim, head_dim) += ds.transpose() * q_h;
  }
  grad.o_proj += dout.transpose() * context;
  apply_rope_inverse(dq, heads, rope);
  apply_rope_inverse(dk, kv_heads, rope);
  grad.q_proj += dq.transpose() * x;
  grad.k_proj += dk.transpose() * x;
  grad.v_proj += dv.transpose() * x;
  return dq * layer.q_proj + dk * layer.k_proj + dv * layer.v_proj;
}

template <typename Scalar>
Matrix<Scalar> mlp_backward(const LayerWeights<Scalar>& layer, const Matrix<Scalar>& x,
                            const Matrix<Scalar>& dout, LayerWeights<Scalar>& grad) {
  const Matrix<Scalar> gate = x * layer.gate_proj.transpose();  // (T, F)
  const Matrix<Scalar> up = x * layer.up_proj.transpose();      // (T, F)
  const auto sigmoid = (Scalar(1) / (Scalar(1) + (-gate.array()).exp())).eval();
  const auto silu = (gate.array() * sigmoid).eval();
  grad.down_proj += dout.transpose() * (silu * up.array()).matrix();
  const Matrix<Scalar> dactivated = dout * layer.down_proj;  // (T, F)
  const Matrix<Scalar> dup = (dactivated.array() * silu).matrix();
  // silu'(a) = s (1 + a (1 - s)).
  const Matrix<Scalar> dgate = (dactivated.array() * up.array() * sigmoid *
                                (Scalar(1) + gate.array() * (Scalar(1) - sigmoid)))
                                   .matrix();
  grad.gate_proj += dgate.transpose() * x;
  grad.up_proj += dup.transpose() * x;
  return dgate * layer.gate_proj + dup * layer.up_proj;
}

template <typename Scalar>
Matrix<Scalar> sublayer_backward(const ModelWeights<Scalar>& model, int sublayer,
                                 const Matrix<Scalar>& h, const RopeTable<Scalar>& rope,
                                 const Matrix<Scalar>& dv, ModelWeights<Scalar>& grad) {
  const auto index = static_cast<std::size_t>(sublayer / 2);
  const auto& layer = model.layers[index];
  auto& layer_grad = grad.layers[index];
  const Scalar eps = static_cast<Scalar>(model.config.rms_norm_eps);
  if (sublayer % 2 == 0) {
    const Matrix<Scalar> x = rms_norm(h, layer.input_layernorm, eps);
    const Matrix<Scalar> dx = attention_backward(layer, model.config, x, rope, dv, layer_grad);
    return rms_norm_backward(h, layer.input_layernorm, eps, dx, &layer_grad.input_layernorm);
  }
  const Matrix<Scalar> x = rms_norm(h, layer.post_attention_layernorm, eps);
  const Matrix<Scalar> dx = mlp_backward(layer, x, dv, layer_grad);
  return rms_norm_backward(h, layer.post_attention_layernorm, eps, dx,
                           &layer_grad.post_attention_layernorm);
}

#define ATTNRES_INSTANTIATE_LAYERS(Scalar)                                                        \
  template Matrix<Scalar> rms_norm(const Matrix<Scalar>&, const Vector<Scalar>&, Scalar);         \
  template RopeTable<Scalar> make_rope_table<Scalar>(int, int, double);                           \
  template void apply_rope(Matrix<Scalar>&, int, const RopeTable<Scalar>&);                       \
  template void head_rms_norm(Matrix<Scalar>&, int, const Vector<Scalar>&, Scalar);               \
  template Matrix<Scalar> attention_forward(const LayerWeights<Scalar>&, const ModelConfig&,      \
                                            const Matrix<Scalar>&, const RopeTable<Scalar>&);     \
  template Matrix<Scalar> mlp_forward(const LayerWeights<Scalar>&, const Matrix<Scalar>&);        \
  template Matrix<Scalar> sublayer_forward(const ModelWeights<Scalar>&, int,                      \
                                           const Matrix<Scalar>&, const RopeTable<Scalar>&);      \
  template Matrix<Scalar> rms_norm_backward(const Matrix<Scalar>&, const Vector<Scalar>&, Scalar, \
                                            const Matrix<Scalar>&, Vector<Scalar>*);              \
  template void apply_rope_inverse(Matrix<Scalar>&, int, const RopeTable<Scalar>&);               \
  template Matrix<Scalar> attention_backward(const LayerWeights<Scalar>&, const ModelConfig&,     \
                                             const Matrix<Scalar>&, const RopeTable<Scalar>&,     \
                                             const Matrix<Scalar>&, LayerWeights<Scalar>&);       \
  template Matrix<Scalar> mlp_backward(const LayerWeights<Scalar>&, const Matrix<Scalar>&,        \
                                       const Matrix<Scalar>&, LayerWeights<Scalar>&);             \
  template Matrix<Scalar> sublayer_backward(const ModelWeights<Scalar>&, int,                     \
                                            const Matrix<Scalar>&, const RopeTable<Scalar>&,      \
                                            const Matrix<Scalar>&, ModelWeights<Scalar>&);
ATTNRES_INSTANTIATE_LAYERS(float)
ATTNRES_INSTANTIATE_LAYERS(double)

}  // namespace attnres
