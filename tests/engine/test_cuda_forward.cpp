// The CUDA engine (engine/cuda/cuda_forward.cu) against the readable reference attnres::forward
// at f32: the same arithmetic in another order, so logits, hidden_final, every read's alpha, the
// RMS traces and the mixing matrix within test::kReorderedBound<float> of their magnitude
// (docs/testing.md §2); the same trace layout, progress order, cancellation and errors.
// Every case that needs a GPU skips with the reason from cuda_engine::available() when there is
// none; without a device, constructing the engine must throw attnres::Error (tested then).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "../../engine/cuda/cuda_forward.hpp"
#include "attnres/cancel.hpp"
#include "attnres/error.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"
#include "model_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_cuda_forward {

#define ATTNRES_REQUIRE_CUDA()                                        \
  do {                                                                \
    std::string why_not_;                                             \
    if (!cuda_engine::available(&why_not_)) GTEST_SKIP() << why_not_; \
  } while (false)

struct Shape {
  int d = 64, layers = 3, heads = 4, kv_heads = 4, ffn = 96, vocab = 101;
};

// Weights and pseudo-queries N(0, (0.8 / sqrt(d))^2): logits of order 1 and depth scores of
// standard deviation ~0.8 at every width, so that the weights are far from uniform (the smallest
// ~1e-3) while f32 rounding moves them by ~1e-6 (the reference's f32 against its f64), well inside
// the bounds. Sharper models (weights 0.1 at d = 3072, or queries N(0, 1)) make even the
// reference's f32 and f64 passes differ by ~1e-4.
ModelWeights<float> make_model(const Shape& shape, std::uint64_t seed = 11) {
  const double scale = 0.8 / std::sqrt(static_cast<double>(shape.d));
  const ModelConfig config = test::model_config(shape.layers, shape.d, shape.heads, shape.kv_heads,
                                                shape.ffn, shape.vocab);
  return random_model(config, {.seed = seed, .weight_std = scale, .query_std = scale})
      .cast<float>();
}

std::vector<int> make_tokens(int T, int vocab, int seed = 0) {
  std::vector<int> tokens(static_cast<std::size_t>(T));
  for (int t = 0; t < T; ++t) {
    const auto x = 1103515245ull * static_cast<unsigned long long>(seed + t) + 12345ull;
    tokens[static_cast<std::size_t>(t)] =
        static_cast<int>((x % 2147483648ull) % static_cast<unsigned long long>(vocab));
  }
  return tokens;
}

ForwardOptions with(ResidualMode mode, int block_size = 0, bool two_phase = true,
                    bool zero_placeholder = false) {
  ForwardOptions options;
  options.mode = mode;
  if (block_size) options.block_size = block_size;
  options.two_phase = two_phase;
  options.zero_placeholder = zero_placeholder;
  return options;
}

constexpr double kF32 = test::kReorderedBound<float>;

// Each RMS relative to itself (an RMS is a square root of a sum of positive terms).
void expect_relative(const std::vector<double>& actual, const std::vector<double>& expected,
                     double relative, const std::string& name) {
  ASSERT_EQ(actual.size(), expected.size()) << name;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    EXPECT_TRUE(test::near_relative(actual[i], expected[i], relative, 0.0,
                                    name + "[" + std::to_string(i) + "]"));
  }
}

