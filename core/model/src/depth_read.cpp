// The read of every read-based scheme (docs/schemes.md), forward and backward. Written for
// reading: explicit scores per (head, source), the gate, the weighted sum; the backward pass
// retraces the same steps in reverse. Tests: finite differences (tests/training), the NumPy
// reference (tests/golden) and the invariants of docs/schemes.md (tests/core/test_schemes.cpp).
#include "attnres/depth_read.hpp"

#include <cmath>
#include <limits>

#include "attnres/assert.hpp"
#include "attnres/error.hpp"

namespace attnres {

int depth_read_heads(const AttnResConfig& scheme) {
  return scheme.uses_query() ? scheme.heads : 1;
}

template <typename Scalar>
Matrix<Scalar> head_mean(const Matrix<Scalar>& alpha, int heads) {
  const Eigen::Index n = alpha.cols() / heads;
  Matrix<Scalar> mean = Matrix<Scalar>::Zero(alpha.rows(), n);
  for (int c = 0; c < heads; ++c) mean += alpha.middleCols(c * n, n);
  return mean / static_cast<Scalar>(heads);
}

namespace {

template <typename Scalar>
Scalar sigmoid(Scalar x) {
  return Scalar(1) / (Scalar(1) + std::exp(-x));
}

// alpha = gate(scores) per token and head, over the n sources of that head (docs/schemes.md).
template <typename Scalar>
Matrix<Scalar> apply_gate(DepthGate gate, const Matrix<Scalar>& scores, int heads) {
  const Eigen::Index n = scores.cols() / heads;
  Matrix<Scalar> alpha(scores.rows(), scores.cols());
  for (int c = 0; c < heads; ++c) {
    const auto s = scores.middleCols(c * n, n);
    auto a = alpha.middleCols(c * n, n);
    switch (gate) {
      case DepthGate::softmax: {
        const Vector<Scalar> top = s.rowwise().maxCoeff();
        a = (s.colwise() - top).array().exp().matrix();
        const Vector<Scalar> sum = a.rowwise().sum();
        a.array().colwise() /= sum.array();
        // Each token's weights over the sources sum to 1 (docs/math.md §2.1). Written so that NaN
        // passes: non-finite scores come from the user's weights, not from this code.
        const Scalar tolerance = std::sqrt(std::numeric_limits<Scalar>::epsilon());
        ATTNRES_ASSERT(!((a.rowwise().sum().array() - Scalar(1)).abs() > tolerance).any(),
                       "softmax depth weights sum to 1");
        break;
      }
      case DepthGate::sigmoid:
        a = s.unaryExpr([](Scalar x) { return sigmoid(x); });
        break;
      case DepthGate::sigmoid_normalized: {
        a = s.unaryExpr([](Scalar x) { return sigmoid(x); });
        const Vector<Scalar> sum = a.rowwise().sum();
        a.array().colwise() /= sum.array();
        break;
      }
    }
  }
  return alpha;
}

// d loss / d scores from d loss / d alpha, through the gate.
template <typename Scalar>
Matrix<Scalar> gate_backward(DepthGate gate, const Matrix<Scalar>& scores,
                             const Matrix<Scalar>& alpha, const Matrix<Scalar>& dalpha, int heads) {
  const Eigen::Index n = scores.cols() / heads;
  Matrix<Scalar> dscores(scores.rows(), scores.cols());
  for (int c = 0; c < heads; ++c) {
    const auto a = alpha.middleCols(c * n, n);
    const auto da = dalpha.middleCols(c * n, n);
    auto ds = dscores.middleCols(c * n, n);
    switch (gate) {
      case DepthGate::softmax: {  // ds_i = a_i (da_i - sum_k a_k da_k)
        const Vector<Scalar> mean = (a.array() * da.array()).rowwise().sum().matrix();
        ds = (a.array() * (da.colwise() - mean).array()).matrix();
        break;
      }
      case DepthGate::sigmoid:  // a = sigma(s): ds = da a (1 - a)
        ds = (da.array() * a.array() * (Scalar(1) - a.array())).matrix();
        break;
      case DepthGate::sigmoid_normalized: {  // a_i = sigma_i / S: d sigma_i = (da_i - sum a da) / S
        const Matrix<Scalar> sig =
            scores.middleCols(c * n, n).unaryExpr([](Scalar x) { return sigmoid(x); });
        const Vector<Scalar> total = sig.rowwise().sum();
        const Vector<Scalar> mean = (a.array() * da.array()).rowwise().sum().matrix();
        const Matrix<Scalar> dsig =
            ((da.colwise() - mean).array().colwise() / total.array()).matrix();
        ds = (dsig.array() * sig.array() * (Scalar(1) - sig.array())).matrix();
        break;
      }
    }
  }
  return dscores;
}

// 1 / sqrt(mean over each head's channels of x^2 + eps): (T, H).
template <typename Scalar>
Matrix<Scalar> group_inverse_rms(const Matrix<Scalar>& x, int heads, Scalar eps) {
  if (heads == 1) return row_inverse_rms(x, eps);  // the single-head key norm (overflow-safe)
  const Eigen::Index width = x.cols() / heads;
  Matrix<Scalar> out(x.rows(), heads);
  for (int c = 0; c < heads; ++c) {
    out.col(c) =
        (x.middleCols(c * width, width).rowwise().squaredNorm() / static_cast<Scalar>(width))
            .array()
            .unaryExpr([eps](Scalar m) { return Scalar(1) / std::sqrt(m + eps); })
            .matrix();
  }
  return out;
}

// Scores of sources first .. first + k - 1 of a read with n sources: (T, H k), head-major. For
// DenseFormer the "score" is the weight a_i itself, for the rescaled residual 0 (e = 1). Fills
// the cache's query and key-norm parts (attention).
template <typename Scalar>
Matrix<Scalar> subset_scores(const AttnResConfig& scheme, const DepthReadWeights<Scalar>& weights,
                             const std::vector<const Matrix<Scalar>*>& sources, Eigen::Index first,
                             Eigen::Index n, Scalar eps, DepthReadCache<Scalar>& c) {
  const Eigen::Index k = static_cast<Eigen::Index>(sources.size());
  const Eigen::Index T = sources.front()->rows();
  const Eigen::Index d = sources.front()->cols();
  const int heads = depth_read_heads(scheme);
  const Eigen::Index width = d / heads;
  c.heads = heads;
  c.key_inv_rms.clear();
  if (scheme.mode == ResidualMode::rescaled) return Matrix<Scalar>::Zero(T, k);
  if (scheme.mode == ResidualMode::denseformer || scheme.mixing == DepthMixing::scalars) {
    if (weights.mix.size() != n)
      throw Error("depth read: mixing weights do not match the read's sources");
    return weights.mix.segment(first, k).transpose().replicate(T, 1);
  }
  // Query: w, or w + W (u / rms(u)) with u the most recent source.
  Matrix<Scalar> query;  // (T, d) effective query q (times g with the key norm)
  if (scheme.query_source == QuerySource::input) {
    const Matrix<Scalar>& latest = *sources.back();
    c.query_inv_rms = row_inverse_rms(latest, eps);
    c.query_input = (latest.array().colwise() * c.query_inv_rms.array()).matrix();
    c.query =
        (c.query_input * weights.query_proj.transpose()).rowwise() + weights.query.transpose();
    query = c.query;
  } else {
    query = weights.query.transpose().replicate(T, 1);
  }
  if (scheme.key_norm)
    query = (query.array().rowwise() * weights.key_norm_gain.transpose().array()).matrix();
  Matrix<Scalar> scores(T, heads * k);
  for (Eigen::Index i = 0; i < k; ++i) {
    const Matrix<Scalar>& x = *sources[static_cast<std::size_t>(i)];
    c.key_inv_rms.push_back(scheme.key_norm ? group_inverse_rms(x, heads, eps)
                                            : Matrix<Scalar>::Ones(T, heads));
    for (int head = 0; head < heads; ++head) {
      const Vector<Scalar> projected = (x.middleCols(head * width, width).array() *
                                        query.middleCols(head * width, width).array())
                                           .rowwise()
                                           .sum();
      scores.col(head * k + i) = projected.cwiseProduct(c.key_inv_rms.back().col(head));
    }
  }
  return scores;
}

}  // namespace

template <typename Scalar>
Matrix<Scalar> depth_read(const AttnResConfig& scheme, const DepthReadWeights<Scalar>& weights,
                          const std::vector<const Matrix<Scalar>*>& sources, Scalar eps,
                          DepthReadCache<Scalar>* cache) {
  if (sources.empty()) throw Error("depth read: no sources");
  const Eigen::Index n = static_cast<Eigen::Index>(sources.size());
  const Eigen::Index T = sources.front()->rows();
  const Eigen::Index d = sources.front()->cols();
  DepthReadCache<Scalar>& c = *cache;
  c.scores = subset_scores(scheme, weights, sources, 0, n, eps, c);
  const int heads = c.heads;
  const Eigen::Index width = d / heads;
  if (scheme.mode == ResidualMode::rescaled) {
    c.alpha =
        Matrix<Scalar>::Constant(T, n, Scalar(1) / static_cast<Scalar>(n));  // the running mean
  } else if (scheme.mode == ResidualMode::denseformer) {
    c.alpha = c.scores;  // unnormalised learned weights
  } else {
    c.alpha = apply_gate(scheme.gate, c.scores, heads);
  }

  Matrix<Scalar> h = Matrix<Scalar>::Zero(T, d);
  for (int head = 0; head < heads; ++head) {
    for (Eigen::Index i = 0; i < n; ++i) {
      h.middleCols(head * width, width).array() +=
          sources[static_cast<std::size_t>(i)]->middleCols(head * width, width).array().colwise() *
          c.alpha.col(head * n + i).array();
    }
  }
  return h;
}

bool depth_read_uses_max(const AttnResConfig& scheme) {
  return scheme.attention_mode() && scheme.gate == DepthGate::softmax;
}

bool depth_read_normalised(const AttnResConfig& scheme) {
  if (scheme.mode == ResidualMode::rescaled) return true;
  return scheme.attention_mode() && scheme.gate != DepthGate::sigmoid;
}

namespace {

// e_i of one source for every token, given the running max m (softmax) — see DepthReadStats.
template <typename Scalar, typename Scores, typename Max>
Vector<Scalar> unnormalised_weights(const AttnResConfig& scheme, const Scores& scores,
                                    const Max& max) {
  if (scheme.mode == ResidualMode::rescaled) return Vector<Scalar>::Ones(scores.size());
  if (scheme.mode == ResidualMode::denseformer) return scores;
  if (scheme.gate == DepthGate::softmax) return (scores - max).array().exp().matrix();
  return scores.unaryExpr([](Scalar s) { return sigmoid(s); });
}

}  // namespace

template <typename Scalar>
DepthReadStats<Scalar> depth_read_stats(const AttnResConfig& scheme,
                                        const DepthReadWeights<Scalar>& weights,
                                        const std::vector<const Matrix<Scalar>*>& sources,
                                        Eigen::Index first, Eigen::Index n, Scalar eps) {
  if (scheme.uses_query() && scheme.query_source == QuerySource::input) {
    throw Error(
        "depth read: an input-dependent query has no two-phase statistics (docs/schemes.md)");
  }
  const Eigen::Index k = static_cast<Eigen::Index>(sources.size());
  const Eigen::Index T = sources.front()->rows();
  const Eigen::Index d = sources.front()->cols();
  DepthReadCache<Scalar> cache;
  DepthReadStats<Scalar> stats;
  stats.scores = subset_scores(scheme, weights, sources, first, n, eps, cache);
  const int heads = cache.heads;
  const Eigen::Index width = d / heads;
  stats.o = Matrix<Scalar>::Zero(T, d);
  stats.l = Matrix<Scalar>::Zero(T, heads);
  stats.m = Matrix<Scalar>::Zero(T, heads);
  for (int head = 0; head < heads; ++head) {
    if (depth_read_uses_max(scheme))
      stats.m.col(head) = stats.scores.middleCols(head * k, k).rowwise().maxCoeff();
    for (Eigen::Index i = 0; i < k; ++i) {
      const Vector<Scalar> weight =
          unnormalised_weights<Scalar>(scheme, stats.scores.col(head * k + i), stats.m.col(head));
      stats.l.col(head) += weight;
      stats.o.middleCols(head * width, width).array() +=
          sources[static_cast<std::size_t>(i)]->middleCols(head * width, width).array().colwise() *
          weight.array();
    }
  }
  return stats;
}

template <typename Scalar>
DepthReadStats<Scalar> merge_read_stats(const AttnResConfig& scheme,
                                        const DepthReadStats<Scalar>& a,
                                        const DepthReadStats<Scalar>& b) {
  const int heads = static_cast<int>(a.l.cols());
  const Eigen::Index width = a.o.cols() / heads;
  DepthReadStats<Scalar> out;
  out.scores.resize(a.scores.rows(), a.scores.cols() + b.scores.cols());
  const Eigen::Index ka = a.scores.cols() / heads, kb = b.scores.cols() / heads;
  for (int head = 0; head < heads;
       ++head) {  // keep head-major order: a's then b's sources per head
    out.scores.middleCols(head * (ka + kb), ka) = a.scores.middleCols(head * ka, ka);
    out.scores.middleCols(head * (ka + kb) + ka, kb) = b.scores.middleCols(head * kb, kb);
  }
  if (!depth_read_uses_max(scheme)) {
    out.o = a.o + b.o;
    out.l = a.l + b.l;
    out.m = a.m;
    return out;
  }
  out.m = a.m.cwiseMax(b.m);
  const Matrix<Scalar> scale_a = (a.m - out.m).array().exp().matrix();  // (T, H)
  const Matrix<Scalar> scale_b = (b.m - out.m).array().exp().matrix();
  out.l = (a.l.array() * scale_a.array() + b.l.array() * scale_b.array()).matrix();
  out.o.resize(a.o.rows(), a.o.cols());
  for (int head = 0; head < heads; ++head) {
    out.o.middleCols(head * width, width) =
        (a.o.middleCols(head * width, width).array().colwise() * scale_a.col(head).array() +
         b.o.middleCols(head * width, width).array().colwise() * scale_b.col(head).array())
            .matrix();
  }
  return out;
}

template <typename Scalar>
Matrix<Scalar> finish_read_stats(const AttnResConfig& scheme, const DepthReadStats<Scalar>& stats,
                                 Matrix<Scalar>* alpha) {
  const int heads = static_cast<int>(stats.l.cols());
  const Eigen::Index width = stats.o.cols() / heads;
  const Eigen::Index n = stats.scores.cols() / heads;
  Matrix<Scalar> h = stats.o;
  alpha->resize(stats.scores.rows(), stats.scores.cols());
  for (int head = 0; head < heads; ++head) {
    for (Eigen::Index i = 0; i < n; ++i) {
      alpha->col(head * n + i) =
          unnormalised_weights<Scalar>(scheme, stats.scores.col(head * n + i), stats.m.col(head));
      if (depth_read_normalised(scheme))
        alpha->col(head * n + i) = alpha->col(head * n + i).cwiseQuotient(stats.l.col(head));
    }
    if (depth_read_normalised(scheme))
      h.middleCols(head * width, width).array().colwise() /= stats.l.col(head).array();
  }
  return h;
}

template <typename Scalar>
void depth_read_backward(const AttnResConfig& scheme, const DepthReadWeights<Scalar>& weights,
                         const std::vector<const Matrix<Scalar>*>& sources,
                         Scalar /*eps: the cache has it*/, const DepthReadCache<Scalar>& c,
                         const Matrix<Scalar>& dh, std::vector<Matrix<Scalar>>* dsources,
                         DepthReadWeights<Scalar>* grad) {
  const Eigen::Index n = static_cast<Eigen::Index>(sources.size());
  const Eigen::Index T = dh.rows();
  const Eigen::Index d = dh.cols();
  const int heads = c.heads;
  const Eigen::Index width = d / heads;
  auto source = [&](Eigen::Index i) -> const Matrix<Scalar>& {
    return *sources[static_cast<std::size_t>(i)];
  };

  // Value path: h = sum_i alpha_i x_i per head, so dx_i = alpha_i dh and dalpha_i = dh . x_i.
  dsources->assign(static_cast<std::size_t>(n), Matrix<Scalar>(T, d));
  Matrix<Scalar> dalpha(T, heads * n);
  for (int head = 0; head < heads; ++head) {
    const auto dh_head = dh.middleCols(head * width, width);
    for (Eigen::Index i = 0; i < n; ++i) {
      (*dsources)[static_cast<std::size_t>(i)].middleCols(head * width, width) =
          (dh_head.array().colwise() * c.alpha.col(head * n + i).array()).matrix();
      dalpha.col(head * n + i) =
          (dh_head.array() * source(i).middleCols(head * width, width).array()).rowwise().sum();
    }
  }

  if (scheme.mode == ResidualMode::rescaled) return;  // fixed weights
  if (scheme.mode == ResidualMode::denseformer) {
    grad->mix += dalpha.colwise().sum().transpose();
    return;
  }
  const Matrix<Scalar> dscores = gate_backward(scheme.gate, c.scores, c.alpha, dalpha, heads);
  if (scheme.mixing == DepthMixing::scalars) {
    grad->mix += dscores.colwise().sum().transpose();
    return;
  }

  // Score path: s_{c,i} = p_{c,i} r_{c,i}, p = sum_{j in c} q'_j x_ij, q' = q (x) g, r =
  // 1/rms_c(x_i).
  Matrix<Scalar> query =
      c.query.size() > 0 ? c.query : Matrix<Scalar>(weights.query.transpose().replicate(T, 1));
  Matrix<Scalar> scaled_query = query;  // q' = q * g (or q without the key norm)
  if (scheme.key_norm)
    scaled_query = (query.array().rowwise() * weights.key_norm_gain.transpose().array()).matrix();
  Matrix<Scalar> dscaled_query = Matrix<Scalar>::Zero(T, d);  // d loss / d q'
  for (Eigen::Index i = 0; i < n; ++i) {
    const Matrix<Scalar>& x = source(i);
    Matrix<Scalar>& dx = (*dsources)[static_cast<std::size_t>(i)];
    for (int head = 0; head < heads; ++head) {
      const auto cols = [&](auto& m) { return m.middleCols(head * width, width); };
      const Vector<Scalar> r = c.key_inv_rms[static_cast<std::size_t>(i)].col(head);  // (T)
      const Vector<Scalar> ds_r = dscores.col(head * n + i).cwiseProduct(r);          // ds r
      cols(dscaled_query).array() += cols(x).array().colwise() * ds_r.array();
      cols(dx).array() += cols(scaled_query).array().colwise() * ds_r.array();
      if (scheme.key_norm) {  // d r / d x_j = -r^3 x_j / width
        const Vector<Scalar> p = (cols(x).array() * cols(scaled_query).array()).rowwise().sum();
        const Vector<Scalar> scale =
            (-ds_r.array() * p.array() * r.array().square() / static_cast<Scalar>(width)).matrix();
        cols(dx).array() += cols(x).array().colwise() * scale.array();
      }
    }
  }
  Matrix<Scalar> dquery = dscaled_query;  // d loss / d q
  if (scheme.key_norm) {
    grad->key_norm_gain +=
        (dscaled_query.array() * query.array()).colwise().sum().transpose().matrix();
    dquery = (dscaled_query.array().rowwise() * weights.key_norm_gain.transpose().array()).matrix();
  }
  grad->query += dquery.colwise().sum().transpose();
  if (scheme.query_source == QuerySource::input) {
    // q = w + W y, y = u r_u: dW += dq^T y, dy = dq W, du = r_u dy - r_u^3 u (dy . u) / d.
    grad->query_proj += dquery.transpose() * c.query_input;
    const Matrix<Scalar> dy = dquery * weights.query_proj;
    const Matrix<Scalar>& u = source(n - 1);
    const Vector<Scalar> dot = (dy.array() * u.array()).rowwise().sum();
    const Vector<Scalar> scale =
        (-c.query_inv_rms.array().cube() * dot.array() / static_cast<Scalar>(d)).matrix();
    Matrix<Scalar>& du = (*dsources)[static_cast<std::size_t>(n - 1)];
    du.array() +=
        dy.array().colwise() * c.query_inv_rms.array() + u.array().colwise() * scale.array();
  }
}

#define ATTNRES_INSTANTIATE_DEPTH_READ(Scalar)                                                   \
  template Matrix<Scalar> head_mean(const Matrix<Scalar>&, int);                                 \
  template Matrix<Scalar> depth_read(const AttnResConfig&, const DepthReadWeights<Scalar>&,      \
                                     const std::vector<const Matrix<Scalar>*>&, Scalar,          \
                                     DepthReadCache<Scalar>*);                                   \
  template DepthReadStats<Scalar> depth_read_stats(                                              \
      const AttnResConfig&, const DepthReadWeights<Scalar>&,                                     \
      const std::vector<const Matrix<Scalar>*>&, Eigen::Index, Eigen::Index, Scalar);            \
  template DepthReadStats<Scalar> merge_read_stats(                                              \
      const AttnResConfig&, const DepthReadStats<Scalar>&, const DepthReadStats<Scalar>&);       \
  template Matrix<Scalar> finish_read_stats(const AttnResConfig&, const DepthReadStats<Scalar>&, \
                                            Matrix<Scalar>*);                                    \
  template void depth_read_backward(const AttnResConfig&, const DepthReadWeights<Scalar>&,       \
                                    const std::vector<const Matrix<Scalar>*>&, Scalar,           \
                                    const DepthReadCache<Scalar>&, const Matrix<Scalar>&,        \
                                    std::vector<Matrix<Scalar>>*, DepthReadWeights<Scalar>*);
ATTNRES_INSTANTIATE_DEPTH_READ(float)
ATTNRES_INSTANTIATE_DEPTH_READ(double)

}  // namespace attnres
