// The fast CPU engine against the readable reference (the oracle), every mode and odd shape, f32
// and f64, several thread counts; determinism; the same trace; cancellation.
#include <gtest/gtest.h>

#include <mutex>

#include "attnres/engine.hpp"
#include "attnres/error.hpp"
#include "attnres/forward.hpp"
#include "attnres/measure.hpp"
#include "attnres/model.hpp"
#include "model_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_engine {

struct Shape {
  std::string name;
  int layers, d, heads, kv_heads, ffn, vocab;
};

ModelConfig config_of(const Shape& s) {
  return test::model_config(s.layers, s.d, s.heads, s.kv_heads, s.ffn, s.vocab);
}

// The benchmark's deterministic token ids (one formula, shared with the PyTorch peer).
std::vector<int> tokens_of(int T, int vocab, int seed = 0) {
  return benchmark_tokens(T, vocab, seed);
}

struct Case {
  std::string name;
  ResidualMode mode;
  int block_size;
  bool two_phase, placeholder;
  int schedule_block = 0;
};

// Every tensor of test::forward_outputs within its bound; a read's mean weights within its
// weights' bound; the RMS curves and the mixing matrix within the largest.
template <typename Scalar>
void expect_same(const ForwardResult<Scalar>& fast, const ForwardResult<Scalar>& reference,
                 const test::BoundByName& bound, const std::string& label) {
  const double tolerance = bound("");
  test::expect_tensor_near(label + " logits", fast.logits, reference.logits, bound("logits"));
  test::expect_tensor_near(label + " hidden", fast.hidden_final, reference.hidden_final,
                           bound("hidden"));
  const ForwardTrace& a = fast.trace;
  const ForwardTrace& b = reference.trace;
  EXPECT_EQ(a.mode, b.mode) << label;
  EXPECT_EQ(a.sublayers, b.sublayers);
  EXPECT_EQ(a.block_size, b.block_size);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.two_phase, b.two_phase);
  EXPECT_EQ(a.zero_placeholder, b.zero_placeholder);
  ASSERT_EQ(a.reads.size(), b.reads.size()) << label;
  for (std::size_t r = 0; r < a.reads.size(); ++r) {
    EXPECT_EQ(a.reads[r].read, b.reads[r].read);
    EXPECT_EQ(a.reads[r].target, b.reads[r].target);
    EXPECT_EQ(a.reads[r].sources, b.reads[r].sources) << label << " read " << r;
    ASSERT_EQ(a.reads[r].alpha.rows(), b.reads[r].alpha.rows());
    ASSERT_EQ(a.reads[r].alpha.cols(), b.reads[r].alpha.cols());
    const std::string read = "read " + std::to_string(r);
    test::expect_tensor_near(label + " " + read + " alpha", a.reads[r].alpha, b.reads[r].alpha,
                             bound(read + " alpha"));
    test::expect_tensor_near(label + " " + read + " alpha mean", a.reads[r].alpha_mean,
                             b.reads[r].alpha_mean, bound(read + " alpha"));
  }
  auto close_lists = [&](const std::vector<double>& x, const std::vector<double>& y,
                         const char* what) {
    ASSERT_EQ(x.size(), y.size()) << label << " " << what;
    for (std::size_t i = 0; i < x.size(); ++i)
      EXPECT_TRUE(test::near_relative(x[i], y[i], tolerance, 0.0,
                                      label + " " + what + " " + std::to_string(i)));
  };
  close_lists(a.sublayer_input_rms, b.sublayer_input_rms, "input rms");
  close_lists(a.sublayer_output_rms, b.sublayer_output_rms, "output rms");
  close_lists(a.block_summary_rms, b.block_summary_rms, "block rms");
  EXPECT_EQ(a.semiseparable_rank, b.semiseparable_rank) << label;
  if (b.mixing_mean.size())
    test::expect_tensor_near(label + " mixing mean", a.mixing_mean, b.mixing_mean, tolerance);
}

