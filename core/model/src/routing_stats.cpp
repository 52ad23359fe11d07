#include "attnres/routing_stats.hpp"

#include <cmath>
#include <limits>

#include "attnres/error.hpp"

namespace attnres {

std::vector<ReadRouting> routing_statistics(const ForwardTrace& trace) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  std::vector<ReadRouting> out;
  for (const ReadTrace& read : trace.reads) {
    ReadRouting r;
    r.read = read.read;
    r.target = read.target;
    for (const auto& source : read.sources) r.sources.push_back(source.label());
    const Eigen::Index n = read.alpha.cols();
    const Eigen::Index T = read.alpha.rows();
    if (n == 0 || T == 0) throw Error("routing statistics: read " + r.target + " has no weights");
    double entropy_sum = 0.0, effective_sum = 0.0, top_sum = 0.0, first_sum = 0.0, last_sum = 0.0;
    for (Eigen::Index t = 0; t < T; ++t) {
      double entropy = 0.0;
      for (Eigen::Index i = 0; i < n; ++i) {
        const double a = read.alpha(t, i);
        if (a > 0.0) entropy -= a * std::log(a);
      }
      entropy_sum += entropy;
      effective_sum += std::exp(entropy);
      top_sum += read.alpha.row(t).maxCoeff();
      first_sum += read.alpha(t, 0);
      last_sum += read.alpha(t, n - 1);
    }
    const auto tokens = static_cast<double>(T);
    r.normalised_entropy = n > 1 ? entropy_sum / tokens / std::log(static_cast<double>(n)) : kNaN;
    r.effective_sources = effective_sum / tokens;
    r.top1_mass = top_sum / tokens;
    const bool has_embedding =
        !read.sources.empty() && read.sources.front().kind == DepthSource::Kind::embedding;
    r.embedding_weight = has_embedding ? first_sum / tokens : kNaN;
    r.recent_weight = last_sum / tokens;
    out.push_back(std::move(r));
  }
  return out;
}

template <typename Scalar>
Eigen::MatrixXd effective_queries(const ModelWeights<Scalar>& model) {
  const int L = model.config.sublayers();
  const bool key_norm = model.config.attn_res.key_norm;
  Eigen::MatrixXd queries(L + 1, model.config.hidden_size);
  for (int r = 0; r <= L; ++r) {
    const auto& read = model.depth_read(r);
    const Eigen::VectorXd query = read.query.template cast<double>();
    if (key_norm) {
      queries.row(r) = query.cwiseProduct(read.key_norm_gain.template cast<double>()).transpose();
    } else {
      queries.row(r) = query.transpose();
    }
  }
  return queries;
}

template Eigen::MatrixXd effective_queries(const ModelWeights<double>&);
template Eigen::MatrixXd effective_queries(const ModelWeights<float>&);

Eigen::MatrixXd row_cosines(const Eigen::MatrixXd& queries) {
  const Eigen::Index n = queries.rows();
  Eigen::MatrixXd out(n, n);
  const Eigen::VectorXd norms = queries.rowwise().norm();
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < n; ++j) {
      out(i, j) = norms(i) > 0.0 && norms(j) > 0.0
                      ? queries.row(i).dot(queries.row(j)) / (norms(i) * norms(j))
                      : std::numeric_limits<double>::quiet_NaN();
    }
  }
  return out;
}

}  // namespace attnres
