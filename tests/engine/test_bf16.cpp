// The fast engine's bf16 products (--precision bf16, docs/engines.md "Precision") against the
// independent NumPy implementation with the same rounding (tests/golden/reference_attnres.py:
// expected_bf16.safetensors, the inputs of every sublayer weight product and of the LM head
// rounded to bf16, sums and everything else exact in float64), and against the f64 reference.
//
// Bounds, from the arithmetic (docs/testing.md §2), relative to the magnitude of each tensor:
//   - against the bf16 fixture: the engine accumulates its products and computes the rest in
//     f32, so the difference is f32 rounding (the f32 golden bound, 168 u of f32 ~ 1e-5), unless
//     an activation lies within its f32 error of a bf16 rounding midpoint and rounds the other
//     way: that moves one input of one product by 2^-8 of itself (u16 = 2^-8, the bf16 unit
//     roundoff, test::kBf16UnitRoundoff), a change of about u16 / sqrt(K) of a product's output
//     for K ~ 16 terms. So the bound is 168 u32 + u16 / 4 = 1.0e-3.
//   - against the f64 reference: bf16 must be *farther* from it than from the bf16 fixture (by a
//     factor of 10 at least: rounding to 8 significant bits moves logits by ~1e-2 of their
//     magnitude, two orders above f32's 1e-5); an engine that silently multiplied in f32 would
//     fail here.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "attnres/atomic_file.hpp"
#include "attnres/engine.hpp"
#include "attnres/error.hpp"
#include "attnres/forward_steps.hpp"
#include "attnres/model.hpp"
#include "attnres/safetensors.hpp"
#include "model_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_bf16 {

const std::filesystem::path kFixtures = ATTNRES_GOLDEN_FIXTURES;
constexpr double kAgainstFixture = test::roundoffs<float>(168) + test::kBf16UnitRoundoff / 4;

Eigen::MatrixXd fixture_tensor(const SafetensorsFile& file, const std::string& name) {
  const TensorInfo* info = file.find(name);
  if (!info) throw std::runtime_error("fixture has no tensor " + name);
  const auto values = file.values(*info);
  Eigen::Index cols = 1;
  for (std::size_t k = 1; k < info->shape.size(); ++k) cols *= info->shape[k];
  return Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      values.data(), info->shape[0], cols);
}

struct Fixture {
  ModelWeights<float> model;
  std::vector<int> tokens;
  ForwardOptions options;
  SafetensorsFile exact, bf16;
};

Fixture load(const std::string& name) {
  const auto dir = kFixtures / name;
  const auto meta = nlohmann::json::parse(read_file(dir / "case.json"));
  Fixture f{load_model(dir).cast<float>(),
            meta["tokens"].get<std::vector<int>>(),
            {},
            SafetensorsFile::read(dir / "expected.safetensors"),
            SafetensorsFile::read(dir / "expected_bf16.safetensors")};
  f.options.zero_placeholder = meta["zero_placeholder"].get<bool>();
  if (!meta.contains("scheme"))  // the original four force their mode
    f.options.mode = parse_residual_mode(meta["mode"].get<std::string>(), "case.json");
  return f;
}

class Bf16Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Bf16Golden, MatchesTheNumPyBf16PassAndNotTheExactOne) {
  const Fixture f = load(GetParam());
  for (int threads : {1, 2}) {
    for (bool two_phase : {true, false}) {
      ForwardOptions options = f.options;
      options.two_phase = two_phase;
      ForwardEngine<float> engine(f.model, {.threads = threads, .bf16 = true});
      const ForwardResult<float> result = engine.forward(f.tokens, options);
      const std::string tag = GetParam() + " threads " + std::to_string(threads) +
                              (two_phase ? " two-phase " : " one-shot ");
      const Eigen::MatrixXd logits = result.logits.cast<double>();
      test::expect_tensor_near(tag + "logits", logits, fixture_tensor(f.bf16, "logits"),
                               kAgainstFixture);
      test::expect_tensor_near(tag + "hidden_final", result.hidden_final.cast<double>(),
                               fixture_tensor(f.bf16, "hidden_final"), kAgainstFixture);
      for (const auto& read : result.trace.reads) {
        // A multi-head read's fixture is (T, H, sources): the trace's per-head weights. A flipped
        // rounding moves the scores by an absolute amount, and a softmax's (or sigmoid's) weight
        // by its share of it: relative to 1, the row's total (the largest weight is 0.2 to 1).
        const Eigen::MatrixXd expected =
            fixture_tensor(f.bf16, "alpha." + std::to_string(read.read));
        test::expect_tensor_near(
            tag + "alpha." + std::to_string(read.read),
            expected.cols() == read.alpha.cols() ? read.alpha : read.alpha_heads, expected,
            kAgainstFixture, 1.0);
      }
      // Relative to the logits' magnitude (2.5 to 4.5 in these fixtures).
      const double to_bf16 = test::relative_difference(logits, fixture_tensor(f.bf16, "logits"));
      const double to_exact = test::relative_difference(logits, fixture_tensor(f.exact, "logits"));
      EXPECT_GT(to_exact, 10 * to_bf16)
          << tag << "bf16 logits are no closer to the bf16 pass (" << to_bf16
          << ") than to the exact one (" << to_exact << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Bf16Golden,
                         ::testing::Values("standard", "full", "block_incomplete",
                                           "block_zero_placeholder", "full_sigmoid",
                                           "full_sigmoid_normalized", "full_no_key_norm",
                                           "full_window", "full_heads", "block_heads",
                                           "full_input_query", "block_input_query", "full_scalars",
                                           "block_scalars", "block_no_key_norm", "full_combined",
                                           "block_combined", "denseformer", "rescaled", "mhc",
                                           "mhc_static", "mhc_single_stream", "mhc_sinkhorn_3"));

TEST(Bf16Engine, IsRefusedWhereItCannotRun) {
  const Fixture f = load("full");
  ModelWeights<double> f64 = f.model.cast<double>();
  EXPECT_THROW((ForwardEngine<double>(f64, {.bf16 = true})), Error);
  EXPECT_THROW((ForwardEngine<float>(f.model, {.engine = EngineKind::reference, .bf16 = true})),
               Error);
  EXPECT_THROW((ForwardEngine<float>(f.model, {.device = Device::cuda, .bf16 = true})), Error);
}

TEST(Bf16Engine, IsDeterministicForAThreadCount) {
  const Fixture f = load("block_incomplete");
  for (int threads : {1, 2, 3}) {
    ForwardEngine<float> engine(f.model, {.threads = threads, .bf16 = true});
    const auto first = engine.forward(f.tokens, f.options);
    const auto again = engine.forward(f.tokens, f.options);
    EXPECT_EQ(first.logits, again.logits) << threads << " threads";
  }
}

}  // namespace test_bf16
}  // namespace attnres
