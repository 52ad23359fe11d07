// Golden tests: the C++ forward pass against the independent NumPy implementation
// (tests/golden/reference_attnres.py, float64). Fixtures are committed; the C++ must match them
// to 1e-10 at f64 and 1e-5 at f32, with two-phase reads on and off.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "attnres/atomic_file.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"
#include "attnres/safetensors.hpp"
#include "test_support.hpp"

namespace attnres {
namespace {

const std::filesystem::path kFixtures = ATTNRES_GOLDEN_FIXTURES;

Eigen::MatrixXd expected_tensor(const SafetensorsFile& file, const std::string& name) {
  const TensorInfo* info = file.find(name);
  if (!info) throw std::runtime_error("fixture has no tensor " + name);
  const auto values = file.values(*info);
  const Eigen::Index rows = info->shape[0];
  const Eigen::Index cols = info->shape.size() > 1 ? info->shape[1] : 1;
  return Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      values.data(), rows, cols);
}

template <typename Scalar>
void check_case(const std::string& name, bool two_phase, double tolerance) {
  const auto dir = kFixtures / name;
  const auto meta = nlohmann::json::parse(read_file(dir / "case.json"));
  const auto expected = SafetensorsFile::read(dir / "expected.safetensors");
  const auto model = load_model(dir).template cast<Scalar>();
  ForwardOptions options;
  options.two_phase = two_phase;
  options.zero_placeholder = meta["zero_placeholder"].get<bool>();
  options.mode = parse_residual_mode(meta["mode"].get<std::string>(), "case.json");
  const auto result = forward(model, meta["tokens"].get<std::vector<int>>(), options);
  const std::string tag = name + (two_phase ? " two-phase" : " one-shot") +
                          (sizeof(Scalar) == 8 ? " f64 " : " f32 ");
  test::expect_tensor_near(tag + "logits", result.logits, expected_tensor(expected, "logits"), tolerance);
  test::expect_tensor_near(tag + "hidden_final", result.hidden_final,
                           expected_tensor(expected, "hidden_final"), tolerance);
  const Eigen::Map<const Eigen::VectorXd> output_rms(result.trace.sublayer_output_rms.data(),
                                                      static_cast<Eigen::Index>(result.trace.sublayer_output_rms.size()));
  const Eigen::Map<const Eigen::VectorXd> input_rms(result.trace.sublayer_input_rms.data(),
                                                     static_cast<Eigen::Index>(result.trace.sublayer_input_rms.size()));
  test::expect_tensor_near(tag + "sublayer_output_rms", output_rms,
                           expected_tensor(expected, "sublayer_output_rms"), tolerance);
  test::expect_tensor_near(tag + "sublayer_input_rms", input_rms,
                           expected_tensor(expected, "sublayer_input_rms"), tolerance);
  std::size_t alpha_count = 0;
  for (const auto& info : expected.tensors()) alpha_count += info.name.rfind("alpha.", 0) == 0;
  ASSERT_EQ(result.trace.reads.size(), alpha_count) << tag;
  for (const auto& read : result.trace.reads) {
    test::expect_tensor_near(tag + "alpha." + std::to_string(read.read), read.alpha,
                             expected_tensor(expected, "alpha." + std::to_string(read.read)), tolerance);
  }
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, Float64MatchesNumpyTo1e10) {
  check_case<double>(GetParam(), true, 1e-10);
  check_case<double>(GetParam(), false, 1e-10);
}

TEST_P(Golden, Float32MatchesNumpyTo1e5) {
  check_case<float>(GetParam(), true, 1e-5);
  check_case<float>(GetParam(), false, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden,
                         ::testing::Values("standard", "full", "block_incomplete",
                                           "block_zero_placeholder"));

}  // namespace
}  // namespace attnres
