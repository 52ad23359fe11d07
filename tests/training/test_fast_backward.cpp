// The fast CPU backward pass (engine/cpu/fast_backward.cpp) against the reference
// attnres::loss_and_gradients (docs/training.md, docs/engines.md): every tensor of the gradient,
// the loss and both Fig. 5 RMS curves, in every residual mode, at f64 and f32, with 1, 2 and 3
// threads; bit-identical reruns; workspace reuse across batches; errors and cancellation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>

#include "attnres/backward.hpp"
#include "attnres/cancel.hpp"
#include "attnres/error.hpp"
#include "attnres/gradient_engine.hpp"
#include "model_support.hpp"
#include "training/training_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_fast_backward {

// A grouped-query model (4 heads, 2 kv heads) whose gains and queries are off their initial
// values, so that every gradient path is exercised (as in test_backward.cpp).
ModelWeights<double> fast_test_model(std::uint64_t seed) {
  return test::model_with_random_gains(test::model_config(2, 16, 4, 2, 24, 13),
                                       {.seed = seed, .weight_std = 0.3, .query_std = 0.7},
                                       seed + 17);
}

// Sequences of different lengths: T = 2, a few short ones, and T = 70 (two 64-row attention tiles).
std::vector<std::vector<int>> test_batch(int vocab) {
  std::vector<std::vector<int>> batch;
  std::mt19937 engine(3);
  std::uniform_int_distribution<int> token(0, vocab - 1);
  for (int length : {9, 2, 70, 5, 33}) {
    std::vector<int> tokens(static_cast<std::size_t>(length));
    for (int& id : tokens) id = token(engine);
    batch.push_back(std::move(tokens));
  }
  return batch;
}

using test::ModeCase;
using test::options_for;

// Worst relative difference (docs/testing.md §2) over the tensors, loss and RMS curves: each
// tensor against max(its own largest |element|, the whole gradient's), the loss and each RMS
// against their own magnitude (an RMS is a root of a sum of squares: no cancellation; the gradient
// RMS of a batch is small, d loss / d v scales with 1 / predicted). Fails the test naming each
// quantity above `relative`.
template <typename Scalar>
double compare(const Gradients<Scalar>& fast, const Gradients<Scalar>& reference, double relative,
               const std::string& what) {
  double worst = 0.0;
  auto check = [&](const std::string& name, double error) {
    test::log_bound(what + ": " + name, error, relative);
    EXPECT_LE(error, relative) << what << ": " << name << " ("
                               << error / test::kUnitRoundoff<Scalar> << " u, bound "
                               << relative / test::kUnitRoundoff<Scalar> << " u)";
    worst = std::max(worst, error);
  };
  // |actual - expected| / |expected|; an exact 0 expected (none here) only matches itself.
  auto relative_to_own = [](double actual, double expected_value) {
    const double difference = std::abs(actual - expected_value);
    if (expected_value == 0.0)
      return difference == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
    return difference / std::abs(expected_value);
  };
  const double scale = test::gradient_scale(reference);
  std::map<std::string, std::pair<const Scalar*, std::int64_t>> expected;
  auto& reference_grad = const_cast<ModelWeights<Scalar>&>(reference.grad);
  auto& fast_grad = const_cast<ModelWeights<Scalar>&>(fast.grad);
  visit_tensors(reference_grad, [&](const TensorRef<Scalar>& t) {
    expected[t.name] = {t.data, t.element_count()};
  });
  std::size_t seen = 0;
  visit_tensors(fast_grad, [&](const TensorRef<Scalar>& t) {
    ++seen;
    const auto& [data, count] = expected.at(t.name);
    ASSERT_EQ(count, t.element_count()) << t.name;
    using Map = Eigen::Map<const Eigen::Matrix<Scalar, Eigen::Dynamic, 1>>;
    check(t.name, test::relative_difference(Map(t.data, count), Map(data, count), scale));
  });
  EXPECT_EQ(seen, expected.size());
  EXPECT_EQ(fast.predicted, reference.predicted);
  check("loss", relative_to_own(fast.loss, reference.loss));
  EXPECT_EQ(fast.sublayer_output_rms.size(), reference.sublayer_output_rms.size());
  EXPECT_EQ(fast.sublayer_output_grad_rms.size(), reference.sublayer_output_grad_rms.size());
  for (std::size_t r = 0;
       r < reference.sublayer_output_rms.size() && r < fast.sublayer_output_rms.size(); ++r) {
    const double a = reference.sublayer_output_rms[r], b = reference.sublayer_output_grad_rms[r];
    check("output rms " + std::to_string(r), relative_to_own(fast.sublayer_output_rms[r], a));
    check("grad rms " + std::to_string(r), relative_to_own(fast.sublayer_output_grad_rms[r], b));
  }
  return worst;
}