const std::vector<Shape> kShapes = {
    {"gqa", 3, 48, 4, 2, 40, 37},   // L = 6, head_dim 12, kv heads < heads
    {"tiny", 1, 8, 2, 2, 8, 11},    // L = 2
    {"wide", 2, 64, 4, 1, 96, 50},  // multi-query
};

const std::vector<Case> kCases = {
    {"standard", ResidualMode::standard, 0, true, false},
    {"full two-phase", ResidualMode::full, 0, true, false},
    {"full one-shot", ResidualMode::full, 0, false, false},
    {"full schedule 1", ResidualMode::full, 0, true, false, 1},
    {"full schedule L", ResidualMode::full, 0, true, false, 99},
    {"block S=1", ResidualMode::block, 1, true, false},
    {"block S=2", ResidualMode::block, 2, true, false},
    {"block S=4 incomplete", ResidualMode::block, 4, true, false},
    {"block S=4 one-shot", ResidualMode::block, 4, false, false},
    {"block S=L", ResidualMode::block, -1, true, false},
    {"block placeholder", ResidualMode::block, 2, true, true},
    {"block placeholder S=1", ResidualMode::block, 1, true, true},
    {"block placeholder one-shot", ResidualMode::block, 4, false, true},
};

// f64 on strong weights (a chaotic network: any slip shows), f32 on weights of the scale
// init-model uses (0.02); each tensor within kReorderedUnits u of its type times its measured
// conditioning (docs/testing.md §2.1).
template <typename Scalar>
void run_every_case(double weight_std) {
  for (const auto& shape : kShapes) {
    const ModelConfig config = config_of(shape);
    const auto model64 =
        random_model(config, {.seed = 7, .weight_std = weight_std, .query_std = 1.0});
    const auto model = model64.template cast<Scalar>();
    for (const auto& c : kCases) {
      ForwardOptions options;
      options.mode = c.mode;
      if (c.mode == ResidualMode::block)
        options.block_size =
            c.block_size < 0 ? config.sublayers() : std::min(c.block_size, config.sublayers());
      options.two_phase = c.two_phase;
      options.zero_placeholder = c.placeholder;
      options.full_schedule_block = std::min(c.schedule_block, config.sublayers());
      for (int T : {1, 5, 70, 130}) {
        const auto tokens = tokens_of(T, config.vocab_size);
        const auto reference = forward(model, tokens, options);
        const test::Conditioning kappa(model64, [&](const ModelWeights<double>& m) {
          return test::forward_outputs(forward(m, tokens, options));
        });
        const test::BoundByName bound = test::conditioned_bound<Scalar>(kappa);
        for (int threads : {1, 2, 3}) {
          ForwardEngine<Scalar> engine(model, {EngineKind::fast, Device::cpu, threads});
          const auto fast = engine.forward(tokens, options);
          expect_same(fast, reference, bound,
                      shape.name + " / " + c.name + " / T=" + std::to_string(T) +
                          " / threads=" + std::to_string(threads));
        }
      }
    }
  }
}

TEST(FastEngine, MatchesTheReferenceInFloat64) {
  run_every_case<double>(0.5);
}
TEST(FastEngine, MatchesTheReferenceInFloat32) {
  run_every_case<float>(0.02);
}

TEST(FastEngine, RerunsAreBitIdenticalForAGivenThreadCount) {
  const ModelConfig config = config_of({"x", 2, 64, 4, 2, 96, 50});
  const auto model =
      random_model(config, {.seed = 3, .weight_std = 0.3, .query_std = 1.0}).cast<float>();
  const auto tokens = tokens_of(200, 50);
  ForwardOptions options;
  options.mode = ResidualMode::block;
  options.block_size = 2;
  for (int threads : {1, 2, 3}) {
    ForwardEngine<float> engine(model, {EngineKind::fast, Device::cpu, threads});
    const auto first = engine.forward(tokens, options);
    const auto second = engine.forward(tokens, options);  // reused workspaces
    ForwardEngine<float> fresh(model, {EngineKind::fast, Device::cpu, threads});
    const auto third = fresh.forward(tokens, options);
    EXPECT_TRUE(first.logits == second.logits) << threads;
    EXPECT_TRUE(first.logits == third.logits) << threads;
    EXPECT_TRUE(first.trace.reads.back().alpha == third.trace.reads.back().alpha);
  }
}

