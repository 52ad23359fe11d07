// Template definitions for model.hpp (included from there).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "attnres/depth_layout.hpp"

namespace attnres {

template <typename Scalar>
const DepthReadWeights<Scalar>& ModelWeights<Scalar>::depth_read(int read) const {
  if (read == config.sublayers()) return final_res;
  const auto& layer = layers[static_cast<std::size_t>(read / 2)];
  return read % 2 == 0 ? layer.attn_res : layer.mlp_res;
}

template <typename Scalar>
DepthReadWeights<Scalar>& ModelWeights<Scalar>::depth_read(int read) {
  return const_cast<DepthReadWeights<Scalar>&>(std::as_const(*this).depth_read(read));
}

template <typename Scalar>
ModelWeights<Scalar> allocate_model(const ModelConfig& config) {
  const Eigen::Index d = config.hidden_size;
  const Eigen::Index hd = config.head_dim();
  const Eigen::Index q_width = config.num_attention_heads * hd;
  const Eigen::Index kv_width = config.num_key_value_heads * hd;
  const Eigen::Index ffn = config.intermediate_size;
  const Eigen::Index vocab = config.vocab_size;
  const AttnResConfig& scheme = config.attn_res;
  const DepthLayout layout = make_depth_layout(scheme, config.sublayers());
  // Read r's tensors at their documented start (docs/schemes.md).
  auto read_weights = [&](int read) {
    DepthReadWeights<Scalar> r;
    r.query = Vector<Scalar>::Zero(d);
    r.key_norm_gain = Vector<Scalar>::Ones(d);
    if (scheme.uses_query() && scheme.query_source == QuerySource::input)
      r.query_proj = Matrix<Scalar>::Zero(d, d);
    const auto sources =
        layout.reads.empty()
            ? Eigen::Index{0}
            : static_cast<Eigen::Index>(layout.reads[static_cast<std::size_t>(read)].size());
    if (scheme.attention_mode() && scheme.mixing == DepthMixing::scalars)
      r.mix = Vector<Scalar>::Zero(sources);
    if (scheme.mode == ResidualMode::denseformer) r.mix = Vector<Scalar>::Ones(sources);
    if (scheme.mode == ResidualMode::mhc && read < config.sublayers()) {
      const Eigen::Index m = scheme.streams;
      // H_pre = sigmoid(b_pre) reads mostly stream read mod m, with weights summing to 1.
      const auto streams = static_cast<double>(m);
      r.pre_bias =
          Vector<Scalar>::Constant(m, static_cast<Scalar>(std::log(1.0 / (2.0 * streams - 1.0))));
      const double main_weight = (streams + 1.0) / (2.0 * streams);
      const double main_logit = m == 1 ? 37.0 : std::log(main_weight / (1.0 - main_weight));
      r.pre_bias(read % m) = static_cast<Scalar>(main_logit);
      r.post_bias = Vector<Scalar>::Zero(m);  // H_post = 2 sigmoid(0) = 1
      r.res_bias = Matrix<Scalar>::Identity(m, m) * static_cast<Scalar>(4);  // H_res close to I
      if (scheme.dynamic) {
        r.pre_proj = Matrix<Scalar>::Zero(m, m * d);
        r.post_proj = Matrix<Scalar>::Zero(m, m * d);
        r.res_proj = Matrix<Scalar>::Zero(m * m, m * d);
      }
    }
    return r;
  };
  ModelWeights<Scalar> model;
  model.config = config;
  model.embed_tokens = Matrix<Scalar>::Zero(vocab, d);
  for (int i = 0; i < config.num_hidden_layers; ++i) {
    LayerWeights<Scalar> layer;
    layer.input_layernorm = Vector<Scalar>::Ones(d);
    layer.q_proj = Matrix<Scalar>::Zero(q_width, d);
    layer.k_proj = Matrix<Scalar>::Zero(kv_width, d);
    layer.v_proj = Matrix<Scalar>::Zero(kv_width, d);
    layer.o_proj = Matrix<Scalar>::Zero(d, q_width);
    if (config.qk_norm) {
      layer.q_norm = Vector<Scalar>::Ones(hd);
      layer.k_norm = Vector<Scalar>::Ones(hd);
    }
    layer.post_attention_layernorm = Vector<Scalar>::Ones(d);
    layer.gate_proj = Matrix<Scalar>::Zero(ffn, d);
    layer.up_proj = Matrix<Scalar>::Zero(ffn, d);
    layer.down_proj = Matrix<Scalar>::Zero(d, ffn);
    layer.attn_res = read_weights(2 * i);
    layer.mlp_res = read_weights(2 * i + 1);
    model.layers.push_back(std::move(layer));
  }
  model.norm = Vector<Scalar>::Ones(d);
  model.lm_head = Matrix<Scalar>::Zero(vocab, d);
  model.final_res = read_weights(config.sublayers());
  return model;
}

template <typename Scalar, typename Visit>
void visit_tensors(ModelWeights<Scalar>& model, Visit&& visit) {
  auto matrix = [&](const std::string& name, Matrix<Scalar>& m, bool attn_res = false) {
    visit(TensorRef<Scalar>{name, {m.rows(), m.cols()}, m.data(), attn_res});
  };
  auto vector = [&](const std::string& name, Vector<Scalar>& v, bool attn_res = false) {
    visit(TensorRef<Scalar>{name, {v.size()}, v.data(), attn_res});
  };
  // Which depth tensors exist follows the scheme (docs/schemes.md "Tensors of a read"). A
  // standard-residual model may carry the attention tensors (optional in its file).
  const AttnResConfig& scheme = model.config.attn_res;
  auto read = [&](const std::string& prefix, DepthReadWeights<Scalar>& r) {
    if (scheme.mode == ResidualMode::standard || scheme.uses_query()) {
      vector(prefix + ".query", r.query, true);
      if (scheme.key_norm) vector(prefix + ".key_norm.weight", r.key_norm_gain, true);
      if (r.query_proj.size() > 0) matrix(prefix + ".query_proj.weight", r.query_proj, true);
    }
    if (scheme.attention_mode() && scheme.mixing == DepthMixing::scalars)
      vector(prefix + ".mix_logits", r.mix, true);
    if (scheme.mode == ResidualMode::denseformer) vector(prefix + ".dwa.weight", r.mix, true);
    if (r.pre_bias.size() > 0) {
      vector(prefix + ".mhc.pre_bias", r.pre_bias, true);
      vector(prefix + ".mhc.post_bias", r.post_bias, true);
      matrix(prefix + ".mhc.res_bias", r.res_bias, true);
      if (r.pre_proj.size() > 0) {
        matrix(prefix + ".mhc.pre_proj.weight", r.pre_proj, true);
        matrix(prefix + ".mhc.post_proj.weight", r.post_proj, true);
        matrix(prefix + ".mhc.res_proj.weight", r.res_proj, true);
      }
    }
  };
  matrix("model.embed_tokens.weight", model.embed_tokens);
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    auto& layer = model.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    vector(p + "input_layernorm.weight", layer.input_layernorm);
    matrix(p + "self_attn.q_proj.weight", layer.q_proj);
    matrix(p + "self_attn.k_proj.weight", layer.k_proj);
    matrix(p + "self_attn.v_proj.weight", layer.v_proj);
    matrix(p + "self_attn.o_proj.weight", layer.o_proj);
    if (layer.q_norm.size() > 0) {
      vector(p + "self_attn.q_norm.weight", layer.q_norm);
      vector(p + "self_attn.k_norm.weight", layer.k_norm);
    }
    vector(p + "post_attention_layernorm.weight", layer.post_attention_layernorm);
    matrix(p + "mlp.gate_proj.weight", layer.gate_proj);
    matrix(p + "mlp.up_proj.weight", layer.up_proj);
    matrix(p + "mlp.down_proj.weight", layer.down_proj);
    read(p + "attn_res", layer.attn_res);
    read(p + "mlp_res", layer.mlp_res);
  }
  vector("model.norm.weight", model.norm);
  matrix("lm_head.weight", model.lm_head);
  read("model.final_res", model.final_res);
}