// The CUDA result against the reference: numbers within the stated bounds, the trace's
// structure exactly.
void expect_matches(const ForwardResult<float>& gpu, const ForwardResult<float>& ref,
                    const std::string& name) {
  test::expect_tensor_near(name + " logits", gpu.logits, ref.logits, kF32);
  test::expect_tensor_near(name + " hidden_final", gpu.hidden_final, ref.hidden_final, kF32);
  const ForwardTrace& a = gpu.trace;
  const ForwardTrace& b = ref.trace;
  EXPECT_EQ(a.mode, b.mode) << name;
  EXPECT_EQ(a.sublayers, b.sublayers) << name;
  EXPECT_EQ(a.block_size, b.block_size) << name;
  EXPECT_EQ(a.tokens, b.tokens) << name;
  EXPECT_EQ(a.two_phase, b.two_phase) << name;
  EXPECT_EQ(a.zero_placeholder, b.zero_placeholder) << name;
  EXPECT_EQ(a.rank_tolerance, b.rank_tolerance) << name;
  ASSERT_EQ(a.reads.size(), b.reads.size()) << name;
  for (std::size_t r = 0; r < a.reads.size(); ++r) {
    const ReadTrace& x = a.reads[r];
    const ReadTrace& y = b.reads[r];
    EXPECT_EQ(x.read, y.read) << name;
    EXPECT_EQ(x.target, y.target) << name;
    EXPECT_EQ(x.sources, y.sources) << name << " read " << r;
    ASSERT_EQ(x.alpha.rows(), y.alpha.rows()) << name << " read " << r;
    ASSERT_EQ(x.alpha.cols(), y.alpha.cols()) << name << " read " << r;
    // Relative to the read's largest weight, as in the fast zoo.
    test::expect_tensor_near(name + " alpha of read " + std::to_string(r), x.alpha, y.alpha, kF32);
    ASSERT_EQ(x.alpha_mean.size(), y.alpha_mean.size()) << name;
    test::expect_tensor_near(name + " alpha_mean " + std::to_string(r), x.alpha_mean, y.alpha_mean,
                             kF32);
  }
  expect_relative(a.sublayer_input_rms, b.sublayer_input_rms, kF32, name + " sublayer_input_rms");
  expect_relative(a.sublayer_output_rms, b.sublayer_output_rms, kF32,
                  name + " sublayer_output_rms");
  expect_relative(a.block_summary_rms, b.block_summary_rms, kF32, name + " block_summary_rms");
  ASSERT_EQ(a.mixing_per_token.size(), b.mixing_per_token.size()) << name;
  ASSERT_EQ(a.mixing_mean.rows(), b.mixing_mean.rows()) << name;
  if (a.mixing_mean.size() > 0) {
    test::expect_tensor_near(name + " mixing_mean", a.mixing_mean, b.mixing_mean, kF32);
  }
  EXPECT_EQ(a.semiseparable_rank, b.semiseparable_rank) << name;
  EXPECT_EQ(a.semiseparable_rank_max, b.semiseparable_rank_max) << name;
}

// ---------------------------------------------------------------------------------------------
// Without a device

TEST(CudaForward, AvailableGivesAReasonWhenItIsFalse) {
  std::string why_not;
  if (cuda_engine::available(&why_not)) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(why_not.empty());
  EXPECT_FALSE(cuda_engine::available(nullptr));  // a null reason pointer is allowed
}

TEST(CudaForward, ConstructingWithoutADeviceThrowsAnError) {
  std::string why_not;
  if (cuda_engine::available(&why_not)) GTEST_SKIP() << "a CUDA device is present";
  const auto model =
      make_model({.d = 16, .layers = 1, .heads = 2, .kv_heads = 2, .ffn = 8, .vocab = 10});
  try {
    cuda_engine::CudaForward engine(model);
    FAIL() << "constructed a CUDA engine without a usable device";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("cuda"), std::string::npos) << message;
    EXPECT_NE(message.find(why_not), std::string::npos) << message;
  }
}

// ---------------------------------------------------------------------------------------------
// Against the reference

struct Case {
  std::string name;
  Shape shape;
  ForwardOptions options;
  int T = 37;
};

void PrintTo(const Case& c, std::ostream* out) {
  *out << c.name;
}

class CudaMatchesReference : public ::testing::TestWithParam<Case> {};

TEST_P(CudaMatchesReference, LogitsHiddenAndTrace) {
  ATTNRES_REQUIRE_CUDA();
  const Case& c = GetParam();
  const auto model = make_model(c.shape);
  const auto tokens = make_tokens(c.T, c.shape.vocab, c.T);
  cuda_engine::CudaForward engine(model);
  const auto gpu = engine.forward(tokens, c.options);
  const auto ref = forward(model, tokens, c.options);
  expect_matches(gpu, ref, c.name);
}

const Shape kGqa{.d = 64, .layers = 3, .heads = 8, .kv_heads = 2, .ffn = 96, .vocab = 101};
const Shape kOdd{
    .d = 48, .layers = 3, .heads = 4, .kv_heads = 2, .ffn = 80, .vocab = 97};  // head_dim 12
const Shape kWideHeads{
    .d = 256, .layers = 1, .heads = 2, .kv_heads = 1, .ffn = 64, .vocab = 50};  // head_dim 128
const Shape kOneHead{
    .d = 256, .layers = 1, .heads = 1, .kv_heads = 1, .ffn = 64, .vocab = 50};  // head_dim 256
// head_dim 3072: Q and the output accumulator no longer fit in shared memory next to a K/V tile
// (the attention kernel keeps them in global memory, one query row per block).
const Shape kHugeHead{.d = 3072, .layers = 1, .heads = 1, .kv_heads = 1, .ffn = 16, .vocab = 16};
const Shape kDeep{
    .d = 32, .layers = 8, .heads = 2, .kv_heads = 1, .ffn = 48, .vocab = 64};  // L = 16

