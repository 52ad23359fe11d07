// Depth attention: one AttnRes read over a list of sources (docs/math.md §2.2, §2.4).
//
// Every function works on all T tokens at once, but never mixes positions: row t of each output
// depends only on row t of the sources.
//
// Two ways to compute the same read:
//  - depth_attention_one_shot: the readable reference — explicit keys KeyNorm(v_i), scores
//    z_i = w . k_i (no 1/sqrt(d)), softmax, weighted sum of the un-normalised values;
//  - the two-phase schedule: statistics (o, m, l) over disjoint source sets, merged exactly
//    (SoftmaxStats, merge_stats, phase_one_stats) and divided once at the end.
// Worked check (docs/math.md §2.4): scores 0, ln2 with values 2, 5 give o = 12, l = 3; merging
// value 8 with score ln6 gives (12 + 48) / (3 + 6) = 20/3.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "attnres/model.hpp"
#include "attnres/tensor.hpp"

namespace attnres {

// KeyNorm(x) = g * x / sqrt(mean(x^2) + eps), per token (row).
template <typename Scalar>
Matrix<Scalar> key_norm(const Matrix<Scalar>& x,     // (T, d)
                        const Vector<Scalar>& gain,  // (d)
                        Scalar eps) {
  const Vector<Scalar> inv_rms = row_inverse_rms(x, eps);  // (T)
  return (x.array().colwise() * inv_rms.array()).rowwise() * gain.transpose().array();
}

// 1 / sqrt(mean(x^2) + eps) per token: the part of KeyNorm that does not depend on the read,
// shared by every read that sees this source.
template <typename Scalar>
Vector<Scalar> key_inverse_rms(const Matrix<Scalar>& x, Scalar eps) {  // x: (T, d) -> (T)
  return row_inverse_rms(x, eps);
}

// Reference read. sources: n pointers to (T, d) values. Writes h (T, d) and, when alpha is not
// null, the weights (T, n). Scores are shifted by their per-token max before exp (stable).
template <typename Scalar>
void depth_attention_one_shot(const std::vector<const Matrix<Scalar>*>& sources,
                              const DepthReadWeights<Scalar>& read, Scalar key_norm_eps,
                              Matrix<Scalar>* h,        // (T, d) out
                              Matrix<Scalar>* alpha) {  // (T, n) out, optional
  const Eigen::Index n = static_cast<Eigen::Index>(sources.size());
  const Eigen::Index T = sources.front()->rows();
  Matrix<Scalar> scores(T, n);  // z_{t,i} = w . KeyNorm(v_i)_t
  for (Eigen::Index i = 0; i < n; ++i) {
    const Matrix<Scalar> keys = key_norm(*sources[static_cast<std::size_t>(i)], read.key_norm_gain,
                                         key_norm_eps);  // (T, d)
    scores.col(i) = keys * read.query;
  }
  const Vector<Scalar> row_max = scores.rowwise().maxCoeff();                    // (T)
  Matrix<Scalar> weights = (scores.colwise() - row_max).array().exp().matrix();  // (T, n)
  weights.array().colwise() /= weights.rowwise().sum().array();
  h->setZero(T, sources.front()->cols());
  for (Eigen::Index i = 0; i < n; ++i) {
    h->array() += sources[static_cast<std::size_t>(i)]->array().colwise() * weights.col(i).array();
  }
  if (alpha) *alpha = std::move(weights);
}

// Online-softmax statistics of one read over a set A of sources (docs/math.md §2.4):
// m = max z_i, l = sum exp(z_i - m), o = sum exp(z_i - m) v_i. (l is not the log-sum-exp.)
template <typename Scalar>
struct SoftmaxStats {
  Matrix<Scalar> o;  // (T, d)
  Vector<Scalar> m;  // (T)
  Vector<Scalar> l;  // (T)