template <typename Scalar>
template <typename Other>
ModelWeights<Other> ModelWeights<Scalar>::cast() const {
  auto read_cast = [](const DepthReadWeights<Scalar>& read) {
    return DepthReadWeights<Other>{
        read.query.template cast<Other>(),      read.key_norm_gain.template cast<Other>(),
        read.query_proj.template cast<Other>(), read.mix.template cast<Other>(),
        read.pre_bias.template cast<Other>(),   read.post_bias.template cast<Other>(),
        read.res_bias.template cast<Other>(),   read.pre_proj.template cast<Other>(),
        read.post_proj.template cast<Other>(),  read.res_proj.template cast<Other>()};
  };
  ModelWeights<Other> out;
  out.config = config;
  out.has_attn_res_tensors = has_attn_res_tensors;
  out.embed_tokens = embed_tokens.template cast<Other>();
  for (const auto& layer : layers) {
    LayerWeights<Other> o;
    o.input_layernorm = layer.input_layernorm.template cast<Other>();
    o.q_proj = layer.q_proj.template cast<Other>();
    o.k_proj = layer.k_proj.template cast<Other>();
    o.v_proj = layer.v_proj.template cast<Other>();
    o.o_proj = layer.o_proj.template cast<Other>();
    o.q_norm = layer.q_norm.template cast<Other>();
    o.k_norm = layer.k_norm.template cast<Other>();
    o.post_attention_layernorm = layer.post_attention_layernorm.template cast<Other>();
    o.gate_proj = layer.gate_proj.template cast<Other>();
    o.up_proj = layer.up_proj.template cast<Other>();
    o.down_proj = layer.down_proj.template cast<Other>();
    o.attn_res = read_cast(layer.attn_res);
    o.mlp_res = read_cast(layer.mlp_res);
    out.layers.push_back(std::move(o));
  }
  out.norm = norm.template cast<Other>();
  out.lm_head = lm_head.template cast<Other>();
  out.final_res = read_cast(final_res);
  return out;
}

}  // namespace attnres