INSTANTIATE_TEST_SUITE_P(
    Modes, CudaMatchesReference,
    ::testing::Values(
        Case{"standard", {}, with(ResidualMode::standard)},
        Case{"full_two_phase", {}, with(ResidualMode::full)},
        Case{"full_one_shot", {}, with(ResidualMode::full, 0, false)},
        Case{"block_S1", {}, with(ResidualMode::block, 1)},
        Case{"block_S_equals_L", {}, with(ResidualMode::block, 6)},
        Case{"block_incomplete_last_block", {}, with(ResidualMode::block, 4)},
        Case{"block_incomplete_one_shot", {}, with(ResidualMode::block, 4, false)},
        Case{"block_zero_placeholder", {}, with(ResidualMode::block, 2, true, true)},
        Case{"block_zero_placeholder_incomplete", {}, with(ResidualMode::block, 4, false, true)},
        Case{"gqa_standard", kGqa, with(ResidualMode::standard)},
        Case{"gqa_block", kGqa, with(ResidualMode::block, 3)},
        Case{"gqa_full", kGqa, with(ResidualMode::full)},
        Case{"T1_standard", {}, with(ResidualMode::standard), 1},
        Case{"T1_full", {}, with(ResidualMode::full), 1},
        Case{"T1_block", {}, with(ResidualMode::block, 2, true, true), 1},
        Case{"T300_standard", kGqa, with(ResidualMode::standard), 300},
        Case{"T300_full", {}, with(ResidualMode::full, 0, false), 300},
        Case{"T300_block", kGqa, with(ResidualMode::block, 4), 300},
        Case{"odd_d_full", kOdd, with(ResidualMode::full), 37},
        Case{"odd_d_block", kOdd, with(ResidualMode::block, 4, true, true), 300},
        Case{"head_dim_128", kWideHeads, with(ResidualMode::full), 300},
        Case{"head_dim_256", kOneHead, with(ResidualMode::block, 1), 100},
        Case{"head_dim_3072", kHugeHead, with(ResidualMode::full), 40},
        Case{"deep_full", kDeep, with(ResidualMode::full), 37},
        Case{"deep_block", kDeep, with(ResidualMode::block, 5), 37}),
    [](const auto& info) { return info.param.name; });

TEST(CudaForward, RecordMixingOffLeavesTheMixingMatrixEmpty) {
  ATTNRES_REQUIRE_CUDA();
  const auto model = make_model({});
  auto options = with(ResidualMode::block, 2);
  options.record_mixing = false;
  cuda_engine::CudaForward engine(model);
  const auto gpu = engine.forward(make_tokens(9, 101), options);
  EXPECT_TRUE(gpu.trace.mixing_per_token.empty());
  EXPECT_EQ(gpu.trace.mixing_mean.size(), 0);
  expect_matches(gpu, forward(model, make_tokens(9, 101), options), "record_mixing off");
}

TEST(CudaForward, OneEngineServesManyCallsOfDifferentLengthsAndModes) {
  ATTNRES_REQUIRE_CUDA();
  const auto model = make_model(kGqa);
  cuda_engine::CudaForward engine(model);
  const std::vector<std::pair<int, ForwardOptions>> runs = {
      {5, with(ResidualMode::full)},      {300, with(ResidualMode::block, 2, true, true)},
      {17, with(ResidualMode::standard)}, {64, with(ResidualMode::block, 4)},
      {300, with(ResidualMode::full)},    {1, with(ResidualMode::block, 6)}};
  for (const auto& [T, options] : runs) {
    const auto tokens = make_tokens(T, kGqa.vocab, 3 * T);
    expect_matches(engine.forward(tokens, options), forward(model, tokens, options),
                   "T=" + std::to_string(T) + " " + to_string(*options.mode));
  }
}

TEST(CudaForward, ModeAndBlockSizeComeFromTheConfigByDefault) {
  ATTNRES_REQUIRE_CUDA();
  auto model = make_model({});
  model.config.attn_res.mode = ResidualMode::block;
  model.config.attn_res.block_size = 4;
  cuda_engine::CudaForward engine(model);
  const auto tokens = make_tokens(20, 101);
  const auto gpu = engine.forward(tokens, {});
  EXPECT_EQ(gpu.trace.mode, ResidualMode::block);
  EXPECT_EQ(gpu.trace.block_size, 4);
  expect_matches(gpu, forward(model, tokens, {}), "config mode");
}