// set_model keeps the engine (and its threads) for other weights, of another shape too: every
// pass after it is bit-identical to a fresh engine's on those weights, in f32 and bf16.
TEST(FastEngine, SetModelGivesWhatAFreshEngineGives) {
  const auto small = random_model(config_of({"x", 2, 32, 4, 2, 40, 20}),
                                  {.seed = 5, .weight_std = 0.4, .query_std = 1.0})
                         .cast<float>();
  const auto wide = random_model(config_of({"x", 3, 64, 8, 4, 96, 50}),
                                 {.seed = 6, .weight_std = 0.3, .query_std = 1.0})
                        .cast<float>();
  ForwardOptions options;
  options.mode = ResidualMode::block;
  options.block_size = 2;
  for (bool bf16 : {false, true}) {
    const EngineOptions engine_options{.threads = 2, .bf16 = bf16};
    ForwardEngine<float> kept(small, engine_options);
    const auto before = kept.forward(tokens_of(70, 20), options);
    for (const auto* model : {&wide, &small}) {
      kept.set_model(*model);
      const auto tokens = tokens_of(90, model->config.vocab_size);
      ForwardEngine<float> fresh(*model, engine_options);
      const auto expected = fresh.forward(tokens, options);
      const auto got = kept.forward(tokens, options);
      EXPECT_TRUE(got.logits == expected.logits) << "bf16 " << bf16;
      EXPECT_TRUE(got.trace.reads.back().alpha == expected.trace.reads.back().alpha);
    }
    EXPECT_TRUE(kept.forward(tokens_of(70, 20), options).logits == before.logits);
    EXPECT_EQ(kept.threads(), 2);
  }
}

TEST(FastEngine, AWorkspaceReusedAcrossLengthsAndModesStaysCorrect) {
  const ModelConfig config = config_of({"x", 2, 32, 4, 2, 40, 20});
  const auto model = random_model(config, {.seed = 5, .weight_std = 0.4, .query_std = 1.0});
  ForwardEngine<double> engine(model, {EngineKind::fast, Device::cpu, 2});
  for (int T : {90, 3, 40}) {
    for (ResidualMode mode :
         {ResidualMode::block, ResidualMode::full, ResidualMode::standard, ResidualMode::block}) {
      ForwardOptions options;
      options.mode = mode;
      options.block_size = 3;
      options.zero_placeholder = mode == ResidualMode::block && T == 3;
      const auto tokens = tokens_of(T, 20, T);
      expect_same(engine.forward(tokens, options), forward(model, tokens, options),
                  test::same_bound(test::kReorderedBound<double>), "reuse T=" + std::to_string(T));
    }
  }
}

TEST(FastEngine, ReportsProgressAndStopsWhenAsked) {
  const ModelConfig config = config_of({"x", 3, 16, 2, 2, 16, 20});
  const auto model = random_model(config, {}).cast<float>();
  ForwardEngine<float> engine(model, {EngineKind::fast, Device::cpu, 2});
  ForwardOptions options;
  std::vector<std::size_t> seen;
  options.progress = [&](std::size_t done, std::size_t total) {
    EXPECT_EQ(total, 6u);
    seen.push_back(done);
    return done < 3;
  };
  EXPECT_THROW(engine.forward({1, 2, 3}, options), Cancelled);
  EXPECT_EQ(seen, (std::vector<std::size_t>{0, 1, 2, 3}));
}