// Every tensor's bytes.
template <typename Scalar>
std::vector<std::vector<unsigned char>> bytes_of(Gradients<Scalar>& g) {
  std::vector<std::vector<unsigned char>> bytes;
  visit_tensors(g.grad, [&](const TensorRef<Scalar>& t) {
    const auto* begin = reinterpret_cast<const unsigned char*>(t.data);
    bytes.emplace_back(begin,
                       begin + t.element_count() * static_cast<std::int64_t>(sizeof(Scalar)));
  });
  return bytes;
}

class FastBackwardModes : public ::testing::TestWithParam<ModeCase> {};

TEST_P(FastBackwardModes, MatchesTheReferenceAtF64WithOneTwoAndThreeThreads) {
  const ModelWeights<double> model = fast_test_model(7);
  const auto batch = test_batch(model.config.vocab_size);
  const ForwardOptions options = options_for(GetParam());
  const Gradients<double> reference = loss_and_gradients(model, batch, options);
  for (int threads : {1, 2, 3}) {
    GradientEngine<double> engine(model.config, {.engine = EngineKind::fast, .threads = threads});
    Gradients<double> fast;
    engine.compute(model, batch, options, fast);
    const double worst = compare(fast, reference, test::kReorderedBound<double>,
                                 GetParam().name + " x" + std::to_string(threads));
    std::cout << "[ " << GetParam().name << " x" << threads << " ] worst f64 difference " << worst
              << "\n";
  }
}

TEST_P(FastBackwardModes, MatchesTheReferenceAtF32) {
  const ModelWeights<float> model = fast_test_model(11).cast<float>();
  const auto batch = test_batch(model.config.vocab_size);
  const ForwardOptions options = options_for(GetParam());
  const Gradients<float> reference = loss_and_gradients(model, batch, options);
  GradientEngine<float> engine(model.config, {.engine = EngineKind::fast, .threads = 2});
  Gradients<float> fast;
  engine.compute(model, batch, options, fast);
  const double worst =
      compare(fast, reference, test::kReorderedBound<float>, GetParam().name + " f32");
  std::cout << "[ " << GetParam().name << " ] worst f32 difference " << worst << "\n";
}

