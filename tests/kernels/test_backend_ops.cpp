// Every kernel case on every backend present, against the readable reference in core/
// (depth_attention_one_shot at float64). Absent backends are skipped with the reason.
#include <gtest/gtest.h>

#include "attnres/depth_attention.hpp"
#include "attnres/error.hpp"
#include "attnres/kernels.hpp"
#include "model_support.hpp"

namespace attnres {
namespace {

struct OpCase {
  int n, T, d;
  double query_std;
};

}  // namespace

void PrintTo(KernelBackend backend, std::ostream* out) {
  *out << to_string(backend);
}

namespace {

void PrintTo(const OpCase& c, std::ostream* out) {
  *out << "n" << c.n << "_T" << c.T << "_d" << c.d << "_q" << c.query_std;
}

class BackendOps : public ::testing::TestWithParam<std::tuple<KernelBackend, OpCase>> {};

TEST_P(BackendOps, DepthAttentionMatchesTheReference) {
  const auto [backend, c] = GetParam();
  std::string why_not;
  if (!kernel_backend_available(backend, &why_not))
    GTEST_SKIP() << to_string(backend) << ": " << why_not;

  std::mt19937 rng(static_cast<unsigned>(c.n * 131 + c.T * 17 + c.d));
  std::normal_distribution<float> normal;
  std::vector<float> sources(static_cast<std::size_t>(c.n) * c.T * c.d);  // (n, T, d)
  for (auto& x : sources) x = normal(rng) * 2.0f;
  std::vector<float> query(c.d), gain(c.d);
  for (auto& x : query) x = normal(rng) * static_cast<float>(c.query_std);
  for (auto& x : gain) x = 1.0f + 0.1f * normal(rng);
  const float eps = 1e-6f;

  std::vector<float> h(static_cast<std::size_t>(c.T) * c.d),
      alpha(static_cast<std::size_t>(c.T) * c.n);
  depth_attention_forward(backend, h.data(), alpha.data(), sources.data(), query.data(),
                          gain.data(), eps, c.n, c.T, c.d);

  std::vector<Matrix<double>> values;
  for (int i = 0; i < c.n; ++i) {
    values.push_back(Eigen::Map<const Matrix<float>>(
                         sources.data() + static_cast<std::size_t>(i) * c.T * c.d, c.T, c.d)
                         .cast<double>());
  }
  std::vector<const Matrix<double>*> pointers;
  for (const auto& v : values) pointers.push_back(&v);
  const DepthReadWeights<double> read{
      Eigen::Map<const Eigen::VectorXf>(query.data(), c.d).cast<double>(),
      Eigen::Map<const Eigen::VectorXf>(gain.data(), c.d).cast<double>()};
  Matrix<double> h_reference, alpha_reference;
  depth_attention_one_shot(pointers, read, static_cast<double>(eps), &h_reference,
                           &alpha_reference);

  // The f32 kernel against the f64 reference on the same (f32) inputs: f32 rounding of the key
  // norms, d-term scores, exps and an n-term weighted sum. 336 u of f32 (the old 2e-5) relative to
  // the magnitude: h's own (a weighted mean of N(0, 4) sources, of order 1 to 8); the weights'
  // row sum, 1, for alpha: a weight moves by its share alpha_i of the scores' absolute error, so
  // the row's errors add up to at most that error times 1 (with n = 33 spread weights the largest
  // weight is well below 1 and no scale of its own).
  constexpr double kF32Kernel = test::roundoffs<float>(336);
  const std::string name = to_string(backend) + " depth_attention";
  test::expect_tensor_near(name + " h", Eigen::Map<const Matrix<float>>(h.data(), c.T, c.d),
                           h_reference, kF32Kernel);
  test::expect_tensor_near(name + " alpha", Eigen::Map<const Matrix<float>>(alpha.data(), c.T, c.n),
                           alpha_reference, kF32Kernel, 1.0);
}

INSTANTIATE_TEST_SUITE_P(
    AllBackends, BackendOps,
    ::testing::Combine(::testing::Values(KernelBackend::cpu, KernelBackend::cuda),
                       ::testing::Values(OpCase{1, 1, 1, 1.0}, OpCase{3, 5, 16, 0.0},
                                         OpCase{10, 7, 64, 0.5}, OpCase{33, 4, 300, 0.3},
                                         OpCase{9, 3, 128, 30.0})),  // sharp weights, scores ~1e2
    [](const auto& info) {
      const auto& c = std::get<1>(info.param);
      return to_string(std::get<0>(info.param)) + "_n" + std::to_string(c.n) + "_T" +
             std::to_string(c.T) + "_d" + std::to_string(c.d) + "_case" +
             std::to_string(info.index);
    });

TEST(BackendOps, RejectsNonPositiveSizes) {
  float x = 0;
  EXPECT_THROW(depth_attention_forward(KernelBackend::cpu, &x, &x, &x, &x, &x, 1e-6f, 0, 1, 1),
               Error);
}

}  // namespace
}  // namespace attnres