// A long sequence's attention is one operation of minutes (bench forward --seq 1000000 ignored
// SIGTERM): the engine asks the progress callback inside it too, so it stops within that
// sublayer rather than at the next one.
TEST(FastEngine, StopsInsideTheAttentionOfALongSequence) {
  const ModelConfig config = config_of({"x", 1, 16, 2, 2, 16, 20});
  const auto model = random_model(config, {}).cast<float>();
  for (const int threads : {1, 3}) {
    ForwardEngine<float> engine(model, {EngineKind::fast, Device::cpu, threads});
    ForwardOptions options;
    std::vector<std::size_t> seen;
    std::mutex mutex;
    options.progress = [&](std::size_t done, std::size_t) {
      std::lock_guard<std::mutex> lock(mutex);
      seen.push_back(done);
      return seen.size() < 2;  // stop at the first question after the pass has started
    };
    const std::vector<int> tokens = tokens_of(4096, 20, 7);
    EXPECT_THROW(engine.forward(tokens, options), Cancelled);
    EXPECT_EQ(seen, (std::vector<std::size_t>{0, 0})) << threads << " threads";
    // The engine runs normally afterwards.
    EXPECT_NO_THROW(engine.forward({1, 2, 3}, {}));
  }
}

TEST(FastEngine, RefusesWhatItCannotRun) {
  const ModelConfig config = config_of({"x", 1, 8, 2, 2, 8, 11});
  const auto model = random_model(config, {});
  ForwardEngine<double> engine(model, {EngineKind::fast, Device::cpu, 1});
  EXPECT_THROW(engine.forward({}, {}), Error);
  EXPECT_THROW(engine.forward({11}, {}), Error);
  ForwardOptions block;
  block.mode = ResidualMode::block;
  EXPECT_THROW(engine.forward({1}, block), Error);  // no block size
  EXPECT_THROW(ForwardEngine<double>(model, {EngineKind::fast, Device::cuda, 1}), Error);
  EXPECT_THROW(ForwardEngine<double>(model, {EngineKind::fast, Device::cpu, -1}), Error);
  EXPECT_EQ(parse_engine("fast", "--engine"), EngineKind::fast);
  EXPECT_THROW(parse_engine("quick", "--engine"), Error);
  EXPECT_THROW(parse_device("gpu", "--device"), Error);
}

TEST(FastEngine, ReportsNonFiniteValuesWhereTheReferenceDoes) {
  const ModelConfig config = config_of({"x", 2, 16, 2, 2, 16, 20});
  auto model = random_model(config, {.seed = 1, .weight_std = 0.2});
  model.layers[1].down_proj(0, 0) = std::numeric_limits<double>::infinity();
  ForwardOptions options;
  options.mode = ResidualMode::full;
  std::string reference_message, fast_message;
  try {
    forward(model, {1, 2}, options);
  } catch (const Error& e) {
    reference_message = e.what();
  }
  try {
    engine_forward(model, {1, 2}, options, {EngineKind::fast, Device::cpu, 2});
  } catch (const Error& e) {
    fast_message = e.what();
  }
  EXPECT_FALSE(reference_message.empty());
  EXPECT_EQ(fast_message, reference_message);
}

TEST(FastEngine, LongSequencesNeedNoTokenByTokenMatrix) {
  // T = 1500 with 64-token tiles: compared with the reference on the last rows.
  const ModelConfig config = config_of({"x", 1, 32, 2, 2, 32, 30});
  const auto model =
      random_model(config, {.seed = 2, .weight_std = 0.3, .query_std = 0.5}).cast<double>();
  const auto tokens = tokens_of(1500, 30, 9);
  ForwardOptions options;
  options.mode = ResidualMode::block;
  options.block_size = 1;
  options.record_mixing = false;
  expect_same(engine_forward(model, tokens, options, {EngineKind::fast, Device::cpu, 2}),
              forward(model, tokens, options), test::same_bound(test::kReorderedBound<double>),
              "T=1500");
}

}  // namespace test_engine
}  // namespace attnres