// bf16 products (docs/engines.md "Precision") against the f64 reference. The bound, from the
// arithmetic: every product rounds its two inputs to bf16 (relative error <= u16 = 2^-8 each), so
// to first order each rounded product on a gradient's path perturbs it by at most 2 u16 of its
// terms' magnitude, and the perturbations of a chain add. This model (2 layers) has 9 rounded
// products forward (q|k|v, o, gate|up and down per layer, and the LM head) and 2 per product
// backward (the input's and the weight's gradient): P = 27 on the longest path, so every tensor's
// relative (Frobenius) error is within 2 u16 P = 0.21, and the loss's within 2 u16 9 = 0.07
// (u16 = test::kBf16UnitRoundoff).
TEST_P(FastBackwardModes, Bf16WithinTheRoundingBoundOfTheF64Reference) {
  const ModelWeights<double> model = fast_test_model(7);
  const auto batch = test_batch(model.config.vocab_size);
  const ForwardOptions options = options_for(GetParam());
  const Gradients<double> reference = loss_and_gradients(model, batch, options);
  const ModelWeights<float> model32 = model.cast<float>();
  for (int threads : {1, 2, 3}) {
    GradientEngine<float> engine(model32.config, {.threads = threads, .bf16 = true});
    Gradients<float> bf16, again;
    engine.compute(model32, batch, options, bf16);
    engine.compute(model32, batch, options, again);
    EXPECT_EQ(bytes_of(bf16), bytes_of(again)) << "reruns at " << threads << " threads";
    std::map<std::string, Eigen::VectorXd> exact;
    visit_tensors(const_cast<ModelWeights<double>&>(reference.grad), [&](const auto& t) {
      exact[t.name] = Eigen::Map<const Eigen::VectorXd>(t.data, t.element_count());
    });
    double worst = 0.0;
    visit_tensors(bf16.grad, [&](const TensorRef<float>& t) {
      const Eigen::VectorXd got =
          Eigen::Map<const Eigen::VectorXf>(t.data, t.element_count()).cast<double>();
      const Eigen::VectorXd& want = exact.at(t.name);
      // 1e-300: a guard for the exactly zero gradients (the standard residual's depth tensors,
      // zero on both sides), not a tolerance.
      const double error = (got - want).norm() / std::max(want.norm(), 1e-300);
      EXPECT_LE(error, 2 * test::kBf16UnitRoundoff * 27) << GetParam().name << ": " << t.name;
      worst = std::max(worst, error);
    });
    EXPECT_LE(std::abs(bf16.loss - reference.loss),
              2 * test::kBf16UnitRoundoff * 9 * std::abs(reference.loss));
    // Must differ: f32 products alone leave ~1e-6 of relative error, bf16's ~u16 = 4e-3.
    EXPECT_GT(worst, 1e-4) << "bf16 gradients as exact as f32's: were the products rounded?";
    std::cout << "[ " << GetParam().name << " x" << threads << " ] worst bf16 relative error "
              << worst << ", loss " << bf16.loss << " vs " << reference.loss << "\n";
  }
}

INSTANTIATE_TEST_SUITE_P(EveryMode, FastBackwardModes, ::testing::ValuesIn(test::gradient_modes()),
                         [](const auto& info) { return info.param.name; });

// A batch that leaves half the pool idle (one sequence on 2 or 3 threads, two on 4) runs its
// sequences in turn with every matrix product split by rows over the pool: the same gradients as
// the reference, bit-identical on reruns, in f64, f32 and bf16.
TEST(FastBackward, SmallBatchesSplitTheProductsOverThePool) {
  const ModelWeights<double> model = fast_test_model(9);
  const auto all = test_batch(model.config.vocab_size);
  const std::vector<std::vector<int>> one = {all[2]}, two = {all[2], all[4]};  // T = 70 and 33
  for (const ModeCase& mode : test::gradient_modes()) {
    const ForwardOptions options = options_for(mode);
    for (const auto& [batch, threads] :
         {std::pair{&one, 2}, std::pair{&one, 3}, std::pair{&two, 4}}) {
      const Gradients<double> reference = loss_and_gradients(model, *batch, options);
      GradientEngine<double> engine(model.config, {.threads = threads});
      Gradients<double> split;
      engine.compute(model, *batch, options, split);
      compare(split, reference, test::kReorderedBound<double>,
              mode.name + " split x" + std::to_string(threads));
      const ModelWeights<float> model32 = model.cast<float>();
      for (bool bf16 : {false, true}) {
        GradientEngine<float> engine32(model32.config, {.threads = threads, .bf16 = bf16});
        Gradients<float> first, again;
        engine32.compute(model32, *batch, options, first);
        engine32.compute(model32, *batch, options, again);
        EXPECT_EQ(bytes_of(first), bytes_of(again)) << mode.name << " x" << threads;
        if (!bf16)
          compare(first, loss_and_gradients(model32, *batch, options), test::kReorderedBound<float>,
                  mode.name);
      }
    }
  }
}