TEST(CudaForward, ProgressIsCalledBeforeEachSublayerLikeTheReference) {
  ATTNRES_REQUIRE_CUDA();
  const auto model = make_model({});
  for (auto mode : {ResidualMode::standard, ResidualMode::full, ResidualMode::block}) {
    std::vector<std::pair<std::size_t, std::size_t>> gpu_calls, ref_calls;
    auto options = with(mode, 4);
    options.progress = [&](std::size_t done, std::size_t total) {
      gpu_calls.emplace_back(done, total);
      return true;
    };
    cuda_engine::CudaForward engine(model);
    engine.forward(make_tokens(8, 101), options);
    options.progress = [&](std::size_t done, std::size_t total) {
      ref_calls.emplace_back(done, total);
      return true;
    };
    forward(model, make_tokens(8, 101), options);
    EXPECT_EQ(gpu_calls, ref_calls) << to_string(mode);
    ASSERT_EQ(gpu_calls.size(), 6u);
    for (std::size_t s = 0; s < gpu_calls.size(); ++s)
      EXPECT_EQ(gpu_calls[s], std::make_pair(s, std::size_t{6}));
  }
}

TEST(CudaForward, ProgressReturningFalseCancelsAndTheEngineStaysUsable) {
  ATTNRES_REQUIRE_CUDA();
  const auto model = make_model({});
  cuda_engine::CudaForward engine(model);
  const auto tokens = make_tokens(50, 101);
  for (auto mode : {ResidualMode::standard, ResidualMode::full, ResidualMode::block}) {
    auto options = with(mode, 2);
    int calls = 0;
    options.progress = [&](std::size_t done, std::size_t) {
      ++calls;
      return done < 3;
    };
    EXPECT_THROW(engine.forward(tokens, options), Cancelled) << to_string(mode);
    EXPECT_EQ(calls, 4) << to_string(mode);
    options.progress = {};
    expect_matches(engine.forward(tokens, options), forward(model, tokens, options),
                   "after cancel");
  }
}

TEST(CudaForward, BadTokensAndLayoutsGiveTheReferenceErrors) {
  ATTNRES_REQUIRE_CUDA();
  const auto model = make_model({});
  cuda_engine::CudaForward engine(model);
  // Both throw (test::error_message fails the test otherwise), with the same message.
  using test::error_message;
  const std::vector<std::vector<int>> bad_tokens = {{}, {1, 101}, {-1}};
  for (const auto& tokens : bad_tokens) {
    EXPECT_EQ(error_message([&] { engine.forward(tokens, {}); }),
              error_message([&] { forward(model, tokens, {}); }));
  }
  for (int block_size : {0, 7}) {
    ForwardOptions options;
    options.mode = ResidualMode::block;
    options.block_size = block_size;
    EXPECT_EQ(error_message([&] {
                engine.forward({1, 2}, options);
              }),
              error_message([&] {
                forward(model, {1, 2}, options);
              }));
  }
  EXPECT_FALSE(error_message([&] {
                 engine.forward({1, 2}, with(ResidualMode::block, 0));
               }).empty());
}

// The message of a non-finite value without the value itself ("nan" / "-nan" depends on how the
// NaN was produced): what, token and channel must be the reference's.
std::string without_value(const std::string& message) {
  const auto at = message.find(" first appeared in ");
  return at == std::string::npos ? message : message.substr(at);
}

TEST(CudaForward, NonFiniteValuesAreReportedWhereTheReferenceReportsThem) {
  ATTNRES_REQUIRE_CUDA();
  const auto tokens = make_tokens(12, 101);
  auto run_both = [&](const ModelWeights<float>& model, const ForwardOptions& options) {
    std::string gpu_message = "(no error)", ref_message = "(no error)";
    try {
      cuda_engine::CudaForward engine(model);
      engine.forward(tokens, options);
    } catch (const Error& error) {
      gpu_message = error.what();
    }
    try {
      forward(model, tokens, options);
    } catch (const Error& error) {
      ref_message = error.what();
    }
    EXPECT_NE(gpu_message, "(no error)");
    EXPECT_EQ(without_value(gpu_message), without_value(ref_message));
  };
  for (auto mode : {ResidualMode::standard, ResidualMode::full, ResidualMode::block}) {
    auto model = make_model({});
    model.layers[1].o_proj(5, 3) =
        std::numeric_limits<float>::quiet_NaN();  // v of sublayer 3, channel 5
    run_both(model, with(mode, 2));
    auto embedding = make_model({});
    embedding.embed_tokens(tokens[4], 7) = std::numeric_limits<float>::infinity();
    run_both(embedding, with(mode, 2));
    auto huge = make_model({});
    huge.lm_head.row(9).setConstant(3e38f);  // the logits overflow
    run_both(huge, with(mode, 2));
  }
}

}  // namespace test_cuda_forward
}  // namespace attnres