  // h = o / l.
  Matrix<Scalar> finish() const { return (o.array().colwise() / l.array()).matrix(); }
};

// Statistics of a single source with scores z: (v, z, 1).
template <typename Scalar>
SoftmaxStats<Scalar> single_source_stats(const Matrix<Scalar>& value,    // (T, d)
                                         const Vector<Scalar>& score) {  // (T)
  return {value, score, Vector<Scalar>::Ones(score.size())};
}

// Exact merge of the statistics of two disjoint source sets.
template <typename Scalar>
SoftmaxStats<Scalar> merge_stats(const SoftmaxStats<Scalar>& a, const SoftmaxStats<Scalar>& b) {
  const Vector<Scalar> m = a.m.cwiseMax(b.m);                       // (T)
  const Vector<Scalar> scale_a = (a.m - m).array().exp().matrix();  // (T)
  const Vector<Scalar> scale_b = (b.m - m).array().exp().matrix();  // (T)
  SoftmaxStats<Scalar> out;
  out.m = m;
  out.l = scale_a.cwiseProduct(a.l) + scale_b.cwiseProduct(b.l);
  out.o =
      (a.o.array().colwise() * scale_a.array() + b.o.array().colwise() * scale_b.array()).matrix();
  return out;
}

// Scores of one source for one read, through the shared inverse RMS:
// z = (v . (w * g)) * inv_rms, equal to w . KeyNorm(v).
template <typename Scalar>
Vector<Scalar> depth_scores(const Matrix<Scalar>& value,              // (T, d)
                            const Vector<Scalar>& inverse_rms,        // (T)
                            const Vector<Scalar>& effective_query) {  // (d) = w * g
  return (value * effective_query).cwiseProduct(inverse_rms);
}

// Phase 1 (docs/math.md §2.4): the q stacked effective queries (q, d) of a schedule block read the
// completed history once. Returns one SoftmaxStats per query, and the scores (history index,
// then (T, q)) so that a trace can recover every weight.
template <typename Scalar>
std::vector<SoftmaxStats<Scalar>> phase_one_stats(
    const std::vector<const Matrix<Scalar>*>& history,   // n x (T, d)
    const std::vector<Vector<Scalar>>& history_inv_rms,  // n x (T)
    const Matrix<Scalar>& queries,                       // (q, d), row j = w_j * g_j
    std::vector<Matrix<Scalar>>* scores_out) {           // n x (T, q), optional
  const std::size_t n = history.size();
  const Eigen::Index T = history.front()->rows();
  const Eigen::Index q = queries.rows();
  std::vector<Matrix<Scalar>> scores(n);
  Matrix<Scalar> row_max = Matrix<Scalar>::Constant(T, q, -std::numeric_limits<Scalar>::infinity());
  for (std::size_t i = 0; i < n; ++i) {
    scores[i] = ((*history[i]) * queries.transpose()).array().colwise() *
                history_inv_rms[i].array();  // (T, q)
    row_max = row_max.cwiseMax(scores[i]);
  }
  std::vector<SoftmaxStats<Scalar>> stats(static_cast<std::size_t>(q));
  for (Eigen::Index j = 0; j < q; ++j) {
    auto& s = stats[static_cast<std::size_t>(j)];
    s.m = row_max.col(j);
    s.l = Vector<Scalar>::Zero(T);
    s.o = Matrix<Scalar>::Zero(T, history.front()->cols());
    for (std::size_t i = 0; i < n; ++i) {
      const Vector<Scalar> weight = (scores[i].col(j) - s.m).array().exp().matrix();  // (T)
      s.l += weight;
      s.o.array() += history[i]->array().colwise() * weight.array();
    }
  }
  if (scores_out) *scores_out = std::move(scores);
  return stats;
}

// Backward of one read h = sum_i alpha_i v_i, alpha = softmax_i(z_i), z_i = (w * g) . (v_i r_i)
// with r_i = 1 / sqrt(mean(v_i^2) + eps) (docs/training.md). Given dh (T, d) and the read's
// weights alpha (T, n), sets dsources[i] = d loss / d v_i (T, d) — the value path alpha_i dh plus
// the score path through the key norm — and adds d loss / d w and d loss / d g into *grad.
template <typename Scalar>
void depth_attention_backward(const std::vector<const Matrix<Scalar>*>& sources,
                              const Matrix<Scalar>& alpha,  // (T, n)
                              const DepthReadWeights<Scalar>& read, Scalar key_norm_eps,
                              const Matrix<Scalar>& dh,               // (T, d)
                              std::vector<Matrix<Scalar>>* dsources,  // n x (T, d) out
                              DepthReadWeights<Scalar>* grad) {
  const Eigen::Index n = static_cast<Eigen::Index>(sources.size());
  const Eigen::Index T = dh.rows();
  const Eigen::Index d = dh.cols();
  const Vector<Scalar> query = read.query.cwiseProduct(read.key_norm_gain);  // q = w * g
  Matrix<Scalar> dalpha(T, n);                                               // dh . v_i
  for (Eigen::Index i = 0; i < n; ++i) {
    dalpha.col(i) =
        (dh.array() * sources[static_cast<std::size_t>(i)]->array()).rowwise().sum().matrix();
  }
  const Vector<Scalar> mean_dalpha =
      (alpha.array() * dalpha.array()).rowwise().sum().matrix();  // (T)
  const Matrix<Scalar> dz =
      (alpha.array() * (dalpha.colwise() - mean_dalpha).array()).matrix();  // (T, n)
  Vector<Scalar> dquery = Vector<Scalar>::Zero(d);
  dsources->resize(static_cast<std::size_t>(n));
  for (Eigen::Index i = 0; i < n; ++i) {
    const Matrix<Scalar>& value = *sources[static_cast<std::size_t>(i)];
    const Vector<Scalar> inv_rms = key_inverse_rms(value, key_norm_eps);  // (T)
    const Vector<Scalar> dz_r = dz.col(i).cwiseProduct(inv_rms);          // dz_i r_i
    dquery += value.transpose() * dz_r;
    const Vector<Scalar> projected = value * query;  // u_i = v_i . q
    // d z_i / d v_i = r_i q - (u_i r_i^3 / d) v_i.
    const Vector<Scalar> value_scale =
        (-dz_r.array() * projected.array() * inv_rms.array().square() / static_cast<Scalar>(d))
            .matrix();
    Matrix<Scalar>& dv = (*dsources)[static_cast<std::size_t>(i)];
    dv = (dh.array().colwise() * alpha.col(i).array()).matrix() + dz_r * query.transpose();
    dv.array() += value.array().colwise() * value_scale.array();
  }
  grad->query += dquery.cwiseProduct(read.key_norm_gain);
  grad->key_norm_gain += dquery.cwiseProduct(read.query);
}

}  // namespace attnres