TEST(FastBackward, RerunsAreBitIdenticalAndWorkspacesAreReusedCorrectly) {
  const ModelWeights<float> model = fast_test_model(5).cast<float>();
  const auto batch = test_batch(model.config.vocab_size);
  ForwardOptions options = options_for({"block_S3", ResidualMode::block, 3, false});
  for (int threads : {1, 2}) {
    GradientEngine<float> engine(model.config, {.engine = EngineKind::fast, .threads = threads});
    Gradients<float> first, second;
    engine.compute(model, batch, options, first);
    engine.compute(model, batch, options, second);
    EXPECT_EQ(std::memcmp(&first.loss, &second.loss, sizeof(double)), 0);
    EXPECT_TRUE(bytes_of(first) == bytes_of(second)) << "two calls, " << threads << " thread(s)";

    // A different batch (other lengths, other mode) in between, then the first again: the same
    // bytes as a fresh engine.
    const std::vector<std::vector<int>> other = {
        {1,  2,  3,  4, 5,  6,  7,  8, 9,  10, 11, 12, 0, 1,  2,  3,  4, 5,  6,  7,  8, 9,
         10, 11, 12, 0, 1,  2,  3,  4, 5,  6,  7,  8,  9, 10, 11, 12, 0, 1,  2,  3,  4, 5,
         6,  7,  8,  9, 10, 11, 12, 0, 1,  2,  3,  4,  5, 6,  7,  8,  9, 10, 11, 12, 0, 1,
         2,  3,  4,  5, 6,  7,  8,  9, 10, 11, 12, 0,  1, 2,  3,  4,  5, 6,  7,  8,  9, 10},
        {3, 4}};
    Gradients<float> scratch;
    engine.compute(model, other, options_for({"full", ResidualMode::full, 0, false}), scratch);
    Gradients<float> reused = scratch;  // buffers of the right shapes: reused in place
    engine.compute(model, batch, options, reused);
    GradientEngine<float> fresh_engine(model.config,
                                       {.engine = EngineKind::fast, .threads = threads});
    Gradients<float> fresh;
    fresh_engine.compute(model, batch, options, fresh);
    EXPECT_EQ(reused.loss, fresh.loss);
    EXPECT_TRUE(bytes_of(reused) == bytes_of(fresh))
        << "after another batch, " << threads << " thread(s)";
    EXPECT_EQ(reused.sublayer_output_grad_rms, fresh.sublayer_output_grad_rms);
  }
}

TEST(FastBackward, BadBatchesAreErrorsAndCancellationStops) {
  const ModelWeights<double> model = fast_test_model(1);
  GradientEngine<double> engine(model.config, {.engine = EngineKind::fast, .threads = 2});
  Gradients<double> g;
  EXPECT_THROW(engine.compute(model, {}, {}, g), Error);
  try {
    engine.compute(model, {{1, 2}, {3}}, {}, g);
    FAIL() << "a 1-token sequence must be refused";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("sequence 1 has 1 token(s)"), std::string::npos)
        << error.what();
  }
  EXPECT_THROW(engine.compute(model, {{1, 13}}, {}, g), Error);
  EXPECT_THROW(engine.compute(model, {{1, -1, 2}}, {}, g), Error);

  ForwardOptions options = options_for({"full", ResidualMode::full, 0, false});
  std::size_t calls = 0;
  options.progress = [&](std::size_t, std::size_t) { return ++calls < 5; };
  EXPECT_THROW(engine.compute(model, {{1, 2, 3}, {4, 5, 6}, {7, 8}}, options, g), Cancelled);
  EXPECT_GE(calls, 5u);

  // Progress covers every sequence and sublayer: (2L + 2) steps per sequence.
  std::size_t last_total = 0, count = 0;
  options.progress = [&](std::size_t, std::size_t total) {
    last_total = total;
    ++count;
    return true;
  };
  engine.compute(model, {{1, 2, 3}, {4, 5, 6}, {7, 8}}, options, g);
  EXPECT_EQ(count, 3u * (2 * 4 + 2));
  EXPECT_EQ(last_total, count);
  // The engine is still usable after a cancelled call.
  const Gradients<double> reference =
      loss_and_gradients(model, {{1, 2, 3}, {4, 5, 6}, {7, 8}}, options);
  EXPECT_LE(compare(g, reference, test::kReorderedBound<double>, "after cancel"),
            test::kReorderedBound<double>);
}

}  // namespace test_fast_backward
}  // namespace attnres
