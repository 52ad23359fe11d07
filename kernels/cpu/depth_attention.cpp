// Fused CPU depth attention: per token, one sweep over each source computes its key's inverse
// RMS and its score together (the key vector is never materialised: w . (g * v / r) =
// (w*g) . v / r), and an online softmax accumulates the output in the same sweep; alpha is
// rescaled once at the end. Eigen maps give SIMD reductions (plain float loops would not
// vectorise without reassociation).
// Reference: core/model/include/attnres/depth_attention.hpp (depth_attention_one_shot).
#include <Eigen/Core>
#include <cmath>
#include <vector>

#include "attnres/kernels.hpp"

namespace attnres::cpu {

void depth_attention_forward(float* h, float* alpha, const float* sources, const float* query,
                             const float* gain, float eps, int n, int T, int d) {
  using RowVector = Eigen::Map<Eigen::VectorXf>;
  using ConstRowVector = Eigen::Map<const Eigen::VectorXf>;
  const Eigen::VectorXf effective_query =
      ConstRowVector(query, d).cwiseProduct(ConstRowVector(gain, d));  // (d) w * g
  std::vector<float> scores(static_cast<std::size_t>(n));              // (n) per token
  const std::size_t token_stride = static_cast<std::size_t>(T) * d;
  for (int t = 0; t < T; ++t) {
    RowVector out(h + static_cast<std::size_t>(t) * d, d);  // (d)
    float running_max = -INFINITY;
    float running_sum = 0.0f;
    out.setZero();
    for (int i = 0; i < n; ++i) {
      const ConstRowVector v(sources + i * token_stride + static_cast<std::size_t>(t) * d, d);
      const float score =
          effective_query.dot(v) / std::sqrt(v.squaredNorm() / static_cast<float>(d) + eps);
      scores[static_cast<std::size_t>(i)] = score;
      // Online softmax: rescale what was accumulated when the max grows.
      const float new_max = std::max(running_max, score);
      const float rescale = std::exp(running_max - new_max);  // 0 on the first source
      const float weight = std::exp(score - new_max);
      running_sum = running_sum * rescale + weight;
      if (rescale == 1.0f) {
        out += weight * v;
      } else {
        out = out * rescale + weight * v;
      }
      running_max = new_max;
    }
    const float inverse_sum = 1.0f / running_sum;
    out *= inverse_sum;
    float* weights = alpha + static_cast<std::size_t>(t) * n;  // (n)
    for (int i = 0; i < n; ++i) {
      weights[i] = std::exp(scores[static_cast<std::size_t>(i)] - running_max) * inverse_sum;
    }
  }
}

}  // namespace attnres::cpu
