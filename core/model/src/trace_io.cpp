#include "attnres/trace_io.hpp"

#include "attnres/output_schema.hpp"

namespace attnres {

using nlohmann::json;

namespace {

json matrix_to_json(const Eigen::MatrixXd& m) {
  json rows = json::array();
  for (Eigen::Index r = 0; r < m.rows(); ++r) {
    json row = json::array();
    for (Eigen::Index c = 0; c < m.cols(); ++c) row.push_back(m(r, c));
    rows.push_back(std::move(row));
  }
  return rows;
}

void append(TensorToWrite& out, double value) {
  if (out.f64) {
    out.data_f64.push_back(value);
  } else {
    out.data.push_back(static_cast<float>(value));
  }
}

TensorToWrite matrix_tensor(const std::string& name, const Eigen::MatrixXd& m, bool f64) {
  TensorToWrite out{name, {m.rows(), m.cols()}, {}, {}, f64};
  for (Eigen::Index r = 0; r < m.rows(); ++r) {
    for (Eigen::Index c = 0; c < m.cols(); ++c) append(out, m(r, c));
  }
  return out;
}

TensorToWrite vector_tensor(const std::string& name, const std::vector<double>& v, bool f64) {
  TensorToWrite out{name, {static_cast<std::int64_t>(v.size())}, {}, {}, f64};
  for (double x : v) append(out, x);
  return out;
}

}  // namespace

json trace_to_json(const ForwardTrace& trace, const Eigen::MatrixXd& logits,
                   const Eigen::MatrixXd& hidden_final) {
  json root;
  root["schema"] = schema_tag("forward_trace");
  root["mode"] = to_string(trace.mode);
  root["sublayers"] = trace.sublayers;
  root["block_size"] = trace.block_size;
  root["tokens"] = trace.tokens;
  root["two_phase"] = trace.two_phase;
  root["scheme"] = trace.scheme.describe();
  root["zero_placeholder"] = trace.zero_placeholder;
  json reads = json::array();
  for (const auto& read : trace.reads) {
    json sources = json::array();
    for (const auto& source : read.sources) {
      sources.push_back({{"label", source.label()},
                         {"block", source.block},
                         {"members", {source.first_member, source.last_member}}});
    }
    json mean = json::array();
    for (Eigen::Index i = 0; i < read.alpha_mean.size(); ++i) mean.push_back(read.alpha_mean(i));
    reads.push_back({{"read", read.read},
                     {"target", read.target},
                     {"sources", sources},
                     {"alpha", matrix_to_json(read.alpha)},
                     {"alpha_mean", mean}});
    if (read.heads >
        1) {  // alpha above is the mean over heads; every head here, column c * sources + i
      reads.back()["heads"] = read.heads;
      reads.back()["alpha_heads"] = matrix_to_json(read.alpha_heads);
    }
  }
  root["reads"] = reads;
  root["sublayer_input_rms"] = trace.sublayer_input_rms;
  root["sublayer_output_rms"] = trace.sublayer_output_rms;
  root["block_summary_rms"] = trace.block_summary_rms;
  if (trace.mixing_mean.size()) {
    root["mixing_mean"] = matrix_to_json(trace.mixing_mean);
    root["rank_tolerance"] = trace.rank_tolerance;
    root["semiseparable_rank"] = trace.semiseparable_rank;
    root["semiseparable_rank_max_over_tokens"] = trace.semiseparable_rank_max;
  }
  root["hidden_final"] = matrix_to_json(hidden_final);
  root["logits"] = matrix_to_json(logits);
  return root;
}

std::vector<TensorToWrite> forward_dump_tensors(const ForwardTrace& trace,
                                                const Eigen::MatrixXd& logits,
                                                const Eigen::MatrixXd& hidden_final, bool f64) {
  std::vector<TensorToWrite> tensors;
  tensors.push_back(matrix_tensor("logits", logits, f64));
  tensors.push_back(matrix_tensor("hidden_final", hidden_final, f64));
  for (const auto& read : trace.reads) {
    if (read.heads > 1) {  // every head: (T, H, sources) (docs/schemes.md)
      TensorToWrite heads =
          matrix_tensor("alpha." + std::to_string(read.read), read.alpha_heads, f64);
      heads.shape = {read.alpha_heads.rows(), read.heads, read.alpha_heads.cols() / read.heads};
      tensors.push_back(std::move(heads));
    } else {
      tensors.push_back(matrix_tensor("alpha." + std::to_string(read.read), read.alpha, f64));
    }
  }
  tensors.push_back(vector_tensor("sublayer_input_rms", trace.sublayer_input_rms, f64));
  tensors.push_back(vector_tensor("sublayer_output_rms", trace.sublayer_output_rms, f64));
  return tensors;
}

template <typename Scalar>
std::vector<TensorToWrite> gradient_dump_tensors(const Gradients<Scalar>& gradients) {
  const bool f64 = sizeof(Scalar) == sizeof(double);
  std::vector<TensorToWrite> tensors;
  tensors.push_back(vector_tensor("loss", {gradients.loss}, f64));
  visit_tensors(const_cast<ModelWeights<Scalar>&>(gradients.grad),
                [&](const TensorRef<Scalar>& tensor) {
                  if (tensor.attn_res && !gradients.grad.has_attn_res_tensors) return;
                  TensorToWrite out{"grad." + tensor.name, tensor.shape, {}, {}, f64};
                  for (std::int64_t i = 0; i < tensor.element_count(); ++i)
                    append(out, static_cast<double>(tensor.data[i]));
                  tensors.push_back(std::move(out));
                });
  tensors.push_back(
      vector_tensor("sublayer_output_grad_rms", gradients.sublayer_output_grad_rms, f64));
  return tensors;
}

template std::vector<TensorToWrite> gradient_dump_tensors(const Gradients<float>&);
template std::vector<TensorToWrite> gradient_dump_tensors(const Gradients<double>&);

}  // namespace attnres
